//! `--locks`: where the threads inside a root context wait. JVMTI's
//! monitor events (`can_generate_monitor_events`, taken while the source
//! runs) mark the start and the end of each contended monitor enter
//! (`MonitorContendedEnter`/`Entered`) and each `Object.wait`
//! (`MonitorWait`/`Waited`); at the end the thread writes one wait record
//! into its own stream (`probe::wait_end`): the kind, the class of the
//! monitor and the wait's start and length, so it lands on the node that
//! waited.
//!
//! The classes of monitors get ids of their own, told to the CLI with
//! `WaitClass` (queued through `outbox::post`: a JVM thread never blocks
//! on the socket) before the first record that carries one is published.
//! The lookup (JNI GetObjectClass, JVMTI GetClassSignature, a map under a
//! lock held for the lookup only) runs only at the end of a wait that
//! began inside a root context, after its end was read.
//!
//! The owner: at a contended enter inside a root context the thread
//! reads who holds the monitor (JVMTI GetObjectMonitorUsage, capability
//! `can_get_monitor_info`) and where that thread is: its innermost frames
//! outside the JDK (JVMTI GetStackTrace of the owner, [`OWNER_FRAMES`]
//! deep, the first [`OWNER_CONTEXT`] kept). The owner's frames and not
//! its node in sprig's tree: the owner is often outside every root (a
//! pool thread, a holder started elsewhere), and another thread's probe
//! state is its own. Both calls stop the owner (GetObjectMonitorUsage is a
//! VM operation, a safepoint; GetStackTrace a handshake), bounded as
//! those are, so the owners are read at most once every
//! [`OWNER_GAP_NS`] in the process: a wait that began sooner after the
//! last reading has owner 0 (not read). The owner is told to the CLI as
//! `WaitOwner` (thread name and context, an id per pair) and rides in the
//! wait's record.
//!
//! A park's owner: when the blocker of a park inside a root context is an
//! `AbstractOwnableSynchronizer` (the synchronizer of a `ReentrantLock`,
//! of a `ReentrantReadWriteLock`'s write lock), the thread that holds it
//! exclusively when the park began, read from its `exclusiveOwnerThread`
//! field (JNI GetObjectField: what `getExclusiveOwnerThread` returns,
//! without running Java code in the JDK's park), and its frames as a
//! monitor owner's, within the same budget of one reading every
//! [`OWNER_GAP_NS`] (a park whose lock nobody holds exclusively, or whose
//! blocker is no such synchronizer, takes no turn).
//!
//! Garbage collection pauses (`GarbageCollectionStart`/`Finish`, with
//! `can_generate_garbage_collection_events`): kept by `probe::gc_finish`,
//! and written as `(GC pause)` waits by each thread that was inside a
//! root context, at its next probe, under the frame it was stopped in
//! (exact timing).
//!
//! Parks and sleeps: JVMTI posts no event for `LockSupport.park*` or
//! `Thread.sleep`, so while the source runs it instruments the JDK's own
//! methods (retransformed at its start, put back at its stop) with calls
//! to `sprig.rt.Waits`, a class of the bootstrap loader whose natives
//! ([`WaitNatives`]) keep the start of the wait and write the record at
//! its end, the way the monitor events do: every park of
//! `java.util.concurrent` (locks, conditions, queues, latches, pools)
//! goes through `LockSupport`, and its blocker argument (the lock's
//! synchronizer, the condition) names the row, `(parked:
//! java.util.concurrent.locks.ReentrantLock$NonfairSync)`; a park without
//! one is `(parked: ?)`. A sleep is `(sleeping)`: `Thread.sleepNanos`
//! where the JDK has it (21 and later: every sleep, `TimeUnit.sleep`
//! included), `Thread.sleep(long, int)` where `sleep(long)` is native
//! (JDK 17 to 20), whose calls from the profiled methods then go to
//! `Waits.sleep` (the probes' rewriter substitutes them).
//!
//! What is covered: `synchronized` methods and blocks, `Object.wait`,
//! parks, sleeps and stop-the-world collections.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{
    Capabilities, Event, FieldId, Global, Jni, Jvmti, Local, MonitorEvent, WaitNatives,
};
use crate::outbox;
use crate::probe;
use crate::wait_classes::{
    LOCK_SUPPORT, PARKED, PROBED, REDIRECT_SLEEP, SLEEPING, THREAD, WAITS_CLASS,
};
use sprig_rewriter::vocab::access::ACC_NATIVE;
use sprig_wire::record::WAIT_CLASS_MAX;
use sprig_wire::{Message, WaitKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Whether a session's lock source runs (the events may still come in
/// for a moment after it stopped).
static ON: AtomicBool = AtomicBool::new(false);
/// The monitor classes named so far in this session: binary name -> id.
static CLASSES: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);
/// The owners named so far in this session: (thread name, context) -> id.
static OWNERS: Mutex<Option<HashMap<(String, String), u32>>> = Mutex::new(None);
/// When the next owner may be read, in ns since [`EPOCH`].
static NEXT_OWNER_NS: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();
/// Least time between two owner readings in the process (each stops the
/// owner for a safepoint and a handshake): at most 100 a second.
pub const OWNER_GAP_NS: u64 = 10_000_000;
/// Frames of the owner's stack read.
pub const OWNER_FRAMES: usize = 16;
/// Frames outside the JDK kept as the owner's context.
pub const OWNER_CONTEXT: usize = 2;
/// Most owner ids in a session.
const OWNERS_MAX: u32 = 1 << 16;
/// `java.util.concurrent.locks.AbstractOwnableSynchronizer` and its
/// `exclusiveOwnerThread` field, for the owners of parks: found at the
/// first `--locks` session's start and kept for the process (a class of
/// the bootstrap loader, never unloaded).
static SYNCHRONIZER: OnceLock<(Global, FieldId)> = OnceLock::new();
const SYNCHRONIZER_CLASS: &str = "java/util/concurrent/locks/AbstractOwnableSynchronizer";

