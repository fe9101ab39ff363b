//! The text report's lines about the session: the summary line and what
//! the probes cost above the trees; the footer (one line, or every figure
//! with `verbose`) and the warnings below them.

use crate::profile::{CostFacts, Profile, Timing};
use crate::report::escape::escape;
use crate::report::names::Names;
use crate::report::{RenderOptions, Unit, ms};
use std::io::{self, Write};

/// The first line: the JVM, how long, and how times were taken.
pub(super) fn summary(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let jvm = if p.target.jvm.is_empty() {
        "unknown JVM"
    } else {
        &p.target.jvm
    };
    let from_reset = if p.stats.reset_after_ms > 0 {
        format!(" (from a reset {} ms in)", p.stats.reset_after_ms)
    } else {
        String::new()
    };
    // The thread count only when virtual threads ran roots: they are
    // merged into one tree by default, so the tree count does not say it.
    let virtual_threads = p.virtual_threads();
    let threads = if virtual_threads > 0 {
        let n = p.stats.threads.max(p.thread_count());
        format!(
            ", {n} thread{} ({virtual_threads} virtual)",
            if n == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "sprig {}: pid {}, {}: {} ms{from_reset}, {} timing{}{threads}",
        escape(p.target.command()),
        p.target.pid,
        escape(jvm),
        p.stats.duration_ms,
        if p.stats.windows.is_some() {
            "windows"
        } else {
            p.timing.name()
        },
        if p.clock == "thread-cpu" {
            ", thread CPU time"
        } else {
            ""
        }
    )
}

/// The header's second line: what the probes cost the root, measured
/// ([`cost_line`]) when the session timed enough root calls with the
/// probes silent, else estimated ([`estimate_line`]) after a line saying
/// why there is no measurement.
pub(super) fn probe_cost(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    if let Some(line) = cost_line(p) {
        return writeln!(out, "{line}");
    }
    if let Some(c) = &p.stats.cost {
        let why = if c.silent_calls == 0 {
            "no root call".to_owned()
        } else {
            format!(
                "{} root call{}, fewer than {}",
                c.silent_calls,
                if c.silent_calls == 1 { "" } else { "s" },
                CostFacts::MIN_SILENT_CALLS
            )
        };
        let when = if p.stats.windows.is_some() {
            "in silent windows"
        } else {
            "with the probes silent after the session"
        };
        writeln!(out, "cost: not measured ({why} {when}); estimated:")?;
    }
    estimate_line(p, out)
}

/// The measured cost, with the hint when it is large; `None` without a
/// measurement.
pub(super) fn cost_line(p: &Profile) -> Option<String> {
    let c = p.stats.cost.filter(CostFacts::measured)?;
    let fig = |ns: u64| {
        let u = Unit::fit(ns as f64);
        format!("{} {}", u.format(ns as f64), u.name())
    };
    let roots: std::collections::BTreeSet<u32> = p
        .threads
        .iter()
        .flat_map(|t| {
            t.tree
                .roots
                .iter()
                .filter_map(|&r| t.tree.nodes.get(r as usize))
        })
        .map(|n| n.method)
        .collect();
    let root = if roots.len() > 1 {
        format!("root {}", escape(&Names::new(p, false).get(c.method)))
    } else {
        "root".to_owned()
    };
    let when = if p.stats.windows.is_some() {
        "in silent windows"
    } else {
        "after the session"
    };
    let mut line = format!(
        "cost: {root} p50 {} while recording, {} with probes silent ({} calls {when}): ",
        fig(c.recorded_p50_ns),
        fig(c.silent_p50_ns),
        c.silent_calls,
    );
    match c.probe_share_percent() {
        Some(share) if share > 0.0 => line.push_str(&format!(
            "the probes took {share:.0}% of the root's recorded latency (x{:.2})",
            c.ratio().unwrap_or(1.0)
        )),
        _ => line.push_str("no cost the medians can tell"),
    }
    if c.large() {
        line.push_str(
            "\n  fewer probes: --exclude, --skip-trivial, or --roots-only for latencies alone",
        );
    }
    Some(line)
}

/// The estimate of what the probes cost a root call, and whether the root
/// latencies hold that cost.
pub(super) fn estimate_line(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let Some(c) = p.probe_cost() else {
        return Ok(());
    };
    let u = Unit::fit(c.per_root_call_ns);
    let mut line = format!(
        "probes: about {} {} a root call ({} calls x {:.1} ns a pair, {})",
        u.format(c.per_root_call_ns),
        u.name(),
        crate::report::sig3(c.calls_per_root_call),
        c.pair_ns,
        c.source()
    );
    let share = c.share_percent();
    if p.stats.windows.is_some() {
        line.push_str(
            "; counted root calls only: the silent ones, and the latencies taken from them, do not pay it",
        );
    } else if c.in_latencies {
        line.push_str("; root latencies include it");
        if let Some(share) = share {
            line.push_str(&format!(" ({share:.1}% of them)"));
        }
    } else {
        line.push_str(", subtracted from times and latencies");
    }
    if share.is_some_and(|s| s >= 20.0) && p.stats.windows.is_none() {
        line.push_str(
            "\n  fewer probes: --exclude, --skip-trivial, or --roots-only for latencies alone",
        );
    }
    writeln!(out, "{line}")
}

/// What windows timing counted and sampled, in one line.
pub(super) fn windows_line(s: &crate::profile::Stats) -> String {
    let Some(w) = &s.windows else {
        return String::new();
    };
    let mut dropped = if w.source == Some(sprig_wire::control::StackSource::Timer) {
        format!(", {} dropped outside silent root calls", w.samples_dropped)
    } else {
        String::new()
    };
    if w.samples_in_probes > 0 {
        dropped.push_str(&format!(", {} in sprig's probes", w.samples_in_probes));
    }
    let silence = match (w.silence, &w.switches) {
        (sprig_wire::control::Silence::Original, Some(s)) => format!(
            "; silent windows on the original bytes ({} switches there and {} back, {} class \
             redefinitions, {:.1} ms redefining, {:.1} ms the longest{}{})",
            s.to_original,
            s.to_instrumented,
            s.classes,
            s.ns as f64 / 1e6,
            s.max_ns as f64 / 1e6,
            if s.failed > 0 {
                format!(", {} failed", s.failed)
            } else {
                String::new()
            },
            if s.cut > 0 {
                format!(", {} switches cut a counted root call short", s.cut)
            } else {
                String::new()
            }
        ),
        (sprig_wire::control::Silence::Original, None) => {
            "; silent windows on the original bytes (no switch yet)".to_string()
        }
        _ => String::new(),
    };
    format!(
        "windows timing ({} ms counting, {} ms silent): calls per counted root call ({} counted, \
         {} silent; totals scaled x{:.2} to every root call), times from {} stack samples{} of \
         silent root calls ({} outside a root{}), latencies from silent windows{}",
        w.counting_ms,
        w.silent_ms,
        w.counted_root_calls,
        w.silent_root_calls,
        w.scale(),
        w.samples,
        source_words(w.source),
        w.samples_outside,
        dropped,
        silence
    )
}

/// The stack source of windows timing, as the footer names it.
pub(super) fn source_words(s: Option<sprig_wire::control::StackSource>) -> &'static str {
    match s {
        Some(sprig_wire::control::StackSource::Timer) => " (CPU timer)",
        Some(sprig_wire::control::StackSource::Jvmti) => " (JVMTI, safepoint-biased)",
        None => "",
    }
}

