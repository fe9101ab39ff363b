//! The text report's tables beside the trees: hot spots, the waits
//! (`--locks`), allocation sites (`--alloc`) and back traces.

use super::{MIN_NAME, guide_levels, guides, time_marked, unit_of};
use crate::profile::{Profile, ThreadProfile};
use crate::report::escape::escape;
use crate::report::names::{self, Names};
use crate::report::view::{back_node_name, back_traces, hot_spots, lock_view};
use crate::report::{RenderOptions, Unit, percent};
use std::io::{self, Write};

/// The hot spots; whether a time was marked `~`.
pub(super) fn hot_spot_table(
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
/// monitor class, all threads, the waits' count and time, the contexts
/// that waited (the three that waited longest) and, for contended
/// monitors, the threads that held them and where (the three held
/// longest).
pub(super) fn lock_table(
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
        for &(owner, count, ns) in l.owners.iter().take(SHOWN) {
            let who = p
                .owners
                .get(&owner)
                .map_or_else(|| format!("owner {owner}"), |o| o.display());
            writeln!(
                out,
                "{:>10} {:>8}    held by {}",
                unit.format(ns as f64),
                count,
                escape(&who)
            )?;
        }
        if l.owners.len() > SHOWN {
            writeln!(
                out,
                "{:>19}    and {} more owners",
                "",
                l.owners.len() - SHOWN
            )?;
        }
    }
    Ok(())
}

/// Rows of the allocation hot-spot table.
const ALLOC_ROWS: usize = 20;

/// Rows of an allocation table: `--hot-spots` when given, else
/// [`ALLOC_ROWS`].
fn alloc_rows(opts: &RenderOptions) -> usize {
    if opts.hot_spots > 0 {
        opts.hot_spots
    } else {
        ALLOC_ROWS
    }
}

/// The last columns of an allocation table's row: the class, then where
/// (a site, a context) cut to the room `opts.width` leaves after the
/// figures' `width` and the class.
fn class_and_where(opts: &RenderOptions, width: usize, class: &str, place: &str) -> String {
    let room = opts
        .width
        .saturating_sub(width + class.chars().count() + 2)
        .max(MIN_NAME);
    format!("{}  {}", escape(class), escape(&names::fit(place, room)))
}

/// The allocation hot spots (`--alloc`): sites by class, most bytes first,
/// over every thread; exact counts.
pub(super) fn alloc_table(
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
    let limit = alloc_rows(opts);
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
        writeln!(
            out,
            "{:>14} {:>7} {:>12}  {}",
            bytes,
            percent(bytes, all),
            count,
            class_and_where(opts, width, &class, &at)
        )?;
    }
    Ok(())
}

