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
#   TARGETS="direct haproxy manifold manifold-small-pool"
#                     manifold: default pool (max_size 256 per worker: the pool grows to one
#                     backend connection per busy client); manifold-small-pool: pool.max_size
#                     SMALL_POOL per worker, so 64 clients multiplex onto few backend connections
#   SMALL_POOL=8      pool.max_size per worker of manifold-small-pool
#   WARMUP=5          seconds of unrecorded load on each target before the first round
#   OUT=bench/out/point_select-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20}
THREADS=${THREADS:-64}
PROXY_THREADS=${PROXY_THREADS:-2}
TABLE_SIZE=${TABLE_SIZE:-100000}
PS_MODES=${PS_MODES:-"disable auto"}
TARGETS=${TARGETS:-"direct haproxy manifold manifold-small-pool"}
SMALL_POOL=${SMALL_POOL:-8}
WARMUP=${WARMUP:-5}
BIN=${MANIFOLD_BIN_DIR:-$ROOT/target/release}
OUT=${OUT:-$ROOT/bench/out/point_select-$(date -u +%Y%m%dT%H%M%SZ)}
CLK_TCK=$(getconf CLK_TCK)

die() { echo "point_select.sh: $*" >&2; exit 1; }
for tool in sysbench haproxy mysql python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install -y sysbench haproxy mariadb-client python3 time)"
done
for b in manifold manifold-testkit; do
    [ -x "$BIN/$b" ] || die "$BIN/$b missing: cargo build --release --workspace"
done

mkdir -p "$OUT"
TMP=$(mktemp -d)
TESTKIT_PID= HAPROXY_PID= MANIFOLD_PID= SMALL_PID=

cleanup() {
    set +e
    [ -n "$MANIFOLD_PID" ] && kill "$MANIFOLD_PID" 2>/dev/null && wait "$MANIFOLD_PID" 2>/dev/null
    [ -n "$SMALL_PID" ] && kill "$SMALL_PID" 2>/dev/null && wait "$SMALL_PID" 2>/dev/null
    [ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
    if [ -n "$TESTKIT_PID" ]; then
        exec 3>&- # closing the testkit's stdin tears the topology down
        wait "$TESTKIT_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() { # port pid what
    for _ in $(seq 1 300); do
        kill -0 "$2" 2>/dev/null || die "$3 exited early"
        (exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "$3 did not listen on port $1"
}

# utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat; the text
# after the ") " closing the command name starts at field 3).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# Busy ticks of the whole machine (user nice system irq softirq steal of /proc/stat's cpu line).
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

# --- topology -------------------------------------------------------------------------------
mkfifo "$TMP/testkit.in"
"$BIN/manifold-testkit" up --replicas 0 --user app:app <"$TMP/testkit.in" >"$TMP/topology.txt" 2>"$OUT/testkit.log" &
TESTKIT_PID=$!
exec 3>"$TMP/testkit.in"
for _ in $(seq 1 600); do
    grep -q 'pids=' "$TMP/topology.txt" 2>/dev/null && break
    kill -0 "$TESTKIT_PID" 2>/dev/null || die "manifold-testkit exited: $(cat "$OUT/testkit.log")"
    sleep 0.1
done
TOPOLOGY=$(head -1 "$TMP/topology.txt")
field() { tr ' ' '\n' <<<"$TOPOLOGY" | sed -n "s/^$1=//p"; }
PRIMARY=$(field primary)
PRIMARY_PORT=${PRIMARY##*:}
MARIADB_PID=$(field pids | cut -d, -f1)
[ -n "$PRIMARY_PORT" ] && [ -d "/proc/$MARIADB_PID" ] || die "unexpected topology line: $TOPOLOGY"
echo "topology: primary $PRIMARY, mariadbd pid $MARIADB_PID"

# --- proxies --------------------------------------------------------------------------------
HAPROXY_PORT=$(free_port)
cat >"$TMP/haproxy.cfg" <<EOF
global
    nbthread $PROXY_THREADS
    maxconn 4096

defaults
    mode tcp
    maxconn 4096
    timeout connect 5s
    timeout client 1h
    timeout server 1h

listen mysql
    bind 127.0.0.1:$HAPROXY_PORT
    server primary $PRIMARY maxconn 4096
EOF
cp "$TMP/haproxy.cfg" "$OUT/haproxy.cfg"
haproxy -c -q -f "$TMP/haproxy.cfg" || die "invalid HAProxy configuration"
haproxy -db -f "$TMP/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
HAPROXY_PID=$!
wait_port "$HAPROXY_PORT" "$HAPROXY_PID" haproxy

MANIFOLD_PORT=$(free_port)
"$BIN/manifold" --primary "$PRIMARY" --user app:app --listen "127.0.0.1:$MANIFOLD_PORT" \
    --threads "$PROXY_THREADS" --log-level warn >"$OUT/manifold.log" 2>&1 &
MANIFOLD_PID=$!
wait_port "$MANIFOLD_PORT" "$MANIFOLD_PID" manifold

SMALL_PORT=$(free_port)
printf '[pool]\nmax_size = %s\nmin_idle = %s\n' "$SMALL_POOL" "$((SMALL_POOL < 4 ? SMALL_POOL : 4))" >"$OUT/manifold-small-pool.toml"
"$BIN/manifold" --config "$OUT/manifold-small-pool.toml" --primary "$PRIMARY" --user app:app \
    --listen "127.0.0.1:$SMALL_PORT" --threads "$PROXY_THREADS" --log-level warn >"$OUT/manifold-small-pool.log" 2>&1 &
SMALL_PID=$!
wait_port "$SMALL_PORT" "$SMALL_PID" manifold-small-pool
echo "haproxy pid $HAPROXY_PID on port $HAPROXY_PORT, manifold pid $MANIFOLD_PID on port $MANIFOLD_PORT, manifold-small-pool pid $SMALL_PID on port $SMALL_PORT"

port_of() { case $1 in direct) echo "$PRIMARY_PORT" ;; haproxy) echo "$HAPROXY_PORT" ;; manifold) echo "$MANIFOLD_PORT" ;; manifold-small-pool) echo "$SMALL_PORT" ;; *) die "unknown target $1" ;; esac; }
pid_of() { case $1 in direct) echo "" ;; haproxy) echo "$HAPROXY_PID" ;; manifold) echo "$MANIFOLD_PID" ;; manifold-small-pool) echo "$SMALL_PID" ;; esac; }

