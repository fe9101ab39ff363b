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
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::names::binary_name;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(super) static REDEFINE: Mutex<()> = Mutex::new(());
/// The loaded, instrumentable classes by internal name.
pub(super) static CLASSES: Mutex<Option<Loaded>> = Mutex::new(None);

pub(super) fn classes() -> MutexGuard<'static, Option<Loaded>> {
    crate::sync::lock(&CLASSES)
}

/// One loaded class of a name (several class loaders may define the same
/// name).
pub(super) struct Defined {
    pub(super) class: Global,
    /// Identity hash of its defining loader (0: the boot loader), read the
    /// first time it is needed.
    pub(super) loader: Option<i32>,
    /// This session retransformed it: the restore puts it back.
    pub(super) changed: bool,
}

/// The loaded, instrumentable classes of a session, and the class loaders
/// on the roots' path.
///
/// A program that defines classes as it goes (a scripting engine compiling
/// each script in a class loader of its own) holds many classes of one name,
/// one per loader, most of them never to run again. A batch that names a
/// class retransforms only the copies on the roots' path: the copies
/// defined by a loader that defined a class this session retransformed
/// (code resolves the names it calls in its own loader), else, for a name
/// reached only by dispatch into other loaders, the copy of the loader that
/// was defined last (`GetLoadedClasses` lists the newest loader's classes
/// first). A class holding a root is the exception: the same application
/// deployed twice (two web applications in one server) has a root in each
/// loader, so every copy of a root's class is taken, newest first, up to
/// [`ROOT_COPIES`]. Copies that load later get their probes as they load,
/// from the class file load hook, whatever their loader. The others stay as
/// they were and are counted ([`Loaded::left`]).
#[derive(Default)]
pub(super) struct Loaded {
    /// By internal name, in `GetLoadedClasses` order (newest loader first).
    pub(super) by_name: HashMap<String, Vec<Defined>>,
    /// Identity hashes of the loaders that defined a class this session
    /// retransformed.
    pub(super) path: HashSet<i32>,
    /// Names whose copies were not all retransformed when named by a batch,
    /// with the number of copies left as they were.
    pub(super) left: BTreeMap<String, usize>,
    /// Copies in `left` when the session last said so ([`warn_left`]).
    pub(super) warned: usize,
    /// The session's root patterns: every copy of a class they match is on
    /// the roots' path.
    pub(super) roots: Vec<MethodPattern>,
}

/// At most this many copies of a root's class (newest loaders first) are
/// retransformed by a batch; a program that defines its root's class anew
/// for every unit of work gets its later copies' probes as they load.
pub(super) const ROOT_COPIES: usize = 64;

impl Loaded {
    /// Adds a loaded class of `name` (after those already listed).
    pub(super) fn add(&mut self, name: String, class: Global) {
        self.by_name.entry(name).or_default().push(Defined {
            class,
            loader: None,
            changed: false,
        });
    }

    /// Every class reference held, to release.
    pub(super) fn into_globals(self) -> impl Iterator<Item = Global> {
        self.by_name.into_values().flatten().map(|c| c.class)
    }

