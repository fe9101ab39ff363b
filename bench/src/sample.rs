//! `sample`: what `sprig sample` costs and how true it is, on the H2 and
//! Jetty workloads.
//!
//! - **Overhead**: in one JVM, windows of the same iterations bare, under
//!   `sprig sample` at its default interval, under a JFR recording with
//!   JFR's default settings, and under `sprig sample --edges` (its
//!   calibration session, then bursts on the dormant probes it redefines
//!   into the sampled classes; an untimed window after it, while the JIT
//!   compiles the classes put back), in turn (the order rotates every
//!   repeat); per repeat the median iteration time of each window over
//!   the bare one.
//!   Beside each sampled window, the CPU time sprig's work took in the
//!   target (its signal handler and its `sprig-*` threads) over the
//!   target's in the window (the report's `sprig_cpu`): an upper bound of
//!   the overhead that windows of 2 s resolve to a hundredth of a point,
//!   where their iteration times spread by many points.
//! - **Accuracy**: `sprig sample --interval 2` (enough samples: the
//!   default 20 ms gave a few hundred) and a JFR recording of execution
//!   samples every 1 ms over the same longer window: the overlap of the
//!   self shares per method (the sum over methods of the smaller share),
//!   both ways: all of sprig's CPU view against JFR's `jdk.ExecutionSample`
//!   (threads in Java code only), and like with like, sprig's samples of
//!   threads running Java code against them; sprig's samples in native
//!   methods against `jdk.NativeMethodSample` (which holds threads
//!   blocked in native code too); beside them the ceiling, JFR's first
//!   half of its execution samples against its second. A second `sprig
//!   sample` window right after: the correlation of the two runs'
//!   hot-method vectors (self shares of the methods in either run's top
//!   20); and whether the bench's hand-picked roots are among each run's
//!   top 5 `suggested_roots`.
//! - **Prediction**: a third `sprig sample` window with call-edge bursts
//!   (`--edges`: without them no overhead is predicted); its first
//!   suggestion profiled with `sprig profile PID --root R` (its
//!   ready-to-paste command), with sampled timing and with `--timing
//!   exact`, in windows alternating with bare ones: the measured overhead
//!   beside the predicted one (its `sampled_pct` or `exact_pct`, of the
//!   time under the root, times the root's share). The hand-picked roots
//!   count as suggested where a top-5 suggestion names them or its
//!   delegation run (`same_time`) holds them. Each exact profile is also
//!   the truth the `--edges` run's call edges are held against (`sprig
//!   diff --overlap`): the bursts' edges and the timer-only baseline's
//!   (Whaley's activations in the same run's tree), over all their edges
//!   and within the methods the exact profile reached.
//! - **200 threads**: `bench.Threads200` (200 threads, each a unit of
//!   work and a 2 ms park) with `-Xlog:safepoint`: windows bare, under
//!   `sprig sample` (the timer source, the default) and under `sprig
//!   sample --source jvmti`, in turn; per window the units done and the
//!   safepoints HotSpot logged in it (how many, the time to reach each).

use crate::Ctx;
use crate::proc::{Jvm, Sprig, SprigArgs};
use crate::stats::{Summary, fmt, json_of, median};
use crate::truth::{self, overlap};
use crate::workloads;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// (workload, the row whose roots the suggestions should hold).
const ROWS: [(&str, &str); 2] = [("h2", "statement"), ("jetty", "server")];

/// The overhead windows' length, and the accuracy windows'.
const WINDOW: Duration = Duration::from_secs(2);
/// (12 s: a thread's CPU-time timer fires at most once a 4 ms scheduler
/// tick, so H2's one busy thread gives about 220 samples a second.)
const ACCURACY_WINDOW: Duration = Duration::from_secs(12);
/// The accuracy runs' interval (ms): at the default 20 ms H2 gave 356
/// samples in the window, too few for any overlap; at 2 ms thousands.
const ACCURACY_INTERVAL: &str = "2";
/// At least five overhead repeats (medians of at least 5).
const MIN_REPEATS: usize = 5;

/// A running `sprig sample PID --format json -o OUT --suggest-roots 5`.
struct SampleRun {
    child: Child,
    stderr: Receiver<String>,
    seen: Vec<String>,
    out: PathBuf,
}

impl SampleRun {
    /// Starts it and waits until it samples.
    fn start(sprig: &Path, pid: u32, out: &Path) -> Result<SampleRun> {
        SampleRun::start_with(sprig, pid, out, &[])
    }

