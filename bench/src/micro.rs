//! Issue 4's microbenchmarks, each in one JVM run: probe cost against
//! System.nanoTime() inside and outside the root context, attach latency,
//! and throughput before attach / while profiling / after detach.

use crate::Ctx;
use crate::proc::{Jvm, KEEP_TRIVIAL_SCHEME, Sprig, SprigArgs};
use crate::profile::ProfileSummary;
use crate::stats::{Summary, json_of, median};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const SPRIG_START: Duration = Duration::from_secs(60);
const SPRIG_STOP: Duration = Duration::from_secs(60);

fn check_lost(p: &ProfileSummary, what: &str) -> Result<()> {
    if p.lost > 0 {
        bail!("{what}: sprig reported {} lost events", p.lost);
    }
    Ok(())
}

fn parse_f64(s: &str, line: &str) -> Result<f64> {
    s.parse()
        .map_err(|_| anyhow::anyhow!("unexpected fixture output: {line:?}"))
}

/// Probe pair cost in and out of the root context, as ratios to one nanoTime.
pub fn probe_cost(ctx: &Ctx) -> Result<Value> {
    let (n, rounds, repeats) = if ctx.quick {
        (200_000, 7, 3)
    } else {
        (500_000, 11, 7)
    };
    // The agent names the probe path it binds (JNI, or FFM critical
    // downcalls on JDK 22+) on the target's stderr.
    let mut jvm = Jvm::start_with_env(
        &ctx.env.java(),
        &[
            "-cp".into(),
            ctx.env.classpath.clone(),
            "bench.ProbeCost".into(),
        ],
        &[("SPRIG_AGENT_DEBUG", "1")],
        "probe-cost",
        &ctx.env.logs(),
        Duration::from_secs(60),
    )?;
    jvm.send(&format!("warm {n} 10"))?;
    jvm.expect("done", Duration::from_secs(300))?;
    // target() is a callee of inRoot: with callee revelation it carries the
    // plain probe pair. Without it, target() must be named as a second root
    // pattern (a root called inside an open root context records as a nested
    // call, but through the root probes).
    let mut args = SprigArgs {
        // holdRoot keeps a thread inside a root context for the "beside" loops.
        roots: vec![
            "bench.ProbeCost::inRoot".into(),
            "bench.ProbeCost::holdRoot".into(),
        ],
        include: vec![],
        exclude: vec!["bench.Uninstrumented".into()],
        scheme: KEEP_TRIVIAL_SCHEME.into(),
        timing: None,
        interval_ms: None,
    };
    let out = ctx.env.scratch.path.join("probe-cost.json");
    let mut per_rep: Vec<BTreeMap<String, f64>> = Vec::new();
    // The pair round by round, one list per session (repeat).
    let mut pair_rounds: Vec<Vec<f64>> = Vec::new();
    let mut revealed_reps = 0;
    let mut exact_reps = 0;
    let mut last = ProfileSummary::default();
    let mut rep = 0;
    let mut attempts = 0;
    while rep < repeats && attempts < repeats + 1 {
        attempts += 1;
        let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &args, &out)?;
        sprig.wait_profiling(SPRIG_START)?;
        jvm.send(&format!("cost {n} {rounds} direct"))?;
        let lines = jvm.collect_until("done", Duration::from_secs(600))?;
        // Measure again once no root context has been open for a second
        // (the steady out-of-context cost; Probe.active comes down as the
        // last root context closes, or within a few milliseconds from the
        // agent's control thread if two threads crossed).
        std::thread::sleep(Duration::from_secs(1));
        jvm.send(&format!("outside {n} {rounds}"))?;
        let settled = jvm.collect_until("done", Duration::from_secs(600))?;
        // The same loops while another thread sits inside a root context.
        jvm.send(&format!("beside {n} {rounds}"))?;
        let beside = jvm.collect_until("done", Duration::from_secs(600))?;
        let stopped = sprig.stop(SPRIG_STOP)?;
        let p = ProfileSummary::from_json(&stopped.report)?;
        check_lost(&p, "probe cost")?;
        // The prime call makes 1000 target() calls, the measured one n * rounds.
        let target_calls = ProfileSummary::calls_of(&stopped.report, "bench.ProbeCost", "target");
        if target_calls == 0 && args.roots.len() == 2 {
            eprintln!("sprig-bench: probe cost: target() was not revealed; naming it as a root");
            args.roots.push("bench.ProbeCost::target".into());
            continue;
        }
        let expected = 1000 + (n as u64) * (rounds as u64);
        if target_calls == expected {
            exact_reps += 1;
        } else {
            eprintln!(
                "sprig-bench: probe cost repeat {rep}: target() counted {target_calls} times, {expected} made"
            );
        }
        if ProfileSummary::calls_of(&stopped.report, "bench.ProbeCost", "outTarget") > 0 {
            revealed_reps += 1;
        }
        let mut series: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (prefix, ls) in [("", &lines), ("settled_", &settled), ("", &beside)] {
            for l in ls {
                let w: Vec<&str> = l.split_whitespace().collect();
                if w.len() == 3 && w[0] == "round" {
                    series
                        .entry(format!("{prefix}{}", w[1]))
                        .or_default()
                        .push(parse_f64(w[2], l)?);
                }
            }
        }
        if let (Some(t), Some(p)) = (series.get("in_target"), series.get("in_plain")) {
            pair_rounds.push(t.iter().zip(p).map(|(t, p)| t - p).collect());
        }
        per_rep.push(series.into_iter().map(|(k, v)| (k, median(&v))).collect());
        last = p;
        rep += 1;
    }
    if per_rep.is_empty() {
        bail!("probe cost: no repeat measured");
    }
    let repeats = per_rep.len();
    let probe_path = jvm
        .stderr_text()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("sprig agent: probe path: "))
        .unwrap_or("unknown (no line from the agent)")
        .to_owned();
    jvm.quit()?;
    let col = |f: &dyn Fn(&BTreeMap<String, f64>) -> Option<f64>| -> Vec<f64> {
        per_rep.iter().filter_map(f).collect()
    };
    let get = |m: &BTreeMap<String, f64>, k: &str| m.get(k).copied();
    let in_pair = col(&|m| Some(get(m, "in_target")? - get(m, "in_plain")?));
    let in_ratio =
        col(&|m| Some((get(m, "in_target")? - get(m, "in_plain")?) / get(m, "in_nano")?));
    let revealed = revealed_reps == repeats;
    let (out_kind, out_key) = if revealed {
        (
            "instrumented callee outTarget() called outside the root context",
            "out_target",
        )
    } else {
        (
            "revelation pending: the injected probe pair (sprig.rt.Probe.enter/exit) called directly outside the root context",
            "out_direct",
        )
    };
    let settled_key = format!("settled_{out_key}");
    let out_pair = col(&|m| Some(get(m, &settled_key)? - get(m, "settled_out_plain")?));
    let out_ratio = col(&|m| {
        Some((get(m, &settled_key)? - get(m, "settled_out_plain")?) / get(m, "settled_out_nano")?)
    });
    let after_pair = col(&|m| Some(get(m, out_key)? - get(m, "out_plain")?));
    let after_ratio =
        col(&|m| Some((get(m, out_key)? - get(m, "out_plain")?) / get(m, "out_nano")?));
    let beside_pair = col(&|m| Some(get(m, "beside_out_target")? - get(m, "beside_out_plain")?));
    let beside_ratio = col(&|m| {
        Some(
            (get(m, "beside_out_target")? - get(m, "beside_out_plain")?)
                / get(m, "beside_out_nano")?,
        )
    });
    let nano_in = col(&|m| get(m, "in_nano"));
    Ok(json!({
        "calls_per_loop": n, "rounds": rounds, "repeats": repeats,
        "probe_path": probe_path,
        "nanotime_ns": json_of(&nano_in),
        "in_root_pair_ns": json_of(&in_pair),
        "in_root_ratio": json_of(&in_ratio),
        "in_root_counts_exact_repeats": exact_reps,
        "out_of_context_measures": out_kind,
        "out_of_context_ns": json_of(&out_pair),
        "out_of_context_ratio": json_of(&out_ratio),
        "out_of_context_note": "measured 1 s after the last root context ended; the *_right_after_root figures are the same loops run at once after a root context ended (the last thread to leave a root context lowers Probe.active, so these should match the settled ones)",
        "out_of_context_right_after_root_ns": json_of(&after_pair),
        "out_of_context_right_after_root_ratio": json_of(&after_ratio),
        "beside_root_ns": json_of(&beside_pair),
        "beside_root_ratio": json_of(&beside_ratio),
        "beside_root_measures": "outTarget() called outside any root context while another thread is inside the root holdRoot()",
        "revealed_callee": revealed,
        "target_instrumented_as": if args.roots.len() == 2 { "revealed callee (plain probe pair)" } else { "second root pattern, nested in the root context (root probes)" },
        "calibration": last.calibration,
        "in_root_pair_by_session_ns": pair_rounds,
        "in_root_pair_by_session_note": "in_target - in_plain for every round of every session (repeat), in order: on a shared host the pair can run far above the calibrated figure for whole rounds or sessions while plain code and nanoTime() keep their speed",
        "warnings": last.warnings,
        "raw_medians_per_repeat": per_rep,
    }))
}

