#!/usr/bin/env bash
# What transaction replay (routing.transaction_replay: keeping each open transaction's
# statements and a checksum of every answer) costs per sysbench oltp_read_write transaction,
# in instructions (valgrind's callgrind): the same workload through manifold with replay on
# (the default) and off, alternating, on a topology of its own. Instruction counts do not
# depend on what else the machine runs, unlike CPU time. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=3          rounds; each runs both targets once, in turn first
#   TRANSACTIONS=1000 oltp_read_write transactions measured per run (after WARMUP unmeasured)
#   WARMUP=500
#   THREADS=8         sysbench threads (client connections)
#   PROXY_THREADS=2   manifold --threads
#   OUT=bench/out/replay_overhead-<UTC time>
#   MANIFOLD_BIN_DIR=target/release
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ROUNDS=${ROUNDS:-3}
TRANSACTIONS=${TRANSACTIONS:-1000}
WARMUP=${WARMUP:-500}
THREADS=${THREADS:-8}
PROXY_THREADS=${PROXY_THREADS:-2}
OUT=${OUT:-$ROOT/bench/out/replay_overhead-$(date -u +%Y%m%dT%H%M%SZ)}

need_tools "apt-get install -y sysbench valgrind mariadb-client python3" sysbench valgrind callgrind_control mysql python3
need_binaries

bench_setup
start_topology
{
    env_header
    echo "valgrind: $(valgrind --version)"
    echo "sysbench: $(sysbench --version)"
    manifold_build
    echo "settings: ROUNDS=$ROUNDS TRANSACTIONS=$TRANSACTIONS WARMUP=$WARMUP THREADS=$THREADS PROXY_THREADS=$PROXY_THREADS"
} | tee "$OUT/env.txt"

printf '[routing]\ntransaction_replay = true\n' >"$OUT/on.toml"
printf '[routing]\ntransaction_replay = false\n' >"$OUT/off.toml"

primary_sql -e 'CREATE DATABASE sbtest'
SB=(oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app
    --mysql-db=sbtest --tables=1 --table-size=10000 --db-ps-mode=disable --threads="$THREADS" --time=0)
sysbench "${SB[@]}" --mysql-port="$PRIMARY_PORT" prepare >"$OUT/prepare.log" 2>&1 || die "prepare failed: see $OUT/prepare.log"

CSV="$OUT/raw.csv"
echo "round,target,transactions,instructions,instructions_per_transaction" >"$CSV"

CG_PID=
BENCH_STOP+=(CG_PID)
run_one() { # round target(on|off)
    local round=$1 target=$2 port pid out transactions total
    port=$(free_port)
    out="$OUT/r$round-$target"
    valgrind --tool=callgrind --callgrind-out-file="$out.cg.%p" \
        "$BIN/manifold" --config "$OUT/$target.toml" --primary "$PRIMARY" --user app:app \
        --listen "127.0.0.1:$port" --admin-listen "" --http-listen "" --threads "$PROXY_THREADS" \
        --log-level warn >"$out.log" 2>&1 &
    pid=$!
    CG_PID=$pid
    wait_port "$port" "$pid" "manifold (replay $target) under callgrind"
    sysbench "${SB[@]}" --mysql-port="$port" --events="$WARMUP" run >"$out.warmup.log" 2>&1 || die "warm-up failed: see $out.warmup.log"
    callgrind_control -z "$pid" >/dev/null
    sysbench "${SB[@]}" --mysql-port="$port" --events="$TRANSACTIONS" run >"$out.sysbench.log" 2>&1 || die "run failed: see $out.sysbench.log"
    callgrind_control -d "$pid" >/dev/null
    stop_pid CG_PID
    # The dump after the zeroing holds the measured run only (all threads).
    [ -f "$out.cg.$pid.1" ] || die "no callgrind dump for $target (see $out.log)"
    total=$(awk '/^totals:/ { print $2 }' "$out.cg.$pid.1")
    transactions=$(awk '/^ *transactions:/ { print $2 }' "$out.sysbench.log")
    echo "$round,$target,$transactions,$total,$((total / transactions))" | tee -a "$CSV"
}

head -1 "$CSV"
# Each round in the other order: the first run after the prepare meets colder caches.
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        run_one "$round" on
        run_one "$round" off
    else
        run_one "$round" off
        run_one "$round" on
    fi
done

summarize "$CSV" <<'EOF' | tee "$OUT/summary.md"
import sys
from summary_lib import read_rows
rows = read_rows(sys.argv[1])
def per_transaction(target):
    v = sorted(float(r["instructions_per_transaction"]) for r in rows if r["target"] == target)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
on, off = per_transaction("on"), per_transaction("off")
print("| transaction replay | manifold instructions per oltp_read_write transaction (median) |")
print("|---|---:|")
print(f"| on (default) | {on:,.0f} |")
print(f"| off | {off:,.0f} |")
print(f"\nReplay costs {on - off:,.0f} instructions per transaction (18 statements): {100 * (on - off) / off:.2f}% of manifold's total.")
EOF