static WAITS_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Waits.class"));

/// The lock source of one session.
pub struct Locks;

impl Locks {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            monitor_events: true,
            gc_events: true,
            monitor_info: true,
            ..Capabilities::NONE
        },
        events: &[
            Event::MonitorContendedEnter,
            Event::MonitorContendedEntered,
            Event::MonitorWait,
            Event::MonitorWaited,
            Event::GarbageCollectionStart,
            Event::GarbageCollectionFinish,
        ],
        ring: true,
    };
}

impl Source for Locks {
    fn name(&self) -> &'static str {
        "locks"
    }

    fn needs(&self) -> Needs {
        Locks::NEEDS
    }

    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String> {
        *crate::sync::lock(&CLASSES) = Some(HashMap::new());
        *crate::sync::lock(&OWNERS) = Some(HashMap::new());
        NEXT_OWNER_NS.store(0, Ordering::Relaxed);
        if SYNCHRONIZER.get().is_none() {
            match find_synchronizer(jni) {
                Some(s) => {
                    if let Err((class, _)) = SYNCHRONIZER.set(s) {
                        jni.delete_global(class);
                    }
                }
                None => {
                    outbox::send(Message::Warning(
                        "--locks: the owners of java.util.concurrent locks are not read \
                         (AbstractOwnableSynchronizer.exclusiveOwnerThread is not found)"
                            .into(),
                    ));
                }
            }
        }
        ON.store(true, Ordering::Release);
        for &event in Locks::NEEDS.events {
            agent
                .jvmti
                .set_event(event, true)
                .map_err(|e| format!("locks: cannot enable the {event:?} event: {e}"))?;
        }
        // Parks and sleeps: only once `Waits` is defined and its natives
        // bound to this library (a probe calling an unbound native would
        // throw in the JDK's park).
        if let Err(e) = bind_waits(jni) {
            outbox::send(Message::Warning(format!(
                "--locks: parks and sleeps are not recorded ({e})"
            )));
            return Ok(());
        }
        PROBED.store(true, Ordering::Release);
        if let Err(e) = retransform_waits(&agent.jvmti, jni) {
            PROBED.store(false, Ordering::Release);
            let _ = retransform_waits(&agent.jvmti, jni);
            outbox::send(Message::Warning(format!(
                "--locks: parks and sleeps are not recorded (RetransformClasses: {e})"
            )));
        }
        Ok(())
    }

    fn stop(&mut self, agent: &'static Agent, jni: Jni<'_>, ending: &mut Ending) {
        ON.store(false, Ordering::Release);
        // The probes' classes get their own bytes back after this.
        REDIRECT_SLEEP.store(false, Ordering::Release);
        if PROBED.swap(false, Ordering::AcqRel) && !ending.vm_death {
            // The hook leaves them alone now: they get their own bytes
            // back.
            if let Err(e) = retransform_waits(&agent.jvmti, jni) {
                outbox::send(Message::Warning(format!(
                    "--locks: LockSupport and Thread could not be put back ({e}); their wait \
                     probes stay, and record nothing"
                )));
            }
        }
        *crate::sync::lock(&CLASSES) = None;
        *crate::sync::lock(&OWNERS) = None;
    }
}

