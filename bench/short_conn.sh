#!/usr/bin/env bash
# Short connections (connect, log in, SELECT 1, disconnect) against MariaDB directly, through
# HAProxy (TCP mode) and through manifold, interleaved over several rounds, on a topology of
# its own. The load generator is sysbench running bench/short_conn.lua. See bench/README.md.
#
# Target `floor` is bench/floor_server.py, a bare proxy: the socket calls a proxy must make for
# this exchange and nothing else (it also blocks on its backend's answer, a sleep and wake per
# connection manifold does not have). Its kernel CPU per connection is what the kernel charges a
# proxy here for the exchange itself; compare manifold's kernel and user CPU with it.
#
# Settings (environment):
#   ROUNDS=3            rounds; each round runs every target once, in the order of TARGETS
#   DURATION=15         seconds per run
#   CLIENT_THREADS=16   sysbench threads, each a loop of short connections
#   PROXY_THREADS=2     manifold --threads and HAProxy nbthread
#   TARGETS="direct haproxy manifold floor"
#                       manifold-unbalanced (a target to add): manifold with
#                       engine.balance_connections = false, so no connection is handed from
#                       one worker to another: what balancing costs per connection
#   WARMUP=3            seconds of unrecorded load on each target before the first round
#   OUT=bench/out/short_conn-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release       manifold and manifold-testkit are copied from here
#                       to a temp dir at start, so a rebuild during the run does not matter
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
CLIENT_THREADS=${CLIENT_THREADS:-16}
PROXY_THREADS=${PROXY_THREADS:-2}
TARGETS=${TARGETS:-"direct haproxy manifold floor"}
WARMUP=${WARMUP:-3}
OUT=${OUT:-$ROOT/bench/out/short_conn-$(date -u +%Y%m%dT%H%M%SZ)}
LUA=$ROOT/bench/short_conn.lua
NPROC=$(nproc)

need_tools "apt-get install -y sysbench haproxy mariadb-client python3 time" sysbench haproxy mysql python3 /usr/bin/time
python3 -c 'import pymysql' 2>/dev/null || die "PyMySQL missing (pip install pymysql): the floor target logs in with it"
need_binaries
[ -r "$LUA" ] || die "$LUA missing"
for t in $TARGETS; do
    case $t in direct | haproxy | manifold | manifold-unbalanced | floor) ;; *) die "unknown target $t (direct, haproxy, manifold, manifold-unbalanced, floor)" ;; esac
done

# --- topology and proxies -------------------------------------------------------------------
bench_setup
start_topology
start_haproxy
start_manifold MANIFOLD manifold
UNBALANCED_PID= UNBALANCED_PORT=
case " $TARGETS " in
*" manifold-unbalanced "*)
    printf '[engine]\nbalance_connections = false\n' >"$OUT/manifold-unbalanced.toml"
    start_manifold UNBALANCED manifold-unbalanced "$OUT/manifold-unbalanced.toml"
    ;;
esac
# The floor: PROXY_THREADS processes sharing one port, as manifold's workers do. FLOOR_PID is
# their parent (stopping it stops them); FLOOR_WORKERS the processes whose CPU counts.
FLOOR_PORT=$(free_port)
BENCH_STOP+=(FLOOR_PID)
python3 "$ROOT/bench/floor_server.py" --listen "127.0.0.1:$FLOOR_PORT" --backend "$PRIMARY" \
    --user app:app --procs "$PROXY_THREADS" >"$OUT/floor.pids" 2>"$OUT/floor.log" &
FLOOR_PID=$!
wait_port "$FLOOR_PORT" "$FLOOR_PID" floor
FLOOR_WORKERS=$(cat "$OUT/floor.pids")
echo "haproxy pid $HAPROXY_PID on port $HAPROXY_PORT, manifold pid $MANIFOLD_PID on port $MANIFOLD_PORT, floor pids $FLOOR_WORKERS on port $FLOOR_PORT"

