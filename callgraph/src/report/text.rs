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
//! hot-spot table follows (sites by class, most bytes first); with
//! allocation samples too, a table of the contexts and classes whose exact
//! allocations the heap sampler saw ~0 of where it should have seen many,
//! the allocations the JIT likely removed (an inference, labelled so).
//!
//! Under each tree, a `latency` line per root gives its complete calls'
//! count, minimum, median, 90th and 99th percentile and maximum. In sampled
//! mode the table shows the samples behind each self time and the 95%
//! bounds (`+/-`, ASCII for ±) of the total and self times ([`sampled_row`]).

use super::escape::escape;
use super::names::{self, Names};
use super::view::tree_view;
use super::{Render, RenderOptions, Unit, ms, percent};
use crate::profile::{Metric, Profile, ThreadProfile, Times, Timing, own_allocs, sample_bound_ns};
use std::io::{self, Write};

mod session;
use session::{details, footer, probe_cost, summary, warnings};
mod tables;
use tables::{
    alloc_table, back_trace, hot_spot_table, live_table, lock_table, outside_table, scalar_table,
};

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
            scalar_table(p, m, opts, &names, out)?;
        }
        live_table(p, opts, &names, out)?;
        outside_table(p, opts, out)?;
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
    // Sampled allocations (`--alloc-interval`): the subtree's estimate.
    let sampled_bytes = p
        .has_sampled()
        .then(|| p.weights(&t.tree, Metric::SampledBytes));
    let figures = if sampled_bytes.is_some() {
        format!("{figures} {:>15}", "~sampled bytes")
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
        let row = match &sampled_bytes {
            Some(w) => format!("{row} {:>15}", w[line.node as usize].total),
            None => row,
        };
        writeln!(out, "{row}  {guide}{name}{extra}")?;
    }
    if sampled_bytes.is_some() {
        writeln!(
            out,
            "{:>12} (~sampled bytes: estimated from the JVM's allocation samples, what the \
             subtree and the unprofiled code below it allocated; alloc bytes are exact)",
            ""
        )?;
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

#[cfg(test)]
mod tests;
