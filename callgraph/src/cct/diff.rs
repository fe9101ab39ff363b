//! Node-by-node comparison of two profiles (`sprig diff a.sprig b.sprig`).
//!
//! Both profiles are merged over threads, then matched by path of method
//! names (class, name, descriptor): method ids are per-run and say nothing
//! across runs. Every path present in either run gets one [`DiffNode`] with
//! the times of each side (absent side = `None`), exact or sampled as
//! [`ProfileDiff::timing`] says, the bytes and objects each subtree
//! allocated (`--alloc`) and the time it waited (`--locks`).

use crate::profile::{MethodInfo, Metric, NodeId, Profile, Timing};
use std::collections::HashMap;
use std::sync::Arc;

/// One side of a compared node, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Side {
    pub calls: u64,
    pub total_ns: u64,
    pub self_ns: u64,
    /// Sampled timing: the 95% bound of `total_ns` from the samples behind
    /// it ([`crate::profile::sample_bound_ns`]); 0 for exact times.
    pub total_bound_ns: u64,
    /// Bytes and objects the subtree allocated (`--alloc`; 0 without).
    pub alloc_bytes: u64,
    pub alloc_objects: u64,
    /// Time the subtree waited (`--locks`: its wait rows; 0 without).
    pub waits_ns: u64,
    /// The node's own part of `alloc_bytes` and `alloc_objects`.
    pub alloc_bytes_self: u64,
    pub alloc_objects_self: u64,
    /// Bytes the subtree's allocation samples stand for
    /// (`--alloc-interval`, an estimate), and the node's own part.
    pub sampled_bytes: u64,
    pub sampled_bytes_self: u64,
    /// Bytes the subtree's live samples stood for at the end
    /// (`--alloc=live`, an estimate), and the node's own part.
    pub live_bytes: u64,
    pub live_bytes_self: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiffNode {
    /// Shared by every node of the method (one copy of its names).
    pub method: Arc<MethodInfo>,
    pub a: Option<Side>,
    pub b: Option<Side>,
    /// Children; every child index is greater than its parent's.
    pub children: Vec<NodeId>,
}

impl DiffNode {
    /// `b.total_ns - a.total_ns` (a missing side counts as 0).
    pub fn delta_total_ns(&self) -> i128 {
        side_total(self.b) - side_total(self.a)
    }

    /// `b.self_ns - a.self_ns` (a missing side counts as 0).
    pub fn delta_self_ns(&self) -> i128 {
        self.b.map_or(0, |s| s.self_ns as i128) - self.a.map_or(0, |s| s.self_ns as i128)
    }

    /// `b.calls - a.calls` (a missing side counts as 0).
    pub fn delta_calls(&self) -> i128 {
        self.b.map_or(0, |s| s.calls as i128) - self.a.map_or(0, |s| s.calls as i128)
    }
}

fn side_total(s: Option<Side>) -> i128 {
    s.map_or(0, |s| s.total_ns as i128)
}

/// The compared forest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileDiff {
    pub nodes: Vec<DiffNode>,
    pub roots: Vec<NodeId>,
    /// How each side's times were measured (`a`, `b`).
    pub timing: [Timing; 2],
    /// Each side's root calls (all roots, all threads).
    pub root_calls: [u64; 2],
    /// Each side has allocation samples (`--alloc-interval`).
    pub sampled: [bool; 2],
    /// Each side has live objects (`--alloc=live`).
    pub live: [bool; 2],
    /// What `total_ns` and `self_ns` hold ([`ProfileDiff::weighed_by`]):
    /// time unless the diff was weighed by another figure.
    pub weight: DiffWeight,
}

/// What `sprig diff --weight` weighs the stacks by (collapsed and flame
/// graph): the names of [`Metric`] where the diff has the metric, and
/// `live-bytes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DiffWeight {
    #[default]
    Time,
    Objects,
    Bytes,
    SampledBytes,
    LiveBytes,
}

