#!/usr/bin/env bash
# redis-benchmark SET and GET (and INCR, EVALSHA, XADD) against Debian's redis-server (in
# memory, and with `appendfsync always`), against manifold's Redis door, and the same work as
# SQL through manifold's MySQL port (sysbench with bench/redis_kv.lua), interleaved over
# several rounds, on a topology of its own; requests of two commands (a pipelined GET+INCR,
# XREADGROUP then XACK) with bench/redisload, a go-redis load generator. See bench/README.md.
#
# Settings (environment):
#   ROUNDS=3          rounds; each round runs every cell (test, size, pipeline) on every target,
#                     the targets of one cell one after the other, in the order of TARGETS
#   DURATION=5        seconds a run aims at: its request count is the rate of the cell's
#                     previous run (the warm-up, for round 1) times DURATION
#   REQUESTS=         a fixed request count for every run instead (DURATION is then unused)
#   CLIENTS=128       connections (redis-benchmark -c; sysbench --threads)
#   BENCH_THREADS=2   redis-benchmark --threads
#   SIZES="128 4096"  value sizes in bytes (-d)
#   PIPELINES="1 32"  redis-benchmark -P; manifold-sql runs only at 1 (SQL clients do not
#                     pipeline)
#   TESTS="set get"   in this order within a round, so the GETs read what the SETs wrote;
#                     also: incr (INCR of a counter per key), evalsha (EVALSHA of a script
#                     doing a GET and an INCR), xadd (XADD of one field to a stream per key),
#                     and with bench/redisload (needs Go >= 1.26; go-redis v9 from the Go
#                     module proxy, once): getincr-pipe (GET key:<r> and INCR counter:<r>
#                     sent as one pipeline, both replies then read: one request, the baseline
#                     an EVALSHA of the script should cost no more than), xreadgroup
#                     (XREADGROUP GROUP g <consumer> COUNT 1 STREAMS <stream> >, then XACK of
#                     the entry it got: one request); none of these on manifold-sql. At -P p,
#                     redisload sends p requests at once (p pairs in one pipeline; p
#                     XREADGROUPs, then their p XACKs)
#   XSTREAMS=         streams of xreadgroup (default CLIENTS: one per connection, no two
#                     consumers contending for a group; fewer: CLIENTS/XSTREAMS consumers
#                     share each stream's group g). Before each run, every stream is emptied
#                     and refilled (outside the measured time) with twice its share of the
#                     run's requests (plus slack) of one field of the run's size, pipelined,
#                     so a run never drains it (a drained read counts as an error)
#   KEYS=100000       key space (-r); before the runs of a size, every key is written on
#                     every target with a value of that size, so every GET hits
#   TARGETS="redis redis-aof manifold manifold-sql"
#                     redis: redis-server --save '' --appendonly no (the in-memory ceiling);
#                     redis-aof: --appendonly yes --appendfsync always (Redis durable);
#                     manifold: the Redis door with its defaults ([redis] listen only);
#                     manifold-sql: the same manifold's MySQL port, a point select by key
#                     (GET) or an autocommit upsert (SET) per request, prepared statements;
#                     manifold-fixed (a target to add): a second manifold's door with
#                     pool.adaptive = false (a pool may lend up to max_size connections)
#   PROXY_THREADS=2   manifold --threads
#   DB_DURABLE=1      1: SET GLOBAL innodb_flush_log_at_trx_commit = 1, sync_binlog = 1 on the
#                     testkit's MariaDB (which starts with 2 and 0), so a commit is as durable
#                     as redis-aof's write; 0: the testkit's settings
#   DB_BUFFER_POOL=1073741824  innodb_buffer_pool_size set on the primary (the testkit's 64 MiB
#                     does not hold 100,000 values of 4 KiB); empty: the testkit's
#   WARMUP=1          seconds of unrecorded load per cell and target before its first run (a
#                     first short run, repeated larger until one lasts WARMUP: its rate sizes
#                     the first measured run)
#   DB_SET=           more global settings for the primary, space-separated NAME=VALUE pairs
#                     (e.g. "binlog_row_image=MINIMAL binlog_annotate_row_events=OFF
#                     binlog_cache_size=1048576"), each run as SET GLOBAL NAME = VALUE
#   PERF=             "test:size:pipeline" (e.g. get:128:32): after the rounds, one more run of
#                     that cell on manifold under `perf record -g` of manifold and mariadbd
#                     (not in the medians); the report goes to $OUT/perf-*.txt
#   OUT=bench/out/redis-<UTC time>   where raw results go
#   MANIFOLD_BIN_DIR=target/release  manifold and manifold-testkit are copied from here
#
# Per run (raw.csv): requests, requests/s and latencies (redis-benchmark's CSV; sysbench's
# report), the CPU (utime + stime, /proc/<pid>/stat) of the server process (redis-server;
# manifold) and of mariadbd over the run, per request, the load generator's CPU, and
# MariaDB's counters over the run (statements, binlog commits and group commits, fsyncs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
REQUESTS=${REQUESTS:-}
CLIENTS=${CLIENTS:-128}
BENCH_THREADS=${BENCH_THREADS:-2}
SIZES=${SIZES:-"128 4096"}
PIPELINES=${PIPELINES:-"1 32"}
TESTS=${TESTS:-"set get"}
KEYS=${KEYS:-100000}
TARGETS=${TARGETS:-"redis redis-aof manifold manifold-sql"}
PROXY_THREADS=${PROXY_THREADS:-2}
DB_DURABLE=${DB_DURABLE:-1}
DB_BUFFER_POOL=${DB_BUFFER_POOL-1073741824}
DB_SET=${DB_SET:-}
PERF=${PERF:-}
WARMUP=${WARMUP:-1}
OUT=${OUT:-$ROOT/bench/out/redis-$(date -u +%Y%m%dT%H%M%SZ)}
LUA=$ROOT/bench/redis_kv.lua

