//! The probe runtime: what the natives of `sprig.rt.Probe` do. This is the
//! hot path of the profiler.
//!
//! Per thread (a `thread_local!` of plain cells, const-initialised): the
//! session generation the state belongs to, the root-context depth, a
//! reentrancy guard, the thread index and the ring producer. A state from
//! an older generation (an earlier attach) is reset on the thread's next
//! root entry and ignored by every other probe.
//!
//! Root probes open the root context at depth 0 (`RootEntry`), count as a
//! plain entry when nested; plain probes record only inside a root context.
//! An exit at depth 0 (an old frame finishing after a re-attach) is ignored.
//! The root natives tell the Java side when they open or close a context,
//! and it counts open contexts per thread-id slot (`Probe.INSIDE`): a plain
//! probe on a thread outside every root context then stops in Java even
//! while other threads are inside one (about 2 ns instead of a native call
//! of 11-20 ns on this machine kind, `sprig-bench --only probe`).
//!
//! On JDK 22+ the probe class calls the `fast_*` functions first (FFM
//! critical downcalls: no JNIEnv, no thread-state transition, so they must
//! never block); they handle the common cases and return `FAST_SLOW` for
//! everything that needs JNI, JVMTI or a wait, and the Java side then calls
//! the JNI native, which does the whole probe.
//!
//! Cost on this machine kind: one `rdtsc` is ~8.5 ns, a JNI call to an
//! empty native ~8 ns, a critical downcall ~2.3 ns. Summed, a pair would
//! take ~37 ns on the JNI path and ~22 ns on the FFM path; measured in
//! place they overlap to ~23 ns (JDK 17) and ~20 ns (JDK 25) a pair
//! (`sprig-bench --only probe`, 2026-11-25, 3651a5f). The thread's state is
//! reached through one `%fs`-relative load (`ffi::tls`), not the
//! `__tls_get_addr` call a `thread_local!` costs in a shared library
//! (which took 1.5-2 ns of the JNI pair).

use crate::ffi::Jni;
use crate::ffi::slots::{self, Segment, Slot};
use crate::methods;
use crate::probe_class;
use crate::reveal;
use crate::threads;
use sprig_wire::clock;
use sprig_wire::control::Timing;
use sprig_wire::ring::{Producer, Region, Spare};
use sprig_wire::{ClockKind, Event, EventKind};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Bumped at every session start and end (and when the ring dies): thread
/// states of another generation are stale.
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Root probes open new root contexts only while this is set.
static PROFILING: AtomicBool = AtomicBool::new(false);
/// Set when a producer found the ring dead; the control thread detaches.
static RING_DEAD: AtomicBool = AtomicBool::new(false);
/// Threads currently inside a root context (low 32 bits, mirrored into
/// `Probe.active`) and root contexts opened so far (high 32 bits, wrapping):
/// one atomic add per root entry and exit keeps both.
static ACTIVE_THREADS: AtomicU64 = AtomicU64::new(0);
const ONE_OPEN: u64 = 1 << 32;
/// Control thread only: the open count it saw with no thread inside a root
/// context while `Probe.active` was still raised (`NOT_SEEN` otherwise).
static SETTLE_SEEN: AtomicU64 = AtomicU64::new(NOT_SEEN);
const NOT_SEEN: u64 = u64::MAX;
/// How often the control thread looks at the count while `Probe.active` is
/// raised with no thread inside a root context: it lowers the field one to
/// two ticks later when no root context opened in between (socket read
/// timeouts round this up to the kernel's tick).
pub const SETTLE_TICK: Duration = Duration::from_millis(2);
/// Whether `Probe.active` was last written non-zero.
static PUBLISHED: AtomicBool = AtomicBool::new(false);
static LOST: AtomicU64 = AtomicU64::new(0);
static WAIT_BOUND_MS: AtomicU32 = AtomicU32::new(1000);
static REGION: RwLock<Option<Arc<Region>>> = RwLock::new(None);
/// Clock ticks between two calibration bursts of one thread; 0 while no
/// burst may run (no calibration class in this JVM, or the agent's own
/// calibration is running).
static BURST_EVERY: AtomicU64 = AtomicU64::new(0);
/// Whether the session times calls by sampling (`Timing::Sampled`); a
/// thread takes it when it registers.
static SAMPLED: AtomicBool = AtomicBool::new(false);
/// Entries and exits inside root contexts that the agent wrote under
/// sampled timing: all of them without the Java path; with it, a first
/// call, a full segment, a thread without its slot, a slot closed around
/// revelation. The rest went through the probe class's Java path.
static NATIVE_INNER: AtomicU64 = AtomicU64::new(0);
/// The ring's pinned address range, once a session retired its ring: the
/// next session maps its ring there (`Region::from_fd_pinned`), so
/// repeated sessions do not grow the address space, and nothing a Java
/// probe may still write to is ever unmapped.
static SPARE: std::sync::Mutex<Option<Spare>> = std::sync::Mutex::new(None);

/// `root_exit`: this call did not close the root context.
pub const ROOT_NESTED: i32 = 0;
/// `root_exit`: this call closed the thread's root context.
pub const ROOT_CLOSED: i32 = 1;
/// `root_exit`: the thread is due for a calibration burst before it
/// closes its root context. Nothing is recorded; the probe class runs
/// `Calibration.burst` (a few dozen calls of the instrumented empty
/// method) and calls `nRootExit` again, which closes the context. The CCT
/// builder measures the probes from those calls, on this thread right
/// after the root's own code, and takes the burst out of the profile
/// (wire `CALIBRATION_EMPTY_ID`). Only for a probe class that says it
/// does so (`probe_class::bursts_available`): an older one would take
/// the value for a closed context.
pub const ROOT_BURST_FIRST: i32 = 3;

