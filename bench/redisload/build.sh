#!/usr/bin/env bash
# Builds redisload (main.go) to OUT with go-redis v9 from the Go module proxy, as
# tests/go-redis/run.sh does (scripts/go-module-build.sh). Exit 3: no usable Go toolchain.
#
#   bench/redisload/build.sh OUT
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/go-module-build.sh
. "$HERE/../../scripts/go-module-build.sh"
[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
go_module_build "$HERE" "$1"
