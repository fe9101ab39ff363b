//! Views: pure functions from a [`Profile`] to what a report shows. Every
//! walk is iterative (10k-deep recursion must not overflow the stack) and
//! every order is total (same input, same output).
//!
//! - [`tree_view`]: the tree in display order (children by exact total
//!   descending, then by name), with `min_percent` / `max_depth` applied.
//! - [`stack_view`]: the same, with the paths of the stack formats
//!   (collapsed, flame graph, pprof) cut at `max_stack` frames: what lies
//!   deeper is summed into one [`Cut`], shown as the frame
//!   [`truncated_frame`].
//! - [`hot_spots`]: methods by exact self time, with calls, total, average.
//! - [`back_traces`]: who called a method, and each caller path's share of
//!   its time.

use super::RenderOptions;
use crate::profile::{Metric, NodeId, Profile, Times, Tree, Weight};
use std::cmp::Ordering;
use std::collections::HashMap;

/// One shown node, in pre-order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    pub node: NodeId,
    /// 0 for roots.
    pub depth: usize,
    /// Last shown child of its parent (or last shown root).
    pub last: bool,
    /// Total of the root this node hangs under, in the view's metric.
    pub root_total: u64,
    /// Totals of this node's children that are not shown (below
    /// `min_percent` or beyond `max_depth`), in the view's metric.
    pub hidden: u64,
    /// [`stack_view`]: the children cut at the maximum stack depth, an
    /// index into [`TreeView::cuts`] (kept aside: few lines have one).
    pub cut: Option<u32>,
}

/// What a [`stack_view`] cut under one node at the maximum stack depth:
/// the children that would be shown and everything below them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    /// Frames of the deepest cut path (the stack depth lost).
    pub frames: usize,
    /// Totals of the cut children in the view's metric, summed.
    pub total: u64,
    /// Their exact (or sampled) times, summed.
    pub total_ns: u64,
    /// Calls of every cut node, summed.
    pub calls: u64,
}

/// The frame that stands for a [`Cut`] in the stack formats.
pub fn truncated_frame(frames: usize) -> String {
    format!("[truncated {frames} frames]")
}

/// A tree ready to print.
#[derive(Clone, Debug)]
pub struct TreeView {
    /// Derived times of every node of the tree (indexed by node).
    pub times: Vec<Times>,
    /// What the view weighs nodes by (sorting, thresholds, `hidden`,
    /// cuts, `total`).
    pub metric: Metric,
    /// Every node's value of `metric` (indexed by node).
    pub weights: Vec<Weight>,
    pub lines: Vec<Line>,
    /// What [`stack_view`] cut, indexed by [`Line::cut`].
    pub cuts: Vec<Cut>,
    /// Sum of the roots' totals in the view's metric.
    pub total: u64,
}

impl TreeView {
    /// What was cut under `line` at the maximum stack depth.
    pub fn cut(&self, line: &Line) -> Option<Cut> {
        line.cut.and_then(|i| self.cuts.get(i as usize).copied())
    }
}

fn by_total_then_name(
    profile: &Profile,
    tree: &Tree,
    weights: &[Weight],
    a: NodeId,
    b: NodeId,
) -> Ordering {
    let (ta, tb) = (weights[a as usize].total, weights[b as usize].total);
    let (ma, mb) = (tree.nodes[a as usize].method, tree.nodes[b as usize].method);
    tb.cmp(&ta)
        .then_with(|| name_cmp(profile, ma, mb))
        .then(a.cmp(&b))
}

fn name_cmp(profile: &Profile, a: u32, b: u32) -> Ordering {
    match (profile.methods.get(&a), profile.methods.get(&b)) {
        (Some(x), Some(y)) => x.cmp(y).then(a.cmp(&b)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(&b),
    }
}

fn passes(min_percent: f64, value: u64, of: u64) -> bool {
    if min_percent.is_nan() || min_percent <= 0.0 {
        return true;
    }
    of > 0 && value as f64 * 100.0 >= min_percent * of as f64
}

/// Children of `i` that respect the tree invariant (so no walk can loop).
fn children(tree: &Tree, i: NodeId) -> impl Iterator<Item = NodeId> + '_ {
    let len = tree.nodes.len();
    tree.nodes[i as usize]
        .children
        .iter()
        .copied()
        .filter(move |&c| c > i && (c as usize) < len)
}

