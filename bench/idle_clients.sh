#!/usr/bin/env bash
# Many idle client sessions held open through manifold: manifold's memory per idle session,
# its CPU use while they idle, and how many backend connections MariaDB sees for them.
# Optionally the same for fewer sessions straight on MariaDB, for comparison. The clients are
# bench/idle_clients.py (asyncio, raw protocol: every session completes the handshake and a
# mysql_native_password login). See bench/README.md.
#
# Settings (environment):
#   CLIENTS=10000         sessions opened through manifold
#   IDLE_SECS=30          how long they are held idle while manifold's CPU is measured
#   CONCURRENCY=200       logins in flight at once while opening
#   PING_SAMPLE=100       sessions that must answer COM_PING after the idle window
#   CLIENTS_DIRECT=1000   sessions opened straight on MariaDB for comparison (its
#                         max-connections is 2000 in the testkit); 0 skips that part
#   PROXY_THREADS=2       manifold --threads
#   MAX_CONNECTIONS=      manifold's mysql.max_connections (default: CLIENTS + 100, so the
#                         warm-up session and late closes never count against the clients)
#   SETTLE=3              seconds to wait before reading memory after opening or closing
#   OUT=bench/out/idle_clients-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release         manifold and manifold-testkit are copied from here
#                         to a temp dir at start, so a rebuild during the run does not matter
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

CLIENTS=${CLIENTS:-10000}
IDLE_SECS=${IDLE_SECS:-30}
CONCURRENCY=${CONCURRENCY:-200}
PING_SAMPLE=${PING_SAMPLE:-100}
CLIENTS_DIRECT=${CLIENTS_DIRECT:-1000}
PROXY_THREADS=${PROXY_THREADS:-2}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-$((CLIENTS + 100))}
SETTLE=${SETTLE:-3}
OUT=${OUT:-$ROOT/bench/out/idle_clients-$(date -u +%Y%m%dT%H%M%SZ)}
CLIENT_PY=$ROOT/bench/idle_clients.py

need_tools "apt-get install -y mariadb-client python3" mysql python3
need_binaries
for f in "$CLIENT_PY" "$ROOT/tests/python/rawmysql.py"; do
    [ -r "$f" ] || die "$f missing"
done
[ "$CLIENTS_DIRECT" -le 1900 ] || die "CLIENTS_DIRECT=$CLIENTS_DIRECT: the testkit's MariaDB allows 2000 connections"
# The client process holds CLIENTS sockets; manifold CLIENTS plus its backend connections.
NEED_FDS=$((CLIENTS + 1000))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$NEED_FDS" ]; then
    ulimit -n "$NEED_FDS" 2>/dev/null ||
        die "open-file limit $(ulimit -n) is below the $NEED_FDS needed for CLIENTS=$CLIENTS (hard limit $(ulimit -Hn))"
fi

CLIENT_PID= SLEEP_PID=
# Runs at exit before lib.sh's cleanup stops manifold and the topology.
before_cleanup() {
    [ -n "$SLEEP_PID" ] && kill "$SLEEP_PID" 2>/dev/null
    if [ -n "$CLIENT_PID" ]; then
        exec 4>&- # EOF on its stdin: the client closes its sessions and exits
        for _ in $(seq 1 50); do kill -0 "$CLIENT_PID" 2>/dev/null || break; sleep 0.1; done
        kill "$CLIENT_PID" 2>/dev/null
        wait "$CLIENT_PID" 2>/dev/null
    fi
}

# /proc readings of the measured process besides cpu_ticks (lib.sh).
# CPU time in nanoseconds, summed over the process's threads (first field of schedstat): the
# same quantity as cpu_ticks at a finer resolution.
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%d", s}'; }
# Context switches (voluntary + involuntary) summed over the threads: how often it woke up.
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
nfds() { ls "/proc/$1/fd" | wc -l; }
# A sleep that Ctrl-C interrupts at once (bash runs a trap only after a foreground command ends).
pause() { sleep "$1" & SLEEP_PID=$!; wait "$SLEEP_PID"; SLEEP_PID=; }
nthreads() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }

# --- topology -------------------------------------------------------------------------------
bench_setup
start_topology

# Connections MariaDB has open, read on the primary itself; the reading is one of them.
threads_connected() {
    primary_sql -N -e "SHOW GLOBAL STATUS LIKE 'Threads_connected'" | awk '{print $2}'
}
BASELINE=$(threads_connected)

# --- environment ----------------------------------------------------------------------------
{
    env_header
    echo "python: $(python3 --version)"
    manifold_build
    echo "open-file limit: $(ulimit -n)"
    echo "load average at start: $(load_average)"
    echo "settings: CLIENTS=$CLIENTS IDLE_SECS=$IDLE_SECS CONCURRENCY=$CONCURRENCY PING_SAMPLE=$PING_SAMPLE CLIENTS_DIRECT=$CLIENTS_DIRECT PROXY_THREADS=$PROXY_THREADS MAX_CONNECTIONS=$MAX_CONNECTIONS SETTLE=$SETTLE CLK_TCK=$CLK_TCK"
    echo "MariaDB Threads_connected before anything connects: $BASELINE (the reading's own connection)"
} | tee "$OUT/env.txt"