fn ops(jvm: &mut Jvm, millis: u64) -> Result<f64> {
    let l = jvm.expect_after_send(&format!("throughput {millis}"), "ops", millis)?;
    parse_f64(l.split_whitespace().nth(1).unwrap_or(""), &l)
}

impl Jvm {
    fn expect_after_send(&mut self, cmd: &str, prefix: &str, millis: u64) -> Result<String> {
        self.send(cmd)?;
        self.expect(prefix, Duration::from_millis(millis * 4 + 30_000))
    }
}

fn tput_jvm(ctx: &Ctx, name: &str) -> Result<Jvm> {
    Jvm::start(
        &ctx.env.java(),
        &["-cp".into(), ctx.env.classpath.clone(), "bench.Tput".into()],
        name,
        &ctx.env.logs(),
        Duration::from_secs(60),
    )
}

fn tput_args() -> SprigArgs {
    SprigArgs {
        roots: vec!["bench.Tput::batch".into()],
        include: vec![],
        exclude: vec![],
        scheme: KEEP_TRIVIAL_SCHEME.into(),
        timing: None,
        interval_ms: None,
    }
}

/// From spawning `sprig profile` to its "profiling" line, while the root runs
/// continuously; the report must hold root calls (the first event came).
pub fn attach_latency(ctx: &Ctx) -> Result<Value> {
    let attaches = if ctx.quick { 3 } else { 10 };
    let mut jvm = tput_jvm(ctx, "attach-latency")?;
    ops(&mut jvm, 2000)?;
    let out = ctx.env.scratch.path.join("attach.json");
    let mut to_profiling = Vec::new();
    let mut stop_times = Vec::new();
    let mut root_calls = Vec::new();
    for i in 0..attaches {
        // The JVM is inside throughput() calling the root when sprig attaches.
        jvm.send("throughput 4000")?;
        std::thread::sleep(Duration::from_millis(300));
        let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &tput_args(), &out)?;
        let t = sprig.wait_profiling(SPRIG_START)?;
        std::thread::sleep(Duration::from_millis(100));
        let stopped = sprig.stop(SPRIG_STOP)?;
        let p = ProfileSummary::from_json(&stopped.report)?;
        check_lost(&p, "attach latency")?;
        if p.root_calls == 0 {
            bail!(
                "attach {i}: sprig recorded no root call in 100 ms of a root called continuously"
            );
        }
        to_profiling.push(t.as_secs_f64() * 1e3);
        stop_times.push(stopped.stop_time.as_secs_f64() * 1e3);
        root_calls.push(p.root_calls as f64);
        jvm.expect("ops", Duration::from_secs(60))?;
    }
    // How long one root call takes, bare: the bound on the gap between the
    // "profiling" line and the first root event.
    let batch_per_s = ops(&mut jvm, 1000)?;
    jvm.quit()?;
    Ok(json!({
        "attaches": attaches,
        "spawn_to_profiling_ms": json_of(&to_profiling),
        "root_call_period_us": 1e6 / batch_per_s,
        "sigint_to_exit_ms": json_of(&stop_times),
        "root_calls_in_100ms": json_of(&root_calls),
    }))
}

