//! `alloc-hist`: the sampled class histogram against the exact one, on the
//! H2 `statement` and javac `partial` roots. Per workload one JVM, its
//! warm-up, then `--repeats` `sprig profile --alloc` sessions one after
//! another (exact allocations and the JVM's heap sampler at the row's
//! interval, [`ROWS`]), each over [`SESSION`] of iterations; from each
//! JSON report, bytes by class inside the roots: exact (every node's
//! `allocations`) and sampled (every node's `sampled_allocations`, the
//! estimates); their overlap, the sum over classes of the smaller of the
//! two shares, and the samples behind the sampled one.
//!
//! The two count different populations: the sampled histogram also holds
//! what the JDK's code below the profiled subgraph allocated, which the
//! exact one cannot see, and the exact one allocations the JIT removed,
//! which draw no sample. Beside the overlap of all samples: the overlap
//! over the exact histogram's classes, and the like-for-like one, the
//! samples whose allocating frame was a probed method (`probed_bytes_est`:
//! an allocation site the exact count sees too) against the exact
//! histogram, which tests the sampler's estimate on the same allocations.
//! javac's interval is smaller than `--alloc`'s default (512 KiB): the
//! interval is the sampler's own knob for the number of samples, and this
//! row measures its estimate, not its cost.

use crate::Ctx;
use crate::proc::{ALLOC_AT_SCHEME, Sprig, SprigArgs};
use crate::stats::median;
use crate::truth::overlap;
use crate::workloads;
use anyhow::Result;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// (workload, row, the heap sampler's interval in bytes): H2's root
/// allocates about 70 MB a second, thousands of samples in 30 s at
/// `--alloc`'s default (512 KiB); javac's 9 MB a second on a quiet host
/// (about 500 samples in 30 s at the default) and about 1 MB under load
/// (about 600 at 32 KiB), too few for shares of a few percent: 16 KiB,
/// for thousands.
const ROWS: [(&str, &str, u32); 2] = [
    ("h2", "statement", 512 * 1024),
    ("javac", "partial", 16 * 1024),
];
/// How long the session profiles.
const SESSION: Duration = Duration::from_secs(30);