# Server counters, read directly on the primary: "Connections Com_select". The reading itself
# is one connection (counted in Connections) and no SELECT.
server_counters() {
    primary_sql -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Connections', 'Com_select')" |
        awk '{v[$1] = $2} END {print v["Connections"], v["Com_select"]}'
}

port_of() { case $1 in direct) echo "$PRIMARY_PORT" ;; haproxy) echo "$HAPROXY_PORT" ;; manifold) echo "$MANIFOLD_PORT" ;; manifold-unbalanced) echo "$UNBALANCED_PORT" ;; floor) echo "$FLOOR_PORT" ;; esac; }
pid_of() { case $1 in direct) echo "" ;; haproxy) echo "$HAPROXY_PID" ;; manifold) echo "$MANIFOLD_PID" ;; manifold-unbalanced) echo "$UNBALANCED_PID" ;; floor) echo "$FLOOR_WORKERS" ;; esac; }

# --- environment ----------------------------------------------------------------------------
{
    env_header
    echo "haproxy: $(haproxy -v | head -1)"
    echo "sysbench: $(sysbench --version)"
    manifold_build
    echo "tcp: ip_local_port_range $(sysctl -n net.ipv4.ip_local_port_range | tr '\t' '-'), tcp_tw_reuse $(sysctl -n net.ipv4.tcp_tw_reuse), somaxconn $(sysctl -n net.core.somaxconn)"
    echo "load average at start: $(load_average)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION CLIENT_THREADS=$CLIENT_THREADS PROXY_THREADS=$PROXY_THREADS TARGETS=\"$TARGETS\" WARMUP=$WARMUP CLK_TCK=$CLK_TCK"
} | tee "$OUT/env.txt"

# --- runs -----------------------------------------------------------------------------------
SB=("$LUA" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app --mysql-db=
    --threads="$CLIENT_THREADS")
CSV="$OUT/raw.csv"
echo "round,target,connections,conn_per_s,p95_ms,p99_ms,errors,server_connections,server_selects,proxy_cpu_s,mariadb_cpu_s,sysbench_cpu_s,proxy_us_per_conn,proxy_sys_us_per_conn,mariadb_us_per_conn,sysbench_us_per_conn,sysbench_sys_pct,sysbench_cpu_share,other_cpu_s,exit" >"$CSV"

