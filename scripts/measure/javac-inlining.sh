#!/usr/bin/env bash
# What the probes do to C2's inlining in javac: the bench's javac workload
# with -XX:+PrintInlining (into a VM log, not stdout), 600 iterations bare
# (to the plateau), then sprig attached with `Gen::genClass` as root
# (sprig's default timing) and 600 iterations more. Prints, for each
# phase, C2's decisions at call sites of methods that are not sprig's
# probes (inlined, or the reason it refused), and C2's decisions at the
# probes' own call sites while profiled. Each phase's log stays in
# OUT_DIR (bare.log, prof.log), with the profile (report.json).
#
#   bash scripts/measure/javac-inlining.sh SPRIG OUT_DIR [SPRIG PROFILE ARGS...]
#
# With NO_VM_LOG=1 in the environment the JVM runs without the log (whose
# writing slows it) and the script prints the two plateaus only: the
# figures to compare two builds by, in alternating runs. A plateau is the
# median of the last five windows of 20 iterations (bench_plateau in
# scripts/measure/lib/bench-driver.sh); WINDOWS=N runs N windows in each phase
# instead of 30, and SHOW_WINDOWS=1 prints every window's median.
#
# The profiled phase's log holds the compilations after the attach: the
# redefinitions deoptimise what they instrument, so it is mostly the
# profiled code compiled again. C1's refusals ("callee is too large",
# "callee uses too much stack", "no static binding") are left out: tier 3
# code is replaced by C2's within seconds. Needs the JDK 17 sources that
# `sprig-bench` fetches (SPRIG_BENCH_SRC_ZIP, or
# ~/.cache/sprig-bench/jdk17-src.zip); JAVA_HOME_17 picks the JDK.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: javac-inlining.sh SPRIG OUT_DIR [SPRIG ARGS...]"
sprig=$(realpath "${1:?$usage}")
out=$(realpath -m "${2:?$usage}")
shift 2
. scripts/measure/lib/bench-driver.sh
javac_workload javac-inlining.sh
mkdir -p "$out"
log_opts="-XX:+UnlockDiagnosticVMOptions -XX:+PrintCompilation -XX:+PrintInlining \
-XX:+LogVMOutput -XX:-DisplayVMOutput -XX:LogFile=$out/vm.log"
[ "${NO_VM_LOG:-0}" = 1 ] && log_opts=
BENCH_JAVA_OPTS=$log_opts bench_start "$jdk" javac-inlining javac "$work/java.base" java.base "$work/javac-out"
bare=$(bench_plateau "${WINDOWS:-30}")
echo "bare: plateau at $bare ms"
# The VM log up to here is the bare phase.
bare_bytes=0
[ -z "$log_opts" ] || bare_bytes=$(wc -c < "$out/vm.log")
profile_javac "$sprig" "$out" "$@"
w=$(bench_plateau "${WINDOWS:-30}")
echo "profiled: plateau at $w ms ($(awk -v p="$w" -v b="$bare" 'BEGIN{printf "%.2f", p / b}') of bare)"
sprig_detach
bench_stop
[ -n "$log_opts" ] || exit 0
head -c "$bare_bytes" "$out/vm.log" > "$out/bare.log"
tail -c +"$((bare_bytes + 1))" "$out/vm.log" > "$out/prof.log"
rm -f "$out/vm.log"
python3 - "$out/bare.log" "$out/prof.log" << 'EOF'
import collections, html, re, sys

# C2's verdicts (opto/bytecodeInfo.cpp); C1's are left out (see above).
C2 = ['inline (hot)', 'too big', 'hot method too big', 'size > DesiredMethodLimit',
      'already compiled into a big method', 'already compiled into a medium method',
      'NodeCountInliningCutoff', 'inlining too deep', 'recursive inlining is too deep']
SITE = re.compile(r'@ \d+\s+(\S+) \((\d+) bytes\)\s+(?:failed to inline: )?(.*)$')

def decisions(path):
    other, probes = collections.Counter(), collections.Counter()
    for line in open(path, errors='replace'):
        # The VM log escapes what it copies of the tty's output as XML.
        m = SITE.search(html.unescape(line))
        if not m or m.group(3).strip() not in C2:
            continue
        verdict = m.group(3).strip()
        (probes if m.group(1).startswith('sprig.rt.') else other)[verdict] += 1
    return other, probes

(bo, _), (po, pp) = decisions(sys.argv[1]), decisions(sys.argv[2])
print("C2 at call sites of methods other than the probes:")
print(f"  {'':38} {'bare':>14} {'profiled':>14}")
for v in C2:
    b, p = bo[v], po[v]
    if b or p:
        print(f"  {v:38} {b:7} {b / max(1, sum(bo.values())) * 100:5.1f}% "
              f"{p:7} {p / max(1, sum(po.values())) * 100:5.1f}%")
print(f"  {'call sites decided':38} {sum(bo.values()):7}        {sum(po.values()):7}")
print("C2 at the probes' call sites, profiled:")
for v in C2:
    if pp[v]:
        print(f"  {v:38} {pp[v]:7} {pp[v] / sum(pp.values()) * 100:5.1f}%")
EOF
