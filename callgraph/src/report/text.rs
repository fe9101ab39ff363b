//! Text report: aligned columns (ASCII but for `µs` and the `…` of a
//! shortened name), so it reads in a terminal and pastes into a bug
//! report. What the user asked for comes first: one summary line, the
//! trees, the hot spots; then a legend of what the tables showed (`+/-`,
//! `samples`, `-`, `[N incomplete]`, `~`), once, the back traces, and a
//! footer with the session's figures (one line, or every figure with
//! `verbose`) and its warnings.
//!
//! Methods read `pkg.Class.method` ([`super::names`]): the signature, in
//! Java form, only where two overloads would read the same (every one with
//! `signatures`), the package cut from the left with `…` where a line
//! would pass `width` columns. Each time column has one unit, the one that
//! fits its largest figure (ns, µs, ms, s), named in its header, figures
//! with three significant digits.
//!
//! ```text
//! sprig profile: pid 4242, OpenJDK 64-Bit Server VM 17.0.15: 1500 ms, exact timing
//!
//! thread "main" (java id 1, sprig #0): 1 root call, 300 µs
//!        calls   total µs    self µs  % root  method
//!            1        300        100  100.0%  com.acme.App.run
//!           10        200        200   66.7%  \- com.acme.App.work
//!   ...
//! session: 1500 ms, 23 events (0 lost), 6 methods instrumented, 5 called; ...
//! ```
//!
//! A time written `~0.200` had more calibrated probe cost taken out of it
//! than is left: the probes' cost moves by a few ns a call with the code
//! around them, which is then tens of percent of the figure ([`LEGEND`],
//! printed once under the tables).
//!
//! With allocations (`--alloc`) each tree adds the bytes its subtree and
//! its own code allocated and its objects per call, and an allocation
//! hot-spot table follows (sites by class, most bytes first).
//!
//! Under each tree, a `latency` line per root gives its complete calls'
//! count, minimum, median, 90th and 99th percentile and maximum. In sampled
//! mode the table shows the samples behind each self time and the 95%
//! bounds (`+/-`, ASCII for ±) of the total and self times ([`sampled_row`]).

use super::escape::escape;
use super::names::{self, Names};
use super::view::{back_node_name, back_traces, hot_spots, lock_view, tree_view};
use super::{Render, RenderOptions, Unit, ms, percent};
use crate::profile::{
    CostFacts, Metric, Profile, ThreadProfile, Times, Timing, own_allocs, sample_bound_ns,
};
use std::io::{self, Write};

/// Columns a name keeps however deep its line (a deep line is then wider
/// than the report's width rather than a name cut to nothing).
const MIN_NAME: usize = 20;

/// Guides are drawn for this many levels; deeper lines show their depth.
const MAX_GUIDES: usize = 24;

/// Printed under a table that marked a time with `~`.
pub const LEGEND: &str = "  ~ more probe cost was subtracted than time is left: a probe pair costs less\n    \
around code that does work than around the empty method the calibration times\n    \
(down to a third of it), so such a time may be off by tens of percent, or read zero";

/// Printed under [`LEGEND`] when revelation ran and no method was left
/// out as trivial.
pub const TRIVIAL_HINT: &str = "    (`--skip-trivial` leaves getters, setters and other tiny leaf methods \
without probes: their time then counts in their callers)";

/// The legend under a table with `~` times, and the hint when it applies.
fn legend(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{LEGEND}")?;
    if p.stats
        .reveal
        .as_ref()
        .is_some_and(|r| r.trivial_skipped == 0)
    {
        writeln!(out, "{TRIVIAL_HINT}")?;
    }
    Ok(())
}

pub struct Text;