run_one() { # round target
    local round=$1 target=$2 port pid log status=0
    port=$(port_of "$target")
    pid=$(pid_of "$target")
    log="$OUT/r$round-$target.log"
    local s0 s1 cpu0 cpu1
    s0=$(server_counters)
    cpu0=$(cpu_sample "$pid")
    /usr/bin/time -f '%U %S %e' -o "$log.time" \
        sysbench "${SB[@]}" --mysql-port="$port" --time="$DURATION" --percentile=95 --histogram=on \
        run >"$log" 2>&1 || status=$?
    cpu1=$(cpu_sample "$pid")
    s1=$(server_counters)
    # Connections (events), rate, p95 and errors from sysbench's report; p99 from its latency
    # histogram (the first bucket where the cumulative count reaches 99%). server_connections:
    # logins MariaDB saw during the run (the Connections counter, less the reading's own
    # connection); server_selects: SELECTs it ran. Direct and through HAProxy both must equal
    # the client's connections; through manifold, server_connections is the number of backend
    # connections it opened.
    awk -v round="$round" -v target="$target" -v status="$status" -v nproc="$NPROC" \
        -v cpu0="$cpu0" -v cpu1="$cpu1" -v hz="$CLK_TCK" -v proxy="$pid" \
        -v s0="$s0" -v s1="$s1" \
        -v sbcpu="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" \
        -v sbsys="$(awk '{print $2}' "$log.time" 2>/dev/null | tail -1)" \
        -v sbwall="$(awk '{print $3}' "$log.time" 2>/dev/null | tail -1)" '
        /^ +[0-9.]+ \|/ { n++; v[n] = $1; c[n] = $NF; total += $NF }
        /^ *transactions:/ { conns = $2; rate = $3; gsub(/\(/, "", rate) }
        /95th percentile:/ { p95 = $3 }
        /ignored errors:/ { errors = $3 }
        END {
            # CPU ticks over the run: the machine busy, mariadbd, the proxy (see cpu_sample)
            split(cpu0, ca); split(cpu1, cb); db = cb[1] - ca[1]; dm = cb[2] - ca[2]; dp = cb[3] - ca[3]
            ds = cb[4] - ca[4]
            for (i = 1; i <= n; i++) {
                cum += c[i]
                if (h99 == "" && cum >= 0.99 * total) h99 = v[i]
            }
            split(s0, a); split(s1, b)
            sconn = b[1] - a[1] - 1; ssel = b[2] - a[2]
            other = db / hz - dm / hz - dp / hz - sbcpu
            pc = proxy == "" ? "" : dp / hz
            share = sbwall > 0 ? sprintf("%.2f", sbcpu / (nproc * sbwall)) : ""
            syspct = sbcpu > 0 ? sprintf("%.0f", 100 * sbsys / sbcpu) : ""
            if (conns > 0) {
                pu = proxy == "" ? "" : sprintf("%.1f", dp / hz * 1e6 / conns)
                ps = proxy == "" ? "" : sprintf("%.1f", ds / hz * 1e6 / conns)
                mu = sprintf("%.1f", dm / hz * 1e6 / conns)
                su = sprintf("%.1f", sbcpu * 1e6 / conns)
            } else {
                pu = ps = mu = su = ""
            }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s,%s,%s,%s,%.2f,%s\n", round, target,
                conns, rate, p95, h99, errors, sconn, ssel, pc, dm / hz, sbcpu, pu, ps, mu, su, syspct,
                share, other, status
        }' "$log" | tee -a "$CSV"
    if [ "$status" != 0 ] || grep -q FATAL "$log"; then
        echo "  !! sysbench failed against $target (exit $status): see $log" >&2
        grep -m3 FATAL "$log" | sed 's/^/     /' >&2 || true
    fi
}

for target in $TARGETS; do
    echo "warming up $target ($WARMUP s)"
    sysbench "${SB[@]}" --mysql-port="$(port_of "$target")" --time="$WARMUP" run >"$OUT/warmup-$target.log" 2>&1 ||
        echo "  !! warm-up against $target failed: see $OUT/warmup-$target.log" >&2
done

echo "$CLIENT_THREADS client threads, $DURATION s per run, $ROUNDS rounds; raw results in $CSV"
head -1 "$CSV"
for round in $(seq 1 "$ROUNDS"); do
    for target in $TARGETS; do
        run_one "$round" "$target"
    done
done

note_load_at_end
check_running manifold "$MANIFOLD_PID"
if [ -n "$UNBALANCED_PID" ]; then check_running manifold-unbalanced "$UNBALANCED_PID"; fi
check_running haproxy "$HAPROXY_PID"
check_running floor "$FLOOR_PID"
check_quiet_log manifold

# --- summary --------------------------------------------------------------------------------
summarize "$CSV" "$NPROC" "$DURATION" <<'EOF' | tee "$OUT/summary.md"
import sys
from summary_lib import fmt, med, read_rows, rounds
rows = read_rows(sys.argv[1])
nproc, duration = int(sys.argv[2]), float(sys.argv[3])
targets = list(dict.fromkeys(r["target"] for r in rows))
keys = ("conn_per_s", "p95_ms", "p99_ms", "proxy_us_per_conn", "proxy_sys_us_per_conn", "mariadb_us_per_conn",
        "sysbench_us_per_conn", "sysbench_sys_pct", "sysbench_cpu_share", "other_cpu_s")
print("Medians across rounds. Each connection: connect, log in, SELECT 1, disconnect.\n")
print("| target | rounds | conn/s | vs direct | vs HAProxy | p95 ms | p99 ms | proxy CPU µs/conn "
      "| of it kernel "
      "| mariadbd CPU µs/conn | sysbench CPU µs/conn | sysbench share of CPUs | other CPU s "
      "| MariaDB logins / client connections | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
meds = {t: {k: med([r for r in rows if r["target"] == t], k) for k in keys} for t in targets}
for t in targets:
    rs = [r for r in rows if r["target"] == t]
    d = meds[t]
    errs = sum(int(r["errors"] or 0) for r in rs)
    conns = sum(int(r["connections"] or 0) for r in rs)
    logins = sum(int(r["server_connections"] or 0) for r in rs)
    def ratio(base):
        b = meds.get(base, {}).get("conn_per_s")
        return "–" if not b or d["conn_per_s"] is None else f"{d['conn_per_s'] / b:.2f}"
    print(f"| {t} | {rounds(rs)} | {fmt(d['conn_per_s'], 0)} "
          f"| {ratio('direct')} | {ratio('haproxy')} | {fmt(d['p95_ms'], 2)} | {fmt(d['p99_ms'], 2)} "
          f"| {fmt(d['proxy_us_per_conn'], 1)} | {fmt(d['proxy_sys_us_per_conn'], 1)} | {fmt(d['mariadb_us_per_conn'], 1)} "
          f"| {fmt(d['sysbench_us_per_conn'], 1)} | {fmt(d['sysbench_cpu_share'], 2)} "
          f"| {fmt(d['other_cpu_s'], 1)} | {logins:,} / {conns:,} | {errs} |")
print()
m, h = meds.get("manifold"), meds.get("haproxy")
if m and h and m["proxy_us_per_conn"] and h["proxy_us_per_conn"]:
    print(f"- manifold/HAProxy proxy CPU per connection = {m['proxy_us_per_conn'] / h['proxy_us_per_conn']:.2f}")
f = meds.get("floor")
if m and f and m["proxy_sys_us_per_conn"] and f["proxy_sys_us_per_conn"]:
    user = m["proxy_us_per_conn"] - m["proxy_sys_us_per_conn"]
    print(f"- Kernel CPU per connection: manifold {m['proxy_sys_us_per_conn']:.1f} µs, the floor (a bare proxy "
          f"making the same socket calls and nothing else) {f['proxy_sys_us_per_conn']:.1f} µs. manifold's own "
          f"code (its user CPU) costs {user:.1f} µs per connection.")
# The counts must be real: direct and through HAProxy MariaDB sees one login and one SELECT per
# client connection; through manifold it sees every SELECT but only the pool's logins.
for r in rows:
    c, sc, ss = int(r["connections"] or 0), int(r["server_connections"] or 0), int(r["server_selects"] or 0)
    if not c:
        continue
    if r["target"] in ("direct", "haproxy") and not (c <= sc <= c + 64 and c <= ss <= c + 64):
        print(f"- !! round {r['round']} {r['target']}: sysbench counted {c} connections, MariaDB {sc} logins and {ss} SELECTs")
    if r["target"] in ("manifold", "manifold-unbalanced", "floor") and not c <= ss <= c + 64:
        print(f"- !! round {r['round']} {r['target']}: sysbench counted {c} connections, MariaDB ran {ss} SELECTs")
shares = [float(r["sysbench_cpu_share"]) for r in rows if r["sysbench_cpu_share"]]
syspct = [float(r["sysbench_sys_pct"]) for r in rows if r["sysbench_sys_pct"]]
if shares:
    print(f"- The load generator shares the machine's {nproc} CPUs with the proxy and MariaDB: sysbench "
          f"itself used {min(shares):.0%}–{max(shares):.0%} of the machine's CPU time during the runs, "
          f"{min(syspct):.0f}–{max(syspct):.0f}% of it in the kernel (connect, close and the loopback TCP "
          f"work they trigger, which any client would pay). conn/s is the whole machine's budget, not "
          f"the proxy's limit; compare the CPU µs per connection.")
EOF
echo "raw results: $OUT"
