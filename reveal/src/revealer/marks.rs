//! Marking: a method becomes reachable (a graph node), an edge is added,
//! a root is set, an id is assigned when the method can be instrumented.

use petgraph::graph::NodeIndex;
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::access::ACC_STATIC;

use super::state::{NodeState, Revealer};
use crate::config::Scheme;
use crate::hierarchy::has_code;
use crate::model::{EdgeKind, MethodId, MethodKey};
use crate::probe_path::probes_call;

impl Revealer {
    /// Marks a method reachable (a no-op for filtered classes, which only
    /// note that the subgraph calls into filtered code, and for spared
    /// methods a guessing rule reaches).
    pub(super) fn mark(
        &mut self,
        key: MethodKey,
        kind: EdgeKind,
        from: Option<NodeIndex>,
    ) -> Option<NodeIndex> {
        if !self.filters.instrumentable(&key.class) {
            self.note_filtered_call();
            return None;
        }
        if matches!(
            kind,
            EdgeKind::Virtual | EdgeKind::Interface | EdgeKind::Callback
        ) && !self.nodes.contains_key(&key)
            && self.spared.contains(&key)
        {
            self.spared_reached.insert(key);
            return None;
        }
        Some(self.mark_node(key, kind, from))
    }

    pub(super) fn mark_node(
        &mut self,
        key: MethodKey,
        kind: EdgeKind,
        from: Option<NodeIndex>,
    ) -> NodeIndex {
        let n = match self.nodes.get(&key) {
            Some(&n) => n,
            None => {
                let class = key.class.clone();
                let n = self.graph.add_node(key.clone());
                self.nodes.insert(key, n);
                self.state.push(NodeState {
                    revealed_by: kind,
                    is_root: false,
                    id: None,
                    scanned: false,
                    reported: false,
                });
                self.by_class.entry(class.clone()).or_default().push(n);
                let is_static = self
                    .hierarchy
                    .declared(&class, &self.graph[n].name, &self.graph[n].descriptor)
                    .is_some_and(|m| m.access & ACC_STATIC != 0);
                self.try_assign(n);
                if !is_static {
                    self.make_live(&class);
                }
                n
            }
        };
        if let Some(f) = from {
            self.edge(f, n, kind);
        }
        n
    }

    pub(super) fn edge(&mut self, from: NodeIndex, to: NodeIndex, kind: EdgeKind) {
        if !self
            .graph
            .edges_connecting(from, to)
            .any(|e| *e.weight() == kind)
        {
            self.graph.add_edge(from, to, kind);
        }
    }

    pub(super) fn set_root(&mut self, n: NodeIndex) {
        let st = &mut self.state[n.index()];
        if st.is_root {
            return;
        }
        st.is_root = true;
        let reported = st.reported;
        let class = self.graph[n].class.clone();
        if reported {
            self.dirty.insert(class);
        } else {
            self.try_assign(n);
        }
    }

    /// Gives the node an id when it can be instrumented now.
    pub(super) fn try_assign(&mut self, n: NodeIndex) {
        let st = &self.state[n.index()];
        if st.id.is_some() {
            return;
        }
        let key = &self.graph[n];
        let eligible = self
            .hierarchy
            .declared(&key.class, &key.name, &key.descriptor)
            .is_some_and(has_code)
            && !probes_call(&key.class, &key.name, &key.descriptor)
            && if st.is_root {
                !self.filters.is_excluded(&key.class)
            } else {
                self.filters.instrumentable(&key.class)
            };
        if !eligible {
            return;
        }
        let class = key.class.clone();
        let id = MethodId(self.ids.len() as u32);
        self.ids.push(n);
        self.state[n.index()].id = Some(id);
        self.instrumented_by_class
            .entry(class.clone())
            .or_default()
            .push(n);
        if self.loading.as_deref() != Some(class.as_str()) {
            self.dirty.insert(class);
        }
        if self.scheme == Scheme::Eager || self.scanning_all {
            self.scan_queue.push_back(n);
        }
    }

    /// Marks the methods of `class` that `pattern` names; returns how many.
    pub(super) fn mark_roots(&mut self, class: &str, pattern: &MethodPattern) -> usize {
        // Roots may sit in default-excluded (JDK) classes, never in
        // excluded or sprig's own ones.
        if self.filters.is_excluded(class) {
            return 0;
        }
        let Some(loaded) = self.hierarchy.get(class) else {
            return 0;
        };
        let matching: Vec<(String, String, bool)> = loaded
            .methods
            .iter()
            .filter(|m| pattern.matches_method(&m.name, &m.descriptor))
            // What the probes call is never a root (nor counted as one).
            .filter(|m| !probes_call(class, &m.name, &m.descriptor))
            .map(|m| (m.name.clone(), m.descriptor.clone(), has_code(m)))
            .collect();
        let hits = matching.len();
        for (name, desc, code) in matching {
            if code {
                let n = self.mark_node(MethodKey::new(class, &name, &desc), EdgeKind::Root, None);
                self.set_root(n);
                self.try_assign(n);
            } else {
                self.virtual_call(None, class, &name, &desc, EdgeKind::Root, true);
            }
        }
        hits
    }
}
