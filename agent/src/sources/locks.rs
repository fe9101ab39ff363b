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
use crate::ffi::{Capabilities, Event, Jni, Jvmti, Local, MonitorEvent, WaitNatives};
use crate::outbox;
use crate::probe;
use sprig_rewriter::vocab::access::{ACC_NATIVE, ACC_STATIC, NO_CODE};
use sprig_rewriter::{ProbeSet, Target};
use sprig_wire::record::WAIT_CLASS_MAX;
use sprig_wire::{Message, WaitKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Whether a session's lock source runs (the events may still come in
/// for a moment after it stopped).
static ON: AtomicBool = AtomicBool::new(false);
/// The monitor classes named so far in this session: binary name -> id.
static CLASSES: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

/// The JDK's park and sleep methods carry the wait probes (set by the
/// source's start before it retransforms them, cleared by its stop
/// before it puts them back).
static PROBED: AtomicBool = AtomicBool::new(false);

/// The classes the probes rewrite call `Waits.sleep` for
/// `Thread.sleep(long)` (native on this JDK: it cannot carry the probes).
/// Set before the probes' source starts ([`prepare`]), cleared by the
/// lock source's stop.
static REDIRECT_SLEEP: AtomicBool = AtomicBool::new(false);

/// Internal name of the class of the wait probes.
const WAITS_CLASS: &str = "sprig/rt/Waits";
static WAITS_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Waits.class"));
/// The classes whose methods get the wait probes.
const LOCK_SUPPORT: &str = "java/util/concurrent/locks/LockSupport";
const THREAD: &str = "java/lang/Thread";

/// The lock source of one session.
pub struct Locks;

impl Locks {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            monitor_events: true,
            gc_events: true,
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
    }
}

/// A session starts, with `--locks` (`locks`) or not, before the probes'
/// source: where `Thread.sleep(long)` is native, a `--locks` session's
/// probes redirect its calls to `Waits.sleep` ([`redirects_sleep`]),
/// once `Waits`' natives are bound.
pub fn prepare(agent: &'static Agent, jni: Jni<'_>, locks: bool) {
    let redirect = locks && sleep_is_native(&agent.jvmti, jni) && bind_waits(jni).is_ok();
    REDIRECT_SLEEP.store(redirect, Ordering::Release);
}

/// Whether the classes the probes rewrite now call `Waits.sleep` for
/// `Thread.sleep(long)`.
pub fn redirects_sleep() -> bool {
    REDIRECT_SLEEP.load(Ordering::Acquire)
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

/// `Thread.sleep(long)`'s calls in a class the probes rewrote go to
/// `Waits.sleep` while [`redirects_sleep`]; `bytes` as they were when
/// the class calls no such method or cannot be changed.
pub fn redirect_sleep(bytes: Vec<u8>) -> Vec<u8> {
    if !redirects_sleep() {
        return bytes;
    }
    match sprig_rewriter::redirect_static(&bytes, THREAD, "sleep", "(J)V", WAITS_CLASS) {
        Ok(Some(b)) => b,
        _ => bytes,
    }
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

/// The wait kind of each probe call (the probes' id).
const PARKED: u32 = WaitKind::Parked as u32;
const SLEEPING: u32 = WaitKind::Sleeping as u32;

/// The two probe pairs of `Waits`: the park methods with a blocker get
/// it (`parkOn`), the others their kind (`begin`).
fn wait_probe_sets() -> &'static [ProbeSet] {
    static SETS: OnceLock<[ProbeSet; 2]> = OnceLock::new();
    SETS.get_or_init(|| {
        let set = |entry: &str, entry_receiver| ProbeSet {
            class: WAITS_CLASS.to_string(),
            entry: entry.to_string(),
            exit: "end".to_string(),
            entry_receiver,
        };
        [set("parkOn", true), set("begin", false)]
    })
}

/// The class file load hook's answer for `LockSupport` and `Thread`
/// while the wait probes are wanted: `Some` with the new bytes (`None`
/// inside when nothing could be instrumented), `None` for any other
/// class or when they are not wanted.
pub fn class_file(name: &str, bytes: &[u8]) -> Option<Option<Vec<u8>>> {
    if (name != LOCK_SUPPORT && name != THREAD) || !PROBED.load(Ordering::Acquire) {
        return None;
    }
    let targets = wait_targets(name, bytes);
    if targets.is_empty() {
        return Some(None);
    }
    let out = match sprig_rewriter::instrument(bytes, &targets, wait_probe_sets()) {
        Ok(out) => out,
        Err(e) => {
            outbox::send(Message::Warning(format!(
                "--locks: {} could not be instrumented ({e}): its waits are not recorded",
                name.replace('/', ".")
            )));
            return Some(None);
        }
    };
    for m in out.methods.iter().filter(|m| m.result.is_err()) {
        outbox::send(Message::Warning(format!(
            "--locks: {}.{}{} could not be instrumented ({:?}): its waits are not recorded",
            name.replace('/', "."),
            m.name,
            m.descriptor,
            m.result
        )));
    }
    Some(Some(out.bytes))
}

/// The methods of `LockSupport` or `Thread` (as `bytes` declare them)
/// that get the wait probes.
fn wait_targets(name: &str, bytes: &[u8]) -> Vec<Target> {
    let Ok(info) = sprig_rewriter::class_info(bytes) else {
        return Vec::new();
    };
    let has_code = |n: &str, d: &str| {
        info.methods.iter().any(|m| {
            m.name == n
                && m.descriptor == d
                && m.access & NO_CODE == 0
                && m.access & ACC_STATIC != 0
        })
    };
    let target = |n: &str, d: &str, id: u32, probes: usize| Target {
        name: n.to_string(),
        descriptor: d.to_string(),
        id,
        probes,
    };
    let mut out = Vec::new();
    if name == LOCK_SUPPORT {
        for (n, d) in [
            ("park", "(Ljava/lang/Object;)V"),
            ("parkNanos", "(Ljava/lang/Object;J)V"),
            ("parkUntil", "(Ljava/lang/Object;J)V"),
        ] {
            if has_code(n, d) {
                out.push(target(n, d, PARKED, 0));
            }
        }
        for (n, d) in [
            ("park", "()V"),
            ("parkNanos", "(J)V"),
            ("parkUntil", "(J)V"),
        ] {
            if has_code(n, d) {
                out.push(target(n, d, PARKED, 1));
            }
        }
    } else if has_code("sleepNanos", "(J)V") {
        // JDK 21+: every sleep goes through it.
        out.push(target("sleepNanos", "(J)V", SLEEPING, 1));
    } else if has_code("sleep", "(J)V") {
        out.push(target("sleep", "(J)V", SLEEPING, 1));
    } else if has_code("sleep", "(JI)V") {
        // `sleep(long)` is native: `sleep(long, int)` calls it.
        out.push(target("sleep", "(JI)V", SLEEPING, 1));
    }
    out
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
        probe::wait_begin_on(kind, || match blocker {
            Some(b) => class_id(&agent.jvmti, jni, b),
            None => 0,
        });
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
        MonitorEvent::ContendedEnter => probe::wait_begin(WaitKind::Blocked),
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
}
