#!/usr/bin/env bash
# What keeping the allocation samples outside every root by stack costs
# the allocating thread: fixtures.Allocs' loop (CALLS calls of its root(),
# whose allocations are all made outside every root context: the session's
# root is fixtures.Allocs::multi, which its loop never calls) under
# `sprig profile --alloc-interval INTERVAL` (default 512 KiB) with the
# agent's knob SPRIG_AGENT_FAULT=sampled-alloc-cost, which times each
# sample's stack read and table update in the thread's CPU time and says
# the count and the mean at the end. Each round prints the samples, their
# mean CPU ns, the loop's CPU ms (the JVM's count) and the share of the
# loop's CPU time the stacks took; then the medians. CPU time, not wall
# time: the figure holds on a loaded host, where the loop's wall time
# varies by tens of percent from run to run.
#   [INTERVAL=524288] [CALLS=1000000] [ROUNDS=5] [JAVA_HOME=...]
#   bash scripts/measure/outside-alloc-cost.sh [path/to/sprig]
#   (default sprig: target/release/sprig; JAVA_HOME: JDK 17 under /usr/lib/jvm)
set -euo pipefail
cd "$(dirname "$0")/../.."
sprig=${1:-target/release/sprig}
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
calls=${CALLS:-1000000}
rounds=${ROUNDS:-5}
interval=${INTERVAL:-524288}
work=$(mktemp -d)
jpid= spid=
trap '[[ -n $spid ]] && kill "$spid" 2>/dev/null; [[ -n $jpid ]] && kill "$jpid" 2>/dev/null; rm -rf "$work"' EXIT
# The loop between two lines on stdin, with its thread's CPU time.
cat > "$work/Measure.java" <<'JAVA'
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Measure {
    public static void main(String[] args) throws Exception {
        java.lang.management.ThreadMXBean mx = java.lang.management.ManagementFactory.getThreadMXBean();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        Class.forName("fixtures.Allocs");
        System.out.println("ready");
        in.readLine();
        long cpu = mx.getCurrentThreadCpuTime();
        fixtures.Allocs.main(args);
        System.out.println("loop cpu ns " + (mx.getCurrentThreadCpuTime() - cpu));
        in.readLine();
    }
}
JAVA
"$jdk/bin/javac" -nowarn -d "$work" fixtures/src/fixtures/Allocs.java
"$jdk/bin/javac" -nowarn -cp "$work" -d "$work" "$work/Measure.java"
# Waits (at most a minute) for a line matching $2 in file $1.
await() {
    for _ in $(seq 600); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "timed out waiting for '$2' in $1" >&2
    cat "$1" >&2
    exit 1
}

echo "JDK $("$jdk/bin/java" -version 2>&1 | head -1), $calls calls, interval $interval, $(uptime | sed 's/.*load/load/')"
ns_all= share_all= n_all= walk_all=
for r in $(seq "$rounds"); do
    rm -f "$work/in" "$work/stdout" "$work/sprig.err"
    mkfifo "$work/in"
    SPRIG_AGENT_FAULT=sampled-alloc-cost "$jdk/bin/java" -cp "$work" Measure "$calls" \
        <"$work/in" >"$work/stdout" 2>&1 &
    jpid=$!
    exec 3>"$work/in"
    await "$work/stdout" '^ready'
    "$sprig" profile "$jpid" --root fixtures.Allocs::multi --alloc-interval "$interval" \
        -o "$work/out.txt" 2>"$work/sprig.err" &
    spid=$!
    await "$work/sprig.err" '^sprig: profiling'
    echo go >&3
    await "$work/stdout" '^loop cpu ns'
    kill -INT "$spid"
    wait "$spid" || true
    spid=
    echo exit >&3
    exec 3>&-
    wait "$jpid" || true
    jpid=
    line=$(grep -o 'sampled-alloc-cost: [0-9]* samples.*' "$work/sprig.err" | head -1)
    n=$(sed -n 's/^sampled-alloc-cost: \([0-9]*\) samples.*, \([0-9]*\) ns each$/\1/p' <<<"$line")
    walk=$(sed -n 's/.*(\([0-9]*\) ns each reading the stack).*/\1/p' <<<"$line")
    ns=$(sed -n 's/^sampled-alloc-cost: \([0-9]*\) samples.*, \([0-9]*\) ns each$/\2/p' <<<"$line")
    cpu=$(sed -n 's/^loop cpu ns \([0-9]*\)$/\1/p' "$work/stdout")
    share=$(awk -v n="$n" -v ns="$ns" -v c="$cpu" 'BEGIN { printf "%.3f", n * ns * 100 / c }')
    echo "round $r: $n samples outside roots kept by stack, $ns ns CPU each ($walk reading the stack); loop $((cpu / 1000000)) ms CPU; stacks ${share}% of it"
    n_all+=" $n" ns_all+=" $ns" share_all+=" $share" walk_all+=" $walk"
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "samples:$n_all, median $(echo "$n_all" | median)"
echo "ns each:$ns_all, median $(echo "$ns_all" | median)"
echo "ns each reading the stack:$walk_all, median $(echo "$walk_all" | median)"
echo "share of the loop's CPU time (%):$share_all, median $(echo "$share_all" | median)"
echo "after: $(uptime | sed 's/.*load/load/')"
