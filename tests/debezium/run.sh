#!/usr/bin/env bash
# Builds the Debezium check program (src/main/java/manifold/debezium/Main.java: Debezium's
# embedded engine printing change events as JSON lines) with the artifacts from Maven Central.
#
#   run.sh build            build it; prints the classpath to run manifold.debezium.Main with
#                           (used by tests/python/test_debezium.py)
#   run.sh run KEY=VALUE... build it and run one engine, for reproducing by hand (the test
#                           runs one JVM for many engines: `start NAME KEY=VALUE...` and
#                           `stop NAME` lines on its stdin, see Main.java), e.g.
#                           run.sh run connector=mariadb dir=/tmp/dbz database.hostname=127.0.0.1 \
#                             database.port=6033 database.user=app database.password=app \
#                             database.include.list=shop snapshot.mode=initial
#
# The artifacts go to target/m2 (git-ignored) once; after that, building needs no network
# (mvn -o), and a build whose sources did not change since the last is not run again. The
# build output is target/debezium-check. Exit 3: no Java 17+ or Maven (see scripts/setup).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
REPO="$ROOT/target/m2"
OUT="$ROOT/target/debezium-check"

for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "$tool not found: run scripts/setup (it installs openjdk-17-jdk-headless and maven)" >&2
        exit 3
    fi
done

build() {
    local mvn=(mvn -B -q -f "$HERE/pom.xml" -Dmaven.repo.local="$REPO"
               compile dependency:build-classpath -Dmdep.outputFile="$OUT/classpath.txt")
    local stamp="$OUT/built.stamp"
    # Built already from these sources: Maven is not even started (it costs seconds).
    if [ -f "$stamp" ] && [ -z "$(find "$HERE/pom.xml" "$HERE/src" -newer "$stamp" -print -quit)" ] \
        && [ -z "$(tr ':' '\n' <"$OUT/classpath.txt" | while read -r jar; do [ -e "$jar" ] || echo "$jar"; done)" ]; then
        echo "$OUT/classes:$(cat "$OUT/classpath.txt")"
        return
    fi
    # The pinned artifacts, fetched once; later builds are offline.
    if ! "${mvn[@]}" -o >"$OUT.log" 2>&1; then
        mkdir -p "$OUT"
        "${mvn[@]}" >"$OUT.log" 2>&1 || { cat "$OUT.log" >&2; exit 1; }
    fi
    touch "$stamp"
    echo "$OUT/classes:$(cat "$OUT/classpath.txt")"
}

case "${1:-}" in
    build)
        [ $# -eq 1 ] || { echo "usage: $0 build" >&2; exit 2; }
        mkdir -p "$ROOT/target"
        build
        ;;
    run)
        shift
        mkdir -p "$ROOT/target"
        cp="$(build)"
        exec java -cp "$cp" manifold.debezium.Main "$@"
        ;;
    *)
        echo "usage: $0 build | $0 run KEY=VALUE..." >&2
        exit 2
        ;;
esac
