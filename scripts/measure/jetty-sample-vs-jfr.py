#!/usr/bin/env python3
"""The bench's Jetty workload (bench.Driver jetty 400 2): `sprig sample
--interval 2 --threads` beside a JFR recording of execution samples every
1 ms over the same iterations; the self-share overlap (Java-state and all),
JFR's halves, and per thread group (the clients `load-*`, two new threads
an iteration; the server `qtp*`) the shares of sprig's samples, of JFR's and
of the CPU time by /proc (threads alive through the window; the rest is the
threads that ended in it), and the overlap within each group.

Usage: CP=CLASSPATH [SECS=12] [REPEATS=3] python3 scripts/measure/jetty-sample-vs-jfr.py [SPRIG]"""
import json, os, subprocess, sys, time, signal, collections, glob

SPRIG = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target/release/sprig")
JDK = os.environ.get("JDK", "/usr/lib/jvm/java-17-openjdk-amd64")
SECS = float(os.environ.get("SECS", "12"))
REPEATS = int(os.environ.get("REPEATS", "1"))
INTERVAL = os.environ.get("INTERVAL", "2")
# The bench classes (fixtures/bench compiled) and the Jetty jars, as sprig-bench builds its class path.
CP = os.environ["CP"]
OUT = os.environ.get("OUT", "/tmp/jetty-sample-vs-jfr")
os.makedirs(OUT, exist_ok=True)
JFC = OUT + "/exec1ms.jfc"
open(JFC, "w").write("""<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="x" description="x">
  <event name="jdk.ExecutionSample"><setting name="enabled">true</setting><setting name="period">1 ms</setting></event>
  <event name="jdk.NativeMethodSample"><setting name="enabled">true</setting><setting name="period">1 ms</setting></event>
</configuration>
""")


def group(name):
    if name.startswith("load-"):
        return "client(load-*)"
    if name.startswith("qtp"):
        return "server(qtp*)"
    return "other:" + name.split("-")[0]


def proc_cpu(pid):
    """(process cpu ticks, {tid: (comm, ticks)})"""
    def ticks(path):
        s = open(path).read()
        f = s[s.rindex(")") + 2:].split()
        return int(f[11]) + int(f[12])
    tot = ticks(f"/proc/{pid}/stat")
    per = {}
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            comm = open(t + "/comm").read().strip()
            per[int(os.path.basename(t))] = (comm, ticks(t + "/stat"))
        except OSError:
            pass
    return tot, per


def overlap(a, b):
    ta, tb = sum(a.values()), sum(b.values())
    if not ta or not tb:
        return float("nan")
    return sum(min(a[k] / ta, b.get(k, 0) / tb) for k in a)


def shares(d):
    t = sum(d.values())
    return {k: v / t for k, v in d.items()} if t else {}


