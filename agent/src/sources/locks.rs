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
//! What is covered: `synchronized` methods and blocks, `Object.wait` and
//! stop-the-world collections. JVMTI posts no event for
//! `LockSupport.park` or `Thread.sleep`: `java.util.concurrent` locks and
//! sleeps stay in the self time of the method that waited.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{Capabilities, Event, Jni, Jvmti, Local, MonitorEvent};
use crate::outbox;
use crate::probe;
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

    fn start(&mut self, agent: &'static Agent, _jni: Jni<'_>) -> Result<(), String> {
        *crate::sync::lock(&CLASSES) = Some(HashMap::new());
        ON.store(true, Ordering::Release);
        for &event in Locks::NEEDS.events {
            agent
                .jvmti
                .set_event(event, true)
                .map_err(|e| format!("locks: cannot enable the {event:?} event: {e}"))?;
        }
        Ok(())
    }

    fn stop(&mut self, _agent: &'static Agent, _jni: Jni<'_>, _ending: &mut Ending) {
        ON.store(false, Ordering::Release);
        *crate::sync::lock(&CLASSES) = None;
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
