#!/usr/bin/env bash
# sysbench oltp_point_select against MariaDB directly, through HAProxy (TCP mode) and through
# manifold, interleaved over several rounds, on a topology of its own. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=3          rounds; each round runs every target once, in the order of TARGETS
#   DURATION=20       seconds per run
#   THREADS=64        sysbench threads (client connections)
#   PROXY_THREADS=2   manifold --threads and HAProxy nbthread
#   TABLE_SIZE=100000 rows in the one sbtest table
#   PS_MODES="disable auto"  sysbench --db-ps-mode values; disable = text protocol (COM_QUERY),
#                     auto = server-side prepared statements (COM_STMT_EXECUTE)
#   TARGETS="direct haproxy manifold manifold-fixed"
#                     manifold: the defaults (each pool sized by its adaptive limit under
#                     pool.max_size 256 per worker, pipelining 8 deep); manifold-fixed:
#                     pool.adaptive = false and pipeline_depth = 0, the defaults before issue 17
#                     (a pool grows to one backend connection per busy client, up to 256 per
#                     worker); manifold-nopipe: the defaults with pipeline_depth = 0;
#                     manifold-small-pool: pool.max_size SMALL_POOL per worker, not adaptive,
#                     no pipelining, so 64 clients multiplex onto few backend connections
#   SMALL_POOL=8      pool.max_size per worker of manifold-small-pool
#   DB_CPUS=          CPUs (taskset list) for mariadbd alone, as if the database had a host of
#                     its own; the proxies and sysbench then share the others (CLIENT_CPUS,
#                     default: every CPU not in DB_CPUS). Empty: nothing is pinned.
#   PIPELINE_DEPTH=8  manifold-pipeline: the defaults with pool.pipeline_depth PIPELINE_DEPTH
#                     (statements of sessions waiting for a connection ride behind another
#                     session's); manifold-small-pipeline: manifold-small-pool's pool with it
#
# Only the targets named in TARGETS are started. Each run's summary row has the most backend
# connections the target held to the primary while it ran (sampled every second: the proxy's
# established connections to the primary's port, by `ss`; for direct, sysbench's).
#   manifold-untimed  (a target to add to TARGETS) manifold as the target "manifold", with
#                     stage histograms, digest statistics and the slow query log off: what
#                     recording them costs, side by side (TARGETS="manifold manifold-untimed")
#   manifold-alone    (a target to add to TARGETS) manifold as the target "manifold", outside
#                     any fleet (fleet.table = ""): what the fleet machinery costs on the
#                     request path (TARGETS="manifold manifold-alone": "manifold" is then in a
#                     fleet of two, the default)
#   WARMUP=5          seconds of unrecorded load on each target before the first round
#   OUT=bench/out/point_select-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release       manifold and manifold-testkit are copied from here
#                     to a temp dir at start, so a rebuild during the run does not matter
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20}
THREADS=${THREADS:-64}
PROXY_THREADS=${PROXY_THREADS:-2}
TABLE_SIZE=${TABLE_SIZE:-100000}
PS_MODES=${PS_MODES:-"disable auto"}
TARGETS=${TARGETS:-"direct haproxy manifold manifold-fixed"}
SMALL_POOL=${SMALL_POOL:-8}
PIPELINE_DEPTH=${PIPELINE_DEPTH:-8}
DB_CPUS=${DB_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
WARMUP=${WARMUP:-5}
OUT=${OUT:-$ROOT/bench/out/point_select-$(date -u +%Y%m%dT%H%M%SZ)}

need_tools "apt-get install -y sysbench haproxy mariadb-client python3 time iproute2" sysbench haproxy mysql python3 /usr/bin/time ss
need_binaries

# --- topology and proxies -------------------------------------------------------------------
bench_setup
start_topology
start_haproxy
wanted() { case " $TARGETS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# Each manifold target: its name, the variable prefix start_manifold sets, its [pool] lines.
small_pool="max_size = $SMALL_POOL
min_idle = $((SMALL_POOL < 4 ? SMALL_POOL : 4))
adaptive = false"
MANIFOLDS=(
    "manifold|MANIFOLD|"
    "manifold-fixed|FIXED|adaptive = false
pipeline_depth = 0"
    "manifold-nopipe|NOPIPE|pipeline_depth = 0"
    "manifold-small-pool|SMALL|$small_pool
pipeline_depth = 0"
    "manifold-pipeline|PIPE|pipeline_depth = $PIPELINE_DEPTH"
    "manifold-small-pipeline|SMALLPIPE|$small_pool
pipeline_depth = $PIPELINE_DEPTH"
    "manifold-untimed|UNTIMED|"
    "manifold-alone|ALONE|"
)
declare -A TARGET_VAR=()
MANIFOLD_PIDS=()
for m in "${MANIFOLDS[@]}"; do
    IFS='|' read -r name var pool <<<"${m%%$'\n'*}"
    pool=${m#*|*|}
    wanted "$name" || continue
    TARGET_VAR[$name]=$var
    {
        if [ -n "$pool" ]; then printf '[pool]\n%s\n\n' "$pool"; fi
        if [ "$name" = manifold-untimed ]; then
            printf '[admin]\nstage_histograms = false\nquery_digests = false\n\n[log]\nslow_query_threshold = "0s"\n'
        fi
        if [ "$name" = manifold-alone ]; then
            printf '[fleet]\ntable = ""\n'
        fi
    } >"$OUT/$name.toml"
    start_manifold "$var" "$name" "$OUT/$name.toml"
    pid_var=${var}_PID port_var=${var}_PORT
    MANIFOLD_PIDS+=("${!pid_var}")
    echo "$name pid ${!pid_var} on port ${!port_var}: $(tr '\n' ' ' <"$OUT/$name.toml")"
done
echo "haproxy pid $HAPROXY_PID on port $HAPROXY_PORT"

# Optional CPU split: the database on DB_CPUS, everything else on CLIENT_CPUS.
PIN_CLIENT=()
if [ -n "$DB_CPUS" ]; then
    command -v taskset >/dev/null || die "taskset not found (apt-get install -y util-linux)"
    if [ -z "$CLIENT_CPUS" ]; then
        CLIENT_CPUS=$(python3 -c 'import os, sys
db = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    db.update(range(int(a), int(b or a) + 1))
print(",".join(str(c) for c in sorted(os.sched_getaffinity(0) - db)))' "$DB_CPUS")
    fi
    [ -n "$CLIENT_CPUS" ] || die "DB_CPUS=$DB_CPUS leaves no CPU for the clients"
    taskset -apc "$DB_CPUS" "$MARIADB_PID" >/dev/null
    for p in "$HAPROXY_PID" "${MANIFOLD_PIDS[@]}"; do
        taskset -apc "$CLIENT_CPUS" "$p" >/dev/null
    done
    PIN_CLIENT=(taskset -c "$CLIENT_CPUS")
    echo "mariadbd on CPUs $DB_CPUS; proxies and sysbench on CPUs $CLIENT_CPUS"
fi

port_of() {
    case $1 in
    direct) echo "$PRIMARY_PORT" ;;
    haproxy) echo "$HAPROXY_PORT" ;;
    *)
        [ -n "${TARGET_VAR[$1]:-}" ] || die "unknown target $1"
        local v=${TARGET_VAR[$1]}_PORT
        echo "${!v}"
        ;;
    esac
}
pid_of() {
    case $1 in
    direct) echo "" ;;
    haproxy) echo "$HAPROXY_PID" ;;
    *)
        local v=${TARGET_VAR[$1]}_PID
        echo "${!v}"
        ;;
    esac
}
# Established connections to the primary's port held by PID (empty: by sysbench).
backend_conns() { # pid
    local who=${1:-}
    if [ -z "$who" ]; then who=$(pgrep -d'|' -x sysbench || true); fi
    [ -n "$who" ] || { echo 0; return; }
    ss -Htnp state established "( dport = :$PRIMARY_PORT )" 2>/dev/null | grep -Ec "pid=($who),"
}