def main():
    java = subprocess.Popen([JDK + "/bin/java", "-XX:FlightRecorderOptions:stackdepth=2048", "-cp", CP,
                             "bench.Driver", "jetty", "400", "2"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, bufsize=1)
    line = java.stdout.readline()
    assert line.startswith("ready"), line
    pid = java.pid

    def iterate(k):
        java.stdin.write(f"iter {k}\n"); java.stdin.flush()
        t = java.stdout.readline(); java.stdout.readline()
        xs = [int(x) / 1e6 for x in t.split()[1:]]
        return xs
    warm = iterate(400)
    ms = sorted(warm[200:])[100]
    k = max(3, int(SECS * 1000 / ms))
    print(f"iteration {ms:.2f} ms, window {k} iterations", flush=True)
    results = []
    for rep in range(REPEATS):
        a = f"{OUT}/a{rep}.json"
        rec = f"{OUT}/r{rep}.jfr"
        sp = subprocess.Popen([SPRIG, "sample", str(pid), "--format", "json", "-o", a, "--suggest-roots", "5",
                               "--interval", INTERVAL, "--threads"], stderr=subprocess.PIPE, text=True)
        while True:
            l = sp.stderr.readline()
            if not l or l.startswith("sprig: sampling JVM"):
                break
        subprocess.run([JDK + "/bin/jcmd", str(pid), "JFR.start", "name=m", f"settings={JFC}", f"filename={rec}"],
                       check=True, capture_output=True)
        c0 = proc_cpu(pid)
        t0 = time.time()
        iterate(k)
        wall = time.time() - t0
        c1 = proc_cpu(pid)
        subprocess.run([JDK + "/bin/jcmd", str(pid), "JFR.stop", "name=m"], check=True, capture_output=True)
        sp.send_signal(signal.SIGINT)
        err = sp.stderr.read()
        sp.wait()
        rep_json = json.load(open(a))
        # truth: per group cpu from /proc (threads alive at both ends); the rest is short-lived threads
        truth = collections.Counter()
        tot = c1[0] - c0[0]
        long_sum = 0
        for tid, (comm, tk) in c1[1].items():
            if tid in c0[1]:
                d = tk - c0[1][tid][1]
                truth[group(comm)] += d
                long_sum += d
        truth["short-lived (load-* mostly)"] = tot - long_sum
        # sprig per method (java part, all) and per group
        meth_all, meth_java = collections.Counter(), collections.Counter()
        for x in rep_json["methods"]:
            k2 = f"{x['class']}::{x['method']}"
            s = x.get("self", 0); n = min(x.get("native_self", 0), s)
            meth_all[k2] += s; meth_java[k2] += s - n
        sgroups = collections.Counter()
        sthreads = collections.Counter()
        gmeth = collections.defaultdict(collections.Counter)
        natfrac = {f"{x['class']}::{x['method']}": min(x.get('native_self', 0), x.get('self', 0)) / max(1, x.get('self', 0)) for x in rep_json["methods"]}
        def walk(g, nodes):
            for nd in nodes:
                kk = f"{nd['class']}::{nd['method']}"
                if nd.get('self', 0):
                    gmeth[g][kk] += nd['self'] * (1 - natfrac.get(kk, 0))
                walk(g, nd.get('children', []))
        for t in rep_json.get("threads", []):
            nm = t.get("name", "?")
            walk(group(nm), t.get("tree", []))
            n = t.get("samples", t.get("cpu_samples", 0))
            sgroups[group(nm)] += n
            sthreads[nm] += n
        # JFR
        js = json.loads(subprocess.run([JDK + "/bin/jfr", "print", "--json", "--stack-depth", "1", "--events",
                                        "jdk.ExecutionSample", rec], capture_output=True, text=True).stdout)
        jm, jg = collections.Counter(), collections.Counter()
        jgm = collections.defaultdict(collections.Counter)
        leaves = []
        for e in js["recording"]["events"]:
            v = e["values"]
            fr = v["stackTrace"]["frames"]
            if not fr:
                continue
            m = fr[0]["method"]
            key = m["type"]["name"].replace("/", ".") + "::" + m["name"]
            jm[key] += 1
            leaves.append(key)
            th = v.get("sampledThread") or {}
            jg[group(th.get("javaName") or th.get("osName") or "?")] += 1
            jgm[group(th.get("javaName") or th.get("osName") or "?")][key] += 1
        h = len(leaves) // 2
        halves = overlap(collections.Counter(leaves[:h]), collections.Counter(leaves[h:]))
        r = dict(rep=rep, wall=wall, overlap_java=overlap(meth_java, jm), overlap_all=overlap(meth_all, jm),
                 halves=halves, sprig_samples=sum(meth_all.values()), jfr_samples=sum(jm.values()),
                 truth=dict(shares(truth)), sprig_groups=dict(shares(sgroups)), jfr_groups=dict(shares(jg)),
                 threads_sampled=len(sthreads),
                 sprig_java_groups=dict(shares({g: sum(c.values()) for g, c in gmeth.items()})),
                 group_overlap={g: (overlap(gmeth[g], jgm[g]), sum(gmeth[g].values()), sum(jgm[g].values())) for g in set(gmeth) | set(jgm)}, load=open("/proc/loadavg").read().split()[:3])
        print(json.dumps(r, indent=1), flush=True)
        sa, sj = shares(meth_java), shares(jm)
        keys = sorted(set(sa) | set(sj), key=lambda x: -(sj.get(x, 0)))[:25]
        print(f"{'method':70s} {'jfr':>6s} {'sprigJ':>6s} {'sprigAll':>8s}")
        sall = shares(meth_all)
        for kk in keys:
            print(f"{kk[-70:]:70s} {sj.get(kk,0)*100:6.1f} {sa.get(kk,0)*100:6.1f} {sall.get(kk,0)*100:8.1f}")
        top_all = sorted(sall, key=lambda x: -sall[x])[:10]
        print("sprig all top:", [(x[-50:], round(sall[x] * 100, 1)) for x in top_all])
        print("suggested:", [s.get("root") for s in rep_json.get("suggested_roots", [])[:5]])
        if err.strip():
            print("stderr:", err.strip()[-500:])
        results.append(r)
    java.stdin.write("quit\n"); java.stdin.flush(); java.wait(timeout=30)
    json.dump(results, open(OUT + "/results.json", "w"), indent=1)


main()
