#!/usr/bin/env bash
# Times Jetty (the bench's workload: 400 keep-alive GETs per iteration
# from 2 client threads in the same JVM) in windows of 150 iterations, in
# a fresh JVM: bare, two windows while `sprig profile --root
# org.eclipse.jetty.server.Server::handle` runs, and three after the
# detach. Prints the median iteration of each window in ms:
#   bash scripts/measure/jetty-windows.sh SPRIG [JAVA_HOME] [EXTRA SPRIG ARGS...]
# Needs Debian's libjetty9-java (scripts/setup.sh --bench installs it).
# JETTY_JAVA_OPTS adds JVM options (for instance -XX:+PrintCompilation);
# JETTY_KEEP_OUT=FILE keeps the JVM's output there. JETTY_ROOT sets the
# root (default org.eclipse.jetty.server.Server::handle; the bench's
# servlet row is bench.HelloServlet::doGet).
# JETTY_PLATEAU=1 times windows of 40 iterations instead: 30 bare, 30
# profiled, 10 after the detach, and prints every window's median, then
# the median of the last 8 of each phase: the JVM keeps getting faster for
# about 900 iterations from its start and about 400 from the attach, and
# these compare the three at their plateau (docs/overhead.md, "At the
# plateau"). It also prints the CPU time an iteration the JVM (its ended
# threads included) and the sprig process used over those last 8 windows,
# bare and profiled: on two cores the sprig process's share competes with
# the JVM's.
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=$(realpath "${1:?usage: jetty-windows.sh SPRIG [JAVA_HOME] [SPRIG ARGS...]}")
jdk=${2:-/usr/lib/jvm/java-17-openjdk-amd64}
root=${JETTY_ROOT:-org.eclipse.jetty.server.Server::handle}
shift $(( $# >= 2 ? 2 : 1 ))
. scripts/measure/lib/bench-driver.sh
bench_workdir
keep_out() {
    [ -n "${JETTY_KEEP_OUT:-}" ] && cp "$work/out" "$JETTY_KEEP_OUT" 2>/dev/null || true
    bench_cleanup
}
trap keep_out EXIT
BENCH_JAVA_OPTS=${JETTY_JAVA_OPTS:-} bench_start "$jdk" jetty-windows jetty 400 2
# The median iteration (ms) of a window of $1 iterations.
window() { bench_window "$1"; }
# Starts `sprig profile` on the root in the background ($sp), and stops it.
attach() {
    "$sprig" profile "$jvm" --root "$root" --duration 600 \
        --format json -o "$work/report.json" "$@" 2> "$work/sprig.err" &
    sp=$!
}
if [ -n "${JETTY_PLATEAU:-}" ]; then
    # CPU time (user + system, ms) process $1 has used, its ended threads
    # included; 0 when there is no such process.
    cpu_ms() {
        local f
        f=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
        set -- $f
        echo $(( (${12} + ${13}) * 1000 / $(getconf CLK_TCK) ))
    }
    # phase NAME N: N windows of 40, their medians on one line; sets $last8
    # and $cpu8 (CPU ms an iteration of the JVM and of sprig over the last
    # 8 windows).
    phase() {
        local all=() j0=0 s0=0
        for i in $(seq "$2"); do
            if [ "$i" -eq $(($2 - 7)) ]; then j0=$(cpu_ms "$jvm"); s0=$(cpu_ms "${sp:-0}"); fi
            all+=("$(window 40)")
        done
        echo "$1 ${all[*]}"
        last8=$(printf '%s\n' "${all[@]: -8}" | sort -n | awk '{a[NR]=$1} END{printf "%.2f", (a[4]+a[5])/2}')
        cpu8=$(awk -v j="$(( $(cpu_ms "$jvm") - j0 ))" -v s="$(( $(cpu_ms "${sp:-0}") - s0 ))" \
            'BEGIN{printf "JVM %.1f, sprig %.1f", j/320, s/320}')
    }
    phase bare 30
    b=$last8 bc=$cpu8
    attach "$@"
    bench_wait_profiling "$work/sprig.err"
    phase profiled 30
    p=$last8 pc=$cpu8
    sprig_detach
    phase after 10
    a=$last8
    awk -v b="$b" -v p="$p" -v a="$a" 'BEGIN{printf "last 8 windows: bare %.2f  profiled %.2f (%+.1f%%)  after the detach %.2f (%+.1f%%)\n", b, p, (p/b-1)*100, a, (a/b-1)*100}'
    echo "CPU ms an iteration, last 8 windows: bare ($bc)  profiled ($pc)"
    bench_stop
    exit 0
fi
window 300 > /dev/null
bare=$(window 150)
attach "$@"
sleep 4
p1=$(window 150)
p2=$(window 150)
sprig_detach
a1=$(window 150)
a2=$(window 150)
a3=$(window 150)
echo "bare $bare  profiled $p1 $p2  after the detach $a1 $a2 $a3  (median ms per iteration)"
bench_stop
