//! How true sprig's times are, in each timing mode side by side:
//!
//! - `accuracy`: the accuracy fixtures (`fixtures/src/accuracy`): (a) a
//!   root whose children spin 200 µs, 500 µs and 1 ms, (b) a root making
//!   200,000 calls of a few ns each. Per round, what sprig charges the root
//!   against the never-instrumented twin timed on the same thread right
//!   before and after; for (a) also each child's self time against its
//!   known duration.
//! - `jfr`: on javac (`Gen::genClass`), H2 (the statement) and Jetty
//!   (`Server::handle`), sprig and a JFR recording of execution samples at
//!   1 ms run over the same iterations of the same JVM; the self-time
//!   overlap of the two (sum over methods of the smaller share) tells how
//!   close sprig's self times are to an independent sampler's.

use crate::Ctx;
use crate::proc::{Jvm, Sprig, SprigArgs};
use crate::profile::ProfileSummary;
use crate::stats::{Summary, fmt, json_of, median};
use crate::workloads;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const START: Duration = Duration::from_secs(120);
const STOP: Duration = Duration::from_secs(120);

/// The timing modes to compare: `--timing-modes`, else both.
fn modes(ctx: &Ctx) -> Vec<String> {
    if ctx.timing_modes.is_empty() {
        vec!["exact".into(), "sampled".into()]
    } else {
        ctx.timing_modes.clone()
    }
}

fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter_map(|w| w.parse::<f64>().ok())
        .collect()
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// (scenario, root method, root calls per round, rounds quick, full).
/// (a) takes more rounds: its children's sampled times need samples.
const SCENARIOS: [(&str, &str, u32, usize, usize); 2] = [
    ("spin", "spinRoot", 10, 101, 201),
    ("calls", "callsRoot", 5, 31, 61),
];
/// The children of (a) and how long each spins.
const SPIN_CHILDREN: [(&str, f64); 3] = [("spin200", 200e3), ("spin500", 500e3), ("spin1000", 1e6)];

/// One session's figures for one scenario.
struct ScenarioFigures {
    /// Median over the rounds at speed of charged / bare per root call.
    charged_over_bare: f64,
    /// Median over every round of the fixture's own time per profiled
    /// root call over its twin's (before and after): how much sprig
    /// slows the program it measures.
    profiled_over_bare: f64,
    /// Rounds judged (twin within 10% of its quiet speed) and made.
    judged: usize,
    rounds: usize,
    /// (a): per child, over every round together, its self time's
    /// share of the root's time against its known share (its duration
    /// over the three children's) - 1, and the samples behind it; and over
    /// the undisturbed rounds, its self time per call against its known
    /// duration - 1 (NaN without such a round).
    children: Vec<ChildFigures>,
    /// (a): rounds whose every root call took at most 3% more than its
    /// children's known durations (the root's exact latency, in both
    /// modes): no preemption in the middle of a spin, which ends on the
    /// wall clock and so overshoots by whatever the thread lost.
    undisturbed: usize,
}

struct ChildFigures {
    share_error: f64,
    self_error: f64,
    samples: u64,
}

/// Self ns, calls and samples of one child over a set of rounds.
#[derive(Clone, Copy, Default)]
struct ChildSums {
    ns: f64,
    calls: f64,
    samples: u64,
}