/// Lets root calls end with a calibration burst, one per thread every
/// `every_ticks` at most; 0 turns bursts off. Only once the calibration
/// class is defined (the probe class calls it) and while the agent's own
/// calibration is not running (its batches are root calls too).
pub fn set_burst_every(every_ticks: u64) {
    BURST_EVERY.store(every_ticks, Ordering::Relaxed);
}

struct ThreadState {
    generation: Cell<u64>,
    /// Root-context depth, unless `slot` holds it.
    depth: Cell<u32>,
    /// This thread's slot of the Java path's table (`ffi::slots`), kept for
    /// the thread's life once claimed (0: never tried, see `java_id`).
    owned_slot: Cell<Option<Slot>>,
    /// `owned_slot` while this generation lets the probe class record in
    /// Java (sampled timing): it then holds the depth and, while open, the
    /// position in the producer's segment.
    slot: Cell<Option<Slot>>,
    /// The Java thread id (`Thread.getId()`), 0 until registration.
    java_id: Cell<u64>,
    /// Set while this thread runs the probe's own slow path (registration).
    busy: Cell<bool>,
    /// Registration failed in this generation: never record on this thread.
    disabled: Cell<bool>,
    /// Thread index in the current generation (valid with a producer).
    index: Cell<u32>,
    tsc: Cell<bool>,
    clock: Cell<ClockKind>,
    /// Sampled timing: entries and exits inside a root context carry no
    /// timestamp (the root's own entry and exit still do).
    untimed: Cell<bool>,
    producer: RefCell<Option<Producer>>,
    /// Clock reading from which this thread's next root call ends with a
    /// calibration burst (0: the next one).
    next_burst: Cell<u64>,
    /// The probe class is running a burst: the next closing root exit
    /// closes, whatever the clock says.
    in_burst: Cell<bool>,
    /// Clock reading when this thread's root context opened: a root call
    /// running longer than a burst period runs its bursts at exits inside
    /// it ([`exit`]).
    root_since: Cell<u64>,
}

impl ThreadState {
    const fn new() -> ThreadState {
        ThreadState {
            generation: Cell::new(0),
            depth: Cell::new(0),
            owned_slot: Cell::new(None),
            slot: Cell::new(None),
            java_id: Cell::new(0),
            busy: Cell::new(false),
            disabled: Cell::new(false),
            index: Cell::new(0),
            tsc: Cell::new(false),
            clock: Cell::new(ClockKind::Monotonic),
            untimed: Cell::new(false),
            producer: RefCell::new(None),
            next_burst: Cell::new(0),
            in_burst: Cell::new(false),
            root_since: Cell::new(0),
        }
    }

    #[inline(always)]
    fn current(&self) -> bool {
        self.generation.get() == GENERATION.load(Ordering::Relaxed)
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        if self.tsc.get() {
            clock::read_tsc()
        } else {
            clock::read(self.clock.get())
        }
    }

    /// The timestamp of an entry or exit inside a root context: the clock,
    /// or 0 under sampled timing, where no probe inside reads it.
    #[inline(always)]
    fn inner_now(&self) -> u64 {
        if self.untimed.get() { 0 } else { self.now() }
    }

    #[inline(always)]
    fn depth(&self) -> u32 {
        match self.slot.get() {
            Some(slot) => slot.depth(),
            None => self.depth.get(),
        }
    }

    #[inline(always)]
    fn set_depth(&self, d: u32) {
        match self.slot.get() {
            Some(slot) => slot.set_depth(d),
            None => self.depth.set(d),
        }
    }

    #[inline(always)]
    fn push(&self, ev: Event) {
        let mut p = self.producer.borrow_mut();
        if let Some(p) = p.as_mut() {
            if self.untimed.get() {
                count_native(ev);
            }
            let slot = self.slot.get();
            if let Some(slot) = slot {
                take_up(slot, p);
            }
            // A producer of an earlier session (its ring retired) refuses:
            // that is no news about this session's ring.
            if p.push(ev).is_err() && self.current() {
                ring_dead();
            }
            if let Some(slot) = slot {
                self.reopen(slot, p);
            }
        }
    }

    /// Appends `ev` only if it fits the producer's current segment (never
    /// waits); false when the caller must take the JNI path.
    #[inline(always)]
    fn try_push(&self, ev: Event) -> bool {
        let Ok(mut p) = self.producer.try_borrow_mut() else {
            return false;
        };
        let Some(p) = p.as_mut() else {
            return false;
        };
        // Exact timing (no slot): the plain append, inlined into the
        // probes; the Java path's bookkeeping stays out of line.
        match self.slot.get() {
            None if !self.untimed.get() => p.try_push(ev),
            slot => self.try_push_sampled(slot, p, ev),
        }
    }

    /// [`ThreadState::try_push`] under sampled timing: takes up where the
    /// Java probes left the segment, appends, counts the native event and
    /// reopens the slot.
    #[inline(never)]
    fn try_push_sampled(&self, slot: Option<Slot>, p: &mut Producer, ev: Event) -> bool {
        if let Some(slot) = slot {
            take_up(slot, p);
        }
        let done = p.try_push(ev);
        if done {
            if self.untimed.get() {
                count_native(ev);
            }
            if let Some(slot) = slot {
                self.reopen(slot, p);
            }
        }
        done
    }

    /// Opens the thread's slot onto the producer's segment when the Java
    /// probes may record (sampled timing, not busy, this generation, a
    /// segment owned), closes it otherwise.
    #[inline]
    fn reopen(&self, slot: Slot, p: &Producer) {
        let generation = self.generation.get();
        match p.window() {
            Some(w) if !self.busy.get() && self.untimed.get() => {
                slot.open(
                    Segment {
                        slots: w.slots,
                        committed: w.committed,
                        pos: w.pos,
                        cap: w.cap,
                    },
                    || GENERATION.load(Ordering::SeqCst) == generation,
                );
            }
            _ => slot.close(),
        }
    }

