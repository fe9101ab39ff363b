#!/usr/bin/env bash
# Measures what a probe pair costs by how it records, in a plain JVM with
# no agent: a JNI native that stores an event without a clock, the same
# with an rdtsc per event (today's exact-timing probe), and a pure-Java
# probe that stores the event into native memory with Unsafe and
# publishes it with a release store (what sampled timing's probe could
# be), the shipped path's checks and stores, and a calling context tree
# kept in the JVM. Prints ns per call and each pair as a ratio to
# System.nanoTime(), medians of 7 rounds, on JDK 17 and, when installed,
# on JDK 25; then what the release store of the count costs in a loop
# like bench.ProbeCost's (bench/candidates/ReleaseCost.java).
#   bash scripts/measure/probe-candidates.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for jdk in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
    [ -x "$jdk/bin/javac" ] || { echo "probe-candidates: no JDK at $jdk, skipped"; continue; }
    out="$work/$(basename "$jdk")"
    mkdir -p "$out"
    gcc -O2 -shared -fPIC -I"$jdk/include" -I"$jdk/include/linux" \
        bench/candidates/pc.c -o "$out/libpc.so"
    "$jdk/bin/javac" --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
        -d "$out" bench/candidates/ProbeCandidates.java bench/candidates/ReleaseCost.java
    for mib in 1 64; do
        echo "== $("$jdk/bin/java" -version 2>&1 | head -1)"
        "$jdk/bin/java" -Dbuffer.mib=$mib --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
            --enable-native-access=ALL-UNNAMED -Djava.library.path="$out" \
            -cp "$out" ProbeCandidates 2>/dev/null || \
        "$jdk/bin/java" -Dbuffer.mib=$mib --add-exports java.base/jdk.internal.misc=ALL-UNNAMED \
            -Djava.library.path="$out" -cp "$out" ProbeCandidates
    done
    echo "== release store: $("$jdk/bin/java" -version 2>&1 | head -1)"
    "$jdk/bin/java" --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp "$out" ReleaseCost
done