/// The rounds of one scenario in one session's report, joined with the
/// fixture's `round S r before profiled after` lines.
fn scenario_figures(report: &Value, lines: &[String], s: &str, quiet: f64) -> ScenarioFigures {
    let mut twin = BTreeMap::new();
    let mut slowed = Vec::new();
    let prefix = format!("round {s} ");
    for l in lines.iter().filter(|l| l.starts_with(&prefix)) {
        let v = numbers(l);
        if v.len() == 4 {
            twin.insert(v[0] as usize, (v[1] + v[3]) / 2.0);
            slowed.push(v[2] / ((v[1] + v[3]) / 2.0));
        }
    }
    // Windows timing: a thread's root node counts its counted calls only,
    // and its time is the mean silent call times those; a thread with no
    // counted call carries the sum of its silent calls (latency count),
    // and one no sample reached carries no time and is not judged.
    let windows = report.get("windows").is_some_and(|w| !w.is_null());
    let thread_prefix = format!("measure-{s}-");
    let mut all = Vec::new();
    let mut judged = Vec::new();
    let mut undisturbed = 0;
    // Over the judged rounds, and over the undisturbed ones.
    let mut judged_sums: BTreeMap<String, ChildSums> = BTreeMap::new();
    let mut quiet_sums: BTreeMap<String, ChildSums> = BTreeMap::new();
    let mut judged_root_ns = 0.0;
    for t in report
        .get("threads")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(index) = t
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| n.strip_prefix(&thread_prefix))
            .and_then(|r| r.parse::<usize>().ok())
        else {
            continue;
        };
        let (Some(root), Some(bare)) = (
            t.get("roots")
                .and_then(Value::as_array)
                .and_then(|r| r.first()),
            twin.get(&index),
        ) else {
            continue;
        };
        let latency_count = root
            .get("latency")
            .and_then(|l| l.get("count"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let calls = if windows && f(root, "calls") == 0.0 {
            latency_count
        } else {
            f(root, "calls")
        };
        if windows && (f(root, "total_ns") <= 0.0 || calls <= 0.0) {
            continue;
        }
        let ratio = f(root, "total_ns") / calls.max(1.0) / bare;
        all.push(ratio);
        if (bare / quiet - 1.0).abs() <= 0.10 {
            judged.push(ratio);
        }
        // The children spin on the wall clock, so their shares do not
        // depend on the core's speed: every round counts for them.
        judged_root_ns += f(root, "total_ns");
        let known: f64 = SPIN_CHILDREN.iter().map(|c| c.1).sum();
        let max_ns = root
            .get("latency")
            .and_then(|l| l.get("max_ns"))
            .and_then(Value::as_f64)
            .unwrap_or(f64::INFINITY);
        let quiet_round = max_ns <= known * 1.03;
        undisturbed += usize::from(quiet_round);
        // Under windows timing a thread with no counted root call has
        // children with time and no calls: no time per call of theirs.
        let per_call = quiet_round && !(windows && f(root, "calls") == 0.0);
        for c in root
            .get("children")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = c.get("method").and_then(Value::as_str).unwrap_or("?");
            let sums = if per_call {
                vec![&mut judged_sums, &mut quiet_sums]
            } else {
                vec![&mut judged_sums]
            };
            for m in sums {
                let e = m.entry(name.to_owned()).or_default();
                e.ns += f(c, "self_ns");
                e.calls += f(c, "calls");
                e.samples += c.get("samples").and_then(Value::as_u64).unwrap_or(0);
            }
        }
    }
    let known_sum: f64 = SPIN_CHILDREN.iter().map(|c| c.1).sum();
    let children = SPIN_CHILDREN
        .iter()
        .filter(|_| s == "spin")
        .map(|(name, known)| {
            let j = judged_sums.get(*name).copied().unwrap_or_default();
            let q = quiet_sums.get(*name).copied();
            ChildFigures {
                share_error: (j.ns / judged_root_ns) / (known / known_sum) - 1.0,
                self_error: q.map_or(f64::NAN, |q| q.ns / q.calls.max(1.0) / known - 1.0),
                samples: j.samples,
            }
        })
        .collect();
    ScenarioFigures {
        // With no round at speed, every round (the host ran slowed).
        charged_over_bare: median(if judged.is_empty() { &all } else { &judged }),
        profiled_over_bare: median(&slowed),
        judged: judged.len(),
        rounds: all.len(),
        children,
        undisturbed,
    }
}

