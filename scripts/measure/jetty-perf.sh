#!/usr/bin/env bash
# Where a profiled Jetty iteration's extra CPU goes, by method: perf
# (cpu-clock) on the whole Jetty JVM over the same number of iterations
# bare and profiled (root `Server::handle` by default, sprig's default
# timing), each at its plateau, and the samples split into the methods of
# the profile's tree, Jetty's other methods, the bench's clients (in the
# same JVM), the JDK's, HotSpot's runtime and stubs, the kernel, and the
# probe class; per iteration, so the two windows compare however long
# each took.
#
#   bash scripts/measure/jetty-perf.sh SPRIG OUT_DIR [SPRIG PROFILE ARGS...]
#
# JETTY_ROOT sets the root (bench.HelloServlet::doGet for the servlet),
# ITERATIONS the iterations recorded in each window (default 400).
# Needs perf and Debian's libjetty9-java (scripts/setup.sh --bench). perf
# on a guest without PMU counters samples with cpu-clock, which slows the
# JVM: compare the two windows of one run, not runs with each other.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: jetty-perf.sh SPRIG OUT_DIR [SPRIG ARGS...]"
sprig=$(realpath "${1:?$usage}")
out=$(realpath -m "${2:?$usage}")
shift 2
command -v perf > /dev/null || { echo "jetty-perf.sh: perf is not installed" >&2; exit 1; }
jdk=${JAVA_HOME_17:-/usr/lib/jvm/java-17-openjdk-amd64}
root=${JETTY_ROOT:-org.eclipse.jetty.server.Server::handle}
n=${ITERATIONS:-400}
. scripts/measure/lib/bench-driver.sh
bench_workdir
mkdir -p "$out"
bench_start "$jdk" jetty-perf jetty 400 2
# The plateau: the JVM keeps getting faster for about 900 iterations
# from its start and about 400 from the attach (docs/overhead.md).
plateau() {
    local k
    for k in $(seq "$1"); do bench_window 40 > /dev/null; done
}
# perf over $n iterations, then the JIT's symbols.
record() {
    perf record -q -e cpu-clock -F 1999 -p "$jvm" -o "$out/$1.data" > /dev/null 2>&1 &
    local pp=$! m
    m=$(bench_window "$n")
    kill -INT "$pp"
    wait "$pp" || true
    echo "$1: $n iterations, median $m ms"
    "$jdk/bin/jcmd" "$jvm" Compiler.perfmap > /dev/null
    cp "/tmp/perf-$jvm.map" "$out/$1.map"
}
plateau 25
record bare
"$sprig" profile "$jvm" --root "$root" --duration 900 --format json \
    -o "$out/report.json" "$@" 2> "$out/sprig.err" &
sp=$!
plateau 15
record prof
sprig_detach
bench_stop
jvm_pid=$jvm
for w in bare prof; do
    cp "$out/$w.map" "/tmp/perf-$jvm_pid.map"
    perf report -i "$out/$w.data" --no-children --sort sym -F sample,sym 2> /dev/null |
        grep -v '^#' | grep -v '^$' > "$out/$w.syms"
done
rm -f "/tmp/perf-$jvm_pid.map"
python3 - "$out/bare.syms" "$out/prof.syms" "$out/report.json" "$n" << 'EOF'
import sys
sys.path.insert(0, 'scripts/measure/lib')
from perfsplit import split, tree_methods

tree = tree_methods(sys.argv[3])
iters = int(sys.argv[4])

GROUPS = ['methods in the tree', 'Jetty methods not in the tree', 'bench clients and servlet',
          'JDK and other', 'HotSpot runtime and stubs', 'kernel',
          'sprig probe class (calls not inlined)']

def by_group(path):
    return split(path, tree, [('org.eclipse.jetty.', 'Jetty methods not in the tree'),
                              ('bench.', 'bench clients and servlet')],
                 'HotSpot runtime and stubs', kernel='kernel')

(bg, bm), (pg, pm) = by_group(sys.argv[1]), by_group(sys.argv[2])
per = lambda v: v / iters
print(f"samples an iteration (1999 Hz), whole JVM {'bare':>7} {'profiled':>9} {'more':>7}")
for k in GROUPS:
    print(f"{k:42} {per(bg[k]):7.2f} {per(pg[k]):9.2f} {per(pg[k] - bg[k]):+7.2f}")
tb, tp = sum(bg.values()), sum(pg.values())
print(f"{'total':42} {per(tb):7.2f} {per(tp):9.2f} {per(tp - tb):+7.2f}")
print("most samples more an iteration, profiled against bare:")
diff = sorted(set(pm) | set(bm), key=lambda m: -(pm[m] - bm[m]))
for m in diff[:12]:
    print(f"  {per(pm[m] - bm[m]):+7.2f}  {m}{'  (in the tree)' if m in tree else ''}")
EOF