# --- environment ----------------------------------------------------------------------------
{
    echo "date: $(date -u +%FT%TZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "memory: $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "mariadb: $(mysql -h127.0.0.1 -P"$PRIMARY_PORT" -uapp -papp -N -e 'SELECT VERSION()')"
    echo "haproxy: $(haproxy -v | head -1)"
    echo "sysbench: $(sysbench --version)"
    echo "manifold: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (+ uncommitted changes in crates/)')"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION THREADS=$THREADS PROXY_THREADS=$PROXY_THREADS TABLE_SIZE=$TABLE_SIZE PS_MODES=\"$PS_MODES\" TARGETS=\"$TARGETS\" WARMUP=$WARMUP CLK_TCK=$CLK_TCK"
} | tee "$OUT/env.txt"

# --- data -----------------------------------------------------------------------------------
mysql -h127.0.0.1 -P"$PRIMARY_PORT" -uapp -papp -e 'CREATE DATABASE sbtest'
SB=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app
    --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE")
echo "preparing 1 table of $TABLE_SIZE rows"
sysbench "${SB[@]}" --mysql-port="$PRIMARY_PORT" prepare >"$OUT/prepare.log" 2>&1 || die "prepare failed: see $OUT/prepare.log"

# --- runs -----------------------------------------------------------------------------------
CSV="$OUT/raw.csv"
echo "ps_mode,round,target,queries,qps,p95_ms,p99_ms,p95_hist_ms,errors,reconnects,proxy_cpu_s,mariadb_cpu_s,sysbench_cpu_s,proxy_us_per_q,mariadb_us_per_q,sysbench_us_per_q,other_cpu_s,exit" >"$CSV"

