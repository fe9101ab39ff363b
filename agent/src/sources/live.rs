//! Live objects (`--alloc=live`): each allocation sample the sampled
//! allocation source writes inside a root context tags its object (JVMTI
//! `SetTag`, on the allocating thread in the SampledObjectAlloc callback)
//! and carries the tag in its record; when the JVM frees a tagged object
//! (JVMTI ObjectFree) its tag goes into a lock-free queue, which the
//! control thread drains (`service`, every turn of the control loop) into
//! `LiveFreed` messages. Garbage collections (GarbageCollectionFinish) are
//! counted; after one, the control thread has the JVM post the frees it
//! holds back (HotSpot posts them from its service thread, or when the
//! ObjectFree event's state is set, which `service` does), sends them,
//! then the count (`LiveGc`), so the CLI can take its figures of live
//! bytes after each collection.
//!
//! ObjectFree and GarbageCollectionFinish run where the VM posts them
//! (inside a pause, or on the VM's service thread after it): no JNI, no
//! JVMTI, no lock, no allocation. They touch statics only (the queue is a
//! fixed array), so a callback still in flight when the session ends
//! reads nothing that is freed; the source's stop switches ObjectFree off
//! and waits (at most `IN_FLIGHT_WAIT`) for the callbacks under way.
//!
//! A tag is the session's number in its top 16 bits and a sequence
//! number below: tags of an earlier session (objects keep their tags
//! after it, in the same environment) are dropped when freed. The queue
//! holds `QUEUE` frees; a free that finds it full is counted lost (its
//! object stays counted live) and the count sent with the next batch.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{Capabilities, Event, Jni, Jvmti, Local};
use crate::outbox;
use sprig_wire::Message;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Frees the queue holds between two drains.
const QUEUE: usize = 1 << 16;
const MASK: usize = QUEUE - 1;
/// Tries a free makes at a contended queue before it counts as lost.
const TRIES: u32 = 64;
/// The longest the stop waits for callbacks under way.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(200);
/// Tags per `LiveFreed` message.
const BATCH: usize = 8192;
/// Bits of a tag below the session number.
const SESSION_SHIFT: u32 = 48;

/// Whether a session follows live objects.
static ON: AtomicBool = AtomicBool::new(false);
/// The running session's number (top bits of its tags), 1.. .
static SESSION: AtomicU64 = AtomicU64::new(0);
/// The last tag's sequence number in this session.
static NEXT: AtomicU64 = AtomicU64::new(0);
/// Collections finished in this session.
static GCS: AtomicU64 = AtomicU64::new(0);
/// Frees lost to a full queue since the last batch.
static LOST: AtomicU64 = AtomicU64::new(0);
/// Callbacks under way.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One slot of the queue: `seq` (less the slot's index) says whether it
/// is free for the push at a position or full for the pop there, as in a
/// bounded multi-producer queue with per-slot sequence numbers.
struct Slot {
    seq: AtomicU64,
    tag: AtomicU64,
}

static SLOTS: [Slot; QUEUE] = [const {
    Slot {
        seq: AtomicU64::new(0),
        tag: AtomicU64::new(0),
    }
}; QUEUE];
/// The next position to push at, and the next to pop from.
static TAIL: AtomicU64 = AtomicU64::new(0);
static HEAD: AtomicU64 = AtomicU64::new(0);

/// What the control thread keeps between two turns.
struct Service {
    /// The collection count last sent.
    sent: u64,
}

static SERVICE: Mutex<Service> = Mutex::new(Service { sent: 0 });

/// Pushes a freed tag; false when the queue stayed full or contended.
fn push(tag: u64) -> bool {
    let mut pos = TAIL.load(Ordering::Relaxed);
    for _ in 0..TRIES {
        let idx = pos as usize & MASK;
        let slot = &SLOTS[idx];
        let seq = slot.seq.load(Ordering::Acquire).wrapping_add(idx as u64);
        let diff = seq.wrapping_sub(pos) as i64;
        if diff == 0 {
            match TAIL.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    slot.tag.store(tag, Ordering::Relaxed);
                    slot.seq
                        .store((pos + 1).wrapping_sub(idx as u64), Ordering::Release);
                    return true;
                }
                Err(now) => pos = now,
            }
        } else if diff < 0 {
            return false;
        } else {
            pos = TAIL.load(Ordering::Relaxed);
        }
    }
    false
}

