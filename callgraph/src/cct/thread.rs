//! One thread's part of the builder: its shadow stack, its node arena,
//! the event loop, and the adjust-time, reset and probe-cost bookkeeping
//! of its frames.

use super::arena::{Arena, NONE};
use super::burst::{BURST_EMPTY, BurstState};
use super::credit::{Credit, Pending, Place, Placed};
use super::issues::StreamIssues;
use crate::profile::{
    Latency, Node, RECAL_UNIT, Recal, SampleCounts, Tree, add_alloc, add_sampled,
};
use sprig_wire::event::{ADJUST_OPEN_FRAMES, Event, EventKind};
use sprig_wire::record::{
    AllocRecord, RECORD_ALLOC, RECORD_SAMPLED_ALLOC, RECORD_WAIT, Record, SampledAlloc, Wait,
    wait_row_id,
};

const K_ENTRY: u16 = EventKind::MethodEntry as u16;
const K_EXIT: u16 = EventKind::MethodExit as u16;
const K_ROOT_ENTRY: u16 = EventKind::RootEntry as u16;
const K_ROOT_EXIT: u16 = EventKind::RootExit as u16;
pub(super) const K_ADJUST: u16 = EventKind::AdjustTime as u16;
const K_THREAD_START: u16 = EventKind::ThreadStart as u16;
const K_THREAD_END: u16 = EventKind::ThreadEnd as u16;
pub(super) const K_RECORD: u16 = EventKind::Record as u16;
const K_ALLOC: u16 = EventKind::Alloc as u16;
const K_SILENT_ENTRY: u16 = EventKind::SilentRootEntry as u16;
const K_SILENT_EXIT: u16 = EventKind::SilentRootExit as u16;
const K_LAST_KNOWN: u16 = EventKind::SilentRootExit as u16;

/// The entry timestamp of a silent root call that began before a reset.
const PARTIAL: u64 = u64::MAX;

/// A reset some threads may not have reached yet (see
/// [`CctBuilder::reset_at`](super::CctBuilder::reset_at)).
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingReset {
    pub(super) at: u64,
    pub(super) generation: u32,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    pub(super) node: u32,
    pub(super) method: u32,
    pub(super) start: u64,
    /// The thread's adjust sum when the frame was entered.
    pub(super) adjust: u64,
    /// The call began before a reset: its node counts it as incomplete
    /// already (see [`CctBuilder::reset_at`](super::CctBuilder::reset_at)).
    pub(super) partial: bool,
    /// A root frame (opened by a root entry, at depth 0).
    pub(super) root: bool,
    /// Its time counts: every frame in exact mode, root frames only in
    /// sampled mode (the other probes record no time).
    pub(super) timed: bool,
}

/// One thread's builder state.
#[derive(Clone, Debug)]
pub(super) struct ThreadState {
    pub(super) index: u32,
    /// Root calls entered on this thread (resets do not clear it).
    pub(super) root_entries: u64,
    pub(super) arena: Arena,
    pub(super) stack: Vec<Frame>,
    /// Tagged allocation samples (`--alloc=live`) not yet handed to the
    /// builder's live table.
    pub(super) tagged: Vec<super::live::Tagged>,
    pub(super) adjust_sum: u64,
    /// Adjust ticks read but not yet charged (until the next event).
    pending_adjust: u64,
    /// Continuation slots of a record still to step over: a batch that
    /// ended inside a record (the ring never delivers one so; a caller
    /// that cuts a delivered slice may).
    pub(super) skip: u32,
    pub(super) last_ts: u64,
    pub(super) issues: StreamIssues,
    /// The generation of the last reset applied to this thread.
    pub(super) reset_generation: u32,
    /// Calibration bursts (exact timing), and the probe cost they measured.
    pub(super) bursts: BurstState,
    /// The session calibration's (t_I, t_O) in 1/`RECAL_UNIT` ticks, what
    /// a root call's latency is charged for calls no burst measured.
    pub(super) session_cost: (u64, u64),
    /// Probe cost (1/`RECAL_UNIT` ticks) of the calls closed since the
    /// current root call began while a burst's figures were known.
    call_cost: u64,
    /// Calls closed since the current root call began before any burst
    /// measured the thread: charged the first burst's figures when one
    /// has come by the root's exit, as the tree's totals charge them.
    uncal_calls: u64,
    /// Sampled timing: entry and exit timestamps are ignored.
    pub(super) sampled: bool,
    /// Where the stream stands: (claim number, events of that segment
    /// processed); `None` until a [`Run`](sprig_wire::ring::Run) was seen.
    pub(super) pos: Option<Place>,
    /// Observations ahead of the stream.
    pending: Pending,
    pub(super) samples: SampleCounts,
    /// Windows timing: counted root calls record no latency.
    pub(super) windows: bool,
    /// The silent root call open now (method, entry timestamp).
    silent_open: Option<(u32, u64)>,
    /// Silent root calls closed (resets do not clear it).
    pub(super) silent_root_calls: u64,
    /// Per root method: the latencies of its complete root calls while the
    /// probes recorded, entry to exit with nothing subtracted (the probes'
    /// cost, the waits for the profiler and all), in ticks.
    pub(super) recorded: Vec<(u32, Latency)>,
    /// Per root method: the latencies of its silent root calls (windows
    /// timing's silent windows, the cost tail at the session's end).
    pub(super) silent: Vec<(u32, Latency)>,
}