run_one() { # ps_mode round target
    local mode=$1 round=$2 target=$3 port pid log status=0
    port=$(port_of "$target")
    pid=$(pid_of "$target")
    log="$OUT/$mode-r$round-$target.log"
    local m0 p0=0 m1 p1=0 b0 b1
    b0=$(busy_ticks)
    m0=$(cpu_ticks "$MARIADB_PID")
    [ -n "$pid" ] && p0=$(cpu_ticks "$pid")
    /usr/bin/time -f '%U %S' -o "$log.time" \
        sysbench "${SB[@]}" --mysql-port="$port" --db-ps-mode="$mode" --threads="$THREADS" \
        --time="$DURATION" --percentile=95 --histogram=on run >"$log" 2>&1 || status=$?
    m1=$(cpu_ticks "$MARIADB_PID")
    [ -n "$pid" ] && p1=$(cpu_ticks "$pid")
    b1=$(busy_ticks)
    # Queries, QPS, p95 and counters from sysbench's report; p99 (and p95 again, as a check of
    # the method) from its latency histogram: the first bucket where the cumulative count
    # reaches the percentile, which is how sysbench computes its own percentile.
    awk -v mode="$mode" -v round="$round" -v target="$target" -v status="$status" \
        -v dm="$((m1 - m0))" -v dp="$((p1 - p0))" -v db="$((b1 - b0))" -v hz="$CLK_TCK" -v proxy="$pid" \
        -v sbcpu="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" '
        /^ +[0-9.]+ \|/ { n++; v[n] = $1; c[n] = $NF; total += $NF }
        /^ *queries:/ { queries = $2; qps = $3; gsub(/\(/, "", qps) }
        /95th percentile:/ { p95 = $3 }
        /ignored errors:/ { errors = $3 }
        /reconnects:/ { reconnects = $2 }
        END {
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
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s,%.2f,%s\n", mode, round, target,
                queries, qps, p95, h99, h95, errors, reconnects, pc, dm / hz, sbcpu, pu,
                mu, su, other, status
        }' "$log" | tee -a "$CSV"
    if [ "$status" != 0 ] || grep -q FATAL "$log"; then
        echo "  !! sysbench failed against $target (exit $status): see $log" >&2
    fi
}

first_mode=${PS_MODES%% *}
for target in $TARGETS; do
    echo "warming up $target ($WARMUP s)"
    sysbench "${SB[@]}" --mysql-port="$(port_of "$target")" --db-ps-mode="$first_mode" --threads="$THREADS" \
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

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
kill -0 "$MANIFOLD_PID" 2>/dev/null || echo "  !! manifold is no longer running: see $OUT/manifold.log" >&2
kill -0 "$SMALL_PID" 2>/dev/null || echo "  !! manifold-small-pool is no longer running: see $OUT/manifold-small-pool.log" >&2
kill -0 "$HAPROXY_PID" 2>/dev/null || echo "  !! haproxy is no longer running: see $OUT/haproxy.log" >&2

# --- summary --------------------------------------------------------------------------------
python3 - "$CSV" <<'EOF' | tee "$OUT/summary.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(rs, key):
    vals = [float(r[key]) for r in rs if r[key] not in ("", None)]
    return statistics.median(vals) if vals else None
def fmt(v, nd):
    return "–" if v is None else f"{v:,.{nd}f}"
modes = list(dict.fromkeys(r["ps_mode"] for r in rows))
targets = list(dict.fromkeys(r["target"] for r in rows))
print("Medians across rounds (QPS, latency, CPU per query).\n")
print("| ps-mode | target | rounds | QPS | p95 ms | p99 ms | proxy CPU µs/q | mariadbd CPU µs/q | sysbench CPU µs/q | other CPU s | errors | reconnects |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
meds = {}
for m in modes:
    for t in targets:
        rs = [r for r in rows if r["ps_mode"] == m and r["target"] == t]
        if not rs:
            continue
        d = {k: med(rs, k) for k in ("qps", "p95_ms", "p99_ms", "proxy_us_per_q", "mariadb_us_per_q", "sysbench_us_per_q", "other_cpu_s")}
        meds[m, t] = d
        errs = sum(int(r["errors"] or 0) for r in rs)
        recs = sum(int(r["reconnects"] or 0) for r in rs)
        bad = sum(1 for r in rs if r["exit"] != "0")
        print(f"| {m} | {t} | {len(rs)}{' (' + str(bad) + ' failed)' if bad else ''} | {fmt(d['qps'], 0)} | {fmt(d['p95_ms'], 2)} | "
              f"{fmt(d['p99_ms'], 2)} | {fmt(d['proxy_us_per_q'], 1)} | {fmt(d['mariadb_us_per_q'], 1)} | "
              f"{fmt(d['sysbench_us_per_q'], 1)} | {fmt(d['other_cpu_s'], 1)} | {errs} | {recs} |")
print()
for m in modes:
    b, d = meds.get((m, "haproxy")), meds.get((m, "direct"))
    for t in ("manifold", "manifold-small-pool"):
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
