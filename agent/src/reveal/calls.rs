//! What running code tells revelation on the probing thread: a first
//! call, a reflective call, the entry of a dormant method, and a class
//! being linked.

use super::batches::await_batches;
use super::batches::redefine;
use super::batches::settle;
use super::batches::unsettled;
use super::mirror::mirror_prepared;
use super::mirror::mirror_prepared_of;
use super::mirror::signature_name;
use super::plan::apply;
use super::plan::lookup;
use super::state::REVEAL_NS;
use super::state::State;
use super::state::enabled;
use super::state::state;
use crate::ffi::{Jni, Jvmti, Local, MethodId};
use crate::methods::announce_method;
use sprig_reveal::{MethodKey, Revealed, Scheme};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `Method.invoke` or `Constructor.newInstance` is about to call `method`
/// on a thread inside a root context: reveal the target (and what
/// dispatches to it) and instrument it now, before it runs. Returns `None`
/// when the target is not handed to the revealer (it could not be named,
/// no session), else whether anything was done (the first time per
/// target).
pub fn reflective_call(jvmti: &Jvmti, jni: Jni<'_>, mid: MethodId) -> Option<bool> {
    let t0 = Instant::now();
    let key = jni.with_local_frame(8, |jni| {
        let class = jvmti.method_declaring_class(&jni, mid).ok()?;
        let class = signature_name(jvmti, class)?;
        let (name, descriptor) = jvmti.method_name(mid).ok()?;
        Some(MethodKey::new(&class, &name, &descriptor))
    })?;
    let mut handed = false;
    let did = reveal_one(jvmti, jni, t0, |st| {
        handed = true;
        st.reflected
            .insert(key.clone())
            .then(|| st.revealer.on_reflective_call(None, &key))
    });
    if handed {
        // Handed over now or before: later calls of it return at once.
        super::seen::insert(mid.addr());
    }
    handed.then_some(did)
}

/// Whether the target of a reflective call was handed to the revealer
/// already this session (then there is nothing to do).
pub fn reflective_target_seen(mid: MethodId) -> bool {
    super::seen::contains(mid.addr())
}

/// One revelation step on the probing thread: `step` asks the revealer
/// (`None`: nothing to do), the batch is planned and redefined, the time
/// since `t0` counted as revealing. Returns whether `step` did anything.
pub(super) fn reveal_one(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    t0: Instant,
    step: impl FnOnce(&mut State) -> Option<Revealed>,
) -> bool {
    let (names, did) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return false;
        };
        // Mirrored first, so the step sees the classes linked since.
        let mut names = mirror_prepared(jvmti, jni, st);
        let revealed = step(st);
        let did = revealed.is_some();
        if let Some(r) = revealed {
            names.extend(apply(st, r));
        }
        names.sort();
        names.dedup();
        (names, did)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    did
}

/// The first entry of probe id `id` (called by the probe, on the probing
/// thread, with its recursion guard set). Scans the method's call sites and
/// instruments what they reach. Returns whether any work was done.
pub fn first_call(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    let scanned = scan_first_call(jvmti, jni, id);
    // Work class loads left for later (and eager scans) is done now too, so
    // what this call goes on to run is instrumented.
    let settled = unsettled() && settle(jvmti, jni);
    // A batch another thread took before us (the control thread's tick,
    // a class being linked) may instrument what this call runs next: let
    // it finish first.
    let waited = await_batches();
    scanned || settled || waited
}

pub(super) fn scan_first_call(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    let t0 = Instant::now();
    let names = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return false;
        };
        let Some(&(rid, true)) = st.by_probe.get(&id) else {
            return false;
        };
        let Some(key) = st.revealer.method(rid).cloned() else {
            return false;
        };
        let Some(mut sites) = lookup(&st.sites, &key) else {
            // The class never went through the hook (it failed): nothing to scan.
            return false;
        };
        if st.receivers {
            // Watched sites are revealed by the receivers they see.
            sites.retain(|c| {
                !st.site_ids.contains_key(&(
                    key.class.clone(),
                    key.name.clone(),
                    key.descriptor.clone(),
                    c.offset,
                ))
            });
        }
        st.by_probe.insert(id, (rid, false));
        let mut names = mirror_prepared(jvmti, jni, st);
        if let Ok(revealed) = st.revealer.on_first_call(rid, &sites) {
            names.extend(apply(st, revealed));
        }
        names.sort();
        names.dedup();
        names
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    true
}

/// ClassPrepare: a class loaded before the attach but not linked then is
/// linked now, before any of its code runs. Mirror it and instrument what
/// revelation reaches in it (an override of a method the subgraph calls)
/// at once, on this thread: waiting for the next revelation step would let
/// its first calls go unseen.
pub fn on_class_prepare(jvmti: &Jvmti, jni: Jni<'_>, class: Local<'_>) {
    if !enabled() {
        return;
    }
    if state().as_ref().is_none_or(|st| st.unprepared.is_empty()) {
        return;
    }
    let Some(name) = signature_name(jvmti, class) else {
        return;
    };
    let t0 = Instant::now();
    let (names, eager) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return;
        };
        if !st.unprepared.contains_key(&name) {
            return;
        }
        let mut names = mirror_prepared_of(jvmti, jni, st, Some(&name));
        names.sort();
        names.dedup();
        // Eager: the call sites of what is instrumented in it come with the
        // bytes the redefinition captures, and the scans wait for them.
        let eager = st.revealer.scheme() == Scheme::Eager && !names.is_empty();
        if eager {
            st.scan_pending = true;
        }
        (names, eager)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    if eager {
        settle(jvmti, jni);
    }
}

/// A method holding dormant probes was entered inside a root context (on
/// this thread, in its probe): it belongs to the subgraph, since the root
/// is running it, though no rule reached it (a JDK callback through a type
/// the callback rule leaves out, or a path only the receivers would see).
/// Marks it reached and activates its probes before the entry is recorded
/// (its class already holds them: no redefinition, as a rule), so this
/// call and every later one are recorded, and its first call reveals its
/// callees. Returns whether `id` is active now.
pub fn entered(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    // Switched on under the lock: a second thread entering it at once
    // waits, then finds it active.
    let switched = state().as_mut().is_some_and(|st| {
        st.held
            .remove(&id)
            .map(|(class, name, descriptor, _)| {
                announce_method(&class, &name, &descriptor);
                st.activated_in_place += 1;
            })
            .is_some()
    });
    if switched {
        return true;
    }
    reveal_one(jvmti, jni, Instant::now(), |st| {
        let key = st.dormant_keys.get(&id)?.clone();
        Some(st.revealer.on_entered(&key))
    });
    crate::methods::is_active(id)
}