# --- the client process ---------------------------------------------------------------------
CLIENT_LOG=
start_clients() { # port clients log
    CLIENT_LOG=$3
    rm -f "$TMP/clients.in"
    mkfifo "$TMP/clients.in"
    python3 "$CLIENT_PY" --port "$1" --clients "$2" --concurrency "$CONCURRENCY" \
        --ping-sample "$PING_SAMPLE" <"$TMP/clients.in" >"$CLIENT_LOG" 2>&1 &
    CLIENT_PID=$!
    exec 4>"$TMP/clients.in"
    await started 30 >/dev/null
}
# Sends a command to the client process; prints its answer line (the first line starting with
# the command's answer word that was not there before).
ask() { # command answer-word timeout
    local before
    before=$(grep -c "^$2" "$CLIENT_LOG" || true)
    echo "$1" >&4
    await "$2" "$3" "$before"
}
await() { # answer-word timeout [lines of it to skip]
    local skip=${3:-0}
    for _ in $(seq 1 $(($2 * 10))); do
        if [ "$(grep -c "^$1" "$CLIENT_LOG" || true)" -gt "$skip" ]; then
            grep "^$1" "$CLIENT_LOG" | sed -n "$((skip + 1))p"
            return 0
        fi
        kill -0 "$CLIENT_PID" 2>/dev/null || die "the client process exited: $(tail -5 "$CLIENT_LOG")"
        sleep 0.1
    done
    die "no '$1' from the client process within $2 s: $(tail -5 "$CLIENT_LOG")"
}
stop_clients() {
    ask close closed 120 >/dev/null
    exec 4>&-
    wait "$CLIENT_PID" 2>/dev/null || true
    CLIENT_PID=
}

RESULTS=$OUT/results.txt
: >"$RESULTS"
record() { echo "$1=$2" | tee -a "$RESULTS"; }

# One measurement: PID is the process whose memory and CPU are measured (manifold, or mariadbd
# for the direct comparison).
measure() { # target port clients pid
    local target=$1 port=$2 clients=$3 pid=$4 line
    echo "--- $target: $clients sessions on port $port"
    start_clients "$port" "$clients" "$OUT/clients-$target.log"
    line=$(ask warmup warmup 60)
    [ "$line" = "warmup ok" ] || die "$target: $line"
    sleep "$SETTLE"
    record "$target.rss_before_kib" "$(rss_kib "$pid")"
    record "$target.fds_before" "$(nfds "$pid")"
    record "$target.threads_before" "$(nthreads "$pid")"
    record "$target.mariadb_threads_connected_before" "$(threads_connected)"

    line=$(ask open open 1800)
    echo "clients: $line"
    record "$target.opened" "$(kv "$line" ok)"
    record "$target.open_failed" "$(kv "$line" failed)"
    record "$target.open_secs" "$(kv "$line" secs)"
    [ "$(kv "$line" failed)" = 0 ] || echo "  !! $target: $(kv "$line" failed) of $clients sessions did not log in: $line" >&2
    sleep "$SETTLE"
    record "$target.rss_after_kib" "$(rss_kib "$pid")"
    record "$target.fds_after" "$(nfds "$pid")"
    record "$target.threads_after" "$(nthreads "$pid")"
    record "$target.mariadb_threads_connected_after_open" "$(threads_connected)"

    # The idle window: nothing but reading /proc before and after.
    local t0 n0 c0 m0 t1 n1 c1 m1
    t0=$(cpu_ticks "$pid") n0=$(cpu_ns "$pid") c0=$(ctx_switches "$pid") m0=$(cpu_ticks "$MARIADB_PID")
    pause "$IDLE_SECS"
    t1=$(cpu_ticks "$pid") n1=$(cpu_ns "$pid") c1=$(ctx_switches "$pid") m1=$(cpu_ticks "$MARIADB_PID")
    record "$target.idle_cpu_ticks" "$((t1 - t0))"
    record "$target.idle_cpu_ms_schedstat" "$(((n1 - n0) / 1000000))"
    record "$target.idle_context_switches" "$((c1 - c0))"
    record "$target.idle_mariadb_cpu_ticks" "$((m1 - m0))"
    record "$target.rss_end_of_idle_kib" "$(rss_kib "$pid")"
    record "$target.mariadb_threads_connected_end_of_idle" "$(threads_connected)"

    line=$(ask check check 300)
    echo "clients: $line"
    record "$target.still_open" "$(kv "$line" open)"
    record "$target.closed_by_server" "$(kv "$line" closed)"
    record "$target.unexpected_data" "$(kv "$line" unexpected)"
    record "$target.ping_ok" "$(kv "$line" ping_ok)"
    record "$target.ping_failed" "$(kv "$line" ping_failed)"

    stop_clients
    sleep "$SETTLE"
    record "$target.rss_after_close_kib" "$(rss_kib "$pid")"
    record "$target.fds_after_close" "$(nfds "$pid")"
    record "$target.mariadb_threads_connected_after_close" "$(threads_connected)"
}

