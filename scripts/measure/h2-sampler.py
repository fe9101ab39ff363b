#!/usr/bin/env python3
"""Where `--alloc-interval`'s cost on H2 goes: HotSpot's heap sampler, or
sprig's callback.

Each round starts three JVMs running the bench's H2 workload
(`bench.Driver h2 500`, the `statement` roots), in an order that rotates
from round to round:
  B    plain JVM, then `sprig profile --scheme lazy` (Scheme B)
  B+hs the JVM with a JVMTI agent that is not sprig
       (scripts/measure/heapsampler/heapsampler.c: HotSpot's heap sampler
       at 512 KiB, a callback that only counts), then Scheme B
  Bs   plain JVM, then Scheme B with `--alloc-interval 524288` (the bench's
       row Bs: sprig's own sampled path)
In each JVM: WARM iterations, then ITERS bare iterations timed, the attach,
WARM iterations with the probes in, ITERS timed, the stop. Prints each
JVM's median bare and profiled iteration times and their ratio, then per
kind the median over the rounds of: bare (B+hs's bare window is the
sampler alone without sprig) and profiled over bare, the profiled
medians of B+hs and Bs over B's, and the JIT compilations
(`sun.ci.totalCompiles`) in each JVM's two timed windows.

With PERF=1, `perf record` samples each JVM's timed profiled window (at
499 Hz, without call graphs) and the script prints each kind's top shared
objects and the top symbols of libjvm and the sprig agent.

  [ROUNDS=5] [WARM=30] [ITERS=20] [PERF=1] [JAVA_HOME=...]
  python3 scripts/measure/h2-sampler.py [path/to/sprig]
  (default sprig: target/release/sprig; needs gcc and Debian's h2.jar)
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JDK = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
ROUNDS = int(os.environ.get("ROUNDS", "5"))
WARM = int(os.environ.get("WARM", "30"))
ITERS = int(os.environ.get("ITERS", "20"))
PERF = os.environ.get("PERF") == "1"
PERF_DATA = {}
# Per kind: JIT compilations in the bare timed window and in the profiled one.
COMPILES = {}
ROOTS = ["org.h2.command.Command::executeQuery", "org.h2.command.Command::executeUpdate"]
SHARE = "/usr/share/java"
JARS = [
    "h2.jar",
    "jetty9-server.jar",
    "jetty9-servlet.jar",
    "jetty9-security.jar",
    "jetty9-http.jar",
    "jetty9-io.jar",
    "jetty9-util.jar",
    "servlet-api.jar",
]


def load():
    return open("/proc/loadavg").read().split()[0:3]


def build(work):
    cp = ":".join(os.path.join(SHARE, j) for j in JARS)
    src = os.path.join(ROOT, "fixtures/bench/src/bench")
    files = [
        os.path.join(src, f)
        for f in sorted(os.listdir(src))
        if f.endswith(".java") and f not in ("LuceneWork.java", "DirectProbe.java", "ProbeCost.java")
    ]
    classes = os.path.join(work, "classes")
    subprocess.run(
        [f"{JDK}/bin/javac", "-nowarn", "-cp", cp, "-d", classes] + files,
        check=True,
        stderr=subprocess.DEVNULL,
    )
    so = os.path.join(work, "heapsampler.so")
    subprocess.run(
        [
            "gcc", "-O2", "-shared", "-fPIC",
            f"-I{JDK}/include", f"-I{JDK}/include/linux",
            "-o", so,
            os.path.join(ROOT, "scripts/measure/heapsampler/heapsampler.c"),
        ],
        check=True,
    )
    return classes + ":" + cp, so


def compiles(pid):
    """The JVM's count of JIT compilations so far (`sun.ci.totalCompiles`)."""
    out = subprocess.run(
        [f"{JDK}/bin/jcmd", str(pid), "PerfCounter.print"], capture_output=True, text=True
    ).stdout
    for line in out.splitlines():
        if line.startswith("sun.ci.totalCompiles="):
            return int(line.split("=")[1])
    return -1


def iterate(jvm, n):
    jvm.stdin.write(f"iter {n}\n")
    jvm.stdin.flush()
    while True:
        line = jvm.stdout.readline()
        if not line:
            raise RuntimeError("JVM ended")
        if line.startswith("error"):
            raise RuntimeError(line)
        if line.startswith("times "):
            times = [int(t) / 1e6 for t in line.split()[1:]]
            jvm.stdout.readline()  # check SUM
            return times


