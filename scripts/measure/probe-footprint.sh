#!/usr/bin/env bash
# How many bytes the probes add to each method of Jetty's jars and how
# many methods that moves past HotSpot's inlining sizes (MaxInlineSize
# 35, FreqInlineSize 325): `sprig rewrite` instruments every method of
# each jar, and bench/candidates/CodeLengths.java compares the code
# lengths (docs/overhead.md, "With probes that compile to nothing").
#   bash scripts/measure/probe-footprint.sh [SPRIG] [JARS...]
# Default jars: Debian's libjetty9-java (scripts/setup.sh --bench). Needs
# a JDK 24 or later for java.lang.classfile (the Temurin 25 JDK).
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=$(realpath "${1:-target/release/sprig}")
shift $(( $# >= 1 ? 1 : 0 ))
jdk=${JDK25:-/usr/lib/jvm/temurin-25-jdk-amd64}
[ -x "$jdk/bin/java" ] || { echo "probe-footprint: no JDK 24+ at $jdk (set JDK25)" >&2; exit 1; }
J=/usr/share/java
jars=("$@")
[ ${#jars[@]} -gt 0 ] || jars=("$J/jetty9-server.jar" "$J/jetty9-http.jar" "$J/jetty9-io.jar" "$J/jetty9-util.jar")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pairs=()
for jar in "${jars[@]}"; do
    out="$work/$(basename "$jar" .jar)-rewritten.jar"
    "$sprig" rewrite -o "$out" "$jar" > /dev/null
    pairs+=("$jar" "$out")
done
"$jdk/bin/java" bench/candidates/CodeLengths.java "${pairs[@]}"