/// The names [`DiffWeight`] parses from, for error messages.
pub const DIFF_WEIGHT_NAMES: &str = "time, objects, bytes, sampled-bytes, live-bytes";

impl DiffWeight {
    pub const ALL: [DiffWeight; 5] = [
        DiffWeight::Time,
        DiffWeight::Objects,
        DiffWeight::Bytes,
        DiffWeight::SampledBytes,
        DiffWeight::LiveBytes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DiffWeight::Time => "time",
            DiffWeight::Objects => "objects",
            DiffWeight::Bytes => "bytes",
            DiffWeight::SampledBytes => "sampled-bytes",
            DiffWeight::LiveBytes => "live-bytes",
        }
    }
}

impl std::str::FromStr for DiffWeight {
    type Err = String;

    fn from_str(s: &str) -> Result<DiffWeight, String> {
        DiffWeight::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| format!("unknown weight {s:?} (known: {DIFF_WEIGHT_NAMES})"))
    }
}

impl ProfileDiff {
    /// The diff with each side's time replaced by the figure `w` weighs
    /// by (total and own), for the stack renderers.
    pub fn weighed_by(mut self, w: DiffWeight) -> ProfileDiff {
        self.weight = w;
        if w == DiffWeight::Time {
            return self;
        }
        for n in &mut self.nodes {
            for s in [&mut n.a, &mut n.b].into_iter().flatten() {
                let (total, own) = match w {
                    DiffWeight::Time => (s.total_ns, s.self_ns),
                    DiffWeight::Objects => (s.alloc_objects, s.alloc_objects_self),
                    DiffWeight::Bytes => (s.alloc_bytes, s.alloc_bytes_self),
                    DiffWeight::SampledBytes => (s.sampled_bytes, s.sampled_bytes_self),
                    DiffWeight::LiveBytes => (s.live_bytes, s.live_bytes_self),
                };
                s.total_ns = total;
                s.self_ns = own;
                s.total_bound_ns = 0;
            }
        }
        self
    }
}

/// Compares `a` (before) with `b` (after).
pub fn diff(a: &Profile, b: &Profile) -> ProfileDiff {
    let mut out = ProfileDiff {
        timing: [a.timing, b.timing],
        ..ProfileDiff::default()
    };
    let mut index: HashMap<(NodeId, Arc<MethodInfo>), NodeId> = HashMap::new();
    // One copy of each method's names, however many nodes it has.
    let mut methods: HashMap<MethodInfo, Arc<MethodInfo>> = HashMap::new();
    for (which, p) in [(0, a), (1, b)] {
        let merged = p.merged();
        let tree = &merged.tree;
        let times = p.times(tree);
        let bytes = p.weights_from(tree, Metric::Bytes, &times);
        let objects = p.weights_from(tree, Metric::Objects, &times);
        let waits = p.weights_from(tree, Metric::Waits, &times);
        let sampled_bytes = p.weights_from(tree, Metric::SampledBytes, &times);
        out.sampled[which] = p.has_sampled();
        out.live[which] = p.live.is_some();
        let window = merged.samples.window();
        let sampled = p.timing == Timing::Sampled;
        out.root_calls[which] = tree
            .roots
            .iter()
            .filter_map(|&r| tree.nodes.get(r as usize))
            .map(|n| n.calls)
            .fold(0u64, u64::saturating_add);
        let mut stack: Vec<(NodeId, NodeId)> =
            tree.roots.iter().rev().map(|&r| (r, NodeId::MAX)).collect();
        while let Some((s, parent)) = stack.pop() {
            let n = &tree.nodes[s as usize];
            let info = p.method(n.method);
            let method = match methods.get(&info) {
                Some(m) => Arc::clone(m),
                None => {
                    let m = Arc::new(info.clone());
                    methods.insert(info, Arc::clone(&m));
                    m
                }
            };
            let key = (parent, method);
            let d = match index.get(&key) {
                Some(&d) => d,
                None => {
                    let d = out.nodes.len() as NodeId;
                    out.nodes.push(DiffNode {
                        method: Arc::clone(&key.1),
                        a: None,
                        b: None,
                        children: Vec::new(),
                    });
                    if parent == NodeId::MAX {
                        out.roots.push(d);
                    } else {
                        out.nodes[parent as usize].children.push(d);
                    }
                    index.insert(key, d);
                    d
                }
            };
            let t = times[s as usize];
            let side = if which == 0 {
                &mut out.nodes[d as usize].a
            } else {
                &mut out.nodes[d as usize].b
            };
            // Two ids with the same name (a class loaded twice) add up.
            let e = side.get_or_insert_with(Side::default);
            e.calls = e.calls.saturating_add(n.calls);
            e.total_ns = e.total_ns.saturating_add(t.total_ns);
            e.self_ns = e.self_ns.saturating_add(t.self_ns);
            e.alloc_bytes = e.alloc_bytes.saturating_add(bytes[s as usize].total);
            e.alloc_objects = e.alloc_objects.saturating_add(objects[s as usize].total);
            e.waits_ns = e.waits_ns.saturating_add(waits[s as usize].total);
            e.alloc_bytes_self = e.alloc_bytes_self.saturating_add(bytes[s as usize].own);
            e.alloc_objects_self = e.alloc_objects_self.saturating_add(objects[s as usize].own);
            e.sampled_bytes = e
                .sampled_bytes
                .saturating_add(sampled_bytes[s as usize].total);
            e.sampled_bytes_self = e
                .sampled_bytes_self
                .saturating_add(sampled_bytes[s as usize].own);
            if sampled {
                let bound = crate::profile::sample_bound_ns(t.total_samples, t.total_ns, window);
                e.total_bound_ns = e.total_bound_ns.saturating_add(bound);
            }
            for &c in n.children.iter().rev() {
                stack.push((c, d));
            }
        }
        if let Some(live) = &p.live {
            add_live(&mut out, which, p, live, &index, &methods);
        }
    }
    out
}