/// Throughput before attach, while profiling, after detach, and the re-warm
/// series after each detach.
pub fn throughput(ctx: &Ctx) -> Result<Value> {
    let (cycles, sample_ms) = if ctx.quick { (2, 500) } else { (4, 1000) };
    let mut jvm = tput_jvm(ctx, "throughput")?;
    for _ in 0..3 {
        ops(&mut jvm, 2000)?;
    }
    let mut before = Vec::new();
    for _ in 0..5 {
        before.push(ops(&mut jvm, sample_ms)?);
    }
    let before_med = median(&before);
    let out = ctx.env.scratch.path.join("throughput.json");
    let mut during = Vec::new();
    let mut after = Vec::new();
    let mut rewarm_ms = Vec::new();
    let mut series_all = Vec::new();
    let mut instrumented = Vec::new();
    for c in 0..cycles {
        let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &tput_args(), &out)?;
        sprig.wait_profiling(SPRIG_START)?;
        let mut d = Vec::new();
        for _ in 0..3 {
            d.push(ops(&mut jvm, sample_ms)?);
        }
        let stopped = sprig.stop(SPRIG_STOP)?;
        let detached = Instant::now();
        let p = ProfileSummary::from_json(&stopped.report)?;
        check_lost(&p, "throughput")?;
        instrumented.push(p.instrumented as f64);
        during.push(median(&d) / before_med);
        // Re-warm: 200 ms samples until one is within 2% of before (at most 60).
        let mut series = Vec::new();
        let mut warm_at = None;
        for _ in 0..60 {
            let v = ops(&mut jvm, 200)?;
            let at = detached.elapsed().as_secs_f64() * 1e3;
            series.push(json!([at.round(), v / before_med]));
            if v >= 0.98 * before_med {
                warm_at = Some(at);
                break;
            }
        }
        match warm_at {
            Some(t) => rewarm_ms.push(t),
            None => eprintln!(
                "sprig-bench: throughput cycle {c}: not within 2% of before after 60 samples"
            ),
        }
        series_all.push(Value::Array(series));
        let mut a = Vec::new();
        for _ in 0..3 {
            a.push(ops(&mut jvm, sample_ms)?);
        }
        after.push(median(&a) / before_med);
    }
    jvm.quit()?;
    let warm_cycles = rewarm_ms.len();
    Ok(json!({
        "root": "bench.Tput::batch", "cycles": cycles, "sample_ms": sample_ms,
        "before_ops_per_s": json_of(&before),
        "during_ratio": json_of(&during),
        "after_ratio": json_of(&after),
        "rewarm_ms": json_of(&rewarm_ms),
        "rewarm_reached_in_cycles": warm_cycles,
        "rewarm_series": series_all,
        "instrumented_methods": json_of(&instrumented),
    }))
}

