//! The steps of the agent's protocol: roots, class loads, first calls,
//! reflective and dispatched calls, entries inside a root context, call
//! sites as they run, and Scheme A's scan of everything.

use std::collections::HashMap;

use petgraph::graph::NodeIndex;
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::names::{binary_name, internal_name};
use sprig_rewriter::{CallSite, ClassInfo};

use super::state::Revealer;
use crate::config::Scheme;
use crate::hierarchy::is_virtual;
use crate::model::{EdgeKind, MethodId, MethodKey};
use crate::outcome::{LoadOutcome, RevealError, Revealed};

impl Revealer {
    /// Adds a root pattern and marks its methods in loaded classes; fetch the
    /// resulting batch with [`Revealer::take_redefinitions`] (lazy) or
    /// [`Revealer::reveal_all`] (eager). Roots are instrumented even in
    /// classes the default JDK exclusion names (not in excluded or sprig's
    /// classes, nor in what the probes call: [`PROBES_CALL`](crate::PROBES_CALL)). An abstract root method makes its implementations roots.
    pub fn add_root(&mut self, pattern: MethodPattern) {
        let classes: Vec<String> = match pattern.exact_class() {
            Some(c) => {
                let internal = internal_name(&c);
                if self.hierarchy.contains(&internal) {
                    vec![internal]
                } else {
                    Vec::new()
                }
            }
            None => self
                .hierarchy
                .classes()
                .filter(|c| pattern.matches_class(&binary_name(&c.name)))
                .map(|c| c.name.clone())
                .collect(),
        };
        let mut hits = 0;
        for class in classes {
            hits += self.mark_roots(&class, &pattern);
        }
        self.roots.push(pattern);
        self.root_hits.push(hits);
    }

    /// A class is being loaded (ClassFileLoadHook), or was loaded before the
    /// agent attached. Returns the methods of this class to instrument in its
    /// bytes: methods of root patterns, methods already reachable, and its
    /// implementations of reachable virtual calls on its supertypes.
    /// `callees` (call sites of every method of the class, as rewriter
    /// `callees_all` gives them) is called only in the eager scheme and only
    /// when the class has methods to instrument.
    pub fn on_class_loaded<F>(&mut self, info: ClassInfo, loader_id: u64, callees: F) -> LoadOutcome
    where
        F: FnOnce() -> Vec<(String, String, Vec<CallSite>)>,
    {
        let name = info.name.clone();
        let is_new = self.hierarchy.add_class(info, loader_id);
        if is_new {
            self.loading = Some(name.clone());
            self.class_arrived(&name);
            self.loading = None;
        }
        let mut scan_pending = false;
        if self.scheme == Scheme::Eager && is_new {
            let has_work = self
                .instrumented_by_class
                .get(&name)
                .is_some_and(|v| v.iter().any(|n| !self.state[n.index()].scanned));
            if has_work {
                let mut table: HashMap<(String, String), Vec<CallSite>> =
                    callees().into_iter().map(|(n, d, s)| ((n, d), s)).collect();
                // Scan this class's methods now (its bytes are at hand); the
                // methods of other classes wait for `reveal_all`.
                self.loading = Some(name.clone());
                self.scan(&mut |k: &MethodKey| {
                    if k.class == name {
                        table.remove(&(k.name.clone(), k.descriptor.clone()))
                    } else {
                        None
                    }
                });
                self.loading = None;
                scan_pending = !self.scan_queue.is_empty();
            }
        }
        let methods = self.instruments(&name);
        LoadOutcome {
            methods,
            redefine: self.take_redefinitions(),
            scan_pending,
        }
    }

    /// The first run of an instrumented method, with its call sites: marks
    /// the callees reachable and returns the methods of loaded classes that
    /// must now be instrumented. Repeated calls for one method are harmless.
    pub fn on_first_call(
        &mut self,
        id: MethodId,
        callees: &[CallSite],
    ) -> Result<Revealed, RevealError> {
        let &n = self
            .ids
            .get(id.0 as usize)
            .ok_or(RevealError::UnknownMethod(id))?;
        if !self.state[n.index()].scanned {
            self.scan_one(n, callees);
        }
        Ok(self.take_redefinitions())
    }

    /// The graph node of an instrumented method's id.
    pub(super) fn node_of(&self, id: Option<MethodId>) -> Option<NodeIndex> {
        id.and_then(|id| self.ids.get(id.0 as usize).copied())
    }

