#!/usr/bin/env bash
# Builds redisload (main.go) to OUT with go-redis v9 from the Go module proxy, as
# tests/go-redis/run.sh does: the modules go to target/gomodcache (git-ignored) once; after
# that, building needs no network. Exit 3: no usable Go toolchain.
#
#   bench/redisload/build.sh OUT
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
out=$1
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if ! [ -x "$GO" ]; then
    echo "go not found (looked on PATH and at /usr/local/go/bin/go): install Go >= 1.26 from https://go.dev/dl/ or set GO=/path/to/go" >&2
    exit 3
fi

ONLINE_PROXY="$("$GO" env GOPROXY)"
case "$ONLINE_PROXY" in "" | off) ONLINE_PROXY=https://proxy.golang.org,direct ;; esac
export GOMODCACHE="$ROOT/target/gomodcache"
export GOFLAGS="-mod=readonly -buildvcs=false"
export GOTOOLCHAIN=local
export GOPROXY=off

cd "$HERE"
# The pinned modules (go.mod, checked against go.sum), fetched once.
if ! "$GO" mod download >/dev/null 2>&1; then
    GOPROXY="$ONLINE_PROXY" "$GO" mod download
fi
"$GO" build -trimpath -o "$out" .
