#!/usr/bin/env python3
"""Threads of the accuracy fixture's shape (K twin calls, K root calls, K
twin calls, one thread after the other) with no sprig session, under windows
timing with the timer source, with the JVMTI source, and with the timer
source and a root that is never called; sessions alternate in one JVM.

    python3 scripts/measure/threadlife.py SPRIG JAVA [MODES] [ROUNDS]

MODES is a comma-separated list of `bare`, `timer`, `jvmti`, `noroot`, run
in that order (default `bare,timer,jvmti,noroot` five times). Every call is
timed by the program (`threadlife/Main.java`) with its thread's CPU time and
its voluntary and involuntary context switches: a thread that waits on sprig
switches voluntarily; one that waits for a CPU involuntarily. Per mode it
prints, for the twin calls before, the root calls and the twin calls after:
the voluntary and involuntary switches, the per-thread max call (median
over threads) and the CPU time of each thread's first root call over the
twin's calls; and the accuracy fixture's statistic (per session: the median
over threads of the root calls' time over the mean of the twins', then the
median over sessions).
"""

import collections
import os
import queue
import signal
import statistics as st
import subprocess
import sys
import tempfile
import threading

K = 10
HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = {
    "timer": ["--root", "threadlife.Root::root", "--source", "timer"],
    "jvmti": ["--root", "threadlife.Root::root", "--source", "jvmti"],
    "noroot": ["--root", "threadlife.Never::never", "--source", "timer"],
}


def main():
    sprig, java = sys.argv[1], sys.argv[2]
    modes = (sys.argv[3] if len(sys.argv) > 3 else ",".join(["bare,timer,jvmti,noroot"] * 5)).split(",")
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    classes = tempfile.mkdtemp(prefix="threadlife-")
    src = os.path.join(HERE, "threadlife", "threadlife")
    javac = os.path.join("/usr/lib/jvm/java-17-openjdk-amd64/bin/javac")
    subprocess.run(
        [javac, "--release", "17", "-d", classes]
        + [os.path.join(src, f) for f in sorted(os.listdir(src))],
        check=True,
    )
    p = subprocess.Popen(
        [os.path.join(java, "bin", "java"), "-cp", classes, "threadlife.Main"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.rstrip()) for x in p.stdout], daemon=True).start()

    def until(prefix):
        out = []
        while True:
            line = lines.get(timeout=300)
            out.append(line)
            if line.startswith(prefix):
                return out

    until("ready")
    sessions = []
    for m in modes:
        sp = None
        if m != "bare":
            out = os.path.join(classes, f"{m}.txt")
            sp = subprocess.Popen(
                [sprig, "profile", str(p.pid), "--timing", "windows", "--interval", "1", "-o", out]
                + ARGS[m],
                stderr=subprocess.PIPE,
                text=True,
            )
            while True:
                line = sp.stderr.readline()
                if not line or line.startswith("sprig: profiling"):
                    break
        p.stdin.write(f"go {rounds} {K}\n")
        p.stdin.flush()
        calls = []
        for line in until("done"):
            if line.startswith("round "):
                calls.append([list(map(int, c.split("/"))) for c in line.split()[3:]])
        sessions.append((m, calls))
        if sp:
            sp.send_signal(signal.SIGINT)
            sp.communicate(timeout=120)
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait(timeout=60)
    print("load average:", os.getloadavg())
    report(sessions)


def report(sessions):
    by_mode = collections.defaultdict(list)
    for m, calls in sessions:
        by_mode[m].append(calls)
    names = ["twin before", "root", "twin after"]
    for m, runs in by_mode.items():
        threads = [t for calls in runs for t in calls]
        for seg in range(3):
            part = [t[K * seg : K * seg + K] for t in threads]
            vol = sum(c[2] for t in part for c in t)
            inv = sum(c[3] for t in part for c in t)
            mx = st.median(max(c[0] for c in t) for t in part) / 1000
            print(f"{m} {names[seg]}: {len(part) * K} calls, {vol} voluntary and {inv} involuntary switches, per-thread max call {mx:.1f} ms")
        first = st.median(t[K][1] for t in threads)
        twin = st.median(c[1] for t in threads for c in t[:K] + t[2 * K :])
        ratios = [
            st.median(sum(c[0] for c in t[K : 2 * K]) / ((sum(c[0] for c in t[:K]) + sum(c[0] for c in t[2 * K :])) / 2) for t in calls)
            for calls in runs
        ]
        print(f"{m}: first root call's CPU {first} µs against {twin} µs a twin call; root/twins {st.median(ratios):.3f} ({', '.join(f'{r:.3f}' for r in ratios)})")


if __name__ == "__main__":
    main()