/// Pops every tag pushed so far (the control thread only); stops at a
/// slot whose push is still under way.
fn drain(out: &mut Vec<u64>) {
    let mut pos = HEAD.load(Ordering::Relaxed);
    loop {
        let idx = pos as usize & MASK;
        let slot = &SLOTS[idx];
        let seq = slot.seq.load(Ordering::Acquire).wrapping_add(idx as u64);
        if seq != pos + 1 {
            break;
        }
        out.push(slot.tag.load(Ordering::Relaxed));
        slot.seq.store(
            (pos + QUEUE as u64).wrapping_sub(idx as u64),
            Ordering::Release,
        );
        pos += 1;
    }
    HEAD.store(pos, Ordering::Relaxed);
}

/// Counts a callback under way while it lives.
struct InFlight;

impl InFlight {
    fn enter() -> InFlight {
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The live objects source of one session.
pub struct LiveObjects;

impl LiveObjects {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            tag_objects: true,
            object_free_events: true,
            gc_events: true,
            ..Capabilities::NONE
        },
        events: &[Event::ObjectFree, Event::GarbageCollectionFinish],
        ring: true,
    };

    pub const NAME: &'static str = "live objects";

    /// The one line a session shows when the source cannot run.
    pub fn unavailable(why: &str) -> String {
        format!("--alloc=live: no live objects, allocation samples only ({why})")
    }
}