/// A session starts, with `--locks` (`locks`) or not, before the probes'
/// source: where `Thread.sleep(long)` is native, a `--locks` session's
/// probes redirect its calls to `Waits.sleep` ([`crate::wait_classes::redirects_sleep`]),
/// once `Waits`' natives are bound.
pub fn prepare(agent: &'static Agent, jni: Jni<'_>, locks: bool) {
    let redirect = locks && sleep_is_native(&agent.jvmti, jni) && bind_waits(jni).is_ok();
    REDIRECT_SLEEP.store(redirect, Ordering::Release);
}

/// `Thread.sleep(long)` is native (JDK 17 to 20; Java from 21 on).
fn sleep_is_native(jvmti: &Jvmti, jni: Jni<'_>) -> bool {
    jni.with_local_frame(4, |jni| {
        let Ok(Some(thread)) = jni.find_class(THREAD) else {
            return false;
        };
        let methods = jvmti.class_methods(thread).unwrap_or_default();
        methods.into_iter().any(|m| {
            jvmti
                .method_name(m)
                .is_ok_and(|(n, d)| n == "sleep" && d == "(J)V")
                && jvmti
                    .method_modifiers(m)
                    .is_ok_and(|mods| mods & i32::from(ACC_NATIVE) != 0)
        })
    })
}

/// [`SYNCHRONIZER`]: the class (a global reference) and the field.
fn find_synchronizer(jni: Jni<'_>) -> Option<(Global, FieldId)> {
    jni.with_local_frame(4, |jni| {
        let class = jni.find_class(SYNCHRONIZER_CLASS).ok()??;
        let field = jni.find_field(class, "exclusiveOwnerThread", c"Ljava/lang/Thread;")?;
        let class = jni.new_global(class).ok()?;
        Some((class, field))
    })
}

/// Defines `sprig.rt.Waits` in the bootstrap loader if this JVM does not
/// have it yet and binds its natives to this library.
fn bind_waits(jni: Jni<'_>) -> Result<(), String> {
    jni.with_local_frame(8, |jni| {
        let class = match jni.find_class(WAITS_CLASS).map_err(|e| e.to_string())? {
            Some(c) => c,
            None => match jni.define_bootstrap_class(WAITS_CLASS, WAITS_BYTES) {
                Ok(c) => c,
                // Another copy of the agent defined it meanwhile.
                Err(e) => jni
                    .find_class(WAITS_CLASS)
                    .ok()
                    .flatten()
                    .ok_or_else(|| format!("DefineClass(sprig.rt.Waits): {e}"))?,
            },
        };
        jni.register_natives(class, &crate::ffi::wait_natives::<WaitProbes>())
            .map_err(|e| format!("RegisterNatives(sprig.rt.Waits): {e}"))
    })
}

/// Retransforms `LockSupport` and `Thread`: the class file load hook puts
/// the wait probes in while [`PROBED`] is set ([`class_file`]) and leaves
/// the classes as they were otherwise.
fn retransform_waits(jvmti: &Jvmti, jni: Jni<'_>) -> Result<(), String> {
    jni.with_local_frame(8, |jni| {
        let mut classes = Vec::with_capacity(2);
        for name in [LOCK_SUPPORT, THREAD] {
            match jni.find_class(name) {
                Ok(Some(c)) => classes.push(c),
                _ => return Err(format!("{} is not found", name.replace('/', "."))),
            }
        }
        jvmti.retransform(&classes).map_err(|e| e.to_string())
    })
}