impl Render for Text {
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        summary(p, out)?;
        probe_cost(p, out)?;
        let names = Names::new(p, opts.signatures);
        let merged =
            (opts.merged || !opts.back_traces.is_empty() || opts.hot_spots > 0).then(|| p.merged());
        let mut marks = Marks::default();
        if !opts.tree {
            // the hot spots (and back traces) alone
        } else if opts.merged {
            if let Some(m) = &merged {
                thread_tree(p, m, opts, &names, &mut marks, out)?;
            }
        } else {
            for t in &p.threads {
                thread_tree(p, t, opts, &names, &mut marks, out)?;
            }
        }
        if p.threads.is_empty() {
            writeln!(out)?;
            writeln!(out, "no calls were recorded in a root context")?;
        }
        if let Some(m) = &merged
            && opts.hot_spots > 0
        {
            marks.probe |= hot_spot_table(p, m, opts, &names, out)?;
        }
        lock_table(p, opts, &names, out)?;
        if p.has_allocs() {
            let m;
            let m = match &merged {
                Some(m) => m,
                None => {
                    m = p.merged();
                    &m
                }
            };
            alloc_table(p, m, opts, &names, out)?;
        }
        marks.legend(p, out)?;
        if let Some(m) = &merged {
            for &method in &opts.back_traces {
                back_trace(p, m, method, opts, &names, out)?;
            }
        }
        writeln!(out)?;
        if opts.verbose {
            details(p, out)?;
        } else {
            footer(p, opts.width, out)?;
        }
        warnings(p, opts, out)
    }
}

/// What the tables showed that the legend explains, each once.
#[derive(Default)]
struct Marks {
    /// A time marked `~`.
    probe: bool,
    /// A sampled table (`+/-`, `samples`).
    sampled: bool,
    /// A `-` for a node no sample found.
    dash: bool,
    /// A `[N incomplete]` node.
    incomplete: bool,
}

impl Marks {
    fn legend(&self, p: &Profile, out: &mut dyn Write) -> io::Result<()> {
        if !(self.probe || self.sampled || self.dash || self.incomplete) {
            return Ok(());
        }
        writeln!(out)?;
        if self.sampled {
            writeln!(
                out,
                "  +/-             the 95% bound of a time taken from samples (19 times in 20 \
                 the time is within it)"
            )?;
            writeln!(
                out,
                "  samples         samples that found the thread in the method's own code"
            )?;
        }
        if self.dash {
            writeln!(
                out,
                "  -               no sample found the thread there: its time is below about one \
                 sampling period, not zero"
            )?;
        }
        if self.incomplete {
            writeln!(
                out,
                "  [N incomplete]  N calls had not returned when profiling ended (closed at the \
                 last event seen)"
            )?;
        }
        if self.probe {
            legend(p, out)?;
        }
        Ok(())
    }
}

/// `ns` in `unit`, marked `~` when it is mostly subtracted probe cost.
fn time_marked(unit: Unit, ns: u64, probe_bound: bool) -> String {
    let t = unit.format(ns as f64);
    if probe_bound { format!("~{t}") } else { t }
}

/// The unit that fits the largest of `values`.
fn unit_of(values: impl Iterator<Item = u64>) -> Unit {
    Unit::fit(values.max().unwrap_or(0) as f64)
}

