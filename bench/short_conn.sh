#!/usr/bin/env bash
# Short connections (connect, log in, SELECT 1, disconnect) against MariaDB directly, through
# HAProxy (TCP mode) and through manifold, interleaved over several rounds, on a topology of
# its own. The load generator is sysbench running bench/short_conn.lua. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=3            rounds; each round runs every target once, in the order of TARGETS
#   DURATION=15         seconds per run
#   CLIENT_THREADS=16   sysbench threads, each a loop of short connections
#   PROXY_THREADS=2     manifold --threads and HAProxy nbthread
#   TARGETS="direct haproxy manifold"
#   WARMUP=3            seconds of unrecorded load on each target before the first round
#   OUT=bench/out/short_conn-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release       manifold and manifold-testkit are copied from here
#                       to a temp dir at start, so a rebuild during the run does not matter
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-15}
CLIENT_THREADS=${CLIENT_THREADS:-16}
PROXY_THREADS=${PROXY_THREADS:-2}
TARGETS=${TARGETS:-"direct haproxy manifold"}
WARMUP=${WARMUP:-3}
SRC_BIN=${MANIFOLD_BIN_DIR:-$ROOT/target/release}
OUT=${OUT:-$ROOT/bench/out/short_conn-$(date -u +%Y%m%dT%H%M%SZ)}
LUA=$ROOT/bench/short_conn.lua
CLK_TCK=$(getconf CLK_TCK)
NPROC=$(nproc)

die() { echo "short_conn.sh: $*" >&2; exit 1; }
for tool in sysbench haproxy mysql python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || die "$tool not found (apt-get install -y sysbench haproxy mariadb-client python3 time)"
done
for b in manifold manifold-testkit; do
    [ -x "$SRC_BIN/$b" ] || die "$SRC_BIN/$b missing: cargo build --release --workspace"
done
[ -r "$LUA" ] || die "$LUA missing"
for t in $TARGETS; do
    case $t in direct | haproxy | manifold) ;; *) die "unknown target $t (direct, haproxy, manifold)" ;; esac
done

mkdir -p "$OUT"
TMP=$(mktemp -d)
TESTKIT_PID= HAPROXY_PID= MANIFOLD_PID=

cleanup() {
    set +e
    [ -n "$MANIFOLD_PID" ] && kill "$MANIFOLD_PID" 2>/dev/null && wait "$MANIFOLD_PID" 2>/dev/null
    [ -n "$HAPROXY_PID" ] && kill "$HAPROXY_PID" 2>/dev/null && wait "$HAPROXY_PID" 2>/dev/null
    if [ -n "$TESTKIT_PID" ]; then
        exec 3>&- # closing the testkit's stdin tears the topology down
        wait "$TESTKIT_PID" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Private copies of the binaries: target/release may be rebuilt while this runs.
BIN=$TMP/bin
mkdir -p "$BIN"
cp "$SRC_BIN/manifold" "$SRC_BIN/manifold-testkit" "$BIN/"

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

# Server counters, read directly on the primary: "Connections Com_select". The reading itself
# is one connection (counted in Connections) and no SELECT.
server_counters() {
    mysql -h127.0.0.1 -P"$PRIMARY_PORT" -uapp -papp -N -e \
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Connections', 'Com_select')" |
        awk '{v[$1] = $2} END {print v["Connections"], v["Com_select"]}'
}

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
echo "haproxy pid $HAPROXY_PID on port $HAPROXY_PORT, manifold pid $MANIFOLD_PID on port $MANIFOLD_PORT"

port_of() { case $1 in direct) echo "$PRIMARY_PORT" ;; haproxy) echo "$HAPROXY_PORT" ;; manifold) echo "$MANIFOLD_PORT" ;; esac; }
pid_of() { case $1 in direct) echo "" ;; haproxy) echo "$HAPROXY_PID" ;; manifold) echo "$MANIFOLD_PID" ;; esac; }