need_tools "apt-get install -y redis-server redis-tools sysbench mariadb-client python3 time" \
    redis-server redis-benchmark redis-cli sysbench mysql python3 /usr/bin/time
need_binaries
[ -r "$LUA" ] || die "$LUA missing"
for t in $TARGETS; do
    case $t in redis | redis-aof | manifold | manifold-sql | manifold-fixed) ;; *) die "unknown target $t (redis, redis-aof, manifold, manifold-sql, manifold-fixed)" ;; esac
done
for t in $TESTS; do
    case $t in set | get | incr | evalsha | xadd | getincr-pipe | xreadgroup) ;; *) die "unknown test $t (set, get, incr, evalsha, xadd, getincr-pipe, xreadgroup)" ;; esac
done
XSTREAMS=${XSTREAMS:-$CLIENTS}
# The tests redisload runs (the rest are redis-benchmark's).
redisload_test() { case $1 in getincr-pipe | xreadgroup) return 0 ;; *) return 1 ;; esac; }
[ -n "$PERF" ] && need_tools "apt-get install -y linux-perf" perf
wanted() { case " $TARGETS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# --- servers --------------------------------------------------------------------------------
bench_setup
REDISLOAD=
for t in $TESTS; do
    if redisload_test "$t"; then
        REDISLOAD=$BIN/redisload
        "$ROOT/bench/redisload/build.sh" "$REDISLOAD" >"$OUT/redisload-build.log" 2>&1 ||
            die "building bench/redisload failed: see $OUT/redisload-build.log"
        break
    fi
done
start_topology
if [ "$DB_DURABLE" = 1 ]; then
    primary_sql -e 'SET GLOBAL innodb_flush_log_at_trx_commit = 1; SET GLOBAL sync_binlog = 1'
fi
for setting in $DB_SET; do
    [[ $setting =~ ^[a-z_]+=[A-Za-z0-9_]+$ ]] || die "DB_SET: '$setting' is not NAME=VALUE"
    primary_sql -e "SET GLOBAL ${setting%%=*} = ${setting#*=}"
done
if [ -n "$DB_BUFFER_POOL" ]; then
    primary_sql -e "SET GLOBAL innodb_buffer_pool_size = $DB_BUFFER_POOL"
    for _ in $(seq 1 100); do
        [ "$(primary_sql -N -e 'SELECT @@innodb_buffer_pool_size')" -ge "$DB_BUFFER_POOL" ] && break
        sleep 0.2
    done
fi

REDIS_PID= REDIS_PORT= AOF_PID= AOF_PORT=
start_redis() { # VAR NAME ARGS...: sets VAR_PID and VAR_PORT
    local var=$1 name=$2 port pid dir=$TMP/$2
    shift 2
    port=$(free_port)
    mkdir -p "$dir"
    BENCH_STOP+=("${var}_PID")
    # The same account as manifold's (app/app), no usable default user, as in the tests.
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --logfile "$OUT/$name.log" \
        --user app on '>app' '~*' '&*' '+@all' --user default off "$@" &
    pid=$!
    printf -v "${var}_PID" '%s' "$pid"
    printf -v "${var}_PORT" '%s' "$port"
    wait_port "$port" "$pid" "$name"
}
wanted redis && start_redis REDIS redis --save '' --appendonly no
wanted redis-aof && start_redis AOF redis-aof --save '' --appendonly yes --appendfsync always

# One manifold serves both manifold targets: the door on DOOR_PORT, SQL on MANIFOLD_PORT.
DOOR_PORT=$(free_port)
printf '[redis]\nlisten = "127.0.0.1:%s"\n' "$DOOR_PORT" >"$OUT/manifold.toml"
start_manifold MANIFOLD manifold "$OUT/manifold.toml"
wait_port "$DOOR_PORT" "$MANIFOLD_PID" "manifold's Redis door"
FIXED_PID= FIXED_DOOR_PORT=
if wanted manifold-fixed; then
    FIXED_DOOR_PORT=$(free_port)
    printf '[redis]\nlisten = "127.0.0.1:%s"\n\n[pool]\nadaptive = false\n' "$FIXED_DOOR_PORT" >"$OUT/manifold-fixed.toml"
    start_manifold FIXED manifold-fixed "$OUT/manifold-fixed.toml"
    wait_port "$FIXED_DOOR_PORT" "$FIXED_PID" "manifold-fixed's Redis door"
    echo "manifold-fixed pid $FIXED_PID: Redis door $FIXED_DOOR_PORT"
fi
echo "manifold pid $MANIFOLD_PID: MySQL port $MANIFOLD_PORT, Redis door $DOOR_PORT; redis pid ${REDIS_PID:--} port ${REDIS_PORT:--}; redis-aof pid ${AOF_PID:--} port ${AOF_PORT:--}"

port_of() { case $1 in redis) echo "$REDIS_PORT" ;; redis-aof) echo "$AOF_PORT" ;; manifold) echo "$DOOR_PORT" ;; manifold-sql) echo "$MANIFOLD_PORT" ;; manifold-fixed) echo "$FIXED_DOOR_PORT" ;; esac; }
# The process whose CPU is the server's (mariadbd's is read beside it).
pid_of() { case $1 in redis) echo "$REDIS_PID" ;; redis-aof) echo "$AOF_PID" ;; manifold | manifold-sql) echo "$MANIFOLD_PID" ;; manifold-fixed) echo "$FIXED_PID" ;; esac; }

