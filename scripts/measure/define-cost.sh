#!/usr/bin/env bash
# What a root that defines a class on every call is charged under sprig:
# times `calls` root calls bare and under `sprig profile`, and prints the
# mean ns per call of each (wall clock) and the root's charged time per
# call in the report (total_ns / calls: adjust-time and probe cost taken
# out; exact timing, whose adjust-time this measures), which should come
# close to the bare time. The profiled round is
# the second under sprig, more than 4 s after the attach (`--reset-after
# 4` leaves the first out of the report): on JDK 17 the attach's first
# redefinition throws away all compiled code, and the first seconds run
# slower while the JIT compiles it again.
#   bash scripts/measure/define-cost.sh [path/to/sprig] [calls]
#   (default target/release/sprig, 2000 calls)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
calls=${2:-2000}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
work=$(mktemp -d)
trap 'kill ${keeper:-} ${app:-} ${prof:-} 2>/dev/null || true; [ -n "${KEEP:-}" ] && cp "$work/p.json" "$KEEP"; rm -rf "$work"' EXIT
"$jdk/bin/javac" -d "$work" bench/candidates/DefineCost.java
mkfifo "$work/in"
sleep 3600 > "$work/in" &
keeper=$!
"$jdk/bin/java" -cp "$work" DefineCost < "$work/in" > "$work/out" 2>&1 &
app=$!
exec 3> "$work/in"
wait_lines() { for _ in $(seq 1200); do [ "$(grep -c "$1" "$work/out")" -ge "$2" ] && return; sleep 0.1; done; echo "timeout"; exit 1; }
wait_lines '^ready' 1
echo "time $calls" >&3; wait_lines '^root' 1     # warm-up
echo "time $calls" >&3; wait_lines '^root' 2     # bare
"$sprig" profile "$app" --root 'DefineCost::root' --keep-trivial --timing exact --reset-after 4 -o "$work/p.json" --format json 2> "$work/sprig.err" &
prof=$!
for _ in $(seq 300); do grep -q "sprig: profiling" "$work/sprig.err" && break; sleep 0.1; done
echo "time $calls" >&3; wait_lines '^root' 3     # profiled, first (JIT, revelation)
sleep 5
echo "time $calls" >&3; wait_lines '^root' 4     # profiled
kill -INT "$prof" 2>/dev/null; wait "$prof" || true
echo "exit" >&3
bare=$(grep '^root' "$work/out" | sed -n 2p | awk '{print $2}')
wall=$(grep '^root' "$work/out" | sed -n 4p | awk '{print $2}')
jq -r --arg bare "$bare" --arg wall "$wall" '
    [.threads[].roots[] | select(.method == "root")] as $r
    | ($r | map(.calls) | add) as $calls
    | ($r | map(.total_ns) | add) as $total
    | ($r | map(.adjust_ns) | add) as $adjust
    | "bare:     \($bare) ns a call\nprofiled: \($wall) ns a call (wall)\ncharged:  \($total / $calls | floor) ns a call (report, \($calls) calls; adjust-time \($adjust / $calls | floor) ns a call)"
' "$work/p.json"
