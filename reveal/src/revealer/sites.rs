//! Call sites: static and special calls resolve to one method; virtual and
//! interface calls, and lambdas and method references that name an
//! overridable method, reach every override (and are remembered for
//! subtypes loaded later); reflective sites are reported; which sites the
//! agent checks as they run.

use petgraph::graph::NodeIndex;
use sprig_rewriter::{CallKind, CallSite, Check};

use super::state::{Revealer, VirtualCall};
use crate::hierarchy::is_virtual;
use crate::model::{EdgeKind, MethodKey};
use crate::outcome::ReflectiveSite;

impl Revealer {
    /// Whether a call site can be revealed by the receivers it sees
    /// ([`Revealer::on_dispatched_call`]) instead of by class hierarchy
    /// analysis: a virtual or interface call on a type the filters let be
    /// instrumented, or a call of `toString`, `hashCode` or `equals` on any
    /// type.
    ///
    /// Other calls on filtered (JDK) types keep class hierarchy analysis:
    /// what it reaches in user classes is also what the JDK calls back (a
    /// user `Location.getName()` that a JDK default method calls), which no
    /// check at a call site of the subgraph sees. `Object`'s three are the
    /// exception: class hierarchy analysis of `x.toString()` on an `Object`
    /// or `CharSequence` reaches the `toString` of every loaded class that
    /// has one (and makes each such class live, so the callback rule then
    /// adds its `equals`, `hashCode`, `run`, ...), while what the JDK calls
    /// back of these three, in the classes whose instances flow through the
    /// subgraph, the callback rule marks anyway.
    pub fn dispatch_watchable(&self, site: &CallSite) -> bool {
        matches!(site.kind, CallKind::Virtual | CallKind::Interface)
            && !site.owner.starts_with('[')
            && !is_reflective(site)
            && (self.filters.instrumentable(&site.owner) || is_object_method(site))
    }

    /// Whether a static or special call site can be revealed when it first
    /// runs ([`Revealer::on_call_site`]) instead of at its caller's first
    /// call: one into a class the filters let be instrumented (calls into
    /// filtered code must reach the callback rules at the first call).
    pub fn reach_watchable(&self, site: &CallSite) -> bool {
        matches!(site.kind, CallKind::Static | CallKind::Special)
            && !site.owner.starts_with('[')
            && self.filters.instrumentable(&site.owner)
    }

    /// The check a call site of an instrumented method gets when calls
    /// are revealed as they run (`--virtual-calls receiver`), `None` for a
    /// site revealed at its caller's first call:
    /// - [`Check::Receiver`] at a [dispatch-watchable](Revealer::dispatch_watchable)
    ///   site where the receiver's class can choose: class hierarchy
    ///   analysis finds two or more loaded methods, or the owner is not
    ///   loaded yet (unknown);
    /// - [`Check::Reach`] at a [reach-watchable](Revealer::reach_watchable)
    ///   site, and at a dispatch-watchable one with a single possible
    ///   target: no receiver to copy off the stack, and the first run
    ///   inside a root context reveals it ([`Revealer::on_call_site`], class
    ///   hierarchy analysis, which also instruments an override loaded
    ///   later).
    pub fn site_check(&self, site: &CallSite) -> Option<Check> {
        if self.reach_watchable(site) {
            return Some(Check::Reach);
        }
        if !self.dispatch_watchable(site) {
            return None;
        }
        let known = self.hierarchy.get(&site.owner).is_some();
        let targets = self
            .hierarchy
            .virtual_targets(&site.owner, &site.name, &site.descriptor);
        Some(if !known || targets.len() >= 2 {
            Check::Receiver
        } else {
            Check::Reach
        })
    }
}

/// A call of one of the overridable methods every class inherits from
/// `Object` and the class library calls back: `toString`, `hashCode`,
/// `equals`.
fn is_object_method(site: &CallSite) -> bool {
    matches!(
        (site.name.as_str(), site.descriptor.as_str()),
        ("toString", "()Ljava/lang/String;")
            | ("hashCode", "()I")
            | ("equals", "(Ljava/lang/Object;)Z")
    )
}

fn is_reflective(site: &CallSite) -> bool {
    matches!(
        (site.owner.as_str(), site.name.as_str()),
        ("java/lang/reflect/Method", "invoke")
            | ("java/lang/reflect/Constructor", "newInstance")
            | ("java/lang/Class", "newInstance")
            | ("java/lang/invoke/MethodHandle", "invoke")
            | ("java/lang/invoke/MethodHandle", "invokeExact")
            | ("java/lang/invoke/MethodHandle", "invokeWithArguments")
    )
}

