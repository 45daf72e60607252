#!/usr/bin/env bash
# Read scaling over replicas: sysbench oltp_point_select through manifold with 1, 2 and 3 nodes
# serving reads (the primary alone; + one replica; + two), and directly against the primary.
# Each mariadbd runs in a cgroup (v1 cpu controller) of its own with the same CPU quota, so the
# backends, not this machine, are the bottleneck, as they are in a fleet. Rounds interleave the
# targets; medians are reported. Needs root (cgroups).
#
#   QUOTA_PCT=20      CPU quota of each mariadbd, % of one CPU
#   THREADS=32        sysbench threads
#   DURATION=15       seconds per run
#   ROUNDS=3          runs per target
#   PROXY_THREADS=1   manifold workers
#   TABLE_SIZE=10000  rows
#   OUT=bench/out/read_scaling-<UTC time>
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QUOTA_PCT=${QUOTA_PCT:-20} THREADS=${THREADS:-32} DURATION=${DURATION:-15} ROUNDS=${ROUNDS:-3}
PROXY_THREADS=${PROXY_THREADS:-1} TABLE_SIZE=${TABLE_SIZE:-10000}
OUT=${OUT:-bench/out/read_scaling-$(date -u +%Y%m%dT%H%M%SZ)}
CGROUP=/sys/fs/cgroup/cpu
# shellcheck source=bench/lib.sh
source bench/lib.sh
need_tools "apt-get install -y sysbench mariadb-client python3" sysbench mysql python3
need_binaries
[ -w "$CGROUP" ] || die "$CGROUP not writable: needs root and the cgroup v1 cpu controller"
GROUPS_MADE=()
before_cleanup() {
    local g pid
    for g in "${GROUPS_MADE[@]}"; do
        while read -r pid; do echo "$pid" >"$CGROUP/cgroup.procs" 2>/dev/null || true; done <"$g/cgroup.procs"
        rmdir "$g" 2>/dev/null || true
    done
}
bench_setup
TOPOLOGY_REPLICAS=2 start_topology
IFS=, read -r R1 R2 <<<"$REPLICAS"

i=0
for pid in $MARIADB_PIDS; do
    g=$CGROUP/manifold-bench-$$-$i
    mkdir "$g"
    GROUPS_MADE+=("$g")
    echo 100000 >"$g/cpu.cfs_period_us"
    echo $((QUOTA_PCT * 1000)) >"$g/cpu.cfs_quota_us"
    echo "$pid" >"$g/cgroup.procs"
    i=$((i + 1))
done

{
    env_header
    manifold_build
    echo "load average at start: $(load_average)"
    echo "settings: QUOTA_PCT=$QUOTA_PCT THREADS=$THREADS DURATION=$DURATION ROUNDS=$ROUNDS PROXY_THREADS=$PROXY_THREADS TABLE_SIZE=$TABLE_SIZE"
    echo "nodes: primary $PRIMARY, replicas $R1 $R2; mariadbd pids $MARIADB_PIDS, each in a cpu cgroup with quota $QUOTA_PCT% of a CPU"
} | tee "$OUT/env.txt"

primary_sql -e 'CREATE DATABASE sbtest'
SB=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app
    --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE" --db-ps-mode=disable)
sysbench "${SB[@]}" --mysql-port="$PRIMARY_PORT" prepare >"$OUT/prepare.log" 2>&1 || die "prepare failed: see $OUT/prepare.log"
# The replicas have the table before reads go to them.
target=$(primary_sql -N -e 'SELECT @@gtid_binlog_pos')
for r in $R1 $R2; do
    mysql -h127.0.0.1 -P"${r##*:}" -uapp -papp -N -e "SELECT MASTER_GTID_WAIT('$target', 60)" >/dev/null
done