/// What a probe pair costs in place as a function of the work around it
/// (`bench.Overlap`): per step count k, the probed loop's ns per call minus
/// the bare twin's, the minimum over rounds, in one session; beside it the
/// pair the calibration measured around an empty method (what sprig
/// subtracts per call).
pub fn overlap(ctx: &Ctx) -> Result<Value> {
    let n = 20_000;
    let rounds = if ctx.quick { 100 } else { 300 };
    let mut jvm = Jvm::start(
        &ctx.env.java(),
        &[
            "-cp".into(),
            ctx.env.classpath.clone(),
            "bench.Overlap".into(),
        ],
        "overlap",
        &ctx.env.logs(),
        Duration::from_secs(120),
    )?;
    let args = SprigArgs {
        roots: vec!["bench.Overlap$Probed::root".into()],
        include: vec![],
        exclude: vec![],
        scheme: KEEP_TRIVIAL_SCHEME.into(),
        timing: None,
        interval_ms: None,
    };
    let out = ctx.env.scratch.path.join("overlap.json");
    let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &args, &out)?;
    sprig.wait_profiling(SPRIG_START)?;
    // The first series reveals `work` and lets the JIT compile the probed
    // code; the second is the one measured.
    let mut lines = Vec::new();
    for _ in 0..2 {
        jvm.send(&format!("go {n} {rounds}"))?;
        lines = jvm.collect_until("done", Duration::from_secs(600))?;
    }
    let stopped = sprig.stop(SPRIG_STOP)?;
    let p = ProfileSummary::from_json(&stopped.report)?;
    check_lost(&p, "overlap")?;
    jvm.quit()?;
    let mut rows = Vec::new();
    for l in lines.iter().filter(|l| l.starts_with("k ")) {
        let w: Vec<&str> = l.split_whitespace().collect();
        let (Some(k), Some(bare), Some(probed)) = (w.get(1), w.get(3), w.get(5)) else {
            bail!("unexpected fixture output: {l:?}");
        };
        let (bare, probed) = (parse_f64(bare, l)?, parse_f64(probed, l)?);
        rows.push(json!({
            "steps": parse_f64(k, l)?,
            "bare_ns": bare,
            "probed_ns": probed,
            "pair_in_place_ns": probed - bare,
        }));
    }
    if rows.is_empty() {
        bail!("overlap: the fixture printed no rows: {lines:?}");
    }
    Ok(json!({
        "calls_per_round": n,
        "rounds": rounds,
        "rows": rows,
        "calibration": p.calibration,
    }))
}

