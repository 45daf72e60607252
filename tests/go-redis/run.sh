#!/usr/bin/env bash
# Builds the go-redis v9 check program (main.go) with the module from the Go module proxy.
#
#   run.sh build OUT        build the program to OUT (used by tests/python/test_redis_clients.py)
#   run.sh run ADDR USER PASSWORD PREFIX
#                           build it in a temporary directory and run it, for reproducing by
#                           hand, e.g. run.sh run 127.0.0.1:6379 app app gor:
#
# The modules go to target/gomodcache (git-ignored) once; after that, building needs no
# network (GOPROXY=off). Exit 3: no usable Go toolchain.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/go-module-build.sh
. "$HERE/../../scripts/go-module-build.sh"

case "${1:-}" in
    build)
        [ $# -eq 2 ] || { echo "usage: $0 build OUT" >&2; exit 2; }
        go_module_build "$HERE" "$2"
        ;;
    run)
        shift
        [ $# -eq 4 ] || { echo "usage: $0 run ADDR USER PASSWORD PREFIX" >&2; exit 2; }
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        go_module_build "$HERE" "$tmp/go-redis-check"
        "$tmp/go-redis-check" "$@"
        ;;
    *)
        echo "usage: $0 build OUT | $0 run ADDR USER PASSWORD PREFIX" >&2
        exit 2
        ;;
esac