    /// [`SampleRun::start`] with `extra` arguments.
    fn start_with(sprig: &Path, pid: u32, out: &Path, extra: &[&str]) -> Result<SampleRun> {
        let mut child = Command::new(sprig)
            .args(["sample", &pid.to_string(), "--format", "json", "-o"])
            .arg(out)
            .args(["--suggest-roots", "5"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting sprig sample")?;
        let err = child.stderr.take().context("sprig's stderr")?;
        let (tx, stderr) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut run = SampleRun {
            child,
            stderr,
            seen: Vec::new(),
            out: out.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match run.stderr.recv_timeout(left) {
                Ok(l) if l.starts_with("sprig: sampling JVM") => return Ok(run),
                Ok(l) => run.seen.push(l),
                Err(_) => bail!("sprig sample did not start sampling: {:?}", run.seen),
            }
        }
    }

    /// Ctrl-C, and the report.
    fn stop(mut self) -> Result<Value> {
        let ok = Command::new("kill")
            .args(["-s", "INT", &self.child.id().to_string()])
            .status()?
            .success();
        if !ok {
            bail!("kill -INT sprig failed");
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                bail!("sprig sample did not exit within 60 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(100)) {
            self.seen.push(l);
        }
        if !status.success() {
            bail!("sprig sample exited with {status}: {:?}", self.seen);
        }
        let text = std::fs::read_to_string(&self.out)
            .with_context(|| format!("reading {}", self.out.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", self.out.display()))
    }
}

impl Drop for SampleRun {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Median iteration time (ms) of `k` iterations.
fn window(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<f64> {
    Ok(median(&workloads::iterate(jvm, k, bound)?))
}

/// Which of a report's CPU samples [`sample_self`] counts.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// All of the CPU view.
    All,
    /// Threads running Java code (what JFR's execution samples hold).
    Java,
    /// Threads in a native method.
    Native,
}

/// Self samples per `class::method` of a `sprig sample` report.
fn sample_self(report: &Value) -> BTreeMap<String, f64> {
    sample_self_of(report, Part::All)
}

/// Self samples per `class::method` of a `sprig sample` report, of `part`
/// of its CPU view.
fn sample_self_of(report: &Value, part: Part) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for x in report["methods"].as_array().into_iter().flatten() {
        let all = x["self"].as_f64().unwrap_or(0.0);
        let native = x["native_self"].as_f64().unwrap_or(0.0).min(all);
        let own = match part {
            Part::All => all,
            Part::Java => all - native,
            Part::Native => native,
        };
        if own > 0.0 {
            let k = format!(
                "{}::{}",
                x["class"].as_str().unwrap_or("?"),
                x["method"].as_str().unwrap_or("?")
            );
            *m.entry(k).or_insert(0.0) += own;
        }
    }
    m
}

/// Pearson correlation of two runs' self shares over the methods in
/// either run's top `n`.
fn correlation(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>, n: usize) -> f64 {
    let share = |m: &BTreeMap<String, f64>| {
        let t: f64 = m.values().sum();
        m.iter()
            .map(|(k, v)| (k.clone(), v / t))
            .collect::<BTreeMap<_, _>>()
    };
    let (sa, sb) = (share(a), share(b));
    let top = |m: &BTreeMap<String, f64>| {
        let mut v: Vec<(&String, &f64)> = m.iter().collect();
        v.sort_by(|x, y| y.1.total_cmp(x.1));
        v.into_iter()
            .take(n)
            .map(|(k, _)| k.clone())
            .collect::<Vec<_>>()
    };
    let keys: BTreeSet<String> = top(&sa).into_iter().chain(top(&sb)).collect();
    let xs: Vec<f64> = keys
        .iter()
        .map(|k| sa.get(k).copied().unwrap_or(0.0))
        .collect();
    let ys: Vec<f64> = keys
        .iter()
        .map(|k| sb.get(k).copied().unwrap_or(0.0))
        .collect();
    let len = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / len, ys.iter().sum::<f64>() / len);
    let cov: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let vx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let vy: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    cov / (vx * vy).sqrt()
}

/// The report's top 5 suggested roots (`kind: root`), and how one of
/// `want` is among them: as a suggestion's root, or in the delegation run
/// it names (`same_time`: a method that hands all of its time on to the
/// root, the same root within 5 points), None when it is not.
fn suggestions(report: &Value, want: &[String]) -> (Vec<String>, Option<String>) {
    let top: Vec<&Value> = report["suggested_roots"]
        .as_array()
        .into_iter()
        .flatten()
        .take(5)
        .collect();
    let roots = top
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{}: {}",
                r["kind"].as_str().unwrap_or("?"),
                r["root"].as_str()?
            ))
        })
        .collect();
    let hit = top.iter().enumerate().find_map(|(i, r)| {
        let root = r["root"].as_str()?;
        if want.iter().any(|w| w == root) {
            return Some(format!("{root} (suggestion {})", i + 1));
        }
        r["same_time"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|o| want.iter().any(|w| w == o))
            .map(|o| format!("{o} (suggestion {}, same time as {root})", i + 1))
    });
    (roots, hit)
}

