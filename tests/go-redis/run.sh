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
ROOT="$(cd "$HERE/../.." && pwd)"

GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if ! [ -x "$GO" ]; then
    echo "go not found (looked on PATH and at /usr/local/go/bin/go): install Go >= 1.26 from https://go.dev/dl/ or set GO=/path/to/go" >&2
    exit 3
fi

# Where to download from: the environment's proxy setting, or the default one. Builds are offline.
ONLINE_PROXY="$("$GO" env GOPROXY)"
case "$ONLINE_PROXY" in ""|off) ONLINE_PROXY=https://proxy.golang.org,direct ;; esac
export GOMODCACHE="$ROOT/target/gomodcache"
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOTOOLCHAIN=local
export GOPROXY=off

build() {
    local out="$1"
    cd "$HERE"
    # The pinned modules (go.mod, checked against go.sum), fetched once.
    if ! "$GO" mod download >/dev/null 2>&1; then
        GOPROXY="$ONLINE_PROXY" "$GO" mod download
    fi
    # -trimpath keeps the checkout's path out of the build cache key: rebuilds are cached.
    "$GO" build -trimpath -o "$out" .
}

case "${1:-}" in
    build)
        [ $# -eq 2 ] || { echo "usage: $0 build OUT" >&2; exit 2; }
        out="$2"
        case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
        build "$out"
        ;;
    run)
        shift
        [ $# -eq 4 ] || { echo "usage: $0 run ADDR USER PASSWORD PREFIX" >&2; exit 2; }
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        build "$tmp/go-redis-check"
        "$tmp/go-redis-check" "$@"
        ;;
    *)
        echo "usage: $0 build OUT | $0 run ADDR USER PASSWORD PREFIX" >&2
        exit 2
        ;;
esac