/// One-line summaries for the terminal.
pub fn print(name: &str, v: &Value) {
    let s = |k: &str| -> String {
        v.get(k)
            .and_then(|x| {
                Some(Summary {
                    median: x.get("median")?.as_f64()?,
                    min: x.get("min")?.as_f64()?,
                    max: x.get("max")?.as_f64()?,
                    n: x.get("n")?.as_u64()? as usize,
                })
            })
            .map_or("-".to_owned(), |x| crate::stats::fmt(Some(x), 3))
    };
    match name {
        "overlap" => {
            let c = v.get("calibration").filter(|c| !c.is_null());
            let pair = c.map(|c| {
                let f = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
                f("inner_ns") + f("outer_ns")
            });
            println!(
                "probe pair in place by the work per call (bench.Overlap: k steps of dependent arithmetic; ns per call, min over rounds)"
            );
            if let Some(pair) = pair {
                println!(
                    "  calibrated pair (empty method)  {pair:.2} ns  (what sprig subtracts per call)"
                );
            }
            println!("  steps    bare     probed   pair in place");
            for r in v
                .get("rows")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = |k: &str| r.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
                let share = pair.map_or(String::new(), |p| {
                    format!(
                        "  ({:.2} of the calibrated pair)",
                        f("pair_in_place_ns") / p
                    )
                });
                println!(
                    "  {:5.0} {:8.2} {:10.2} {:10.2}{share}",
                    f("steps"),
                    f("bare_ns"),
                    f("probed_ns"),
                    f("pair_in_place_ns")
                );
            }
        }
        "probe" => {
            println!(
                "probe cost (ns per call; ratios to one System.nanoTime() in the same JVM run)"
            );
            println!(
                "  probe path                      {}",
                v.get("probe_path").and_then(Value::as_str).unwrap_or("?")
            );
            println!("  nanoTime                        {}", s("nanotime_ns"));
            println!(
                "  pair in root context            {} ns = {} x nanoTime  (goal <= 1.0)",
                s("in_root_pair_ns"),
                s("in_root_ratio")
            );
            if let Some(c) = v.get("calibration").filter(|c| !c.is_null()) {
                let f = |k: &str| c.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
                println!(
                    "  calibrated pair (last session)  {:.3} ns  (inner {:.3} + outer {:.3}: what sprig profile subtracts per call)",
                    f("inner_ns") + f("outer_ns"),
                    f("inner_ns"),
                    f("outer_ns")
                );
            }
            if let Some(sessions) = v
                .get("in_root_pair_by_session_ns")
                .and_then(Value::as_array)
            {
                for (i, rounds) in sessions.iter().enumerate() {
                    let list: Vec<String> = rounds
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_f64)
                        .map(|x| format!("{x:.1}"))
                        .collect();
                    println!("    pair by round, session {}    {}", i + 1, list.join(" "));
                }
            }
            println!(
                "  outside any root context        {} ns = {} x nanoTime  (goal <= 0.1)",
                s("out_of_context_ns"),
                s("out_of_context_ratio")
            );
            println!(
                "    measured as: {}",
                v.get("out_of_context_measures")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            );
            println!(
                "  outside, right after a root ctx {} ns = {} x nanoTime  (Probe.active lowered as the last root context closed)",
                s("out_of_context_right_after_root_ns"),
                s("out_of_context_right_after_root_ratio")
            );
            println!(
                "  outside, another thread inside {} ns = {} x nanoTime  (a server profiled on one request path)",
                s("beside_root_ns"),
                s("beside_root_ratio")
            );
            println!(
                "    target instrumented as: {}",
                v.get("target_instrumented_as")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
            );
            println!(
                "  in-root counts exact in {}/{} repeats",
                v.get("in_root_counts_exact_repeats")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                v.get("repeats").and_then(Value::as_u64).unwrap_or(0)
            );
        }
        "attach" => {
            println!(
                "attach latency (ms, spawn of sprig profile -> root instrumented, root called continuously)"
            );
            println!(
                "  to 'sprig: profiling'           {}",
                s("spawn_to_profiling_ms")
            );
            println!(
                "  root call period (bare)         {:.2} us (bound on the wait for the first event)",
                v.get("root_call_period_us")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN)
            );
            println!(
                "  SIGINT -> sprig exit (detach)   {}",
                s("sigint_to_exit_ms")
            );
        }
        "throughput" => {
            println!("throughput of bench.Tput (root bench.Tput::batch), ratio to before attach");
            println!(
                "  before (batches/s)              {}",
                s("before_ops_per_s")
            );
            println!("  while profiling                 {}", s("during_ratio"));
            println!(
                "  after detach, warm again        {}  (goal >= 0.98)",
                s("after_ratio")
            );
            println!("  re-warm to within 2% (ms)       {}", s("rewarm_ms"));
        }
        "ring" => {
            println!("event ring (wire's ring_bench, in process, medians over rounds)");
            for line in v["output"].as_array().into_iter().flatten() {
                println!("  {}", line.as_str().unwrap_or(""));
            }
        }
        _ => {}
    }
}