/// The tree in display order with the thresholds of `opts` applied.
/// `min_percent` compares a node's exact total with its root's (a root with
/// the sum of all roots); `max_depth` = number of levels shown (1 = roots).
pub fn tree_view(profile: &Profile, tree: &Tree, opts: &RenderOptions) -> TreeView {
    view(profile, tree, opts, usize::MAX, Metric::Time)
}

/// [`tree_view`] for the stack formats: a node at depth `max_stack - 1`
/// (the last frame a stack may hold) shows none of its children; those that
/// pass `min_percent` and the whole subtrees under them are its [`Cut`]
/// (the others' time stays in its `hidden_ns`, as in [`tree_view`]). A
/// `max_depth` at or above the cut folds as in [`tree_view`] instead.
pub fn stack_view(profile: &Profile, tree: &Tree, opts: &RenderOptions) -> TreeView {
    view(profile, tree, opts, opts.max_stack.max(1), opts.weight)
}

/// Per node: frames of its deepest path down (itself included), and the
/// calls of its whole subtree. Children have greater indices, so one
/// backward pass sees every child before its parent.
fn subtree_depths(tree: &Tree) -> Vec<(usize, u64)> {
    let len = tree.nodes.len();
    let mut out = vec![(1usize, 0u64); len];
    for i in (0..len).rev() {
        let mut frames = 1usize;
        let mut calls = tree.nodes[i].calls;
        for c in children(tree, i as NodeId) {
            let (f, k) = out[c as usize];
            frames = frames.max(f.saturating_add(1));
            calls = calls.saturating_add(k);
        }
        out[i] = (frames, calls);
    }
    out
}

fn view(
    profile: &Profile,
    tree: &Tree,
    opts: &RenderOptions,
    max_stack: usize,
    metric: Metric,
) -> TreeView {
    let times = profile.times(tree);
    let weights = profile.weights_from(tree, metric, &times);
    let mut roots: Vec<NodeId> = tree
        .roots
        .iter()
        .copied()
        .filter(|&r| (r as usize) < tree.nodes.len())
        .collect();
    roots.sort_by(|&a, &b| by_total_then_name(profile, tree, &weights, a, b));
    let total = roots
        .iter()
        .map(|&r| weights[r as usize].total)
        .fold(0u64, u64::saturating_add);
    roots.retain(|&r| passes(opts.min_percent, weights[r as usize].total, total));
    let max_depth = opts.max_depth.unwrap_or(usize::MAX);
    let mut lines = Vec::new();
    if max_depth == 0 {
        return TreeView {
            times,
            metric,
            weights,
            lines,
            cuts: Vec::new(),
            total,
        };
    }
    // (node, depth, last, root total)
    let mut stack: Vec<(NodeId, usize, bool, u64)> = Vec::new();
    for (i, &r) in roots.iter().enumerate().rev() {
        stack.push((r, 0, i + 1 == roots.len(), weights[r as usize].total));
    }
    let mut kids: Vec<NodeId> = Vec::new();
    // Computed at the first cut.
    let mut below: Option<Vec<(usize, u64)>> = None;
    let mut cuts = Vec::new();
    while let Some((n, depth, last, root_total)) = stack.pop() {
        kids.clear();
        kids.extend(children(tree, n));
        let mut hidden = 0u64;
        let mut cut = None;
        if depth + 1 >= max_depth {
            for &c in &kids {
                hidden = hidden.saturating_add(weights[c as usize].total);
            }
            kids.clear();
        } else {
            kids.retain(|&c| {
                let t = weights[c as usize].total;
                let keep = passes(opts.min_percent, t, root_total);
                if !keep {
                    hidden = hidden.saturating_add(t);
                }
                keep
            });
            if depth + 1 >= max_stack && !kids.is_empty() {
                let below = below.get_or_insert_with(|| subtree_depths(tree));
                let mut c = Cut::default();
                for &k in &kids {
                    let (frames, calls) = below[k as usize];
                    c.frames = c.frames.max(frames);
                    c.calls = c.calls.saturating_add(calls);
                    c.total = c.total.saturating_add(weights[k as usize].total);
                    c.total_ns = c.total_ns.saturating_add(times[k as usize].total_ns);
                }
                cut = Some(cuts.len() as u32);
                cuts.push(c);
                kids.clear();
            }
            kids.sort_by(|&a, &b| by_total_then_name(profile, tree, &weights, a, b));
        }
        lines.push(Line {
            node: n,
            depth,
            last,
            root_total,
            hidden,
            cut,
        });
        for (i, &c) in kids.iter().enumerate().rev() {
            stack.push((c, depth + 1, i + 1 == kids.len(), root_total));
        }
    }
    TreeView {
        times,
        metric,
        weights,
        lines,
        cuts,
        total,
    }
}

