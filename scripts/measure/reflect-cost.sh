#!/usr/bin/env bash
# What the profiler adds to a Method.invoke inside a root: times a loop of
# direct calls and a loop of Method.invoke calls of the same method, bare
# and under `sprig profile`, and prints the ns per call of each and what
# the reflective call costs beyond the probes of its target:
#   (invoke profiled - invoke bare) - (direct profiled - direct bare).
#   [ROUNDS=15] [JAVA_OPTS=...] bash scripts/measure/reflect-cost.sh [path/to/sprig]   (default target/release/sprig)
# See also scripts/measure/reflect-warm.sh: a reflection-heavy root, bare against
# profiled once warm, and the bytes each call allocates.
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
rounds=${ROUNDS:-15}
work=$(mktemp -d)
trap 'kill ${keeper:-} ${app:-} ${prof:-} 2>/dev/null || true; rm -rf "$work"' EXIT
"$jdk/bin/javac" -d "$work" bench/candidates/ReflectCost.java
mkfifo "$work/in"
sleep 3600 > "$work/in" &
keeper=$!
"$jdk/bin/java" ${JAVA_OPTS:-} -cp "$work" ReflectCost < "$work/in" > "$work/out" 2>&1 &
app=$!
exec 3> "$work/in"
wait_lines() { for _ in $(seq 600); do [ "$(grep -c "$1" "$work/out")" -ge "$2" ] && return; sleep 0.1; done; echo "timeout"; exit 1; }
wait_lines '^ready' 1
echo "time $rounds" >&3; wait_lines '^direct' 1     # warm-up
echo "time $rounds" >&3; wait_lines '^direct' 2     # bare
"$sprig" profile "$app" --root 'ReflectCost::root' --keep-trivial -o "$work/p.json" --format json 2> "$work/sprig.err" &
prof=$!
for _ in $(seq 300); do grep -q "sprig: profiling" "$work/sprig.err" && break; sleep 0.1; done
echo "time $rounds" >&3; wait_lines '^direct' 3     # profiled, first (revelation, JIT)
echo "time $rounds" >&3; wait_lines '^direct' 4     # profiled
kill -INT "$prof" 2>/dev/null; wait "$prof" || true
echo "exit" >&3
grep '^direct' "$work/out" | sed -n '2p;4p' | awk '
    NR == 1 { db = $2; ib = $4 }
    NR == 2 { dp = $2; ip = $4 }
    END {
        printf "bare:     direct %.2f ns, invoke %.2f ns a call\n", db, ib
        printf "profiled: direct %.2f ns, invoke %.2f ns a call\n", dp, ip
        printf "reflection watch beyond the target'"'"'s probes: %.2f ns a call\n", (ip - ib) - (dp - db)
    }'
