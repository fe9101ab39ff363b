//! One workload's run: the warm-up, the priming session, then per repeat
//! the bare window and every row under every scheme and timing mode,
//! turned into the workload's JSON rows.

use super::plateau::to_plateau;
use super::sample::{Sample, mean};
use super::{OPT_IN_ROWS, RootDef, WorkloadDef, iterate, start_jvm};
use crate::Ctx;
use crate::proc::{
    AGAIN_SCHEME, ALLOC_EXACT_SCHEME, ALLOC_SAMPLED_SCHEME, ALLOC_SCHEME, Jvm, LOCKS_SCHEME, Sprig,
    SprigArgs, TRIVIAL_SCHEME, beside_lazy, jit_cpu,
};
use crate::profile::{ProfileSummary, compare_paths, compare_paths_per_root};
use crate::stats::{json_of, median};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::time::Duration;

/// The priming session (see `--no-priming`): Scheme B on the workload's
/// first root for one iteration, detached, then the warm-up again. After a
/// dynamic attach, HotSpot records which compiled code depends on which
/// class only from the moment it grants the redefinition capability, so the
/// first redefinition throws away all compiled code of the JVM; later ones
/// only what depends on the classes redefined. Taken here, it falls on no
/// row: every timed session is one after the first, whichever scheme or
/// root it is.
fn prime(
    ctx: &Ctx,
    jvm: &mut Jvm,
    def: &WorkloadDef,
    r: &RootDef,
    out: &std::path::Path,
    before_ms: f64,
) -> Result<Value> {
    eprintln!(
        "sprig-bench: {}: priming session (root {}, one iteration), then warm-up again ({} iterations)",
        def.name, r.label, def.warmup
    );
    let sargs = SprigArgs {
        roots: r.roots.clone(),
        include: r.include.clone(),
        exclude: vec![],
        scheme: "lazy".into(),
        timing: None,
        interval_ms: None,
    };
    let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &sargs, out)?;
    sprig.wait_profiling(Duration::from_secs(120))?;
    let first = iterate(jvm, 1, def.iteration_bound)?;
    let stopped = sprig.stop(Duration::from_secs(120))?;
    let p = ProfileSummary::from_json(&stopped.report)?;
    if p.root_calls == 0 {
        bail!(
            "{} priming session on root {}: no root call recorded; sprig's stderr: {:?}",
            def.name,
            r.label,
            stopped.stderr
        );
    }
    let rewarm = iterate(jvm, def.warmup, def.iteration_bound)?;
    let to_plateau_iterations = to_plateau(ctx, jvm, def.iterations, def.iteration_bound)?;
    Ok(json!({
        "root": r.label,
        "first_iteration_ms": first[0],
        "last_warmup_ms": before_ms,
        "rewarm_ms": json_of(&rewarm),
        "rewarm_to_plateau_iterations": to_plateau_iterations,
    }))
}

