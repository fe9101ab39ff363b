//! The session's ring and generation: the statics every probe reads to
//! know whether it records and where (`GENERATION`, `PROFILING`, `REGION`,
//! the wait bound, sampled timing), what a dead ring sets, and the ring's
//! pinned range kept from one session to the next (`SPARE`).

use sprig_wire::ring::{Region, Spare};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Bumped at every session start and end (and when the ring dies): thread
/// states of another generation are stale.
pub(super) static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Root probes open new root contexts only while this is set.
pub(super) static PROFILING: AtomicBool = AtomicBool::new(false);
/// Set when a producer found the ring dead; the control thread detaches.
pub(super) static RING_DEAD: AtomicBool = AtomicBool::new(false);
pub(super) static LOST: AtomicU64 = AtomicU64::new(0);
pub(super) static WAIT_BOUND_MS: AtomicU32 = AtomicU32::new(1000);
pub(super) static REGION: RwLock<Option<Arc<Region>>> = RwLock::new(None);
/// Whether the session times calls by sampling (`Timing::Sampled`); a
/// thread takes it when it registers.
pub(super) static SAMPLED: AtomicBool = AtomicBool::new(false);
/// Root calls on virtual threads are profiled this session: the JVM's
/// virtual threads are followed (`ffi::vthreads`; under `--clock cpu` a
/// virtual thread's clock is the sum of its mounted stretches,
/// `ThreadState::shift`).
pub(super) static VIRTUAL: AtomicBool = AtomicBool::new(false);
/// Virtual threads unmounted while keeping their ring segment (so that
/// position samples go on finding them inside their frames), and how many
/// may: half the ring's segments. Past that an unmounting virtual thread
/// hands its segment to the consumer (`ThreadState::unmounted`): virtual
/// threads parked inside roots could otherwise hold every segment while
/// the carriers that would run them on wait for one.
pub(super) static PARKED: AtomicU32 = AtomicU32::new(0);
pub(super) static PARK_BUDGET: AtomicU32 = AtomicU32::new(0);
/// Entries and exits inside root contexts that the agent wrote under
/// sampled timing: all of them without the Java path; with it, a first
/// call, a full segment, a thread without its slot, a slot closed around
/// revelation. The rest went through the probe class's Java path.
pub(super) static NATIVE_INNER: AtomicU64 = AtomicU64::new(0);
/// The ring's pinned address range, once a session retired its ring: the
/// next session maps its ring there (`Region::from_fd_pinned`), so
/// repeated sessions do not grow the address space, and nothing a Java
/// probe may still write to is ever unmapped.
static SPARE: std::sync::Mutex<Option<Spare>> = std::sync::Mutex::new(None);

#[cold]
pub(super) fn ring_dead() {
    LOST.fetch_add(1, Ordering::Relaxed);
    if !RING_DEAD.swap(true, Ordering::AcqRel) {
        PROFILING.store(false, Ordering::Release);
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// Retires the ring (frames still running old instrumented code write into
/// private memory from now on) and drops the session's reference.
pub fn retire_ring() -> std::io::Result<()> {
    let region = crate::sync::write(&REGION).take();
    match region {
        Some(r) => {
            if let Some(spare) = r.retire_pinned()? {
                *crate::sync::lock(&SPARE) = Some(spare);
            }
            Ok(())
        }
        None => Ok(()),
    }
}

/// Maps the session's ring from `fd` at the range the previous session's
/// ring left (see [`SPARE`]).
pub fn map_ring(fd: std::os::fd::OwnedFd) -> Result<Arc<Region>, sprig_wire::ring::RingError> {
    let spare = crate::sync::lock(&SPARE).take();
    Region::from_fd_pinned(fd, spare)
}

/// Entries and exits inside root contexts the agent wrote this session
/// under sampled timing (see [`NATIVE_INNER`]).
pub fn native_inner_events() -> u64 {
    NATIVE_INNER.load(Ordering::Relaxed)
}

/// Whether a producer found the ring dead in this session.
pub fn ring_is_dead() -> bool {
    RING_DEAD.load(Ordering::Acquire)
        || REGION
            .read()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.is_dead()))
            .unwrap_or(false)
}

/// Events lost in this session (the ring's count when it is mapped).
pub fn lost_events() -> u64 {
    let ring = REGION
        .read()
        .ok()
        .and_then(|r| r.as_ref().map(|r| r.lost_events()))
        .unwrap_or(0);
    ring.max(LOST.load(Ordering::Relaxed))
}