/// A method's exact self time summed over every context it ran in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotSpot {
    pub method: u32,
    /// Every call, recursive ones included.
    pub calls: u64,
    pub self_ns: u64,
    /// Exact time inside the method, counted once per outermost call (a
    /// recursive call's time is already inside its caller's).
    pub total_ns: u64,
    /// `total_ns / calls` (windows timing: each call weighed by
    /// [`Profile::window_call_weights`]).
    pub avg_ns: u64,
    /// Calibrated probe cost taken out of the method's own code.
    pub probe_self_ns: u64,
}

impl HotSpot {
    /// More probe cost was taken out of the method's own code than time is
    /// left in it (see [`crate::profile::Times::probe_bound`]).
    pub fn self_probe_bound(&self) -> bool {
        self.probe_self_ns > self.self_ns
    }
}

/// Which nodes are the outermost occurrence of their method on their path
/// (no ancestor runs the same method).
fn outermost(tree: &Tree) -> Vec<bool> {
    let mut out = vec![true; tree.nodes.len()];
    let mut on_path: HashMap<u32, u32> = HashMap::new();
    // (node, leaving)
    let mut stack: Vec<(NodeId, bool)> = tree
        .roots
        .iter()
        .rev()
        .filter(|&&r| (r as usize) < tree.nodes.len())
        .map(|&r| (r, false))
        .collect();
    while let Some((n, leaving)) = stack.pop() {
        let m = tree.nodes[n as usize].method;
        if leaving {
            if let Some(c) = on_path.get_mut(&m) {
                *c -= 1;
            }
            continue;
        }
        let c = on_path.entry(m).or_insert(0);
        out[n as usize] = *c == 0;
        *c += 1;
        stack.push((n, true));
        stack.extend(children(tree, n).map(|c| (c, false)));
    }
    out
}