/// The accuracy fixtures under each timing mode, sessions alternating in
/// one JVM: charged/bare of (a) and (b), and (a)'s children.
pub fn accuracy(ctx: &Ctx) -> Result<Value> {
    let repeats = if ctx.quick { 3 } else { 5 };
    let mut jvm = Jvm::start(
        &ctx.env.java(),
        &[
            "-cp".into(),
            ctx.env.classpath.clone(),
            "accuracy.Accuracy".into(),
        ],
        "accuracy",
        &ctx.env.logs(),
        Duration::from_secs(60),
    )?;
    // The twin's speed before any attach: a round whose twin runs more
    // than 10% off it ran on a slowed core and is not judged.
    let mut quiet = BTreeMap::new();
    for (s, _, k, _, _) in SCENARIOS {
        jvm.send(&format!("twin {s} {k} 5"))?;
        jvm.expect(&format!("twin {s}"), START)?;
        jvm.send(&format!("twin {s} {k} 9"))?;
        let l = jvm.expect(&format!("twin {s}"), START)?;
        let v = numbers(&l);
        quiet.insert(s, *v.first().context("twin line")?);
    }
    let modes = modes(ctx);
    let out = ctx.env.scratch.path.join("accuracy.json");
    // [mode][scenario] -> per-session figures
    let mut figs: Vec<BTreeMap<&str, Vec<ScenarioFigures>>> =
        modes.iter().map(|_| BTreeMap::new()).collect();
    for rep in 0..repeats {
        for mi in (0..modes.len()).map(|i| (i + rep) % modes.len()) {
            let mode = &modes[mi];
            eprintln!(
                "sprig-bench: accuracy: repeat {}/{repeats}, timing {mode}",
                rep + 1
            );
            let args = SprigArgs {
                roots: SCENARIOS
                    .iter()
                    .map(|(_, m, _, _, _)| format!("accuracy.Work::{m}"))
                    .collect(),
                include: vec![],
                exclude: vec![],
                scheme: "lazy".into(),
                timing: Some(mode.clone()),
            };
            let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &args, &out)?;
            sprig.wait_profiling(START)?;
            let mut lines = Vec::new();
            for (s, _, k, rq, rf) in SCENARIOS {
                let rounds = if ctx.quick { rq } else { rf };
                jvm.send(&format!("run {s} {k} {rounds}"))?;
                lines.extend(jvm.collect_until(&format!("done {s}"), Duration::from_secs(600))?);
            }
            let stopped = sprig.stop(STOP)?;
            let p = ProfileSummary::from_json(&stopped.report)?;
            if p.lost > 0 {
                bail!("accuracy: sprig reported {} lost events", p.lost);
            }
            // Windows timing reports its tree as sampled timing does, with
            // its windows' facts beside it.
            let reported = match stopped.report.get("windows") {
                Some(w) if !w.is_null() => Some("windows"),
                _ => stopped.report.get("timing").and_then(Value::as_str),
            };
            if reported != Some(mode.as_str()) {
                bail!(
                    "accuracy: asked for --timing {mode}, the report says {:?}",
                    stopped.report.get("timing")
                );
            }
            for (s, _, _, _, _) in SCENARIOS {
                let fg = scenario_figures(&stopped.report, &lines, s, quiet[s]);
                if fg.rounds == 0 {
                    bail!("accuracy: no measuring thread of {s} in sprig's report");
                }
                figs[mi].entry(s).or_default().push(fg);
            }
        }
    }
    jvm.send("exit")?;
    jvm.expect("bye", Duration::from_secs(20))?;
    let _ = jvm.quit();
    let mut by_mode = serde_json::Map::new();
    for (mi, mode) in modes.iter().enumerate() {
        let mut m = serde_json::Map::new();
        for (s, list) in &figs[mi] {
            let ratios: Vec<f64> = list.iter().map(|x| x.charged_over_bare).collect();
            let slowed: Vec<f64> = list.iter().map(|x| x.profiled_over_bare).collect();
            let mut children = serde_json::Map::new();
            for (ci, (name, _)) in SPIN_CHILDREN.iter().enumerate() {
                let col = |g: &dyn Fn(&ChildFigures) -> f64| -> Vec<f64> {
                    list.iter()
                        .filter_map(|x| x.children.get(ci).map(g))
                        .collect()
                };
                let samples = col(&|c| c.samples as f64);
                if !samples.is_empty() {
                    children.insert(
                        (*name).to_owned(),
                        json!({
                            "share_error_pct": json_of(&col(&|c| c.share_error * 100.0)),
                            "self_error_pct": json_of(&col(&|c| c.self_error * 100.0)),
                            "samples": json_of(&samples),
                        }),
                    );
                }
            }
            m.insert(
                (*s).to_owned(),
                json!({
                    "charged_over_bare": json_of(&ratios),
                    "profiled_over_bare": json_of(&slowed),
                    "rounds_judged": json_of(&list.iter().map(|x| x.judged as f64).collect::<Vec<_>>()),
                    "rounds_undisturbed": json_of(&list.iter().map(|x| x.undisturbed as f64).collect::<Vec<_>>()),
                    "rounds": list.first().map_or(0, |x| x.rounds),
                    "children": children,
                }),
            );
        }
        by_mode.insert(mode.clone(), Value::Object(m));
    }
    Ok(json!({
        "sessions_per_mode": repeats,
        "quiet_twin_ns_per_root_call": quiet,
        "modes": by_mode,
    }))
}

/// A JFR settings file with only execution samples (threads in Java and
/// threads in native code), every millisecond.
pub(crate) const JFC: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="sprig-bench execution samples" description="jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms, nothing else">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
  <event name="jdk.NativeMethodSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
</configuration>
"#;

/// `class::method` of a sprig node.
fn node_key(n: &Value) -> String {
    format!(
        "{}::{}",
        n.get("class").and_then(Value::as_str).unwrap_or("?"),
        n.get("method").and_then(Value::as_str).unwrap_or("?")
    )
}

/// Self time per method (`class::method`) over every node of every tree,
/// and the samples behind it (sampled timing).
fn sprig_self(report: &Value) -> (BTreeMap<String, f64>, u64) {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let mut samples = 0;
    for t in report
        .get("threads")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut stack: Vec<&Value> = t
            .get("roots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        while let Some(n) = stack.pop() {
            *out.entry(node_key(n)).or_default() += f(n, "self_ns");
            samples += n.get("samples").and_then(Value::as_u64).unwrap_or(0);
            if let Some(ch) = n.get("children").and_then(Value::as_array) {
                stack.extend(ch.iter());
            }
        }
    }
    (out, samples)
}

/// `class::method` of a JFR frame (`jfr print --json`).
pub(crate) fn frame_key(fr: &Value) -> Option<String> {
    let m = fr.get("method")?;
    let class = m.get("type")?.get("name")?.as_str()?.replace('/', ".");
    Some(format!("{class}::{}", m.get("name")?.as_str()?))
}