/// The live objects (`--alloc=live`): per allocation context (its node
/// and the caller above it) and class, the live bytes now and their growth
/// over the last collections, most live bytes first.
pub(super) fn live_table(
    p: &Profile,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<()> {
    let Some(l) = &p.live else {
        return Ok(());
    };
    let limit = alloc_rows(opts);
    let rows = &l.now.rows;
    writeln!(out)?;
    writeln!(
        out,
        "live objects: estimates from the JVM's allocation samples not freed, inside root \
         contexts, after {} garbage collections ({} of {} contexts by class)",
        l.now.gc,
        rows.len().min(limit),
        rows.len()
    )?;
    let head = format!(
        "{:>14} {:>7} {:>12} {:>15}",
        "~live bytes", "live %", "~objects", "growth (3 GCs)"
    );
    let width = head.chars().count() + 2;
    writeln!(out, "{head}  class  context")?;
    for r in rows.iter().take(limit) {
        let class = p.sampled_class(r.class);
        let path = l.contexts.get(r.context as usize).map_or(&[][..], |c| c);
        let context = path
            .iter()
            .rev()
            .take(2)
            .map(|&m| names.get(m))
            .collect::<Vec<_>>()
            .join(" < ");
        let growth = l
            .growth(r.context, r.class)
            .map_or_else(|| "-".to_owned(), |g| format!("{g:+}"));
        writeln!(
            out,
            "{:>14} {:>7} {:>12} {:>15}  {}",
            r.live.bytes,
            percent(r.live.bytes, l.now.total.bytes),
            r.live.objects,
            growth,
            class_and_where(opts, width, &class, &context)
        )?;
    }
    if l.lost_frees > 0 {
        writeln!(
            out,
            "({} frees were lost: their objects are counted live)",
            l.lost_frees
        )?;
    }
    Ok(())
}

pub(super) fn back_trace(
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

/// The logical allocations the JIT likely removed (escape analysis): per
/// calling context of the merged tree and class, the exact objects the
/// heap sampler should have seen many times and saw (almost) never
/// ([`crate::profile::Physical`]); nothing without allocation samples to
/// gauge the interval by. Most exact bytes first.
pub(super) fn scalar_table(
    p: &Profile,
    merged: &ThreadProfile,
    opts: &RenderOptions,
    names: &Names,
    out: &mut dyn Write,
) -> io::Result<()> {
    let Some(gauge) = p.sampling_gauge() else {
        return Ok(());
    };
    let nodes = &merged.tree.nodes;
    let mut parent = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &c in &n.children {
            if let Some(slot) = parent.get_mut(c as usize) {
                *slot = Some(i);
            }
        }
    }
    let mut rows = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.allocs.is_empty() {
            continue;
        }
        for a in p.node_allocs_physical(n, Some(gauge)) {
            if let Some(ph) = a.physical.as_ref().filter(|ph| ph.likely_scalar_replaced) {
                let at = match parent[i] {
                    Some(up) => {
                        format!("{} > {}", names.get(nodes[up].method), names.get(n.method))
                    }
                    None => names.get(n.method),
                };
                rows.push((
                    a.bytes,
                    a.count,
                    ph.bytes_est,
                    ph.expected_samples,
                    a.class.clone(),
                    at,
                ));
            }
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.5.cmp(&b.5)));
    writeln!(out)?;
    writeln!(
        out,
        "logical allocations the JIT likely removed (escape analysis), an inference:"
    )?;
    writeln!(
        out,
        "  exact objects whose samples stand for under a tenth of their bytes where {} or more were expected",
        crate::profile::SCALAR_MIN_EXPECTED
    )?;
    let head = format!(
        "{:>14} {:>12} {:>14} {:>9}",
        "exact bytes", "objects", "~sampled bytes", "expected"
    );
    let width = head.chars().count() + 2;
    writeln!(out, "{head}  class  in")?;
    for (bytes, count, est, expected, class, at) in rows {
        let room = opts
            .width
            .saturating_sub(width + class.chars().count() + 2)
            .max(MIN_NAME);
        writeln!(
            out,
            "{bytes:>14} {count:>12} {est:>14} {expected:>9.0}  {}  {}",
            escape(&class),
            escape(&names::fit(&at, room))
        )?;
    }
    Ok(())
}

/// Rows of the table of allocations outside every root.
const OUTSIDE_ROWS: usize = 10;
/// Frames shown under each of its rows.
const OUTSIDE_FRAMES: usize = 4;

/// The allocation samples outside every root context (`--alloc-interval`):
/// per stack and class, the estimated bytes, most first, with the stack's
/// innermost frames under each row.
pub(super) fn outside_table(
    p: &Profile,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let Some(o) = p.outside_allocs() else {
        return Ok(());
    };
    let limit = if opts.hot_spots > 0 {
        opts.hot_spots
    } else {
        OUTSIDE_ROWS
    };
    let all = o.bytes_est().saturating_add(o.unkept_bytes_est);
    let samples = o
        .stacks
        .iter()
        .fold(o.unkept, |n, s| n.saturating_add(s.samples));
    writeln!(out)?;
    writeln!(
        out,
        "allocations outside roots (sampled): estimates from {samples} allocation samples taken \
         outside every root context, all threads ({} of {} stacks by class)",
        o.stacks.len().min(limit),
        o.stacks.len()
    )?;
    let head = format!("{:>14} {:>7} {:>9}", "~bytes", "bytes %", "samples");
    let indent = head.chars().count() + 2;
    writeln!(out, "{head}  class, innermost frame first")?;
    let room = opts.width.saturating_sub(indent + 3).max(MIN_NAME);
    for s in o.stacks.iter().take(limit) {
        writeln!(
            out,
            "{:>14} {:>7} {:>9}  {}",
            s.bytes_est,
            percent(s.bytes_est, all),
            s.samples,
            escape(&p.sampled_class(s.class))
        )?;
        for &f in s.frames.iter().take(OUTSIDE_FRAMES) {
            let m = o.frame(f);
            let name = if m.class.is_empty() {
                m.name
            } else {
                format!("{}.{}", m.class, m.name)
            };
            writeln!(out, "{:indent$}at {}", "", escape(&names::fit(&name, room)))?;
        }
        let more = s.frames.len().saturating_sub(OUTSIDE_FRAMES);
        if more > 0 || s.truncated {
            let plus = if s.truncated { "+" } else { "" };
            writeln!(out, "{:indent$}... {more}{plus} more frames", "")?;
        }
    }
    if o.unkept > 0 {
        writeln!(
            out,
            "({} samples, ~{} bytes, kept no stack: the agent's table was full or the stack \
             could not be read)",
            o.unkept, o.unkept_bytes_est
        )?;
    }
    Ok(())
}