    /// Closes the slot (the Java probes take the native path) after taking
    /// up where they left the segment.
    fn close_slot(&self) {
        let Some(slot) = self.slot.get() else {
            return;
        };
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            take_up(slot, p);
        }
        slot.close();
    }

    /// Reopens the slot after [`ThreadState::close_slot`], if it may be.
    fn reopen_slot(&self) {
        let Some(slot) = self.slot.get() else {
            return;
        };
        if let Ok(p) = self.producer.try_borrow()
            && let Some(p) = p.as_ref()
        {
            self.reopen(slot, p);
        }
    }

    /// Forgets a stale generation's state.
    #[cold]
    fn reset(&self, generation: u64) {
        self.close_slot();
        self.set_depth(0);
        self.slot.set(None);
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(mut old) = p.take()
        {
            old.release();
        }
        self.generation.set(generation);
        self.set_depth(0);
        self.disabled.set(false);
        self.next_burst.set(0);
        self.in_burst.set(false);
    }
}

/// Counts an entry or exit inside a root context that the agent wrote
/// under sampled timing ([`native_inner_events`]).
#[inline(always)]
fn count_native(ev: Event) {
    if matches!(
        ev.kind(),
        Some(EventKind::MethodEntry | EventKind::MethodExit)
    ) {
        NATIVE_INNER.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes up the producer where the Java probes left its segment (the
/// slot's position, while it is open).
#[inline(always)]
fn take_up(slot: Slot, p: &mut Producer) {
    if slot.is_open() {
        p.resume_at(slot.pos());
    }
}

/// Runs `f` with the calling thread's probe state (through the `ffi::tls`
/// slot); `None` once the thread is ending.
#[inline(always)]
fn with_state<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    crate::ffi::with_state(&STATE, f)
}

/// The natives of `sprig.rt.Probe`, as `ffi` binds them.
pub struct Natives;

impl crate::ffi::ProbeNatives for Natives {
    const SITE_AGAIN: i32 = SITE_AGAIN;
    const FAST_SLOW: i32 = FAST_SLOW;

    #[inline(always)]
    fn enter(id: u32, jni: Jni<'_>) {
        enter(id, jni)
    }
    #[inline(always)]
    fn exit(id: u32, jni: Jni<'_>) {
        exit(id, jni)
    }
    #[inline(always)]
    fn root_enter(id: u32, jni: Jni<'_>) -> bool {
        root_enter(id, jni)
    }
    #[inline(always)]
    fn root_exit(id: u32, jni: Jni<'_>) -> i32 {
        root_exit(id, jni)
    }
    fn reflect(jni: Jni<'_>, method: crate::ffi::Local<'_>) -> bool {
        reflect(jni, method)
    }
    fn site(jni: Jni<'_>, site_id: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
        site(jni, site_id, receiver)
    }
    #[inline(always)]
    fn fast_enter(id: u32) -> i32 {
        fast_enter(id)
    }
    #[inline(always)]
    fn fast_exit(id: u32) -> i32 {
        fast_exit(id)
    }
    #[inline(always)]
    fn fast_root_enter(id: u32) -> i32 {
        fast_root_enter(id)
    }
    #[inline(always)]
    fn fast_root_exit(id: u32) -> i32 {
        fast_root_exit(id)
    }
}

impl Drop for ThreadState {
    /// The thread is ending: close its stream with `ThreadEnd`.
    fn drop(&mut self) {
        crate::ffi::forget_state();
        self.close_slot();
        if let Some(slot) = self.owned_slot.take() {
            slot.free();
        }
        if !self.current() {
            return;
        }
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            let _ = p.push(Event::new(
                EventKind::ThreadEnd,
                self.index.get(),
                self.now(),
            ));
            p.release();
        }
    }
}

thread_local! {
    static STATE: ThreadState = const { ThreadState::new() };
    /// Calibration only: a private ring this thread records into instead of
    /// the session's, so its events never reach the CLI while taking the
    /// same probe path (see `with_private_ring`).
    static PRIVATE_RING: RefCell<Option<Arc<Region>>> = const { RefCell::new(None) };
}

/// Runs `f` with the calling thread's probes recording into `region`
/// instead of the session's ring, as thread index 0 and without a `Thread`
/// message (probe calibration). The thread's probe state is forgotten
/// before and after, so it holds no producer of `region` afterwards.
pub fn with_private_ring<R>(region: Arc<Region>, f: impl FnOnce() -> R) -> R {
    forget_thread_state();
    let _ = PRIVATE_RING.try_with(|p| *p.borrow_mut() = Some(region));
    let out = f();
    let _ = PRIVATE_RING.try_with(|p| p.borrow_mut().take());
    forget_thread_state();
    out
}

fn forget_thread_state() {
    let _ = with_state(|s| s.reset(GENERATION.load(Ordering::Acquire)));
}

#[cold]
fn ring_dead() {
    LOST.fetch_add(1, Ordering::Relaxed);
    if !RING_DEAD.swap(true, Ordering::AcqRel) {
        PROFILING.store(false, Ordering::Release);
        GENERATION.fetch_add(1, Ordering::AcqRel);
    }
}

/// `Probe.nEnter`: entry of an instrumented method.
#[inline]
pub fn enter(id: u32, jni: Jni<'_>) {
    let _ = with_state(|s| {
        if s.depth() == 0 {
            return;
        }
        if s.busy.get() || !s.current() {
            return;
        }
        if !methods::is_active(id) && !enter_dormant(s, id, jni) {
            return;
        }
        let ts = s.inner_now();
        s.set_depth(s.depth() + 1);
        if check_first_call(s, id, jni) {
            s.push(Event::new(EventKind::MethodEntry, id, ts));
        }
    });
}

/// A method with dormant probes entered inside a root context: revealed
/// and activated on this thread before its entry is recorded (the time
/// goes out as `AdjustTime`, like a first call's), so every call of it
/// inside a root context is recorded: a thread inside it now entered it
/// while it was dormant only outside any root context, and records none of
/// that frame. Returns whether the entry is to be recorded; an id it could
/// not activate is not tried again in this session (an id past the
/// bitmap is never dormant).
#[cold]
#[inline(never)]
fn enter_dormant(s: &ThreadState, id: u32, jni: Jni<'_>) -> bool {
    if !reveal::enabled() || methods::dormant_entry_refused(id) {
        reveal::count_dormant_passed();
        return false;
    }
    let Some(agent) = crate::env::get() else {
        return false;
    };
    // Two threads may enter it at once: the second finds it revealed.
    let active = revealing(s, Charge::OpenFrames, || {
        (true, reveal::entered(&agent.jvmti, jni, id))
    });
    if !active {
        methods::refuse_dormant_entry(id);
    }
    // The session may have ended while it revealed: nothing to record then.
    active && s.current()
}

/// `Probe.nReflect` and `Probe.nReflected`: `Method.invoke` or
/// `Constructor.newInstance` is about to run `method`. Inside a root
/// context the agent reveals (and instruments) the target on this thread
/// before the call proceeds, and the time goes out as `AdjustTime`,
/// charged to the frames open now. Returns whether the target is handed
/// over in the current session (now or before): the probe class then
/// remembers the object and sends its later calls here no more.
pub fn reflect(jni: Jni<'_>, method: crate::ffi::Local<'_>) -> bool {
    with_state(|s| {
        if s.depth() == 0 || s.busy.get() || !s.current() || !reveal::enabled() {
            return false;
        }
        let Some(mid) = jni.reflected_method(method) else {
            return false;
        };
        // A target handed over before costs nothing more (no JVMTI, no
        // clock, no lock).
        if reveal::reflective_target_seen(mid) {
            return true;
        }
        let Some(agent) = crate::env::get() else {
            return false;
        };
        revealing(s, Charge::OpenFrames, || {
            match reveal::reflective_call(&agent.jvmti, jni, mid) {
                Some(did) => (did, true),
                None => (false, false),
            }
        })
    })
    .unwrap_or(false)
}

/// Which frames the time of profiler work on a probing thread is taken
/// out of (wire `ADJUST_OPEN_FRAMES`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Charge {
    /// The frames open after the event the probe records next: the probe
    /// read that event's timestamp before the work (a first call's entry).
    NextEvent,
    /// The frames open now: the work ran before the probe read any
    /// timestamp (a reflective call, a watched call site, a dormant method
    /// switched on before its entry is stamped) or outside any probe (the
    /// class file load hook).
    OpenFrames,
}