/// Leaf method of every `event` (`jdk.ExecutionSample`: threads running
/// Java code; `jdk.NativeMethodSample`: threads in native methods) of a
/// recording, in the recording's order.
fn jfr_leaves(ctx: &Ctx, rec: &Path, event: &str) -> Result<Vec<String>> {
    let mut leaves = Vec::new();
    truth::each_jfr_event(
        &ctx.env.jdk,
        &[
            "print".into(),
            "--json".into(),
            "--stack-depth".into(),
            "1".into(),
            "--events".into(),
            event.into(),
            rec.display().to_string(),
        ],
        |e| {
            if let Some(k) = e["values"]["stackTrace"]["frames"]
                .as_array()
                .and_then(|f| f.first())
                .and_then(truth::frame_key)
            {
                leaves.push(k);
            }
        },
    )?;
    Ok(leaves)
}

/// Samples per method of a list of leaves.
fn leaf_counts(leaves: &[String]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for k in leaves {
        *m.entry(k.clone()).or_insert(0.0) += 1.0;
    }
    m
}

/// sprig's share of the target's CPU time in a report's window, in %
/// (NaN when the report has none).
fn own_cpu_pct(report: &Value) -> f64 {
    report["sprig_cpu"]["share"].as_f64().unwrap_or(f64::NAN) * 100.0
}

fn jcmd(ctx: &Ctx, pid: u32, args: &[&str]) -> Result<()> {
    let mut a = vec![pid.to_string()];
    a.extend(args.iter().map(|s| (*s).to_owned()));
    truth::tool(&ctx.env.jdk, "jcmd", &a).map(|_| ())
}

/// Iterations in a window of `len`, from the iteration time `ms`.
fn iterations(len: Duration, ms: f64) -> usize {
    ((len.as_secs_f64() * 1000.0 / ms.max(0.1)).round() as usize).max(3)
}