/// The natives of `sprig.rt.Waits`.
struct WaitProbes;

impl WaitNatives for WaitProbes {
    fn begin(jni: Jni<'_>, kind: u32, blocker: Option<Local<'_>>) {
        let Some(kind) = wait_kind(kind) else { return };
        if !ON.load(Ordering::Acquire) {
            return;
        }
        let Some(agent) = crate::env::get() else {
            return;
        };
        probe::wait_begin_on(
            kind,
            || blocker.map_or(0, |b| class_id(&agent.jvmti, jni, b)),
            || blocker.map_or(0, |b| lock_owner_id(&agent.jvmti, jni, b)),
        );
    }

    fn end(_jni: Jni<'_>, kind: u32) {
        if let Some(kind) = wait_kind(kind) {
            probe::wait_end_on(kind);
        }
    }
}

fn wait_kind(kind: u32) -> Option<WaitKind> {
    match kind {
        PARKED => Some(WaitKind::Parked),
        SLEEPING => Some(WaitKind::Sleeping),
        _ => None,
    }
}

/// A monitor event on the calling thread (`session`'s `VmEvents`).
pub fn on_monitor(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, event: MonitorEvent) {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    match event {
        MonitorEvent::ContendedEnter => {
            probe::wait_begin_owned(WaitKind::Blocked, || owner_id(jvmti, jni, object))
        }
        MonitorEvent::Wait => probe::wait_begin(WaitKind::Waiting),
        MonitorEvent::ContendedEntered => {
            probe::wait_end(WaitKind::Blocked, || class_id(jvmti, jni, object))
        }
        MonitorEvent::Waited => probe::wait_end(WaitKind::Waiting, || class_id(jvmti, jni, object)),
    }
}

/// A garbage collection pause starts or ends (`session`'s `VmEvents`, on
/// the VM's thread inside the pause: no JNI, no JVMTI, no lock).
pub fn on_gc(start: bool) {
    if !ON.load(Ordering::Acquire) {
        return;
    }
    if start {
        probe::gc_start();
    } else {
        probe::gc_finish();
    }
}

/// The id of `object`'s class, named to the CLI the first time; 0 when
/// it cannot be read or the ids ran out.
fn class_id(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>) -> u32 {
    let Some(class) = jni.object_class(object) else {
        return 0;
    };
    let sig = jvmti.class_signature(class);
    jni.delete_local(class);
    let Ok(sig) = sig else {
        return 0;
    };
    let name = binary_name(&sig);
    let mut classes = crate::sync::lock(&CLASSES);
    let Some(classes) = classes.as_mut() else {
        return 0;
    };
    if let Some(&id) = classes.get(&name) {
        return id;
    }
    let id = classes.len() as u32 + 1;
    if id > WAIT_CLASS_MAX {
        return 0;
    }
    classes.insert(name.clone(), id);
    outbox::post(Message::WaitClass { id, class: name });
    id
}

/// The id of the thread that owns `object`'s monitor now and of where it
/// is, named to the CLI the first time; 0 when it cannot be read, the
/// monitor has no owner any more, the last reading was less than
/// [`OWNER_GAP_NS`] ago or the ids ran out.
fn owner_id(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>) -> u32 {
    if !owner_turn() {
        return 0;
    }
    jni.with_local_frame(16, |jni| match jvmti.monitor_owner(&jni, object) {
        Ok(Some(owner)) => name_owner(jvmti, &jni, owner),
        _ => 0,
    })
}

/// The id of the thread that holds the `java.util.concurrent` lock a
/// park waits for (`blocker`, when it is an
/// `AbstractOwnableSynchronizer`) exclusively now and of where it is, as
/// [`owner_id`] names a monitor's owner; 0 when the blocker is no such
/// synchronizer, nobody holds it exclusively (no turn is taken then), the
/// last reading was less than [`OWNER_GAP_NS`] ago or the ids ran out.
fn lock_owner_id(jvmti: &Jvmti, jni: Jni<'_>, blocker: Local<'_>) -> u32 {
    let Some((class, field)) = SYNCHRONIZER.get() else {
        return 0;
    };
    if !owner_due() {
        return 0;
    }
    jni.with_local_frame(16, |jni| {
        if !jni.is_instance_of(blocker, class.as_local()) {
            return 0;
        }
        match jni.object_field(blocker, *field) {
            Some(owner) if owner_turn() => name_owner(jvmti, &jni, owner),
            _ => 0,
        }
    })
}

fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Whether an owner may be read now (no turn taken).
fn owner_due() -> bool {
    now_ns() >= NEXT_OWNER_NS.load(Ordering::Relaxed)
}

/// Takes the turn to read an owner: false when the last reading in the
/// process was less than [`OWNER_GAP_NS`] ago (or another thread took
/// this turn).
fn owner_turn() -> bool {
    let now = now_ns();
    let next = NEXT_OWNER_NS.load(Ordering::Relaxed);
    now >= next
        && NEXT_OWNER_NS
            .compare_exchange(
                next,
                now + OWNER_GAP_NS,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
}

/// The id of thread `owner` and of where it is now (its name, and its
/// innermost frames outside the JDK), named to the CLI the first time; 0
/// when it cannot be read or the ids ran out.
fn name_owner(jvmti: &Jvmti, jni: &Jni<'_>, owner: Local<'_>) -> u32 {
    let Ok((thread, _)) = jvmti.thread_info(jni, owner) else {
        return 0;
    };
    let frames = jvmti
        .thread_frames::<OWNER_FRAMES>(jni, owner)
        .unwrap_or_default();
    let names: Vec<String> = frames
        .into_iter()
        .filter_map(|m| frame_name(jvmti, jni, m))
        .collect();
    let context = owner_context(&names);
    let mut owners = crate::sync::lock(&OWNERS);
    let Some(owners) = owners.as_mut() else {
        return 0;
    };
    let key = (thread, context);
    if let Some(&id) = owners.get(&key) {
        return id;
    }
    let id = owners.len() as u32 + 1;
    if id > OWNERS_MAX {
        return 0;
    }
    let (thread, context) = key.clone();
    owners.insert(key, id);
    outbox::post(Message::WaitOwner {
        id,
        thread,
        context,
    });
    id
}

/// `pkg.Class.method` of a frame's method.
fn frame_name(jvmti: &Jvmti, jni: &Jni<'_>, m: crate::ffi::MethodId) -> Option<String> {
    let (name, _) = jvmti.method_name(m).ok()?;
    let class = jvmti.method_declaring_class(jni, m).ok()?;
    let sig = jvmti.class_signature(class);
    jni.delete_local(class);
    Some(format!("{}.{name}", binary_name(&sig.ok()?)))
}

/// The owner's context from its frames (`pkg.Class.method`, innermost
/// first): the first [`OWNER_CONTEXT`] outside the JDK and sprig, joined
/// with ` < `; the innermost frame when all are the JDK's.
fn owner_context(frames: &[String]) -> String {
    const JDK: [&str; 5] = ["java.", "javax.", "jdk.", "sun.", "sprig."];
    let own: Vec<&str> = frames
        .iter()
        .map(String::as_str)
        .filter(|f| !JDK.iter().any(|p| f.starts_with(p)))
        .take(OWNER_CONTEXT)
        .collect();
    if own.is_empty() {
        frames.first().cloned().unwrap_or_default()
    } else {
        own.join(" < ")
    }
}

/// `Lpkg/Name;` -> `pkg.Name`; other signatures (arrays) as they are.
fn binary_name(sig: &str) -> String {
    sig.strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(sig)
        .replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_classes_are_named_with_dots() {
        assert_eq!(binary_name("Lfixtures/Locks$Mon;"), "fixtures.Locks$Mon");
        assert_eq!(binary_name("[Ljava/lang/Object;"), "[Ljava.lang.Object;");
    }

    #[test]
    fn an_owners_context_is_its_innermost_frames_outside_the_jdk() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            owner_context(&f(&[
                "java.lang.Thread.sleep0",
                "java.lang.Thread.sleep",
                "app.Cache.fill",
                "app.Cache.get",
                "app.Main.run",
            ])),
            "app.Cache.fill < app.Cache.get"
        );
        assert_eq!(
            owner_context(&f(&["java.lang.Object.wait", "java.lang.Thread.run"])),
            "java.lang.Object.wait"
        );
        assert_eq!(owner_context(&[]), "");
    }
}