/// Methods by exact self time (descending, then by name), over one tree
/// (pass [`Profile::merged`]'s tree for all threads).
pub fn hot_spots(profile: &Profile, tree: &Tree) -> Vec<HotSpot> {
    let times = profile.times(tree);
    let outer = outermost(tree);
    // windows timing: calls weighed onto the times' scale, for the mean
    let weights = profile.window_call_weights(tree);
    let mut weighed: HashMap<u32, f64> = HashMap::new();
    let mut by_method: HashMap<u32, HotSpot> = HashMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        let h = by_method.entry(n.method).or_insert(HotSpot {
            method: n.method,
            calls: 0,
            self_ns: 0,
            total_ns: 0,
            avg_ns: 0,
            probe_self_ns: 0,
        });
        h.calls = h.calls.saturating_add(n.calls);
        if let Some(w) = &weights {
            *weighed.entry(n.method).or_default() += n.calls as f64 * w[i];
        }
        h.self_ns = h.self_ns.saturating_add(times[i].self_ns);
        h.probe_self_ns = h.probe_self_ns.saturating_add(times[i].probe_self_ns);
        if outer[i] {
            h.total_ns = h.total_ns.saturating_add(times[i].total_ns);
        }
    }
    let mut v: Vec<HotSpot> = by_method
        .into_values()
        .map(|mut h| {
            h.avg_ns = match weighed.get(&h.method) {
                Some(&c) if c > 0.0 => (h.total_ns as f64 / c).round() as u64,
                _ => h.total_ns.checked_div(h.calls).unwrap_or(0),
            };
            h
        })
        .collect();
    v.sort_by(|a, b| {
        b.self_ns
            .cmp(&a.self_ns)
            .then_with(|| name_cmp(profile, a.method, b.method))
    });
    v
}

/// One caller in a back trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackNode {
    /// The caller, `None` when the traced method was entered as a root (no
    /// instrumented caller).
    pub method: Option<u32>,
    /// Calls of the traced method made through this caller path.
    pub calls: u64,
    /// Exact time of the traced method spent under this caller path.
    pub total_ns: u64,
    pub children: Vec<usize>,
}

/// Who called one method. `nodes[0]` is the method itself; its children are
/// its direct callers, their children the callers' callers, and so on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackTrace {
    pub method: u32,
    pub nodes: Vec<BackNode>,
}

impl BackTrace {
    pub fn calls(&self) -> u64 {
        self.nodes.first().map_or(0, |n| n.calls)
    }
    pub fn total_ns(&self) -> u64 {
        self.nodes.first().map_or(0, |n| n.total_ns)
    }
    /// Share (0..=1) of the traced method's time that went through `node`.
    pub fn share(&self, node: usize) -> f64 {
        let total = self.total_ns();
        if total == 0 {
            return 0.0;
        }
        self.nodes
            .get(node)
            .map_or(0.0, |n| n.total_ns as f64 / total as f64)
    }

    /// Pre-order (node, depth, last) with callers sorted by time, then name.
    pub fn lines(&self, profile: &Profile) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::new();
        if self.nodes.is_empty() {
            return out;
        }
        let key = |i: &usize| {
            let n = &self.nodes[*i];
            (
                std::cmp::Reverse(n.total_ns),
                n.method.map(|m| profile.method(m)),
            )
        };
        let mut stack = vec![(0usize, 0usize, true)];
        while let Some((i, depth, last)) = stack.pop() {
            out.push((i, depth, last));
            let mut kids: Vec<usize> = self.nodes[i]
                .children
                .iter()
                .copied()
                .filter(|&c| c > i && c < self.nodes.len())
                .collect();
            kids.sort_by_cached_key(key);
            for (k, &c) in kids.iter().enumerate().rev() {
                stack.push((c, depth + 1, k + 1 == kids.len()));
            }
        }
        out
    }
}