/// The latencies of `method` in `per_root`, added when missing.
fn latencies_of(per_root: &mut Vec<(u32, Latency)>, method: u32) -> &mut Latency {
    let i = match per_root.iter().position(|(m, _)| *m == method) {
        Some(i) => i,
        None => {
            per_root.push((method, Latency::default()));
            per_root.len() - 1
        }
    };
    &mut per_root[i].1
}

impl ThreadState {
    pub(super) fn new(index: u32, sampled: bool) -> ThreadState {
        ThreadState {
            index,
            root_entries: 0,
            arena: Arena::with_capacity(1),
            stack: Vec::with_capacity(64),
            tagged: Vec::new(),
            adjust_sum: 0,
            pending_adjust: 0,
            skip: 0,
            last_ts: 0,
            issues: StreamIssues::default(),
            reset_generation: 0,
            bursts: BurstState::default(),
            session_cost: (0, 0),
            call_cost: 0,
            uncal_calls: 0,
            sampled,
            pos: None,
            pending: Pending::default(),
            samples: SampleCounts::default(),
            windows: false,
            silent_open: None,
            silent_root_calls: 0,
            recorded: Vec::new(),
            silent: Vec::new(),
        }
    }

    /// Credits a stack sample worth `weight` to the node of `path` (root
    /// method first), creating the nodes no counted call made.
    pub(super) fn credit_path(&mut self, path: &[u32], weight: u64) {
        let mut node = 0;
        for &m in path {
            node = self.arena.child(node, m);
        }
        let n = &mut self.arena.nodes[node as usize];
        n.samples += 1;
        n.sampled = n.sampled.saturating_add(weight);
        self.samples.credited += 1;
    }

    /// A silent root call closed at `ts`: its latency goes to the root's
    /// silent latencies and, under windows timing, to the root's node
    /// (which counts no call for it). The cost tail's calls (any other
    /// timing) leave the tree as it is.
    fn close_silent(&mut self, method: u32, ts: u64) {
        match self.silent_open.take() {
            Some((m, PARTIAL)) if m == method => self.silent_root_calls += 1,
            Some((m, start)) if m == method => {
                self.silent_root_calls += 1;
                let v = ts.saturating_sub(start);
                latencies_of(&mut self.silent, method).record(v);
                if self.windows {
                    let node = self.arena.child(0, method);
                    self.arena.nodes[node as usize]
                        .latency
                        .get_or_insert_with(Default::default)
                        .record(v);
                }
            }
            _ => self.issues.unmatched_exits += 1,
        }
    }

