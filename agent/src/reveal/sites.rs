//! Watched call sites (`--virtual-calls receiver`): site ids, the checks
//! the hook puts before each call, and what a receiver (or a first reach)
//! reveals.

use super::batches::await_batches;
use super::batches::redefine;
use super::mirror::mirror_prepared;
use super::mirror::signature_name;
use super::plan::apply;
use super::state::REDEFINE_WAIT;
use super::state::REVEAL_NS;
use super::state::State;
use super::state::WatchedSite;
use super::state::state;
use crate::ffi::{Jni, Jvmti, Local};
use crate::probe_class::REFLECT_PROBES;
use sprig_reveal::MethodKey;
use sprig_rewriter::{CallSite, Check, GuardSite, Target};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Site ids handed out so far, over every session in this JVM (the next
/// session clears `Probe.RECEIVERS` below it).
pub(super) static SITES_HANDED: AtomicU32 = AtomicU32::new(0);
/// Receiver classes a watched call site may see before it is watched no
/// more: what it dispatches to is then left to dormant probes (revealed as
/// entered), or without them revealed by class hierarchy analysis.
pub(super) const MAX_RECEIVERS: usize = 8;
/// Times a watched site may hand the agent a class it has seen already
/// (more classes take turns there than `Probe.RECEIVERS` remembers, two)
/// before it is watched no more, as past `MAX_RECEIVERS`: each such call
/// costs a JNI call and a class signature. On javac most sites watched no
/// more got there this way (a visitor's `accept` sees its tree classes in
/// turn); 1,024 repeats instead of 64 left 47 such sites of 64 on its
/// `Gen::genClass` root, for eight times the calls into the agent.
pub(super) const MAX_REPEATS: u32 = 64;

/// Site ids handed out so far in this JVM (`Probe.RECEIVERS` is cleared below
/// this at the start of a session).
pub fn sites_handed() -> u32 {
    SITES_HANDED.load(Ordering::Acquire)
}

/// The id of a watched call site and its check, handed out the first time
/// with `check`; `None` when `Probe.RECEIVERS` is full (the site is then
/// revealed at its caller's first call, by class hierarchy analysis). A
/// site keeps its first check: the Java side keeps the site's state.
pub(super) fn site_id(
    st: &mut State,
    class: &str,
    method: &(String, String),
    call: &CallSite,
    check: Check,
) -> Option<(u32, Check)> {
    let key = (
        class.to_string(),
        method.0.clone(),
        method.1.clone(),
        call.offset,
    );
    if let Some(&id) = st.site_ids.get(&key) {
        return Some((id, st.site_info[id as usize].check));
    }
    let id = u32::try_from(st.site_info.len()).ok()?;
    if id >= crate::probe_class::SITE_SLOTS {
        return None;
    }
    st.site_info.push(WatchedSite {
        caller: MethodKey::new(class, &method.0, &method.1),
        call: call.clone(),
        classes: HashSet::new(),
        repeats: 0,
        pending: 0,
        saturated: false,
        check,
    });
    st.site_ids.insert(key, id);
    SITES_HANDED.fetch_max(id + 1, Ordering::AcqRel);
    Some((id, check))
}

/// The checks of the targets the hook instruments in `name`: per target,
/// each watchable call's offset, site id and check.
pub(super) fn guards_of(
    st: &mut State,
    name: &str,
    targets: &[(Target, bool)],
) -> Vec<Vec<GuardSite>> {
    let mut out = Vec::with_capacity(targets.len());
    for (t, _) in targets {
        let mut g = Vec::new();
        let method = (t.name.clone(), t.descriptor.clone());
        let calls: Vec<(CallSite, Check)> = if t.probes == REFLECT_PROBES {
            Vec::new()
        } else {
            st.sites
                .get(name)
                .and_then(|s| s.get(&method))
                .map(|v| {
                    v.iter()
                        .filter_map(|c| Some((c.clone(), st.revealer.site_check(c)?)))
                        .collect()
                })
                .unwrap_or_default()
        };
        for (c, check) in calls {
            if let Some((site, check)) = site_id(st, name, &method, &c, check) {
                g.push(GuardSite {
                    offset: c.offset,
                    site,
                    check,
                });
            }
        }
        out.push(g);
    }
    out
}

/// `Probe.site`, inside a root context: a receiver of class `receiver` is
/// about to be called at watched site `site`. Instruments the method the
/// class selects, on this thread, before the call runs. A site that has
/// seen more than `MAX_RECEIVERS` classes, or a class the mirror does not
/// know, is watched no more: with dormant probes, every class it can
/// dispatch to gets them (and a class loaded later that overrides the
/// method, as it loads), and a method of theirs is revealed when a root
/// context first enters it (`entered`); without, class hierarchy analysis
/// reveals all it can dispatch to. `Probe.reach`
/// (no receiver): a static or special site runs for the first time, and
/// its target is instrumented. Returns whether any work was done or waited
/// for, and whether the site is watched no more.
pub fn dispatched_call(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    site: u32,
    receiver: Option<Local<'_>>,
) -> (bool, bool) {
    let t0 = Instant::now();
    // No class for a reach check; arrays and primitive classes have no
    // internal name here (their calls go to java.lang.Object's methods,
    // outside every filter).
    let class = receiver.and_then(|r| signature_name(jvmti, r));
    // Another thread revealing what this site reaches: wait until its
    // classes are redefined, so this call does not run ahead of its probes.
    let waited = await_site(site);
    let (names, done) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return (waited, false);
        };
        let Some(w) = st.site_info.get_mut(site as usize) else {
            return (waited, true);
        };
        if w.saturated {
            // Another thread may still be redefining what saturated it.
            let busy = w.pending > 0;
            drop(guard);
            return (waited | (busy && await_site(site)), true);
        }
        let reach = w.check == Check::Reach;
        let Some(class) = class.or_else(|| reach.then(String::new)) else {
            return (waited, false);
        };
        let new = reach || w.classes.insert(class.clone());
        if !new {
            w.repeats += 1;
        }
        let saturate = reach || w.classes.len() > MAX_RECEIVERS || w.repeats > MAX_REPEATS;
        if !new && !saturate {
            // Seen before (the Java side remembers two classes per site):
            // its method is instrumented, or another thread is instrumenting
            // it. That thread may have taken the class after this one's
            // wait above found the site idle (seen once in a clean-clone
            // run: 6 of 400 first calls missed by 8 threads at once), so
            // wait again while the site is busy.
            let busy = w.pending > 0;
            drop(guard);
            return (waited | (busy && await_site(site)), false);
        }
        w.pending += 1;
        let (caller, call) = (w.caller.clone(), w.call.clone());
        let hidden = class.contains("$$Lambda") || class.contains("/0x");
        // A caller revelation has not reached (a dormant method running
        // inside a root context, on a path revelation misses): what it
        // calls is revealed all the same, as a root context runs it.
        let caller = st.revealer.id_of(&caller);
        let selected = if saturate || hidden {
            None
        } else {
            st.revealer
                .hierarchy()
                .select(&class, &call.name, &call.descriptor)
        };
        let mut names = mirror_prepared(jvmti, jni, st);
        let dispatched = selected.is_some();
        let revealed = match selected {
            Some(k) => Some(st.revealer.on_dispatched_call(caller, &k)),
            // A lambda's class forwards to its implementation method, which
            // the invokedynamic that created it revealed.
            None if hidden && !saturate => None,
            // A site with too many receiver classes (or a class the
            // mirror does not know): class hierarchy analysis would
            // instrument every method the call can dispatch to. With
            // dormant probes, the classes of those methods get probes
            // instead, and each method is revealed when a root context
            // first enters it (`entered`): only those called.
            None if !reach && st.dormant && st.revealer.instrumentable(&call.owner) => {
                st.site_info[site as usize].saturated = true;
                names.extend(dormant_alongside(st, &call));
                st.by_entries.insert((
                    call.owner.clone(),
                    call.name.clone(),
                    call.descriptor.clone(),
                ));
                None
            }
            None => {
                st.site_info[site as usize].saturated = true;
                Some(st.revealer.on_call_site(caller, &call))
            }
        };
        if let Some(r) = revealed {
            names.extend(apply(st, r));
        }
        if dispatched
            && st.revealer.instrumentable(&call.owner)
            && names.iter().any(|n| !st.installed.contains_key(n))
        {
            // This site's first redefinition: the classes of the other
            // methods it can dispatch to come along with dormant probes only,
            // so a receiver of theirs later switches its method on without
            // a redefinition of its own (what class hierarchy analysis
            // redefines, without instrumenting it). Not for a call of
            // `toString`, `hashCode` or `equals` on a JDK type: those can
            // dispatch to nearly every loaded class.
            names.extend(dormant_alongside(st, &call));
        }
        names.sort();
        names.dedup();
        let done = st.site_info[site as usize].saturated;
        (names, done)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let worked = !names.is_empty();
    redefine(jvmti, Some(jni), names);
    let batches = await_batches();
    if let Some(w) = state()
        .as_mut()
        .and_then(|st| st.site_info.get_mut(site as usize))
    {
        w.pending = w.pending.saturating_sub(1);
    }
    (worked || waited || batches, done)
}

