//! What the revealer can tell about what it has revealed: the method table,
//! the graph, why a method is reachable, counters, spared methods.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use sprig_rewriter::pattern::MethodPattern;

use super::state::Revealer;
use crate::config::Scheme;
use crate::hierarchy::{Hierarchy, has_code};
use crate::model::{EdgeKind, MethodId, MethodKey};
use crate::outcome::RevealStats;
use crate::probe_path::probe_entries_of;

impl Revealer {
    /// Methods that the rules which guess what a call may reach (class
    /// hierarchy analysis at a virtual or interface call, the callback
    /// rule) leave alone: a thread's loop that was running at the attach,
    /// which a redefinition of its class would leave interpreted for good.
    /// Evidence still marks them: a root, a static or special call, a
    /// receiver seen at a call site, an entry inside a root context.
    pub fn spare(&mut self, methods: impl IntoIterator<Item = MethodKey>) {
        self.spared.extend(methods);
    }

    /// The spared methods that a guessing rule reached and left alone: a
    /// call of one inside a root context is not seen.
    pub fn spared_reached(&self) -> impl Iterator<Item = &MethodKey> {
        self.spared_reached.iter()
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The revealed call graph: reachable methods, caller → callee edges.
    pub fn graph(&self) -> &DiGraph<MethodKey, EdgeKind> {
        &self.graph
    }

    /// Whether methods of the class (internal name) may be instrumented.
    pub fn instrumentable(&self, class: &str) -> bool {
        self.filters.instrumentable(class)
    }

    /// The entries of [`PROBES_CALL`](crate::PROBES_CALL) that name methods with bytecode in
    /// loaded classes the filters let be instrumented (an `--include` of
    /// the JDK): code revelation could reach but leaves out, sorted.
    pub fn probe_path_included(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = self
            .hierarchy
            .classes()
            .filter(|c| self.filters.instrumentable(&c.name))
            .flat_map(|c| {
                probe_entries_of(&c.name)
                    .filter(|(_, p)| {
                        c.methods
                            .iter()
                            .any(|m| has_code(m) && p.matches_method(&m.name, &m.descriptor))
                    })
                    .map(|(t, _)| t)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The method table: the method behind an id.
    pub fn method(&self, id: MethodId) -> Option<&MethodKey> {
        self.ids.get(id.0 as usize).map(|&n| &self.graph[n])
    }

    pub fn id_of(&self, key: &MethodKey) -> Option<MethodId> {
        self.nodes.get(key).and_then(|&n| self.state[n.index()].id)
    }

    pub fn is_reachable(&self, key: &MethodKey) -> bool {
        self.nodes.contains_key(key)
    }

    /// The kind of edge that first reached the method.
    pub fn revealed_by(&self, key: &MethodKey) -> Option<EdgeKind> {
        self.nodes
            .get(key)
            .map(|&n| self.state[n.index()].revealed_by)
    }

    /// Instrumented methods in id order.
    pub fn instrumented(&self) -> impl Iterator<Item = (MethodId, &MethodKey)> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, &n)| (MethodId(i as u32), &self.graph[n]))
    }

    /// Why a method is reachable: a shortest chain of revealed edges from a
    /// root (or from a method reached without a caller, such as a callback
    /// or a later class's override of a root) to it, as (method, kind of the
    /// edge that reached it) pairs, the start first. `None` when the method
    /// is not reachable.
    pub fn explain(&self, key: &MethodKey) -> Option<Vec<(MethodKey, EdgeKind)>> {
        let target = *self.nodes.get(key)?;
        // Breadth first backwards from the target until a node without
        // callers (a root, or one reached without a caller).
        let mut via: HashMap<NodeIndex, (NodeIndex, EdgeKind)> = HashMap::new();
        let mut queue = VecDeque::from([target]);
        let mut seen = HashSet::from([target]);
        let mut start = target;
        while let Some(n) = queue.pop_front() {
            let mut callers = self
                .graph
                .edges_directed(n, Direction::Incoming)
                .filter(|e| e.source() != n)
                .peekable();
            if callers.peek().is_none() || self.state[n.index()].is_root {
                start = n;
                break;
            }
            for e in callers {
                if seen.insert(e.source()) {
                    via.insert(e.source(), (n, *e.weight()));
                    queue.push_back(e.source());
                }
            }
        }
        let mut chain = vec![(
            self.graph[start].clone(),
            self.state[start.index()].revealed_by,
        )];
        let mut at = start;
        while let Some(&(next, kind)) = via.get(&at) {
            chain.push((self.graph[next].clone(), kind));
            at = next;
        }
        Some(chain)
    }

    pub fn stats(&self) -> RevealStats {
        let mut revealed_by = BTreeMap::new();
        for &n in &self.ids {
            *revealed_by
                .entry(self.state[n.index()].revealed_by)
                .or_insert(0) += 1;
        }
        RevealStats {
            loaded_classes: self.hierarchy.len(),
            instrumented: self.ids.len(),
            reachable: self.graph.node_count(),
            reachable_unloaded: self
                .graph
                .node_indices()
                .filter(|&n| !self.hierarchy.contains(&self.graph[n].class))
                .count(),
            revealed_by,
            scanned: self.scanned,
            redefinition_batches: self.batches,
            reflective_sites: self.reflective_count,
        }
    }

    /// The root patterns with the number of methods each has matched in
    /// loaded classes so far (0: nothing loaded matches it yet — worth a
    /// warning that names the pattern).
    pub fn roots(&self) -> impl Iterator<Item = (&MethodPattern, usize)> {
        self.roots.iter().zip(self.root_hits.iter().copied())
    }
}