# --- environment ----------------------------------------------------------------------------
{
    env_header
    echo "haproxy: $(haproxy -v | head -1)"
    echo "sysbench: $(sysbench --version)"
    manifold_build
    echo "load average at start: $(load_average)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION THREADS=$THREADS PROXY_THREADS=$PROXY_THREADS TABLE_SIZE=$TABLE_SIZE PS_MODES=\"$PS_MODES\" TARGETS=\"$TARGETS\" WARMUP=$WARMUP CLK_TCK=$CLK_TCK DB_CPUS=$DB_CPUS CLIENT_CPUS=$CLIENT_CPUS"
} | tee "$OUT/env.txt"

# --- data -----------------------------------------------------------------------------------
primary_sql -e 'CREATE DATABASE sbtest'
SB=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app
    --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE")
echo "preparing 1 table of $TABLE_SIZE rows"
sysbench "${SB[@]}" --mysql-port="$PRIMARY_PORT" prepare >"$OUT/prepare.log" 2>&1 || die "prepare failed: see $OUT/prepare.log"

# --- runs -----------------------------------------------------------------------------------
CSV="$OUT/raw.csv"
echo "ps_mode,round,target,queries,qps,p95_ms,p99_ms,p95_hist_ms,errors,reconnects,proxy_cpu_s,mariadb_cpu_s,sysbench_cpu_s,proxy_us_per_q,mariadb_us_per_q,sysbench_us_per_q,other_cpu_s,exit,backend_conns" >"$CSV"

