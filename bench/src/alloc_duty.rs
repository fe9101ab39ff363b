//! `alloc-duty`: what `--alloc`'s two paths cost a running session,
//! measured inside one session in turns. Sessions one after another in
//! the same JVM differ by more than either costs (the JIT compiles each
//! session's classes anew: Scheme B against Scheme B again read -17.7 to
//! +32.2% on H2), so here the probes stay put and only the path changes:
//! the target JVM runs with the agent's measurement knobs
//! `sampled-alloc-duty` (the heap sampler's event) and `exact-alloc-duty`
//! (`Probe.allocJava`: the exact allocation probes record nothing while
//! it is set, on either of their paths), which turn their path on in the
//! even turns of [`TURN`] on `CLOCK_MONOTONIC` and off in the odd ones,
//! and every iteration is timed with its start on the same clock
//! (`System.nanoTime()`). The exact path's off turns still run its
//! probes' calls, loads and branches (what that bytecode costs the JIT is
//! not in the figure): the turns compare the recording.
//!
//! Per workload one JVM, its warm-up, then `--repeats` rounds of four
//! sessions, each attached, left to settle for [`SETTLE`] and measured for
//! [`MEASURE`]: `B` (Scheme B without `--alloc`, the control: its even
//! and odd turns should not differ), `Bs` (the sampler alone at
//! `--alloc`'s default interval), `Bx` (the exact path alone) and `Bxs`
//! (`--alloc`: both, in the same turns); `--schemes` keeps some of them
//! (by scheme name) and `--rows` some workloads (`statement`, `server`).
//! An iteration counts for the turn it lies wholly in, when it starts at
//! least [`MARGIN`] after the turn began (the switch and the threads' next
//! allocation-buffer refill, where the sampler takes up again); the cost
//! is the median iteration time of the on-turns over that of the
//! off-turns, and, against drift, the median over consecutive (on, off)
//! pairs of their medians' ratio.

use crate::Ctx;
use crate::proc::{ALLOC_EXACT_SCHEME, ALLOC_SAMPLED_SCHEME, ALLOC_SCHEME, Sprig, SprigArgs};
use crate::stats::median;
use crate::workloads;
use anyhow::Result;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// (workload, row).
const ROWS: [(&str, &str); 2] = [("h2", "statement"), ("jetty", "server")];
/// The sessions of a round: (scheme, label).
const SCHEMES: [(&str, &str); 4] = [
    ("lazy", "B"),
    (ALLOC_SAMPLED_SCHEME, "Bs"),
    (ALLOC_EXACT_SCHEME, "Bx"),
    (ALLOC_SCHEME, "Bxs"),
];
/// The knobs the target JVM runs with (`SPRIG_AGENT_FAULT`).
const KNOBS: &str = "sampled-alloc-duty,exact-alloc-duty";
/// One turn of the sampler, on or off.
const TURN: Duration = Duration::from_secs(2);
/// The start of a turn whose iterations do not count.
const MARGIN: Duration = Duration::from_millis(100);
/// A session's time before it is measured (the JIT recompiles what the
/// attach redefined).
const SETTLE: Duration = Duration::from_secs(20);
/// A session's measured time: 20 turns.
const MEASURE: Duration = Duration::from_secs(40);

/// Iteration times sorted by turn: turn index -> milliseconds, and how
/// many iterations counted for no turn.
#[derive(Debug, Default, PartialEq)]
pub struct Turns {
    pub by_turn: BTreeMap<u64, Vec<f64>>,
    pub uncounted: usize,
}

/// Sorts `(start ns, ms)` iterations into turns of `turn_ns`: an
/// iteration counts for the turn it lies wholly in if it starts at least
/// `margin_ns` into it.
pub fn turns(iterations: &[(u64, f64)], turn_ns: u64, margin_ns: u64) -> Turns {
    let mut t = Turns::default();
    for &(start, ms) in iterations {
        let end = start + (ms * 1e6) as u64;
        let turn = start / turn_ns;
        if end / turn_ns == turn && start - turn * turn_ns >= margin_ns {
            t.by_turn.entry(turn).or_default().push(ms);
        } else {
            t.uncounted += 1;
        }
    }
    t
}

/// The sampler's cost in a session's turns: (pooled: on-turns' median
/// over off-turns' median, less 1; paired: the median over each even
/// turn and the odd turn after it of their medians' ratio, less 1; the
/// pairs), in percent; `None` without a pair.
pub fn cost(t: &Turns) -> Option<(f64, f64, usize)> {
    let pooled = |on: bool| -> Vec<f64> {
        t.by_turn
            .iter()
            .filter(|(k, _)| k.is_multiple_of(2) == on)
            .flat_map(|(_, v)| v.iter().copied())
            .collect()
    };
    let (on, off) = (pooled(true), pooled(false));
    let ratios: Vec<f64> = t
        .by_turn
        .iter()
        .filter(|(k, v)| k.is_multiple_of(2) && v.len() >= 3)
        .filter_map(|(k, v)| {
            let next = t.by_turn.get(&(k + 1)).filter(|n| n.len() >= 3)?;
            Some(median(v) / median(next))
        })
        .collect();
    if on.is_empty() || off.is_empty() || ratios.is_empty() {
        return None;
    }
    Some((
        (median(&on) / median(&off) - 1.0) * 100.0,
        (median(&ratios) - 1.0) * 100.0,
        ratios.len(),
    ))
}

