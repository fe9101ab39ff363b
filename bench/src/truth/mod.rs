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
    // Windows timing: a thread's root node counts its counted calls only
    // (none on a thread no counting window caught) and its latencies the
    // silent ones, and its times stand for all of its calls over the
    // session's scale: a thread's time per call is its time times that
    // scale over all of its calls. One no sample reached carries no time
    // and is not judged.
    let windows = report.get("windows").is_some_and(|w| !w.is_null());
    let session_scale = report
        .get("windows")
        .and_then(|w| w.get("scale"))
        .and_then(Value::as_f64)
        .filter(|&s| s > 0.0)
        .unwrap_or(1.0);
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
        let counted = f(root, "calls");
        // what one ns of this thread's tree stands for, per counted call
        let (calls, per_counted) = if windows {
            let all = counted + latency_count;
            (all, session_scale * counted / all.max(1.0))
        } else {
            (counted, 1.0)
        };
        if windows && (f(root, "total_ns") <= 0.0 || calls <= 0.0) {
            continue;
        }
        let ratio = f(root, "total_ns") * session_scale.max(1.0) / calls.max(1.0) / bare;
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
            // shares over every round as the report weighs them; times per
            // call on the thread's counted calls
            let sums = if per_call {
                vec![(&mut judged_sums, 1.0), (&mut quiet_sums, per_counted)]
            } else {
                vec![(&mut judged_sums, 1.0)]
            };
            for (m, k) in sums {
                let e = m.entry(name.to_owned()).or_default();
                e.ns += f(c, "self_ns") * k;
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
                interval_ms: None,
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
            let asked = if crate::proc::is_windows(mode) {
                "windows"
            } else {
                mode.as_str()
            };
            if reported != Some(asked) {
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

mod jfr;
mod jfr_stream;

/// The command-line arguments of a workload JVM whose JFR samples are a
/// benchmark's truth. JFR keeps 64 frames a stack by default (javac's
/// `genClass` sits deeper below the top). HotSpot records where each
/// compiled instruction belongs among inlined methods only at safepoints
/// and calls unless `DebugNonSafepoints` is on, or an agent takes
/// compiled-method events, as sprig's CPU timer does: JFR then credits a
/// sample in code compiled before any such agent to the scope of the
/// nearest safepoint. On Lucene's analyzer JFR's bare samples put 15-16%
/// of the root in `AttributeSource::clearAttributes` and 17-20% in
/// `CharacterUtils::toLowerCase`, where code compiled during a sprig
/// session (and the same bare code with the flag on) gives 0 and 7-8%
/// (BENCHMARKS.md, "What changes the program under a session"). With the
/// flag on from the start, bare and profiled code carry the same debug
/// information.
pub fn jfr_truth_jvm_args() -> Vec<String> {
    [
        "-XX:FlightRecorderOptions:stackdepth=2048",
        "-XX:+UnlockDiagnosticVMOptions",
        "-XX:+DebugNonSafepoints",
    ]
    .map(String::from)
    .to_vec()
}
pub(crate) use jfr::{JFC, frame_key, tool, top};
pub use jfr::{jfr, overlap};
pub(crate) use jfr_stream::each_event as each_jfr_event;

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
                fmt(Summary::from_json(x), 3)
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
                "  JFR bare: over 10 times as many bare iterations of the same JVM right before the session (the program without probes); JFR profiled: over the profiled iterations themselves; JFR p/b: JFR profiled against JFR bare (what the probes change; the control line: the same with no sprig)"
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
                if let Some(c) = r.get("jfr_bare_again_vs_bare").and_then(Value::as_f64) {
                    println!(
                        "  {:<30} control: JFR over as many bare iterations again, right after the bare window, against JFR bare: {c:.3} ({} samples in root; what p/b reads with no sprig)",
                        "",
                        r.get("jfr_bare_again_samples_in_root")
                            .and_then(Value::as_u64)
                            .unwrap_or(0)
                    );
                }
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
                if let Some(w) = r.get("jfr_profiled_since_switch").filter(|w| !w.is_null()) {
                    let bins: Vec<String> = w
                        .get("bins")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|b| {
                            format!(
                                "{}+ ms {:.3} ({} samples, {} compiled)",
                                b["from_ms"],
                                b["overlap_with_bare"].as_f64().unwrap_or(f64::NAN),
                                b["samples_in_root"],
                                b["compilations"]
                            )
                        })
                        .collect();
                    println!(
                        "  {:<30} JFR profiled against bare by time since a switch into a silent window ({} switches): {}",
                        "",
                        w["switches"],
                        bins.join("; ")
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
    fn windows_rounds_take_each_threads_time_to_all_of_its_calls() {
        let root = |calls: u64, total: f64, count: u64| {
            json!({"calls": calls, "total_ns": total,
                "latency": {"count": count, "max_ns": 1.0}, "children": []})
        };
        // 4 counted root calls of 20: times are on the scale x5.
        let report = json!({"windows": {"counted_root_calls": 4, "silent_root_calls": 16,
            "scale": 5.0},
            "threads": [
            // 4 counted and 6 silent calls of 1.1 ms: 11 ms over 5.
            {"name": "measure-calls-0", "roots": [root(4, 2.2e6, 6)]},
            // No counted call, 10 silent ones of 0.9 ms: 9 ms over 5.
            {"name": "measure-calls-1", "roots": [root(0, 1.8e6, 10)]},
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
        // threads with counted calls (the other's spin200 has time and no
        // call), taken back to that thread's counted calls: thread 0 had
        // 10 counted calls of 20 where the session had 1 in 4, so its
        // spin200's 1 ms stands for 2 ms over its 10 counted calls.
        let spin = |calls: u64, c200: (u64, f64), silent: u64| {
            json!({"calls": calls, "total_ns": 8.5e6,
                "latency": {"count": silent, "max_ns": 1.7e6}, "children": [
                {"method": "spin200", "calls": c200.0, "self_ns": c200.1, "samples": 2},
                {"method": "spin500", "calls": calls, "self_ns": 2.5e6, "samples": 5},
                {"method": "spin1000", "calls": calls, "self_ns": 5.0e6, "samples": 10}]})
        };
        let report = json!({"windows": {"counted_root_calls": 10, "silent_root_calls": 30,
            "scale": 4.0},
            "threads": [
            {"name": "measure-spin-0", "roots": [spin(10, (10, 1.0e6), 10)]},
            {"name": "measure-spin-1", "roots": [spin(0, (0, 4.0e6), 20)]}]});
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
