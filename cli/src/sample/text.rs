//! The text report of `sprig sample`: what was sampled, the hot methods,
//! the tree (merged, or per thread with `--threads`), back traces, and
//! the suggested roots with their `sprig profile` commands.

use std::io::{self, Write};

use sprig_callgraph::RenderOptions;
use sprig_callgraph::profile::{Metric, Profile, Tree};
use sprig_callgraph::report::escape::escape;
use sprig_callgraph::report::view::{back_node_name, back_traces, tree_view};
use sprig_callgraph::stacks::{
    EdgeProfile, RootKind, SAMPLED_PAIR_NS, View, app_cpu_per_s, profile_command,
};
use sprig_wire::control::StackSource;

use super::Stacks;

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A percentage that may be far below 1: two significant digits below
/// 1%, two decimals above.
fn small_pct(x: f64) -> String {
    if !(x.is_finite() && x > 0.0) {
        return "0%".to_owned();
    }
    let decimals = (1 - x.log10().floor() as i32).clamp(2, 9) as usize;
    format!("{x:.decimals$}%")
}

/// The live view: the samples so far and the hottest methods.
pub(super) fn live(s: &Stacks<'_>, lines: usize, out: &mut dyn Write) -> io::Result<()> {
    let p = &s.profile;
    let view = s.args.view();
    writeln!(
        out,
        "sprig sample: JVM {}, {:.0} s, {} {} samples, {} threads",
        s.args.pid,
        p.span_ns() as f64 / 1e9,
        p.samples(view),
        view.name(),
        p.threads.len()
    )?;
    hot_methods(s, lines, out)
}

/// The hot methods table, `n` rows.
fn hot_methods(s: &Stacks<'_>, n: usize, out: &mut dyn Write) -> io::Result<()> {
    let p = &s.profile;
    let view = s.args.view();
    let all = p.samples(view);
    writeln!(out, "\nHot methods ({} view, by self samples)", view.name())?;
    writeln!(
        out,
        "  {:>7} {:>7} {:>8}  method",
        "self", "total", "samples"
    )?;
    for (m, own, total) in p.hot_methods(view).into_iter().take(n) {
        writeln!(
            out,
            "  {:>7} {:>7} {:>8}  {}",
            pct(own, all),
            pct(total, all),
            own,
            escape(&p.method(m).display())
        )?;
    }
    Ok(())
}

