#!/usr/bin/env python3
"""The CPU time of the timer source's own thread (`sprig-timer`) in the target,
for two sprig builds side by side.

Usage: timer-thread-cpu.py SPRIG_A SPRIG_B [ROUNDS]

Each session starts a fresh JVM running `fixtures.Spin` (two busy threads;
a fresh JVM each time, since an agent's SIGPROF handler stays installed after
its detach and a second build would step aside), runs `SPRIG sample PID
--duration 9` at the default interval, and reads the `sprig-timer` thread's
and the whole JVM's on-CPU time (`/proc/PID/task/TID/schedstat`, ns) over
5 s in the middle of the session. The two builds alternate which goes first
each round; prints each session and the medians. Each SPRIG needs its
`libsprig_agent.so` beside it. JAVA_HOME: the JDK (default Debian's 17).
"""
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JDK = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")


def compile_fixture(out):
    src = os.path.join(ROOT, "fixtures/src/fixtures")
    subprocess.run(
        [os.path.join(JDK, "bin/javac"), "-d", out,
         os.path.join(src, "Spin.java"), os.path.join(src, "SpinOther.java")],
        check=True,
    )


def start(classes):
    jvm = subprocess.Popen(
        [os.path.join(JDK, "bin/java"), "-cp", classes, "fixtures.Spin"],
        stdout=subprocess.PIPE, text=True,
    )
    for line in jvm.stdout:
        if "ready" in line:
            return jvm
    raise SystemExit("fixtures.Spin ended before it was ready")


def on_cpu_s(task_dir):
    with open(os.path.join(task_dir, "schedstat")) as f:
        return int(f.read().split()[0]) / 1e9


def thread_cpu(pid, name):
    for d in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(os.path.join(d, "comm")) as f:
                if f.read().strip() == name:
                    return on_cpu_s(d)
        except OSError:
            pass
    raise SystemExit(f"no {name} thread in {pid}: did the session fall back to the JVMTI source?")


def jvm_cpu(pid):
    total = 0.0
    for d in glob.glob(f"/proc/{pid}/task/*"):
        try:
            total += on_cpu_s(d)
        except OSError:
            pass
    return total


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    builds = sys.argv[1:3]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    classes = tempfile.mkdtemp(prefix="timer-thread-cpu-")
    compile_fixture(classes)
    results = {b: [] for b in builds}
    for r in range(rounds):
        for b in builds if r % 2 == 0 else builds[::-1]:
            jvm = start(classes)
            try:
                s = subprocess.Popen(
                    [b, "sample", str(jvm.pid), "--duration", "9", "-o", os.devnull],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
                time.sleep(2.5)
                t0, j0, w0 = thread_cpu(jvm.pid, "sprig-timer"), jvm_cpu(jvm.pid), time.time()
                time.sleep(5)
                t1, j1, w1 = thread_cpu(jvm.pid, "sprig-timer"), jvm_cpu(jvm.pid), time.time()
                s.wait()
            finally:
                jvm.kill()
                jvm.wait()
            ms = (t1 - t0) * 1000 / (w1 - w0)
            share = (t1 - t0) / (j1 - j0) * 100
            results[b].append((ms, share))
            print(f"round {r + 1} {b}: sprig-timer {ms:.1f} ms a second, {share:.2f}% of the JVM's CPU", flush=True)
    for b in builds:
        ms = statistics.median(x[0] for x in results[b])
        share = statistics.median(x[1] for x in results[b])
        print(f"{b}: median {ms:.1f} ms a second, {share:.2f}% of the JVM's CPU ({rounds} sessions)")


if __name__ == "__main__":
    main()
