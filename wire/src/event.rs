//! Fixed-layout event records written by probes into the shared ring.
//!
//! Every event is 16 bytes: a raw clock reading (or, for adjust-time, a
//! duration), a 32-bit payload (method id, thread index, ...) and a kind.
//! A payload that does not fit goes into a multi-slot record
//! ([`crate::record`]): a head event of kind [`EventKind::Record`] and
//! the slots after it.
//! Timestamps are raw ticks of the clock named in the region header; the
//! consumer converts them with the header's `ticks_per_sec`.

/// One record in the ring. `#[repr(C)]`, 16 bytes, no padding holes that
/// could leak memory contents.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Event {
    /// Clock ticks at the moment of the event; for [`EventKind::AdjustTime`]
    /// the number of ticks the thread spent blocked on the profiler.
    pub ts: u64,
    /// Method id for entry/exit kinds; otherwise see the kind's documentation.
    pub id: u32,
    /// An [`EventKind`] as `u16`.
    pub kind: u16,
    /// Kind-specific extra bits; zero unless documented.
    pub aux: u16,
}

const _: () = assert!(std::mem::size_of::<Event>() == 16);

/// Method id of `sprig.rt.Calibration.loop`, the root of the agent's own
/// calibration batches (the last id of the agent's tracked range, never
/// given to a user method); its events stay in the agent.
pub const CALIBRATION_LOOP_ID: u32 = (1 << 20) - 1;
/// Method id of `sprig.rt.Calibration.empty`, the empty method the
/// calibration times. Besides the calibration at attach and detach, a
/// thread at the end of a root call now and then calls it a few dozen
/// times before it closes its root context (an in-session calibration
/// burst): a run of [`EventKind::MethodEntry`]/[`EventKind::MethodExit`]
/// pairs of this id right before the [`EventKind::RootExit`]. The CCT builder takes the
/// burst out of the tree and out of the time of the frames around it, and
/// charges that thread's calls that follow the probe cost it measured.
pub const CALIBRATION_EMPTY_ID: u32 = (1 << 20) - 2;

/// `aux` of an [`EventKind::AdjustTime`] record whose time is charged to
/// the frames open when it is read, not after the next event.
pub const ADJUST_OPEN_FRAMES: u16 = 1;

/// What a record means. Values are part of the wire layout: never renumber.
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Entry into an instrumented method inside the root context. `id` = method id.
    MethodEntry = 1,
    /// Normal or exceptional exit of an instrumented method. `id` = method id;
    /// `aux` = 1 when the exit is exceptional (catch-all handler).
    MethodExit = 2,
    /// Entry into a root method; opens the root context on this thread. `id` = method id.
    RootEntry = 3,
    /// Exit from the outermost root frame; closes the root context. `id` = method id;
    /// `aux` = 1 when exceptional.
    RootExit = 4,
    /// Time this thread spent blocked on the profiler (ring full, revelation,
    /// class-load handling). `ts` = duration in ticks, `id` = 0. Placed in the
    /// stream at the moment the wait ended. With `aux` = 0 the wait came
    /// after the timestamp of the next event (a probe read its clock, then
    /// waited): the CCT builder subtracts it from every frame open on this
    /// thread once that event is applied. With `aux` =
    /// [`ADJUST_OPEN_FRAMES`] it came before anything the next event records
    /// (the class file load hook, a reflective call's or a call site's
    /// revelation, a dormant method switched on before its entry is
    /// stamped): it is subtracted from the frames open now only.
    AdjustTime = 5,
    /// First record of a thread. `id` = the thread's sprig index (the same as
    /// the segment's thread index); its name comes on the control channel.
    ThreadStart = 6,
    /// The thread ended (or profiling ended for it). `id` = thread index.
    ThreadEnd = 7,
    /// A calibration sample: `id` = sample number, `aux` = 0 for an entry-like
    /// reading, 1 for an exit-like reading. Only written by the calibration run.
    Calibration = 8,
    /// One object allocated inside the root context (`--alloc`), written
    /// by the probe class's Java path: `id` = its allocation site (the
    /// object or array the site allocates, level 0), `ts` = its bytes, not
    /// a clock reading. Everything else about allocations (more objects,
    /// the levels of a `multianewarray`) comes in a
    /// [`RECORD_ALLOC`](crate::record::RECORD_ALLOC) record.
    Alloc = 9,
    /// Reserved for monitor contention events.
    Monitor = 10,
    /// A marker: `id` = marker number. Used by tests and benchmarks.
    Marker = 11,
    /// The head of a multi-slot record (`crate::record`): `ts` = clock
    /// ticks, `id` = record kind, `aux` = N, the number of continuation
    /// slots that follow it in the same segment (1 to
    /// [`MAX_CONTINUATION`](crate::record::MAX_CONTINUATION)). A reader
    /// that does not know the record kind steps over the N slots.
    Record = 12,
    /// Windows timing: entry of a root method that opens a silent root
    /// context (no probe inside records). `id` = method id, `ts` = clock.
    SilentRootEntry = 13,
    /// Windows timing: exit of the outermost root frame of a silent root
    /// context. `id` = method id, `ts` = clock.
    SilentRootExit = 14,
}

impl EventKind {
    /// Decodes a raw kind, `None` for unknown values (a newer producer).
    #[inline]
    pub fn from_u16(v: u16) -> Option<EventKind> {
        use EventKind::*;
        Some(match v {
            1 => MethodEntry,
            2 => MethodExit,
            3 => RootEntry,
            4 => RootExit,
            5 => AdjustTime,
            6 => ThreadStart,
            7 => ThreadEnd,
            8 => Calibration,
            9 => Alloc,
            10 => Monitor,
            11 => Marker,
            12 => Record,
            13 => SilentRootEntry,
            14 => SilentRootExit,
            _ => return None,
        })
    }
}

impl Event {
    #[inline]
    pub const fn new(kind: EventKind, id: u32, ts: u64) -> Event {
        Event {
            ts,
            id,
            kind: kind as u16,
            aux: 0,
        }
    }

    #[inline]
    pub const fn with_aux(mut self, aux: u16) -> Event {
        self.aux = aux;
        self
    }

    #[inline]
    pub fn kind(&self) -> Option<EventKind> {
        EventKind::from_u16(self.kind)
    }
}