/// The short footer: what was instrumented, what was lost, what was
/// subtracted, in one line (`verbose` gives [`details`] instead).
pub(super) fn footer(p: &Profile, width: usize, out: &mut dyn Write) -> io::Result<()> {
    let s = &p.stats;
    let how = match (p.timing, p.calibration) {
        (Timing::Sampled, _) if s.windows.is_some() => windows_line(s),
        (Timing::Sampled, _) => {
            let mut c = crate::profile::SampleCounts::default();
            p.threads.iter().for_each(|t| c.add(&t.samples));
            format!("times from {} samples in root contexts", c.credited)
        }
        (Timing::Exact, Some(c)) => format!(
            "probe cost {:.1} + {:.1} ns subtracted per call",
            c.inner_ns, c.outer_ns
        ),
        (Timing::Exact, None) => "probe cost not subtracted".to_owned(),
    };
    let line = format!(
        "session: {} events ({} lost), {} methods instrumented, {} called; {how} (--verbose: \
         every figure of the session)",
        s.events, s.lost_events, s.instrumented_methods, s.called_methods
    );
    for (i, l) in wrap(&line, width.saturating_sub(2)).iter().enumerate() {
        writeln!(out, "{}{l}", if i == 0 { "" } else { "  " })?;
    }
    Ok(())
}