# --- environment ----------------------------------------------------------------------------
{
    env_header
    echo "redis-server: $(redis-server --version)"
    echo "redis-benchmark: $(redis-benchmark --version)"
    echo "sysbench: $(sysbench --version)"
    [ -z "$REDISLOAD" ] || echo "redisload: go-redis $(sed -n 's/^require github.com\/redis\/go-redis\/v9 //p' "$ROOT/bench/redisload/go.mod"), $("${GO:-$(command -v go || echo /usr/local/go/bin/go)}" version)"
    manifold_build
    echo "mariadb settings: $(primary_sql -N -e 'SELECT CONCAT("innodb_flush_log_at_trx_commit=", @@innodb_flush_log_at_trx_commit, " sync_binlog=", @@sync_binlog, " log_bin=", @@log_bin, " binlog_format=", @@binlog_format, " binlog_row_image=", @@binlog_row_image, " binlog_annotate_row_events=", @@binlog_annotate_row_events, " binlog_cache_size=", @@binlog_cache_size, " innodb_buffer_pool_size=", @@innodb_buffer_pool_size, " max_allowed_packet=", @@max_allowed_packet)')"
    echo "load average at start: $(load_average)"
    echo "settings: ROUNDS=$ROUNDS DURATION=$DURATION REQUESTS=$REQUESTS CLIENTS=$CLIENTS BENCH_THREADS=$BENCH_THREADS SIZES=\"$SIZES\" PIPELINES=\"$PIPELINES\" TESTS=\"$TESTS\" XSTREAMS=$XSTREAMS KEYS=$KEYS TARGETS=\"$TARGETS\" PROXY_THREADS=$PROXY_THREADS DB_DURABLE=$DB_DURABLE DB_BUFFER_POOL=$DB_BUFFER_POOL DB_SET=\"$DB_SET\" CLK_TCK=$CLK_TCK"
} | tee "$OUT/env.txt"