    /// Forgets everything recorded so far, as of time `at` (not before the
    /// last event processed): the tree keeps only the frames still open,
    /// each counted as one incomplete call whose time starts at `at`.
    fn reset(&mut self, at: u64) {
        let at = at.max(self.last_ts);
        if let Some((_, start)) = &mut self.silent_open {
            // began before the reset: no latency
            *start = PARTIAL;
        }
        let mut arena = Arena::with_capacity(self.stack.len() + 1);
        for f in &mut self.stack {
            f.node = arena.push_open(f.method);
            f.start = at;
            f.adjust = self.adjust_sum;
            f.partial = true;
        }
        self.arena = arena;
        self.issues = StreamIssues::default();
        self.recorded.clear();
        self.silent.clear();
        // Samples read before the reset belong to the forgotten part.
        self.samples = SampleCounts::default();
        self.pending.forget_before(at);
        self.last_ts = at;
        self.bursts.reset(at);
    }

    /// Applies reset `r` unless this thread had it already.
    pub(super) fn catch_up(&mut self, r: PendingReset) {
        if self.reset_generation != r.generation {
            self.reset(r.at);
            self.reset_generation = r.generation;
        }
    }

    #[inline(always)]
    fn enter(&mut self, parent: u32, method: u32, ts: u64) {
        let c = self.arena.child(parent, method);
        self.arena.links[c as usize].calls += 1;
        let root = parent == 0;
        if root {
            self.call_cost = 0;
            self.uncal_calls = 0;
        }
        self.stack.push(Frame {
            node: c,
            method,
            start: ts,
            adjust: self.adjust_sum,
            partial: false,
            root,
            timed: root || !self.sampled,
        });
    }

    #[inline(always)]
    fn close(&mut self, f: Frame, ts: u64) {
        let adjust_sum = self.adjust_sum;
        if !f.root {
            match self.bursts.recal.current {
                Some((inner, outer)) => {
                    self.call_cost = self.call_cost.saturating_add(inner.saturating_add(outer));
                }
                None => self.uncal_calls += 1,
            }
        }
        let d = if !f.timed {
            0
        } else if ts >= f.start {
            ts - f.start
        } else {
            self.issues.clock_went_backwards += 1;
            0
        };
        let waited = adjust_sum.wrapping_sub(f.adjust);
        let recal = self.bursts.recal.current;
        // An untimed call that waited for nothing (sampled timing's usual
        // exit) leaves its figures as they are: no write, no cache miss.
        if d == 0 && waited == 0 && recal.is_none() {
            return;
        }
        let n = &mut self.arena.nodes[f.node as usize];
        n.total = n.total.saturating_add(d);
        n.adjust = n.adjust.saturating_add(waited);
        if let Some((inner, outer)) = recal {
            n.recal.calls += 1;
            n.recal.inner = n.recal.inner.saturating_add(inner);
            n.recal.outer = n.recal.outer.saturating_add(outer);
        }
    }

    /// Closes a root frame at its exit and records the call's latency:
    /// exit minus entry, minus the waits for the profiler inside, and in
    /// exact mode minus the probe cost of every call inside (its own t_I,
    /// t_I + t_O of each call it made, directly or not), as
    /// [`Profile::times`] takes it out of the root's total. A call that
    /// began before a reset has no latency.
    ///
    /// Each call inside is charged the probe cost the tree's totals charge
    /// it: the thread's latest bursts when it closed, and for calls before
    /// the first burst that burst's figures (the session calibration
    /// received so far while there is none). So the calls add up to the
    /// root's exact total (within a tick a call) unless the thread's first
    /// burst came after the root call ended, or a later session
    /// calibration replaced the first (the faster of two stays).
    fn close_root(&mut self, f: Frame, ts: u64) {
        self.close(f, ts);
        if f.partial {
            return;
        }
        latencies_of(&mut self.recorded, f.method).record(ts.saturating_sub(f.start));
        if self.windows {
            return;
        }
        let waits = self.adjust_sum.wrapping_sub(f.adjust);
        let cost = if self.sampled {
            0
        } else {
            // Calls closed before the thread's first burst: its figures
            // when it has come (what the tree's totals charge them), the
            // session calibration's before.
            let (i0, o0) = self.bursts.recal.first.unwrap_or(self.session_cost);
            let before = self.uncal_calls.saturating_mul(i0.saturating_add(o0));
            let inner = self.bursts.recal.current.unwrap_or(self.session_cost).0;
            self.call_cost.saturating_add(before).saturating_add(inner) / RECAL_UNIT
        };
        let v = ts
            .saturating_sub(f.start)
            .saturating_sub(waits)
            .saturating_sub(cost);
        self.arena.nodes[f.node as usize]
            .latency
            .get_or_insert_with(Default::default)
            .record(v);
    }

