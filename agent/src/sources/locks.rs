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
use crate::wait_classes::{
    LOCK_SUPPORT, PARKED, PROBED, REDIRECT_SLEEP, SLEEPING, THREAD, WAITS_CLASS,
};
use sprig_rewriter::vocab::access::ACC_NATIVE;
use sprig_wire::record::WAIT_CLASS_MAX;
use sprig_wire::{Message, WaitKind};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a session's lock source runs (the events may still come in
/// for a moment after it stopped).
static ON: AtomicBool = AtomicBool::new(false);
/// The monitor classes named so far in this session: binary name -> id.
static CLASSES: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

static WAITS_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Waits.class"));

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
