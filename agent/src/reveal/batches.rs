//! Redefinition batches: one at a time (`REDEFINE`, waited for with a
//! bound), the class references they need, the classes deferred to the
//! control thread, and the pending work applied in rounds (`settle`).

use super::mirror::mirror_prepared;
use super::mirror::polls_unprepared;
use super::mirror::signature_name;
use super::plan::apply;
use super::plan::lookup;
use super::state::EAGER_ROUNDS;
use super::state::ON;
use super::state::REDEFINE_WAIT;
use super::state::REVEAL_NS;
use super::state::State;
use super::state::enabled;
use super::state::state;
use crate::ffi::{Global, Jni, Jvmti};
use crate::ledger;
use sprig_reveal::Scheme;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(super) static REDEFINE: Mutex<()> = Mutex::new(());
/// Class references of loaded, instrumentable classes by internal name.
pub(super) static CLASSES: Mutex<Option<HashMap<String, Vec<Global>>>> = Mutex::new(None);

pub(super) fn classes() -> MutexGuard<'static, Option<HashMap<String, Vec<Global>>>> {
    crate::sync::lock(&CLASSES)
}

/// Applies pending work now: batches deferred by class loads, then in the
/// eager scheme the scans that waited for class bytes, round by round
/// (each redefinition captures the bytes the next round scans). Bounded.
pub(super) fn settle(jvmti: &Jvmti, jni: Jni<'_>) -> bool {
    let mut worked = false;
    for round in 0..EAGER_ROUNDS {
        let t = Instant::now();
        let names = {
            let mut guard = state();
            let Some(st) = guard.as_mut() else {
                return worked;
            };
            let mut names: Vec<String> = if round == 0 {
                let mut v = mirror_prepared(jvmti, jni, st);
                v.extend(std::mem::take(&mut st.deferred));
                v
            } else {
                Vec::new()
            };
            if st.scan_pending && st.revealer.scheme() == Scheme::Eager {
                let State {
                    revealer, sites, ..
                } = &mut *st;
                let revealed = revealer.reveal_all(|k| lookup(sites, k));
                st.scan_pending = !revealed.classes.is_empty();
                names.extend(apply(st, revealed));
            }
            names.sort();
            names.dedup();
            names
        };
        REVEAL_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if names.is_empty() {
            break;
        }
        worked = true;
        redefine(jvmti, Some(jni), names);
        // The redefinition captured class bytes: eager scans may go on.
        if let Some(st) = state().as_mut()
            && st.revealer.scheme() == Scheme::Eager
        {
            st.scan_pending = true;
        }
    }
    worked
}

/// Whether [`settle`] has anything to do.
pub(super) fn unsettled() -> bool {
    state()
        .as_ref()
        .is_some_and(|st| !st.deferred.is_empty() || st.scan_pending || polls_unprepared(st))
}