# --- data -----------------------------------------------------------------------------------
# The SQL target's table, shaped like the door's key rows: a key, its value, a version every
# write bumps (as the door's upsert does: without it, an upsert of the value a row already
# holds changes nothing, and MariaDB commits nothing to its binlog).
primary_sql -e 'CREATE DATABASE kvbench; CREATE TABLE kvbench.kv (k VARBINARY(64) NOT NULL PRIMARY KEY, v LONGBLOB NOT NULL, version BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB'

# SET key:<12 digits> <size x's> for every key of the key space, as RESP.
set_all_resp() { # size
    python3 -c 'import sys
keys, size = int(sys.argv[1]), int(sys.argv[2])
v = b"x" * size
head = b"*3\r\n$3\r\nSET\r\n$16\r\n"
tail = b"\r\n$%d\r\n%s\r\n" % (size, v)
out = sys.stdout.buffer
for i in range(keys):
    out.write(head + b"key:%012d" % i + tail)' "$KEYS" "$1"
}

# Every key with a value of SIZE bytes, on every target.
populate() { # size
    local size=$1 t log
    for t in $TARGETS; do
        log="$OUT/populate-$size-$t.log"
        case $t in
        manifold-sql)
            local from=0 to
            while [ "$from" -lt "$KEYS" ]; do
                to=$((from + 10000 < KEYS ? from + 10000 : KEYS))
                primary_sql kvbench -e "INSERT INTO kvbench.kv (k, v) SELECT CONCAT('key:', LPAD(seq, 12, '0')), REPEAT('x', $size) FROM seq_${from}_to_$((to - 1)) ON DUPLICATE KEY UPDATE v = VALUES(v)"
                from=$to
            done
            [ "$(primary_sql -N -e "SELECT COUNT(*) FROM kvbench.kv WHERE LENGTH(v) = $size")" = "$KEYS" ] ||
                die "kvbench.kv does not hold $KEYS values of $size bytes"
            ;;
        *)
            set_all_resp "$size" | redis-cli -p "$(port_of "$t")" --user app -a app --no-auth-warning --pipe >"$log" 2>&1 ||
                die "populating $t failed: see $log"
            grep -q "errors: 0, replies: $KEYS" "$log" || die "populating $t: $(tail -1 "$log")"
            ;;
        esac
    done
}

# MariaDB's counters: Questions (statements), Binlog_commits, Binlog_group_commits,
# Innodb_data_fsyncs, in that order.
db_counters() {
    primary_sql -N -e "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Binlog_commits', 'Binlog_group_commits', 'Innodb_data_fsyncs')" |
        awk '{v[$1] = $2} END {print v["Questions"], v["Binlog_commits"], v["Binlog_group_commits"], v["Innodb_data_fsyncs"]}'
}

# Transactions whose undo MariaDB has yet to purge (its history list).
purge_backlog() { primary_sql -N -e "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'" | awk '{print $2}'; }