    /// A reflective call from inside the subgraph reached `target`
    /// (dispatched virtually when it is an overridable instance method).
    pub fn on_reflective_call(&mut self, caller: Option<MethodId>, target: &MethodKey) -> Revealed {
        let from = self.node_of(caller);
        let declared = self
            .hierarchy
            .resolve(&target.class, &target.name, &target.descriptor);
        let overridable = declared
            .as_ref()
            .and_then(|k| self.hierarchy.declared(&k.class, &k.name, &k.descriptor))
            .is_some_and(is_virtual);
        if overridable {
            self.virtual_call(
                from,
                &target.class,
                &target.name,
                &target.descriptor,
                EdgeKind::Reflective,
                false,
            );
        } else {
            let key = declared.unwrap_or_else(|| target.clone());
            self.mark(key, EdgeKind::Reflective, from);
        }
        self.take_redefinitions()
    }

    /// A virtual or interface call from inside the subgraph was dispatched
    /// to `selected` (the method its receiver's class selects): marks that
    /// method only, not the other overrides the call site could reach.
    pub fn on_dispatched_call(
        &mut self,
        caller: Option<MethodId>,
        selected: &MethodKey,
    ) -> Revealed {
        let from = self.node_of(caller);
        let key = self
            .hierarchy
            .resolve(&selected.class, &selected.name, &selected.descriptor)
            .unwrap_or_else(|| selected.clone());
        // A receiver seen is evidence, not a guess.
        self.spared.remove(&key);
        self.spared_reached.remove(&key);
        self.mark(key, EdgeKind::Virtual, from);
        self.take_redefinitions()
    }

    /// A method holding dormant probes ran inside a root context: it is
    /// part of the subgraph whatever the rules say, so it is marked (with
    /// no caller edge) and instrumented, and its first call then reveals
    /// what it calls like any other's. Its class already holds its probes,
    /// so the batch normally only activates them.
    pub fn on_entered(&mut self, key: &MethodKey) -> Revealed {
        self.mark(key.clone(), EdgeKind::Entered, None);
        self.take_redefinitions()
    }

    /// One call site of instrumented method `caller`, revealed as its
    /// first call would (a virtual or interface one by class hierarchy
    /// analysis: every loaded override, and those of classes loaded later):
    /// a static or special site that runs for the first time, or a watched
    /// virtual site that saw too many receiver classes or one the mirror
    /// does not know.
    /// With no caller (one revelation has not reached), the site's targets
    /// are marked without an edge.
    pub fn on_call_site(&mut self, caller: Option<MethodId>, site: &CallSite) -> Revealed {
        let from = self.node_of(caller);
        self.call_site(from, site);
        self.take_redefinitions()
    }

    /// Scheme A: scans every instrumented method not scanned yet, and what it
    /// reaches, transitively, with call sites from `callees` (`None`: not
    /// available, the method stays unscanned). Returns everything to
    /// (re)define. Works in either scheme.
    pub fn reveal_all<F>(&mut self, mut callees: F) -> Revealed
    where
        F: FnMut(&MethodKey) -> Option<Vec<CallSite>>,
    {
        self.scanning_all = true;
        let pending: Vec<NodeIndex> = self
            .ids
            .iter()
            .copied()
            .filter(|n| !self.state[n.index()].scanned)
            .collect();
        self.scan_queue.extend(pending);
        self.scan(&mut callees);
        self.scanning_all = false;
        self.take_redefinitions()
    }

    /// Works the scan queue with call sites from `source`; nodes it has no
    /// call sites for stay queued.
    pub(super) fn scan(&mut self, source: &mut dyn FnMut(&MethodKey) -> Option<Vec<CallSite>>) {
        let mut unavailable = Vec::new();
        while let Some(n) = self.scan_queue.pop_front() {
            if self.state[n.index()].scanned {
                continue;
            }
            match source(&self.graph[n]) {
                Some(sites) => self.scan_one(n, &sites),
                None => unavailable.push(n),
            }
        }
        self.scan_queue.extend(unavailable);
    }

    pub(super) fn scan_one(&mut self, n: NodeIndex, sites: &[CallSite]) {
        self.state[n.index()].scanned = true;
        self.scanned += 1;
        for site in sites {
            self.call_site(Some(n), site);
        }
    }
}