# --- environment ----------------------------------------------------------------------------
{
    echo "date: $(date -u +%FT%TZ)"
    echo "nproc: $NPROC"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "memory: $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "mariadb: $(mysql -h127.0.0.1 -P"$PRIMARY_PORT" -uapp -papp -N -e 'SELECT VERSION()')"
    echo "haproxy: $(haproxy -v | head -1)"
    echo "sysbench: $(sysbench --version)"
    echo "manifold: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (+ uncommitted changes in crates/)'), binary $SRC_BIN/manifold of $(date -u -r "$SRC_BIN/manifold" +%FT%TZ), sha256 $(sha256sum "$BIN/manifold" | cut -c1-12)"
    echo "tcp: ip_local_port_range $(sysctl -n net.ipv4.ip_local_port_range | tr '\t' '-'), tcp_tw_reuse $(sysctl -n net.ipv4.tcp_tw_reuse), somaxconn $(sysctl -n net.core.somaxconn)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION CLIENT_THREADS=$CLIENT_THREADS PROXY_THREADS=$PROXY_THREADS TARGETS=\"$TARGETS\" WARMUP=$WARMUP CLK_TCK=$CLK_TCK"
} | tee "$OUT/env.txt"

# --- runs -----------------------------------------------------------------------------------
SB=("$LUA" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=app --mysql-db=
    --threads="$CLIENT_THREADS")
CSV="$OUT/raw.csv"
echo "round,target,connections,conn_per_s,p95_ms,p99_ms,errors,server_connections,server_selects,proxy_cpu_s,mariadb_cpu_s,sysbench_cpu_s,proxy_us_per_conn,mariadb_us_per_conn,sysbench_us_per_conn,sysbench_sys_pct,sysbench_cpu_share,other_cpu_s,exit" >"$CSV"