impl Source for LiveObjects {
    fn name(&self) -> &'static str {
        LiveObjects::NAME
    }

    fn needs(&self) -> Needs {
        LiveObjects::NEEDS
    }

    /// Its capabilities potentially available; the test hook
    /// `SPRIG_AGENT_FAULT=live-unavailable` plays a JVM that does not
    /// offer `can_tag_objects`.
    fn check(&self, agent: &Agent) -> Result<(), String> {
        let mut have = agent
            .jvmti
            .potential_capabilities()
            .map_err(|e| format!("GetPotentialCapabilities: {e}"))?;
        if crate::error::fault_named("live-unavailable") {
            have.tag_objects = false;
        }
        let want = LiveObjects::NEEDS.capabilities;
        if want.within(have) {
            Ok(())
        } else {
            Err(format!(
                "this JVM cannot grant {}",
                want.missing_from(have).join(", ")
            ))
        }
    }

    fn start(&mut self, agent: &'static Agent, _jni: Jni<'_>) -> Result<(), String> {
        // What an earlier session left in the queue is not this one's.
        let mut old = Vec::new();
        drain(&mut old);
        LOST.store(0, Ordering::Relaxed);
        GCS.store(0, Ordering::Relaxed);
        NEXT.store(0, Ordering::Relaxed);
        crate::sync::lock(&SERVICE).sent = 0;
        let session = (SESSION.load(Ordering::Relaxed) % 0xFFFF) + 1;
        SESSION.store(session, Ordering::Relaxed);
        ON.store(true, Ordering::Release);
        for event in LiveObjects::NEEDS.events {
            agent
                .jvmti
                .set_event(*event, true)
                .map_err(|e| format!("cannot enable the {event:?} event: {e}"))?;
        }
        Ok(())
    }

    fn stop(&mut self, agent: &'static Agent, _jni: Jni<'_>, _ending: &mut Ending) {
        // Turned off, ObjectFree posts what is pending first.
        let _ = agent.jvmti.set_event(Event::ObjectFree, false);
        // The last frees and collections, then nothing more.
        flush(&agent.jvmti, true);
        ON.store(false, Ordering::Release);
        let t0 = Instant::now();
        while IN_FLIGHT.load(Ordering::Acquire) > 0 && t0.elapsed() < IN_FLIGHT_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Tags a sampled object for the session (`sampled_alloc`, on the
/// allocating thread); the tag, or 0 when live objects are off or the tag
/// could not be set.
pub fn tag(jvmti: &Jvmti, object: Local<'_>) -> u64 {
    if !ON.load(Ordering::Acquire) {
        return 0;
    }
    let seq = NEXT.fetch_add(1, Ordering::Relaxed) + 1;
    let tag = SESSION.load(Ordering::Relaxed) << SESSION_SHIFT | (seq & ((1 << SESSION_SHIFT) - 1));
    match jvmti.set_tag(object, tag as i64) {
        Ok(()) => tag,
        Err(_) => 0,
    }
}

/// ObjectFree (`session`'s `VmEvents`): no JNI, no JVMTI, no lock.
pub fn on_free(tag: u64) {
    let _f = InFlight::enter();
    if !ON.load(Ordering::Acquire) || tag >> SESSION_SHIFT != SESSION.load(Ordering::Relaxed) {
        return;
    }
    if !push(tag) {
        LOST.fetch_add(1, Ordering::Relaxed);
    }
}

/// GarbageCollectionFinish (`session`'s `VmEvents`), inside the pause.
pub fn on_gc_finish() {
    let _f = InFlight::enter();
    if ON.load(Ordering::Acquire) {
        GCS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The control thread's turn (`session`'s control loop): after a
/// collection, the JVM is made to post the frees it has pending (turning
/// ObjectFree on again does: HotSpot posts what the collection left before
/// it changes the event's state), then the queued frees are sent, then
/// the collection count, so the CLI's figures after it count its frees.
pub fn service(jvmti: &Jvmti) {
    if ON.load(Ordering::Acquire) {
        flush(jvmti, false);
    }
}

/// Sends the queued frees, and the collection count when it changed
/// (`last`: the ObjectFree event was just turned off, which posted what
/// was pending).
fn flush(jvmti: &Jvmti, last: bool) {
    let gcs = GCS.load(Ordering::Relaxed);
    let mut s = crate::sync::lock(&SERVICE);
    let new_gc = gcs != s.sent;
    if new_gc && !last {
        let _ = jvmti.set_event(Event::ObjectFree, true);
    }
    let mut tags = Vec::new();
    drain(&mut tags);
    let session = SESSION.load(Ordering::Relaxed);
    tags.retain(|t| t >> SESSION_SHIFT == session);
    let lost = LOST.swap(0, Ordering::Relaxed);
    if tags.is_empty() && lost > 0 {
        outbox::send(Message::LiveFreed {
            tags: Vec::new(),
            lost,
        });
    }
    for (i, c) in tags.chunks(BATCH).enumerate() {
        outbox::send(Message::LiveFreed {
            tags: c.to_vec(),
            lost: if i == 0 { lost } else { 0 },
        });
    }
    if new_gc {
        s.sent = gcs;
        outbox::send(Message::LiveGc { gc: gcs });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_hands_back_what_was_pushed_and_refuses_when_full() {
        let mut out = Vec::new();
        drain(&mut out);
        out.clear();
        for t in 1..=1000u64 {
            assert!(push(t));
        }
        drain(&mut out);
        assert_eq!(out, (1..=1000).collect::<Vec<_>>());
        out.clear();
        // Full: QUEUE pushes fit, the next does not.
        for t in 0..QUEUE as u64 {
            assert!(push(t + 1), "push {t}");
        }
        assert!(!push(7));
        drain(&mut out);
        assert_eq!(out.len(), QUEUE);
        out.clear();
        // And again after the drain, across the wrap.
        assert!(push(42));
        drain(&mut out);
        assert_eq!(out, vec![42]);

        // Concurrent pushes (one test: the queue is a static).
        let threads: Vec<_> = (0..4u64)
            .map(|k| {
                std::thread::spawn(move || {
                    let mut lost = 0;
                    for i in 0..5000u64 {
                        if !push(k << 32 | (i + 1)) {
                            lost += 1;
                        }
                    }
                    lost
                })
            })
            .collect();
        let mut got = Vec::new();
        while got.len() < 20_000 && threads.iter().any(|t| !t.is_finished()) {
            drain(&mut got);
        }
        let lost: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        drain(&mut got);
        assert_eq!(got.len() as u64 + lost, 20_000);
        got.sort_unstable();
        got.dedup();
        assert_eq!(got.len() as u64 + lost, 20_000, "no tag twice");
    }
}