    fn close_incomplete(&mut self, f: Frame, ts: u64) {
        self.close(f, ts);
        if !f.partial {
            self.arena.nodes[f.node as usize].incomplete += 1;
        }
    }

    /// An exit whose id is not the top frame's (or an empty stack).
    #[cold]
    fn exit_slow(&mut self, method: u32, ts: u64) {
        if self.stack.is_empty() {
            self.issues.exits_without_entry += 1;
            return;
        }
        match self.stack.iter().rposition(|f| f.method == method) {
            None => self.issues.unmatched_exits += 1,
            Some(pos) => {
                self.issues.mismatched_exits += 1;
                while self.stack.len() > pos + 1 {
                    if let Some(f) = self.stack.pop() {
                        self.issues.frames_closed_by_mismatch += 1;
                        self.close_incomplete(f, ts);
                    }
                }
                if let Some(f) = self.stack.pop() {
                    self.close(f, ts);
                }
            }
        }
    }

    /// A root entry while a root context is open: the agent records
    /// `RootEntry` only at depth 0, so the exits that would have closed the
    /// open frames were lost. They are closed here.
    #[cold]
    fn root_entry_in_context(&mut self, ts: u64) {
        self.issues.root_entries_in_context += 1;
        let n = self.close_all(ts);
        self.issues.frames_closed_by_root_entry += n;
    }

    /// A root exit that is not the only frame's: the agent records
    /// `RootExit` only for the outermost root frame, so it closes the
    /// lowest frame of that method and everything above it.
    #[cold]
    fn root_exit_slow(&mut self, method: u32, ts: u64) {
        if self.stack.is_empty() {
            self.issues.exits_without_entry += 1;
            return;
        }
        match self.stack.iter().position(|f| f.method == method) {
            None => self.issues.unmatched_exits += 1,
            Some(pos) => {
                self.issues.mismatched_exits += 1;
                while self.stack.len() > pos + 1 {
                    if let Some(f) = self.stack.pop() {
                        self.issues.frames_closed_by_mismatch += 1;
                        self.close_incomplete(f, ts);
                    }
                }
                if let Some(f) = self.stack.pop() {
                    self.close_root(f, ts);
                }
            }
        }
    }

    /// Closes every open frame at `ts`, innermost first; returns how many.
    pub(super) fn close_all(&mut self, ts: u64) -> u64 {
        let mut n = 0;
        while let Some(f) = self.stack.pop() {
            self.close_incomplete(f, ts);
            n += 1;
        }
        n
    }

    #[inline]
    pub(super) fn process(&mut self, mut events: &[Event]) {
        if self.skip != 0 {
            let n = (self.skip as usize).min(events.len());
            events = &events[n..];
            self.skip -= n as u32;
        }
        if self.sampled {
            self.process_mode::<true>(events)
        } else {
            self.process_mode::<false>(events)
        }
    }

