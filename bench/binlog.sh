#!/usr/bin/env bash
# The global binlog's benchmark. Usage: bench/binlog.sh [load] [decode] [big] [pipeline]
#
#   pipeline  the pipeline alone. (1) crates/binlog/examples/replay.rs on two recorded source
#             binlogs: read and verify, assemble, merge, write the global binlog; events/s and
#             MB/s per CPU-second, per stage too, against `mariadb-binlog
#             --verify-binlog-checksum` decoding the same files (CPU seconds), and the ratio;
#             the written global binlog must decode (mariadb-binlog exit 0). The sources are
#             the load part's (OUT/sources, stamped, with heartbeats) when present, else two
#             primaries get sysbench oltp_write_only straight for RECORD_SECONDS (20) s;
#             REPLAY_RECORD=1 records anew. (2) crates/binlog/benches/pipeline.rs: assembling
#             and merging synthetic transactions of two sources (criterion).
#   load      sysbench oltp_write_only on two clusters through manifold with the binlog on,
#             RUNS (3) x SECONDS_PER_RUN (30) s, THREADS (8) per cluster: EPS, DML EPS, BPS,
#             TPS, files per minute (counted from the global binlog's files), manifold's CPU
#             per event (/proc/<pid>/stat), SHOW BINLOG STATUS of the admin port (delay)
#   decode    mariadb-binlog decoding the source binlog the load wrote (events/s, MB/s)
#   big       one BIG_MIB (1024) MiB transaction through memory_budget = 256M: commit to
#             written, manifold's peak RSS. Needs ~4x BIG_MIB free disk.
#
# FLAVOR=mysql: the sources are MySQL 9.7 (scripts/setup-mysql), the global binlog MySQL's,
# the decoder compared MySQL's mysqlbinlog.
# Binaries from MANIFOLD_BIN_DIR (default target/release). Results in OUT (default
# target/bench-binlog/summary.md); copy the table into bench/RESULTS.md with the machine.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export MANIFOLD_BIN_DIR=${MANIFOLD_BIN_DIR:-$ROOT/target/release}
export OUT=${OUT:-$ROOT/target/bench-binlog}
mkdir -p "$OUT"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(pipeline load decode big)
for tool in sysbench mariadb-binlog python3; do
    command -v "$tool" >/dev/null || { echo "binlog.sh: $tool not found (scripts/setup)" >&2; exit 1; }
done
{
    echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
    echo "date: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/env.txt"
py_parts=()
for p in "${parts[@]}"; do
    case $p in
    pipeline)
        cargo build --release -p manifold-binlog --example replay
        py_parts+=(replay)
        cargo bench -p manifold-binlog --bench pipeline -- --noplot 2>&1 | tee "$OUT/pipeline.txt" \
            | grep -E "time:|thrpt:" || true
        ;;
    load | decode | big) py_parts+=("$p") ;;
    *) echo "binlog.sh: unknown part $p" >&2; exit 2 ;;
    esac
done
if [ ${#py_parts[@]} -gt 0 ]; then
    python3 bench/binlog.py "${py_parts[@]}" | tee "$OUT/run.txt"
fi