impl Charge {
    fn adjust(self, spent: u64) -> Event {
        let e = Event::new(EventKind::AdjustTime, 0, spent);
        match self {
            Charge::NextEvent => e,
            Charge::OpenFrames => e.with_aux(sprig_wire::event::ADJUST_OPEN_FRAMES),
        }
    }
}

/// Runs revelation work `f` on this thread with the recursion guard set
/// (Java code it runs here records nothing), and records the time it took
/// as `AdjustTime` (charged as `charge` says) when `f` says it did (or
/// waited for) anything, so that no frame is charged for it.
fn revealing<R>(s: &ThreadState, charge: Charge, f: impl FnOnce() -> (bool, R)) -> R {
    s.busy.set(true);
    // The Java probes of code run here record nothing either.
    s.close_slot();
    let t0 = s.now();
    let (worked, out) = f();
    let spent = s.now().saturating_sub(t0);
    s.busy.set(false);
    s.reopen_slot();
    // The session may have ended (and the next begun) while `f` ran: the
    // thread's producer belongs to the old ring then.
    if worked && spent > 0 && s.current() {
        s.push(charge.adjust(spent));
    }
    out
}

/// Runs profiler work `f` that a JVM event runs on the thread it happens
/// on (the class file load hook of a class the thread loads or defines, a
/// class being linked): on a thread inside a root context of this session,
/// its time goes out as `AdjustTime` charged to the frames open now, and
/// the recursion guard is set meanwhile (a redefinition it runs on this
/// thread passes the hook again, inside this charge). Any other thread,
/// or one already revealing (whose time is charged already), just runs `f`.
pub fn charged_out<R>(f: impl FnOnce() -> R) -> R {
    let inside = with_state(|s| {
        (s.depth() > 0 && !s.busy.get() && s.current()).then(|| {
            s.busy.set(true);
            // The Java probes of code run here record nothing either.
            s.close_slot();
            s.now()
        })
    })
    .flatten();
    let Some(t0) = inside else {
        return f();
    };
    let w0 = std::time::Instant::now();
    // Cleared even if `f` unwinds (every FFI boundary catches it).
    struct Unbusy;
    impl Drop for Unbusy {
        fn drop(&mut self) {
            let _ = with_state(|s| {
                s.busy.set(false);
                s.reopen_slot();
            });
        }
    }
    let unbusy = Unbusy;
    let out = f();
    drop(unbusy);
    reveal::count_charged_out(w0.elapsed().as_nanos() as u64);
    let _ = with_state(|s| {
        let spent = s.now().saturating_sub(t0);
        // The session may have ended meanwhile: its ring is gone then.
        if spent > 0 && s.current() {
            s.push(Charge::OpenFrames.adjust(spent));
        }
    });
    out
}