/// The loaded, instrumentable classes holding no probes yet among those a
/// virtual call `call` can dispatch to: planned with no method, so the hook
/// gives them dormant probes only (lazy scheme with dormant probes).
pub(super) fn dormant_alongside(st: &mut State, call: &CallSite) -> Vec<String> {
    if !st.dormant {
        return Vec::new();
    }
    let mut out = Vec::new();
    let targets =
        st.revealer
            .hierarchy()
            .virtual_targets(&call.owner, &call.name, &call.descriptor);
    for k in targets {
        if st.revealer.instrumentable(&k.class)
            && !st.installed.contains_key(&k.class)
            && !st.plan.contains_key(&k.class)
        {
            st.plan.insert(k.class.clone(), Vec::new());
            out.push(k.class);
        }
    }
    out
}

/// Waits (bounded, `REDEFINE_WAIT`) while other threads reveal what watched
/// site `site` reaches; true when it had to wait.
pub(super) fn await_site(site: u32) -> bool {
    let deadline = Instant::now() + REDEFINE_WAIT;
    let mut waited = false;
    loop {
        let busy = state()
            .as_ref()
            .and_then(|st| st.site_info.get(site as usize))
            .is_some_and(|w| w.pending > 0);
        if !busy || Instant::now() >= deadline {
            return waited;
        }
        waited = true;
        std::thread::sleep(Duration::from_micros(100));
    }
}