/// Runs one workload; returns its JSON rows.
pub fn run(ctx: &Ctx, def: &WorkloadDef) -> Result<Value> {
    let mut jvm = start_jvm(ctx, def, &[], def.name)?;
    eprintln!(
        "sprig-bench: {}: warm-up ({} iterations)",
        def.name, def.warmup
    );
    let warm = iterate(&mut jvm, def.warmup, def.iteration_bound)?;
    let warm_to_plateau = to_plateau(ctx, &mut jvm, def.iterations, def.iteration_bound)?;
    if ctx.plateau {
        eprintln!(
            "sprig-bench: {}: {warm_to_plateau} more iterations until the iteration time stopped falling",
            def.name
        );
    }
    let mut schemes: Vec<String> = vec!["lazy".into()];
    if ctx.compare_locks {
        schemes.push(LOCKS_SCHEME.into());
    }
    if ctx.compare_alloc {
        schemes.push(AGAIN_SCHEME.into());
        schemes.push(ALLOC_EXACT_SCHEME.into());
        schemes.push(ALLOC_SAMPLED_SCHEME.into());
        schemes.push(ALLOC_SCHEME.into());
    }
    schemes.extend(
        ctx.compare_trivial
            .iter()
            .map(|b| format!("{TRIVIAL_SCHEME}{b}")),
    );
    if ctx.compare_dormant {
        schemes.push("lazy-redefine".into());
    }
    if ctx.compare_receivers {
        schemes.push("lazy-receiver".into());
    }
    schemes.push("eager".into());
    if !ctx.schemes.is_empty() {
        schemes.retain(|s| ctx.schemes.iter().any(|w| w == s));
        if schemes.is_empty() {
            bail!(
                "--schemes {}: none of this run's schemes (lazy, eager and those the --compare options add)",
                ctx.schemes.join(",")
            );
        }
    }
    // Every scheme under every timing mode asked for, side by side in the
    // same JVM and repeat.
    let timings: Vec<Option<String>> = if ctx.timing_modes.is_empty() {
        vec![None]
    } else {
        ctx.timing_modes.iter().cloned().map(Some).collect()
    };
    let variants: Vec<(String, Option<String>)> = schemes
        .iter()
        .flat_map(|s| timings.iter().map(move |t| (s.clone(), t.clone())))
        .collect();
    let k = def.iterations;
    // samples[root][variant] over repeats
    let mut samples: Vec<Vec<Vec<Sample>>> = def
        .roots
        .iter()
        .map(|_| variants.iter().map(|_| Vec::new()).collect())
        .collect();
    let mut skipped: Vec<String> = Vec::new();
    let mut roots_only_seen = false;
    let out = ctx
        .env
        .scratch
        .path
        .join(format!("{}-priming.json", def.name));
    // Opt-in rows (`idle`) run only when named.
    let wanted = |label: &str| {
        (ctx.rows.is_empty() && !OPT_IN_ROWS.contains(&label))
            || ctx.rows.iter().any(|r| r == label)
    };
    if !def.roots.iter().any(|r| wanted(r.label)) {
        bail!(
            "{}: no row among --rows {}; its rows are {}",
            def.name,
            ctx.rows.join(","),
            def.roots
                .iter()
                .map(|r| r.label)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let priming = if ctx.priming {
        // A root that is called: the wanted one, else the workload's first.
        let first = def
            .roots
            .iter()
            .find(|r| wanted(r.label) && !r.never_called)
            .or_else(|| def.roots.iter().find(|r| !r.never_called));
        let before = warm.last().copied().unwrap_or(f64::NAN);
        Some(prime(
            ctx,
            &mut jvm,
            def,
            first.context("no wanted root")?,
            &out,
            before,
        )?)
    } else {
        None
    };
    for rep in 0..ctx.repeats {
        let jit0 = jit_cpu(jvm.pid());
        let bare = iterate(&mut jvm, k, def.iteration_bound)?;
        let jit_bare = jit_ms(jit0, jit_cpu(jvm.pid()));
        for (ri, r) in def.roots.iter().enumerate() {
            if !wanted(r.label) {
                continue;
            }
            // Each repeat starts one scheme further along, so that no scheme
            // always runs first after the bare window (in a JVM the previous
            // sessions have not yet warmed) or always last. The first repeat
            // starts with Scheme B, whose report says whether the others
            // can differ from it at all.
            for si in (0..variants.len()).map(|i| (i + rep) % variants.len()) {
                let (scheme, timing) = &variants[si];
                // Scheme A differs from B only once callees are revealed
                // (`--locks` and `--alloc` differ whatever is instrumented).
                if *scheme != "lazy" && !beside_lazy(scheme) && roots_only_seen {
                    let note = format!(
                        "{} {}: {scheme} skipped (only roots are instrumented yet)",
                        def.name, r.label
                    );
                    if !skipped.contains(&note) {
                        skipped.push(note);
                    }
                    continue;
                }
                eprintln!(
                    "sprig-bench: {}: repeat {}/{}, root {} ({}), scheme {scheme}{}",
                    def.name,
                    rep + 1,
                    ctx.repeats,
                    r.label,
                    r.roots.join(" "),
                    timing
                        .as_ref()
                        .map_or(String::new(), |t| format!(", timing {t}"))
                );
                let sargs = SprigArgs {
                    roots: r.roots.clone(),
                    include: r.include.clone(),
                    exclude: vec![],
                    scheme: scheme.clone(),
                    timing: timing.clone(),
                    interval_ms: None,
                };
                // With --settle, a bare window just as far from the last
                // disturbance: this workload keeps getting faster for a
                // while, so the bare window at the repeat's start is no
                // reference for a window timed after many more iterations.
                let mut settle_runs = (0, 0);
                let settled_bare = if ctx.settle > 0 {
                    iterate(&mut jvm, ctx.settle, def.iteration_bound)?;
                    settle_runs.0 = to_plateau(ctx, &mut jvm, k, def.iteration_bound)?;
                    Some(iterate(&mut jvm, k, def.iteration_bound)?)
                } else {
                    None
                };
                // One report per row and repeat, kept with --keep-logs.
                let out = ctx.env.scratch.path.join(format!(
                    "{}-{}-{scheme}{}-{}.json",
                    def.name,
                    r.label,
                    timing.as_ref().map_or(String::new(), |t| format!("-{t}")),
                    rep + 1
                ));
                let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &sargs, &out)?;
                let attach = sprig.wait_profiling(Duration::from_secs(120))?;
                let jit0 = jit_cpu(jvm.pid());
                let prof = iterate(&mut jvm, k, def.iteration_bound)?;
                let jit_prof = jit_ms(jit0, jit_cpu(jvm.pid()));
                // With --settle, the report covers the settled window: the
                // calls, root and charged times of a session the JIT has
                // recompiled (charged/bare in steady state). Not under
                // windows timing: a settled window of a few iterations may
                // hold no counting window (the report then has no tree), so
                // that report covers the whole session; the settled
                // window's iteration times are taken all the same.
                let windows = timing.as_deref().is_some_and(crate::proc::is_windows);
                // Root calls made before the window the report covers.
                let mut before_report = 0;
                // Every profiled iteration's time, attach to detach (with
                // --settle and without --plateau, whose iterations are not
                // kept): the whole session's throughput.
                let mut session: Option<Vec<f64>> = (!ctx.plateau).then(|| prof.clone());
                let settled_prof = if ctx.settle > 0 {
                    let settling = iterate(&mut jvm, ctx.settle, def.iteration_bound)?;
                    if let Some(v) = &mut session {
                        v.extend_from_slice(&settling);
                    }
                    settle_runs.1 = to_plateau(ctx, &mut jvm, k, def.iteration_bound)?;
                    if ctx.plateau {
                        eprintln!(
                            "sprig-bench: {}: settled after {} + {} bare and {} + {} profiled iterations",
                            def.name, ctx.settle, settle_runs.0, ctx.settle, settle_runs.1
                        );
                    }
                    if windows {
                        before_report = k + ctx.settle + settle_runs.1;
                    } else {
                        sprig.reset(Duration::from_secs(30))?;
                    }
                    let settled = iterate(&mut jvm, k, def.iteration_bound)?;
                    if let Some(v) = &mut session {
                        v.extend_from_slice(&settled);
                    }
                    Some(settled)
                } else {
                    session = None;
                    None
                };
                let stopped = sprig.stop(Duration::from_secs(120))?;
                let p = ProfileSummary::from_json(&stopped.report)?;
                if p.lost > 0 {
                    bail!(
                        "{} root {} scheme {scheme}: sprig reported {} lost events",
                        def.name,
                        r.label,
                        p.lost
                    );
                }
                if r.never_called {
                    if p.root_calls != 0 {
                        bail!(
                            "{} root {}: {} calls recorded of a root that is never called",
                            def.name,
                            r.label,
                            p.root_calls
                        );
                    }
                } else if p.root_calls == 0 {
                    bail!(
                        "{} root {} scheme {scheme}: no root call recorded; sprig's stderr: {:?}",
                        def.name,
                        r.label,
                        stopped.stderr
                    );
                }
                // Whole roots: one root call per iteration of the window
                // the report covers (under windows timing counted and
                // silent ones together).
                let made = (k + before_report) as u64;
                if r.whole && p.all_root_calls() != made {
                    bail!(
                        "{} root {}: {} root calls recorded, {made} made",
                        def.name,
                        r.label,
                        p.all_root_calls()
                    );
                }
                if timing.as_deref().is_some_and(crate::proc::is_windows) && p.windows.is_none() {
                    bail!(
                        "{} root {}: asked for --timing windows, the report has no windows facts",
                        def.name,
                        r.label
                    );
                }
                roots_only_seen |= p.roots_only();
                let after = iterate(&mut jvm, k, def.iteration_bound)?;
                let counted_root_calls = p.root_calls;
                samples[ri][si].push(Sample {
                    bare_mean: mean(&bare),
                    bare_median: median(&bare),
                    total_mean: mean(&prof),
                    total_median: median(&prof),
                    after_mean: mean(&after),
                    settled: settled_bare.zip(settled_prof),
                    plateau_runs: settle_runs,
                    p,
                    attach_ms: attach.as_secs_f64() * 1e3,
                    detach_ms: stopped.stop_time.as_secs_f64() * 1e3,
                    cli_cpu_ms: stopped.cli_cpu.map(|d| d.as_secs_f64() * 1e3),
                    k,
                    before_report,
                    session,
                    whole: r.whole,
                    paths: (ctx.timing_modes.len() > 1)
                        .then(|| ProfileSummary::paths_and_calls(&stopped.report)),
                    repeat: rep,
                    counted_root_calls,
                    jit_ms: jit_bare.zip(jit_prof),
                });
            }
        }
    }
    jvm.quit()?;
    let mut rows = Vec::new();
    for (ri, r) in def.roots.iter().enumerate() {
        for (si, (scheme, timing)) in variants.iter().enumerate() {
            let s = &samples[ri][si];
            if s.is_empty() {
                continue;
            }
            // Under sampled timing: the tree against the exact session of
            // the same root, scheme and repeat (same JVM, same number of
            // iterations), path by path. Under windows timing, per root
            // call: its trees hold the root calls of its counting windows.
            let exact_twin = variants
                .iter()
                .position(|(sc, t)| sc == scheme && t.as_deref() == Some("exact"));
            let vs_exact: Vec<Value> = match (timing.as_deref(), exact_twin) {
                (
                    Some(mode @ ("sampled" | "windows" | crate::proc::WINDOWS_ORIGINAL)),
                    Some(ei),
                ) => s
                    .iter()
                    .filter_map(|x| {
                        let e = samples[ri][ei].iter().find(|e| e.repeat == x.repeat)?;
                        let (ep, xp) = (e.paths.as_ref()?, x.paths.as_ref()?);
                        Some(if crate::proc::is_windows(mode) {
                            compare_paths_per_root(
                                ep,
                                e.counted_root_calls,
                                xp,
                                x.counted_root_calls,
                            )
                        } else {
                            compare_paths(ep, xp)
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            };
            // `--locks` (row Bl), `--alloc` (Bx, Bs, Bxs) or B again (B')
            // over Scheme B
            // without it, same root,
            // timing and repeat: their windows' median iteration times
            // (with `--settle`, of the settled windows).
            let over_lazy: Vec<f64> = match variants
                .iter()
                .position(|(sc, t)| sc == "lazy" && t == timing)
            {
                Some(li) if beside_lazy(scheme) => s
                    .iter()
                    .filter_map(|x| {
                        let b = samples[ri][li].iter().find(|b| b.repeat == x.repeat)?;
                        Some((x.steady_median() / b.steady_median() - 1.0) * 100.0)
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let col = |f: &dyn Fn(&Sample) -> f64| -> Vec<f64> { s.iter().map(f).collect() };
            let cb: Vec<f64> = s.iter().filter_map(Sample::charged_bare).collect();
            let settled: Vec<f64> = s.iter().filter_map(Sample::settled).collect();
            let last = &s[s.len() - 1].p;
            let mut row = json!({
                "workload": def.name, "root": r.label, "patterns": r.roots, "include": r.include,
                "scheme": scheme, "timing": timing, "repeats": s.len(), "iterations_per_window": k,
                "tree_vs_exact": vs_exact,
                "over_lazy_pct": json_of(&over_lazy),
                "over_lazy_pct_by_repeat": over_lazy,
                "calls_per_iter": json_of(&col(&|x| x.calls_per_iter())),
                "bare_ms": json_of(&col(&|x| x.bare_mean)),
                "total_ms": json_of(&col(&|x| x.total_mean)),
                "overhead_pct": json_of(&col(&|x| x.overhead())),
                "throughput_over_bare": json_of(&col(&|x| x.throughput())),
                "windows": s.iter().map(|x| x.p.windows.as_ref().map_or(Value::Null, |w| w.to_json())).collect::<Vec<_>>(),
                "steady_overhead_pct": json_of(&col(&|x| x.steady())),
                "settled_overhead_pct": json_of(&settled),
                "settle_iterations": ctx.settle,
                "plateau_bare_iterations": json_of(&col(&|x| x.plateau_runs.0 as f64)),
                "plateau_profiled_iterations": json_of(&col(&|x| x.plateau_runs.1 as f64)),
                "probe_floor_pct": json_of(&s.iter().filter_map(Sample::probe_floor).collect::<Vec<_>>()),
                "root_ms": json_of(&col(&|x| x.root_ms())),
                "charged_ms": json_of(&col(&|x| x.charged_ms())),
                "charged_over_bare": json_of(&cb),
                "root_share": json_of(&col(&|x| x.share())),
                "instrumented_methods": json_of(&col(&|x| x.p.instrumented as f64)),
                "called_methods": json_of(&col(&|x| x.p.called as f64)),
                "methods_in_tree": json_of(&col(&|x| x.p.distinct_methods as f64)),
                "after_detach_ms": json_of(&col(&|x| x.after_mean)),
                "attach_ms": json_of(&col(&|x| x.attach_ms)),
                "detach_and_report_ms": json_of(&col(&|x| x.detach_ms)),
                "events": json_of(&col(&|x| x.p.events as f64)),
                "profiled_window_ms": json_of(&col(&|x| x.p.duration_ms as f64)),
            "cli_cpu_ms": json_of(&s.iter().filter_map(|x| x.cli_cpu_ms).collect::<Vec<_>>()),
                "cli_cpu_pct_of_window": json_of(
                    &s.iter()
                        .filter_map(|x| Some(
                            x.cli_cpu_ms? / (x.p.duration_ms + x.p.reset_after_ms) as f64 * 100.0
                        ))
                        .collect::<Vec<_>>()
                ),
                "lost_events": 0,
                "extra_stats": last.extra_stats,
                "calibration": last.calibration,
                "warnings": last.warnings,
            });
            // The JIT compiler threads' CPU in the repeat's bare window and
            // in the profiled one (same iterations): what the JIT's
            // compiling again after the session's redefinitions cost.
            row["jit_cpu_ms_bare"] = json_of(
                &s.iter()
                    .filter_map(|x| Some(x.jit_ms?.0))
                    .collect::<Vec<_>>(),
            );
            row["jit_cpu_ms_profiled"] = json_of(
                &s.iter()
                    .filter_map(|x| Some(x.jit_ms?.1))
                    .collect::<Vec<_>>(),
            );
            // With --settle: the whole session, attach to detach.
            row["session_throughput_over_bare"] = json_of(
                &s.iter()
                    .filter_map(Sample::session_throughput)
                    .collect::<Vec<_>>(),
            );
            row["session_s"] = json_of(
                &s.iter()
                    .filter_map(|x| Some(x.session.as_ref()?.iter().sum::<f64>() / 1e3))
                    .collect::<Vec<_>>(),
            );
            row["session_iterations"] = json_of(
                &s.iter()
                    .filter_map(|x| Some(x.session.as_ref()?.len() as f64))
                    .collect::<Vec<_>>(),
            );
            rows.push(row);
        }
    }
    Ok(json!({
        "workload": def.name, "what": def.what, "warmup_ms": json_of(&warm),
        "priming": priming, "rows": rows, "skipped": skipped,
        "warm_to_plateau_iterations": warm_to_plateau,
    }))
}

/// Milliseconds of JIT compiler CPU between two readings of [`jit_cpu`].
fn jit_ms(before: Option<Duration>, after: Option<Duration>) -> Option<f64> {
    Some(after?.saturating_sub(before?).as_secs_f64() * 1e3)
}