pub(super) fn write(s: &Stacks<'_>, out: &mut dyn Write) -> io::Result<()> {
    let p = &s.profile;
    let args = s.args;
    let view = args.view();
    let all = p.samples(view);
    writeln!(
        out,
        "sprig sample: JVM {} ({}), {:.1} s, {} rounds every {} ms, {} thread{}",
        args.pid,
        escape(&s.jvm_line),
        p.span_ns() as f64 / 1e9,
        p.rounds,
        args.interval,
        p.threads.len(),
        if p.threads.len() == 1 { "" } else { "s" }
    )?;
    writeln!(
        out,
        "{} view: {} samples (wall view: {}, CPU view: {}){}",
        view.name(),
        all,
        p.wall_samples,
        p.cpu_samples,
        if p.truncated > 0 {
            format!(", {} stacks cut at --max-depth", p.truncated)
        } else {
            String::new()
        }
    )?;
    if p.source == Some(StackSource::Timer) {
        writeln!(
            out,
            "stacks taken by a per-thread CPU-time timer's signal (AsyncGetCallTrace): no safepoint bias; threads on the CPU only"
        )?;
        if p.wall_samples > 0 {
            writeln!(
                out,
                "sampling cost the signal handler {:.1} µs a sample",
                p.cost_ns as f64 / p.wall_samples as f64 / 1000.0
            )?;
        }
    } else {
        writeln!(
            out,
            "stacks taken at safepoints (JVMTI): safepoint bias, time in a loop without safepoint polls is charged where the thread next polls"
        )?;
        if p.rounds > 0 {
            writeln!(
                out,
                "sampling cost the JVM's sampling thread {:.0} µs a round",
                p.cost_ns as f64 / p.rounds as f64 / 1000.0
            )?;
        }
    }

    if view == View::Cpu && p.native_cpu_samples > 0 {
        let all = if p.java_only {
            p.cpu_samples + p.native_cpu_samples
        } else {
            p.cpu_samples
        };
        writeln!(
            out,
            "{} of {} samples on the CPU ({:.1}%) in native methods{}",
            p.native_cpu_samples,
            all,
            p.native_cpu_samples as f64 * 100.0 / all.max(1) as f64,
            if p.java_only {
                ": left out of the view (--java-only, what JFR's execution samples show)"
            } else {
                " (JFR's execution samples leave these out: --java-only does too)"
            }
        )?;
    }
    if let Some(o) = p.own_cpu {
        writeln!(
            out,
            "sprig's CPU time in the target: {:.1} ms ({:.1} ms signal handler, {:.1} ms its threads) of the target's {:.0} ms: {:.2}%, an upper bound of the overhead",
            (o.handler_ns + o.threads_ns) as f64 / 1e6,
            o.handler_ns as f64 / 1e6,
            o.threads_ns as f64 / 1e6,
            o.target_cpu_ns as f64 / 1e6,
            o.share() * 100.0
        )?;
    }

    hot_methods(s, args.hot, out)?;

    let profile = s.profile.to_profile(s.convert());
    let opts = RenderOptions {
        min_percent: args.min_percent,
        ..RenderOptions::default()
    };
    if args.threads {
        for t in &profile.threads {
            let w = profile.weights(&t.tree, Metric::Samples);
            let n: u64 = t.tree.roots.iter().map(|&r| w[r as usize].total).sum();
            if n == 0 {
                continue;
            }
            writeln!(
                out,
                "\nThread {} (id {}): {} samples",
                escape(&t.display_name()),
                t.java_id,
                n
            )?;
            write_tree(&profile, &t.tree, all, &opts, out)?;
        }
    } else {
        writeln!(
            out,
            "\nCalling context tree ({} view, all threads; share of all samples, self samples){}",
            view.name(),
            if args.min_percent > 0.0 {
                format!("; below {}% hidden", args.min_percent)
            } else {
                String::new()
            }
        )?;
        let merged = profile.merged();
        write_tree(&profile, &merged.tree, all, &opts, out)?;
    }

    if !args.back_traces.is_empty() {
        let merged = profile.merged();
        for b in &args.back_traces {
            let Ok(pat) = sprig::pattern::parse(b) else {
                continue;
            };
            let ids = profile.methods_matching(|m| pat.matches(&m.class, &m.name, &m.descriptor));
            if ids.is_empty() {
                writeln!(out, "\nBack traces of {}: no sample holds it", escape(b))?;
            }
            for id in ids {
                let bt = back_traces(&profile, &merged.tree, id, None);
                writeln!(
                    out,
                    "\nBack traces of {} (share of its samples' weight)",
                    escape(&profile.display_name(id))
                )?;
                for (i, depth, _) in bt.lines(&profile) {
                    writeln!(
                        out,
                        "  {:>6.1}%  {:indent$}{}",
                        bt.share(i) * 100.0,
                        "",
                        escape(&back_node_name(&profile, &bt.nodes[i])),
                        indent = 2 * depth.min(40)
                    )?;
                }
            }
        }
    }

    write_edges(s, args.hot, out)?;

    if args.suggest_roots > 0 {
        let roots = s.suggestions();
        writeln!(
            out,
            "\nSuggested roots ({} view: units of work, then their parts, then loops, each by inclusive share steady over the run's 4 windows; no method of the JDK's library, no thread entry frame)",
            view.name()
        )?;
        if roots.is_empty() {
            writeln!(
                out,
                "  none: no method outside the JDK holds a steady 5% of the samples below the threads' entry frames"
            )?;
        }
        for (i, r) in roots.iter().enumerate() {
            let windows: Vec<String> = r
                .window_shares
                .iter()
                .map(|w| format!("{:.0}", w * 100.0))
                .collect();
            writeln!(
                out,
                "  {}. {}  {:.1}% (windows: {}%)",
                i + 1,
                escape(&r.pattern),
                r.share * 100.0,
                windows.join(", ")
            )?;
            writeln!(
                out,
                "     {}",
                escape(&profile_command(args.pid, &r.pattern))
            )?;
            match r.kind {
                RootKind::Unit => {}
                RootKind::Part => writeln!(out, "     part of a unit of work above")?,
                RootKind::Loop => writeln!(
                    out,
                    "     a loop: on the stack in nearly every sample of its thread (entered once, or back to back)"
                )?,
            }
            if !r.same_time.is_empty() {
                let same: Vec<String> =
                    r.same_time.iter().map(|o| escape(o).into_owned()).collect();
                writeln!(
                    out,
                    "     the same time (hands its calls down to it): {}",
                    same.join(", ")
                )?;
            }
            match (r.sampled_pct, r.exact_pct) {
                (Some(sampled), Some(exact)) => writeln!(
                    out,
                    "     predicted overhead (estimate): {} (sampled timing), {} (--timing exact), from {} calls/s ({:.0} per CPU second) estimated below it by the call-edge bursts",
                    small_pct(sampled),
                    small_pct(exact),
                    r.edge_calls_per_sec
                        .map_or("?".to_owned(), |c| format!("{c:.0}")),
                    r.edge_calls_per_cpu_s.unwrap_or(0.0)
                )?,
                _ => writeln!(out, "     predicted overhead: unknown (run with --edges)")?,
            }
        }
        if roots.iter().any(|r| r.exact_pct.is_some()) {
            let e = s.edges.as_ref().map(|e| &e.profile);
            let (exact_pair, source) = EdgeProfile::exact_pair(e);
            let pair = if source == "calibration" {
                format!("{exact_pair:.1} ns exact (calibrated in this JVM before sampling)")
            } else {
                format!(
                    "{exact_pair} ns exact (the benchmark's figure for another host: the calibration failed)"
                )
            };
            let rate = match e {
                Some(e) if e.counted_per_s().is_some() => {
                    "the entries a second counted in the counting windows, shared out by the bursts' samples".to_owned()
                }
                _ => format!(
                    "the bursts' intervals, their own path between two entries ({}) taken out of the CPU time between them",
                    e.map(|e| e.path_ns).filter(|&n| n > 0).map_or(
                        "not measured: call-dense code is estimated low".to_owned(),
                        |n| format!("{n} ns, measured on an empty method as the bursts began")
                    )
                ),
            };
            writeln!(
                out,
                "  The prediction, an estimate: the calls per CPU second into the root and along every call edge the bursts saw out of it and out of what it reaches (a method also reached from elsewhere counts whole; from {rate}), each costing a probe pair of {SAMPLED_PAIR_NS} ns sampled (the benchmark's figure), {pair}. It leaves out what the root's own probes add (opening and closing a root context) and, where the host has no idle core, the CPU `sprig profile` itself takes to read every event; roots the edges do not name have none."
            )?;
        } else if !roots.is_empty() {
            writeln!(
                out,
                "  The prediction needs the calls per second below a root, which stack samples cannot bound: {:.1} activations/s were seen below the first root (Whaley's edge counts, a lower bound: a call that starts and ends between two samples is not seen), and call-dense code makes many thousand times more. `sprig sample --edges` estimates them; `sprig profile ... --duration 10` measures the cost.",
                roots[0].activations_per_sec
            )?;
        }
    }
    Ok(())
}

