#!/usr/bin/env bash
# What keeping the allocation samples outside every root by stack costs:
# fixtures.Allocs under `sprig run --alloc-interval INTERVAL` (default
# 512 KiB) with the root `fixtures.Allocs::multi`, so that nearly all of
# its allocations (instances, arrays, lambdas, constructor chains, the
# throwing path) are made outside every root context; each round runs it
# bare, with the stacks (the default), and with the samples outside roots
# counted only (SPRIG_AGENT_FAULT=sampled-alloc-no-stacks), alternating
# which of the two sessions runs first; prints every round's loop ms, the
# samples outside roots, the medians, and the stack walk's cost per sample
# and per second of loop.
#   [INTERVAL=524288] [CALLS=3000000] [ROUNDS=5] [JAVA_HOME=...]
#   bash scripts/measure/outside-alloc-cost.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 17 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
calls=${CALLS:-3000000}
rounds=${ROUNDS:-5}
interval=${INTERVAL:-524288}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/fixtures/Allocs.java
java=("$jdk/bin/java" -cp "$work" fixtures.Allocs "$calls")
run=("$sprig" run --alloc-interval "$interval" --root fixtures.Allocs::multi --format json
    -o "$work/out.json" --)
# The loop's ms from the fixture's "done N in T ms" line.
ms() { "$@" 2>/dev/null | sed -n 's/^done [0-9]* in \([0-9]*\) ms$/\1/p'; }
outside() { sed -n 's/.*"sampled_outside_roots":{"samples":\([0-9]*\).*/\1/p' "$work/out.json"; }

echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $calls calls, interval $interval, $(uptime | sed 's/.*load/load/')"
declare -A all
for r in $(seq "$rounds"); do
    all[bare]+=" $(ms "${java[@]}")"
    order=(stacks counted)
    ((r % 2 == 0)) && order=(counted stacks)
    for k in "${order[@]}"; do
        if [[ $k == stacks ]]; then
            all[stacks]+=" $(ms "${run[@]}" "${java[@]}")"
        else
            all[counted]+=" $(SPRIG_AGENT_FAULT=sampled-alloc-no-stacks ms "${run[@]}" "${java[@]}")"
        fi
        all[${k}_samples]+=" $(outside)"
    done
    echo "round $r: bare ${all[bare]##* }, stacks ${all[stacks]##* } (${all[stacks_samples]##* } samples outside), counted ${all[counted]##* } (${all[counted_samples]##* }) ms"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for k in bare stacks counted stacks_samples counted_samples; do
    echo "$k:${all[$k]}, median $(echo "${all[$k]}" | median)"
done
s=$(echo "${all[stacks]}" | median)
c=$(echo "${all[counted]}" | median)
n=$(echo "${all[stacks_samples]}" | median)
b=$(echo "${all[bare]}" | median)
awk -v s="$s" -v c="$c" -v n="$n" -v b="$b" 'BEGIN {
    printf "stacks over counted: %+.2f%% of the loop; %.1f us per sample outside roots (%d samples, %.0f a second); counted over bare %+.2f%%\n",
        (s - c) * 100 / c, (s - c) * 1000 / (n > 0 ? n : 1), n, n * 1000 / (s > 0 ? s : 1), (c - b) * 100 / b
}'
echo "after: $(uptime | sed 's/.*load/load/')"
