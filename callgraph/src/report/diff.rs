//! Reports of a [`ProfileDiff`] (`sprig diff a.sprig b.sprig`).
//!
//! - [`DiffText`]: the merged tree of both runs with calls and totals of
//!   each side and the change, children by size of the change (then by
//!   name), with `--locks` on either side each side's wait time and its
//!   change; its first line says how each side was timed. `min_percent`
//!   hides nodes whose larger side is below that share of the larger run's
//!   total, `max_depth` limits the levels shown.
//! - [`DiffCollapsed`]: `frame;frame value_a value_b` lines (self
//!   nanoseconds of each run), the input of differential flame graphs. A
//!   stack holds at most `max_stack` frames: what lies deeper is one
//!   `[truncated N frames] total_a total_b` line under its last frame.

use super::names::{InfoNames, fit};
use super::{RenderOptions, Unit, sig3};

/// Columns a name keeps however deep its line.
const MIN_NAME: usize = 20;
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
/// Children are ordered by the size of their change with each side's
/// times multiplied by `scale` (1 for totals, 1/root calls per root call).
fn walk(
    d: &ProfileDiff,
    opts: &RenderOptions,
    max_stack: usize,
    scale: [f64; 2],
) -> Vec<(NodeId, usize, bool, Option<DiffCut>)> {
    let len = d.nodes.len();
    let change = |n: &DiffNode| (total_b(n) as f64 * scale[1] - total_a(n) as f64 * scale[0]).abs();
    let order = |x: &NodeId, y: &NodeId| -> Ordering {
        let (nx, ny) = (&d.nodes[*x as usize], &d.nodes[*y as usize]);
        change(ny)
            .total_cmp(&change(nx))
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

/// The change column: `new` and `gone` for a node absent on a side,
/// `noise` for a change within the two sides' 95% bounds, else the change
/// in percent of a (`from 0` when a measured no time).
fn change_text(a: Option<Scaled>, b: Option<Scaled>) -> String {
    let (a, b) = match (a, b) {
        (None, None) => return "-".into(),
        (None, Some(_)) => return "new".into(),
        (Some(_), None) => return "gone".into(),
        (Some(a), Some(b)) => (a, b),
    };
    let delta = b.total - a.total;
    let bound = a.bound + b.bound;
    if bound > 0.0 && delta.abs() <= bound {
        return "noise".into();
    }
    if a.total == 0.0 {
        return if b.total == 0.0 {
            "0.0%".into()
        } else {
            "from 0".into()
        };
    }
    let tenths = (delta * 1000.0 / a.total).round();
    let sign = if tenths < 0.0 { "-" } else { "+" };
    let t = tenths.abs() as u64;
    format!("{sign}{}.{}%", t / 10, t % 10)
}

/// One side of a node as the text shows it: per root call or in total.
#[derive(Clone, Copy, Debug)]
struct Scaled {
    calls: f64,
    total: f64,
    bound: f64,
}

fn scaled(s: Option<crate::cct::diff::Side>, scale: f64) -> Option<Scaled> {
    s.map(|s| Scaled {
        calls: s.calls as f64 * scale,
        total: s.total_ns as f64 * scale,
        bound: s.total_bound_ns as f64 * scale,
    })
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

/// The allocation columns of the text, each shown where either side
/// has its figures: exact bytes (`--alloc`), the sampled estimate
/// (`--alloc-interval`) and live bytes (`--alloc=live`), each the
/// subtree's, for a, b and the change.
struct AllocCols {
    exact: bool,
    sampled: bool,
    live: bool,
}

type Field = fn(&crate::cct::diff::Side) -> u64;

impl AllocCols {
    fn of(d: &ProfileDiff) -> AllocCols {
        let any = |f: Field| {
            d.nodes
                .iter()
                .any(|n| n.a.is_some_and(|s| f(&s) > 0) || n.b.is_some_and(|s| f(&s) > 0))
        };
        AllocCols {
            exact: any(|s| s.alloc_bytes),
            sampled: d.sampled.iter().any(|&x| x) && any(|s| s.sampled_bytes),
            live: d.live.iter().any(|&x| x) && any(|s| s.live_bytes),
        }
    }

    fn shown(&self) -> [(bool, [&'static str; 3], Field); 3] {
        [
            (self.exact, ["a bytes", "b bytes", "bytes change"], |s| {
                s.alloc_bytes
            }),
            (
                self.sampled,
                ["~a sampled", "~b sampled", "~sampled chg"],
                |s| s.sampled_bytes,
            ),
            (self.live, ["~a live", "~b live", "~live chg"], |s| {
                s.live_bytes
            }),
        ]
    }

    /// The line under the first that says which figures are exact and
    /// which are estimates; none without allocation columns.
    fn legend(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.exact {
            parts.push("bytes: exact, what the probes counted inside roots");
        }
        if self.sampled {
            parts.push(
                "~sampled: estimates from allocation samples (the unprofiled code below included)",
            );
        }
        if self.live {
            parts.push("~live: estimates of the sampled objects alive at the end");
        }
        (!parts.is_empty())
            .then(|| format!("allocated bytes of each subtree; {}", parts.join("; ")))
    }

    fn head(&self) -> String {
        let mut out = String::new();
        for (on, names, _) in self.shown() {
            if on {
                out.push_str(&format!(
                    " {:>12} {:>12} {:>12}",
                    names[0], names[1], names[2]
                ));
            }
        }
        out
    }

    fn row(&self, node: &crate::cct::diff::DiffNode, scale: [f64; 2]) -> String {
        let mut out = String::new();
        for (on, _, field) in self.shown() {
            if !on {
                continue;
            }
            let (a, b) = (
                node.a.map(|s| field(&s) as f64 * scale[0]),
                node.b.map(|s| field(&s) as f64 * scale[1]),
            );
            let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), sig3);
            let delta = b.unwrap_or(0.0) - a.unwrap_or(0.0);
            out.push_str(&format!(
                " {:>12} {:>12} {:>12}",
                show(a),
                show(b),
                format!(
                    "{}{}",
                    if delta < 0.0 { "-" } else { "+" },
                    sig3(delta.abs())
                )
            ));
        }
        out
    }
}

/// Text report of a diff: per root call of each side (`diff_totals`:
/// the runs' totals), one time unit for the table, stated in the header.
pub struct DiffText;

impl DiffText {
    pub fn render(
        &self,
        d: &ProfileDiff,
        opts: &RenderOptions,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let [ra, rb] = d.root_calls;
        let per_root = !opts.diff_totals && ra > 0 && rb > 0;
        let scale = if per_root {
            [1.0 / ra as f64, 1.0 / rb as f64]
        } else {
            [1.0, 1.0]
        };
        let what = if per_root {
            format!("per root call (a {ra}, b {rb} root calls; --totals: whole runs)")
        } else {
            format!("whole runs (a {ra}, b {rb} root calls)")
        };
        writeln!(out, "sprig diff: a -> b, {}; {what}", times_line(d.timing))?;
        let cols = AllocCols::of(d);
        if let Some(line) = cols.legend() {
            writeln!(out, "{line}")?;
        }
        let rows = walk(d, opts, usize::MAX, scale);
        let largest = rows
            .iter()
            .map(|&(n, ..)| {
                let node = &d.nodes[n as usize];
                (total_a(node) as f64 * scale[0]).max(total_b(node) as f64 * scale[1])
            })
            .fold(0.0f64, f64::max);
        let unit = Unit::fit(largest);
        let u = unit.name();
        let alloc_head = cols.head();
        // Waits (`--locks` on either side): the subtree's wait time.
        let waits = d
            .nodes
            .iter()
            .any(|n| n.a.is_some_and(|s| s.waits_ns > 0) || n.b.is_some_and(|s| s.waits_ns > 0));
        let waits_head = if waits {
            format!(
                " {:>12} {:>12} {:>12}",
                format!("a waits {u}"),
                format!("b waits {u}"),
                format!("waits chg {u}")
            )
        } else {
            String::new()
        };
        writeln!(
            out,
            "{:>10} {:>10} {:>12} {:>12} {:>12} {:>8}{waits_head}{alloc_head}  method",
            "a calls",
            "b calls",
            format!("a total {u}"),
            format!("b total {u}"),
            format!("change {u}"),
            "change"
        )?;
        let names = InfoNames::new(
            rows.iter().map(|&(n, ..)| &*d.nodes[n as usize].method),
            opts.signatures,
        );
        let mut open: Vec<bool> = Vec::new();
        let mut noise = false;
        for (n, depth, last, _) in rows {
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
            let (a, b) = (scaled(node.a, scale[0]), scaled(node.b, scale[1]));
            let calls = |s: Option<Scaled>| match s {
                None => "-".to_owned(),
                Some(s) if per_root => sig3(s.calls),
                Some(s) => format!("{}", s.calls as u64),
            };
            let total =
                |s: Option<Scaled>| s.map_or_else(|| "-".to_owned(), |s| unit.format(s.total));
            let delta = b.map_or(0.0, |s| s.total) - a.map_or(0.0, |s| s.total);
            let sign = if delta < 0.0 { "-" } else { "+" };
            let change = change_text(a, b);
            noise |= change == "noise";
            let alloc_cols = cols.row(node, scale);
            let waits_cols = if waits {
                let w =
                    |s: Option<crate::cct::diff::Side>, k: f64| s.map(|s| s.waits_ns as f64 * k);
                let (wa, wb) = (w(node.a, scale[0]), w(node.b, scale[1]));
                let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| unit.format(v));
                let dw = wb.unwrap_or(0.0) - wa.unwrap_or(0.0);
                format!(
                    " {:>12} {:>12} {:>12}",
                    show(wa),
                    show(wb),
                    format!(
                        "{}{}",
                        if dw < 0.0 { "-" } else { "+" },
                        unit.format(dw.abs())
                    )
                )
            } else {
                String::new()
            };
            let figures = format!(
                "{:>10} {:>10} {:>12} {:>12} {:>12} {:>8}{waits_cols}{alloc_cols}  ",
                calls(a),
                calls(b),
                total(a),
                total(b),
                format!("{sign}{}", unit.format(delta.abs())),
                change,
            );
            let room = opts
                .width
                .saturating_sub(figures.chars().count() + prefix.chars().count())
                .max(MIN_NAME);
            let name = fit(&names.get(&node.method), room);
            writeln!(out, "{figures}{prefix}{}", super::escape::escape(&name))?;
        }
        if noise {
            writeln!(out)?;
            writeln!(
                out,
                "  noise: the change is within the two sides' 95% bounds from their samples (+/-)"
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
        for (n, depth, _, cut) in walk(d, opts, opts.max_stack.max(1), [1.0, 1.0]) {
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
        let side = |total: f64, bound: f64| {
            Some(Scaled {
                calls: 1.0,
                total,
                bound,
            })
        };
        assert_eq!(change_text(side(100.0, 0.0), side(150.0, 0.0)), "+50.0%");
        assert_eq!(change_text(side(200.0, 0.0), side(100.0, 0.0)), "-50.0%");
        assert_eq!(change_text(None, side(5.0, 0.0)), "new");
        assert_eq!(change_text(side(5.0, 0.0), None), "gone");
        assert_eq!(change_text(side(5.0, 0.0), side(0.0, 0.0)), "-100.0%");
        assert_eq!(change_text(side(0.0, 0.0), side(5.0, 0.0)), "from 0");
        assert_eq!(change_text(side(100.0, 10.0), side(115.0, 10.0)), "noise");
        assert_eq!(change_text(side(100.0, 10.0), side(121.0, 10.0)), "+21.0%");
    }

    use crate::profile::{MethodInfo, Node, Profile, SampleCounts, ThreadProfile, Tree};

    /// A one-thread profile: `(parent, method name, calls, total ns,
    /// samples)` per node; sampled when any node has samples (each sample
    /// worth a tenth of its node's own time, 100 samples of the thread).
    fn run(shape: &[(Option<u32>, &str, u64, u64, u64)]) -> Profile {
        let mut p = Profile::new(1_000_000_000);
        let mut t = Tree::default();
        for (i, &(parent, name, calls, total, samples)) in shape.iter().enumerate() {
            p.methods
                .insert(i as u32, MethodInfo::new("app.Shop", name, "()V"));
            t.push(
                parent,
                Node {
                    method: i as u32,
                    calls,
                    total_ticks: total,
                    samples,
                    sampled_ticks: total,
                    ..Node::default()
                },
            );
        }
        t.recount();
        let sampled: u64 = shape.iter().map(|s| s.4).sum();
        if sampled > 0 {
            p.timing = Timing::Sampled;
        }
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index: 0,
            java_id: 1,
            name: "main".into(),
            tree: t,
            samples: SampleCounts {
                credited: sampled,
                outside: 100u64.saturating_sub(sampled),
                ..SampleCounts::default()
            },
            ..ThreadProfile::default()
        });
        p
    }

    fn text(a: &Profile, b: &Profile, totals: bool) -> String {
        let mut out = Vec::new();
        let opts = RenderOptions {
            diff_totals: totals,
            ..RenderOptions::default()
        };
        DiffText
            .render(&crate::cct::diff::diff(a, b), &opts, &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    fn line<'t>(text: &'t str, method: &str) -> &'t str {
        text.lines()
            .find(|l| l.ends_with(&format!("app.Shop.{method}")))
            .unwrap_or_else(|| panic!("no line of {method}:\n{text}"))
    }

    #[test]
    fn per_root_call_by_default_and_totals_on_request() {
        // a: 2 root calls of 100 us; b: 4 root calls of 200 us each, so the
        // total is 4 times a's but a call takes twice as long.
        let a = run(&[
            (None, "handle", 2, 200_000, 0),
            (Some(0), "load", 2, 100_000, 0),
        ]);
        let b = run(&[
            (None, "handle", 4, 800_000, 0),
            (Some(0), "load", 8, 200_000, 0),
        ]);
        let per_call = text(&a, &b, false);
        assert!(
            per_call.lines().next().unwrap().contains("per root call"),
            "{per_call}"
        );
        assert!(per_call.contains("a 2, b 4 root calls"), "{per_call}");
        assert!(line(&per_call, "handle").contains("+100.0%"), "{per_call}");
        // load: 1 call per root call in a, 2 in b; 50 us a root call in both.
        let load = line(&per_call, "load");
        assert!(load.contains("+0.0%"), "{per_call}");
        let figures: Vec<&str> = load.split_whitespace().collect();
        assert_eq!(&figures[..2], &["1.00", "2.00"], "{per_call}");

        let totals = text(&a, &b, true);
        assert!(
            totals.lines().next().unwrap().contains("whole runs"),
            "{totals}"
        );
        assert!(line(&totals, "handle").contains("+300.0%"), "{totals}");
        assert!(line(&totals, "load").contains("+100.0%"), "{totals}");
    }

    /// `--locks` on either side: the subtree's wait time of each side and
    /// its change, in the time unit of the report.
    #[test]
    fn waits_columns_when_either_side_waited() {
        use sprig_wire::{WaitKind, wait_row_id};
        let with_wait = |waited: u64| {
            let mut p = run(&[
                (None, "handle", 1, 1_000_000, 0),
                (Some(0), "load", 1, 800_000, 0),
            ]);
            let row = wait_row_id(WaitKind::Parked, 1);
            p.methods
                .insert(row, MethodInfo::wait_row(WaitKind::Parked, "app.Pool"));
            let t = &mut p.threads[0].tree;
            t.push(
                Some(1),
                Node {
                    method: row,
                    calls: 1,
                    total_ticks: waited,
                    ..Node::default()
                },
            );
            t.recount();
            p
        };
        let out = text(&with_wait(200_000), &with_wait(500_000), true);
        let head = out.lines().nth(1).unwrap();
        assert!(
            head.contains("a waits ms") && head.contains("b waits ms"),
            "{out}"
        );
        let load: Vec<&str> = line(&out, "load").split_whitespace().collect();
        // calls a, b; totals a, b; change, %; waits a, b, change.
        assert_eq!(&load[6..9], &["0.200", "0.500", "+0.300"], "{out}");
        let plain = run(&[(None, "handle", 1, 1_000_000, 0)]);
        let out = text(&plain, &plain, true);
        assert!(!out.contains("waits"), "{out}");
    }

    #[test]
    fn gone_and_new_only_for_nodes_absent_on_a_side() {
        // `fast` is called on both sides but takes no measured time in b;
        // `old` is only in a, `cache` only in b.
        let a = run(&[
            (None, "handle", 1, 100_000, 0),
            (Some(0), "fast", 3, 10_000, 0),
            (Some(0), "old", 1, 20_000, 0),
        ]);
        let b = run(&[
            (None, "handle", 1, 100_000, 0),
            (Some(0), "fast", 3, 0, 0),
            (Some(0), "cache", 1, 20_000, 0),
        ]);
        let t = text(&a, &b, false);
        let fast = line(&t, "fast");
        assert!(!fast.contains("gone") && fast.contains("-100.0%"), "{t}");
        assert!(line(&t, "old").contains("gone"), "{t}");
        assert!(line(&t, "cache").contains("new"), "{t}");
    }

    #[test]
    fn a_sampled_change_within_the_bounds_is_noise() {
        // 10 samples against 11 of 100: 1.0 ms against 1.1 ms, well within
        // the 95% bounds (about 0.6 ms each).
        let a = run(&[(None, "handle", 1, 1_000_000, 10)]);
        let b = run(&[(None, "handle", 1, 1_100_000, 11)]);
        let t = text(&a, &b, false);
        assert!(line(&t, "handle").contains("noise"), "{t}");
        assert!(t.contains("noise: "), "the legend explains it:\n{t}");
        // 10 samples against 60: far outside.
        let c = run(&[(None, "handle", 1, 6_000_000, 60)]);
        let t = text(&a, &c, false);
        assert!(!line(&t, "handle").contains("noise"), "{t}");
        // Exact times have no such bound.
        let (x, y) = (
            run(&[(None, "handle", 1, 1_000_000, 0)]),
            run(&[(None, "handle", 1, 1_001_000, 0)]),
        );
        assert!(!text(&x, &y, false).contains("noise"));
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
        assert!(first_line([Exact, Exact]).starts_with(
            "sprig diff: a -> b, exact times (adjust-time and probe cost subtracted); "
        ));
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
