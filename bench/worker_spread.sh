#!/usr/bin/env bash
# How evenly manifold's workers share a sysbench oltp_point_select load, round by round: per
# round and target the QPS, manifold's CPU per query, the client sessions each worker serves
# and each worker thread's CPU. Targets alternate within each round, on one topology of their
# own. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=5          rounds; each round runs every target once, in the order of TARGETS
#   DURATION=15       seconds per run
#   THREADS=64        sysbench threads (client connections, opened anew each run)
#   PROXY_THREADS=2   manifold --threads
#   TABLE_SIZE=100000 rows in the one sbtest table
#   PS_MODE=disable   sysbench --db-ps-mode (disable = text protocol)
#   TARGETS="manifold-unbalanced manifold"
#                     manifold: the binary as built (connections balanced over workers);
#                     manifold-unbalanced: the same binary with engine.balance_connections =
#                     false (each worker keeps what the kernel's SO_REUSEPORT hash gives it);
#                     manifold-base: the binary in BASE_BIN_DIR (e.g. an older commit's build);
#                     manifold-pinned: the binary as built with engine.pin_threads = true
#   BASE_BIN_DIR=     where manifold-base's binary is (required for that target)
#   WARMUP=5          seconds of unrecorded load on each target before the first round
#   OUT=bench/out/worker_spread-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release       manifold and manifold-testkit are copied from here
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-15}
THREADS=${THREADS:-64}
PROXY_THREADS=${PROXY_THREADS:-2}
TABLE_SIZE=${TABLE_SIZE:-100000}
PS_MODE=${PS_MODE:-disable}
TARGETS=${TARGETS:-"manifold-unbalanced manifold"}
BASE_BIN_DIR=${BASE_BIN_DIR:-}
WARMUP=${WARMUP:-5}
OUT=${OUT:-$ROOT/bench/out/worker_spread-$(date -u +%Y%m%dT%H%M%SZ)}

need_tools "apt-get install -y sysbench mariadb-client python3 time" sysbench mysql python3 /usr/bin/time
need_binaries

bench_setup
start_topology

# Target name -> shell variable prefix (VAR_PORT, VAR_ADMIN_PORT, VAR_PID).
var_of() { case $1 in manifold) echo M ;; manifold-unbalanced) echo U ;; manifold-base) echo B ;; manifold-pinned) echo P ;; *) die "unknown target $1" ;; esac; }
for target in $TARGETS; do
    case $target in
    manifold) start_manifold M manifold ;;
    manifold-unbalanced)
        printf '[engine]\nbalance_connections = false\n' >"$OUT/manifold-unbalanced.toml"
        start_manifold U manifold-unbalanced "$OUT/manifold-unbalanced.toml"
        ;;
    manifold-pinned)
        printf '[engine]\npin_threads = true\n' >"$OUT/manifold-pinned.toml"
        start_manifold P manifold-pinned "$OUT/manifold-pinned.toml"
        ;;
    manifold-base)
        [ -x "$BASE_BIN_DIR/manifold" ] || die "manifold-base needs BASE_BIN_DIR with a manifold binary"
        cp "$BASE_BIN_DIR/manifold" "$BIN/manifold-base"
        start_manifold B manifold-base "" "$BIN/manifold-base"
        ;;
    *) die "unknown target $target" ;;
    esac
done
port_of() { local v; v=$(var_of "$1"); eval "echo \$${v}_PORT"; }
admin_of() { local v; v=$(var_of "$1"); eval "echo \$${v}_ADMIN_PORT"; }
pid_of() { local v; v=$(var_of "$1"); eval "echo \$${v}_PID"; }

{
    env_header
    echo "sysbench: $(sysbench --version)"
    manifold_build
    if [ -n "$BASE_BIN_DIR" ]; then echo "manifold-base: $BASE_BIN_DIR/manifold of $(date -u -r "$BASE_BIN_DIR/manifold" +%FT%TZ), sha256 $(sha256sum "$BIN/manifold-base" | cut -c1-12)"; fi
    echo "load average at start: $(load_average)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION THREADS=$THREADS PROXY_THREADS=$PROXY_THREADS TABLE_SIZE=$TABLE_SIZE PS_MODE=$PS_MODE TARGETS=\"$TARGETS\" WARMUP=$WARMUP CLK_TCK=$CLK_TCK"
} | tee "$OUT/env.txt"

primary_sql -e 'CREATE DATABASE sbtest'
SB=(oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app
    --mysql-db=sbtest --tables=1 --table-size="$TABLE_SIZE" --db-ps-mode="$PS_MODE")