run_one() { # ps_mode round target
    local mode=$1 round=$2 target=$3 port pid log status=0
    port=$(port_of "$target")
    pid=$(pid_of "$target")
    log="$OUT/$mode-r$round-$target.log"
    local cpu0 cpu1
    cpu0=$(cpu_sample "$pid")
    # The most backend connections while it runs, sampled every second.
    (
        most=0
        while sleep 1; do
            n=$(backend_conns "$pid")
            if [ "$n" -gt "$most" ]; then most=$n; echo "$most" >"$log.conns"; fi
        done
    ) &
    local sampler=$!
    /usr/bin/time -f '%U %S' -o "$log.time" \
        "${PIN_CLIENT[@]}" sysbench "${SB[@]}" --mysql-port="$port" --db-ps-mode="$mode" --threads="$THREADS" \
        --time="$DURATION" --percentile=95 --histogram=on run >"$log" 2>&1 || status=$?
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    cpu1=$(cpu_sample "$pid")
    # Queries, QPS, p95 and counters from sysbench's report; p99 (and p95 again, as a check of
    # the method) from its latency histogram: the first bucket where the cumulative count
    # reaches the percentile, which is how sysbench computes its own percentile.
    awk -v mode="$mode" -v round="$round" -v target="$target" -v status="$status" \
        -v cpu0="$cpu0" -v cpu1="$cpu1" -v hz="$CLK_TCK" -v proxy="$pid" \
        -v sbcpu="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" \
        -v conns="$(cat "$log.conns" 2>/dev/null || echo 0)" '
        /^ +[0-9.]+ \|/ { n++; v[n] = $1; c[n] = $NF; total += $NF }
        /^ *queries:/ { queries = $2; qps = $3; gsub(/\(/, "", qps) }
        /95th percentile:/ { p95 = $3 }
        /ignored errors:/ { errors = $3 }
        /reconnects:/ { reconnects = $2 }
        END {
            # CPU ticks over the run: the machine busy, mariadbd, the proxy (see cpu_sample)
            split(cpu0, ca); split(cpu1, cb); db = cb[1] - ca[1]; dm = cb[2] - ca[2]; dp = cb[3] - ca[3]
            for (i = 1; i <= n; i++) {
                cum += c[i]
                if (h95 == "" && cum >= 0.95 * total) h95 = v[i]
                if (h99 == "" && cum >= 0.99 * total) h99 = v[i]
            }
            # CPU used by anything else on the machine during the run: the noise indicator.
            other = db / hz - dm / hz - dp / hz - sbcpu
            pc = proxy == "" ? "" : dp / hz
            if (queries > 0) {
                pu = proxy == "" ? "" : sprintf("%.2f", dp / hz * 1e6 / queries)
                mu = sprintf("%.2f", dm / hz * 1e6 / queries)
                su = sprintf("%.2f", sbcpu * 1e6 / queries)
            } else {
                pu = mu = su = "" # a failed run has no per-query figures
            }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s,%.2f,%s,%s\n", mode, round, target,
                queries, qps, p95, h99, h95, errors, reconnects, pc, dm / hz, sbcpu, pu,
                mu, su, other, status, conns
        }' "$log" | tee -a "$CSV"
    if [ "$status" != 0 ] || grep -q FATAL "$log"; then
        echo "  !! sysbench failed against $target (exit $status): see $log" >&2
    fi
}

first_mode=${PS_MODES%% *}
for target in $TARGETS; do
    echo "warming up $target ($WARMUP s)"
    "${PIN_CLIENT[@]}" sysbench "${SB[@]}" --mysql-port="$(port_of "$target")" --db-ps-mode="$first_mode" --threads="$THREADS" \
        --time="$WARMUP" run >"$OUT/warmup-$target.log" 2>&1 || echo "  !! warm-up against $target failed" >&2
done

echo "${THREADS} threads, ${DURATION} s per run, ${ROUNDS} rounds; raw results in $CSV"
head -1 "$CSV"
for mode in $PS_MODES; do
    for round in $(seq 1 "$ROUNDS"); do
        for target in $TARGETS; do
            run_one "$mode" "$round" "$target"
        done
    done
done

note_load_at_end
for name in "${!TARGET_VAR[@]}"; do
    check_running "$name" "$(pid_of "$name")"
done
check_running haproxy "$HAPROXY_PID"

# --- summary --------------------------------------------------------------------------------
summarize "$CSV" <<'EOF' | tee "$OUT/summary.md"
import sys
from summary_lib import fmt, med, read_rows, rounds
rows = read_rows(sys.argv[1])
modes = list(dict.fromkeys(r["ps_mode"] for r in rows))
targets = list(dict.fromkeys(r["target"] for r in rows))
print("Medians across rounds (QPS, latency, CPU per query).\n")
print("| ps-mode | target | rounds | QPS | p95 ms | p99 ms | proxy CPU µs/q | mariadbd CPU µs/q | sysbench CPU µs/q | other CPU s | backend conns (most) | errors | reconnects |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
meds = {}
for m in modes:
    for t in targets:
        rs = [r for r in rows if r["ps_mode"] == m and r["target"] == t]
        if not rs:
            continue
        d = {k: med(rs, k) for k in ("qps", "p95_ms", "p99_ms", "proxy_us_per_q", "mariadb_us_per_q", "sysbench_us_per_q", "other_cpu_s")}
        conns = max(int(r.get("backend_conns") or 0) for r in rs)
        meds[m, t] = d
        errs = sum(int(r["errors"] or 0) for r in rs)
        recs = sum(int(r["reconnects"] or 0) for r in rs)
        print(f"| {m} | {t} | {rounds(rs)} | {fmt(d['qps'], 0)} | {fmt(d['p95_ms'], 2)} | "
              f"{fmt(d['p99_ms'], 2)} | {fmt(d['proxy_us_per_q'], 1)} | {fmt(d['mariadb_us_per_q'], 1)} | "
              f"{fmt(d['sysbench_us_per_q'], 1)} | {fmt(d['other_cpu_s'], 1)} | {conns} | {errs} | {recs} |")
print()
for m in modes:
    b, d = meds.get((m, "haproxy")), meds.get((m, "direct"))
    for t in [t for t in targets if t.startswith("manifold")]:
        a = meds.get((m, t))
        if not a or a["qps"] is None or a["proxy_us_per_q"] is None:
            continue
        if b and b["qps"] and b["proxy_us_per_q"]:
            print(f"- {m}: {t}/HAProxy QPS = {a['qps'] / b['qps']:.2f}, "
                  f"proxy CPU µs/query = {a['proxy_us_per_q'] / b['proxy_us_per_q']:.2f}")
        if a and d and d["qps"]:
            print(f"- {m}: {t}/direct QPS = {a['qps'] / d['qps']:.2f}")
    if b and d and d["qps"]:
        print(f"- {m}: HAProxy/direct QPS = {b['qps'] / d['qps']:.2f}")
EOF
echo "raw results: $OUT"