# One manifold per node count; the table is read everywhere, so reads may go anywhere.
for n in 1 2 3; do
    cfg=$TMP/nodes$n.toml
    {
        echo "[backend]"
        case $n in
            1) echo 'replicas = []' ;;
            2) echo "replicas = [\"$R1\"]" ;;
            3) echo "replicas = [\"$R1\", \"$R2\"]" ;;
        esac
    } >"$cfg"
    cp "$cfg" "$OUT/nodes$n.toml"
    start_manifold "M$n" "manifold-nodes$n" "$cfg"
done
port_of() { case $1 in direct) echo "$PRIMARY_PORT" ;; *) local v="M${1#nodes}_PORT"; echo "${!v}" ;; esac; }
pid_of() { case $1 in direct) echo "" ;; *) local v="M${1#nodes}_PID"; echo "${!v}" ;; esac; }

mariadb_ticks() { local t=0 pid; for pid in $MARIADB_PIDS; do t=$((t + $(cpu_ticks "$pid"))); done; echo $t; }

CSV=$OUT/raw.csv
echo "round,target,queries,qps,errors,proxy_cpu_s,proxy_us_per_q,mariadb_cpu_s" >"$CSV"
for target in direct nodes1 nodes2 nodes3; do # warm-up
    sysbench "${SB[@]}" --mysql-port="$(port_of $target)" --threads="$THREADS" --time=3 run >/dev/null 2>&1 || true
done
for round in $(seq 1 "$ROUNDS"); do
    for target in direct nodes1 nodes2 nodes3; do
        pid=$(pid_of $target)
        p0=0; [ -z "$pid" ] || p0=$(cpu_ticks "$pid")
        m0=$(mariadb_ticks)
        log=$OUT/run-$target-$round.log
        sysbench "${SB[@]}" --mysql-port="$(port_of $target)" --threads="$THREADS" --time="$DURATION" \
            --report-interval=0 run >"$log" 2>&1 || echo "  !! sysbench failed against $target: see $log" >&2
        p1=0; [ -z "$pid" ] || p1=$(cpu_ticks "$pid")
        m1=$(mariadb_ticks)
        queries=$(sed -n 's/^ *queries: *\([0-9]*\).*/\1/p' "$log")
        qps=$(sed -n 's/^ *queries: .*(\([0-9.]*\) per sec.*/\1/p' "$log")
        errors=$(sed -n 's/^ *ignored errors: *\([0-9]*\).*/\1/p' "$log")
        python3 - "$round" "$target" "${queries:-0}" "${qps:-0}" "${errors:-0}" $((p1 - p0)) $((m1 - m0)) "$CLK_TCK" >>"$CSV" <<'PY'
import sys
rnd, target, q, qps, err, pt, mt, tck = sys.argv[1:]
q, pt, mt, tck = int(q), int(pt), int(mt), int(tck)
ps = pt / tck
print(f"{rnd},{target},{q},{qps},{err},{ps:.2f},{(ps * 1e6 / q) if q and pt else 0:.1f},{mt / tck:.2f}")
PY
        echo "round $round $target: $qps qps"
    done
done
note_load_at_end
for n in 1 2 3; do v="M${n}_PID"; check_running "manifold-nodes$n" "${!v}"; check_quiet_log "manifold-nodes$n"; done

summarize "$CSV" <<'PY' | tee "$OUT/summary.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = lambda t, k: statistics.median(float(r[k]) for r in rows if r["target"] == t)
base = med("nodes1", "qps")
print("| target | nodes serving reads | QPS (median) | vs 1 node | manifold CPU µs/query | errors |")
print("|---|---:|---:|---:|---:|---:|")
for t, n in (("direct", "1 (no proxy)"), ("nodes1", "1"), ("nodes2", "2"), ("nodes3", "3")):
    errs = sum(int(r["errors"]) for r in rows if r["target"] == t)
    cpu = "–" if t == "direct" else f"{med(t, 'proxy_us_per_q'):.1f}"
    print(f"| {t} | {n} | {med(t, 'qps'):,.0f} | {med(t, 'qps') / base:.2f} | {cpu} | {errs} |")
PY