# Waits (up to 30 s) until MariaDB has purged what came before: a refill of the streams
# deletes the previous run's entries, and purging their rows in the background would be
# counted as the next run's MariaDB CPU. Notes the backlog and the wait in LOG.
wait_purged() { # log
    local backlog first i
    for i in $(seq 0 300); do
        backlog=$(purge_backlog)
        first=${first-$backlog}
        if [ -z "$backlog" ] || [ "$backlog" -le 10 ]; then break; fi
        sleep 0.1
    done
    echo "Innodb_history_list_length ${first:-?}, ${backlog:-?} after ${i}00 ms" >>"$1"
}

# --- runs -----------------------------------------------------------------------------------
CSV="$OUT/raw.csv"
echo "size,round,test,pipeline,target,requests,rps,avg_ms,p50_ms,p99_ms,errors,server_cpu_s,mariadb_cpu_s,server_us_per_req,mariadb_us_per_req,client_us_per_req,other_cpu_s,db_stmts_per_req,db_commits,db_group_commits,db_fsyncs,exit" >"$CSV"
declare -A RATE=()

# The script the evalsha test runs: a read and a write, as a small script of an application.
EVAL_SCRIPT="local v = redis.call('GET', KEYS[1]) return redis.call('INCR', KEYS[2])"
EVAL_SHA=$(printf '%s' "$EVAL_SCRIPT" | sha1sum | cut -d' ' -f1)

# redis-benchmark's arguments for a test: a built-in test (-t) or the command itself.
bench_command() { # test size
    case $1 in
    set | get | incr) echo "-t $1" ;;
    evalsha) echo "EVALSHA $EVAL_SHA 2 key:__rand_int__ counter:__rand_int__" ;;
    xadd) echo "XADD stream:__rand_int__ * field $(head -c "$2" /dev/zero | tr '\0' x)" ;;
    esac
}