    /// The event loop; `SAMPLED`: method entries and exits carry no time
    /// (the probes write 0), so they take the thread's last timestamp.
    /// A multi-slot record (`sprig_wire::record`) is stepped over whole,
    /// and a pending `AdjustTime` waits past it for the next event; a wait
    /// record adds a row under the open frame ([`ThreadState::wait`]); an
    /// allocation record adds its objects to the open frame's node.
    #[inline(always)]
    fn process_mode<const SAMPLED: bool>(&mut self, events: &[Event]) {
        let mut it = events.iter();
        while let Some(e) = it.next() {
            if self.bursts.on
                && self
                    .bursts
                    .event(e, &mut self.last_ts, &mut self.adjust_sum)
            {
                self.flush_adjust();
                continue;
            }
            match e.kind {
                K_ENTRY => {
                    let ts = if SAMPLED { self.last_ts } else { e.ts };
                    self.last_ts = ts;
                    match self.stack.last() {
                        Some(_) if e.id == BURST_EMPTY => self.bursts.start(ts, self.adjust_sum),
                        Some(top) => {
                            let parent = top.node;
                            self.enter(parent, e.id, ts);
                        }
                        None => self.issues.entries_outside_root += 1,
                    }
                }
                K_EXIT => {
                    let ts = if SAMPLED { self.last_ts } else { e.ts };
                    self.last_ts = ts;
                    match self.stack.last() {
                        Some(&top) if top.method == e.id => {
                            self.stack.pop();
                            self.close(top, ts);
                        }
                        _ => self.exit_slow(e.id, ts),
                    }
                }
                K_ROOT_ENTRY => {
                    self.last_ts = e.ts;
                    self.root_entries += 1;
                    if !self.stack.is_empty() {
                        self.root_entry_in_context(e.ts);
                    }
                    self.enter(0, e.id, e.ts);
                }
                K_ROOT_EXIT => {
                    self.last_ts = e.ts;
                    match self.stack.as_slice() {
                        &[only] if only.method == e.id => {
                            self.stack.clear();
                            self.close_root(only, e.ts);
                        }
                        _ => self.root_exit_slow(e.id, e.ts),
                    }
                }
                K_SILENT_ENTRY => {
                    self.last_ts = e.ts;
                    self.silent_open = Some((e.id, e.ts));
                }
                K_SILENT_EXIT => {
                    self.last_ts = e.ts;
                    self.close_silent(e.id, e.ts);
                }
                K_ADJUST if e.aux & ADJUST_OPEN_FRAMES != 0 => {
                    // charged to the frames open now
                    self.adjust_sum = self.adjust_sum.wrapping_add(e.ts);
                    continue;
                }
                K_ADJUST => {
                    // charged after the next event: see the module docs
                    self.pending_adjust = self.pending_adjust.saturating_add(e.ts);
                    continue;
                }
                K_THREAD_END => {
                    let ts = e.ts.max(self.last_ts);
                    self.last_ts = ts;
                    let n = self.close_all(ts);
                    self.issues.frames_open_at_thread_end += n;
                }
                K_THREAD_START => {}
                K_ALLOC => {
                    self.alloc(e.id, 0, 1, e.ts);
                    // Not an event of the tree, as a record (below).
                    continue;
                }
                K_RECORD => {
                    let rest = it.as_slice();
                    let n = e.aux as usize;
                    if n > rest.len() {
                        self.skip = (n - rest.len()) as u32;
                    } else if e.id == RECORD_WAIT {
                        let rec = Record {
                            ts: e.ts,
                            kind: e.id,
                            slots: &rest[..n],
                        };
                        if let Some(w) = Wait::read(&rec) {
                            self.wait(w);
                        }
                    } else if e.id == RECORD_ALLOC {
                        self.alloc_record(e, &rest[..n]);
                    } else if e.id == RECORD_SAMPLED_ALLOC {
                        self.sampled_record(e, &rest[..n]);
                    }
                    it = rest[n.min(rest.len())..].iter();
                    // Not an event of the tree: a pending adjust waits for
                    // the next one (see `AdjustTime` in sprig_wire::event).
                    continue;
                }
                k if k > K_LAST_KNOWN || k == 0 => self.issues.unknown_kinds += 1,
                _ => {}
            }
            self.flush_adjust();
        }
    }