impl Revealer {
    /// One call site of `caller` (`None`: a method revelation has not
    /// reached; its targets are then marked without an edge).
    pub(super) fn call_site(&mut self, caller: Option<NodeIndex>, site: &CallSite) {
        if is_reflective(site)
            && let Some(id) = caller.and_then(|c| self.state[c.index()].id)
        {
            self.reflective_count += 1;
            self.reflective.push(ReflectiveSite {
                caller: id,
                site: site.clone(),
            });
        }
        let kind = EdgeKind::from(site.kind);
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        if self.dispatches(site) {
            self.virtual_call(caller, owner, name, desc, kind, false);
        } else {
            self.direct(caller, owner, name, desc, kind);
        }
    }

    /// Whether revelation takes a call site to every override of the named
    /// method (virtual and interface calls, and an `invokedynamic` or
    /// method handle naming a virtual method) rather than to the one
    /// method it resolves to.
    pub(super) fn dispatches(&self, site: &CallSite) -> bool {
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        match site.kind {
            CallKind::Static | CallKind::Special => false,
            CallKind::Virtual | CallKind::Interface => true,
            CallKind::Dynamic | CallKind::MethodHandle => self
                .hierarchy
                .resolve(owner, name, desc)
                .and_then(|k| self.hierarchy.declared(&k.class, name, desc))
                .is_some_and(is_virtual),
        }
    }

    /// The methods revelation would mark for a call site, without marking
    /// them: what [`Self::direct`] resolves to, or every loaded override
    /// [`Self::virtual_call`] finds (and the named method while its owner
    /// is not loaded). None for a call on an array.
    pub fn site_targets(&self, site: &CallSite) -> Vec<MethodKey> {
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        if owner.starts_with('[') {
            return Vec::new();
        }
        if self.dispatches(site) {
            let mut targets = self.hierarchy.virtual_targets(owner, name, desc);
            if !self.hierarchy.contains(owner) {
                targets.push(MethodKey::new(owner, name, desc));
            }
            return targets;
        }
        let key = self
            .hierarchy
            .resolve(owner, name, desc)
            .unwrap_or_else(|| MethodKey::new(owner, name, desc));
        if key.class == "java/lang/Object" && name == "<init>" {
            Vec::new()
        } else {
            vec![key]
        }
    }

    /// A call with one target: resolve upward, or leave a placeholder when
    /// the owner is not loaded.
    pub(super) fn direct(
        &mut self,
        caller: Option<NodeIndex>,
        owner: &str,
        name: &str,
        desc: &str,
        kind: EdgeKind,
    ) {
        if owner.starts_with('[') {
            self.note_filtered_call();
            return;
        }
        let key = self
            .hierarchy
            .resolve(owner, name, desc)
            .unwrap_or_else(|| MethodKey::new(owner, name, desc));
        if !(key.class == "java/lang/Object" && name == "<init>") {
            self.mark(key, kind, caller);
        }
    }

    pub(super) fn virtual_call(
        &mut self,
        caller: Option<NodeIndex>,
        owner: &str,
        name: &str,
        desc: &str,
        kind: EdgeKind,
        root: bool,
    ) {
        if owner.starts_with('[') || !self.filters.instrumentable(owner) {
            self.note_filtered_call();
            if owner.starts_with('[') {
                return;
            }
        }
        let sig = (name.to_string(), desc.to_string());
        if let Some(call) = self
            .virtual_calls
            .get_mut(owner)
            .and_then(|calls| calls.get_mut(&sig))
        {
            // Known call: the targets are already reachable; add this caller.
            call.root |= root;
            if let Some(c) = caller
                && !call.callers.contains(&(c, kind))
            {
                call.callers.push((c, kind));
            }
            let targets = call.targets.clone();
            for t in targets {
                if let Some(c) = caller {
                    self.edge(c, t, kind);
                }
                if root {
                    self.set_root(t);
                }
            }
            return;
        }
        self.virtual_calls
            .entry(owner.to_string())
            .or_default()
            .insert(
                sig.clone(),
                VirtualCall {
                    kind,
                    root,
                    callers: caller.map(|c| (c, kind)).into_iter().collect(),
                    targets: Vec::new(),
                },
            );
        let mut targets = self.hierarchy.virtual_targets(owner, name, desc);
        if !self.hierarchy.contains(owner) {
            targets.push(MethodKey::new(owner, name, desc));
        }
        let mut marked = Vec::new();
        for t in targets {
            if let Some(n) = self.mark(t, kind, caller) {
                if root {
                    self.set_root(n);
                }
                marked.push(n);
            }
        }
        if let Some(call) = self
            .virtual_calls
            .get_mut(owner)
            .and_then(|calls| calls.get_mut(&sig))
        {
            call.targets.extend(marked);
        }
    }
}
