#!/usr/bin/env bash
# Where a profiled javac iteration's extra time goes, by method: perf
# (cpu-clock) on javac's thread over 60 iterations bare, then 60 profiled
# (root `Gen::genClass`, sprig's default timing), each at the plateau, and
# the samples split by whether the method is in the profile's tree.
#
#   bash scripts/measure/javac-perf.sh SPRIG OUT_DIR [SPRIG PROFILE ARGS...]
#
# SPRIG_AGENT_NO_PREFETCH=1 in the environment turns off the dormant
# probes given ahead (the agent reads it in the target JVM). Needs perf
# and the JDK 17 sources that `sprig-bench` fetches
# (SPRIG_BENCH_SRC_ZIP, or ~/.cache/sprig-bench/jdk17-src.zip). perf on
# a guest without PMU counters samples with cpu-clock, which slows the
# JVM: compare the two windows with each other, not with other runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=$(realpath "${1:?usage: javac-perf.sh SPRIG OUT_DIR [SPRIG ARGS...]}")
out=$(realpath -m "${2:?usage: javac-perf.sh SPRIG OUT_DIR [SPRIG ARGS...]}")
shift 2
command -v perf > /dev/null || { echo "javac-perf.sh: perf is not installed" >&2; exit 1; }
. scripts/measure/lib/bench-driver.sh
javac_workload javac-perf.sh
mkdir -p "$out"
bench_start "$jdk" javac-perf javac "$work/java.base" java.base "$work/javac-out"
# perf over a window of 60 iterations, then the JIT's symbols.
record() {
    (perf record -q -e cpu-clock -F 1999 -p "$jvm" -o "$out/$1.data" -- sleep 9 > /dev/null 2>&1) &
    local pp=$! m
    m=$(bench_window 60)
    echo "$1: 60 iterations, median $m ms"
    wait $pp || true
    "$jdk/bin/jcmd" "$jvm" Compiler.perfmap > /dev/null
    cp "/tmp/perf-$jvm.map" "$out/$1.map"
}
# Warm-up: 30 windows of 20 (to the plateau; bench_plateau). Assigned
# first: a failure inside an echo's $(...) would not stop the script.
w=$(bench_plateau 30)
echo "bare: plateau at $w ms"
record bare
profile_javac "$sprig" "$out" "$@"
w=$(bench_plateau 30)
echo "profiled: plateau at $w ms"
record prof
sprig_detach
bench_stop
jvm_pid=$jvm
# javac's thread: the one with the most samples named "java".
tid=$(perf script -i "$out/prof.data" -F tid,comm 2> /dev/null | sort | uniq -c | sort -rn |
    awk '$2 == "java" {print $3; exit}')
for w in bare prof; do
    cp "$out/$w.map" "/tmp/perf-$jvm_pid.map"
    perf report -i "$out/$w.data" --tid "$tid" --no-children --sort sym -F sample,sym 2> /dev/null |
        grep -v '^#' | grep -v '^$' > "$out/$w.syms"
done
rm -f "/tmp/perf-$jvm_pid.map"
python3 - "$out/bare.syms" "$out/prof.syms" "$out/report.json" << 'EOF'
import sys
sys.path.insert(0, 'scripts/measure/lib')
from perfsplit import split, tree_methods

tree = tree_methods(sys.argv[3])

def by_group(path):
    return split(path, tree, [('com.sun.tools.javac.', 'javac methods not in the tree')],
                 'HotSpot runtime, stubs, kernel')

(bg, bm), (pg, pm) = by_group(sys.argv[1]), by_group(sys.argv[2])
print(f"samples on javac's thread   {'bare':>7} {'profiled':>9} {'more':>7}")
for k in ['methods in the tree', 'javac methods not in the tree', 'JDK and other',
          'HotSpot runtime, stubs, kernel', 'sprig probe class (calls not inlined)']:
    print(f"{k:38} {bg[k]:7} {pg[k]:9} {pg[k] - bg[k]:+7}")
print(f"{'total':38} {sum(bg.values()):7} {sum(pg.values()):9} {sum(pg.values()) - sum(bg.values()):+7}")
print("compiled on their own only when profiled (inlined into their callers bare), most samples first:")
gone = sorted((m for m in pm if bm[m] == 0 and not m.startswith('sprig.')), key=lambda m: -pm[m])
for m in gone[:8]:
    print(f"  {pm[m]:6}  {m}{'  (in the tree)' if m in tree else ''}")
EOF
