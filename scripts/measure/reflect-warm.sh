#!/usr/bin/env bash
# What a reflection-heavy root pays once warm, and how long it takes to get
# there: accuracy.Invokes::root (fixtures/src/accuracy: 100,000 calls of a
# trivial method through a static final Method) in one JVM, bare, then
# under `sprig profile` (default options), then after the detach. Prints,
# per phase, each of the first calls (ms) and then, per batch of BATCH
# calls, the fastest and median call (ms) and the fewest bytes a call
# allocated; then the fastest profiled call against the fastest bare one,
# in ns a reflective call.
#   [BATCH=200] [BATCHES=5] [JAVA_HOME=...] [SPRIG_OPTS=...] bash scripts/measure/reflect-warm.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 25 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
batch=${BATCH:-200}
batches=${BATCHES:-5}
work=$(mktemp -d)
trap 'kill ${keeper:-} ${app:-} ${prof:-} 2>/dev/null || true; rm -rf "$work"' EXIT
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/accuracy/Reflective.java fixtures/src/accuracy/Invokes.java
mkfifo "$work/in"
sleep 3600 > "$work/in" &
keeper=$!
"$jdk/bin/java" ${JAVA_OPTS:-} -cp "$work" accuracy.Reflective < "$work/in" > "$work/out" 2>&1 &
app=$!
exec 3> "$work/in"
n=0
# One "time R" command; its answer's fields in $got (no subshell: n counts).
call() {
    echo "time $1" >&3
    n=$((n + 1))
    for _ in $(seq 1200); do
        [ "$(grep -c '^times' "$work/out")" -ge "$n" ] && break
        sleep 0.05
    done
    got=$(grep '^times' "$work/out" | sed -n "${n}p" | cut -d' ' -f2-)
}
# The first 8 calls one by one, then the batches; "phase fastest-ns" to fd 4.
phase() {
    local first="" t best=""
    for _ in 1 2 3 4 5 6 7 8; do
        call 1
        t=${got%% *}
        first="$first $(awk -v t="$t" 'BEGIN { printf "%.2f", t / 1e6 }')"
    done
    echo "$1 first calls (ms):$first"
    for _ in $(seq "$batches"); do
        call "$batch"
        read -r f m b <<< "$got"
        [ -z "$best" ] || [ "$f" -lt "$best" ] && best=$f
        awk -v f="$f" -v m="$m" -v b="$b" -v p="$1" -v k="$batch" \
            'BEGIN { printf "%s batch of %d: fastest %.3f ms, median %.3f ms, %d B a call\n", p, k, f / 1e6, m / 1e6, b }'
    done
    echo "$1 $best" >&4
}
for _ in $(seq 600); do grep -q '^ready' "$work/out" && break; sleep 0.1; done
invokes=$(grep '^ready' "$work/out" | cut -d' ' -f3)
echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $(uptime | sed 's/.*load/load/')"
exec 4> "$work/best"
call "$batch"    # warm-up
phase bare
"$sprig" profile "$app" --root 'accuracy.Invokes::root' ${SPRIG_OPTS:-} -o "$work/p.json" --format json 2> "$work/sprig.err" &
prof=$!
for _ in $(seq 600); do grep -qs "sprig: profiling" "$work/sprig.err" && break; sleep 0.1; done
phase profiled
kill -INT "$prof" 2>/dev/null; wait "$prof" || true
phase after
echo "exit" >&3
awk -v n="$invokes" '{ b[$1] = $2 } END {
    printf "fastest profiled call - fastest bare call: %.1f ns a reflective call (after the detach: %.1f)\n",
        (b["profiled"] - b["bare"]) / n, (b["after"] - b["bare"]) / n }' "$work/best"
echo "$(uptime | sed 's/.*load/load/')"