echo "preparing 1 table of $TABLE_SIZE rows"
sysbench "${SB[@]}" --mysql-port="$PRIMARY_PORT" prepare >"$OUT/prepare.log" 2>&1 || die "prepare failed: see $OUT/prepare.log"

# "t0/t1/...": CPU ticks of each worker thread (threads named mf-worker-N) of process PID.
worker_ticks() { # pid
    local task n out=()
    for task in /proc/"$1"/task/*; do
        n=$(cat "$task/comm" 2>/dev/null) || continue
        case $n in mf-worker-*) out[${n#mf-worker-}]=$(sed 's/^.*) //' "$task/stat" | awk '{print $12 + $13}') ;; esac
    done
    local IFS=/
    echo "${out[*]}"
}

# "v0/v1/...": voluntary context switches (sleeps) of each worker thread of process PID so far.
worker_sleeps() { # pid
    local task n out=()
    for task in /proc/"$1"/task/*; do
        n=$(cat "$task/comm" 2>/dev/null) || continue
        case $n in mf-worker-*) out[${n#mf-worker-}]=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$task/status") ;; esac
    done
    local IFS=/
    echo "${out[*]}"
}

# "s0/s1/...": client sessions per worker, from the admin port's SHOW SESSIONS. A session id is
# handed out by its worker: worker w of n gives w + 1, w + 1 + n, ... (frontend-mysql).
sessions_per_worker() { # admin-port
    mysql -h127.0.0.1 -P"$1" -uadmin -padmin --skip-ssl -N -e 'SHOW SESSIONS' 2>/dev/null |
        awk -v n="$PROXY_THREADS" '{ c[($1 - 1) % n]++ } END { for (w = 0; w < n; w++) printf "%s%d", (w ? "/" : ""), c[w] + 0; print "" }'
}

# "b0/b1/...": backend connections (in use + idle) in each worker's pools, from SHOW POOLS
# (columns worker, cluster, node, in_use, idle, ...).
backends_per_worker() { # admin-port
    mysql -h127.0.0.1 -P"$1" -uadmin -padmin --skip-ssl -N -e 'SHOW POOLS' 2>/dev/null |
        awk -v n="$PROXY_THREADS" '{ c[$1] += $4 + $5 } END { for (w = 0; w < n; w++) printf "%s%d", (w ? "/" : ""), c[w] + 0; print "" }'
}

CSV="$OUT/raw.csv"
echo "round,target,queries,qps,p95_ms,client_cv,proxy_cpu_s,proxy_us_per_q,sessions,backends,worker_cpu_s,worker_sleeps,other_cpu_s,exit" >"$CSV"

run_one() { # round target
    local round=$1 target=$2 port pid admin log status=0 cpu0 cpu1 w0 w1 v0 v1 sessions
    port=$(port_of "$target") pid=$(pid_of "$target") admin=$(admin_of "$target")
    log="$OUT/r$round-$target.log"
    cpu0=$(cpu_sample "$pid") w0=$(worker_ticks "$pid") v0=$(worker_sleeps "$pid")
    # Sessions per worker, read once every client is connected (sysbench connects all threads
    # before its first query; two seconds in they are all there).
    (sleep 2 && sessions_per_worker "$admin" >"$log.sessions" && backends_per_worker "$admin" >"$log.backends") &
    local sampler=$!
    /usr/bin/time -f '%U %S' -o "$log.time" \
        sysbench "${SB[@]}" --mysql-port="$port" --threads="$THREADS" --time="$DURATION" \
        --percentile=95 run >"$log" 2>&1 || status=$?
    cpu1=$(cpu_sample "$pid") w1=$(worker_ticks "$pid") v1=$(worker_sleeps "$pid")
    wait "$sampler" || true
    sessions=$(cat "$log.sessions" 2>/dev/null || true) backends=$(cat "$log.backends" 2>/dev/null || true)
    awk -v round="$round" -v target="$target" -v status="$status" -v cpu0="$cpu0" -v cpu1="$cpu1" \
        -v w0="$w0" -v w1="$w1" -v v0="$v0" -v v1="$v1" -v sessions="$sessions" -v backends="$backends" -v hz="$CLK_TCK" \
        -v sbcpu="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" '
        /^ *queries:/ { queries = $2; qps = $3; gsub(/\(/, "", qps) }
        /95th percentile:/ { p95 = $3 }
        # "events (avg/stddev): 4588.5156/1633.49": queries per client thread. Clients of a
        # worker with more sessions than another get fewer each.
        /events \(avg\/stddev\):/ { split($3, ev, "/"); if (ev[1] > 0) cv = sprintf("%.3f", ev[2] / ev[1]) }
        END {
            split(cpu0, ca); split(cpu1, cb); db = cb[1] - ca[1]; dm = cb[2] - ca[2]; dp = cb[3] - ca[3]
            n = split(w0, a, "/"); split(w1, b, "/"); wc = ""
            for (i = 1; i <= n; i++) wc = wc (i > 1 ? "/" : "") sprintf("%.2f", (b[i] - a[i]) / hz)
            n = split(v0, a, "/"); split(v1, b, "/"); vs = ""
            for (i = 1; i <= n; i++) vs = vs (i > 1 ? "/" : "") (b[i] - a[i])
            other = db / hz - dm / hz - dp / hz - sbcpu
            pu = queries > 0 ? sprintf("%.2f", dp / hz * 1e6 / queries) : ""
            printf "%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s,%s,%.2f,%s\n", round, target, queries, qps, p95, cv,
                dp / hz, pu, sessions, backends, wc, vs, other, status
        }' "$log" | tee -a "$CSV"
    if [ "$status" != 0 ] || grep -q FATAL "$log"; then
        echo "  !! sysbench failed against $target (exit $status): see $log" >&2
    fi
}

for target in $TARGETS; do
    echo "warming up $target ($WARMUP s)"
    sysbench "${SB[@]}" --mysql-port="$(port_of "$target")" --threads="$THREADS" --time="$WARMUP" run \
        >"$OUT/warmup-$target.log" 2>&1 || echo "  !! warm-up against $target failed" >&2
done

echo "${THREADS} threads, ${DURATION} s per run, ${ROUNDS} rounds; raw results in $CSV"
head -1 "$CSV"
for round in $(seq 1 "$ROUNDS"); do
    for target in $TARGETS; do
        run_one "$round" "$target"
    done
done

note_load_at_end
for target in $TARGETS; do check_running "$target" "$(pid_of "$target")"; done

summarize "$CSV" <<'EOF' | tee "$OUT/summary.md"
import statistics
import sys
from summary_lib import fmt, read_rows
rows = read_rows(sys.argv[1])
targets = list(dict.fromkeys(r["target"] for r in rows))
rounds = sorted({int(r["round"]) for r in rows})
by = {(int(r["round"]), r["target"]): r for r in rows}

def num(r, k):
    return float(r[k]) if r and r[k] not in ("", None) else None

print("Per round: QPS, manifold CPU µs per query, client sessions per worker, and the clients'")
print("spread (coefficient of variation of the queries each sysbench thread completed).\n")
print("| round | " + " | ".join(f"{t} QPS | µs/q | sessions | client CV" for t in targets) + " |")
print("|---:|" + "---:|---:|---:|---:|" * len(targets))
for n in rounds:
    cells = []
    for t in targets:
        r = by.get((n, t))
        cv = num(r, "client_cv")
        cells += [fmt(num(r, "qps"), 0), fmt(num(r, "proxy_us_per_q"), 1), (r or {}).get("sessions", "") or "–",
                  "–" if cv is None else f"{cv:.1%}"]
    print(f"| {n} | " + " | ".join(cells) + " |")
print()
print("Spread across rounds (CV = standard deviation / mean).\n")
print("| target | QPS min | median | max | CV | µs/q min | median | max | CV | widest session split | client CV median | max |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for t in targets:
    q = [num(by[n, t], "qps") for n in rounds if (n, t) in by and num(by[n, t], "qps")]
    u = [num(by[n, t], "proxy_us_per_q") for n in rounds if (n, t) in by and num(by[n, t], "proxy_us_per_q")]
    cv = lambda v: f"{statistics.pstdev(v) / statistics.mean(v):.1%}" if len(v) > 1 else "–"
    spans = []
    for n in rounds:
        s = (by.get((n, t)) or {}).get("sessions", "")
        if s:
            c = [int(x) for x in s.split("/")]
            spans.append((max(c) - min(c), s))
    widest = max(spans)[1] if spans else "–"
    c = [num(by[n, t], "client_cv") for n in rounds if (n, t) in by and num(by[n, t], "client_cv") is not None]
    ccells = f"{statistics.median(c):.1%} | {max(c):.1%}" if c else "– | –"
    if not q or not u:
        print(f"| {t} | – | – | – | – | – | – | – | – | {widest} | {ccells} |")
        continue
    print(f"| {t} | {fmt(min(q), 0)} | {fmt(statistics.median(q), 0)} | {fmt(max(q), 0)} | {cv(q)} | "
          f"{fmt(min(u), 1)} | {fmt(statistics.median(u), 1)} | {fmt(max(u), 1)} | {cv(u)} | {widest} | {ccells} |")
EOF
echo "raw results: $OUT"
