//! One thread's partial calling context tree: a node per calling context
//! seen, the sample counts of both views, and Whaley's edge activations.

use std::collections::HashMap;

use super::View;

/// One calling context seen in the samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PNode {
    /// The frame's method id (`FrameMethod`), or a pseudo-frame.
    pub method: u32,
    /// `None` for a root (an outermost frame).
    pub parent: Option<u32>,
    /// Children, in the order first seen; each greater than its parent.
    pub children: Vec<u32>,
    /// Samples whose leaf is this node, in the wall view, and their
    /// weight in ns.
    pub wall_self: u64,
    pub wall_ns: u64,
    /// The same in the CPU view.
    pub cpu_self: u64,
    pub cpu_ns: u64,
    /// New activations of the edge from the parent (module docs of
    /// `stacks`): a lower bound on the calls made in this context.
    pub activations: u64,
}

impl PNode {
    /// Self samples and their weight in `view`.
    pub fn own(&self, view: View) -> (u64, u64) {
        match view {
            View::Wall => (self.wall_self, self.wall_ns),
            View::Cpu => (self.cpu_self, self.cpu_ns),
        }
    }
}

/// A thread's partial calling context tree. Nodes only ever get added; a
/// child's index is greater than its parent's.
#[derive(Clone, Debug, Default)]
pub struct Pcct {
    pub nodes: Vec<PNode>,
    pub roots: Vec<u32>,
    /// (parent or `u32::MAX` for the root level, method) -> node.
    index: HashMap<(u32, u32), u32>,
    /// The previous sample's path, outermost first.
    prev: Vec<u32>,
}

/// What one sample adds to a tree.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hit {
    pub wall_ns: u64,
    /// `Some(weight)` when the sample counts in the CPU view.
    pub cpu_ns: Option<u64>,
}

impl Pcct {
    /// The node of `method` under `parent`, made when first seen.
    fn child(&mut self, parent: Option<u32>, method: u32) -> u32 {
        let key = (parent.unwrap_or(u32::MAX), method);
        if let Some(&n) = self.index.get(&key) {
            return n;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push(PNode {
            method,
            parent,
            ..PNode::default()
        });
        match parent {
            Some(p) => self.nodes[p as usize].children.push(id),
            None => self.roots.push(id),
        }
        self.index.insert(key, id);
        id
    }

    /// Adds one stack, outermost frame first: walks it down from the
    /// root, counts a new activation on every node below the part it
    /// shares with the thread's previous stack, and the sample at its
    /// leaf. Returns the path's nodes.
    pub(super) fn add(&mut self, frames_outer_first: &[u32], hit: Hit) -> &[u32] {
        let mut path = std::mem::take(&mut self.prev);
        let prev_len = path.len();
        let mut common = true;
        let mut parent = None;
        for (d, &m) in frames_outer_first.iter().enumerate() {
            let n = self.child(parent, m);
            if common && d < prev_len && path[d] == n {
                // the same frame as last time: no new activation
            } else {
                common = false;
                self.nodes[n as usize].activations += 1;
                if d < path.len() {
                    path[d] = n;
                } else {
                    path.push(n);
                }
            }
            parent = Some(n);
        }
        path.truncate(frames_outer_first.len());
        if let Some(&leaf) = path.last() {
            let node = &mut self.nodes[leaf as usize];
            node.wall_self += 1;
            node.wall_ns = node.wall_ns.saturating_add(hit.wall_ns);
            if let Some(w) = hit.cpu_ns {
                node.cpu_self += 1;
                node.cpu_ns = node.cpu_ns.saturating_add(w);
            }
        }
        self.prev = path;
        &self.prev
    }

    /// The thread showed no Java frame: its next stack is all new.
    pub(super) fn forget_previous(&mut self) {
        self.prev.clear();
    }

    /// Every node's subtree total (samples, ns) in `view`, indexed like
    /// `nodes`.
    pub fn totals(&self, view: View) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = self.nodes.iter().map(|n| n.own(view)).collect();
        for i in (0..self.nodes.len()).rev() {
            if let Some(p) = self.nodes[i].parent {
                let (s, w) = out[i];
                let t = &mut out[p as usize];
                t.0 += s;
                t.1 = t.1.saturating_add(w);
            }
        }
        out
    }

    /// The method ids on the path from the root to `node`, outermost
    /// first.
    pub fn path(&self, node: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = Some(node);
        while let Some(n) = at {
            let Some(x) = self.nodes.get(n as usize) else {
                break;
            };
            out.push(x.method);
            at = x.parent.filter(|&p| p < n);
        }
        out.reverse();
        out
    }
}
