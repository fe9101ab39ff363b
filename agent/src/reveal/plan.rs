//! Planning: records what a revelation step hands back (the methods the
//! hook instruments per class, new ids announced) and names the classes to
//! redefine.

use super::state::Planned;
use super::state::Sites;
use super::state::State;
use super::state::state;
use crate::methods::{announce_method, dormant_method};
use sprig_reveal::{EdgeKind, MethodKey, Revealed, Revealer, has_code, is_virtual};
use sprig_rewriter::CallSite;
use sprig_rewriter::vocab::names::binary_name;
use std::collections::HashMap;

/// What sprig instruments to see the targets of reflective calls.
pub(super) const REFLECTION_WATCH: [(&str, &str, &str); 2] = [
    (
        "java/lang/reflect/Method",
        "invoke",
        "(Ljava/lang/Object;[Ljava/lang/Object;)Ljava/lang/Object;",
    ),
    (
        "java/lang/reflect/Constructor",
        "newInstance",
        "([Ljava/lang/Object;)Ljava/lang/Object;",
    ),
];

pub(super) fn lookup(sites: &HashMap<String, Sites>, k: &MethodKey) -> Option<Vec<CallSite>> {
    sites
        .get(&k.class)?
        .get(&(k.name.clone(), k.descriptor.clone()))
        .cloned()
}

/// Runs one revelation step under the state lock and records its plan.
/// Returns the classes to retransform.
pub(super) fn plan_step(
    step: impl FnOnce(&mut Revealer, &HashMap<String, Sites>) -> Revealed,
) -> Vec<String> {
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return Vec::new();
    };
    let revealed = step(&mut st.revealer, &st.sites);
    apply(st, revealed)
}

/// Records a batch in the plan (announcing new method ids) and returns its
/// class names.
pub(super) fn apply(st: &mut State, revealed: Revealed) -> Vec<String> {
    let mut names = Vec::with_capacity(revealed.classes.len());
    if !revealed.reflective_sites.is_empty() && !st.watching_reflection {
        // The subgraph calls through reflection: watch the two entry points
        // (they are JDK classes, outside every filter).
        st.watching_reflection = true;
        for (class, name, descriptor) in REFLECTION_WATCH {
            let id = announce_method(&binary_name(class), name, descriptor);
            st.plan.insert(
                class.to_string(),
                vec![Planned {
                    name: name.to_string(),
                    descriptor: descriptor.to_string(),
                    id,
                    root: false,
                    reflect: true,
                }],
            );
            names.push(class.to_string());
        }
    }
    for batch in revealed.classes {
        let dotted = binary_name(&batch.class);
        // Every method of the batch already holds its probes (dormant
        // until now): activating them is all it takes.
        // Trivial methods left out count as held: they never get probes.
        let left_out: Vec<bool> = match st.trivial.get_mut(&batch.class) {
            Some(t) => batch
                .methods
                .iter()
                .map(|m| t.leaves_out(&m.name, &m.descriptor, m.is_root))
                .collect(),
            None => vec![false; batch.methods.len()],
        };
        let in_place = st.installed.get(&batch.class).is_some_and(|have| {
            batch.methods.iter().zip(&left_out).all(|(m, &out)| {
                out || have
                    .get(&(m.name.clone(), m.descriptor.clone()))
                    .is_some_and(|&(_, root)| root == m.is_root)
            })
        });
        // With dormant probes ahead and class hierarchy analysis, what
        // revelation reaches in a class holding its dormant probes stays
        // dormant until it runs inside a root context.
        let hold = in_place && st.ahead && !st.receivers;
        let planned = batch
            .methods
            .iter()
            .zip(&left_out)
            .map(|(m, &out)| {
                let dormant = dormant_method(&dotted, &m.name, &m.descriptor)
                    .filter(|id| !crate::methods::is_active(*id));
                // What a root context entered, or reflection is about to
                // call, is switched on now.
                let edge = st
                    .revealer
                    .method(m.id)
                    .and_then(|k| st.revealer.revealed_by(k));
                let held_edge = edge.filter(|e| {
                    !matches!(e, EdgeKind::Root | EdgeKind::Entered | EdgeKind::Reflective)
                });
                let id = match (dormant, held_edge) {
                    (Some(id), _) if st.held.contains_key(&id) => id,
                    (Some(id), Some(edge)) if hold && m.added && !m.is_root && !out => {
                        st.held.insert(
                            id,
                            (dotted.clone(), m.name.clone(), m.descriptor.clone(), edge),
                        );
                        id
                    }
                    _ => announce_method(&dotted, &m.name, &m.descriptor),
                };
                st.by_probe.insert(id, (m.id, m.needs_first_call_check));
                Planned {
                    name: m.name.clone(),
                    descriptor: m.descriptor.clone(),
                    id,
                    root: m.is_root,
                    reflect: false,
                }
            })
            .collect();
        st.plan.insert(batch.class.clone(), planned);
        if in_place {
            st.activated_in_place += batch
                .methods
                .iter()
                .zip(&left_out)
                .filter(|(m, out)| m.added && !**out && !hold)
                .count() as u64;
        } else {
            names.push(batch.class);
        }
    }
    names
}

/// The classes holding no probes yet whose methods a call left to its
/// entries ([`State::by_entries`]) can now dispatch to through class
/// `name`, which has just joined the mirror: `name` itself when it
/// declares such a method, or the class it inherits one from (rare: a
/// superclass that does not implement the call's interface itself).
pub(super) fn reached_by_entries(st: &State, name: &str) -> Vec<String> {
    if st.by_entries.is_empty() {
        return Vec::new();
    }
    let h = st.revealer.hierarchy();
    let mut out: Vec<String> = st
        .by_entries
        .iter()
        .filter(|(owner, _, _)| h.is_subtype(name, owner))
        .filter_map(|(_, m, d)| h.select(name, m, d))
        .filter(|k| {
            h.declared(&k.class, &k.name, &k.descriptor)
                .is_some_and(|m| is_virtual(m) && has_code(m))
                && st.revealer.instrumentable(&k.class)
                && !st.plan.contains_key(&k.class)
                && !st.installed.contains_key(&k.class)
        })
        .map(|k| k.class)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A batch of one class's planned methods (nothing when empty).
pub(super) fn own_batch(name: &str, methods: Vec<sprig_reveal::Instrument>) -> Revealed {
    let classes = if methods.is_empty() {
        Vec::new()
    } else {
        vec![sprig_reveal::ClassBatch {
            class: name.to_string(),
            loaders: Vec::new(),
            methods,
        }]
    };
    Revealed {
        classes,
        reflective_sites: Vec::new(),
    }
}