/// Bytes by class inside the roots: exact, sampled estimate, and the
/// sampled estimate of the samples at a probed allocating frame; the
/// samples behind the two.
#[derive(Debug, Default, PartialEq)]
pub struct Histograms {
    pub exact: BTreeMap<String, f64>,
    pub sampled: BTreeMap<String, f64>,
    pub probed: BTreeMap<String, f64>,
    pub samples: u64,
    pub probed_samples: u64,
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
            let probed = a["probed_samples"].as_u64().unwrap_or(0);
            if let (Some(c), Some(b), true) = (
                a["class"].as_str(),
                a["probed_bytes_est"].as_f64(),
                probed > 0,
            ) {
                *h.probed.entry(c.to_owned()).or_default() += b;
                h.probed_samples += probed;
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

/// The classes whose shares of `a` and `b` differ most, most first:
/// (class, share of `a`, share of `b`); what keeps their overlap from 1.
fn apart(
    a: &BTreeMap<String, f64>,
    b: &BTreeMap<String, f64>,
    n: usize,
) -> Vec<(String, f64, f64)> {
    let (ta, tb): (f64, f64) = (a.values().sum(), b.values().sum());
    let share = |m: &BTreeMap<String, f64>, total: f64, k: &str| {
        if total > 0.0 {
            m.get(k).copied().unwrap_or(0.0) / total
        } else {
            0.0
        }
    };
    let mut v: Vec<(String, f64, f64)> = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .map(|k| (k.clone(), share(a, ta, k), share(b, tb, k)))
        .collect();
    v.sort_by(|x, y| {
        (y.1 - y.2)
            .abs()
            .total_cmp(&(x.1 - x.2).abs())
            .then_with(|| x.0.cmp(&y.0))
    });
    v.truncate(n);
    v
}

/// The figures of one session's report (the three overlaps are NaN when
/// a histogram is empty).
fn figures(report: &Value, profiled_s: f64, iterations: usize) -> Value {
    let h = histograms(report);
    let all = overlap(&h.exact, &h.sampled);
    let same = overlap(&h.exact, &within(&h.sampled, &h.exact));
    let probed = overlap(&h.exact, &h.probed);
    let exact_bytes: f64 = h.exact.values().sum();
    let sampled_bytes: f64 = h.sampled.values().sum();
    let probed_bytes: f64 = h.probed.values().sum();
    json!({
        "profiled_s": profiled_s,
        "iterations": iterations,
        "samples": h.samples,
        "probed_samples": h.probed_samples,
        "exact_bytes": exact_bytes,
        "sampled_bytes_est": sampled_bytes,
        "probed_bytes_est": probed_bytes,
        "exact_classes": h.exact.len(),
        "sampled_classes": h.sampled.len(),
        "overlap": all,
        "overlap_exact_classes": same,
        "overlap_probed": probed,
        "top_exact": top(&h.exact, 5),
        "top_sampled": top(&h.sampled, 5),
        "top_probed": top(&h.probed, 5),
        "apart_probed": apart(&h.exact, &h.probed, 5),
    })
}

/// The median over `sessions` of their figure `key`.
fn median_of(sessions: &[Value], key: &str) -> f64 {
    let v: Vec<f64> = sessions.iter().filter_map(|s| s[key].as_f64()).collect();
    if v.is_empty() { f64::NAN } else { median(&v) }
}

fn one(ctx: &Ctx, wl: &str, label: &str, interval: u32) -> Result<Value> {
    let def = workloads::define(ctx, wl)?;
    let r = def.root(label)?;
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
    let args = SprigArgs {
        roots: r.roots.clone(),
        include: r.include.clone(),
        exclude: Vec::new(),
        scheme: format!("{ALLOC_AT_SCHEME}{interval}"),
        timing: None,
        interval_ms: None,
    };
    let mut sessions = Vec::new();
    for rep in 0..ctx.repeats.max(1) {
        eprintln!(
            "sprig-bench: alloc-hist: {wl}: session {}/{}",
            rep + 1,
            ctx.repeats.max(1)
        );
        let out = ctx
            .env
            .scratch
            .path
            .join(format!("alloc-hist-{wl}-{label}-{}.json", rep + 1));
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
        sessions.push(figures(&stopped.report, profiled_s, iterations));
    }
    jvm.quit()?;
    Ok(json!({
        "workload": wl,
        "row": label,
        "roots": r.roots,
        "interval_bytes": interval,
        "overlap_median": median_of(&sessions, "overlap"),
        "overlap_probed_median": median_of(&sessions, "overlap_probed"),
        "sessions": sessions,
    }))
}

pub fn alloc_hist(ctx: &Ctx) -> Result<Value> {
    let mut rows = Vec::new();
    for (wl, label, interval) in ROWS {
        rows.push(one(ctx, wl, label, interval)?);
    }
    Ok(json!({
        "rows": rows,
        "session_s": SESSION.as_secs(),
    }))
}

/// The terminal lines of `alloc-hist`.
pub fn print(v: &Value) {
    println!(
        "alloc-hist: bytes by class inside the roots, the sampled estimate against the exact count, `--alloc` sessions of {} s each (overlap = sum over classes of min(share exact, share sampled); at probed sites: the samples whose allocating frame was a probed method)",
        v["session_s"]
    );
    for w in v["rows"].as_array().into_iter().flatten() {
        let pct = |x: Option<f64>| x.map_or("-".into(), |x| format!("{:.1}%", x * 100.0));
        println!(
            "  {} {} (--alloc-interval {}): median overlap {} all samples, {} at probed sites",
            w["workload"].as_str().unwrap_or("?"),
            w["row"].as_str().unwrap_or("?"),
            w["interval_bytes"],
            pct(w["overlap_median"].as_f64()),
            pct(w["overlap_probed_median"].as_f64()),
        );
        for r in w["sessions"].as_array().into_iter().flatten() {
            print_session(r, &pct);
        }
    }
}

fn print_session(r: &Value, pct: &dyn Fn(Option<f64>) -> String) {
    println!(
        "    overlap {} (over the exact histogram's classes: {}; at probed sites: {} in {} samples), {} samples, ~{:.0} MB sampled ({:.0} MB at probed sites) against {:.0} MB exact, {} classes sampled, {} exact, {} iterations in {:.1} s",
        pct(r["overlap"].as_f64()),
        pct(r["overlap_exact_classes"].as_f64()),
        pct(r["overlap_probed"].as_f64()),
        r["probed_samples"],
        r["samples"],
        r["sampled_bytes_est"].as_f64().unwrap_or(0.0) / 1e6,
        r["probed_bytes_est"].as_f64().unwrap_or(0.0) / 1e6,
        r["exact_bytes"].as_f64().unwrap_or(0.0) / 1e6,
        r["sampled_classes"],
        r["exact_classes"],
        r["iterations"],
        r["profiled_s"].as_f64().unwrap_or(0.0),
    );
    for (what, key) in [
        ("exact", "top_exact"),
        ("sampled", "top_sampled"),
        ("at probed sites", "top_probed"),
    ] {
        let top: Vec<String> = r[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some(format!("{} {:.1}%", p[0].as_str()?, p[1].as_f64()? * 100.0)))
            .collect();
        println!("      top {what}: {}", top.join(", "));
    }
    let apart: Vec<String> = r["apart_probed"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some(format!(
                "{} {:.1}% / {:.1}%",
                p[0].as_str()?,
                p[1].as_f64()? * 100.0,
                p[2].as_f64()? * 100.0
            ))
        })
        .collect();
    println!(
        "      most apart (exact / at probed sites): {}",
        apart.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classes_most_apart_come_first_with_both_shares() {
        let m = |v: &[(&str, f64)]| -> BTreeMap<String, f64> {
            v.iter().map(|(k, x)| (k.to_string(), *x)).collect()
        };
        // a: x 0.5, y 0.3, z 0.2; b: x 0.4, y 0.0, w 0.6 (y and z absent).
        let a = m(&[("x", 5.0), ("y", 3.0), ("z", 2.0)]);
        let b = m(&[("x", 4.0), ("w", 6.0)]);
        let v = apart(&a, &b, 3);
        let names: Vec<&str> = v.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(names, ["w", "y", "z"]);
        assert!((v[0].1 - 0.0).abs() < 1e-12 && (v[0].2 - 0.6).abs() < 1e-12);
        assert!((v[1].1 - 0.3).abs() < 1e-12 && v[1].2 == 0.0);
        // Half the sum of the differences is what the overlap misses.
        let all = apart(&a, &b, 10);
        let missed: f64 = all.iter().map(|p| (p.1 - p.2).abs()).sum::<f64>() / 2.0;
        assert!((1.0 - overlap(&a, &b) - missed).abs() < 1e-9);
    }

    #[test]
    fn histograms_of_a_report_and_their_overlap() {
        let report = json!({"threads": [{"roots": [{
            "allocations": [{"class": "int[]", "count": 2, "bytes": 600}],
            "sampled_allocations": [{"class": "int[]", "samples": 1, "bytes_est": 500,
                "probed_samples": 1, "probed_bytes_est": 500}],
            "children": [{
                "allocations": [{"class": "a.B", "count": 1, "bytes": 400}],
                "sampled_allocations": [
                    {"class": "a.B", "samples": 2, "bytes_est": 300,
                        "probed_samples": 1, "probed_bytes_est": 150},
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
        // At probed sites: int[] 500, a.B 150 of the byte[]-free 650.
        assert_eq!(h.probed_samples, 2);
        assert_eq!(h.probed.len(), 2);
        let p = overlap(&h.exact, &h.probed);
        let want = 0.6f64.min(500.0 / 650.0) + 0.4f64.min(150.0 / 650.0);
        assert!((p - want).abs() < 1e-9, "{p}");
    }
}