    /// A wait of the thread (`--locks`): a row of its own under the frame
    /// open now, the one that waited, so that frame's own time is its
    /// work. In exact mode the wait's length is the row's time (and, being
    /// inside the frame's, it leaves the frame's self time); in sampled
    /// mode the samples that found the thread in the frame while it
    /// waited move to the row, up to the wait's length. A wait outside
    /// every root context is dropped.
    fn wait(&mut self, w: Wait) {
        let Some(top) = self.stack.last() else {
            return;
        };
        let parent = top.node;
        let c = self.arena.child(parent, wait_row_id(w.kind, w.class));
        self.arena.links[c as usize].calls += 1;
        let (moved, moved_samples) = if self.sampled {
            let p = &mut self.arena.nodes[parent as usize];
            let moved = w.ticks.min(p.sampled);
            let samples = if p.sampled == 0 {
                0
            } else {
                (p.samples as u128 * moved as u128 / p.sampled as u128) as u64
            };
            p.sampled -= moved;
            p.samples -= samples;
            (moved, samples)
        } else {
            (0, 0)
        };
        let n = &mut self.arena.nodes[c as usize];
        n.total = n.total.saturating_add(w.ticks);
        n.sampled = n.sampled.saturating_add(moved);
        n.samples = n.samples.saturating_add(moved_samples);
        if w.owner != 0 {
            crate::profile::add_owned(&mut n.owners, w.owner, 1, w.ticks);
        }
    }

    /// An allocation record: its objects go to the frame open now (the
    /// probes write one only inside a root context).
    #[cold]
    fn alloc_record(&mut self, head: &Event, slots: &[Event]) {
        let r = Record {
            ts: head.ts,
            kind: head.id,
            slots,
        };
        match AllocRecord::read(&r) {
            Some(a) => self.alloc(a.site, a.level, u64::from(a.count), a.bytes),
            None => self.issues.allocs_outside_root += 1,
        }
    }

    /// `count` objects of `bytes` in all at (`site`, `level`), from a
    /// record or an [`EventKind::Alloc`] event (one object, level 0): they
    /// go to the frame open now; outside every root context they are
    /// counted as such.
    fn alloc(&mut self, site: u32, level: u8, count: u64, bytes: u64) {
        let Some(top) = self.stack.last() else {
            self.issues.allocs_outside_root += 1;
            return;
        };
        let n = &mut self.arena.nodes[top.node as usize];
        add_alloc(&mut n.allocs, site, level, count, bytes);
    }

    /// An allocation sample (`--alloc-interval`): it goes to the frame
    /// open now, under which the allocating code ran (the agent writes one
    /// only inside a root context).
    #[cold]
    fn sampled_record(&mut self, head: &Event, slots: &[Event]) {
        let r = Record {
            ts: head.ts,
            kind: head.id,
            slots,
        };
        let (Some(a), Some(top)) = (SampledAlloc::read(&r), self.stack.last()) else {
            self.issues.allocs_outside_root += 1;
            return;
        };
        let node = top.node;
        let n = &mut self.arena.nodes[node as usize];
        let probed = u64::from(a.probed);
        add_sampled(
            &mut n.sampled_allocs,
            crate::profile::SampledAllocs {
                class: a.class,
                samples: 1,
                bytes_est: a.bytes_est,
                probed_samples: probed,
                probed_bytes_est: probed * a.bytes_est,
            },
        );
        if a.tag != 0 {
            self.tagged.push(super::live::Tagged {
                tag: a.tag,
                node,
                path: self.stack.iter().map(|f| f.method).collect(),
                class: a.class,
                size: a.size,
                bytes_est: a.bytes_est,
            });
        }
    }

    /// Credits one sample to the frame open now, or counts it outside.
    fn credit(&mut self, weight: u64) {
        match self.stack.last() {
            Some(f) => {
                let n = &mut self.arena.nodes[f.node as usize];
                n.samples += 1;
                n.sampled = n.sampled.saturating_add(weight);
                self.samples.credited += 1;
            }
            None => {
                self.samples.outside += 1;
                self.samples.outside_ticks = self.samples.outside_ticks.saturating_add(weight);
            }
        }
    }

    /// Takes an observation made at `place` at time `ts`, worth `weight`
    /// (a reset's mark when `mark`): credited now when the stream stands
    /// exactly there, kept when the stream has not reached it, dropped
    /// (late) when the stream is past it. `reset` is a reset this thread
    /// has not had yet.
    pub(super) fn observe(
        &mut self,
        place: Place,
        ts: u64,
        weight: u64,
        mark: bool,
        reset: Option<PendingReset>,
    ) {
        let c = Credit {
            place,
            ts,
            weight,
            mark,
        };
        match self.pending.place(self.pos, c) {
            Placed::Late => {
                if !mark {
                    self.samples.late += 1;
                }
            }
            Placed::Now => self.take(c, reset),
            Placed::Kept => {}
        }
    }

