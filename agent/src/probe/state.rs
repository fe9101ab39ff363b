//! A thread's probe state: its cells (generation, root-context depth,
//! slot, producer, bursts) and the reads every probe makes of them.

use super::ring::GENERATION;
use crate::ffi::slots::Slot;
use sprig_wire::ClockKind;
use sprig_wire::clock;
use sprig_wire::ring::Producer;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct ThreadState {
    pub(super) generation: Cell<u64>,
    /// Root-context depth, unless `slot` holds it.
    pub(super) depth: Cell<u32>,
    /// This thread's slot of the Java path's table (`ffi::slots`), kept for
    /// the thread's life once claimed (0: never tried, see `java_id`).
    pub(super) owned_slot: Cell<Option<Slot>>,
    /// `owned_slot` while this generation lets the probe class record in
    /// Java (sampled timing): it then holds the depth and, while open, the
    /// position in the producer's segment.
    pub(super) slot: Cell<Option<Slot>>,
    /// The Java thread id (`Thread.getId()`), 0 until registration.
    pub(super) java_id: Cell<u64>,
    /// Set while this thread runs the probe's own slow path (registration).
    pub(super) busy: Cell<bool>,
    /// Registration failed in this generation: never record on this thread.
    pub(super) disabled: Cell<bool>,
    /// Thread index in the current generation (valid with a producer).
    pub(super) index: Cell<u32>,
    pub(super) tsc: Cell<bool>,
    pub(super) clock: Cell<ClockKind>,
    /// Sampled timing: entries and exits inside a root context carry no
    /// timestamp (the root's own entry and exit still do).
    pub(super) untimed: Cell<bool>,
    pub(super) producer: RefCell<Option<Producer>>,
    /// Clock reading from which this thread's next root call ends with a
    /// calibration burst (0: the next one).
    pub(super) next_burst: Cell<u64>,
    /// The probe class is running a burst: the next closing root exit
    /// closes, whatever the clock says.
    pub(super) in_burst: Cell<bool>,
    /// Clock reading when this thread's root context opened: a root call
    /// running longer than a burst period runs its bursts at exits inside
    /// it (`natives::exit`).
    pub(super) root_since: Cell<u64>,
    /// `--locks`: the clock when the thread's current wait of each kind
    /// (blocked, waiting, parked, sleeping) began inside a root context;
    /// 0 for none (`wait`).
    pub(super) wait_since: [Cell<u64>; 4],
    /// `--locks`: the class id of the object the thread's current park
    /// waits on, named when the park began (`wait::wait_begin_on`).
    pub(super) wait_class: Cell<u32>,
    /// `--locks`: the owner id of the lock the thread's current wait of
    /// each kind waits for (a contended enter's monitor, a park's
    /// `java.util.concurrent` lock), read when it began
    /// (`wait::wait_begin_owned`, `wait::wait_begin_on`); 0 for none.
    pub(super) wait_owner: [Cell<u32>; 4],
    /// The garbage collection pauses this thread has seen (`wait`).
    pub(super) gc_seen: Cell<u64>,
    /// The state of a virtual thread (`ffi::vthreads`): its own, whatever
    /// carrier runs it.
    pub(super) virtual_thread: Cell<bool>,
    /// A virtual thread unmounted keeping its segment: the generation it
    /// was counted in (`ring::PARKED`), 0 when not.
    pub(super) parked: Cell<u64>,
    /// What [`now`](Self::now) adds to a clock other than the TSC: under
    /// `--clock cpu` on a virtual thread, its own CPU time before this
    /// mount less the carrier's CPU clock at it (wrapping), so that its
    /// clock is the sum of its mounted stretches whatever carriers ran
    /// them (`ffi::vthreads` calls `mounted`/`unmounted`). 0 otherwise:
    /// set to 0 at every registration.
    pub(super) shift: Cell<u64>,
    /// Under `--clock cpu`, a virtual thread's own CPU clock when it last
    /// unmounted.
    pub(super) cpu_at_unmount: Cell<u64>,
    /// Windows timing: root frames open in this thread's silent root
    /// context (0: none open; `windows`).
    pub(super) silent: Cell<u32>,
    /// Windows timing: the word the CPU-timer's signal handler reads on
    /// this thread (`ffi::agct::SilentFilter`): the session's tag (the low
    /// half of `GENERATION`) in the high half, and a counter in the low
    /// half, odd while a silent root context is open, bumped at each open
    /// and close (so a walk that straddles either sees it change).
    pub(super) silent_word: AtomicU64,
    /// The open silent root context recorded its entry (it did unless it
    /// opened in the cost tail's warm-up): its exit records too.
    pub(super) silent_timed: Cell<bool>,
    /// Windows timing: the Java thread id of a virtual thread's state, set
    /// at its registration (0 on a platform thread). The CPU-timer's signal
    /// handler reads it beside the silent word, so that a sample of a
    /// carrier running this virtual thread is credited to the virtual
    /// thread (`ffi::agct::SilentFilter`).
    pub(super) sample_key: AtomicU64,
}

impl ThreadState {
    pub(super) const fn new() -> ThreadState {
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
            wait_since: [const { Cell::new(0) }; 4],
            wait_class: Cell::new(0),
            wait_owner: [const { Cell::new(0) }; 4],
            gc_seen: Cell::new(0),
            virtual_thread: Cell::new(false),
            parked: Cell::new(0),
            shift: Cell::new(0),
            cpu_at_unmount: Cell::new(0),
            silent: Cell::new(0),
            silent_word: AtomicU64::new(0),
            silent_timed: Cell::new(false),
            sample_key: AtomicU64::new(0),
        }
    }

    /// A silent root context opens: the silent word goes to the next odd
    /// count under this session's tag.
    #[inline]
    pub(super) fn silent_word_open(&self) {
        let tag = GENERATION.load(Ordering::Relaxed) & 0xffff_ffff;
        let count = self.silent_word.load(Ordering::Relaxed) as u32;
        let next = (count | 1).wrapping_add(if count & 1 == 1 { 2 } else { 0 });
        self.silent_word
            .store((tag << 32) | u64::from(next), Ordering::Release);
    }

    /// The silent root context closes: the count goes to the next even
    /// value.
    #[inline]
    pub(super) fn silent_word_close(&self) {
        let w = self.silent_word.load(Ordering::Relaxed);
        let next = ((w as u32) | 1).wrapping_add(1);
        self.silent_word
            .store((w & !0xffff_ffff) | u64::from(next), Ordering::Release);
    }

    #[inline(always)]
    pub(super) fn current(&self) -> bool {
        self.generation.get() == GENERATION.load(Ordering::Relaxed)
    }

    #[inline(always)]
    pub(super) fn now(&self) -> u64 {
        if self.tsc.get() {
            clock::read_tsc()
        } else {
            clock::read(self.clock.get()).wrapping_add(self.shift.get())
        }
    }

    /// The timestamp of an entry or exit inside a root context: the clock,
    /// or 0 under sampled timing, where no probe inside reads it.
    #[inline(always)]
    pub(super) fn inner_now(&self) -> u64 {
        if self.untimed.get() { 0 } else { self.now() }
    }

    #[inline(always)]
    pub(super) fn depth(&self) -> u32 {
        match self.slot.get() {
            Some(slot) => slot.depth(),
            None => self.depth.get(),
        }
    }

    #[inline(always)]
    pub(super) fn set_depth(&self, d: u32) {
        match self.slot.get() {
            Some(slot) => slot.set_depth(d),
            None => self.depth.set(d),
        }
    }
}
