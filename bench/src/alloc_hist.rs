//! `alloc-hist`: the sampled class histogram against the exact one, on the
//! H2 `statement` and javac `partial` roots. One `sprig profile --alloc`
//! session per workload (exact allocations and the JVM's heap sampler at
//! `--alloc`'s default interval) over [`SESSION`] of iterations, after the
//! workload's warm-up; from its JSON report, bytes by class inside the
//! roots: exact (every node's `allocations`) and sampled (every node's
//! `sampled_allocations`, the estimates); their overlap, the sum over
//! classes of the smaller of the two shares, and the samples behind the
//! sampled one. The sampled histogram also holds what the JDK's code
//! below the profiled subgraph allocated, which the exact one cannot see;
//! the overlap restricted to the classes the exact histogram has is given
//! beside it.

use crate::Ctx;
use crate::proc::{ALLOC_SCHEME, Sprig, SprigArgs};
use crate::stats::median;
use crate::truth::overlap;
use crate::workloads;
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// (workload, row).
const ROWS: [(&str, &str); 2] = [("h2", "statement"), ("javac", "partial")];
/// How long the session profiles.
const SESSION: Duration = Duration::from_secs(30);

/// Bytes by class inside the roots: (exact, sampled estimate, samples).
#[derive(Debug, Default, PartialEq)]
pub struct Histograms {
    pub exact: BTreeMap<String, f64>,
    pub sampled: BTreeMap<String, f64>,
    pub samples: u64,
}

/// The histograms of a `sprig profile --format json` report.
pub fn histograms(report: &Value) -> Histograms {
    fn walk(n: &Value, h: &mut Histograms) {
        for a in n["allocations"].as_array().into_iter().flatten() {
            if let (Some(c), Some(b)) = (a["class"].as_str(), a["bytes"].as_f64()) {
                *h.exact.entry(c.to_owned()).or_default() += b;
            }
        }
        for a in n["sampled_allocations"].as_array().into_iter().flatten() {
            if let (Some(c), Some(b)) = (a["class"].as_str(), a["bytes_est"].as_f64()) {
                *h.sampled.entry(c.to_owned()).or_default() += b;
                h.samples += a["samples"].as_u64().unwrap_or(0);
            }
        }
        for c in n["children"].as_array().into_iter().flatten() {
            walk(c, h);
        }
    }
    let mut h = Histograms::default();
    for t in report["threads"].as_array().into_iter().flatten() {
        for r in t["roots"].as_array().into_iter().flatten() {
            walk(r, &mut h);
        }
    }
    h
}