/// One session of `scheme` on `jvm`: settle, measure, the figures.
fn session(
    ctx: &Ctx,
    jvm: &mut crate::proc::Jvm,
    r: &workloads::RootDef,
    (scheme, label): (&str, &str),
    (batch, bound): (usize, Duration),
    name: &str,
) -> Result<Value> {
    let args = SprigArgs {
        roots: r.roots.clone(),
        include: r.include.clone(),
        exclude: Vec::new(),
        scheme: scheme.to_owned(),
        timing: None,
        interval_ms: None,
    };
    let out = ctx.env.scratch.path.join(format!("{name}.json"));
    let mut s = Sprig::start(&ctx.env.sprig, jvm.pid(), &args, &out)?;
    s.wait_profiling(Duration::from_secs(120))?;
    let begin = Instant::now();
    while begin.elapsed() < SETTLE {
        workloads::iterate(jvm, batch, bound)?;
    }
    let begin = Instant::now();
    let mut iterations = Vec::new();
    while begin.elapsed() < MEASURE {
        iterations.extend(workloads::iterate_stamped(jvm, batch, bound)?);
    }
    let stopped = s.stop(Duration::from_secs(300))?;
    let samples = stopped.report["sampled_outside_roots"]["samples"]
        .as_u64()
        .unwrap_or(0);
    let t = turns(
        &iterations,
        TURN.as_nanos() as u64,
        MARGIN.as_nanos() as u64,
    );
    let counted = |on: bool| -> usize {
        t.by_turn
            .iter()
            .filter(|(k, _)| k.is_multiple_of(2) == on)
            .map(|(_, v)| v.len())
            .sum()
    };
    let c = cost(&t);
    Ok(json!({
        "row": label,
        "scheme": scheme,
        "pooled_pct": c.map(|c| c.0),
        "paired_pct": c.map(|c| c.1),
        "pairs": c.map_or(0, |c| c.2),
        "iterations_on": counted(true),
        "iterations_off": counted(false),
        "uncounted": t.uncounted,
        "samples_outside_roots": samples,
    }))
}

fn one(ctx: &Ctx, wl: &str, label: &str) -> Result<Value> {
    let def = workloads::define(ctx, wl)?;
    let r = def.root(label)?;
    let turn_ms = TURN.as_millis().to_string();
    let mut jvm = workloads::start_jvm_with_env(
        ctx,
        &def,
        &[],
        &[
            ("SPRIG_AGENT_FAULT", KNOBS),
            ("SPRIG_AGENT_ALLOC_DUTY_MS", &turn_ms),
        ],
        &format!("alloc-duty-{wl}"),
    )?;
    let bound = def.iteration_bound;
    eprintln!(
        "sprig-bench: alloc-duty: {wl}: warm-up ({} iterations)",
        def.warmup
    );
    let warm = workloads::iterate(&mut jvm, def.warmup, bound)?;
    let ms = median(&warm[warm.len() / 2..]).max(1.0);
    // Batches of about half a turn.
    let batch = ((TURN.as_secs_f64() * 500.0 / ms).round() as usize).max(1);
    let mut sessions = Vec::new();
    let repeats = ctx.repeats.max(1);
    let schemes = kept_schemes(&ctx.schemes);
    for rep in 0..repeats {
        // Each round starts one session further along.
        for si in (0..schemes.len()).map(|i| (i + rep) % schemes.len()) {
            let (scheme, row) = schemes[si];
            eprintln!(
                "sprig-bench: alloc-duty: {wl}: round {}/{repeats}, {row} ({scheme})",
                rep + 1
            );
            let name = format!("alloc-duty-{wl}-{label}-{row}-{}", rep + 1);
            let mut v = session(ctx, &mut jvm, r, schemes[si], (batch, bound), &name)?;
            v["round"] = json!(rep + 1);
            sessions.push(v);
        }
    }
    jvm.quit()?;
    let medians: Vec<Value> = schemes
        .iter()
        .map(|&(_, row)| {
            let of = |key: &str| -> Option<f64> {
                let v: Vec<f64> = sessions
                    .iter()
                    .filter(|s| s["row"] == row)
                    .filter_map(|s| s[key].as_f64())
                    .collect();
                (!v.is_empty()).then(|| median(&v))
            };
            json!({"row": row, "pooled_pct": of("pooled_pct"), "paired_pct": of("paired_pct")})
        })
        .collect();
    Ok(json!({
        "workload": wl,
        "row": label,
        "roots": r.roots,
        "iteration_ms": ms,
        "medians": medians,
        "sessions": sessions,
    }))
}