# One run; prints its CSV row (and appends it to raw.csv unless round is "perf").
run_one() { # target test size pipeline round requests
    local target=$1 test=$2 size=$3 p=$4 round=$5 n=$6 port pid log status=0 cpu0 cpu1 db0 db1
    port=$(port_of "$target")
    pid=$(pid_of "$target")
    log="$OUT/$test-$size-p$p-r$round-$target.log"
    if [ "$test" = xreadgroup ]; then
        # Fresh streams with entries enough for the run, before its counters are read: twice
        # each stream's share (clients take requests as they go, so some take more than
        # others), plus a few pipelines' worth.
        local share=$(((n + XSTREAMS - 1) / XSTREAMS))
        "$REDISLOAD" -addr "127.0.0.1:$port" -user app -password app -test fill-streams \
            -streams "$XSTREAMS" -entries $((share * 2 + 8 * p)) -size "$size" \
            >"$log.fill" 2>&1 || die "filling the streams of $target failed: see $log.fill"
        case $target in manifold*) wait_purged "$log.fill" ;; esac
    fi
    db0=$(db_counters)
    cpu0=$(cpu_sample "$pid")
    if redisload_test "$test"; then
        # GOMAXPROCS as redis-benchmark's --threads: the load generator's share of the cores.
        GOMAXPROCS=$BENCH_THREADS /usr/bin/time -f '%U %S' -o "$log.time" "$REDISLOAD" -addr "127.0.0.1:$port" \
            -user app -password app -test "$test" -clients "$CLIENTS" -requests "$n" -pipeline "$p" \
            -keys "$KEYS" -streams "$XSTREAMS" >"$log" 2>&1 || status=$?
    elif [ "$target" = manifold-sql ]; then
        /usr/bin/time -f '%U %S' -o "$log.time" sysbench "$LUA" --db-driver=mysql --mysql-host=127.0.0.1 \
            --mysql-port="$port" --mysql-user=app --mysql-password=app --mysql-db=kvbench --db-ps-mode=auto \
            --threads="$CLIENTS" --events="$n" --time=0 --percentile=99 --kv_test="$test" --kv_size="$size" \
            --kv_keys="$KEYS" run >"$log" 2>&1 || status=$?
    else
        # No globbing while the command's words are split (XADD's `*`).
        set -f
        /usr/bin/time -f '%U %S' -o "$log.time" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" \
            --threads "$BENCH_THREADS" -r "$KEYS" -d "$size" -P "$p" -n "$n" --csv \
            --user app -a app $(bench_command "$test" "$size") >"$log" 2>&1 || status=$?
        set +f
    fi
    cpu1=$(cpu_sample "$pid")
    db1=$(db_counters)
    awk -v size="$size" -v round="$round" -v test="$test" -v p="$p" -v target="$target" -v n="$n" \
        -v status="$status" -v cpu0="$cpu0" -v cpu1="$cpu1" -v db0="$db0" -v db1="$db1" -v hz="$CLK_TCK" \
        -v client="$(awk '{print $1 + $2}' "$log.time" 2>/dev/null | tail -1)" '
        # redis-benchmark --csv: "SET","rps","avg","min","p50","p95","p99","max"; redisload
        # prints the same, "GET+INCR" or "XREADGROUP+XACK" first
        /^"(SET|GET|INCR|EVALSHA|XADD|XREADGROUP)/ { gsub(/"/, ""); split($0, f, ","); reqs = n; rps = f[2]; avg = f[3]; p50 = f[5]; p99 = f[7] }
        # Errors a server sent back, which redis-benchmark does not count as failures.
        /^(Error|ERR|-ERR)|Error from server/ { errors++ }
        # redisload: the requests it completed, and the failed ones among them (error replies,
        # drained streams, broken connections)
        /^redisload: requests / { reqs = $3; errors += $7 }
        # sysbench
        /^ *transactions:/ { reqs = $2; rps = $3; gsub(/\(/, "", rps) }
        /^ *avg:/ { avg = $2 }
        /99th percentile:/ { p99 = $3 }
        /ignored errors:/ { errors += $3 }
        /FATAL/ { errors++ }
        END {
            split(cpu0, ca); split(cpu1, cb); busy = (cb[1] - ca[1]) / hz
            db = (cb[2] - ca[2]) / hz; srv = (cb[3] - ca[3]) / hz
            split(db0, qa); split(db1, qb)
            other = busy - db - srv - client
            if (reqs > 0) {
                su = sprintf("%.2f", srv * 1e6 / reqs); mu = sprintf("%.2f", db * 1e6 / reqs)
                cu = sprintf("%.2f", client * 1e6 / reqs)
                # Less the two readings of the counters themselves.
                st = sprintf("%.3f", (qb[1] - qa[1] - 2) / reqs)
            } else {
                su = mu = cu = st = ""
            }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%.2f,%.2f,%s,%s,%s,%.2f,%s,%d,%d,%d,%s\n", size, round, test, p,
                target, reqs, rps, avg, p50, p99, errors, srv, db, su, mu, cu, other, st, qb[2] - qa[2],
                qb[3] - qa[3], qb[4] - qa[4], status
        }' "$log" | if [ "$round" = perf ]; then cat; else tee -a "$CSV"; fi
    if [ "$status" != 0 ] || grep -Eq 'FATAL|Error from server|^ERR|^redisload: first error' "$log"; then
        echo "  !! $target failed (exit $status): see $log" >&2
    fi
}

# The request count of a cell's next run: REQUESTS, or the previous run's rate × DURATION
# (at least 4 pipelines' worth per connection).
requests_for() { # key pipeline
    local min=$((CLIENTS * $2 * 4))
    if [ -n "$REQUESTS" ]; then
        echo "$REQUESTS"
    else
        awk -v r="${RATE[$1]}" -v d="$DURATION" -v m="$min" 'BEGIN { n = int(r * d); print (n > m ? n : m) }'
    fi
}