    /// The copies of `name` a batch retransforms (indices into its list),
    /// marked changed, their loaders put on the path. `None` when the name
    /// has no loaded copy.
    fn choose(&mut self, jvmti: &Jvmti, jni: Jni<'_>, name: &str) -> Option<Vec<usize>> {
        let copies = self.by_name.get_mut(name)?;
        let chosen: Vec<usize> = if copies.len() <= 1 {
            (0..copies.len()).collect()
        } else if self
            .roots
            .iter()
            .any(|r| r.matches_class(&binary_name(name)))
        {
            (0..copies.len().min(ROOT_COPIES)).collect()
        } else {
            for c in copies.iter_mut().filter(|c| c.loader.is_none()) {
                c.loader = jvmti.class_loader_hash(&jni, c.class.as_local()).ok();
            }
            let on_path: Vec<usize> = (0..copies.len())
                .filter(|&i| copies[i].loader.is_some_and(|l| self.path.contains(&l)))
                .collect();
            if on_path.is_empty() { vec![0] } else { on_path }
        };
        for &i in &chosen {
            let c = &mut copies[i];
            c.changed = true;
            if c.loader.is_none() {
                c.loader = jvmti.class_loader_hash(&jni, c.class.as_local()).ok();
            }
            if let Some(l) = c.loader {
                self.path.insert(l);
            }
        }
        let left = copies.iter().filter(|c| !c.changed).count();
        if left > 0 {
            self.left.insert(name.to_string(), left);
        } else {
            self.left.remove(name);
        }
        Some(chosen)
    }
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
    let Some(jni) = jni else {
        defer(names);
        return;
    };
    let missing: Vec<&String> = {
        let cache = classes();
        let Some(loaded) = cache.as_ref() else {
            return;
        };
        names
            .iter()
            .filter(|n| !loaded.by_name.contains_key(*n))
            .collect()
    };
    if !missing.is_empty() {
        find_classes(jvmti, jni, &missing);
    }
    let mut cache = classes();
    let Some(loaded) = cache.as_mut() else {
        return;
    };
    let mut chosen: Vec<(&str, Vec<usize>)> = Vec::new();
    let mut later = Vec::new();
    for n in &names {
        match loaded.choose(jvmti, jni, n) {
            Some(copies) => chosen.push((n, copies)),
            // Loading right now: defined soon, redone from the control thread.
            None => later.push(n.clone()),
        }
    }
    let mut batch: Vec<(&Global, String)> = Vec::new();
    for (n, copies) in chosen {
        if let Some(all) = loaded.by_name.get(n) {
            batch.extend(copies.iter().map(|&i| (&all[i].class, n.to_string())));
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

/// Says which classes revelation left as they were because other loaders'
/// classes of their names were instrumented instead, when there are more
/// than the last time it said so (at the end of the start, then from the
/// control thread's ticks).
pub(super) fn warn_left() {
    let warning = {
        let mut cache = classes();
        let Some(loaded) = cache.as_mut() else {
            return;
        };
        let copies: usize = loaded.left.values().sum();
        if copies <= loaded.warned {
            return;
        }
        loaded.warned = copies;
        let mut names: Vec<String> = loaded
            .left
            .iter()
            .take(4)
            .map(|(n, k)| format!("{} ({k})", binary_name(n)))
            .collect();
        if loaded.left.len() > names.len() {
            names.push(format!("{} more", loaded.left.len() - names.len()));
        }
        format!(
            "{copies} loaded classes were left uninstrumented because classes of the same names \
             from another class loader were instrumented instead (the loaders off the roots' \
             path, or older than the newest): {}; a call into one of them counts in its \
             caller's own time, and classes of these names that load from now on are \
             instrumented as they load",
            names.join(", ")
        )
    };
    crate::outbox::send(sprig_wire::control::Message::Warning(warning));
}

/// Whether a loaded class is one this session left as it was (a copy of a
/// name several loaders define, off the roots' path): the restore skips it.
/// `hashes` is [`untouched`]'s answer.
pub fn is_untouched(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    hashes: &HashMap<i32, Vec<Global>>,
    class: crate::ffi::Local<'_>,
) -> bool {
    if hashes.is_empty() {
        return false;
    }
    let Ok(h) = jvmti.object_hash(class) else {
        return false;
    };
    hashes
        .get(&h)
        .is_some_and(|gs| gs.iter().any(|g| jni.is_same_object(g.as_local(), class)))
}

/// The classes this session left as they were, by identity hash (new
/// references: release them with [`release`]).
pub fn untouched(jvmti: &Jvmti, jni: Jni<'_>) -> HashMap<i32, Vec<Global>> {
    let cache = classes();
    let mut out: HashMap<i32, Vec<Global>> = HashMap::new();
    let Some(loaded) = cache.as_ref() else {
        return out;
    };
    for c in loaded
        .by_name
        .iter()
        .filter(|(n, _)| loaded.left.contains_key(*n))
        .flat_map(|(_, v)| v)
        .filter(|c| !c.changed)
    {
        if let (Ok(h), Ok(g)) = (
            jvmti.object_hash(c.class.as_local()),
            jni.new_global(c.class.as_local()),
        ) {
            out.entry(h).or_default().push(g);
        }
    }
    out
}

/// Releases [`untouched`]'s references.
pub fn release(jni: Jni<'_>, hashes: HashMap<i32, Vec<Global>>) {
    for g in hashes.into_values().flatten() {
        jni.delete_global(g);
    }
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
        match cache.as_mut() {
            Some(loaded) => {
                for (name, g) in found {
                    loaded.add(name, g);
                }
            }
            None => {
                for (_, g) in found {
                    jni.delete_global(g);
                }
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