def one(kind, cp, so, sprig, work):
    cmd = [f"{JDK}/bin/java"]
    if kind == "B+hs":
        cmd.append(f"-agentpath:{so}=524288")
    cmd += ["-cp", cp, "bench.Driver", "h2", "500"]
    jvm = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        while not jvm.stdout.readline().startswith("ready"):
            pass
        iterate(jvm, WARM)
        c0 = compiles(jvm.pid)
        bare = statistics.median(iterate(jvm, ITERS))
        c1 = compiles(jvm.pid)
        args = [sprig, "profile", str(jvm.pid), "--scheme", "lazy"]
        for r in ROOTS:
            args += ["--root", r]
        if kind == "Bs":
            args += ["--alloc-interval", "524288"]
        args += ["--format", "json", "-o", os.path.join(work, "out.json")]
        sp = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while True:
            line = sp.stderr.readline()
            if not line:
                raise RuntimeError(f"sprig ended before profiling ({kind})")
            if line.startswith("sprig: profiling"):
                break
        iterate(jvm, WARM)
        c2 = compiles(jvm.pid)
        rec = None
        if PERF:
            data = os.path.join(work, f"perf-{kind}.data")
            rec = subprocess.Popen(
                ["perf", "record", "-F", "499", "-o", data, "-p", str(jvm.pid)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(0.5)
        prof = statistics.median(iterate(jvm, ITERS))
        if rec is not None:
            rec.send_signal(signal.SIGINT)
            rec.wait(timeout=60)
            PERF_DATA.setdefault(kind, []).append(data)
        c3 = compiles(jvm.pid)
        COMPILES.setdefault(kind, []).append((c1 - c0, c3 - c2))
        sp.send_signal(signal.SIGINT)
        sp.communicate(timeout=120)
        jvm.stdin.write("quit\n")
        jvm.stdin.flush()
        jvm.wait(timeout=60)
        return bare, prof
    finally:
        if jvm.poll() is None:
            jvm.kill()


def main():
    sprig = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/sprig")
    kinds = ["B", "B+hs", "Bs"]
    with tempfile.TemporaryDirectory() as work:
        cp, so = build(work)
        print(f"JDK {JDK}, {ROUNDS} rounds, {WARM} warm-up and {ITERS} timed iterations, load {load()}")
        res = {k: [] for k in kinds}
        for r in range(ROUNDS):
            order = kinds[r % 3:] + kinds[: r % 3]
            for k in order:
                t0 = time.time()
                bare, prof = one(k, cp, so, sprig, work)
                res[k].append((bare, prof))
                print(
                    f"round {r + 1} {k}: bare {bare:.1f} ms, profiled {prof:.1f} ms, "
                    f"x{prof / bare:.2f} ({time.time() - t0:.0f} s, load {load()[0]})",
                    flush=True,
                )
        for k in kinds:
            bares = [b for b, _ in res[k]]
            ratios = [p / b for b, p in res[k]]
            print(
                f"{k}: bare median {statistics.median(bares):.1f} ms, "
                f"profiled/bare median x{statistics.median(ratios):.3f}"
            )
        for k in ["B+hs", "Bs"]:
            per = [p / bp for (_, p), (_, bp) in zip(res[k], res["B"])]
            print(
                f"{k} profiled over B's, per round: "
                + ", ".join(f"{x:.3f}" for x in per)
                + f"; median {statistics.median(per):.3f}"
            )
        hs = [b for b, _ in res["B+hs"]]
        plain = [b for b, _ in res["B"]] + [b for b, _ in res["Bs"]]
        print(
            f"bare with the heap sampler (no sprig) over bare without: "
            f"{statistics.median(hs) / statistics.median(plain):.3f}"
        )
        for k, c in COMPILES.items():
            print(f"{k}: JIT compilations in the timed windows (bare, profiled) per round: {c}")
        for k, files in PERF_DATA.items():
            for f in files[-1:]:
                out = subprocess.run(
                    ["perf", "report", "-i", f, "--stdio", "--no-children", "--sort", "dso,sym"],
                    capture_output=True,
                    text=True,
                ).stdout
                lines = [l for l in out.splitlines() if l.strip() and not l.startswith("#")]
                print(f"perf {k} (last round), top symbols:")
                for l in lines[:25]:
                    print("   " + l)
                agent = [l for l in lines if "sprig" in l]
                print(f"perf {k}: sprig agent symbols: {len(agent)}, first: {agent[:8]}")
        print(f"after: load {load()}")


if __name__ == "__main__":
    main()
