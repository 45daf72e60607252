# shellcheck shell=bash
# Shared by bench/point_select.sh, bench/short_conn.sh and bench/idle_clients.sh: the topology,
# the proxies, cleanup and /proc readings they all need. Sourced right after the script has
# `cd`ed to the repository root and set ROOT; functions use OUT and PROXY_THREADS as the script
# sets them. Sets SRC_BIN (MANIFOLD_BIN_DIR, default target/release) and CLK_TCK.
#
# What a script gets from it:
#   die MESSAGE                  "<script>: MESSAGE" on stderr, exit 1
#   need_tools HINT TOOL...      die unless every TOOL is installed; HINT says how to install them
#   need_binaries                die unless manifold and manifold-testkit are in $SRC_BIN
#   bench_setup                  mkdir $OUT; a temp dir $TMP; traps (EXIT, and INT/TERM -> exit
#                                130) that stop everything started below and remove $TMP; private
#                                copies of the binaries in $BIN, so a rebuild of $SRC_BIN during the
#                                run does not matter. A script with processes of its own defines
#                                before_cleanup, which runs first.
#   start_topology               MariaDB from `manifold-testkit up` (TOPOLOGY_REPLICAS replicas,
#                                default 0; user app:app); sets PRIMARY (host:port), PRIMARY_PORT,
#                                MARIADB_PID, REPLICAS (host:port,...), MARIADB_PIDS (all, primary
#                                first)
#   start_haproxy                HAProxy (mode tcp, nbthread PROXY_THREADS) in front of the
#                                primary; config in $OUT/haproxy.cfg; sets HAPROXY_PORT, HAPROXY_PID
#   start_manifold VAR NAME [CONFIG [BINARY]]
#                                manifold (default $BIN/manifold) in front of the primary
#                                (--threads PROXY_THREADS, --log-level warn, log in
#                                $OUT/NAME.log); sets VAR_PORT, VAR_ADMIN_PORT, VAR_PID
#   stop_pid VAR                 ends the process whose pid VAR holds, waits for it, empties VAR
#   primary_sql MYSQL-ARGS...    the mysql client logged in as app on the primary
#   free_port; free_ports N; wait_port PORT PID WHAT
#   kv LINE KEY                  the value of KEY=value in a line of space-separated pairs
#   cpu_ticks PID; busy_ticks    CPU time (clock ticks) of a process; of the whole machine
#   cpu_sample ["PID..."]        "machine mariadbd proxy proxy_sys" ticks, before and after a run
#   env_header; manifold_build; load_average    lines of env.txt
#   note_load_at_end             appends the end load average to env.txt (and prints it)
#   check_running NAME PID       warns if NAME died during the run (see $OUT/NAME.log)
#   check_quiet_log NAME         warns if $OUT/NAME.log is not empty (warn level or above)
#   summarize ARGS...            python3 - ARGS, with bench/summary_lib.py importable