/// The warnings, once; the agent's only counted when they were printed on
/// this terminal while profiling.
pub(super) fn warnings(p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    let (agent, own): (Vec<&String>, Vec<&String>) = p
        .warnings
        .iter()
        .partition(|w| opts.agent_warnings_shown && w.starts_with("agent: "));
    if own.is_empty() && agent.is_empty() {
        return Ok(());
    }
    if own.is_empty() {
        return writeln!(
            out,
            "warnings: {} from the agent, printed above while profiling",
            agent.len()
        );
    }
    writeln!(out, "warnings:")?;
    for w in own {
        for (i, line) in wrap(&escape(w), opts.width.saturating_sub(4))
            .iter()
            .enumerate()
        {
            writeln!(out, "{}{line}", if i == 0 { "  - " } else { "    " })?;
        }
    }
    if !agent.is_empty() {
        writeln!(
            out,
            "  ({} more from the agent, printed above while profiling)",
            agent.len()
        )?;
    }
    Ok(())
}

/// `text` in lines of at most `width` columns, broken at spaces (a word
/// longer than `width` stands alone on its line).
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(20);
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let line = lines.last_mut().expect("one line");
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(word.to_owned());
        } else {
            if len > 0 {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

/// Every figure of the session, one per line (`verbose`).
pub(super) fn details(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "session")?;
    let s = &p.stats;
    if s.reset_after_ms > 0 {
        writeln!(
            out,
            "  duration     {} ms, from a reset {} ms into profiling (what ran before is not counted)",
            s.duration_ms, s.reset_after_ms
        )?;
    } else {
        writeln!(out, "  duration     {} ms", s.duration_ms)?;
    }
    if !p.clock.is_empty() {
        let kind = if p.clock == "thread-cpu" {
            "thread CPU time"
        } else {
            "wall clock"
        };
        writeln!(
            out,
            "  clock        {} ({kind}, {} ticks/s)",
            p.clock, p.ticks_per_sec
        )?;
    }
    if p.stats.windows.is_some() {
        writeln!(out, "  timing       {}", windows_line(&p.stats))?;
    } else if p.timing == Timing::Sampled {
        let mut c = crate::profile::SampleCounts::default();
        p.threads.iter().for_each(|t| c.add(&t.samples));
        writeln!(
            out,
            "  timing       sampled: calls counted, times from {} samples in root contexts \
             ({} outside); +/- is the 95% bound",
            c.credited, c.outside
        )?;
    }
    writeln!(
        out,
        "  events       {} ({} lost){}",
        s.events,
        s.lost_events,
        if s.reset_after_ms > 0 {
            ", counted over the whole session"
        } else {
            ""
        }
    )?;
    writeln!(
        out,
        "  methods      {} instrumented, {} called",
        s.instrumented_methods, s.called_methods
    )?;
    if s.redefinition_batches > 0 || s.reveal_ns > 0 {
        writeln!(
            out,
            "  redefined    {} classes in {} batches, {:.1} ms; {:.1} ms finding callees",
            s.instrumented_classes,
            s.redefinition_batches,
            s.redefinition_ns as f64 / 1e6,
            s.reveal_ns as f64 / 1e6
        )?;
    }
    if let Some(r) = &s.reveal {
        let kinds: Vec<String> = r
            .revealed_by
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        writeln!(
            out,
            "  revelation   instrumented by edge: {}; {} scanned, {} reachable ({} not loaded), \
             {} classes mirrored, {} unmodifiable skipped, {} reflective call sites",
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            },
            r.scanned,
            r.reachable,
            r.reachable_unloaded,
            r.classes_mirrored,
            r.unmodifiable_skipped,
            r.reflective_sites
        )?;
        if r.dormant > 0 || r.activated_in_place > 0 {
            writeln!(
                out,
                "  dormant      {} methods hold probes that never recorded (their class was \
                 redefined for others); {} revealed later without a redefinition",
                r.dormant, r.activated_in_place
            )?;
        }
        if r.trivial_skipped > 0 {
            writeln!(
                out,
                "  trivial      {} methods left out (--skip-trivial): their time is in their \
                 callers' self time",
                r.trivial_skipped
            )?;
        }
    }
    match p.calibration {
        Some(c) if p.timing == Timing::Sampled => writeln!(
            out,
            "  calibration  t_I {:.3} ns, t_O {:.3} ns (not subtracted: sampled times hold \
             the probes' cost like any other code)",
            c.inner_ns, c.outer_ns
        )?,
        None if p.timing == Timing::Sampled => writeln!(out, "  calibration  none")?,
        Some(c) => writeln!(
            out,
            "  calibration  t_I {:.3} ns, t_O {:.3} ns (probe cost subtracted per call)",
            c.inner_ns, c.outer_ns
        )?,
        None => writeln!(
            out,
            "  calibration  none (probe cost not subtracted; adjust-time is)"
        )?,
    }
    let bursts: Vec<_> = p
        .threads
        .iter()
        .map(|t| t.bursts)
        .filter(|b| b.used > 0)
        .collect();
    if !bursts.is_empty() {
        let used: u64 = bursts.iter().map(|b| b.used).sum();
        let rejected: u64 = p.threads.iter().map(|t| t.bursts.rejected).sum();
        let min = bursts.iter().map(|b| b.min_pair_ps).min().unwrap_or(0);
        let max = bursts.iter().map(|b| b.max_pair_ps).max().unwrap_or(0);
        let mut medians: Vec<u64> = bursts.iter().map(|b| b.median_pair_ps).collect();
        medians.sort_unstable();
        let ns = |ps: u64| ps as f64 / 1e3;
        let medians = if medians.len() == 1 {
            format!("median {:.1} ns", ns(medians[0]))
        } else {
            format!(
                "thread medians {:.1}-{:.1} ns",
                ns(medians[0]),
                ns(medians[medians.len() - 1])
            )
        };
        let left_out = if rejected > 0 {
            format!(", {rejected} left out")
        } else {
            String::new()
        };
        writeln!(
            out,
            "  in session   {used} calibration burst{} on {} thread{}: probe pair {medians} \
             (range {:.1}-{:.1}){left_out}; each thread's calls are charged its latest bursts' \
             figures, and the bursts' time is taken out with the waits",
            if used == 1 { "" } else { "s" },
            bursts.len(),
            if bursts.len() == 1 { "" } else { "s" },
            ns(min),
            ns(max),
        )?;
    }
    let waits = p
        .threads
        .iter()
        .flat_map(|t| {
            t.tree
                .roots
                .iter()
                .filter_map(|&r| t.tree.nodes.get(r as usize))
        })
        .map(|n| n.adjust_ticks)
        .fold(0u64, u64::saturating_add);
    if waits > 0 && p.timing == Timing::Sampled {
        writeln!(
            out,
            "  waits        {} ms the profiler blocked profiled threads (taken out of root \
             latencies)",
            ms(crate::profile::ticks_to_ns(waits, p.ticks_per_sec))
        )?;
    } else if waits > 0 {
        writeln!(
            out,
            "  waits        {} ms the profiler blocked profiled threads (subtracted)",
            ms(crate::profile::ticks_to_ns(waits, p.ticks_per_sec))
        )?;
    }
    Ok(())
}
