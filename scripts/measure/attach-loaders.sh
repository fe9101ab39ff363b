#!/usr/bin/env bash
# Attach cost on a JVM that defines classes as it goes: fixtures/src/gen
# (gen.Units) keeps KEEP class loaders alive, each with the 24 classes of
# gen.script (the same names in every loader), and defines a new generation
# every PAUSE ms, as a scripting engine compiling a script per request.
# Runs SESSIONS consecutive `sprig profile --root gen.Units::unit` sessions
# of SECS seconds in the same JVM and prints, per session: the attach time
# (sprig started to `sprig: profiling`), the whole session's wall time,
# instrumented/called methods, redefinition batches and time, classes
# instrumented, and whether the detach was confirmed; then the medians.
#   bash scripts/measure/attach-loaders.sh [sprig] [KEEP] [SESSIONS] [SECS] [PAUSE]
#   (defaults: target/release/sprig 200 10 2 20; JAVA_HOME picks the JDK)
# Another program taking the same arguments and commands (KEEP, `loop MS`,
# `exit`; `ready PID ...` once started): UNITS_CP (its class path, compiled
# already), UNITS_MAIN (its main class) and UNITS_ROOT (the root pattern);
# scripts/measure/attach-groovy.sh does so with Groovy scripts.
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
keep=${2:-200}
sessions=${3:-10}
secs=${4:-2}
pause=${5:-20}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
work=$(mktemp -d)
trap 'kill ${keeper:-} ${app:-} ${prof:-} 2>/dev/null || true; rm -rf "$work"' EXIT
main=${UNITS_MAIN:-gen.Units}
root=${UNITS_ROOT:-gen.Units::unit}
cp=${UNITS_CP:-$work/classes}
if [ -z "${UNITS_CP:-}" ]; then
    mkdir "$work/classes"
    "$jdk/bin/javac" -d "$work/classes" fixtures/src/gen/*.java fixtures/src/gen/script/*.java
fi
mkfifo "$work/in"
sleep 3600 > "$work/in" &
keeper=$!
"$jdk/bin/java" -cp "$cp" "$main" "$keep" < "$work/in" > "$work/out" 2>&1 &
app=$!
exec 3> "$work/in"
for _ in $(seq 600); do grep -q '^ready' "$work/out" && break; sleep 0.1; done
echo "loop $pause" >&3
echo "$main on JDK $("$jdk/bin/java" -version 2>&1 | head -1), $keep live loaders, a new one every $pause ms"
printf '%-8s %9s %9s %14s %8s %9s %8s %s\n' session attach_s wall_s instr/called ratio batches redef_ms detach
for i in $(seq "$sessions"); do
    t0=$(date +%s.%N)
    "$sprig" profile "$app" --root "$root" --duration "$secs" --format json \
        -o "$work/p$i.json" 2> "$work/e$i" &
    prof=$!
    attach=none
    for _ in $(seq 12000); do
        if grep -q 'sprig: profiling' "$work/e$i"; then
            attach=$(echo "$(date +%s.%N) - $t0" | bc)
            break
        fi
        kill -0 "$prof" 2>/dev/null || break
        sleep 0.01
    done
    status=0
    wait "$prof" || status=$?
    wall=$(echo "$(date +%s.%N) - $t0" | bc)
    detach=yes
    grep -q 'did not confirm the detach' "$work/e$i" && detach=NO
    [ "$status" -ne 0 ] && detach="exit-$status"
    python3 - "$work/p$i.json" "$i" "$attach" "$wall" "$detach" <<'EOF'
import json, sys
path, i, attach, wall, detach = sys.argv[1:]
try:
    s = json.load(open(path))["stats"]
except Exception:
    print(f"{i:<8} {attach:>9} {float(wall):9.2f}   (no report) {detach}")
    sys.exit(0)
ic = f"{s['instrumented_methods']}/{s['called_methods']}"
ratio = s["instrumented_methods"] / max(1, s["called_methods"])
print(f"{i:<8} {attach[:8]:>9} {float(wall):9.2f} {ic:>14} {ratio:8.3f} "
      f"{s['redefinition_batches']:9} {s['redefinition_ms']:8.1f} {detach}"
      f"  ({s['instrumented_classes']} classes instrumented)")
EOF
    if [ "$attach" = none ]; then
        echo "$i" >> "$work/unstarted"
    else
        echo "$attach" >> "$work/attach"
    fi
done
[ -f "$work/unstarted" ] && echo "sessions that never said they were profiling: $(tr '\n' ' ' < "$work/unstarted")"
[ -f "$work/attach" ] && sort -n "$work/attach" | awk '{ v[NR] = $1 } END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "attach seconds: median %.3f, min %.3f, max %.3f over %d sessions\n", m, v[1], v[NR], NR }'
echo exit >&3
