//! Reports of a [`ProfileDiff`] (`sprig diff a.sprig b.sprig`).
//!
//! - [`DiffText`]: the merged tree of both runs with calls and totals of
//!   each side and the change, children by size of the change (then by
//!   name); its first line says how each side was timed. `min_percent`
//!   hides nodes whose larger side is below that share of the larger run's
//!   total, `max_depth` limits the levels shown.
//! - [`DiffCollapsed`]: `frame;frame value_a value_b` lines (self
//!   nanoseconds of each run), the input of differential flame graphs. A
//!   stack holds at most `max_stack` frames: what lies deeper is one
//!   `[truncated N frames] total_a total_b` line under its last frame.

use super::{RenderOptions, ms};
use crate::cct::diff::{DiffNode, ProfileDiff};
use crate::profile::{NodeId, Timing};
use std::cmp::Ordering;
use std::io::{self, Write};

fn total_a(n: &DiffNode) -> u64 {
    n.a.map_or(0, |s| s.total_ns)
}
fn total_b(n: &DiffNode) -> u64 {
    n.b.map_or(0, |s| s.total_ns)
}

/// What the maximum stack depth cut under one node of a diff: the frames
/// of the deepest cut path and the cut children's totals on each side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DiffCut {
    pub frames: usize,
    pub a_ns: u64,
    pub b_ns: u64,
}

/// Per node of `d`: the frames of its deepest path down, itself included
/// (children have greater indices: one backward pass).
pub(crate) fn subtree_depths(d: &ProfileDiff) -> Vec<usize> {
    let len = d.nodes.len();
    let mut out = vec![1usize; len];
    for i in (0..len).rev() {
        let deepest = d.nodes[i]
            .children
            .iter()
            .filter(|&&c| c as usize > i && (c as usize) < len)
            .map(|&c| out[c as usize])
            .max()
            .unwrap_or(0);
        out[i] = deepest.saturating_add(1);
    }
    out
}

/// The cut of `kids` (children of one node at the maximum stack depth);
/// `depths` from [`subtree_depths`], computed on first use.
pub(crate) fn cut(
    d: &ProfileDiff,
    kids: &[NodeId],
    depths: &mut Option<Vec<usize>>,
) -> Option<DiffCut> {
    if kids.is_empty() {
        return None;
    }
    let depths = depths.get_or_insert_with(|| subtree_depths(d));
    let mut c = DiffCut::default();
    for &k in kids {
        let n = &d.nodes[k as usize];
        c.frames = c.frames.max(depths[k as usize]);
        c.a_ns = c.a_ns.saturating_add(total_a(n));
        c.b_ns = c.b_ns.saturating_add(total_b(n));
    }
    Some(c)
}

/// Pre-order (node, depth, last, cut) with the thresholds applied; a node
/// at depth `max_stack - 1` shows no children: they are its cut.
fn walk(
    d: &ProfileDiff,
    opts: &RenderOptions,
    max_stack: usize,
) -> Vec<(NodeId, usize, bool, Option<DiffCut>)> {
    let len = d.nodes.len();
    let order = |x: &NodeId, y: &NodeId| -> Ordering {
        let (nx, ny) = (&d.nodes[*x as usize], &d.nodes[*y as usize]);
        ny.delta_total_ns()
            .abs()
            .cmp(&nx.delta_total_ns().abs())
            .then_with(|| nx.method.cmp(&ny.method))
            .then(x.cmp(y))
    };
    let run_total = |f: fn(&DiffNode) -> u64| {
        d.roots
            .iter()
            .filter(|&&r| (r as usize) < len)
            .map(|&r| f(&d.nodes[r as usize]))
            .fold(0u64, u64::saturating_add)
    };
    let whole = run_total(total_a).max(run_total(total_b));
    let shown = |n: &DiffNode| {
        let p = opts.min_percent;
        p.is_nan()
            || p <= 0.0
            || (whole > 0 && total_a(n).max(total_b(n)) as f64 * 100.0 >= p * whole as f64)
    };
    let max_depth = opts.max_depth.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut roots: Vec<NodeId> = d
        .roots
        .iter()
        .copied()
        .filter(|&r| (r as usize) < len && shown(&d.nodes[r as usize]))
        .collect();
    roots.sort_by(order);
    let mut stack: Vec<(NodeId, usize, bool)> = roots
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &r)| (r, 0, i + 1 == roots.len()))
        .collect();
    if max_depth == 0 {
        return out;
    }
    let mut depths = None;
    while let Some((n, depth, last)) = stack.pop() {
        if depth + 1 >= max_depth {
            out.push((n, depth, last, None));
            continue;
        }
        let mut kids: Vec<NodeId> = d.nodes[n as usize]
            .children
            .iter()
            .copied()
            .filter(|&c| c > n && (c as usize) < len && shown(&d.nodes[c as usize]))
            .collect();
        if depth + 1 >= max_stack {
            out.push((n, depth, last, cut(d, &kids, &mut depths)));
            continue;
        }
        out.push((n, depth, last, None));
        kids.sort_by(order);
        for (i, &c) in kids.iter().enumerate().rev() {
            stack.push((c, depth + 1, i + 1 == kids.len()));
        }
    }
    out
}

fn signed_ms(delta: i128) -> String {
    let sign = if delta < 0 { "-" } else { "+" };
    let abs = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    format!("{sign}{}", ms(abs))
}