/// `m` keeping only the classes `keep` has.
fn within(m: &BTreeMap<String, f64>, keep: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    m.iter()
        .filter(|(k, _)| keep.contains_key(*k))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The classes with the largest shares of `m`, most first.
fn top(m: &BTreeMap<String, f64>, n: usize) -> Vec<(String, f64)> {
    let total: f64 = m.values().sum();
    let mut v: Vec<(String, f64)> = m
        .iter()
        .map(|(k, x)| (k.clone(), if total > 0.0 { x / total } else { 0.0 }))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

fn one(ctx: &Ctx, wl: &str, label: &str) -> Result<Value> {
    let def = workloads::define(ctx, wl)?;
    let r = def
        .roots
        .iter()
        .find(|r| r.label == label)
        .context("no such row")?;
    let mut jvm = workloads::start_jvm(ctx, &def, &[], &format!("alloc-hist-{wl}"))?;
    let bound = def.iteration_bound;
    eprintln!(
        "sprig-bench: alloc-hist: {wl}: warm-up ({} iterations)",
        def.warmup
    );
    let warm = workloads::iterate(&mut jvm, def.warmup, bound)?;
    let ms = median(&warm[warm.len() / 2..]).max(1.0);
    // Batches of about a second until the session's time is up.
    let batch = ((1000.0 / ms).round() as usize).max(1);
    let out = ctx
        .env
        .scratch
        .path
        .join(format!("alloc-hist-{wl}-{label}.json"));
    let args = SprigArgs {
        roots: r.roots.clone(),
        include: r.include.clone(),
        exclude: Vec::new(),
        scheme: ALLOC_SCHEME.into(),
        timing: None,
        interval_ms: None,
    };
    let mut s = Sprig::start(&ctx.env.sprig, jvm.pid(), &args, &out)?;
    s.wait_profiling(Duration::from_secs(120))?;
    let begin = Instant::now();
    let mut iterations = 0;
    while begin.elapsed() < SESSION {
        workloads::iterate(&mut jvm, batch, bound)?;
        iterations += batch;
    }
    let profiled_s = begin.elapsed().as_secs_f64();
    let stopped = s.stop(Duration::from_secs(300))?;
    jvm.quit()?;
    let h = histograms(&stopped.report);
    let all = overlap(&h.exact, &h.sampled);
    let same = overlap(&h.exact, &within(&h.sampled, &h.exact));
    let exact_bytes: f64 = h.exact.values().sum();
    let sampled_bytes: f64 = h.sampled.values().sum();
    Ok(json!({
        "workload": wl,
        "row": label,
        "roots": r.roots,
        "profiled_s": profiled_s,
        "iterations": iterations,
        "samples": h.samples,
        "exact_bytes": exact_bytes,
        "sampled_bytes_est": sampled_bytes,
        "exact_classes": h.exact.len(),
        "sampled_classes": h.sampled.len(),
        "overlap": all,
        "overlap_exact_classes": same,
        "top_exact": top(&h.exact, 5),
        "top_sampled": top(&h.sampled, 5),
    }))
}

pub fn alloc_hist(ctx: &Ctx) -> Result<Value> {
    let mut rows = Vec::new();
    for (wl, label) in ROWS {
        rows.push(one(ctx, wl, label)?);
    }
    Ok(json!({
        "rows": rows,
        "session_s": SESSION.as_secs(),
        "interval": "--alloc's default (512 KiB)",
    }))
}

/// The terminal lines of `alloc-hist`.
pub fn print(v: &Value) {
    println!(
        "alloc-hist: bytes by class inside the roots, the sampled estimate against the exact count, one `--alloc` session of {} s each (overlap = sum over classes of min(share exact, share sampled))",
        v["session_s"]
    );
    for r in v["rows"].as_array().into_iter().flatten() {
        let pct = |k: &str| {
            r[k].as_f64()
                .map_or("-".into(), |x| format!("{:.1}%", x * 100.0))
        };
        println!(
            "  {} {}: overlap {} (over the exact histogram's classes: {}), {} samples, ~{:.0} MB sampled against {:.0} MB exact, {} classes sampled, {} exact, {} iterations in {:.1} s",
            r["workload"].as_str().unwrap_or("?"),
            r["row"].as_str().unwrap_or("?"),
            pct("overlap"),
            pct("overlap_exact_classes"),
            r["samples"],
            r["sampled_bytes_est"].as_f64().unwrap_or(0.0) / 1e6,
            r["exact_bytes"].as_f64().unwrap_or(0.0) / 1e6,
            r["sampled_classes"],
            r["exact_classes"],
            r["iterations"],
            r["profiled_s"].as_f64().unwrap_or(0.0),
        );
        for (what, key) in [("exact", "top_exact"), ("sampled", "top_sampled")] {
            let top: Vec<String> = r[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some(format!("{} {:.1}%", p[0].as_str()?, p[1].as_f64()? * 100.0)))
                .collect();
            println!("    top {what}: {}", top.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_of_a_report_and_their_overlap() {
        let report = json!({"threads": [{"roots": [{
            "allocations": [{"class": "int[]", "count": 2, "bytes": 600}],
            "sampled_allocations": [{"class": "int[]", "samples": 1, "bytes_est": 500}],
            "children": [{
                "allocations": [{"class": "a.B", "count": 1, "bytes": 400}],
                "sampled_allocations": [
                    {"class": "a.B", "samples": 2, "bytes_est": 300},
                    {"class": "byte[]", "samples": 1, "bytes_est": 200}
                ],
                "children": []
            }]
        }]}]});
        let h = histograms(&report);
        assert_eq!(h.samples, 4);
        assert_eq!(h.exact["int[]"], 600.0);
        assert_eq!(h.sampled["byte[]"], 200.0);
        // exact 0.6/0.4, sampled 0.5/0.3/0.2: min 0.5 + 0.3.
        assert!((overlap(&h.exact, &h.sampled) - 0.8).abs() < 1e-9);
        // Over the exact classes: sampled 0.625/0.375.
        let same = overlap(&h.exact, &within(&h.sampled, &h.exact));
        assert!((same - 0.975).abs() < 1e-9, "{same}");
        assert_eq!(top(&h.sampled, 1), vec![("int[]".to_owned(), 0.5)]);
    }
}
