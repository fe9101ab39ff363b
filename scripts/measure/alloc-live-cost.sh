#!/usr/bin/env bash
# What `--alloc=live` costs beside `--alloc` on an allocation-dense root:
# fixtures.Allocs (14 allocations in 16 calls a root call) runs CALLS root
# calls and prints its loop's time; each round runs it bare, then with
# `sprig run --alloc` and with `sprig run --alloc=live` (both at the
# default sample interval, 512 KiB, or INTERVAL), the two in turn, which
# one first alternating from round to round; prints every round's ms, the
# ratio live / alloc of the round, and the medians.
#   [INTERVAL=524288] [CALLS=300000] [ROUNDS=5] [JAVA_HOME=...]
#   bash scripts/measure/alloc-live-cost.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 17 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
calls=${CALLS:-300000}
rounds=${ROUNDS:-5}
interval=${INTERVAL:-524288}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/fixtures/Allocs.java
java=("$jdk/bin/java" -cp "$work" fixtures.Allocs "$calls")
# The loop's ms from the fixture's "done N in T ms" line.
ms() { "$@" 2>/dev/null | sed -n 's/^done [0-9]* in \([0-9]*\) ms$/\1/p'; }
profiled() {
    ms "$sprig" run "$1" --alloc-interval "$interval" --root fixtures.Allocs::root \
        -o "$work/out.sprig" -- "${java[@]}"
}

echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $calls root calls, interval $interval, $(uptime | sed 's/.*load/load/')"
declare -A all
ratios=""
for r in $(seq "$rounds"); do
    all[bare]+=" $(ms "${java[@]}")"
    if ((r % 2)); then
        a=$(profiled --alloc)
        l=$(profiled --alloc=live)
    else
        l=$(profiled --alloc=live)
        a=$(profiled --alloc)
    fi
    all[alloc]+=" $a"
    all[live]+=" $l"
    ratio=$(awk -v l="$l" -v a="$a" 'BEGIN { printf "%.3f", l / a }')
    ratios+=" $ratio"
    echo "round $r: bare ${all[bare]##* }, --alloc $a, --alloc=live $l ms (live / alloc $ratio)"
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for k in bare alloc live; do
    echo "$k:${all[$k]} ms, median $(echo "${all[$k]}" | median)"
done
echo "live / alloc per round:$ratios, median $(echo "$ratios" | median)"
echo "after: $(uptime | sed 's/.*load/load/')"