/// `--edges`: the call edges the bursts sampled, most sampled first, with
/// their estimated calls per second.
fn write_edges(s: &Stacks<'_>, n: usize, out: &mut dyn Write) -> io::Result<()> {
    let Some(e) = s.edges.as_ref().map(|e| &e.profile) else {
        return Ok(());
    };
    if e.bursts == 0 {
        writeln!(
            out,
            "\nCall edges: none sampled (the session ended before the bursts began: they begin after --edges-after {} s, once a class outside the JDK was sampled)",
            s.args.edges_after
        )?;
        return Ok(());
    }
    let named = e.named();
    let app_cpu = app_cpu_per_s(&s.profile);
    let basis = match e.counted_per_s() {
        Some(r) => format!(
            "calls/s: each edge's share of the sampled entries times the {} entries counted in {:.1} ms of counting windows ({:.0} a second)",
            e.counted,
            e.counted_ns as f64 / 1e6,
            r
        ),
        None => format!(
            "calls/s estimated from {} intervals between a thread's entries, {:.2} ms of CPU time, {:.2} ms without the bursts' own path of {} ns in each, at the {:.2} CPU seconds a second the application's code used",
            e.intervals,
            e.interval_cpu_ns as f64 / 1e6,
            e.app_cpu_ns(e.intervals, e.interval_cpu_ns) as f64 / 1e6,
            e.path_ns,
            app_cpu
        ),
    };
    writeln!(
        out,
        "\nCall edges ({} bursts of {} entries every {} ms into {} methods of {} classes; {} entries sampled, {} named; {basis})",
        e.bursts, s.args.edge_budget, s.args.edge_interval, e.methods, e.classes, e.samples, named,
    )?;
    writeln!(
        out,
        "  {:>7} {:>8} {:>12}  caller -> callee",
        "share", "samples", "calls/s"
    )?;
    for row in e.rows(app_cpu).iter().take(n) {
        writeln!(
            out,
            "  {:>7} {:>8} {:>12.0}  {} -> {}",
            pct(row.samples, named),
            row.samples,
            row.calls_per_s_est,
            escape(&row.caller),
            escape(&row.callee)
        )?;
    }
    Ok(())
}

/// The tree's lines: share of all the view's samples, self samples,
/// the method; children by weight.
fn write_tree(
    profile: &Profile,
    tree: &Tree,
    all: u64,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = tree_view(profile, tree, opts);
    let w = profile.weights(tree, Metric::Samples);
    for line in &view.lines {
        let n = line.node as usize;
        writeln!(
            out,
            "  {:>6} {:>8}  {:indent$}{}",
            pct(w[n].total, all),
            w[n].own,
            "",
            escape(&profile.method(tree.nodes[n].method).display()),
            indent = 2 * line.depth.min(60)
        )?;
    }
    Ok(())
}