fn change_percent(a: u64, b: u64) -> String {
    if a == 0 {
        return if b == 0 { "0.0%".into() } else { "new".into() };
    }
    if b == 0 {
        return "gone".into();
    }
    let tenths = (b as i128 - a as i128) * 1000 / a as i128;
    let sign = if tenths < 0 { "-" } else { "+" };
    let t = tenths.unsigned_abs();
    format!("{sign}{}.{}%", t / 10, t % 10)
}

/// How the two sides' times were measured, for the report's first line.
fn times_line(timing: [Timing; 2]) -> String {
    fn how(t: Timing) -> &'static str {
        match t {
            Timing::Exact => "exact times (adjust-time and probe cost subtracted)",
            Timing::Sampled => "sampled times (calls exact, time from samples, nothing subtracted)",
        }
    }
    match timing {
        [a, b] if a == b => how(a).to_owned(),
        [a, b] => format!(
            "a {}, b {}: the times were measured in two ways",
            how(a),
            how(b)
        ),
    }
}

/// Text report of a diff.
pub struct DiffText;

impl DiffText {
    pub fn render(
        &self,
        d: &ProfileDiff,
        opts: &RenderOptions,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        writeln!(out, "sprig diff: a -> b, {}", times_line(d.timing))?;
        writeln!(
            out,
            "{:>10} {:>10} {:>12} {:>12} {:>12} {:>8}  method",
            "a calls", "b calls", "a total ms", "b total ms", "change ms", "change"
        )?;
        let mut open: Vec<bool> = Vec::new();
        for (n, depth, last, _) in walk(d, opts, usize::MAX) {
            let node = &d.nodes[n as usize];
            open.truncate(depth);
            open.resize(depth, false);
            open.push(!last);
            let mut prefix = String::new();
            if depth > 0 {
                for &o in open.iter().take(depth.min(25)).skip(1) {
                    prefix.push_str(if o { "|  " } else { "   " });
                }
                if depth > 25 {
                    prefix.push_str(&format!("[{depth}] "));
                }
                prefix.push_str(if last { "\\- " } else { "+- " });
            }
            let calls = |s: Option<crate::cct::diff::Side>| {
                s.map_or_else(|| "-".to_owned(), |s| s.calls.to_string())
            };
            let total = |s: Option<crate::cct::diff::Side>| {
                s.map_or_else(|| "-".to_owned(), |s| ms(s.total_ns))
            };
            writeln!(
                out,
                "{:>10} {:>10} {:>12} {:>12} {:>12} {:>8}  {}{}",
                calls(node.a),
                calls(node.b),
                total(node.a),
                total(node.b),
                signed_ms(node.delta_total_ns()),
                change_percent(total_a(node), total_b(node)),
                prefix,
                super::escape::escape(&node.method.display())
            )?;
        }
        Ok(())
    }
}

/// Differential collapsed stacks: `frame;frame self_a self_b`.
pub struct DiffCollapsed;

impl DiffCollapsed {
    pub fn render(
        &self,
        d: &ProfileDiff,
        opts: &RenderOptions,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let mut path = String::new();
        let mut ends: Vec<usize> = Vec::new();
        for (n, depth, _, cut) in walk(d, opts, opts.max_stack.max(1)) {
            let node = &d.nodes[n as usize];
            ends.truncate(depth);
            path.truncate(ends.last().copied().unwrap_or(0));
            if !path.is_empty() {
                path.push(';');
            }
            path.push_str(&node.method.frame().replace(';', ":"));
            ends.push(path.len());
            let (a, b) = (
                node.a.map_or(0, |s| s.self_ns),
                node.b.map_or(0, |s| s.self_ns),
            );
            if a > 0 || b > 0 {
                writeln!(out, "{path} {a} {b}")?;
            }
            if let Some(c) = cut.filter(|c| c.a_ns > 0 || c.b_ns > 0) {
                writeln!(
                    out,
                    "{path};{} {} {}",
                    super::view::truncated_frame(c.frames),
                    c.a_ns,
                    c.b_ns
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_texts() {
        assert_eq!(signed_ms(-1_500_000), "-1.500");
        assert_eq!(signed_ms(2_000), "+0.002");
        assert_eq!(change_percent(100, 150), "+50.0%");
        assert_eq!(change_percent(200, 100), "-50.0%");
        assert_eq!(change_percent(0, 5), "new");
        assert_eq!(change_percent(5, 0), "gone");
    }

    fn first_line(timing: [Timing; 2]) -> String {
        let d = ProfileDiff {
            timing,
            ..ProfileDiff::default()
        };
        let mut out = Vec::new();
        DiffText
            .render(&d, &RenderOptions::default(), &mut out)
            .unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn the_first_line_says_how_each_side_was_timed() {
        use Timing::{Exact, Sampled};
        assert_eq!(
            first_line([Exact, Exact]),
            "sprig diff: a -> b, exact times (adjust-time and probe cost subtracted)"
        );
        let sampled = first_line([Sampled, Sampled]);
        assert!(
            sampled.contains("sampled times") && !sampled.contains("exact times"),
            "{sampled}"
        );
        let mixed = first_line([Exact, Sampled]);
        assert!(
            mixed.contains("a exact times") && mixed.contains("b sampled times"),
            "{mixed}"
        );
        assert!(first_line([Sampled, Exact]).contains("a sampled times"));
    }
}
