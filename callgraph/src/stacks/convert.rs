//! The partial calling context trees as a [`Profile`]: one thread
//! profile per sampled thread, sampled timing, so that every report of
//! the profile model (the text tree, collapsed stacks, the flame graph,
//! pprof, back traces) renders them. A node's `samples` and
//! `sampled_ticks` (ns) are its self samples in the chosen view and their
//! weight; `calls` stay 0 (samples count no calls: the activations are in
//! `sprig sample`'s own JSON and suggestions).

use std::collections::HashMap;

use super::build::StackProfile;
use super::{JDK_FRAME, TRUNCATED_FRAME, View, suggest::is_jdk_class};
use crate::profile::{Node, Profile, ThreadProfile, Timing, Tree};

/// How the trees become a profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvertOptions {
    pub view: View,
    /// Each run of JDK frames (java.*, jdk.*, sun.*, com.sun.*) becomes
    /// one `[jdk]` frame.
    pub fold_jdk: bool,
}

impl StackProfile {
    /// The trees as a profile (ticks are ns).
    pub fn to_profile(&self, opts: ConvertOptions) -> Profile {
        self.converted(opts).0
    }

    /// [`StackProfile::to_profile`], and each thread tree's activations
    /// per node (a run of JDK frames folded into one node counts the
    /// activations of its outermost frame).
    pub(super) fn converted(&self, opts: ConvertOptions) -> (Profile, Vec<Vec<u64>>) {
        let mut activations: Vec<Vec<u64>> = Vec::new();
        let mut p = Profile::new(1_000_000_000);
        p.timing = Timing::Sampled;
        p.clock = match opts.view {
            View::Wall => "wall".to_owned(),
            View::Cpu => "thread-cpu".to_owned(),
        };
        p.stats.duration_ms = self.span_ns() / 1_000_000;
        p.stats.threads = self.threads.len() as u64;
        let jdk: HashMap<u32, bool> = self
            .methods
            .iter()
            .map(|(&id, m)| (id, is_jdk_class(&m.class)))
            .collect();
        let mut used = std::collections::BTreeSet::new();
        for (i, t) in self.threads.values().enumerate() {
            let src = &t.tree;
            let mut tree = Tree::default();
            // source node -> profile node
            let mut map: Vec<u32> = vec![u32::MAX; src.nodes.len()];
            let mut index: HashMap<(u32, u32), u32> = HashMap::new();
            let mut acts: Vec<u64> = Vec::new();
            for (n, node) in src.nodes.iter().enumerate() {
                let parent = node
                    .parent
                    .filter(|&q| (q as usize) < n)
                    .map(|q| map[q as usize]);
                let is_jdk = opts.fold_jdk && jdk.get(&node.method).copied().unwrap_or(false);
                let method = if is_jdk { JDK_FRAME } else { node.method };
                let folded_into_parent =
                    is_jdk && parent.is_some_and(|q| tree.nodes[q as usize].method == JDK_FRAME);
                let out = match (folded_into_parent, parent) {
                    (true, Some(q)) => q,
                    _ => {
                        let key = (parent.unwrap_or(u32::MAX), method);
                        match index.get(&key) {
                            Some(&o) => o,
                            None => {
                                let o = tree.push(
                                    parent,
                                    Node {
                                        method,
                                        ..Node::default()
                                    },
                                );
                                index.insert(key, o);
                                used.insert(method);
                                o
                            }
                        }
                    }
                };
                map[n] = out;
                if acts.len() <= out as usize {
                    acts.resize(out as usize + 1, 0);
                }
                if !folded_into_parent {
                    acts[out as usize] += node.activations;
                }
                let (s, w) = node.own(opts.view);
                let o = &mut tree.nodes[out as usize];
                o.samples += s;
                o.sampled_ticks = o.sampled_ticks.saturating_add(w);
            }
            tree.recount();
            acts.resize(tree.nodes.len(), 0);
            activations.push(acts);
            p.threads.push(ThreadProfile {
                virtual_threads: 0,
                index: i as u32,
                java_id: t.java_id,
                name: t.name.clone(),
                tree,
                ..ThreadProfile::default()
            });
        }
        for m in used {
            if m == TRUNCATED_FRAME || m == JDK_FRAME || self.methods.contains_key(&m) {
                p.methods.insert(m, self.method(m));
            }
        }
        (p, activations)
    }
}

/// The threads' trees of `p` merged by path (as [`Profile::merged`]),
/// with their `activations` added up the same way.
pub(super) fn merged_with(p: &Profile, activations: &[Vec<u64>]) -> (Tree, Vec<u64>) {
    let mut tree = Tree::default();
    let mut acts: Vec<u64> = Vec::new();
    let mut index: HashMap<(u32, u32), u32> = HashMap::new();
    for (t, ta) in p.threads.iter().zip(activations) {
        let parents = t.tree.parents();
        let mut map: Vec<u32> = vec![u32::MAX; t.tree.nodes.len()];
        for (i, n) in t.tree.nodes.iter().enumerate() {
            let parent = parents[i]
                .filter(|&q| (q as usize) < i)
                .map(|q| map[q as usize]);
            let key = (parent.unwrap_or(u32::MAX), n.method);
            let d = match index.get(&key) {
                Some(&d) => d,
                None => {
                    let d = tree.push(
                        parent,
                        Node {
                            method: n.method,
                            ..Node::default()
                        },
                    );
                    acts.push(0);
                    index.insert(key, d);
                    d
                }
            };
            map[i] = d;
            let m = &mut tree.nodes[d as usize];
            m.samples += n.samples;
            m.sampled_ticks = m.sampled_ticks.saturating_add(n.sampled_ticks);
            acts[d as usize] += ta.get(i).copied().unwrap_or(0);
        }
    }
    tree.recount();
    (tree, acts)
}