/// `Probe.nSite`: a receiver of class `receiver` is about to be called at
/// watched call site `site` (no class: a static or special site runs for
/// the first time). Inside a root context the agent instruments what the
/// call reaches (on this thread, before the call runs); the time goes out
/// as `AdjustTime` like a first call's. Returns [`SITE_SEEN`],
/// [`SITE_DONE`] or [`SITE_AGAIN`].
pub fn site(jni: Jni<'_>, site: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
    let r = site_on_thread(jni, site, receiver);
    reveal::count_site_call(r);
    r
}

fn site_on_thread(jni: Jni<'_>, site: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
    with_state(|s| {
        if s.depth() == 0 || s.busy.get() || !s.current() || !reveal::enabled() {
            return SITE_AGAIN;
        }
        let Some(agent) = crate::env::get() else {
            return SITE_AGAIN;
        };
        let done = revealing(s, Charge::OpenFrames, || {
            reveal::dispatched_call(&agent.jvmti, jni, site, receiver)
        });
        if done { SITE_DONE } else { SITE_SEEN }
    })
    .unwrap_or(SITE_AGAIN)
}

/// `nSite`: what the receiver's class reaches is instrumented; the Java
/// side remembers the class.
pub const SITE_SEEN: i32 = 0;
/// `nSite`: the site is watched no more.
pub const SITE_DONE: i32 = 1;
/// `nSite`: nothing was done (not inside a root context, the thread busy
/// revealing, no session): ask again next time.
pub const SITE_AGAIN: i32 = 2;

/// Longest a thread waits for another thread revealing the callees of a
/// method it is entering (past it, it goes on; a call may be missed).
const FIRST_CALL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// An entry in a root context: the first call of `id` reveals its callees
/// (on this thread); a thread entering while another one reveals them
/// waits, so it never runs a callee whose probes are not in place yet.
/// Returns whether the entry may still be recorded: false when the
/// session ended while the thread revealed or waited (its producer
/// belongs to the ended session's ring, where it writes nothing more).
#[inline]
fn check_first_call(s: &ThreadState, id: u32, jni: Jni<'_>) -> bool {
    match methods::claim_first_call(id) {
        methods::FirstCall::Done => true,
        methods::FirstCall::Mine => {
            // Done even if revealing unwinds: no thread may wait for
            // nothing on every entry.
            struct Done(u32);
            impl Drop for Done {
                fn drop(&mut self) {
                    methods::first_call_done(self.0);
                }
            }
            let _done = Done(id);
            reveal_first_call(s, id, jni);
            s.current()
        }
        methods::FirstCall::Pending => {
            await_first_call(s, id);
            s.current()
        }
    }
}

/// Waits (bounded) for the thread revealing the callees of `id`; the time
/// goes out as `AdjustTime`, like the revealing thread's.
#[cold]
#[inline(never)]
fn await_first_call(s: &ThreadState, id: u32) {
    let t0 = s.now();
    if !methods::wait_first_call(id, FIRST_CALL_WAIT) {
        // Give up on this one for good rather than wait at every entry.
        methods::first_call_done(id);
    }
    let spent = s.now().saturating_sub(t0);
    // As in `revealing`: nothing through a producer of an ended session.
    if spent > 0 && s.current() {
        s.push(Event::new(EventKind::AdjustTime, 0, spent));
    }
}

/// The first call of `id` (in a root context): reveal its callees on this
/// thread, with the recursion guard set (Java code the redefinition runs
/// on this thread, e.g. class loading for verification, is not recorded),
/// and record the time as `AdjustTime` just before the entry event, so it
/// is charged to no frame.
#[cold]
#[inline(never)]
fn reveal_first_call(s: &ThreadState, id: u32, jni: Jni<'_>) {
    if !reveal::enabled() {
        return;
    }
    let Some(agent) = crate::env::get() else {
        return;
    };
    revealing(s, Charge::NextEvent, || {
        (reveal::first_call(&agent.jvmti, jni, id), ())
    });
}

/// `Probe.nExit`: normal or exceptional exit of an instrumented method.
/// In a root call that has run for longer than a burst period, the exit
/// that finds the thread due runs its calibration burst (see
/// [`mid_root_burst`]).
#[inline]
pub fn exit(id: u32, jni: Jni<'_>) {
    let _ = with_state(|s| {
        let d = s.depth();
        // At depth 1 only the root's own exit may close the context.
        if d <= 1 || s.busy.get() || !s.current() || !methods::is_active(id) {
            return;
        }
        let ts = s.inner_now();
        s.set_depth(d - 1);
        s.push(Event::new(EventKind::MethodExit, id, ts));
        if ts >= s.next_burst.get() && burst_due_inside(s, ts) {
            mid_root_burst(s, ts, jni);
        }
    });
}

/// Whether a thread inside a root context is due for a burst at an exit
/// inside it (`ts` past its next burst): bursts are on, and its root call
/// has run for a burst period already (a shorter one bursts as it
/// returns).
#[inline]
fn burst_due_inside(s: &ThreadState, ts: u64) -> bool {
    let every = BURST_EVERY.load(Ordering::Relaxed);
    every != 0 && ts >= s.root_since.get().saturating_add(every)
}

/// A calibration burst inside a long root call, right after the exit just
/// recorded: the burst's calls run through the probes like any others
/// (the CCT builder recognises them at any depth and takes them out), by
/// a call of `Calibration.burst` from here. Anything it throws is cleared.
#[cold]
#[inline(never)]
fn mid_root_burst(s: &ThreadState, ts: u64, jni: Jni<'_>) {
    let every = BURST_EVERY.load(Ordering::Relaxed);
    // Set first: the burst's own exits are not due.
    s.next_burst.set(ts.saturating_add(every));
    if let Some(class) = BURST_CLASS.get() {
        let _ = jni.call_static_void_int(class.as_local(), "burst", BURST_CALLS);
    }
}