/// The back traces of `method` over one tree. `max_depth` bounds how many
/// caller levels are followed (None = up to the root).
pub fn back_traces(
    profile: &Profile,
    tree: &Tree,
    method: u32,
    max_depth: Option<usize>,
) -> BackTrace {
    let times = profile.times(tree);
    let outer = outermost(tree);
    let parents = tree.parents();
    let max_depth = max_depth.unwrap_or(usize::MAX);
    let mut bt = BackTrace {
        method,
        nodes: vec![BackNode {
            method: Some(method),
            calls: 0,
            total_ns: 0,
            children: Vec::new(),
        }],
    };
    let mut index: HashMap<(usize, Option<u32>), usize> = HashMap::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.method != method {
            continue;
        }
        let calls = n.calls;
        // A recursive occurrence's time is inside the outermost one already.
        let ns = if outer[i] { times[i].total_ns } else { 0 };
        let add = |b: &mut BackNode| {
            b.calls = b.calls.saturating_add(calls);
            b.total_ns = b.total_ns.saturating_add(ns);
        };
        add(&mut bt.nodes[0]);
        let mut cur = 0usize;
        let mut p = parents[i];
        let mut depth = 0usize;
        // Recursive occurrences show as their direct caller only (the method
        // itself): following each of them to the root would cost depth².
        let limit = if outer[i] {
            max_depth
        } else {
            max_depth.min(1)
        };
        loop {
            if depth >= limit {
                break;
            }
            let caller = p.map(|p| tree.nodes[p as usize].method);
            let next = match index.get(&(cur, caller)) {
                Some(&x) => x,
                None => {
                    let x = bt.nodes.len();
                    bt.nodes.push(BackNode {
                        method: caller,
                        calls: 0,
                        total_ns: 0,
                        children: Vec::new(),
                    });
                    bt.nodes[cur].children.push(x);
                    index.insert((cur, caller), x);
                    x
                }
            };
            add(&mut bt.nodes[next]);
            cur = next;
            depth += 1;
            match p {
                Some(q) => p = parents[q as usize],
                None => break,
            }
            if p.is_none() {
                break;
            }
        }
    }
    bt
}

/// Name shown for a back-trace node.
pub fn back_node_name(profile: &Profile, n: &BackNode) -> String {
    match n.method {
        Some(m) => profile.display_name(m),
        None => "(entered as a root)".to_owned(),
    }
}

/// The waits of one kind on one monitor class, over a tree (`--locks`):
/// the lock view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockLine {
    /// The wait row's id (its kind and monitor class).
    pub row: u32,
    pub count: u64,
    /// Measured time of the waits, in nanoseconds.
    pub ns: u64,
    /// The contexts that waited, the most waited first: the methods from
    /// the one that waited out to its root, the waits there, their ns.
    pub waiters: Vec<(Vec<u32>, u64, u64)>,
    /// Who held the monitor when the contended enters began, the longest
    /// first: owner id (`Profile::owners`), waits, their ns. The waits
    /// whose owner was not read are not in it.
    pub owners: Vec<(u32, u64, u64)>,
}

/// The lock view of `tree`: one line per wait row id (kind and monitor
/// class), the most waited first, each with the contexts that waited.
pub fn lock_view(profile: &Profile, tree: &Tree) -> Vec<LockLine> {
    let parents = tree.parents();
    let mut lines: HashMap<u32, LockLine> = HashMap::new();
    for (i, n) in tree.nodes.iter().enumerate().filter(|(_, n)| n.is_wait()) {
        let ns = crate::profile::ticks_to_ns(n.total_ticks, profile.ticks_per_sec);
        let mut path = Vec::new();
        let mut at = parents.get(i).copied().flatten();
        while let Some(p) = at {
            path.push(tree.nodes[p as usize].method);
            at = parents.get(p as usize).copied().flatten();
        }
        let line = lines.entry(n.method).or_insert(LockLine {
            row: n.method,
            count: 0,
            ns: 0,
            waiters: Vec::new(),
            owners: Vec::new(),
        });
        line.count = line.count.saturating_add(n.calls);
        line.ns = line.ns.saturating_add(ns);
        line.waiters.push((path, n.calls, ns));
        for o in &n.owners {
            let ons = crate::profile::ticks_to_ns(o.ticks, profile.ticks_per_sec);
            match line.owners.iter_mut().find(|x| x.0 == o.owner) {
                Some(x) => {
                    x.1 = x.1.saturating_add(o.count);
                    x.2 = x.2.saturating_add(ons);
                }
                None => line.owners.push((o.owner, o.count, ons)),
            }
        }
    }
    let mut v: Vec<LockLine> = lines.into_values().collect();
    for l in &mut v {
        l.waiters
            .sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        l.owners
            .sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    }
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.row.cmp(&b.row)));
    v
}