# --- manifold -------------------------------------------------------------------------------
printf '[mysql]\nmax_connections = %s\n' "$MAX_CONNECTIONS" >"$OUT/manifold.toml"
start_manifold MANIFOLD manifold "$OUT/manifold.toml"
echo "manifold pid $MANIFOLD_PID on port $MANIFOLD_PORT"
measure manifold "$MANIFOLD_PORT" "$CLIENTS" "$MANIFOLD_PID"
check_running manifold "$MANIFOLD_PID"
check_quiet_log manifold

# --- MariaDB directly, for comparison ------------------------------------------------------
if [ "$CLIENTS_DIRECT" -gt 0 ]; then
    # manifold goes first, so that its backend connections are not counted here.
    stop_pid MANIFOLD_PID
    sleep 1
    measure direct "$PRIMARY_PORT" "$CLIENTS_DIRECT" "$MARIADB_PID"
fi
note_load_at_end

# --- summary --------------------------------------------------------------------------------
python3 - "$RESULTS" "$BASELINE" "$IDLE_SECS" "$CLK_TCK" <<'EOF' | tee "$OUT/summary.md"
import sys
r = dict(l.strip().split("=", 1) for l in open(sys.argv[1]) if "=" in l)
baseline, idle, hz = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def g(t, k):
    v = r.get(f"{t}.{k}")
    return int(float(v)) if v not in (None, "") else None
def mib(kib):
    return "–" if kib is None else f"{kib / 1024:,.1f}"
print(f"Idle sessions: memory per session, CPU while they idle {idle} s, backend connections.\n")
print("| target | sessions opened | failed | secs to open | RSS before MiB | RSS with sessions MiB "
      "| KiB per idle session | CPU ticks in idle window | CPU ms (schedstat) | context switches "
      "| MariaDB connections for them | still open | COM_PING ok |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for t, who in (("manifold", "manifold"), ("direct", "mariadbd (direct, comparison)")):
    if g(t, "opened") is None:
        continue
    n = g(t, "opened")
    before, after = g(t, "rss_before_kib"), g(t, "rss_after_kib")
    per = f"{(after - before) / n:.1f}" if n else "–"
    # manifold: all its backend connections (pool included); direct: the sessions themselves.
    backend = g(t, "mariadb_threads_connected_end_of_idle") - (
        baseline if t == "manifold" else g(t, "mariadb_threads_connected_before"))
    print(f"| {who} | {n:,} | {g(t, 'open_failed')} | {r.get(t + '.open_secs')} | {mib(before)} | {mib(after)} "
          f"| {per} | {g(t, 'idle_cpu_ticks')} ({g(t, 'idle_cpu_ticks') * 1000 // hz} ms) "
          f"| {g(t, 'idle_cpu_ms_schedstat')} | {g(t, 'idle_context_switches')} | {backend:,} "
          f"| {g(t, 'still_open'):,} | {g(t, 'ping_ok')}/{g(t, 'ping_ok') + g(t, 'ping_failed')} |")
print()
if g("manifold", "opened") is not None:
    t = "manifold"
    print(f"- manifold: MariaDB connections (Threads_connected less the reading's own) after the warm-up "
          f"{g(t, 'mariadb_threads_connected_before') - baseline}, with all sessions open "
          f"{g(t, 'mariadb_threads_connected_after_open') - baseline}, at the end of the idle window "
          f"{g(t, 'mariadb_threads_connected_end_of_idle') - baseline}, after the sessions closed "
          f"{g(t, 'mariadb_threads_connected_after_close') - baseline}.")
    print(f"- manifold: open files {g(t, 'fds_before')} before, {g(t, 'fds_after')} with the sessions, "
          f"{g(t, 'fds_after_close')} after they closed; threads {g(t, 'threads_before')} → {g(t, 'threads_after')}; "
          f"RSS {mib(g(t, 'rss_end_of_idle_kib'))} MiB at the end of the idle window, "
          f"{mib(g(t, 'rss_after_close_kib'))} MiB after the sessions closed.")
    print(f"- manifold: {g(t, 'closed_by_server')} sessions closed by the server and "
          f"{g(t, 'unexpected_data')} with unexpected data during the test; MariaDB used "
          f"{g(t, 'idle_mariadb_cpu_ticks')} ticks in the idle window.")
if g("direct", "opened") is not None:
    t = "direct"
    print(f"- direct (comparison, {g(t, 'opened'):,} sessions, not {g('manifold', 'opened') or 0:,}): "
          f"mariadbd threads {g(t, 'threads_before')} → {g(t, 'threads_after')}, Threads_connected "
          f"{g(t, 'mariadb_threads_connected_before')} → {g(t, 'mariadb_threads_connected_after_open')} "
          f"(manifold stopped before this part); RSS "
          f"{mib(g(t, 'rss_after_close_kib'))} MiB after they closed (thread cache and allocator keep some).")
print(f"- One tick is {1000 // hz} ms: 0 ticks means less than that over the whole idle window.")
EOF
echo "raw results: $OUT"