/// Calls of the calibration class's empty method in a burst run from
/// [`mid_root_burst`] (the probe class's own bursts make `BURST_CALLS`).
const BURST_CALLS: i32 = 32;

/// The calibration class, for [`mid_root_burst`]; set with the burst period.
static BURST_CLASS: std::sync::OnceLock<crate::ffi::Global> = std::sync::OnceLock::new();

/// Keeps the calibration class for bursts inside long root calls (once per
/// JVM: the class is defined once).
pub fn set_burst_class(class: crate::ffi::Global) {
    let _ = BURST_CLASS.set(class);
}

/// Whether [`set_burst_class`] was called in this JVM.
pub fn has_burst_class() -> bool {
    BURST_CLASS.get().is_some()
}

/// `Probe.nRootEnter`: entry of a root method. Returns whether it opened
/// a root context on this thread (the Java side counts open contexts per
/// thread-id slot in `Probe.INSIDE`).
#[inline]
pub fn root_enter(id: u32, jni: Jni<'_>) -> bool {
    with_state(|s| {
        if s.busy.get() {
            return false;
        }
        let generation = GENERATION.load(Ordering::Relaxed);
        if s.generation.get() != generation {
            s.reset(generation);
        }
        let d = s.depth();
        if d > 0 {
            let ts = s.inner_now();
            s.set_depth(d + 1);
            if check_first_call(s, id, jni) {
                s.push(Event::new(EventKind::MethodEntry, id, ts));
            }
            return false;
        }
        if !PROFILING.load(Ordering::Acquire) || s.disabled.get() {
            return false;
        }
        if s.producer.borrow().is_none() && !register(s, jni) {
            s.disabled.set(true);
            return false;
        }
        open_root_context(jni);
        let ts = s.now();
        s.set_depth(1);
        s.root_since.set(ts);
        if check_first_call(s, id, jni) {
            s.push(Event::new(EventKind::RootEntry, id, ts));
        }
        true
    })
    .unwrap_or(false)
}

/// `Probe.nRootExit`: exit of a root method. Returns `ROOT_CLOSED` when
/// it closed this thread's root context, `ROOT_BURST_FIRST` when the
/// thread runs a calibration burst first, `ROOT_NESTED` otherwise. The
/// last thread out of a root context lowers `Probe.active` at once.
#[inline]
pub fn root_exit(id: u32, jni: Jni<'_>) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d == 0 || s.busy.get() || !s.current() {
            return ROOT_NESTED;
        }
        let ts = s.now();
        if d == 1 {
            let every = BURST_EVERY.load(Ordering::Relaxed);
            if s.in_burst.replace(false) {
                // the burst ran: close now
            } else if every != 0 && ts >= s.next_burst.get() {
                s.next_burst.set(ts.saturating_add(every));
                s.in_burst.set(true);
                return ROOT_BURST_FIRST;
            }
            s.set_depth(0);
            s.push(Event::new(EventKind::RootExit, id, ts));
            if close_root_context() {
                publish(jni);
            }
            ROOT_CLOSED
        } else {
            s.set_depth(d - 1);
            let ts = if s.untimed.get() { 0 } else { ts };
            s.push(Event::new(EventKind::MethodExit, id, ts));
            ROOT_NESTED
        }
    })
    .unwrap_or(ROOT_NESTED)
}

/// A fast probe recorded what it had to (or had nothing to record).
pub const FAST_DONE: i32 = 0;
/// A fast probe did nothing: the Java side calls the JNI native instead.
pub const FAST_SLOW: i32 = 1;

/// Nothing to record here: done, unless this library runs no session (an
/// older copy of the agent bound the probe class's fast path in an earlier
/// attach), in which case the JNI native, bound to the current library,
/// decides.
#[inline(always)]
fn fast_nothing() -> i32 {
    if PROFILING.load(Ordering::Relaxed) {
        FAST_DONE
    } else {
        FAST_SLOW
    }
}

