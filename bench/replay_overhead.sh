#!/usr/bin/env bash
# What transaction replay (routing.transaction_replay: keeping each open transaction's
# statements and a checksum of every answer) costs per sysbench oltp_read_write transaction,
# in instructions (valgrind's callgrind): the same workload through manifold with replay on
# (the default) and off, alternating, on a topology of its own. Instruction counts do not
# depend on what else the machine runs, unlike CPU time. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=3          rounds under callgrind; each runs both targets once, in turn first
#   TRANSACTIONS=1000 oltp_read_write transactions measured per run (after WARMUP unmeasured)
#   WARMUP=500
#   THREADS=8         sysbench threads (client connections)
#   PROXY_THREADS=2   manifold --threads
#   TPS_ROUNDS=3      then, natively: rounds of TPS_SECONDS of oltp_read_write through each
#   TPS_SECONDS=20    (both manifolds running side by side, in turn): transactions a second and
#                     manifold's CPU ms per 1000 transactions (0 rounds: skip)
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
TPS_ROUNDS=${TPS_ROUNDS:-3}
TPS_SECONDS=${TPS_SECONDS:-20}
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
    echo "settings: ROUNDS=$ROUNDS TRANSACTIONS=$TRANSACTIONS WARMUP=$WARMUP THREADS=$THREADS PROXY_THREADS=$PROXY_THREADS TPS_ROUNDS=$TPS_ROUNDS TPS_SECONDS=$TPS_SECONDS"
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

[ "$ROUNDS" -eq 0 ] || summarize "$CSV" <<'EOF' | tee "$OUT/summary.md"
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

[ "$TPS_ROUNDS" -gt 0 ] || exit 0
TPS_CSV="$OUT/tps.csv"
echo "round,target,transactions_per_sec,manifold_cpu_ms_per_1000" >"$TPS_CSV"
start_manifold ON manifold-on "$OUT/on.toml"
start_manifold OFF manifold-off "$OUT/off.toml"
tps_one() { # round target port pid
    local out="$OUT/tps-r$1-$2" before after tps total
    before=$(cpu_ticks "$4")
    sysbench "${SB[@]}" --mysql-port="$3" --time="$TPS_SECONDS" run >"$out.log" 2>&1 || die "run failed: see $out.log"
    after=$(cpu_ticks "$4")
    tps=$(awk '/^ *transactions:/ { gsub(/[(]/, "", $3); print $3 }' "$out.log")
    total=$(awk '/^ *transactions:/ { print $2 }' "$out.log")
    echo "$1,$2,$tps,$(( (after - before) * 1000 * 1000 / $(getconf CLK_TCK) / total ))" | tee -a "$TPS_CSV"
}
head -1 "$TPS_CSV"
for round in $(seq 1 "$TPS_ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        tps_one "$round" on "$ON_PORT" "$ON_PID"
        tps_one "$round" off "$OFF_PORT" "$OFF_PID"
    else
        tps_one "$round" off "$OFF_PORT" "$OFF_PID"
        tps_one "$round" on "$ON_PORT" "$ON_PID"
    fi
done
note_load_at_end
summarize "$TPS_CSV" <<'EOF' | tee -a "$OUT/summary.md"
import sys
from summary_lib import read_rows
rows = read_rows(sys.argv[1])
def median(target, key):
    v = sorted(float(r[key]) for r in rows if r["target"] == target)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
print("\n| transaction replay | oltp_read_write transactions/s (median) | manifold CPU ms per 1000 transactions (median) |")
print("|---|---:|---:|")
for t, name in (("on", "on (default)"), ("off", "off")):
    print(f"| {name} | {median(t, 'transactions_per_sec'):,.1f} | {median(t, 'manifold_cpu_ms_per_1000'):,.0f} |")
EOF