    /// Credits an observation the stream has reached, after a reset it
    /// comes after (in sampled mode method events carry no time, so an
    /// observation can place the reset earlier than the next timestamp).
    fn take(&mut self, c: Credit, reset: Option<PendingReset>) {
        if let Some(r) = reset
            && c.ts >= r.at
        {
            self.catch_up(r);
        }
        if !c.mark {
            self.credit(c.weight);
        }
    }

    /// Place of the first kept observation (`None` when there is none).
    pub(super) fn next_pending(&mut self) -> Option<Place> {
        self.pending.next()
    }

    /// Credits every kept observation at or before the stream's position.
    pub(super) fn credit_due(&mut self, reset: Option<PendingReset>) {
        let Some(pos) = self.pos else { return };
        for c in self.pending.take_due(pos) {
            self.take(c, reset);
        }
    }

    /// Ends the stream (the end of profiling): a burst cut short still
    /// takes its time out, open frames close at the last timestamp, and
    /// observations the stream never reached are dropped.
    pub(super) fn finish(&mut self) {
        if self.bursts.on {
            self.bursts.end_open(self.last_ts, &mut self.adjust_sum);
        }
        let n = self.close_all(self.last_ts);
        self.issues.frames_open_at_finish += n;
        self.samples.unmatched += self.pending.drop_all();
    }

    #[inline(always)]
    fn flush_adjust(&mut self) {
        if self.pending_adjust != 0 {
            self.adjust_sum = self.adjust_sum.wrapping_add(self.pending_adjust);
            self.pending_adjust = 0;
        }
    }

    /// Converts the builder arena to a [`Tree`] numbered in pre-order
    /// (children in creation order), so equal streams give equal trees and
    /// a snapshot round trip gives back the same numbering.
    /// Also returns, per builder node, its index in the tree.
    pub(super) fn to_tree(&self) -> (Tree, Vec<u32>) {
        let mut map = vec![NONE; self.arena.nodes.len()];
        let mut tree = Tree {
            nodes: Vec::with_capacity(self.arena.nodes.len().saturating_sub(1)),
            roots: Vec::new(),
        };
        // (builder node, parent in the new tree)
        let mut stack: Vec<(u32, Option<u32>)> = self
            .arena
            .children_of(0)
            .into_iter()
            .rev()
            .map(|c| (c, None))
            .collect();
        while let Some((b, parent)) = stack.pop() {
            let n = &self.arena.nodes[b as usize];
            let l = &self.arena.links[b as usize];
            let recal = match self.bursts.recal.first {
                // calls closed before the first burst, and calls still open
                Some((inner, outer)) => {
                    let before = l.calls.saturating_sub(n.recal.calls);
                    Recal {
                        calls: l.calls,
                        inner: n.recal.inner.saturating_add(before.saturating_mul(inner)),
                        outer: n.recal.outer.saturating_add(before.saturating_mul(outer)),
                    }
                }
                None => n.recal,
            };
            let id = tree.push(
                parent,
                Node {
                    method: l.method,
                    calls: l.calls,
                    total_ticks: n.total,
                    adjust_ticks: n.adjust,
                    child_calls: 0,
                    incomplete: n.incomplete,
                    recal,
                    children: Vec::with_capacity(l.nchildren as usize),
                    samples: n.samples,
                    sampled_ticks: n.sampled,
                    latency: n.latency.clone(),
                    allocs: n.allocs.clone(),
                    owners: n.owners.clone(),
                    sampled_allocs: n.sampled_allocs.clone(),
                },
            );
            map[b as usize] = id;
            stack.extend(
                self.arena
                    .children_of(b)
                    .into_iter()
                    .rev()
                    .map(|c| (c, Some(id))),
            );
        }
        tree.recount();
        (tree, map)
    }
}
