//! The workloads' table in JFluid's columns, printed from their JSON rows.

use crate::proc::{
    AGAIN_SCHEME, ALLOC_EXACT_SCHEME, ALLOC_SAMPLED_SCHEME, ALLOC_SCHEME, KEEP_TRIVIAL_SCHEME,
    LOCKS_SCHEME, TRIVIAL_SCHEME,
};
use crate::stats::{Summary, fmt};
use serde_json::Value;

/// Member `k` of a row, a summary as `json_of` wrote it.
fn sum(v: &Value, k: &str) -> Option<Summary> {
    Summary::from_json(v.get(k)?)
}

/// The table in JFluid's columns (medians over repeats, [min-max]).
pub fn print_table(results: &[Value]) {
    println!(
        "{:<7} {:<9} {:<5} {:<7} {:>12} {:>24} {:>24} {:>22} {:>6} {:>9} {:>9} {:>7} {:>10} {:>10} {:>11} {:>6} {:>9} {:>24}",
        "program",
        "root",
        "sch",
        "timing",
        "calls/iter",
        "bare ms",
        "total ms",
        "overhead %",
        "tput",
        "steady %",
        "settled %",
        "floor %",
        "root ms",
        "charged",
        "charged/bare",
        "share",
        "instr/call",
        "after detach ms"
    );
    for w in results {
        for r in w
            .get("rows")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let m = |k: &str| sum(r, k).map_or(f64::NAN, |s| s.median);
            let st = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
            println!(
                "{:<7} {:<9} {:<5} {:<7} {:>12.0} {:>24} {:>24} {:>22} {:>6.3} {:>9.1} {:>9} {:>7} {:>10.2} {:>10.2} {:>11} {:>6.3} {:>9} {:>24}",
                st("workload"),
                st("root"),
                match st("scheme").as_str() {
                    "lazy" => "B".to_owned(),
                    "lazy-redefine" => "Br".to_owned(),
                    "lazy-receiver" => "Bv".to_owned(),
                    KEEP_TRIVIAL_SCHEME => "Ba".to_owned(),
                    LOCKS_SCHEME => "Bl".to_owned(),
                    ALLOC_EXACT_SCHEME => "Bx".to_owned(),
                    ALLOC_SAMPLED_SCHEME => "Bs".to_owned(),
                    ALLOC_SCHEME => "Bxs".to_owned(),
                    AGAIN_SCHEME => "B'".to_owned(),
                    s => match s.strip_prefix(TRIVIAL_SCHEME) {
                        Some(bound) => format!("Bt{bound}"),
                        None => "A".to_owned(),
                    },
                },
                r.get("timing").and_then(Value::as_str).unwrap_or("-"),
                m("calls_per_iter"),
                fmt(sum(r, "bare_ms"), 2),
                fmt(sum(r, "total_ms"), 2),
                fmt(sum(r, "overhead_pct"), 1),
                m("throughput_over_bare"),
                m("steady_overhead_pct"),
                sum(r, "settled_overhead_pct")
                    .map_or("-".to_owned(), |s| format!("{:.1}", s.median)),
                sum(r, "probe_floor_pct").map_or("-".to_owned(), |s| format!("{:.1}", s.median)),
                m("root_ms"),
                m("charged_ms"),
                sum(r, "charged_over_bare").map_or("-".to_owned(), |s| format!("{:.3}", s.median)),
                m("root_share"),
                format!(
                    "{:.0}/{:.0}",
                    m("instrumented_methods"),
                    m("called_methods")
                ),
                fmt(sum(r, "after_detach_ms"), 2),
            );
            if let (Some(b), Some(p)) = (sum(r, "jit_cpu_ms_bare"), sum(r, "jit_cpu_ms_profiled")) {
                println!(
                    "        JIT compiler threads' CPU, ms a window: bare {}, profiled {}",
                    fmt(Some(b), 0),
                    fmt(Some(p), 0)
                );
            }
            if let (Some(t), Some(secs), Some(n)) = (
                sum(r, "session_throughput_over_bare"),
                sum(r, "session_s"),
                sum(r, "session_iterations"),
            ) {
                println!(
                    "        whole session ({:.0} profiled iterations, {:.1} s): throughput over bare {}",
                    n.median,
                    secs.median,
                    fmt(Some(t), 3)
                );
            }
            if let Some(x) = r.get("extra_stats").and_then(Value::as_object)
                && !x.is_empty()
            {
                println!("        stats: {}", Value::Object(x.clone()));
            }
            for (i, w) in r
                .get("windows")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, w)| !w.is_null())
            {
                let n = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
                println!(
                    "        windows, repeat {}: {} root calls counted, {} silent (totals scaled x{:.2}); {} stack samples credited, {} outside a root",
                    i + 1,
                    n("counted_root_calls"),
                    n("silent_root_calls"),
                    w.get("scale").and_then(Value::as_f64).unwrap_or(f64::NAN),
                    n("samples"),
                    n("samples_outside"),
                );
            }
            for (i, c) in r
                .get("tree_vs_exact")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let pair = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_array)
                        .map(|v| {
                            v.iter()
                                .map(|x| x.as_u64().unwrap_or(0).to_string())
                                .collect::<Vec<_>>()
                                .join(" / ")
                        })
                        .unwrap_or_default()
                };
                let per_root = c.get("per_root_call") == Some(&Value::Bool(true));
                println!(
                    "        check, repeat {}: paths and calls{} against exact timing {}: paths {}, calls {}{}{}",
                    i + 1,
                    if per_root { " per root call" } else { "" },
                    if c.get("identical") == Some(&Value::Bool(true)) {
                        "IDENTICAL"
                    } else {
                        "DIFFER"
                    },
                    pair("paths"),
                    pair("calls"),
                    if per_root {
                        format!(
                            " over {} root calls; distance {:.4}, {} paths exact never saw",
                            pair("root_calls"),
                            c.get("distance")
                                .and_then(Value::as_f64)
                                .unwrap_or(f64::NAN),
                            c.get("paths_only_in_second")
                                .and_then(Value::as_u64)
                                .unwrap_or(0)
                        )
                    } else {
                        String::new()
                    },
                    match c.get("paths_differing").and_then(Value::as_u64) {
                        Some(n) if n > 0 => format!(
                            "; {n} paths differ, e.g. {}",
                            c.get("first_differences").cloned().unwrap_or(Value::Null)
                        ),
                        _ => String::new(),
                    }
                );
            }
            if let Some(o) = sum(r, "over_lazy_pct").filter(|o| o.n > 0) {
                let each: Vec<String> = r
                    .get("over_lazy_pct_by_repeat")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .map(|v| format!("{v:+.1}"))
                    .collect();
                println!(
                    "        {} over B, same repeat (median iteration times{}): {} % (per repeat: {})",
                    match r.get("scheme").and_then(Value::as_str) {
                        Some(ALLOC_EXACT_SCHEME) => "--alloc (exact only)",
                        Some(ALLOC_SAMPLED_SCHEME) => "--alloc-interval 524288 (sampled alone)",
                        Some(ALLOC_SCHEME) => "--alloc (exact and sampled)",
                        Some(AGAIN_SCHEME) => "B again (the control: no source added)",
                        _ => "--locks",
                    },
                    if sum(r, "settled_overhead_pct").is_some() {
                        ", settled windows"
                    } else {
                        ""
                    },
                    fmt(Some(o), 1),
                    each.join(", ")
                );
            }
            if let Some(c) = sum(r, "cli_cpu_pct_of_window") {
                println!(
                    "        sprig process CPU while profiling: {:.0}% of one core (median over repeats)",
                    c.median
                );
            }
        }
        if let Some(p) = w.get("priming").filter(|p| !p.is_null()) {
            println!(
                "{:<7} priming session (root {}, before the rows): first iteration {:.2} ms against {:.2} ms at the end of the warm-up; warm-up again {} ms",
                w.get("workload").and_then(Value::as_str).unwrap_or("?"),
                p.get("root").and_then(Value::as_str).unwrap_or("?"),
                p.get("first_iteration_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                p.get("last_warmup_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                fmt(sum(p, "rewarm_ms"), 2),
            );
        }
        for s in w
            .get("skipped")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            println!("        note: {}", s.as_str().unwrap_or(""));
        }
    }
}
