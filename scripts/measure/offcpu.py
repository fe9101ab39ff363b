#!/usr/bin/env python3
"""Where a profiled program's threads spend the time they are off the CPU:
waiting for a CPU (switched out runnable, state R: preempted) or asleep
(switched out in state S or D: blocked on a lock, a safepoint, a condition,
I/O). A thread that waits on sprig (a lock the agent holds, a bounded wait, a
handshake) shows up as sleeps; a host that is short of cores as runnable waits.

    perf sched record -k CLOCK_MONOTONIC -o sched.data &   # as root
    MODES=windows+timer,windows+jvmti SCENARIOS=spin \\
        python3 scripts/measure/windows-accuracy.py SPRIG JAVA CLASSES 2
    kill -INT %1
    python3 scripts/measure/offcpu.py sched.data '^measure-spin-'

The threads are those whose name matches the pattern (the accuracy fixture's
measuring threads, `measure-S-<round>`), grouped into sessions in the order
they first ran (a thread named `...-0` opens the next session; the sessions of
`windows-accuracy.py` alternate in the order of MODES). Per session it prints
the switch-outs, time off the CPU and longest stretch per state, the time
runnable by thirds of each thread's CPU time (the accuracy fixture's thread
runs its twin, then the profiled calls, then the twin again), and each sleep
with the point in the thread's life where it began (up to 100 a session).
"""

import collections
import re
import subprocess
import sys

SWITCH = re.compile(
    r"\[(\d+)\]\s+([\d.]+):\s+prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ "
    r"prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)"
)


def switches(data):
    """(time, 'in' | 'out', tid, name, state) for every sched_switch."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "cpu,time,trace", "--ns"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in text.splitlines():
        m = SWITCH.search(line)
        if not m:
            continue
        t = float(m[2])
        yield t, "out", int(m[4]), m[3], m[5][0]
        yield t, "in", int(m[7]), m[6], ""


def main():
    data, pattern = sys.argv[1], re.compile(sys.argv[2])
    events = collections.defaultdict(list)
    names, first = {}, {}
    for t, kind, tid, name, state in switches(data):
        if pattern.match(name):
            events[tid].append((t, kind, state))
            names[tid] = name
            first.setdefault(tid, t)
    sessions = []
    for tid in sorted(first, key=first.get):
        if names[tid].endswith("-0") or not sessions:
            sessions.append([])
        sessions[-1].append(tid)
    for i, tids in enumerate(sessions):
        off = collections.defaultdict(list)
        thirds = [0.0, 0.0, 0.0]
        sleeps = []
        for tid in tids:
            ev = events[tid]
            cpu, since, outs = 0.0, None, []
            for t, kind, state in ev:
                if kind == "in":
                    if outs and outs[-1][3] is None:
                        outs[-1][3] = t
                    since = t
                elif since is not None:
                    cpu += t - since
                    since = None
                    outs.append([cpu, t, state, None])
            life = ev[-1][0] - first[tid]
            for used, t, state, back in outs:
                if back is None:
                    continue
                off[state].append(back - t)
                if state == "R" and cpu > 0:
                    thirds[min(2, int(3 * used / cpu))] += back - t
                else:
                    sleeps.append((names[tid], (t - first[tid]) * 1e3, life * 1e3, (back - t) * 1e3))
        states = "; ".join(
            f"{s}: {len(v)} switch-outs, {sum(v) * 1e3:.0f} ms off CPU, longest {max(v) * 1e3:.1f} ms"
            for s, v in sorted(off.items())
        )
        print(f"session {i}: {len(tids)} threads; {states}")
        print(
            "  runnable by thirds of each thread's CPU time (ms): "
            + ", ".join(f"{w * 1e3:.0f}" for w in thirds)
        )
        if len(sleeps) > 100:
            print(f"  {len(sleeps)} sleeps (listed up to 100)")
            continue
        for name, at, life, ms in sleeps:
            print(f"  {name} sleeps at +{at:.1f} ms of its {life:.0f} ms, for {ms:.2f} ms")


if __name__ == "__main__":
    main()