/// Ring producer and consumer rates: runs the wire crate's `ring_bench`
/// example (release) and keeps its figures. Lines with a median become
/// `{label: {median, min, max}}`; the concurrent run's line is kept as text.
pub fn ring_rates(_ctx: &Ctx) -> Result<Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = std::process::Command::new(cargo)
        .current_dir(crate::env::repo_root())
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "sprig-wire",
            "--example",
            "ring_bench",
        ])
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run the ring benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "the ring benchmark failed ({}):\n{text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(parse_ring_bench(&text))
}

/// Parses `ring_bench` output (see wire/examples/ring_bench.rs).
pub fn parse_ring_bench(text: &str) -> Value {
    let mut figures = serde_json::Map::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        lines.push(Value::from(line));
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let Some(after) = rest.trim().strip_prefix("median") else {
            continue;
        };
        // "median   1.03 (min 0.98, max 1.20) ns/event"
        let nums: Vec<f64> = after
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|t| t.parse().ok())
            .collect();
        let unit = after.rsplit(')').next().unwrap_or("").trim();
        if nums.len() >= 3 {
            figures.insert(
                label.trim().to_owned(),
                json!({"median": nums[0], "min": nums[1], "max": nums[2], "unit": unit}),
            );
        }
    }
    json!({"figures": figures, "output": lines})
}

#[cfg(test)]
mod ring_tests {
    use super::*;

    #[test]
    fn parses_ring_bench_lines() {
        let v = parse_ring_bench(
            "ring_bench: default region 512 x 64 KiB in /tmp; load average 1 1 1\n\
             producer warm, 1 thread(s), push      : median     1.03 (min 0.98, max 1.20) ns/event\n\
             consumer after warm rounds (1 producer(s)): median  1270.50 (min 900.00, max 1300.00) M events/s\n\
             concurrent, 1 producer + 1 consumer thread: 2.10 ns/event in total\n",
        );
        let f = &v["figures"];
        assert_eq!(f["producer warm, 1 thread(s), push"]["median"], 1.03);
        assert_eq!(f["producer warm, 1 thread(s), push"]["unit"], "ns/event");
        assert_eq!(
            f["consumer after warm rounds (1 producer(s))"]["max"],
            1300.0
        );
        assert_eq!(f.as_object().unwrap().len(), 2);
        assert_eq!(v["output"].as_array().unwrap().len(), 4);
    }
}
