//! What the class file load hook instruments in a class of a revealing
//! session.

use super::plan::apply;
use super::plan::own_batch;
use super::plan::reached_by_entries;
use super::sites::guards_of;
use super::state::Probed;
use super::state::REVEAL_NS;
use super::state::Sites;
use super::state::Trivial;
use super::state::state;
use crate::methods::dormant_method;
use crate::probe_class::{PLAIN_PROBES, REFLECT_PROBES, ROOT_PROBES};
use sprig_reveal::MethodKey;
use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::vocab::names::binary_name;
use sprig_rewriter::{ClassInfo, GuardSite, Target};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The class file load hook in a revealing session: the methods of `name`
/// to instrument in `bytes` (with the probe pair of each), caching the call
/// sites of the class. At load the class joins the mirror first; batches it
/// causes for other classes go to the control thread.
pub fn targets(name: &str, bytes: &[u8], redefining: bool) -> HookPlan {
    let t0 = Instant::now();
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return (Vec::new(), None);
    };
    // The class as parsed at load, kept for the dormant probes below.
    let mut parsed: Option<ClassInfo> = None;
    if !redefining {
        let Ok(info) = sprig_rewriter::class_info(bytes) else {
            return (Vec::new(), None);
        };
        if st.dormant {
            parsed = Some(info.clone());
        }
        let outcome = st.revealer.on_class_loaded(info, 0, || {
            sprig_rewriter::callees_all(bytes).unwrap_or_default()
        });
        apply(st, own_batch(name, outcome.methods));
        let others = apply(st, outcome.redefine);
        st.deferred.extend(others);
        if outcome.scan_pending {
            // Scanned (and redefined) by the next `settle`.
            st.scan_pending = true;
        }
    }
    if !redefining {
        // Dormant probes only, for a call left to the entries it makes: in
        // this class as it loads, in a loaded superclass from the control
        // thread.
        for class in reached_by_entries(st, name) {
            st.plan.insert(class.clone(), Vec::new());
            if class != name {
                st.deferred.insert(class);
            }
        }
    }
    let Some(planned) = st.plan.get(name) else {
        REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        return (Vec::new(), None);
    };
    let mut out: Vec<(Target, bool)> = planned
        .iter()
        .map(|p| {
            (
                Target {
                    name: p.name.clone(),
                    descriptor: p.descriptor.clone(),
                    id: p.id,
                    probes: if p.reflect {
                        REFLECT_PROBES
                    } else if p.root {
                        ROOT_PROBES
                    } else {
                        PLAIN_PROBES
                    },
                },
                p.root,
            )
        })
        .collect();
    // `--skip-trivial`: trivial methods other than roots get no probes
    // (learnt from the class's bytes the first time they pass here).
    if st.skip_trivial > 0 {
        let bound = st.skip_trivial;
        let t = st
            .trivial
            .entry(name.to_string())
            .or_insert_with(|| Trivial::of(bytes, bound));
        // Reflection's watch points are JDK methods, never trivial ones.
        out.retain(|(target, root)| {
            target.probes == REFLECT_PROBES
                || !t.leaves_out(&target.name, &target.descriptor, *root)
        });
    }
    // The class's other methods get dormant probes, so revealing them
    // later needs no redefinition (reflection's watch points excepted).
    let mut have: Probed = out
        .iter()
        .map(|(t, root)| ((t.name.clone(), t.descriptor.clone()), (t.id, *root)))
        .collect();
    if st.dormant
        && !planned.iter().any(|p| p.reflect)
        && let Some(info) = parsed.or_else(|| sprig_rewriter::class_info(bytes).ok())
    {
        let dotted = binary_name(name);
        let trivial_here = st.trivial.get(name);
        for m in info.methods {
            let has_code = m.access & NO_CODE == 0 && m.code_length > 0;
            let key = (m.name, m.descriptor);
            let trivial = trivial_here.is_some_and(|t| t.methods.contains(&key));
            if !has_code || key.0 == "<clinit>" || trivial || have.contains_key(&key) {
                continue;
            }
            if let Some(id) = dormant_method(&dotted, &key.0, &key.1) {
                st.dormant_keys
                    .entry(id)
                    .or_insert_with(|| MethodKey::new(name, &key.0, &key.1));
                out.push((
                    Target {
                        name: key.0.clone(),
                        descriptor: key.1.clone(),
                        id,
                        probes: PLAIN_PROBES,
                    },
                    false,
                ));
                have.insert(key, (id, false));
            }
        }
    }
    st.installed.insert(name.to_string(), have);
    if !st.sites.contains_key(name)
        && let Ok(all) = sprig_rewriter::callees_all(bytes)
    {
        let table: Sites = all.into_iter().map(|(n, d, s)| ((n, d), s)).collect();
        st.sites.insert(name.to_string(), table);
    }
    let guards = st.receivers.then(|| guards_of(st, name, &out));
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    (out, guards)
}

/// What the hook instruments in a class: the targets (with whether each is
/// a root) and, when call sites are watched, each target's receiver checks.
pub type HookPlan = (Vec<(Target, bool)>, Option<Vec<Vec<GuardSite>>>);
