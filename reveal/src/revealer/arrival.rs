//! A class arrives in the mirror: the root patterns it matches, the
//! placeholders left by calls made before it loaded, the remembered virtual
//! calls its instances answer, and the callback rule.

use petgraph::Direction;
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::names::binary_name;

use super::state::{Revealer, VirtualCall};
use crate::hierarchy::{has_code, is_virtual};
use crate::model::EdgeKind;

impl Revealer {
    /// Everything that happens when a new class name arrives.
    pub(super) fn class_arrived(&mut self, name: &str) {
        // Root patterns.
        let dotted = binary_name(name);
        let roots: Vec<(usize, MethodPattern)> = self
            .roots
            .iter()
            .enumerate()
            .filter(|(_, p)| p.matches_class(&dotted))
            .map(|(i, p)| (i, p.clone()))
            .collect();
        for (i, p) in &roots {
            self.root_hits[*i] += self.mark_roots(name, p);
        }
        // Placeholders: calls made before this class was loaded.
        let waiting: Vec<NodeIndex> = self.by_class.get(name).cloned().unwrap_or_default();
        for n in waiting {
            let key = self.graph[n].clone();
            let incoming: Vec<(NodeIndex, EdgeKind)> = self
                .graph
                .edges_directed(n, Direction::Incoming)
                .map(|e| (e.source(), *e.weight()))
                .collect();
            // A method reference or reflective target turns out to be
            // overridable: dispatch it like a virtual call from now on.
            let overridable = self
                .hierarchy
                .resolve(name, &key.name, &key.descriptor)
                .and_then(|k| self.hierarchy.declared(&k.class, &k.name, &k.descriptor))
                .is_some_and(is_virtual);
            for &(caller, k) in &incoming {
                if overridable
                    && matches!(
                        k,
                        EdgeKind::Dynamic | EdgeKind::MethodHandle | EdgeKind::Reflective
                    )
                {
                    self.virtual_call(Some(caller), name, &key.name, &key.descriptor, k, false);
                }
            }
            if self
                .hierarchy
                .declared(name, &key.name, &key.descriptor)
                .is_some()
            {
                self.try_assign(n);
                continue;
            }
            let Some(real) = self.hierarchy.resolve(name, &key.name, &key.descriptor) else {
                continue;
            };
            let kind = self.state[n.index()].revealed_by;
            if incoming.is_empty() {
                self.mark(real.clone(), kind, None);
            }
            for (caller, k) in incoming {
                self.mark(real.clone(), k, Some(caller));
            }
        }
        // Virtual calls on supertypes that instances of this class answer.
        let mut found: Vec<(String, String, String, VirtualCall)> = Vec::new();
        for sup in self.hierarchy.supertypes(name) {
            if let Some(calls) = self.virtual_calls.get(&sup) {
                for ((n, d), call) in calls {
                    found.push((sup.clone(), n.clone(), d.clone(), call.clone()));
                }
            }
        }
        found.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        for (owner, n, d, call) in found {
            let Some(target) = self.hierarchy.select(name, &n, &d) else {
                continue;
            };
            if !self
                .hierarchy
                .declared(&target.class, &n, &d)
                .is_some_and(has_code)
            {
                continue;
            }
            let Some(t) = self.mark(target, call.kind, None) else {
                continue;
            };
            for &(c, k) in &call.callers {
                self.edge(c, t, k);
            }
            if call.root {
                self.set_root(t);
            }
            if let Some(entry) = self
                .virtual_calls
                .get_mut(&owner)
                .and_then(|calls| calls.get_mut(&(n.clone(), d.clone())))
                && !entry.targets.contains(&t)
            {
                entry.targets.push(t);
            }
        }
        // The callback rule, for a class that was live before it loaded or
        // that implements a callback interface.
        let handed = self.filters.instrumentable(name)
            && self
                .hierarchy
                .supertypes(name)
                .iter()
                .skip(1)
                .any(|s| self.filters.is_callback_interface(s));
        if handed {
            self.handed.push(name.to_string());
        }
        if self.calls_filtered && (handed || self.live.contains(name)) {
            self.callbacks(name);
        }
    }
}