cell() { # target test size pipeline round
    local key="$1|$2|$3|$4" row n i rate
    # Before a cell's first run on a target, warm-up runs (round 0) until one lasts WARMUP
    # seconds (at most 3): the last one's rate sizes the first measured run.
    if [ -z "${RATE[$key]:-}" ]; then
        n=$((CLIENTS * $4 * 8 > 5000 ? CLIENTS * $4 * 8 : 5000))
        for i in 1 2 3; do
            [ -n "$REQUESTS" ] && n=$REQUESTS
            row=$(run_one "$1" "$2" "$3" "$4" 0 "$n")
            rate=$(cut -d, -f7 <<<"$row")
            RATE[$key]=$rate
            [ -z "$REQUESTS" ] || break
            awk -v n="$n" -v r="$rate" -v w="$WARMUP" 'BEGIN { exit !(r > 0 && n / r < w * 0.8) }' || break
            n=$(awk -v n="$n" -v r="$rate" -v w="$WARMUP" 'BEGIN { m = int(r * w * 1.5); print (m > n ? m : n * 2) }')
        done
    fi
    row=$(run_one "$1" "$2" "$3" "$4" "$5" "$(requests_for "$key" "$4")")
    echo "$row"
    RATE[$key]=$(cut -d, -f7 <<<"$row")
}

echo "$CLIENTS clients, ${REQUESTS:-$DURATION s of} requests per run, $ROUNDS rounds; raw results in $CSV (round 0: warm-up)"
head -1 "$CSV"
for size in $SIZES; do
    echo "writing $KEYS keys of $size bytes on every target"
    populate "$size"
    case " $TESTS " in *" evalsha "*)
        for t in $TARGETS; do
            [ "$t" = manifold-sql ] && continue
            [ "$(redis-cli -p "$(port_of "$t")" --user app -a app --no-auth-warning SCRIPT LOAD "$EVAL_SCRIPT")" = "$EVAL_SHA" ] ||
                die "SCRIPT LOAD on $t did not answer $EVAL_SHA"
        done
        ;;
    esac
    for round in $(seq 1 "$ROUNDS"); do
        for test in $TESTS; do
            for p in $PIPELINES; do
                for target in $TARGETS; do
                    # SQL clients do not pipeline.
                    [ "$target" = manifold-sql ] && [ "$p" != 1 ] && continue
                    [ "$target" = manifold-sql ] && [ "$test" != set ] && [ "$test" != get ] && continue
                    cell "$target" "$test" "$size" "$p" "$round"
                done
            done
        done
    done
done

# A profile of one cell on manifold, outside the measured rounds.
if [ -n "$PERF" ]; then
    IFS=: read -r ptest psize pp <<<"$PERF"
    [ "$psize" = "${SIZES##* }" ] || populate "$psize"
    pdata="$OUT/perf-$ptest-$psize-p$pp.data"
    perf record -e cpu-clock -F 499 -g -p "$MANIFOLD_PID,$MARIADB_PID" -o "$pdata" >"$OUT/perf-record.log" 2>&1 &
    perf_pid=$!
    sleep 1
    echo "profiled run (not in the medians):"
    run_one manifold "$ptest" "$psize" "$pp" perf "$(requests_for "manifold|$ptest|$psize|$pp" "$pp")"
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    perf report -i "$pdata" --stdio --no-children --sort comm,dso,symbol --percent-limit 0.5 \
        >"$OUT/perf-$ptest-$psize-p$pp.txt" 2>/dev/null || true
    perf report -i "$pdata" --stdio --no-children --sort comm,dso --percent-limit 0.5 -g none \
        >"$OUT/perf-$ptest-$psize-p$pp-dso.txt" 2>/dev/null || true
    echo "profile: $OUT/perf-$ptest-$psize-p$pp.txt"
fi

note_load_at_end
check_running manifold "$MANIFOLD_PID"
check_quiet_log manifold
wanted manifold-fixed && check_running manifold-fixed "$FIXED_PID"
wanted redis && check_running redis "$REDIS_PID"
wanted redis-aof && check_running redis-aof "$AOF_PID"

# --- summary --------------------------------------------------------------------------------
summarize "$CSV" <"$ROOT/bench/redis_summary.py" | tee "$OUT/summary.md"
echo "raw results: $OUT"