fn one(ctx: &Ctx, wl: &str, label: &str) -> Result<Value> {
    let def = workloads::define(ctx, wl)?;
    let r = def.root(label)?;
    let want: Vec<String> = r.roots.clone();
    let mut jvm = workloads::start_jvm(
        ctx,
        &def,
        &truth::jfr_truth_jvm_args(),
        &format!("sample-{wl}"),
    )?;
    let bound = def.iteration_bound;
    eprintln!(
        "sprig-bench: sample: {wl}: warm-up ({} iterations)",
        def.warmup
    );
    let warm = workloads::iterate(&mut jvm, def.warmup, bound)?;
    let ms = median(&warm[warm.len() / 2..]);
    let k = iterations(WINDOW, ms);
    let pid = jvm.pid();
    let scratch = ctx.env.scratch.path.clone();
    // The agent's first load, and the JFR's first start, fall on no window.
    let prime = scratch.join(format!("sample-{wl}-prime.json"));
    let run = SampleRun::start(&ctx.env.sprig, pid, &prime)?;
    window(&mut jvm, k, bound)?;
    run.stop()?;
    jcmd(
        ctx,
        pid,
        &["JFR.start", "name=sprigbenchdef", "settings=default"],
    )?;
    window(&mut jvm, k, bound)?;
    jcmd(ctx, pid, &["JFR.stop", "name=sprigbenchdef"])?;
    window(&mut jvm, k, bound)?;

    let repeats = ctx.repeats.max(MIN_REPEATS);
    let (mut bare, mut sampled, mut jfr) = (Vec::new(), Vec::new(), Vec::new());
    let mut sample_pct = Vec::new();
    let mut own_pct = Vec::new();
    let mut jfr_pct = Vec::new();
    let (mut edged, mut edges_pct) = (Vec::new(), Vec::new());
    for rep in 0..repeats {
        eprintln!(
            "sprig-bench: sample: {wl}: overhead repeat {}/{repeats} ({k} iterations a window)",
            rep + 1
        );
        let mut times = [0.0f64; 4];
        for w in (0..4).map(|i| (i + rep) % 4) {
            times[w] = match w {
                0 => window(&mut jvm, k, bound)?,
                1 => {
                    let out = scratch.join(format!("sample-{wl}-overhead-{}.json", rep + 1));
                    let run = SampleRun::start(&ctx.env.sprig, pid, &out)?;
                    let t = window(&mut jvm, k, bound)?;
                    own_pct.push(own_cpu_pct(&run.stop()?));
                    t
                }
                // `--edges` as a user runs it: its calibration session
                // first, then the sample whose bursts redefine the
                // sampled classes (dormant probes) while the window runs.
                3 => {
                    let out = scratch.join(format!("sample-{wl}-edges-overhead-{}.json", rep + 1));
                    let run = SampleRun::start_with(&ctx.env.sprig, pid, &out, &["--edges"])?;
                    let t = window(&mut jvm, k, bound)?;
                    run.stop()?;
                    // Its classes were put back at the end: the JIT
                    // compiles them again in a window nobody times.
                    window(&mut jvm, k, bound)?;
                    t
                }
                _ => {
                    jcmd(
                        ctx,
                        pid,
                        &["JFR.start", "name=sprigbenchdef", "settings=default"],
                    )?;
                    let t = window(&mut jvm, k, bound)?;
                    jcmd(ctx, pid, &["JFR.stop", "name=sprigbenchdef"])?;
                    t
                }
            };
        }
        bare.push(times[0]);
        sampled.push(times[1]);
        jfr.push(times[2]);
        edged.push(times[3]);
        sample_pct.push((times[1] / times[0] - 1.0) * 100.0);
        jfr_pct.push((times[2] / times[0] - 1.0) * 100.0);
        edges_pct.push((times[3] / times[0] - 1.0) * 100.0);
    }

    // Accuracy: sprig sample beside JFR's 1 ms execution samples, then a
    // second sprig sample alone.
    // Sized by the bare windows: the warm-up's iterations can be far
    // slower than the JIT's final code.
    let ka = iterations(ACCURACY_WINDOW, median(&bare));
    eprintln!("sprig-bench: sample: {wl}: accuracy ({ka} iterations a window, twice)");
    let jfc = scratch.join("sample-exec-1ms.jfc");
    std::fs::write(&jfc, truth::JFC)?;
    let rec = scratch.join(format!("sample-{wl}.jfr"));
    let out_a = scratch.join(format!("sample-{wl}-a.json"));
    let out_b = scratch.join(format!("sample-{wl}-b.json"));
    let accuracy = ["--interval", ACCURACY_INTERVAL];
    let run = SampleRun::start_with(&ctx.env.sprig, pid, &out_a, &accuracy)?;
    jcmd(
        ctx,
        pid,
        &[
            "JFR.start",
            "name=sprigbench1ms",
            &format!("settings={}", jfc.display()),
            &format!("filename={}", rec.display()),
        ],
    )?;
    window(&mut jvm, ka, bound)?;
    jcmd(ctx, pid, &["JFR.stop", "name=sprigbench1ms"])?;
    let a = run.stop()?;
    let run = SampleRun::start_with(&ctx.env.sprig, pid, &out_b, &accuracy)?;
    window(&mut jvm, ka, bound)?;
    let b = run.stop()?;
    // The prediction rests on call-edge bursts: a third window with
    // `--edges`, whose first suggestion is then profiled.
    let out_e = scratch.join(format!("sample-{wl}-edges.json"));
    let run = SampleRun::start_with(&ctx.env.sprig, pid, &out_e, &["--edges"])?;
    window(&mut jvm, ka, bound)?;
    let e = run.stop()?;
    let predicted = prediction(ctx, &mut jvm, &e, &out_e, median(&bare), bound)?;
    jvm.quit()?;

    let exec = jfr_leaves(ctx, &rec, "jdk.ExecutionSample")?;
    let jfr_self = leaf_counts(&exec);
    let half = exec.len() / 2;
    let jfr_halves = overlap(&leaf_counts(&exec[..half]), &leaf_counts(&exec[half..]));
    let jfr_native = leaf_counts(&jfr_leaves(ctx, &rec, "jdk.NativeMethodSample")?);
    let _ = std::fs::remove_file(&rec);
    let (java_a, native_a) = (
        sample_self_of(&a, Part::Java),
        sample_self_of(&a, Part::Native),
    );
    let (sa, sb) = (sample_self(&a), sample_self(&b));
    let (roots_a, hit_a) = suggestions(&a, &want);
    let (roots_b, hit_b) = suggestions(&b, &want);
    let (roots_e, hit_e) = suggestions(&e, &want);
    let jfr_samples: f64 = jfr_self.values().sum();
    Ok(json!({
        "workload": wl,
        "iteration_ms_warm": ms,
        "window_iterations": k,
        "repeats": repeats,
        "bare_ms": json_of(&bare),
        "sample_ms": json_of(&sampled),
        "jfr_default_ms": json_of(&jfr),
        "sample_overhead_pct": json_of(&sample_pct),
        "sample_own_cpu_pct": json_of(&own_pct),
        "jfr_default_overhead_pct": json_of(&jfr_pct),
        "edges_ms": json_of(&edged),
        "edges_overhead_pct": json_of(&edges_pct),
        "accuracy_iterations": ka,
        "accuracy_interval_ms": ACCURACY_INTERVAL,
        "sample_samples": a["samples"],
        "sample_native_samples": a["native_cpu_samples"],
        "sample_rounds": a["rounds"],
        "sample_source": a["source"],
        "sample_cost_ns_per_round": a["cost_ns"].as_f64().unwrap_or(0.0) / a["rounds"].as_f64().unwrap_or(1.0).max(1.0),
        "sample_cost_ns_per_sample": a["cost_ns"].as_f64().unwrap_or(0.0) / a["samples"].as_f64().unwrap_or(1.0).max(1.0),
        "sample_threads": a["threads"].as_array().map_or(0, Vec::len),
        "jfr_execution_samples": jfr_samples,
        "overlap_with_jfr": overlap(&sa, &jfr_self),
        "overlap_java_with_jfr": overlap(&java_a, &jfr_self),
        "overlap_native_with_jfr_native": overlap(&native_a, &jfr_native),
        "jfr_native_samples": jfr_native.values().sum::<f64>(),
        "jfr_halves_overlap": jfr_halves,
        "correlation_two_runs": correlation(&sa, &sb, 20),
        "overlap_two_runs": overlap(&sa, &sb),
        "hand_picked_roots": want,
        "suggested_a": roots_a,
        "suggested_b": roots_b,
        "suggested_edges": roots_e,
        "hand_picked_in_top5": [hit_a.is_some(), hit_b.is_some(), hit_e.is_some()],
        "hand_picked_found_as": [hit_a, hit_b, hit_e],
        "sample_top": truth::top(&sa, 5),
        "jfr_top": truth::top(&jfr_self, 5),
        "prediction": predicted,
    }))
}