/// The first line: the JVM, how long, and how times were taken.
fn summary(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
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
fn probe_cost(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
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
fn cost_line(p: &Profile) -> Option<String> {
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
fn estimate_line(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let Some(c) = p.probe_cost() else {
        return Ok(());
    };
    let u = Unit::fit(c.per_root_call_ns);
    let mut line = format!(
        "probes: about {} {} a root call ({} calls x {:.1} ns a pair, {})",
        u.format(c.per_root_call_ns),
        u.name(),
        super::sig3(c.calls_per_root_call),
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
fn windows_line(s: &crate::profile::Stats) -> String {
    let Some(w) = &s.windows else {
        return String::new();
    };
    let dropped = if w.source == Some(sprig_wire::control::StackSource::Timer) {
        format!(", {} dropped outside silent root calls", w.samples_dropped)
    } else {
        String::new()
    };
    format!(
        "windows timing ({} ms counting, {} ms silent): calls per counted root call ({} counted, \
         {} silent; totals scaled x{:.2} to every root call), times from {} stack samples{} of \
         silent root calls ({} outside a root{}), latencies from silent windows",
        w.counting_ms,
        w.silent_ms,
        w.counted_root_calls,
        w.silent_root_calls,
        w.scale(),
        w.samples,
        source_words(w.source),
        w.samples_outside,
        dropped
    )
}

/// The stack source of windows timing, as the footer names it.
fn source_words(s: Option<sprig_wire::control::StackSource>) -> &'static str {
    match s {
        Some(sprig_wire::control::StackSource::Timer) => " (CPU timer)",
        Some(sprig_wire::control::StackSource::Jvmti) => " (JVMTI, safepoint-biased)",
        None => "",
    }
}

/// The short footer: what was instrumented, what was lost, what was
/// subtracted, in one line (`verbose` gives [`details`] instead).
fn footer(p: &Profile, width: usize, out: &mut dyn Write) -> io::Result<()> {
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
fn warnings(p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
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
fn wrap(text: &str, width: usize) -> Vec<String> {
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
fn details(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
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

/// The indentation and branch of one tree line. `open[d]` = an ancestor at
/// depth d has more siblings below (draw `|`).
fn guides(open: &[bool], depth: usize, last: bool, levels: usize) -> String {
    if depth == 0 {
        return String::new();
    }
    let mut s = String::new();
    let upto = depth.min(levels + 1);
    for &o in open.iter().take(upto).skip(1) {
        s.push_str(if o { "|  " } else { "   " });
    }
    if depth > levels + 1 {
        s.push_str(&format!("[{depth}] "));
    }
    s.push_str(if last { "\\- " } else { "+- " });
    s
}

/// The guide levels drawn before a line shows its depth instead: as many
/// as leave a name [`MIN_NAME`] columns in `width` beside `figures`
/// columns (and the depth, `[NN] \- `), at least 4, at most [`MAX_GUIDES`].
fn guide_levels(width: usize, figures: usize) -> usize {
    (width.saturating_sub(figures + MIN_NAME + 8) / 3).clamp(4, MAX_GUIDES)
}

/// One thread's (or the merged) tree; what it showed goes into `marks`.
fn thread_tree(
    p: &Profile,
    t: &ThreadProfile,
    opts: &RenderOptions,
    names: &Names,
    marks: &mut Marks,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = tree_view(p, &t.tree, opts);
    writeln!(out)?;
    let roots = t
        .tree
        .roots
        .iter()
        .filter(|&&r| (r as usize) < t.tree.nodes.len())
        .map(|&r| t.tree.nodes[r as usize].calls)
        .fold(0u64, u64::saturating_add);
    let who = if t.index == crate::profile::MERGED_THREAD {
        "all threads merged".to_owned()
    } else {
        format!(
            "thread \"{}\" (java id {}, sprig #{})",
            escape(&t.name),
            t.java_id,
            t.index
        )
    };
    let whole = Unit::fit(view.total as f64);
    writeln!(
        out,
        "{who}: {roots} root call{}, {} {}",
        if roots == 1 { "" } else { "s" },
        whole.format(view.total as f64),
        whole.name()
    )?;
    let sampled = p.timing == Timing::Sampled;
    let window = t.samples.window();
    let times = |l: &super::view::Line| view.times[l.node as usize];
    let total_u = unit_of(view.lines.iter().map(|l| times(l).total_ns));
    let self_u = unit_of(view.lines.iter().map(|l| times(l).self_ns));
    let bound = |n: u64, ns: u64| sample_bound_ns(n, ns, window);
    let total_b = unit_of(
        view.lines
            .iter()
            .map(|l| bound(times(l).total_samples, times(l).total_ns)),
    );
    let self_b = unit_of(
        view.lines
            .iter()
            .map(|l| bound(times(l).self_samples, times(l).self_ns)),
    );
    let head = |what: &str, u: Unit| format!("{what} {}", u.name());
    let figures = if sampled {
        marks.sampled = true;
        format!(
            "{:>12} {:>10} {:>9} {:>10} {:>9} {:>8} {:>7}",
            "calls",
            head("total", total_u),
            head("+/-", total_b),
            head("self", self_u),
            head("+/-", self_b),
            "samples",
            "% root"
        )
    } else {
        format!(
            "{:>12} {:>10} {:>10} {:>7}",
            "calls",
            head("total", total_u),
            head("self", self_u),
            "% root"
        )
    };
    // Allocations (`--alloc`): the subtree's bytes, the node's own bytes
    // and its objects per call.
    let allocs = p.has_allocs().then(|| {
        (
            p.weights(&t.tree, Metric::Bytes),
            p.weights(&t.tree, Metric::Objects),
        )
    });
    let figures = if allocs.is_some() {
        format!(
            "{figures} {:>12} {:>12} {:>9}",
            "alloc bytes", "self bytes", "obj/call"
        )
    } else {
        figures
    };
    let width = figures.chars().count() + 2;
    writeln!(out, "{figures}  method")?;
    // open[d]: the last line drawn at depth d has later siblings.
    let mut open: Vec<bool> = Vec::new();
    for line in &view.lines {
        let node = &t.tree.nodes[line.node as usize];
        let times = view.times[line.node as usize];
        open.truncate(line.depth);
        open.resize(line.depth, false);
        open.push(!line.last);
        let guide = guides(
            &open,
            line.depth,
            line.last,
            guide_levels(opts.width, width),
        );
        let mut extra = String::new();
        if node.incomplete > 0 {
            extra = format!(" [{} incomplete]", node.incomplete);
            marks.incomplete = true;
        }
        let room = opts
            .width
            .saturating_sub(width + guide.chars().count() + extra.chars().count())
            .max(MIN_NAME);
        let name = escape(&names::fit(&names.get(node.method), room)).into_owned();
        let share = percent(times.total_ns, line.root_total);
        let row = if sampled {
            marks.dash |= times.total_samples == 0 || times.self_samples == 0;
            let or_dash = |n: u64, s: String| if n == 0 { "-".to_owned() } else { s };
            format!(
                "{:>12} {:>10} {:>9} {:>10} {:>9} {:>8} {:>7}",
                node.calls,
                or_dash(times.total_samples, total_u.format(times.total_ns as f64)),
                or_dash(
                    times.total_samples,
                    total_b.format(bound(times.total_samples, times.total_ns) as f64)
                ),
                or_dash(times.self_samples, self_u.format(times.self_ns as f64)),
                or_dash(
                    times.self_samples,
                    self_b.format(bound(times.self_samples, times.self_ns) as f64)
                ),
                times.self_samples,
                share
            )
        } else {
            let (total_bound, self_bound) = (times.probe_bound(), times.self_probe_bound());
            marks.probe |= total_bound || self_bound;
            format!(
                "{:>12} {:>10} {:>10} {:>7}",
                node.calls,
                time_marked(total_u, times.total_ns, total_bound),
                time_marked(self_u, times.self_ns, self_bound),
                share
            )
        };
        let row = match &allocs {
            Some((bytes, _)) => {
                let b = bytes[line.node as usize];
                let (objects, _) = own_allocs(node);
                let per_call = if objects == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.1}", objects as f64 / node.calls.max(1) as f64)
                };
                format!("{row} {:>12} {:>12} {:>9}", b.total, b.own, per_call)
            }
            None => row,
        };
        writeln!(out, "{row}  {guide}{name}{extra}")?;
    }
    if view.lines.len() < t.tree.nodes.len() {
        writeln!(
            out,
            "{:>12} (thresholds hide {} of {} nodes)",
            "",
            t.tree.nodes.len() - view.lines.len(),
            t.tree.nodes.len()
        )?;
    }
    for line in view.lines.iter().filter(|l| l.depth == 0) {
        let node = &t.tree.nodes[line.node as usize];
        if let Some(l) = p.latency_ns(node) {
            // One unit, the max's, while the median reads at least 0.01 in
            // it; else each figure in its own, so that a sub-microsecond
            // median under a millisecond max does not read 0.000.
            let u = Unit::fit(l.max_ns as f64);
            let one_unit = l.p50_ns as f64 >= u.ns() / 100.0;
            let f = |ns: u64| {
                if one_unit {
                    u.format(ns as f64)
                } else {
                    let own = Unit::fit(ns as f64);
                    format!("{} {}", own.format(ns as f64), own.name())
                }
            };
            let figures = format!(
                "{} call{}, min {}, p50 {}, p90 {}, p99 {}, max {}{}",
                l.count,
                if l.count == 1 { "" } else { "s" },
                f(l.min_ns),
                f(l.p50_ns),
                f(l.p90_ns),
                f(l.p99_ns),
                f(l.max_ns),
                if one_unit {
                    format!(" {}", u.name())
                } else {
                    String::new()
                }
            ) + &inflated(p, node.method);
            // One line when the name fits beside the figures, else the
            // figures on a line of their own under it.
            const HEAD: &str = "  latency      ";
            let full = names.get(node.method);
            let beside = opts
                .width
                .saturating_sub(HEAD.len() + 2 + figures.chars().count());
            if beside >= MIN_NAME.min(full.chars().count()) {
                let name = escape(&names::fit(&full, beside)).into_owned();
                writeln!(out, "{HEAD}{name}: {figures}")?;
            } else {
                let room = opts.width.saturating_sub(HEAD.len() + 1).max(MIN_NAME);
                let name = escape(&names::fit(&full, room)).into_owned();
                writeln!(out, "{HEAD}{name}:")?;
                writeln!(out, "{:w$}{figures}", "", w = HEAD.len())?;
            }
        }
    }
    Ok(())
}

/// What a root latency line adds when the probes' measured cost is in
/// its figures (sampled timing, outside windows timing): their share of
/// the recorded median, as the `cost` line measured it.
fn inflated(p: &Profile, method: u32) -> String {
    match p.stats.cost {
        Some(c)
            if c.method == method && p.timing == Timing::Sampled && p.stats.windows.is_none() =>
        {
            match c.probe_share_percent() {
                Some(share) => format!(", probes {share:.0}% of p50"),
                None => String::new(),
            }
        }
        _ => String::new(),
    }
}

/// The figures of a sampled tree line: calls, total ± bound, self ±
/// bound, samples behind the self time.
pub fn sampled_row(calls: u64, times: &Times, window: u64) -> String {
    let bound = |n: u64, ns: u64| ms(sample_bound_ns(n, ns, window));
    format!(
        "{:>12} {:>12} {:>9} {:>12} {:>9} {:>8}",
        calls,
        ms(times.total_ns),
        bound(times.total_samples, times.total_ns),
        ms(times.self_ns),
        bound(times.self_samples, times.self_ns),
        times.self_samples
    )
}

/// The hot spots; whether a time was marked `~`.
fn hot_spot_table(
    p: &Profile,
    merged: &ThreadProfile,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<bool> {
    let limit = opts.hot_spots;
    let spots = hot_spots(p, &merged.tree);
    if spots.is_empty() {
        return Ok(false);
    }
    let all_self = spots
        .iter()
        .map(|h| h.self_ns)
        .fold(0u64, u64::saturating_add);
    writeln!(out)?;
    writeln!(
        out,
        "hot spots: {} self time, all threads ({} of {} methods)",
        p.timing.name(),
        spots.len().min(limit),
        spots.len()
    )?;
    let shown = &spots[..spots.len().min(limit)];
    let self_u = unit_of(shown.iter().map(|h| h.self_ns));
    let total_u = unit_of(shown.iter().map(|h| h.total_ns));
    let avg_u = unit_of(shown.iter().map(|h| h.avg_ns));
    let head = format!(
        "{:>10} {:>7} {:>12} {:>10} {:>10}",
        format!("self {}", self_u.name()),
        "self %",
        "calls",
        format!("total {}", total_u.name()),
        format!("avg {}", avg_u.name())
    );
    let width = head.chars().count() + 2;
    writeln!(out, "{head}  method")?;
    let mut marked = false;
    for h in shown {
        marked |= h.self_probe_bound();
        let room = opts.width.saturating_sub(width).max(MIN_NAME);
        let name = names::fit(&names.get(h.method), room);
        writeln!(
            out,
            "{:>10} {:>7} {:>12} {:>10} {:>10}  {}",
            time_marked(self_u, h.self_ns, h.self_probe_bound()),
            percent(h.self_ns, all_self),
            h.calls,
            total_u.format(h.total_ns as f64),
            avg_u.format(h.avg_ns as f64),
            escape(&name)
        )?;
    }
    Ok(marked)
}

/// The lock view (`--locks`), when the profile holds waits: per kind and
/// monitor class, all threads, the waits' count and time, and the
/// contexts that waited (the three that waited longest).
fn lock_table(
    p: &Profile,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<()> {
    let has_waits = p
        .threads
        .iter()
        .any(|t| t.tree.nodes.iter().any(|n| n.is_wait()));
    if !has_waits {
        return Ok(());
    }
    let merged = p.merged();
    let lines = lock_view(p, &merged.tree);
    writeln!(out)?;
    writeln!(out, "waits: all threads, the longest first")?;
    let unit = unit_of(lines.iter().map(|l| l.ns));
    writeln!(
        out,
        "{:>10} {:>8}  wait, and where it waited",
        format!("total {}", unit.name()),
        "count"
    )?;
    const SHOWN: usize = 3;
    for l in &lines {
        writeln!(
            out,
            "{:>10} {:>8}  {}",
            unit.format(l.ns as f64),
            l.count,
            escape(&names.get(l.row))
        )?;
        for (path, count, ns) in l.waiters.iter().take(SHOWN) {
            let room = opts.width.saturating_sub(24).max(MIN_NAME);
            let mut context = path
                .iter()
                .map(|&m| names.get(m))
                .collect::<Vec<_>>()
                .join(" < ");
            // The method that waited first: cut at the root's end.
            if context.chars().count() > room {
                context = context.chars().take(room.saturating_sub(1)).collect();
                context.push('…');
            }
            writeln!(
                out,
                "{:>10} {:>8}    in {}",
                unit.format(*ns as f64),
                count,
                escape(&context)
            )?;
        }
        if l.waiters.len() > SHOWN {
            writeln!(out, "{:>19}    and {} more", "", l.waiters.len() - SHOWN)?;
        }
    }
    Ok(())
}

/// Rows of the allocation hot-spot table.
const ALLOC_ROWS: usize = 20;

/// The allocation hot spots (`--alloc`): sites by class, most bytes first,
/// over every thread; exact counts.
fn alloc_table(
    p: &Profile,
    merged: &ThreadProfile,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut by: std::collections::BTreeMap<(u32, u8), (u64, u64)> = Default::default();
    for n in &merged.tree.nodes {
        for a in &n.allocs {
            let e = by.entry((a.site, a.level)).or_default();
            e.0 = e.0.saturating_add(a.count);
            e.1 = e.1.saturating_add(a.bytes);
        }
    }
    let all: u64 = by.values().map(|v| v.1).fold(0, u64::saturating_add);
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
    let limit = if opts.hot_spots > 0 {
        opts.hot_spots
    } else {
        ALLOC_ROWS
    };
    writeln!(out)?;
    writeln!(
        out,
        "allocation hot spots: exact, all threads, inside root contexts ({} of {} sites by class)",
        rows.len().min(limit),
        rows.len()
    )?;
    let head = format!("{:>14} {:>7} {:>12}", "bytes", "bytes %", "objects");
    let width = head.chars().count() + 2;
    writeln!(out, "{head}  class  at site")?;
    for ((site, level), (count, bytes)) in rows.into_iter().take(limit) {
        let class = p.alloc_class(site, level);
        let at = match p.alloc_sites.get(&site) {
            Some(s) => format!("{} @{}", names.get(s.method), s.bci),
            None => format!("site {site}"),
        };
        let room = opts
            .width
            .saturating_sub(width + class.chars().count() + 2)
            .max(MIN_NAME);
        writeln!(
            out,
            "{:>14} {:>7} {:>12}  {}  {}",
            bytes,
            percent(bytes, all),
            count,
            escape(&class),
            escape(&names::fit(&at, room))
        )?;
    }
    Ok(())
}

fn back_trace(
    p: &Profile,
    merged: &ThreadProfile,
    method: u32,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<()> {
    let bt = back_traces(p, &merged.tree, method, opts.max_depth);
    let u = Unit::fit(bt.total_ns() as f64);
    writeln!(out)?;
    writeln!(
        out,
        "back traces of {}: {} calls, {} {}",
        escape(&names.get(method)),
        bt.calls(),
        u.format(bt.total_ns() as f64),
        u.name()
    )?;
    let head = format!(
        "{:>12} {:>10} {:>7}",
        "calls",
        format!("total {}", u.name()),
        "share"
    );
    let width = head.chars().count() + 2;
    writeln!(out, "{head}  called from")?;
    let mut open: Vec<bool> = Vec::new();
    for (i, depth, last) in bt.lines(p).into_iter().skip(1) {
        let n = &bt.nodes[i];
        // depth 1 = direct callers: draw them as roots of the listing.
        let d = depth - 1;
        open.truncate(d);
        open.resize(d, false);
        open.push(!last);
        let guide = guides(&open, d, last, guide_levels(opts.width, width));
        let mut extra = String::new();
        if depth == 1 && n.method == Some(method) {
            // its time is inside the outermost call's already
            extra.push_str(" (recursive calls)");
        }
        let full = match n.method {
            Some(m) => names.get(m),
            None => back_node_name(p, n),
        };
        let room = opts
            .width
            .saturating_sub(width + guide.chars().count() + extra.chars().count())
            .max(MIN_NAME);
        writeln!(
            out,
            "{:>12} {:>10} {:>7}  {}{}{}",
            n.calls,
            u.format(n.total_ns as f64),
            percent(n.total_ns, bt.total_ns()),
            guide,
            escape(&names::fit(&full, room)),
            extra
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
