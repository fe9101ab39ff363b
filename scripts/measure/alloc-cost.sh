#!/usr/bin/env bash
# What `--alloc` costs an allocation-dense root: fixtures.Allocs (14
# allocations in 16 calls a root call) runs CALLS root calls and prints its
# loop's time; each round runs it bare, under `sprig run` (default sampled
# timing), with `--alloc` (exact only: `--alloc-interval 0`), and with
# `--alloc` and every allocation through JNI as before the Java path (SPRIG_AGENT_FAULT=alloc-jni-only), and with
# the sampled path alone (`--alloc-interval`, default 512 KiB, no exact
# probes), in that order, ROUNDS rounds; prints every round's ms and the
# medians.
#   [INTERVAL=524288] to sample at another interval
#   [CALLS=300000] [ROUNDS=5] [JAVA_HOME=...] bash scripts/measure/alloc-cost.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 17 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
calls=${CALLS:-300000}
rounds=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/fixtures/Allocs.java
java=("$jdk/bin/java" -cp "$work" fixtures.Allocs "$calls")
run=("$sprig" run --root fixtures.Allocs::root -o "$work/out.sprig" --)
# The loop's ms from the fixture's "done N in T ms" line.
ms() { "$@" 2>/dev/null | sed -n 's/^done [0-9]* in \([0-9]*\) ms$/\1/p'; }

echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $calls root calls, $(uptime | sed 's/.*load/load/')"
declare -A all
for r in $(seq "$rounds"); do
    all[bare]+=" $(ms "${java[@]}")"
    all[sprig]+=" $(ms "${run[@]}" "${java[@]}")"
    all[alloc]+=" $(ms "$sprig" run --alloc --alloc-interval 0 --root fixtures.Allocs::root -o "$work/out.sprig" -- "${java[@]}")"
    all[jni]+=" $(SPRIG_AGENT_FAULT=alloc-jni-only ms "$sprig" run --alloc --alloc-interval 0 --root fixtures.Allocs::root -o "$work/out.sprig" -- "${java[@]}")"
    all[sampled]+=" $(ms "$sprig" run --alloc-interval "${INTERVAL:-524288}" --root fixtures.Allocs::root -o "$work/out.sprig" -- "${java[@]}")"
    echo "round $r: bare ${all[bare]##* }, sprig ${all[sprig]##* }, alloc ${all[alloc]##* }, alloc-jni ${all[jni]##* }, sampled ${all[sampled]##* } ms"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for k in bare sprig alloc jni sampled; do
    echo "$k:${all[$k]} ms, median $(echo "${all[$k]}" | median)"
done
echo "after: $(uptime | sed 's/.*load/load/')"