/// Adds side `which`'s live bytes (kept per thread and node) to the
/// nodes of the same path, then sums each subtree's.
fn add_live(
    out: &mut ProfileDiff,
    which: usize,
    p: &Profile,
    live: &crate::profile::live::LiveProfile,
    index: &HashMap<(NodeId, Arc<MethodInfo>), NodeId>,
    methods: &HashMap<MethodInfo, Arc<MethodInfo>>,
) {
    fn side(n: &mut DiffNode, which: usize) -> &mut Side {
        let s = if which == 0 { &mut n.a } else { &mut n.b };
        s.get_or_insert_with(Side::default)
    }
    for t in &p.threads {
        let tree = &t.tree;
        let mut stack: Vec<(NodeId, NodeId)> =
            tree.roots.iter().rev().map(|&r| (r, NodeId::MAX)).collect();
        while let Some((s, parent)) = stack.pop() {
            let Some(n) = tree.nodes.get(s as usize) else {
                continue;
            };
            let Some(method) = methods.get(&p.method(n.method)) else {
                continue;
            };
            let Some(&d) = index.get(&(parent, Arc::clone(method))) else {
                continue;
            };
            if let Some(f) = live.nodes.get(&(t.index, s)) {
                let e = side(&mut out.nodes[d as usize], which);
                e.live_bytes_self = e.live_bytes_self.saturating_add(f.bytes);
            }
            for &c in n.children.iter().rev() {
                stack.push((c, d));
            }
        }
    }
    // Children have greater indices: walking backwards sees them first.
    for i in (0..out.nodes.len()).rev() {
        let kids: u64 = out.nodes[i]
            .children
            .iter()
            .filter(|&&c| c as usize > i)
            .filter_map(|&c| {
                let n = &out.nodes[c as usize];
                if which == 0 { n.a } else { n.b }
            })
            .map(|s| s.live_bytes)
            .fold(0, u64::saturating_add);
        let n = &mut out.nodes[i];
        if let Some(s) = if which == 0 { &mut n.a } else { &mut n.b } {
            s.live_bytes = s.live_bytes_self.saturating_add(kids);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Node, ThreadProfile, Tree};

    fn profile(names: &[(u32, &str)], shape: &[(Option<u32>, u32, u64, u64)]) -> Profile {
        let mut p = Profile::new(1_000_000_000);
        for &(id, name) in names {
            p.methods.insert(id, MethodInfo::new("a.B", name, "()V"));
        }
        let mut t = Tree::default();
        for &(parent, method, calls, total) in shape {
            t.push(
                parent,
                Node {
                    method,
                    calls,
                    total_ticks: total,
                    ..Node::default()
                },
            );
        }
        t.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index: 0,
            java_id: 1,
            name: "main".into(),
            tree: t,
            bursts: Default::default(),
            samples: Default::default(),
        });
        p
    }

    /// `--locks`: each side carries the time its subtree waited, and a
    /// wait's row is matched by its name like a method.
    #[test]
    fn waits_per_node_on_each_side() {
        use sprig_wire::{WaitKind, wait_row_id};
        let row = wait_row_id(WaitKind::Blocked, 1);
        let with_wait = |waited: u64| {
            let mut p = profile(
                &[(1, "root"), (2, "x")],
                &[
                    (None, 1, 1, 100),
                    (Some(0), 2, 1, 80),
                    (Some(1), row, 1, waited),
                ],
            );
            p.methods
                .insert(row, MethodInfo::wait_row(WaitKind::Blocked, "a.Lock"));
            p
        };
        let d = diff(&with_wait(20), &with_wait(70));
        let node = |name: &str| d.nodes.iter().find(|n| n.method.name == name).unwrap();
        let waits = |n: &DiffNode| (n.a.unwrap().waits_ns, n.b.unwrap().waits_ns);
        assert_eq!(waits(node("root")), (20, 70));
        assert_eq!(waits(node("x")), (20, 70));
        assert_eq!(waits(node("(blocked on a.Lock)")), (20, 70));
        // Without waits, none.
        let plain = profile(&[(1, "root")], &[(None, 1, 1, 100)]);
        let d = diff(&plain, &plain);
        assert_eq!(d.nodes[0].a.unwrap().waits_ns, 0);
    }

    #[test]
    fn matches_by_name_not_id() {
        // run a: root(1) -> x(2), y(3); run b: ids differ, root(7) -> x(9), z(8)
        let a = profile(
            &[(1, "root"), (2, "x"), (3, "y")],
            &[(None, 1, 1, 100), (Some(0), 2, 2, 30), (Some(0), 3, 1, 50)],
        );
        let b = profile(
            &[(7, "root"), (9, "x"), (8, "z")],
            &[(None, 7, 1, 80), (Some(0), 9, 4, 60), (Some(0), 8, 1, 10)],
        );
        let d = diff(&a, &b);
        assert_eq!(d.roots.len(), 1);
        let root = &d.nodes[d.roots[0] as usize];
        assert_eq!(root.method.name, "root");
        assert_eq!(root.delta_total_ns(), -20);
        let by_name = |n: &str| {
            root.children
                .iter()
                .map(|&c| &d.nodes[c as usize])
                .find(|x| x.method.name == n)
                .cloned()
        };
        let x = by_name("x").unwrap();
        assert_eq!(x.a.map(|s| s.calls), Some(2));
        assert_eq!(x.b.map(|s| s.calls), Some(4));
        assert_eq!(x.delta_total_ns(), 30);
        assert_eq!(x.delta_calls(), 2);
        let y = by_name("y").unwrap();
        assert!(y.a.is_some() && y.b.is_none());
        assert_eq!(y.delta_total_ns(), -50);
        let z = by_name("z").unwrap();
        assert!(z.a.is_none() && z.b.is_some());
        // self of root: a 100-80 = 20, b 80-70 = 10
        assert_eq!(root.delta_self_ns(), -10);
    }
}
