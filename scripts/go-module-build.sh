# shellcheck shell=bash
# Sourced by the Go programs' build scripts (tests/go-redis/run.sh, bench/redisload/build.sh):
# `go_module_build DIR OUT` builds the Go module in DIR to OUT with its pinned modules
# (go.mod, checked against go.sum), fetched from the Go module proxy into target/gomodcache
# (git-ignored) once; after that, building needs no network (GOPROXY=off). Exits 3 when
# there is no usable Go toolchain.

GO_MODULE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

go_module_build() {
    local dir="$1" out="$2"
    local go="${GO:-$(command -v go || true)}"
    [ -n "$go" ] || go=/usr/local/go/bin/go
    if ! [ -x "$go" ]; then
        echo "go not found (looked on PATH and at /usr/local/go/bin/go): install Go >= 1.26 from https://go.dev/dl/ or set GO=/path/to/go" >&2
        exit 3
    fi
    # Where to download from: the environment's proxy setting, or the default one. Builds
    # are offline.
    local online
    online="$("$go" env GOPROXY)"
    case "$online" in "" | off) online=https://proxy.golang.org,direct ;; esac
    case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
    (
        export GOMODCACHE="$GO_MODULE_ROOT/target/gomodcache"
        export GOFLAGS="-mod=readonly -buildvcs=false"
        export GOTOOLCHAIN=local
        export GOPROXY=off
        cd "$dir" || exit 3
        if ! "$go" mod download >/dev/null 2>&1; then
            GOPROXY="$online" "$go" mod download
        fi
        # -trimpath keeps the checkout's path out of the build cache key: rebuilds are cached.
        "$go" build -trimpath -o "$out" .
    )
}
