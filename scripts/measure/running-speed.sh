#!/usr/bin/env bash
# The speed of loops that were running when sprig attached: before the
# attach, while profiling and after the detach (fixtures.Spin: a loop in
# the root's class, `same`, and one in another class the root can reach
# but never calls, `other`). Each repeat starts a fresh JVM; each phase's
# figure is the median of its 250 ms windows, and the summary gives the
# median over the repeats of after/before.
#
# usage: scripts/measure/running-speed.sh [JAVA_HOME] [REPEATS] [-- sprig options]
#   PHASE_SECS (default 6) is each phase's length; SPRIG (default
#   target/debug/sprig) the CLI to attach with.
set -euo pipefail
cd "$(dirname "$0")/../.."
jdk=${1:-/usr/lib/jvm/java-17-openjdk-amd64}
repeats=${2:-3}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
extra=("$@")
phase=${PHASE_SECS:-6}
sprig=${SPRIG:-target/debug/sprig}
work=$(mktemp -d /tmp/running-speed.XXXXXX)
jvm=
cleanup() {
    [ -n "$jvm" ] && kill "$jvm" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$jdk/bin/javac" -nowarn -d "$work/classes" fixtures/src/fixtures/Spin.java fixtures/src/fixtures/SpinOther.java

now_ms() { date +%s%3N; }
# median of the `key=` figures of rate lines between two wall-clock times
median() { # file key from to
    awk -v key="$2" -v from="$3" -v to="$4" '
        /^rate / {
            split($2, t, "="); if (t[2] < from || t[2] > to) next
            for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == key) print kv[2] }
        }' "$1" | mid
}
# the median of numbers, one a line
mid() {
    sort -g | awk '{ v[n++] = $1 } END {
        if (n == 0) { print "nan"; exit }
        print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

results=()
for r in $(seq 1 "$repeats"); do
    out="$work/jvm$r.out"
    "$jdk/bin/java" -cp "$work/classes" fixtures.Spin >"$out" 2>&1 &
    jvm=$!
    for _ in $(seq 1 100); do grep -q '^ready' "$out" && break; sleep 0.1; done
    sleep 2
    t0=$(now_ms); sleep "$phase"; t1=$(now_ms)
    "$sprig" profile "$jvm" --root 'fixtures.Spin::root' --duration "$phase" -q \
        "${extra[@]}" -o "$work/report$r.txt" 2>"$work/sprig$r.err"
    t2=$(now_ms)
    sleep 2
    t3=$(now_ms); sleep "$phase"; t4=$(now_ms)
    kill "$jvm"; wait "$jvm" 2>/dev/null || true; jvm=
    # The profiling phase without its first second (attach and warm-up).
    line="run $r:"
    for key in same other; do
        b=$(median "$out" $key "$t0" "$t1")
        d=$(median "$out" $key "$((t1 + 1500))" "$t2")
        a=$(median "$out" $key "$t3" "$t4")
        ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }')
        line+=" $key before=$b during=$d after=$a after/before=$ratio"
        results+=("$key $ratio")
    done
    echo "$line"
    grep -i "left on an old version" "$work/sprig$r.err" | sed 's/^/  /' || true
done
for key in same other; do
    m=$(printf '%s\n' "${results[@]}" | awk -v key="$key" '$1 == key { print $2 }' | mid)
    echo "median after/before $key: $m over $repeats runs"
done