/// Execution samples inside the root: per sample, the method sprig would
/// charge it to (the innermost frame at or above the root's outermost
/// frame that sprig's tree holds; JFR sees frames sprig does not
/// instrument, such as JDK classes outside `--include`). Also the number
/// of samples in all and of those inside the root.
fn jfr_self(
    recording: &Value,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> (Vec<String>, usize) {
    let mut inside = Vec::new();
    let mut total = 0;
    let events = recording
        .get("recording")
        .and_then(|r| r.get("events"))
        .and_then(Value::as_array);
    for e in events.into_iter().flatten() {
        let Some(frames) = e
            .get("values")
            .and_then(|v| v.get("stackTrace"))
            .and_then(|s| s.get("frames"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        total += 1;
        let keys: Vec<Option<String>> = frames.iter().map(frame_key).collect();
        // frames[0] is the top of the stack; the root's outermost frame is
        // the last one that matches.
        let Some(ri) = keys
            .iter()
            .rposition(|k| k.as_ref().is_some_and(|k| roots.contains(k)))
        else {
            continue;
        };
        if let Some(k) = keys[..=ri]
            .iter()
            .flatten()
            .find(|k| known.contains(k.as_str()))
        {
            inside.push(k.clone());
        }
    }
    (inside, total)
}

/// Sum over methods of the smaller of the two shares (1.0: the same
/// distribution).
pub fn overlap(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> f64 {
    let ta: f64 = a.values().sum();
    let tb: f64 = b.values().sum();
    if ta <= 0.0 || tb <= 0.0 {
        return f64::NAN;
    }
    a.iter()
        .map(|(k, va)| (va / ta).min(b.get(k).copied().unwrap_or(0.0) / tb))
        .sum()
}

fn counts(keys: &[String]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k.clone()).or_insert(0.0) += 1.0;
    }
    m
}

pub(crate) fn top(m: &BTreeMap<String, f64>, n: usize) -> Vec<Value> {
    let t: f64 = m.values().sum();
    let mut v: Vec<(&String, &f64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1));
    v.into_iter()
        .take(n)
        .map(|(k, x)| json!([k, (x / t * 1000.0).round() / 10.0]))
        .collect()
}

pub(crate) fn tool(jdk: &Path, name: &str, args: &[String]) -> Result<String> {
    let out = Command::new(jdk.join("bin").join(name))
        .args(args)
        .output()
        .with_context(|| format!("running {name}"))?;
    if !out.status.success() {
        bail!(
            "{name} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// JFR's samples of one recording that fall inside the root, charged as
/// [`jfr_self`] says, and the number of samples in all.
struct JfrWindow {
    inside: Vec<String>,
    total: usize,
}

/// Starts a JFR recording of execution samples in the JVM.
fn jfr_start(ctx: &Ctx, pid: u32, jfc: &Path, rec: &Path) -> Result<()> {
    tool(
        &ctx.env.jdk,
        "jcmd",
        &[
            pid.to_string(),
            "JFR.start".into(),
            "name=sprigbench".into(),
            format!("settings={}", jfc.display()),
            format!("filename={}", rec.display()),
        ],
    )?;
    Ok(())
}

/// Stops the recording (the file is written then).
fn jfr_stop(ctx: &Ctx, pid: u32) -> Result<()> {
    tool(
        &ctx.env.jdk,
        "jcmd",
        &[pid.to_string(), "JFR.stop".into(), "name=sprigbench".into()],
    )?;
    Ok(())
}

impl JfrWindow {
    /// Overlap of sprig's self times with these samples, and of the two
    /// halves of the samples with each other (the sampling noise that
    /// bounds any overlap with this many samples).
    fn figures(&self, sprig_self: &BTreeMap<String, f64>) -> Value {
        let half = self.inside.len() / 2;
        let c = counts(&self.inside);
        json!({
            "overlap": overlap(sprig_self, &c),
            "halves_overlap": overlap(&counts(&self.inside[..half]), &counts(&self.inside[half..])),
            "samples": self.total,
            "samples_in_root": self.inside.len(),
            "methods": c.len(),
            "top": top(&c, 5),
        })
    }
}

/// (workload, row, iterations measured quick, full).
const JFR_ROWS: [(&str, &str, usize, usize); 4] = [
    ("javac", "partial", 15, 30),
    ("h2", "statement", 40, 100),
    // A Lucene iteration is about as long as an H2 one.
    ("lucene", "document", 40, 100),
    // Jetty's iteration is about 10 ms: as long a window as H2's.
    ("jetty", "server", 120, 300),
];

/// The bare window JFR records is this many times as long as the profiled
/// one: JFR takes far fewer samples than once a millisecond in the root
/// (about 1,500 in 40 H2 iterations), and the overlap of two sample sets
/// is bounded by their noise.
const BARE_WINDOWS: usize = 10;

/// sprig in each timing mode against JFR's execution samples (Java and
/// native, every 1 ms) on the same workload in the same JVM: JFR over a
/// bare window right before each sprig session (the truth: the program
/// without probes), and JFR again over the profiled window itself.
pub fn jfr(ctx: &Ctx) -> Result<Value> {
    let jfc = ctx.env.scratch.path.join("exec-1ms.jfc");
    std::fs::write(&jfc, JFC)?;
    let modes = modes(ctx);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (wl, label, kq, kf) in JFR_ROWS {
        if !ctx.rows.is_empty() && !ctx.rows.iter().any(|r| r == label) {
            continue;
        }
        let def = match workloads::define(ctx, wl) {
            Err(e) if e.to_string().starts_with(workloads::SKIPPED) => {
                println!("jfr: {wl}: {e}");
                skipped.push(format!("{wl}: {e}"));
                continue;
            }
            d => d?,
        };
        let r = def
            .roots
            .iter()
            .find(|r| r.label == label)
            .context("no such row")?;
        let k = if ctx.quick { kq } else { kf };
        // JFR keeps 64 frames a stack by default: javac's genClass sits
        // deeper than that below the top.
        let mut jvm = workloads::start_jvm(
            ctx,
            &def,
            &["-XX:FlightRecorderOptions:stackdepth=2048".into()],
            &format!("jfr-{wl}"),
        )?;
        eprintln!(
            "sprig-bench: jfr: {wl}: warm-up ({} iterations)",
            def.warmup
        );
        iter(&mut jvm, def.warmup, def.iteration_bound)?;
        let roots: BTreeSet<String> = r.roots.iter().cloned().collect();
        let pid = jvm.pid();
        for rep in 0..ctx.repeats {
            for mi in (0..modes.len()).map(|i| (i + rep) % modes.len()) {
                let mode = &modes[mi];
                eprintln!(
                    "sprig-bench: jfr: {wl} {label}, timing {mode}, repeat {}/{}: JFR over {} bare iterations, then sprig and JFR over {k} profiled ones",
                    rep + 1,
                    ctx.repeats,
                    k * BARE_WINDOWS
                );
                let name = format!("jfr-{wl}-{mode}-{}", rep + 1);
                let rec_bare = ctx.env.scratch.path.join(format!("{name}-bare.jfr"));
                let rec_prof = ctx.env.scratch.path.join(format!("{name}-profiled.jfr"));
                // The bare window; its samples are charged once sprig's
                // tree (which methods it holds) is known.
                jfr_start(ctx, pid, &jfc, &rec_bare)?;
                iter(&mut jvm, k * BARE_WINDOWS, def.iteration_bound)?;
                jfr_stop(ctx, pid)?;
                let sargs = SprigArgs {
                    roots: r.roots.clone(),
                    include: r.include.clone(),
                    exclude: vec![],
                    scheme: "lazy".into(),
                    timing: Some(mode.clone()),
                };
                let out = ctx.env.scratch.path.join(format!("{name}.json"));
                let mut sprig = Sprig::start(&ctx.env.sprig, pid, &sargs, &out)?;
                sprig.wait_profiling(START)?;
                // Revelation and the JIT's recompilation first.
                iter(&mut jvm, def.warmup.min(5), def.iteration_bound)?;
                jfr_start(ctx, pid, &jfc, &rec_prof)?;
                sprig.reset(Duration::from_secs(30))?;
                iter(&mut jvm, k, def.iteration_bound)?;
                let stopped_rec = jfr_stop(ctx, pid);
                let stopped = sprig.stop(STOP)?;
                let (sprig_self, sprig_samples) = sprig_self(&stopped.report);
                let known: BTreeSet<String> = sprig_self.keys().cloned().collect();
                stopped_rec?;
                let bare = read_jfr(ctx, &rec_bare, &roots, &known)?;
                let prof = read_jfr(ctx, &rec_prof, &roots, &known)?;
                if bare.inside.is_empty() {
                    bail!(
                        "jfr: {wl}: none of JFR's {} samples of the bare window is inside {}",
                        bare.total,
                        r.roots.join(" ")
                    );
                }
                rows.push(json!({
                    "workload": wl, "root": label, "patterns": r.roots, "timing": mode,
                    "repeat": rep + 1, "iterations": k,
                    "jfr_bare": bare.figures(&sprig_self),
                    "jfr_profiled": prof.figures(&sprig_self),
                    // What the probes do to the program as JFR sees it.
                    "jfr_profiled_vs_bare": overlap(&counts(&prof.inside), &counts(&bare.inside)),
                    "sprig_samples": sprig_samples,
                    "windows": ProfileSummary::from_json(&stopped.report)
                        .ok()
                        .and_then(|p| p.windows)
                        .map_or(Value::Null, |w| w.to_json()),
                    "sprig_methods": known.len(),
                    "sprig_top": top(&sprig_self, 5),
                }));
                let _ = std::fs::remove_file(&rec_bare);
                let _ = std::fs::remove_file(&rec_prof);
            }
        }
        jvm.quit()?;
    }
    Ok(json!({
        "rows": rows,
        "skipped": skipped,
        "settings": "jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms, stackdepth 2048",
    }))
}

/// A stopped recording's samples inside the root.
fn read_jfr(
    ctx: &Ctx,
    rec: &Path,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> Result<JfrWindow> {
    let text = tool(
        &ctx.env.jdk,
        "jfr",
        &[
            "print".into(),
            "--json".into(),
            // `jfr print` shows 5 frames a stack unless told otherwise.
            "--stack-depth".into(),
            "2048".into(),
            "--events".into(),
            "jdk.ExecutionSample,jdk.NativeMethodSample".into(),
            rec.display().to_string(),
        ],
    )?;
    let v: Value = serde_json::from_str(&text).context("parsing jfr print --json")?;
    let (inside, total) = jfr_self(&v, roots, known);
    Ok(JfrWindow { inside, total })
}

fn iter(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<()> {
    jvm.send(&format!("iter {k}"))?;
    jvm.expect("times", bound * (k as u32).max(1))?;
    Ok(())
}

fn summary(v: &Value) -> Option<Summary> {
    Some(Summary {
        median: v.get("median")?.as_f64()?,
        min: v.get("min")?.as_f64()?,
        max: v.get("max")?.as_f64()?,
        n: v.get("n")?.as_u64()? as usize,
    })
}

/// The terminal lines of `accuracy` and `jfr`.
pub fn print(name: &str, v: &Value) {
    match name {
        "accuracy" => {
            println!(
                "accuracy fixtures, charged/bare per root call (medians over {} sessions per mode [min-max]; profiled/bare: the fixture's own time per profiled root call over its twin's, how much sprig slows it; goals: (a) 0.97-1.03, each child's share of the root (over every round) within 5% of its bare share; (b) 0.9-1.1; undisturbed %: a child's time per call against its duration, over rounds no call of which ran 3% long)",
                v.get("sessions_per_mode")
                    .and_then(Value::as_u64)
                    .unwrap_or(0)
            );
            let Some(modes) = v.get("modes").and_then(Value::as_object) else {
                return;
            };
            let names: Vec<&String> = modes.keys().collect();
            print!("  {:<28}", "");
            for m in &names {
                print!(" {m:>26}");
            }
            println!();
            let cell = |m: &str, path: &[&str]| {
                let mut x = &modes[m];
                for p in path {
                    x = &x[*p];
                }
                fmt(summary(x), 3)
            };
            for (label, path) in [
                (
                    "(a) spin: profiled/bare",
                    vec!["spin", "profiled_over_bare"],
                ),
                ("(a) spin: charged/bare", vec!["spin", "charged_over_bare"]),
                (
                    "(b) calls: profiled/bare",
                    vec!["calls", "profiled_over_bare"],
                ),
                (
                    "(b) calls: charged/bare",
                    vec!["calls", "charged_over_bare"],
                ),
            ] {
                print!("  {label:<28}");
                for m in &names {
                    print!(" {:>26}", cell(m, &path));
                }
                println!();
            }
            print!("  {:<28}", "(a) rounds undisturbed");
            for m in &names {
                print!(" {:>26}", cell(m, &["spin", "rounds_undisturbed"]));
            }
            println!();
            for (c, _) in SPIN_CHILDREN {
                print!("  {:<28}", format!("(a) {c}: share error %"));
                for m in &names {
                    print!(
                        " {:>26}",
                        cell(m, &["spin", "children", c, "share_error_pct"])
                    );
                }
                println!();
                print!("  {:<28}", format!("    {c}: undisturbed %"));
                for m in &names {
                    print!(
                        " {:>26}",
                        cell(m, &["spin", "children", c, "self_error_pct"])
                    );
                }
                println!();
                print!("  {:<28}", format!("    {c}: samples"));
                for m in &names {
                    print!(" {:>26}", cell(m, &["spin", "children", c, "samples"]));
                }
                println!();
            }
        }
        "jfr" => {
            println!(
                "self-time overlap with JFR's execution samples (Java and native, 1 ms): sum over methods of min(share in sprig, share in JFR); goals: >= 0.90 on Lucene, on the others >= 0.85 or within 0.05 of JFR's halves"
            );
            for s in v
                .get("skipped")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                println!("  note: {}", s.as_str().unwrap_or(""));
            }
            println!(
                "  JFR bare: over 10 times as many bare iterations of the same JVM right before the session (the program without probes); JFR profiled: over the profiled iterations themselves; JFR p/b: JFR profiled against JFR bare (what the probes change)"
            );
            println!(
                "  halves: JFR's first half of its samples against its second (sampling noise); in root: JFR's samples inside the root"
            );
            println!(
                "  {:<6} {:<10} {:<8} {:>3} | {:>8} {:>7} {:>8} | {:>8} {:>7} {:>8} | {:>8} | {:>9}  top method (sprig / JFR bare)",
                "prog",
                "root",
                "timing",
                "rep",
                "bare",
                "halves",
                "in root",
                "profiled",
                "halves",
                "in root",
                "JFR p/b",
                "sprig smp"
            );
            for r in v
                .get("rows")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
                let n = |w: &str, k: &str| {
                    r.get(w)
                        .and_then(|x| x.get(k))
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NAN)
                };
                let top_of = |t: Option<&Value>| {
                    t.and_then(|t| t.get(0))
                        .map_or("-".to_owned(), |t| t.to_string())
                };
                println!(
                    "  {:<6} {:<10} {:<8} {:>3} | {:>8.3} {:>7.3} {:>8.0} | {:>8.3} {:>7.3} {:>8.0} | {:>8.3} | {:>9}  {} / {}",
                    s("workload"),
                    s("root"),
                    s("timing"),
                    r.get("repeat").and_then(Value::as_u64).unwrap_or(0),
                    n("jfr_bare", "overlap"),
                    n("jfr_bare", "halves_overlap"),
                    n("jfr_bare", "samples_in_root"),
                    n("jfr_profiled", "overlap"),
                    n("jfr_profiled", "halves_overlap"),
                    n("jfr_profiled", "samples_in_root"),
                    r.get("jfr_profiled_vs_bare")
                        .and_then(Value::as_f64)
                        .unwrap_or(f64::NAN),
                    r.get("sprig_samples").and_then(Value::as_u64).unwrap_or(0),
                    top_of(r.get("sprig_top")),
                    top_of(r.get("jfr_bare").and_then(|b| b.get("top"))),
                );
                if let Some(w) = r.get("windows").filter(|w| !w.is_null()) {
                    let n = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
                    println!(
                        "  {:<30} windows: {} root calls counted, {} silent; {} stack samples credited, {} outside a root",
                        "",
                        n("counted_root_calls"),
                        n("silent_root_calls"),
                        n("samples"),
                        n("samples_outside")
                    );
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_of_shares() {
        let m = |v: &[(&str, f64)]| -> BTreeMap<String, f64> {
            v.iter().map(|(k, x)| ((*k).to_owned(), *x)).collect()
        };
        let a = m(&[("x", 3.0), ("y", 1.0)]);
        assert!((overlap(&a, &m(&[("x", 30.0), ("y", 10.0)])) - 1.0).abs() < 1e-12);
        // x: min(0.75, 0.5) + y: min(0.25, 0.25) + z only in b.
        let b = m(&[("x", 2.0), ("y", 1.0), ("z", 1.0)]);
        assert!((overlap(&a, &b) - 0.75).abs() < 1e-12);
        assert!(overlap(&a, &m(&[("z", 1.0)])).abs() < 1e-12);
        assert!(overlap(&a, &BTreeMap::new()).is_nan());
    }

    #[test]
    fn jfr_samples_go_to_the_innermost_known_frame_inside_the_root() {
        let frame = |c: &str, m: &str| json!({"method": {"type": {"name": c}, "name": m}});
        let ev = |frames: Vec<Value>| json!({"values": {"stackTrace": {"frames": frames}}});
        let rec = json!({"recording": {"events": [
            // Top frame a JDK method sprig does not hold: goes to a.B::leaf.
            ev(vec![frame("java/lang/String", "hashCode"), frame("a/B", "leaf"),
                    frame("a/B", "root"), frame("a/B", "root"), frame("a/Main", "main")]),
            // Outside the root.
            ev(vec![frame("a/B", "leaf"), frame("a/Main", "main")]),
            // The root itself.
            ev(vec![frame("java/lang/Math", "max"), frame("a/B", "root")]),
        ]}});
        let roots: BTreeSet<String> = ["a.B::root".to_owned()].into();
        let known: BTreeSet<String> = ["a.B::root".to_owned(), "a.B::leaf".to_owned()].into();
        let (inside, total) = jfr_self(&rec, &roots, &known);
        assert_eq!(total, 3);
        assert_eq!(inside, vec!["a.B::leaf".to_owned(), "a.B::root".to_owned()]);
    }

    #[test]
    fn scenario_rounds_join_the_twin_and_judge_rounds_at_speed() {
        let child = |m: &str, self_ns: f64| json!({"method": m, "calls": 10, "self_ns": self_ns, "samples": 3});
        let thread = |name: &str, total: f64, max_ns: f64| {
            json!({"name": name, "roots": [{"calls": 10, "total_ns": total,
                "latency": {"max_ns": max_ns}, "children": [
                child("spin200", 2.1e6), child("spin500", 5.0e6), child("spin1000", 9.5e6)]}]})
        };
        let report = json!({"threads": [
            thread("measure-spin-0", 17.0e6, 1.7e6), thread("measure-spin-1", 34.0e6, 3.4e6),
            // A root call preempted mid-spin: judged, its children not.
            thread("measure-spin-2", 18.7e6, 3.4e6),
            thread("warm-spin", 1.0, 1.0), thread("measure-calls-0", 5.0, 1.0)]});
        let lines = vec![
            "round spin 0 1700000 0 1700000".to_owned(),
            // Its twin ran at half speed: not judged.
            "round spin 1 3400000 0 3400000".to_owned(),
            "round spin 2 1700000 0 1700000".to_owned(),
        ];
        let fg = scenario_figures(&report, &lines, "spin", 1.7e6);
        assert_eq!((fg.rounds, fg.judged, fg.undisturbed), (3, 2, 1));
        // The median of 1.0 and 1.1.
        assert!((fg.charged_over_bare - 1.05).abs() < 1e-9);
        // Undisturbed: round 0 alone.
        let errs: Vec<f64> = fg
            .children
            .iter()
            .map(|c| (c.self_error * 100.0).round())
            .collect();
        assert_eq!(errs, vec![5.0, 0.0, -5.0]);
        // Every round: 3 x 16.6 ms of children in 69.7 ms of root.
        let share = |own: f64, known: f64| ((own / 69.7e6) / (known / 1.7e6) - 1.0) * 100.0;
        for (c, (own, known)) in
            fg.children
                .iter()
                .zip([(6.3e6, 200e3), (15.0e6, 500e3), (28.5e6, 1e6)])
        {
            assert!(
                (c.share_error * 100.0 - share(own, known)).abs() < 1e-9,
                "{} vs {}",
                c.share_error * 100.0,
                share(own, known)
            );
        }
        assert_eq!(fg.children[0].samples, 9);
        // The fixture's rounds give 0 for the profiled time here.
        assert_eq!(fg.profiled_over_bare, 0.0);
    }

    #[test]
    fn windows_rounds_divide_by_counted_calls_or_else_by_silent_ones() {
        let root = |calls: u64, total: f64, count: u64| {
            json!({"calls": calls, "total_ns": total,
                "latency": {"count": count, "max_ns": 1.0}, "children": []})
        };
        let report = json!({"windows": {"counted_root_calls": 4, "silent_root_calls": 16},
            "threads": [
            // 4 counted calls: the mean silent call (1.1 ms) times 4.
            {"name": "measure-calls-0", "roots": [root(4, 4.4e6, 6)]},
            // No counted call: the sum of its 10 silent calls.
            {"name": "measure-calls-1", "roots": [root(0, 9.0e6, 10)]},
            // No sample reached its silent calls: no time, not judged.
            {"name": "measure-calls-2", "roots": [root(0, 0.0, 10)]}]});
        let lines = vec![
            "round calls 0 1000000 2000000 1000000".to_owned(),
            "round calls 1 1000000 1000000 1000000".to_owned(),
            "round calls 2 1000000 1500000 1000000".to_owned(),
        ];
        let fg = scenario_figures(&report, &lines, "calls", 1e6);
        assert_eq!((fg.rounds, fg.judged), (2, 2));
        // The median of 1.1 and 0.9.
        assert!(
            (fg.charged_over_bare - 1.0).abs() < 1e-9,
            "{}",
            fg.charged_over_bare
        );
        // Every round's own profiled/bare: 2.0, 1.0, 1.5.
        assert!((fg.profiled_over_bare - 1.5).abs() < 1e-9);
        // (a) under windows timing: a child's time per call only from
        // threads with counted calls (the other's spin200 has 4 ms of
        // self time and no call).
        let spin = |calls: u64, c200: (u64, f64)| {
            json!({"calls": calls, "total_ns": 17.0e6,
                "latency": {"count": 10, "max_ns": 1.7e6}, "children": [
                {"method": "spin200", "calls": c200.0, "self_ns": c200.1, "samples": 2},
                {"method": "spin500", "calls": calls, "self_ns": 5.0e6, "samples": 5},
                {"method": "spin1000", "calls": calls, "self_ns": 10.0e6, "samples": 10}]})
        };
        let report = json!({"windows": {"counted_root_calls": 10, "silent_root_calls": 10},
            "threads": [
            {"name": "measure-spin-0", "roots": [spin(10, (10, 2.0e6))]},
            {"name": "measure-spin-1", "roots": [spin(0, (0, 4.0e6))]}]});
        let lines = vec![
            "round spin 0 1700000 1700000 1700000".to_owned(),
            "round spin 1 1700000 1700000 1700000".to_owned(),
        ];
        let fg = scenario_figures(&report, &lines, "spin", 1.7e6);
        assert!(
            fg.children[0].self_error.abs() < 1e-9,
            "{}",
            fg.children[0].self_error
        );
    }
}
