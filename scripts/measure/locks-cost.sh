#!/usr/bin/env bash
# What `--locks` costs an uncontended, synchronization-heavy root:
# fixtures.SyncLoop (64 monitor enters and 16 ReentrantLock lock/unlock
# pairs a root call, one thread, nothing contended) runs CALLS root calls
# and prints its loop's time; each round runs it bare, under `sprig run`
# (default sampled timing) and under `sprig run --locks`, in that order,
# ROUNDS rounds; prints every round's ms and the medians, and the median
# of `--locks` over `sprig run` without it.
#   [CALLS=200000] [ROUNDS=5] [JAVA_HOME=...] bash scripts/measure/locks-cost.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 17 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
calls=${CALLS:-200000}
rounds=${ROUNDS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/fixtures/SyncLoop.java
java=("$jdk/bin/java" -cp "$work" fixtures.SyncLoop "$calls")
# The loop's ms from the fixture's "done N in T ms" line.
ms() { "$@" 2>/dev/null | sed -n 's/^done [0-9]* in \([0-9]*\) ms$/\1/p'; }

echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $calls root calls, $(uptime | sed 's/.*load/load/')"
declare -A all
for r in $(seq "$rounds"); do
    all[bare]+=" $(ms "${java[@]}")"
    all[sprig]+=" $(ms "$sprig" run --root fixtures.SyncLoop::root -o "$work/out.sprig" -- "${java[@]}")"
    all[locks]+=" $(ms "$sprig" run --locks --root fixtures.SyncLoop::root -o "$work/out.sprig" -- "${java[@]}")"
    echo "round $r: bare ${all[bare]##* }, sprig ${all[sprig]##* }, sprig --locks ${all[locks]##* } ms"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for k in bare sprig locks; do
    echo "$k:${all[$k]} ms, median $(echo "${all[$k]}" | median)"
done
s=$(echo "${all[sprig]}" | median)
l=$(echo "${all[locks]}" | median)
echo "--locks over sprig run without it: $(awk -v l="$l" -v s="$s" 'BEGIN { printf "%.3f", l / s }')"
echo "after: $(uptime | sed 's/.*load/load/')"
