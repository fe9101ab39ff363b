#!/usr/bin/env python3
"""`sprig sample` on fixtures.ShortThreads (threads of about 5 ms of CPU
time each, beside one that spins for ever): shortWork's share of the two
methods' samples against its share of their CPU time by the fixture's
own clock, taken while sprig sampled.

Usage: python3 scripts/measure/short-threads.py INTERVALS SECS [REPEATS]
(INTERVALS comma-separated ms, e.g. 1,2,20). Env: SPRIG (default
target/release/sprig), JDK (default JDK 17)."""
import json, os, subprocess, sys, tempfile, time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SPRIG = os.environ.get("SPRIG", os.path.join(REPO, "target/release/sprig"))
JDK = os.environ.get("JDK", "/usr/lib/jvm/java-17-openjdk-amd64")


def main():
    ivs = sys.argv[1].split(",")
    secs = sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    tmp = tempfile.mkdtemp(prefix="short-threads-")
    subprocess.run([os.path.join(JDK, "bin/javac"), "-d", tmp,
                    os.path.join(REPO, "fixtures/src/fixtures/ShortThreads.java")], check=True)
    j = subprocess.Popen([os.path.join(JDK, "bin/java"), "-cp", tmp, "fixtures.ShortThreads"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert j.stdout.readline().strip() == "ready"

    def cmd(c, pre):
        j.stdin.write(c + "\n")
        j.stdin.flush()
        while True:
            line = j.stdout.readline().strip()
            if line.startswith(pre):
                return line

    try:
        for _ in range(reps):
            for iv in ivs:
                out = os.path.join(tmp, f"short-{iv}.json")
                sp = subprocess.Popen([SPRIG, "sample", str(j.pid), "--interval", iv, "--duration", secs,
                                       "--format", "json", "-o", out], stderr=subprocess.PIPE, text=True)
                while True:
                    line = sp.stderr.readline()
                    if not line or line.startswith("sprig: sampling JVM"):
                        break
                cmd("reset", "reset")
                time.sleep(float(secs))
                v = [float(x) for x in cmd("shares", "shares").split()[1:]]
                sp.wait()
                r = json.load(open(out))
                tot = {m["method"]: m["total"] for m in r["methods"] if m["class"] == "fixtures.ShortThreads"}
                s, lng = tot.get("shortWork", 0), tot.get("longWork", 0)
                truth = v[0] / (v[0] + v[1])
                share = s / max(1, s + lng)
                print(f"interval {iv}: CPU time {truth*100:.1f}% samples {share*100:.1f}% ({s} of {s+lng}) "
                      f"{100*(share-truth):+.1f} points; short-long {v[1]/v[3]*100:.0f}% of a core; "
                      f"{v[2]:.0f} threads; load {open('/proc/loadavg').read().split()[0]}", flush=True)
    finally:
        j.kill()


main()