/// The `i`th suggested root of `report` (a `--edges` run): (root, share,
/// predicted overhead in % of the time under it with sampled and with
/// exact timing, NaN where the report has none, estimated calls a second
/// at and below it, NaN where none).
fn suggestion(report: &Value, i: usize) -> Option<(String, f64, [f64; 2], f64)> {
    let r = report["suggested_roots"].as_array()?.get(i)?;
    let p = &r["predicted_overhead"];
    let pct = |k: &str| p[k].as_f64().unwrap_or(f64::NAN);
    Some((
        r["root"].as_str()?.to_owned(),
        r["share"].as_f64()?,
        [pct("sampled_pct"), pct("exact_pct")],
        p["calls_per_s_est"].as_f64().unwrap_or(f64::NAN),
    ))
}

/// Suggestions tried in turn by [`prediction`] while a profile of one
/// records no root call.
const SUGGESTIONS_TRIED: usize = 3;

/// The first suggestion of `report` (a `sprig sample --edges` run) whose
/// profile records root calls, profiled as [`prediction_of`] does; a
/// suggestion no thread enters while it is profiled (a pool's worker loop
/// ranked as a unit of work: its threads entered it once, before the
/// attach) is skipped with a line and listed in `skipped`.
fn prediction(
    ctx: &Ctx,
    jvm: &mut Jvm,
    report: &Value,
    report_path: &Path,
    bare_ms: f64,
    bound: Duration,
) -> Result<Value> {
    let mut skipped = Vec::new();
    for i in 0..SUGGESTIONS_TRIED {
        let Some(s) = suggestion(report, i) else {
            break;
        };
        match prediction_of(ctx, jvm, s.clone(), report_path, bare_ms, bound) {
            Ok(mut v) => {
                v["skipped"] = json!(skipped);
                return Ok(v);
            }
            Err(e) if format!("{e:#}").contains("no root call was recorded") => {
                eprintln!(
                    "sprig-bench: sample: prediction: suggestion {} ({}) recorded no root call while profiled; trying the next",
                    i + 1,
                    s.0
                );
                skipped.push(s.0);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(json!({"root": null, "skipped": skipped}))
}

/// One suggestion (root, share, predicted % under it, calls a second)
/// profiled with `sprig profile PID --root R`, with sampled timing (the
/// default) and with `--timing exact`, each in windows alternating with
/// bare ones (`MIN_REPEATS` pairs, the order swapped every pair; each
/// profiled window after half a window of settling): the measured
/// overhead per pair against the predicted one (the prediction in % of
/// the time under the root, times the root's share).
fn prediction_of(
    ctx: &Ctx,
    jvm: &mut Jvm,
    suggestion: (String, f64, [f64; 2], f64),
    report_path: &Path,
    bare_ms: f64,
    bound: Duration,
) -> Result<Value> {
    let (root, share, pct_under, calls_per_s) = suggestion;
    let k = iterations(WINDOW, bare_ms);
    let pid = jvm.pid();
    let repeats = ctx.repeats.max(MIN_REPEATS);
    let mut rows = Vec::new();
    let mut edge_rows = Value::Null;
    for (t, timing) in ["sampled", "exact"].into_iter().enumerate() {
        let (mut bare, mut profiled, mut pct) = (Vec::new(), Vec::new(), Vec::new());
        let mut edges = Vec::new();
        for rep in 0..repeats {
            eprintln!(
                "sprig-bench: sample: prediction: sprig profile --root {root} --timing {timing}: pair {}/{repeats}",
                rep + 1
            );
            let mut times = [0.0f64; 2];
            for w in (0..2).map(|i| (i + rep) % 2) {
                times[w] = if w == 0 {
                    window(jvm, k, bound)?
                } else {
                    let out = ctx
                        .env
                        .scratch
                        .path
                        .join(format!("sample-profile-{pid}-{timing}-{}.json", rep + 1));
                    let args = SprigArgs {
                        roots: vec![root.clone()],
                        include: Vec::new(),
                        exclude: Vec::new(),
                        scheme: "lazy".into(),
                        timing: (timing == "exact").then(|| "exact".to_owned()),
                        interval_ms: None,
                    };
                    let mut s = Sprig::start(&ctx.env.sprig, pid, &args, &out)?;
                    s.wait_profiling(Duration::from_secs(120))?;
                    window(jvm, (k / 2).max(3), bound)?;
                    let t = window(jvm, k, bound)?;
                    s.stop(Duration::from_secs(120))?;
                    if timing == "exact" {
                        edges.push(edge_overlaps(ctx, report_path, &out)?);
                    }
                    t
                };
            }
            bare.push(times[0]);
            profiled.push(times[1]);
            pct.push((times[1] / times[0] - 1.0) * 100.0);
        }
        let predicted = pct_under[t] * share;
        let measured = median(&pct);
        rows.push(json!({
            "timing": timing,
            "predicted_pct_under_root": pct_under[t],
            "predicted_pct": predicted,
            "bare_ms": json_of(&bare),
            "profiled_ms": json_of(&profiled),
            "measured_pct": json_of(&pct),
            "measured_over_predicted": measured / predicted,
        }));
        if !edges.is_empty() {
            edge_rows = edge_summary(&edges);
        }
    }
    Ok(json!({
        "root": root,
        "share": share,
        "calls_per_s_est": calls_per_s,
        "timings": rows,
        "edge_overlap": edge_rows,
    }))
}

/// The edge overlaps `sprig diff --overlap` prints of a `sprig sample
/// --edges` report against a `sprig profile --timing exact` report of one
/// root in the same JVM: the bursts' and the timer-only baseline's
/// (Whaley's activations in the sample's tree), each over all their edges
/// and within the exact profile's methods (the root's subgraph), in %.
fn edge_overlaps(ctx: &Ctx, sample: &Path, exact: &Path) -> Result<Value> {
    let out = Command::new(&ctx.env.sprig)
        .args(["diff", "--overlap"])
        .arg(sample)
        .arg(exact)
        .output()
        .context("running sprig diff --overlap")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "sprig diff --overlap failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let pct = |prefix: &str, kind: &str| -> Value {
        text.lines()
            .find(|l| l.starts_with(prefix) && l.contains(kind))
            .and_then(|l| l[prefix.len()..].split('%').next())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(Value::Null, |v| json!(v))
    };
    let (all, within) = ("edge overlap: ", "edge overlap within B's methods: ");
    let (bursts, timer) = ("A's call-edge bursts", "A's timer-only");
    Ok(json!({
        "bursts_pct": pct(all, bursts),
        "timer_only_pct": pct(all, timer),
        "bursts_within_pct": pct(within, bursts),
        "timer_only_within_pct": pct(within, timer),
    }))
}

/// Per figure of [`edge_overlaps`]: its series over the exact profiles.
fn edge_summary(runs: &[Value]) -> Value {
    let keys = [
        "bursts_pct",
        "timer_only_pct",
        "bursts_within_pct",
        "timer_only_within_pct",
    ];
    let mut out = serde_json::Map::new();
    for k in keys {
        let v: Vec<f64> = runs.iter().filter_map(|r| r[k].as_f64()).collect();
        out.insert(k.to_owned(), json_of(&v));
    }
    Value::Object(out)
}

/// `Safepoint "OP", ... Reaching safepoint: N ns, ... Total: N ns` lines
/// of `-Xlog:safepoint`: (reach ns, total ns) of each.
fn safepoints(log: &str) -> Vec<(f64, f64)> {
    let ns = |line: &str, key: &str| -> Option<f64> {
        let rest = &line[line.find(key)? + key.len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    log.lines()
        .filter(|l| l.contains("Safepoint \""))
        .filter_map(|l| Some((ns(l, "Reaching safepoint:")?, ns(l, "Total:")?)))
        .collect()
}

/// The units `bench.Threads200` has done.
fn ops(jvm: &mut Jvm) -> Result<f64> {
    jvm.send("ops")?;
    let line = jvm.expect("ops ", Duration::from_secs(30))?;
    line[4..].trim().parse().context("ops N")
}

/// 200 threads bare, under `sprig sample` and under `sprig sample
/// --source jvmti`: units a second and the safepoints in each window.
fn threads200(ctx: &Ctx) -> Result<Value> {
    let log = ctx.env.logs().join("threads200-safepoint.log");
    let args = vec![
        format!("-Xlog:safepoint=info:file={}", log.display()),
        "-cp".into(),
        ctx.env.classpath.clone(),
        "bench.Threads200".into(),
        "200".into(),
    ];
    let mut jvm = Jvm::start(
        &ctx.env.java(),
        &args,
        "threads200",
        &ctx.env.logs(),
        Duration::from_secs(120),
    )?;
    // Warm-up: the JIT compiles the unit.
    std::thread::sleep(Duration::from_secs(3));
    let pid = jvm.pid();
    let scratch = ctx.env.scratch.path.clone();
    let modes = ["bare", "timer", "jvmti"];
    let repeats = ctx.repeats.max(MIN_REPEATS);
    let mut rate: [Vec<f64>; 3] = Default::default();
    let mut ratio: [Vec<f64>; 3] = Default::default();
    let mut per_s: [Vec<f64>; 3] = Default::default();
    let mut at_sp: [Vec<f64>; 3] = Default::default();
    let mut reach: [Vec<f64>; 3] = Default::default();
    for rep in 0..repeats {
        eprintln!(
            "sprig-bench: sample: 200 threads: repeat {}/{repeats}",
            rep + 1
        );
        let mut this = [0.0f64; 3];
        for w in (0..3).map(|i| (i + rep) % 3) {
            let run = match w {
                0 => None,
                _ => {
                    let out = scratch.join(format!("threads200-{}-{}.json", modes[w], rep + 1));
                    let extra: &[&str] = if w == 2 { &["--source", "jvmti"] } else { &[] };
                    Some(SampleRun::start_with(&ctx.env.sprig, pid, &out, extra)?)
                }
            };
            let from = std::fs::metadata(&log).map_or(0, |m| m.len()) as usize;
            let o0 = ops(&mut jvm)?;
            let t0 = Instant::now();
            std::thread::sleep(WINDOW);
            let o1 = ops(&mut jvm)?;
            let secs = t0.elapsed().as_secs_f64();
            let text = std::fs::read(&log).unwrap_or_default();
            if let Some(r) = run {
                r.stop()?;
            }
            let sps = safepoints(&String::from_utf8_lossy(
                text.get(from..).unwrap_or_default(),
            ));
            this[w] = (o1 - o0) / secs;
            rate[w].push(this[w]);
            per_s[w].push(sps.len() as f64 / secs);
            at_sp[w].push(sps.iter().map(|s| s.1).sum::<f64>() / secs / 1e6);
            reach[w].extend(sps.iter().map(|s| s.0 / 1e3));
        }
        for w in 0..3 {
            ratio[w].push(this[w] / this[0]);
        }
    }
    jvm.quit()?;
    let row = |w: usize| {
        let mut r = reach[w].clone();
        r.sort_by(f64::total_cmp);
        let p99 = r.get((r.len() * 99) / 100).copied().unwrap_or(0.0);
        json!({
            "mode": modes[w],
            "units_per_s": json_of(&rate[w]),
            "throughput_over_bare": json_of(&ratio[w]),
            "safepoints_per_s": json_of(&per_s[w]),
            "ms_at_safepoint_per_s": json_of(&at_sp[w]),
            "safepoints": r.len(),
            "reach_us_median": if r.is_empty() { 0.0 } else { median(&r) },
            "reach_us_p99": p99,
            "reach_us_max": r.last().copied().unwrap_or(0.0),
        })
    };
    Ok(
        json!({"threads": 200, "repeats": repeats, "window_s": WINDOW.as_secs_f64(), "rows": (0..3).map(row).collect::<Vec<_>>()}),
    )
}

/// The `sample` benchmark on H2 and Jetty.
pub fn sample(ctx: &Ctx) -> Result<Value> {
    let mut rows = Vec::new();
    for (wl, label) in ROWS {
        rows.push(one(ctx, wl, label)?);
    }
    let many = threads200(ctx)?;
    Ok(json!({
        "rows": rows,
        "threads200": many,
        "interval_ms": 20,
        "accuracy_interval_ms": ACCURACY_INTERVAL,
        "jfr_overhead_settings": "default.jfc",
        "jfr_truth_settings": "jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms (leaf frames)",
    }))
}

/// The terminal lines of `sample`.
pub fn print(v: &Value) {
    println!(
        "sprig sample (default 20 ms interval) on the workloads: overhead = iteration time over bare in the same JVM, per repeat (medians [min-max]); accuracy (sprig at --interval 2) = self-share overlap with JFR execution samples at 1 ms over the same window, hot-method correlation of two runs"
    );
    for r in v["rows"].as_array().into_iter().flatten() {
        println!(
            "  {:<6} bare {} ms/iter; sprig sample {} %, JFR default {} % ({} repeats of {} iterations)",
            r["workload"].as_str().unwrap_or("?"),
            fmt(Summary::from_json(&r["bare_ms"]), 2),
            fmt(Summary::from_json(&r["sample_overhead_pct"]), 2),
            fmt(Summary::from_json(&r["jfr_default_overhead_pct"]), 2),
            r["repeats"],
            r["window_iterations"],
        );
        println!(
            "         sprig sample --edges (its calibration session, then bursts on dormant probes redefined into the sampled classes during the window): {} %",
            fmt(Summary::from_json(&r["edges_overhead_pct"]), 2),
        );
        println!(
            "         sprig's CPU in the target (signal handler + sprig-* threads) over the target's, per sampled window: {} %",
            fmt(Summary::from_json(&r["sample_own_cpu_pct"]), 3),
        );
        println!(
            "         at --interval {} ms: overlap with JFR execution samples: Java-state samples {:.1}%, all of the CPU view {:.1}% ({} of {} samples in native methods); JFR halves {:.1}%; native samples with jdk.NativeMethodSample {:.1}% ({} JFR native samples)",
            r["accuracy_interval_ms"].as_str().unwrap_or("?"),
            r["overlap_java_with_jfr"].as_f64().unwrap_or(f64::NAN) * 100.0,
            r["overlap_with_jfr"].as_f64().unwrap_or(f64::NAN) * 100.0,
            r["sample_native_samples"],
            r["sample_samples"],
            r["jfr_halves_overlap"].as_f64().unwrap_or(f64::NAN) * 100.0,
            r["overlap_native_with_jfr_native"]
                .as_f64()
                .unwrap_or(f64::NAN)
                * 100.0,
            r["jfr_native_samples"],
        );
        println!(
            "         ({} sprig samples from the {} source, {} JFR samples, {} threads, {:.1} µs a sample, {:.0} µs a round); two runs: correlation {:.3}, overlap {:.1}%",
            r["sample_samples"],
            r["sample_source"].as_str().unwrap_or("?"),
            r["jfr_execution_samples"],
            r["sample_threads"],
            r["sample_cost_ns_per_sample"].as_f64().unwrap_or(0.0) / 1000.0,
            r["sample_cost_ns_per_round"].as_f64().unwrap_or(0.0) / 1000.0,
            r["correlation_two_runs"].as_f64().unwrap_or(f64::NAN),
            r["overlap_two_runs"].as_f64().unwrap_or(f64::NAN) * 100.0,
        );
        println!(
            "         hand-picked roots {} in the top 5 suggestions: {}; run 1 suggests {}; run 2 {}",
            r["hand_picked_roots"], r["hand_picked_in_top5"], r["suggested_a"], r["suggested_b"],
        );
        println!(
            "         top self: sprig {}; JFR {}",
            r["sample_top"], r["jfr_top"]
        );
        println!(
            "         with --edges: suggests {}; hand-picked found as {}",
            r["suggested_edges"], r["hand_picked_found_as"],
        );
        let p = &r["prediction"];
        if p["root"].is_string() {
            println!(
                "         first suggestion of the --edges run {} (share {:.2}, {:.0} calls/s estimated at and below it):",
                p["root"].as_str().unwrap_or("?"),
                p["share"].as_f64().unwrap_or(f64::NAN),
                p["calls_per_s_est"].as_f64().unwrap_or(f64::NAN),
            );
            for t in p["timings"].as_array().into_iter().flatten() {
                println!(
                    "           {:<7} predicted {:.3}% ({:.3}% of the time under it x share); sprig profile measured {} % ({} pairs); measured/predicted {:.2}",
                    t["timing"].as_str().unwrap_or("?"),
                    t["predicted_pct"].as_f64().unwrap_or(f64::NAN),
                    t["predicted_pct_under_root"].as_f64().unwrap_or(f64::NAN),
                    fmt(Summary::from_json(&t["measured_pct"]), 2),
                    t["measured_pct"]["n"],
                    t["measured_over_predicted"].as_f64().unwrap_or(f64::NAN),
                );
            }
            let o = &p["edge_overlap"];
            if o.is_object() {
                let f = |k: &str| fmt(Summary::from_json(&o[k]), 1);
                println!(
                    "           edge overlap against the exact profiles (%, {} of them): bursts {} (timer-only {}); within the root's methods: bursts {} (timer-only {})",
                    o["bursts_pct"]["n"],
                    f("bursts_pct"),
                    f("timer_only_pct"),
                    f("bursts_within_pct"),
                    f("timer_only_within_pct"),
                );
            }
        }
    }
    let t = &v["threads200"];
    println!(
        "  200 threads (bench.Threads200, {} repeats of {} s windows): units/s over bare, safepoints/s, ms at safepoint/s, time to safepoint (median, p99, max)",
        t["repeats"], t["window_s"]
    );
    for m in t["rows"].as_array().into_iter().flatten() {
        println!(
            "    {:<6} {} units/s, x{} of bare; {} safepoints/s, {} ms/s at safepoint; reach {:.0} / {:.0} / {:.0} µs ({} safepoints)",
            m["mode"].as_str().unwrap_or("?"),
            fmt(Summary::from_json(&m["units_per_s"]), 0),
            fmt(Summary::from_json(&m["throughput_over_bare"]), 3),
            fmt(Summary::from_json(&m["safepoints_per_s"]), 1),
            fmt(Summary::from_json(&m["ms_at_safepoint_per_s"]), 2),
            m["reach_us_median"].as_f64().unwrap_or(0.0),
            m["reach_us_p99"].as_f64().unwrap_or(0.0),
            m["reach_us_max"].as_f64().unwrap_or(0.0),
            m["safepoints"],
        );
    }
}