thread_local! {
    /// This thread holds `REDEFINE` (a redefinition can link a class, and
    /// linking posts ClassPrepare on the same thread).
    static REDEFINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Clears `REDEFINING` when the batch ends, however it ends.
pub(super) struct Redefining;

impl Drop for Redefining {
    fn drop(&mut self) {
        let _ = REDEFINING.try_with(|r| r.set(false));
    }
}

/// Retransforms `names` in one batch (bounded wait for another thread's
/// batch; past the bound the control thread does it). With `jni`, classes
/// not seen yet are looked up among the loaded classes. Called again from
/// inside this thread's own batch (a ClassPrepare posted while the JVM
/// links a class of it), the classes go to the control thread.
pub(super) fn redefine(jvmti: &Jvmti, jni: Option<Jni<'_>>, names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    let (Some(_serial), _) = lock_batches() else {
        defer(names);
        return;
    };
    let _ = REDEFINING.try_with(|r| r.set(true));
    let _redefining = Redefining;
    if !enabled() {
        return; // the session is ending: the restore owns the classes now
    }
    let missing: Vec<&String> = {
        let cache = classes();
        let Some(map) = cache.as_ref() else {
            return;
        };
        names.iter().filter(|n| !map.contains_key(*n)).collect()
    };
    if !missing.is_empty() {
        match jni {
            Some(jni) => find_classes(jvmti, jni, &missing),
            None => {
                defer(names.clone());
                return;
            }
        }
    }
    let cache = classes();
    let Some(map) = cache.as_ref() else {
        return;
    };
    let mut batch: Vec<(&Global, String)> = Vec::new();
    let mut later = Vec::new();
    for n in &names {
        match map.get(n) {
            Some(refs) => batch.extend(refs.iter().map(|g| (g, n.clone()))),
            // Loading right now: defined soon, redone from the control thread.
            None => later.push(n.clone()),
        }
    }
    let t0 = Instant::now();
    ledger::retransform_batch(&batch, true, |cs| {
        let refs: Vec<&Global> = cs.iter().map(|g| **g).collect();
        jvmti.retransform_globals(&refs)
    });
    if crate::probe_class::debug_on() && !batch.is_empty() {
        // When each batch ran (late ones deoptimise code in the windows
        // a benchmark times) and what it took.
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let start = *START.get_or_init(|| t0);
        eprintln!(
            "sprig agent: batch at +{} ms: {} classes in {:.1} ms ({})",
            t0.duration_since(start).as_millis(),
            batch.len(),
            t0.elapsed().as_secs_f64() * 1e3,
            batch[0].1
        );
    }
    drop(cache);
    defer(later);
}

/// Adds the loaded classes named in `missing` to the reference cache.
pub(super) fn find_classes(jvmti: &Jvmti, jni: Jni<'_>, missing: &[&String]) {
    let want: BTreeSet<&str> = missing.iter().map(|s| s.as_str()).collect();
    jni.with_local_frame(64, |jni| {
        let loaded = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut found = Vec::new();
        for &c in &loaded {
            if let Some(name) = signature_name(jvmti, c)
                && want.contains(name.as_str())
                && jvmti.is_modifiable(c).unwrap_or(false)
                && let Ok(g) = jni.new_global(c)
            {
                found.push((name, g));
            }
        }
        let mut cache = classes();
        if let Some(map) = cache.as_mut() {
            for (name, g) in found {
                map.entry(name).or_default().push(g);
            }
        }
    });
}

/// Classes named by a batch but never defined (a load that failed) are
/// retried this many times (control-thread ticks), then dropped.
pub(super) const MAX_RETRIES: u32 = 50;

pub(super) fn defer(names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    if let Some(st) = state().as_mut() {
        for n in names {
            let tries = st.retries.entry(n.clone()).or_insert(0);
            *tries += 1;
            if *tries <= MAX_RETRIES {
                st.deferred.insert(n);
            }
        }
    }
}

/// Waits (bounded) until no other thread is redefining; true when it had
/// to wait. Returns at once on the thread that holds the batch lock.
pub(super) fn await_batches() -> bool {
    lock_batches().1
}

/// The batch lock `REDEFINE`, waited for up to `REDEFINE_WAIT`, and whether
/// another thread's batch had to be waited for. `None` past the bound, and
/// at once on the thread that holds the lock already (a ClassPrepare posted
/// inside its own batch).
pub(super) fn lock_batches() -> (Option<MutexGuard<'static, ()>>, bool) {
    if REDEFINING.try_with(|r| r.get()).unwrap_or(true) {
        return (None, false);
    }
    let deadline = Instant::now() + REDEFINE_WAIT;
    let mut waited = false;
    loop {
        match crate::sync::try_lock(&REDEFINE) {
            Some(g) => return (Some(g), waited),
            None if Instant::now() < deadline => {
                waited = true;
                std::thread::sleep(Duration::from_micros(200));
            }
            None => return (None, waited),
        }
    }
}

/// Stops revelation before the restore: no batch starts after this, and
/// the returned guard keeps a batch already running from finishing after
/// the restore (hold it across the restore).
pub fn quiesce() -> MutexGuard<'static, ()> {
    ON.store(false, Ordering::Release);
    crate::sync::lock(&REDEFINE)
}