run_one() { # round target
    local round=$1 target=$2 port pid log status=0
    port=$(port_of "$target")
    pid=$(pid_of "$target")
    log="$OUT/r$round-$target.log"
    local s0 s1 m0 p0=0 m1 p1=0 b0 b1
    s0=$(server_counters)
    b0=$(busy_ticks)
    m0=$(cpu_ticks "$MARIADB_PID")
    [ -n "$pid" ] && p0=$(cpu_ticks "$pid")
    /usr/bin/time -f '%U %S %e' -o "$log.time" \
        sysbench "${SB[@]}" --mysql-port="$port" --time="$DURATION" --percentile=95 --histogram=on \
        run >"$log" 2>&1 || status=$?
    m1=$(cpu_ticks "$MARIADB_PID")
    [ -n "$pid" ] && p1=$(cpu_ticks "$pid")
    b1=$(busy_ticks)
    s1=$(server_counters)
    # Connections (events), rate, p95 and errors from sysbench's report; p99 from its latency
    # histogram (the first bucket where the cumulative count reaches 99%). server_connections:
    # logins MariaDB saw during the run (the Connections counter, less the reading's own
    # connection); server_selects: SELECTs it ran. Direct and through HAProxy both must equal
    # the client's connections; through manifold, server_connections is the number of backend
    # connections it opened.
    awk -v round="$round" -v target="$target" -v status="$status" -v nproc="$NPROC" \
        -v dm="$((m1 - m0))" -v dp="$((p1 - p0))" -v db="$((b1 - b0))" -v hz="$CLK_TCK" -v proxy="$pid" \
        -v s0="$s0" -v s1="$s1" \
        -v sbcpu="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" \
        -v sbsys="$(awk '{print $2}' "$log.time" 2>/dev/null | tail -1)" \
        -v sbwall="$(awk '{print $3}' "$log.time" 2>/dev/null | tail -1)" '
        /^ +[0-9.]+ \|/ { n++; v[n] = $1; c[n] = $NF; total += $NF }
        /^ *transactions:/ { conns = $2; rate = $3; gsub(/\(/, "", rate) }
        /95th percentile:/ { p95 = $3 }
        /ignored errors:/ { errors = $3 }
        END {
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
                mu = sprintf("%.1f", dm / hz * 1e6 / conns)
                su = sprintf("%.1f", sbcpu * 1e6 / conns)
            } else {
                pu = mu = su = ""
            }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.2f,%s,%s,%s,%s,%s,%s,%.2f,%s\n", round, target,
                conns, rate, p95, h99, errors, sconn, ssel, pc, dm / hz, sbcpu, pu, mu, su, syspct,
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

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
kill -0 "$MANIFOLD_PID" 2>/dev/null || echo "  !! manifold is no longer running: see $OUT/manifold.log" >&2
kill -0 "$HAPROXY_PID" 2>/dev/null || echo "  !! haproxy is no longer running: see $OUT/haproxy.log" >&2
if [ -s "$OUT/manifold.log" ]; then
    echo "  !! manifold logged $(wc -l <"$OUT/manifold.log") line(s) at warn level or above: see $OUT/manifold.log" >&2
fi

# --- summary --------------------------------------------------------------------------------
python3 - "$CSV" "$NPROC" "$DURATION" <<'EOF' | tee "$OUT/summary.md"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
nproc, duration = int(sys.argv[2]), float(sys.argv[3])
def med(rs, key):
    vals = [float(r[key]) for r in rs if r[key] not in ("", None)]
    return statistics.median(vals) if vals else None
def fmt(v, nd):
    return "–" if v is None else f"{v:,.{nd}f}"
targets = list(dict.fromkeys(r["target"] for r in rows))
keys = ("conn_per_s", "p95_ms", "p99_ms", "proxy_us_per_conn", "mariadb_us_per_conn",
        "sysbench_us_per_conn", "sysbench_sys_pct", "sysbench_cpu_share", "other_cpu_s")
print("Medians across rounds. Each connection: connect, log in, SELECT 1, disconnect.\n")
print("| target | rounds | conn/s | vs direct | vs HAProxy | p95 ms | p99 ms | proxy CPU µs/conn "
      "| mariadbd CPU µs/conn | sysbench CPU µs/conn | sysbench share of CPUs | other CPU s "
      "| MariaDB logins / client connections | errors |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
meds = {t: {k: med([r for r in rows if r["target"] == t], k) for k in keys} for t in targets}
for t in targets:
    rs = [r for r in rows if r["target"] == t]
    d = meds[t]
    bad = sum(1 for r in rs if r["exit"] != "0")
    errs = sum(int(r["errors"] or 0) for r in rs)
    conns = sum(int(r["connections"] or 0) for r in rs)
    logins = sum(int(r["server_connections"] or 0) for r in rs)
    def ratio(base):
        b = meds.get(base, {}).get("conn_per_s")
        return "–" if not b or d["conn_per_s"] is None else f"{d['conn_per_s'] / b:.2f}"
    print(f"| {t} | {len(rs)}{' (' + str(bad) + ' failed)' if bad else ''} | {fmt(d['conn_per_s'], 0)} "
          f"| {ratio('direct')} | {ratio('haproxy')} | {fmt(d['p95_ms'], 2)} | {fmt(d['p99_ms'], 2)} "
          f"| {fmt(d['proxy_us_per_conn'], 1)} | {fmt(d['mariadb_us_per_conn'], 1)} "
          f"| {fmt(d['sysbench_us_per_conn'], 1)} | {fmt(d['sysbench_cpu_share'], 2)} "
          f"| {fmt(d['other_cpu_s'], 1)} | {logins:,} / {conns:,} | {errs} |")
print()
m, h = meds.get("manifold"), meds.get("haproxy")
if m and h and m["proxy_us_per_conn"] and h["proxy_us_per_conn"]:
    print(f"- manifold/HAProxy proxy CPU per connection = {m['proxy_us_per_conn'] / h['proxy_us_per_conn']:.2f}")
# The counts must be real: direct and through HAProxy MariaDB sees one login and one SELECT per
# client connection; through manifold it sees every SELECT but only the pool's logins.
for r in rows:
    c, sc, ss = int(r["connections"] or 0), int(r["server_connections"] or 0), int(r["server_selects"] or 0)
    if not c:
        continue
    if r["target"] in ("direct", "haproxy") and not (c <= sc <= c + 64 and c <= ss <= c + 64):
        print(f"- !! round {r['round']} {r['target']}: sysbench counted {c} connections, MariaDB {sc} logins and {ss} SELECTs")
    if r["target"] == "manifold" and not c <= ss <= c + 64:
        print(f"- !! round {r['round']} manifold: sysbench counted {c} connections, MariaDB ran {ss} SELECTs")
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