/// The sessions of a round `--schemes` keeps (all without it).
fn kept_schemes(keep: &[String]) -> Vec<(&'static str, &'static str)> {
    SCHEMES
        .iter()
        .copied()
        .filter(|(scheme, _)| keep.is_empty() || keep.iter().any(|k| k == scheme))
        .collect()
}

pub fn alloc_duty(ctx: &Ctx) -> Result<Value> {
    if kept_schemes(&ctx.schemes).is_empty() {
        anyhow::bail!(
            "alloc-duty: --schemes keeps none of its sessions ({})",
            SCHEMES.map(|s| s.0).join(", ")
        );
    }
    let mut rows = Vec::new();
    for (wl, label) in ROWS
        .into_iter()
        .filter(|(_, label)| ctx.rows.is_empty() || ctx.rows.iter().any(|r| r == label))
    {
        rows.push(one(ctx, wl, label)?);
    }
    Ok(json!({
        "rows": rows,
        "turn_ms": TURN.as_millis() as u64,
        "margin_ms": MARGIN.as_millis() as u64,
        "settle_s": SETTLE.as_secs(),
        "measure_s": MEASURE.as_secs(),
    }))
}

/// The terminal lines of `alloc-duty`.
pub fn print(v: &Value) {
    println!(
        "alloc-duty: --alloc's paths' cost inside one session, on in even turns of {} ms and off in odd ones (iterations from {} ms into a turn); each session settles {} s and is measured {} s; B has no --alloc (the control), Bs the heap sampler alone, Bx the exact path alone (its probes stay; their recording turns), Bxs both",
        v["turn_ms"], v["margin_ms"], v["settle_s"], v["measure_s"]
    );
    let pct = |x: &Value| x.as_f64().map_or("-".into(), |x| format!("{x:+.1}%"));
    for w in v["rows"].as_array().into_iter().flatten() {
        let medians: Vec<String> = w["medians"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                format!(
                    "{} paired {} (pooled {})",
                    m["row"].as_str().unwrap_or("?"),
                    pct(&m["paired_pct"]),
                    pct(&m["pooled_pct"])
                )
            })
            .collect();
        println!(
            "  {} {} (iteration {:.1} ms), on over off, median of rounds: {}",
            w["workload"].as_str().unwrap_or("?"),
            w["row"].as_str().unwrap_or("?"),
            w["iteration_ms"].as_f64().unwrap_or(0.0),
            medians.join("; ")
        );
        for s in w["sessions"].as_array().into_iter().flatten() {
            println!(
                "    round {} {}: paired {} over {} pairs, pooled {}, {} on / {} off iterations ({} straddling), {} samples outside roots",
                s["round"],
                s["row"].as_str().unwrap_or("?"),
                pct(&s["paired_pct"]),
                s["pairs"],
                pct(&s["pooled_pct"]),
                s["iterations_on"],
                s["iterations_off"],
                s["uncounted"],
                s["samples_outside_roots"],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterations_count_for_the_turn_they_lie_in_past_its_margin() {
        // Turns of 1,000 ns, margin 100 ns; iterations of 0.0002 ms = 200 ns.
        let it = |start: u64| (start, 0.0002);
        let t = turns(
            &[it(150), it(400), it(850), it(1050), it(1100), it(2300)],
            1000,
            100,
        );
        // 850 ends in turn 1; 1050 starts inside turn 1's margin.
        assert_eq!(t.uncounted, 2);
        assert_eq!(t.by_turn[&0], vec![0.0002, 0.0002]);
        assert_eq!(t.by_turn[&1], vec![0.0002]);
        assert_eq!(t.by_turn[&2], vec![0.0002]);
    }

    #[test]
    fn the_cost_sets_on_turns_against_the_off_turns_after_them() {
        let mut t = Turns::default();
        // On turns 10% slower than the off turn after each; the second
        // pair 20% slower overall (drift), which the paired figure ignores.
        t.by_turn.insert(0, vec![11.0, 11.0, 11.0]);
        t.by_turn.insert(1, vec![10.0, 10.0, 10.0]);
        t.by_turn.insert(2, vec![13.2, 13.2, 13.2]);
        t.by_turn.insert(3, vec![12.0, 12.0, 12.0]);
        // Turn 4 has no off turn after it: no pair.
        t.by_turn.insert(4, vec![11.0, 11.0, 11.0]);
        let (pooled, paired, pairs) = cost(&t).unwrap();
        assert_eq!(pairs, 2);
        assert!((paired - 10.0).abs() < 1e-9, "{paired}");
        // Pooled: on {11 x6, 13.2 x3} median 11, off {10 x3, 12 x3} median 11.
        assert!(pooled.abs() < 1e-9, "{pooled}");
        assert_eq!(cost(&Turns::default()), None);
    }
}