/// Fast `enter` (FFM critical downcall, JDK 22+): the common case of
/// `enter`; a first call (revelation needs JNI and JVMTI) and a full
/// segment (claiming one may wait) go to the JNI path.
#[inline]
pub fn fast_enter(id: u32) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d == 0 {
            return fast_nothing();
        }
        if s.busy.get() || !s.current() {
            return fast_nothing();
        }
        if !methods::is_active(id) {
            // A dormant method running inside a root context is revealed
            // on the JNI path (once).
            return if methods::dormant_entry_refused(id) {
                fast_nothing()
            } else {
                FAST_SLOW
            };
        }
        if !methods::was_called(id) {
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodEntry, id, s.inner_now())) {
            return FAST_SLOW;
        }
        s.set_depth(d + 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `exit`: as `exit`, a full segment goes to the JNI path.
#[inline]
pub fn fast_exit(id: u32) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d <= 1 || s.busy.get() || !s.current() || !methods::is_active(id) {
            return fast_nothing();
        }
        let ts = s.inner_now();
        if ts >= s.next_burst.get() && burst_due_inside(s, ts) {
            // a burst inside a long root call: JNI calls it
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodExit, id, ts)) {
            return FAST_SLOW;
        }
        s.set_depth(d - 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `rootEnter`: only a root nested in an open root context (a plain
/// entry); opening a root context (registration, publishing
/// `Probe.active`) takes the JNI path.
#[inline]
pub fn fast_root_enter(id: u32) -> i32 {
    with_state(|s| {
        if s.busy.get() {
            return fast_nothing();
        }
        let d = s.depth();
        if d == 0 || !s.current() || !methods::was_called(id) {
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodEntry, id, s.inner_now())) {
            return FAST_SLOW;
        }
        s.set_depth(d + 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `rootExit`: only a root nested in an open root context (a plain
/// exit); closing a root context (lowering `Probe.active` when it is the
/// last one) takes the JNI path.
#[inline]
pub fn fast_root_exit(id: u32) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d == 0 || s.busy.get() || !s.current() {
            return fast_nothing();
        }
        if d == 1 || !s.try_push(Event::new(EventKind::MethodExit, id, s.inner_now())) {
            return FAST_SLOW;
        }
        s.set_depth(d - 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// First root entry of this thread in this session: index, producer,
/// `ThreadStart`, and the `Thread` message.
#[cold]
#[inline(never)]
fn register(s: &ThreadState, jni: Jni<'_>) -> bool {
    let private = PRIVATE_RING.try_with(|p| p.borrow().clone()).ok().flatten();
    let is_private = private.is_some();
    let region = match private {
        Some(r) => Some(r),
        None => match REGION.read() {
            Ok(r) => r.clone(),
            Err(_) => None,
        },
    };
    let Some(region) = region else {
        return false;
    };
    s.busy.set(true);
    let index = if is_private { 0 } else { threads::next_index() };
    s.index.set(index);
    let clock_kind = region.clock();
    s.clock.set(clock_kind);
    s.tsc.set(clock_kind == ClockKind::Tsc);
    // The private ring (the calibration) is always timed.
    s.untimed
        .set(!is_private && SAMPLED.load(Ordering::Relaxed));
    let bound = Duration::from_millis(u64::from(WAIT_BOUND_MS.load(Ordering::Relaxed)));
    let java = !is_private && s.untimed.get() && region.is_pinned() && probe_class::java_path();
    *s.producer.borrow_mut() = Some(Producer::new(region, index, bound));
    if !is_private {
        s.java_id.set(threads::announce(jni, index));
    }
    if java {
        use_slot(s);
    }
    s.push(Event::new(EventKind::ThreadStart, index, s.now()));
    s.busy.set(false);
    true
}

/// Lets the probe class record this thread's events in Java from now on
/// (sampled timing): its slot, claimed the first time, holds the depth.
/// A thread whose slot another thread holds stays on the native path.
fn use_slot(s: &ThreadState) {
    let id = s.java_id.get();
    if s.owned_slot.get().is_none() && id > 0 {
        s.owned_slot.set(slots::claim(id));
    }
    if let Some(slot) = s.owned_slot.get() {
        let d = s.depth.get();
        s.slot.set(Some(slot));
        s.set_depth(d);
    }
}

fn open_root_context(jni: Jni<'_>) {
    // SeqCst pairs with `publish`: either this thread sees the flag
    // cleared and publishes itself, or it sees it set, when the field is
    // raised already and every later publish reads this count.
    ACTIVE_THREADS.fetch_add(1 + ONE_OPEN, Ordering::SeqCst);
    if !PUBLISHED.load(Ordering::SeqCst) {
        publish(jni);
    }
}

/// Leaving a root context counts down; true when no thread is inside one
/// any more, and the caller then lowers `Probe.active` (`publish`), so the
/// instrumented methods that run outside root contexts cost one load and a
/// branch again. (The field used to stay raised until no root context had
/// opened for a millisecond: on javac, whose partial root `Gen::genClass`
/// runs about once a millisecond, it never came down, and every
/// instrumented method called elsewhere paid the look at `Probe.INSIDE`.)
fn close_root_context() -> bool {
    inside(ACTIVE_THREADS.fetch_sub(1, Ordering::SeqCst)) == 1
}

/// Threads inside a root context in a packed `ACTIVE_THREADS` value.
fn inside(v: u64) -> i32 {
    v as u32 as i32
}

/// Writes `Probe.active` (under the probe class's write lock).
///
/// `PUBLISHED` is cleared before the count is read and set again only once
/// a non-zero value is in the field, so a thread that opens a root context
/// and skips publishing because it saw the flag set (`open_root_context`)
/// finds the field raised, and every later publish counts it until it
/// leaves. (Setting the flag before the field was written let a second
/// thread run its root body against a field still 0 for a few µs, and its
/// callees' probes recorded nothing: the reset test lost a call to `a`
/// while the two `leaf` calls inside it were recorded.)
fn publish(jni: Jni<'_>) {
    probe_class::publish_active(
        jni,
        || {
            // A thread that saw the flag set before this store is counted
            // by the time `active_value` reads the count below.
            PUBLISHED.store(false, Ordering::SeqCst);
            active_value()
        },
        |v| PUBLISHED.store(v > 0, Ordering::SeqCst),
    );
}

/// Control thread, every tick: the backstop of the lowering at the close
/// of the last root context (`root_exit`), should a field be left raised
/// with no thread inside (every close to zero publishes after its count,
/// so this is defence, not a path the probes rely on): lowers
/// `Probe.active` to 0 once no thread has been inside a root context for a
/// whole tick (the open count did not move between two looks at a zero
/// count). Returns how long the control thread may wait before the next
/// look: `SETTLE_TICK` while the field is raised with no thread inside,
/// `None` (its own tick) otherwise.
pub fn settle_active(jni: Jni<'_>) -> Option<Duration> {
    let v = ACTIVE_THREADS.load(Ordering::SeqCst);
    if !PUBLISHED.load(Ordering::SeqCst) || inside(v) > 0 {
        SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
        return None;
    }
    let opens = v >> 32;
    if SETTLE_SEEN.swap(opens, Ordering::Relaxed) == opens {
        SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
        publish(jni);
        return None;
    }
    Some(SETTLE_TICK)
}

/// The value `Probe.active` should hold now.
fn active_value() -> i32 {
    if PROFILING.load(Ordering::SeqCst) {
        inside(ACTIVE_THREADS.load(Ordering::SeqCst)).max(0)
    } else {
        0
    }
}

/// A session starts recording into `region`.
pub fn begin_session(jni: Jni<'_>, region: Arc<Region>, wait_bound_ms: u32, timing: Timing) {
    *crate::sync::write(&REGION) = Some(region);
    NATIVE_INNER.store(0, Ordering::Relaxed);
    SAMPLED.store(timing == Timing::Sampled, Ordering::Relaxed);
    WAIT_BOUND_MS.store(wait_bound_ms.max(1), Ordering::Relaxed);
    LOST.store(0, Ordering::Relaxed);
    RING_DEAD.store(false, Ordering::Release);
    ACTIVE_THREADS.store(0, Ordering::SeqCst);
    SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
    BURST_EVERY.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    PROFILING.store(true, Ordering::SeqCst);
    publish(jni);
    probe_class::set_on(jni, true);
}

/// The session ends: every probe is silenced at once (`Probe.on` and
/// `Probe.active` go to 0 and every thread state becomes stale).
pub fn end_session(jni: Jni<'_>) {
    BURST_EVERY.store(0, Ordering::Relaxed);
    PROFILING.store(false, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::SeqCst);
    // After the generation: a thread opening its slot either sees the new
    // generation or has its slot closed here (`Slot::open`).
    slots::close_all();
    if SAMPLED.load(Ordering::Relaxed) && probe_class::debug_on() {
        eprintln!(
            "sprig agent: sampled timing: {} events inside root contexts written natively",
            native_inner_events()
        );
    }
    probe_class::set_on(jni, false);
    publish(jni);
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

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_wire::ring::{Consumer, RingConfig};

    fn small() -> RingConfig {
        RingConfig {
            segment_bytes: 64 + 8 * 16,
            segments: 4,
            clock: ClockKind::Monotonic,
            ticks_per_sec: 1_000_000_000,
        }
    }

    /// What the CLI reads from a ring now: (thread, event kinds).
    fn read(cli: &mut Consumer) -> Vec<(u32, Vec<u16>)> {
        let mut got = Vec::new();
        cli.poll(&mut |t, evs| got.push((t, evs.iter().map(|e| e.kind).collect())));
        got
    }

    /// The session ends and the next one begins while a thread of the
    /// first waits in the agent (a revelation, another thread's first
    /// call): its late `AdjustTime` and entry, pushed through the producer
    /// it captured before, must not land in the next session's ring (mapped
    /// at the same range, where the same segment belongs to another
    /// thread), nor end that session as if its ring had died.
    #[test]
    fn a_late_native_write_does_not_reach_the_next_sessions_ring() {
        // A session: this thread registered, its producer owns
        // segment 0 (thread index 0).
        let (_first_cons, fd) = Region::create_memfd(&small()).unwrap();
        let first = map_ring(fd).unwrap();
        *crate::sync::write(&REGION) = Some(first.clone());
        RING_DEAD.store(false, Ordering::SeqCst);
        PROFILING.store(true, Ordering::SeqCst);
        let s = ThreadState::new();
        s.generation.set(GENERATION.load(Ordering::SeqCst));
        *s.producer.borrow_mut() = Some(Producer::new(first, 0, Duration::from_secs(1)));
        s.push(Event::new(EventKind::ThreadStart, 0, 1));
        s.set_depth(1);

        // What the control threads do in the meantime: end the session,
        // retire its ring, map the next one at its range, begin; a thread
        // of the next session takes segment 0 again.
        let next_session = || {
            PROFILING.store(false, Ordering::SeqCst);
            GENERATION.fetch_add(1, Ordering::SeqCst);
            retire_ring().unwrap();
            let (cons, fd) = Region::create_memfd(&small()).unwrap();
            let next = map_ring(fd).unwrap();
            *crate::sync::write(&REGION) = Some(next.clone());
            GENERATION.fetch_add(1, Ordering::SeqCst);
            PROFILING.store(true, Ordering::SeqCst);
            let mut other = Producer::new(next, 0, Duration::from_secs(1));
            other
                .push(Event::new(EventKind::ThreadStart, 0, 2))
                .unwrap();
            (cons, other)
        };

        // `revealing`: the revelation outlives the session.
        let (cons, mut other) = revealing(&s, Charge::OpenFrames, || {
            let out = next_session();
            std::thread::sleep(Duration::from_millis(2));
            (true, out)
        });
        // `await_first_call`: another thread's first call is handled after
        // the next session began.
        let id = methods::RESERVED_FIRST - 7;
        assert_eq!(methods::claim_first_call(id), methods::FirstCall::Mine);
        let done = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            methods::first_call_done(id);
        });
        await_first_call(&s, id);
        done.join().unwrap();
        // An entry recorded after either wait (`enter`, `root_enter`).
        s.push(Event::new(EventKind::MethodEntry, 5, 3));

        // What the CLI reads of the next ring: the other thread's events
        // only, now and after it records again.
        let start = EventKind::ThreadStart as u16;
        let entry = EventKind::MethodEntry as u16;
        let mut cli = Consumer::new(cons);
        assert_eq!(read(&mut cli), vec![(0, vec![start])]);
        other
            .push(Event::new(EventKind::MethodEntry, 9, 4))
            .unwrap();
        drop(other);
        assert_eq!(read(&mut cli), vec![(0, vec![entry])]);
        assert!(
            !RING_DEAD.load(Ordering::SeqCst) && PROFILING.load(Ordering::SeqCst),
            "the late write ended the next session"
        );
        *crate::sync::write(&REGION) = None;
        PROFILING.store(false, Ordering::SeqCst);
    }
}
