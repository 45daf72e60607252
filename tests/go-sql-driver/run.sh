#!/usr/bin/env bash
# Fetches the go-sql-driver/mysql test suite from the Go module proxy and builds or runs it.
#
#   run.sh prepare DIR      copy the pinned module into DIR/src, compile DIR/src/mysql.test,
#                           print that path (used by tests/python/test_go_sql_driver.py)
#   run.sh test [ARGS...]   go test -v ARGS in a temporary copy, for reproducing by hand, e.g.
#                           MYSQL_TEST_ADDR=127.0.0.1:6033 MYSQL_TEST_USER=app MYSQL_TEST_PASS=app \
#                           MYSQL_TEST_DBNAME=gotest run.sh test -run '^TestTLS$'
#
# The module and its dependencies go to target/gomodcache (git-ignored) once; after that,
# building needs no network (GOPROXY=off). Exit 3: no usable Go toolchain.
set -euo pipefail

VERSION="${GSD_VERSION:-v1.10.1}"
MODULE=github.com/go-sql-driver/mysql
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

GO="${GO:-$(command -v go || true)}"
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if ! [ -x "$GO" ]; then
    echo "go not found (looked on PATH and at /usr/local/go/bin/go): install Go >= 1.24 from https://go.dev/dl/ or set GO=/path/to/go" >&2
    exit 3
fi

# Where to download from: the environment's proxy setting, or the default one. Builds are offline.
ONLINE_PROXY="$("$GO" env GOPROXY)"
case "$ONLINE_PROXY" in ""|off) ONLINE_PROXY=https://proxy.golang.org,direct ;; esac
export GOMODCACHE="$ROOT/target/gomodcache"
export GOFLAGS="-mod=mod -buildvcs=false"
export GOTOOLCHAIN=local
export GOPROXY=off

MODDIR="$GOMODCACHE/$MODULE@$VERSION"

prepare() {
    local dir="$1"
    if ! [ -f "$MODDIR/driver_test.go" ]; then
        GOPROXY="$ONLINE_PROXY" "$GO" mod download -json "$MODULE@$VERSION" >/dev/null
    fi
    rm -rf "$dir/src"
    mkdir -p "$dir"
    cp -r "$MODDIR" "$dir/src"
    chmod -R u+w "$dir/src"
    cd "$dir/src"
    # Its own dependencies (filippo.io/edwards25519), checked against the module's go.sum.
    if ! "$GO" mod download >/dev/null 2>&1; then
        GOPROXY="$ONLINE_PROXY" "$GO" mod download
    fi
    # -trimpath keeps the temporary directory out of the build cache key: rebuilds are cached.
    "$GO" test -c -trimpath -o "$dir/src/mysql.test" . >&2
    echo "$dir/src/mysql.test"
}

case "${1:-}" in
    prepare)
        [ $# -eq 2 ] || { echo "usage: $0 prepare DIR" >&2; exit 2; }
        prepare "$(mkdir -p "$2" && cd "$2" && pwd)"
        ;;
    test)
        shift
        tmp="$(mktemp -d)"
        trap 'rm -rf "$tmp"' EXIT
        prepare "$tmp" >/dev/null
        cd "$tmp/src"
        "$GO" test -trimpath -count=1 -v "$@" .
        ;;
    *)
        echo "usage: $0 prepare DIR | $0 test [go test args]" >&2
        exit 2
        ;;
esac