BENCH_SCRIPT=${0##*/}
SRC_BIN=${MANIFOLD_BIN_DIR:-$ROOT/target/release}
# CLK_TCK, MANIFOLD_PORT and MANIFOLD_PID are for the scripts.
# shellcheck disable=SC2034
CLK_TCK=$(getconf CLK_TCK) MANIFOLD_PORT= MANIFOLD_PID=
TMP= BIN= TESTKIT_PID= PRIMARY= PRIMARY_PORT= MARIADB_PID= HAPROXY_PORT= HAPROXY_PID=
REPLICAS= MARIADB_PIDS=
BENCH_STOP=() # names of the variables holding the pids cleanup stops, in the order started

die() { echo "$BENCH_SCRIPT: $*" >&2; exit 1; }

need_tools() { # hint tool...
    local hint=$1 tool
    shift
    for tool in "$@"; do
        command -v "$tool" >/dev/null || die "$tool not found ($hint)"
    done
}

need_binaries() {
    local b
    for b in manifold manifold-testkit; do
        [ -x "$SRC_BIN/$b" ] || die "$SRC_BIN/$b missing: cargo build --release --workspace"
    done
}

stop_pid() { # variable-name
    local pid=${!1:-}
    if [ -n "$pid" ]; then
        { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; } || true
        printf -v "$1" '%s' ''
    fi
}

cleanup() {
    set +e
    if declare -F before_cleanup >/dev/null; then before_cleanup; fi
    local i
    for ((i = ${#BENCH_STOP[@]} - 1; i >= 0; i--)); do stop_pid "${BENCH_STOP[i]}"; done
    if [ -n "$TESTKIT_PID" ]; then
        exec 3>&- # closing the testkit's stdin tears the topology down
        wait "$TESTKIT_PID" 2>/dev/null
    fi
    [ -n "$TMP" ] && rm -rf "$TMP"
}

bench_setup() {
    mkdir -p "$OUT"
    TMP=$(mktemp -d)
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    # Private copies of the binaries: target/release may be rebuilt while this runs.
    BIN=$TMP/bin
    mkdir -p "$BIN"
    cp "$SRC_BIN/manifold" "$SRC_BIN/manifold-testkit" "$BIN/"
}

free_port() { free_ports 1; }
# N distinct free ports on one line: all are held until all are chosen, else the kernel may
# hand the same port out twice.
free_ports() {
    python3 -c 'import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in held])' "$1"
}

wait_port() { # port pid what
    for _ in $(seq 1 300); do
        kill -0 "$2" 2>/dev/null || die "$3 exited early"
        (exec 9<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "$3 did not listen on port $1"
}

kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }

# utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat; the text
# after the ") " closing the command name starts at field 3).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# Busy ticks of the whole machine (user nice system irq softirq steal of /proc/stat's cpu line).
busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# Kernel (system) ticks of a process.
sys_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $13}'; }
# "machine mariadbd proxy proxy_sys": busy_ticks, cpu_ticks of mariadbd, and the cpu_ticks and
# sys_ticks summed over the processes PIDS (a space-separated list; 0 0 without one). A run's
# CPU use is the difference of a sample before and one after it. Fails (and so stops the
# script at `x=$(cpu_sample ...)`) if a process is gone.
cpu_sample() { # ["pid..."]
    local busy mariadb proxy=0 proxy_sys=0 pid t
    busy=$(busy_ticks) || return
    mariadb=$(cpu_ticks "$MARIADB_PID") || return
    for pid in ${1:-}; do
        t=$(cpu_ticks "$pid") || return
        proxy=$((proxy + t))
        t=$(sys_ticks "$pid") || return
        proxy_sys=$((proxy_sys + t))
    done
    echo "$busy $mariadb $proxy $proxy_sys"
}

primary_sql() { mysql -h127.0.0.1 -P"$PRIMARY_PORT" -uapp -papp "$@"; }

# --- topology -------------------------------------------------------------------------------
# The testkit prints one line of key=value pairs once MariaDB is up (primary=host:port,
# pids=<mariadbd pid>,...) and keeps it running until its stdin (fd 3 here) is closed.
start_topology() {
    mkfifo "$TMP/testkit.in"
    "$BIN/manifold-testkit" up --replicas "${TOPOLOGY_REPLICAS:-0}" --user app:app <"$TMP/testkit.in" >"$TMP/topology.txt" 2>"$OUT/testkit.log" &
    TESTKIT_PID=$!
    exec 3>"$TMP/testkit.in"
    for _ in $(seq 1 600); do
        grep -q 'pids=' "$TMP/topology.txt" 2>/dev/null && break
        kill -0 "$TESTKIT_PID" 2>/dev/null || die "manifold-testkit exited: $(cat "$OUT/testkit.log")"
        sleep 0.1
    done
    local topology
    topology=$(head -1 "$TMP/topology.txt")
    PRIMARY=$(kv "$topology" primary)
    PRIMARY_PORT=${PRIMARY##*:}
    MARIADB_PID=$(kv "$topology" pids | cut -d, -f1)
    # shellcheck disable=SC2034
    REPLICAS=$(kv "$topology" replicas) MARIADB_PIDS=$(kv "$topology" pids | tr , ' ')
    [ -n "$PRIMARY_PORT" ] && [ -d "/proc/$MARIADB_PID" ] || die "unexpected topology line: $topology"
    echo "topology: primary $PRIMARY, mariadbd pid $MARIADB_PID"
}

# --- proxies --------------------------------------------------------------------------------
start_haproxy() {
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
    BENCH_STOP+=(HAPROXY_PID)
    haproxy -db -f "$TMP/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
    HAPROXY_PID=$!
    wait_port "$HAPROXY_PORT" "$HAPROXY_PID" haproxy
}

start_manifold() { # VAR NAME [CONFIG [BINARY]]: sets VAR_PORT, VAR_ADMIN_PORT and VAR_PID
    local var=$1 name=$2 port admin_port http_port pid config=() exe=${4:-$BIN/manifold}
    [ -z "${3:-}" ] || config=(--config "$3")
    read -r port admin_port http_port <<<"$(free_ports 3)"
    BENCH_STOP+=("${var}_PID")
    # Several run side by side: each its own admin port and HTTP.
    "$exe" "${config[@]}" --primary "$PRIMARY" --user app:app --listen "127.0.0.1:$port" \
        --admin-listen "127.0.0.1:$admin_port" --http-listen "127.0.0.1:$http_port" \
        --threads "$PROXY_THREADS" --log-level warn >"$OUT/$name.log" 2>&1 &
    pid=$!
    printf -v "${var}_PID" '%s' "$pid"
    printf -v "${var}_PORT" '%s' "$port"
    printf -v "${var}_ADMIN_PORT" '%s' "$admin_port"
    wait_port "$port" "$pid" "$name"
}

# --- env.txt, end-of-run checks, summary ----------------------------------------------------
env_header() {
    echo "date: $(date -u +%FT%TZ)"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "memory: $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "kernel: $(uname -sr)"
    echo "mariadb: $(primary_sql -N -e 'SELECT VERSION()')"
}

manifold_build() {
    echo "manifold: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- crates 2>/dev/null || echo ' (+ uncommitted changes in crates/)'), binary $SRC_BIN/manifold of $(date -u -r "$SRC_BIN/manifold" +%FT%TZ), sha256 $(sha256sum "$BIN/manifold" | cut -c1-12)"
}

load_average() { cut -d' ' -f1-3 /proc/loadavg; }

note_load_at_end() { echo "load average at end: $(load_average)" | tee -a "$OUT/env.txt"; }

check_running() { # name pid
    kill -0 "$2" 2>/dev/null || echo "  !! $1 is no longer running: see $OUT/$1.log" >&2
}

check_quiet_log() { # name
    if [ -s "$OUT/$1.log" ]; then
        echo "  !! $1 logged $(wc -l <"$OUT/$1.log") line(s) at warn level or above: see $OUT/$1.log" >&2
    fi
}

# summarize ARGS...: python3 runs the program on stdin with ARGS and can import
# bench/summary_lib.py (no bytecode is written).
summarize() { PYTHONPATH="$ROOT/bench${PYTHONPATH:+:$PYTHONPATH}" python3 -B - "$@"; }
