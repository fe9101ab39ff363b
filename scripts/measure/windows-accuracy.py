#!/usr/bin/env python3
"""Accuracy fixtures (a) `spin` and (b) `calls` under windows timing with the
CPU-timer source, windows timing with the JVMTI source, and sampled timing:
sessions alternate in one JVM, N rounds of each mode.

    python3 scripts/measure/windows-accuracy.py SPRIG JAVA CLASSES [N]

SPRIG is the sprig binary, JAVA the JDK's home, CLASSES the compiled
fixtures (`fixtures/src`, as `sprig_tests::fixture_classes` compiles them).

Per session and fixture it prints profiled/bare (the fixture's own timing of
each profiled round over its never-instrumented twin timed on the same
thread before and after; median over rounds), charged/bare (sprig's time
per root call of each measuring thread over its twin, median over the
threads: under windows timing the root's time per silent call, over the
threads whose silent calls got a sample) and the root's children's self
shares of the root's time; then the medians over the sessions of each mode.

MODES and SCENARIOS in the environment (comma-separated names) run a part:
e.g. `MODES=windows+timer,windows+jvmti SCENARIOS=spin`. The JVM inherits
the environment, so the agent's measurement knobs apply (a comma-separated list in
`SPRIG_AGENT_FAULT`): `timer-no-walk`, the timer's handler counts the signal
and returns; `timer-no-signal`, no thread gets a timer; `timer-idle-drain`,
the timer's drain thread keeps the windows' schedule only; `timer-no-events`,
no ClassLoad/ClassPrepare/CompiledMethodLoad events; `timer-no-thread-events`,
no ThreadStart/ThreadEnd; `timer-no-cml-capability`, no
can_generate_compiled_method_load_events; `timer-no-methods`, no jmethodIDs
made for the loaded classes at the start; `timer-drain-1ms`, the drain wakes
every 1 ms; `timer-tick-1ms`, it wakes every 1 ms to tick the windows and
scans and drains every 10th wake.
"""

import json
import os
import queue
import signal
import statistics as st
import subprocess
import sys
import threading
import time

SCENARIOS = [("spin", "spinRoot", 10), ("calls", "callsRoot", 5)]
ROUNDS = 31
MODES = {
    "windows+timer": ["--timing", "windows", "--interval", "1"],
    "windows+jvmti": ["--timing", "windows", "--interval", "1", "--source", "jvmti"],
    "sampled": ["--timing", "sampled", "--interval", "1"],
}

if os.environ.get("MODES"):
    MODES = {m: MODES[m] for m in os.environ["MODES"].split(",")}
if os.environ.get("SCENARIOS"):
    SCENARIOS = [x for x in SCENARIOS if x[0] in os.environ["SCENARIOS"].split(",")]


def start_jvm(java, classes):
    p = subprocess.Popen(
        [os.path.join(java, "bin", "java"), "-cp", classes, "accuracy.Accuracy"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    lines = queue.Queue()

    def read():
        for line in p.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return p, lines


def wait_for(lines, prefix, seen=None):
    while True:
        line = lines.get(timeout=300)
        if seen is not None:
            seen.append(line)
        if line.startswith(prefix):
            return line


def send(p, cmd):
    p.stdin.write(cmd + "\n")
    p.stdin.flush()


def session(sprig, p, lines, mode, out):
    args = [sprig, "profile", str(p.pid), "--format", "json", "-o", out] + MODES[mode]
    for _, m, _ in SCENARIOS:
        args += ["--root", "accuracy.Work::" + m]
    sp = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    while True:
        line = sp.stderr.readline()
        if not line or line.startswith("sprig: profiling"):
            break
    seen = {}
    for s, _, k in SCENARIOS:
        seen[s] = []
        send(p, f"run {s} {k} {ROUNDS}")
        wait_for(lines, "done " + s, seen[s])
    sp.send_signal(signal.SIGINT)
    sp.communicate(timeout=120)
    with open(out) as f:
        report = json.load(f)
    windows = mode.startswith("windows")
    result = {}
    for s, _, _ in SCENARIOS:
        rounds = {}
        for line in seen[s]:
            if line.startswith(f"round {s} "):
                v = line.split()[2:]
                rounds[int(v[0])] = (float(v[1]), float(v[2]), float(v[3]))
        profiled = [r[1] / ((r[0] + r[2]) / 2) for r in rounds.values()]
        total = 0.0
        children = {}
        charged = []
        for t in report["threads"]:
            name = t["name"]
            if not name.startswith(f"measure-{s}-"):
                continue
            bare = sum(rounds[int(name.rsplit("-", 1)[1])][::2]) / 2
            for r in t["roots"]:
                if windows and r["total_ns"] == 0:
                    continue  # no sample of its silent calls
                calls = r["calls"]
                if windows and calls == 0:
                    calls = (r.get("latency") or {}).get("count", 0)
                total += r["total_ns"]
                if calls:
                    charged.append(r["total_ns"] / calls / bare)
                for c in r["children"]:
                    children[c["method"]] = children.get(c["method"], 0) + c["self_ns"]
        result[s] = {
            "profiled": st.median(profiled),
            "charged": st.median(charged) if charged else None,
            "threads": len(charged),
            "shares": {k: v / total for k, v in children.items()} if total else {},
        }
    return result, report.get("windows")


def main():
    sprig, java, classes = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    out_dir = os.environ.get("OUT", "/tmp")
    p, lines = start_jvm(java, classes)
    wait_for(lines, "ready")
    for s, _, k in SCENARIOS:
        send(p, f"bare {s} {k} {ROUNDS}")
        wait_for(lines, "bare " + s)
    results = {m: [] for m in MODES}
    for i in range(n):
        for mode in MODES:
            out = os.path.join(out_dir, f"windows-accuracy-{mode}-{i}.json")
            r, w = session(sprig, p, lines, mode, out)
            results[mode].append(r)
            print(mode, i, json.dumps(r), json.dumps(w), flush=True)
            time.sleep(1)
    send(p, "exit")
    p.wait(timeout=60)
    print("load average:", os.getloadavg())
    for mode, runs in results.items():
        for s, _, _ in SCENARIOS:
            prof = st.median(x[s]["profiled"] for x in runs)
            ch = [x[s]["charged"] for x in runs if x[s]["charged"] is not None]
            shares = {}
            for x in runs:
                for k, v in x[s]["shares"].items():
                    shares.setdefault(k, []).append(v)
            med = {k: round(st.median(v), 3) for k, v in sorted(shares.items())}
            spread = f"{min(ch):.2f}-{max(ch):.2f}" if ch else "-"
            print(
                f"SUMMARY {mode} {s}: profiled/bare {prof:.3f}; charged/bare "
                f"{st.median(ch) if ch else float('nan'):.3f} ({spread}, {len(ch)} sessions); "
                f"children's self shares {med}"
            )


if __name__ == "__main__":
    main()
