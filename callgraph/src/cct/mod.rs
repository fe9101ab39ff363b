//! The calling context tree builder: consumes ring events, keeps one shadow
//! stack per thread and adds up calls and ticks per calling context.
//!
//! No I/O: the caller hands over events (`wire::ring::Consumer::poll` gives
//! them per thread) and control messages, then takes a [`Profile`] with
//! [`CctBuilder::finish`] (or a live copy with [`CctBuilder::snapshot`]).
//!
//! Hot path per event: one match on the kind, one shadow-stack push or pop,
//! one child lookup through a per-node "last hit" cache, falling back to a
//! short sibling list and, for nodes with many children, a hash map.
//!
//! Adjust time is O(1) per event: every thread keeps a running sum of adjust
//! ticks, a frame remembers the sum at entry and takes the difference at
//! exit. Which frames a wait belongs to: a probe reads its timestamp, then
//! may wait for ring space; the ring writes the `AdjustTime` record just
//! before the event whose probe waited (wire `ring.rs`, "Backpressure"). So
//! the wait came after that event's timestamp and is charged to the frames
//! open *after* that event: a waiting entry probe's wait is inside the new
//! frame, a waiting exit probe's wait is outside the frame it closed (but
//! inside its callers). An `AdjustTime` record marked
//! [`ADJUST_OPEN_FRAMES`] (work that ran before its probe read any
//! timestamp, or outside any probe: the class file load hook, revelation
//! before a reflective or watched call) is charged to the frames open when
//! it is read.
//!
//! Stream problems are data, not panics: entries outside a root context,
//! exits without entry, exits that do not match the top frame, frames still
//! open at thread end or at the end of profiling are counted and reported in
//! [`Profile::warnings`]; frames closed artificially are marked
//! [`Node::incomplete`](crate::profile::Node::incomplete).
//!
//! ```
//! use sprig_callgraph::report::Format;
//! use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
//! use sprig_wire::event::{Event, EventKind};
//!
//! let mut b = CctBuilder::new(1_000_000_000); // the ring header's ticks_per_sec
//! b.set_method(1, "com.acme.App", "run", "()V"); // or b.apply_message(&msg)
//! b.set_thread_name(0, 1, "main");
//! // what wire::ring::Consumer::poll hands over, per thread
//! b.process(0, &[Event::new(EventKind::RootEntry, 1, 100)]);
//! b.process(0, &[Event::new(EventKind::RootExit, 1, 350)]);
//! let live = b.snapshot(); // any time, the builder goes on
//! let mut profile = b.finish();
//! profile.stats.duration_ms = 1; // what only the CLI knows
//!
//! let mut out = Vec::new();
//! Format::Collapsed
//!     .renderer()
//!     .render(&profile, &RenderOptions::default(), &mut out)?;
//! assert_eq!(String::from_utf8_lossy(&out), "com.acme.App::run 250\n");
//!
//! let mut file = Vec::new();
//! profile.write_snapshot(&mut file)?;
//! assert_eq!(Profile::read_snapshot(&mut file.as_slice()).unwrap(), profile);
//! # assert_eq!(live.threads, profile.threads);
//! # Ok::<(), std::io::Error>(())
//! ```

//! # Sampled timing
//!
//! With [`CctBuilder::set_timing`]`(`[`Timing::Sampled`]`)` the probes
//! inside a root context write `ts = 0` in their `MethodEntry` and
//! `MethodExit` records (no clock read); `RootEntry`, `RootExit`,
//! `ThreadStart`, `ThreadEnd` and `AdjustTime` keep their meaning. Calls,
//! shape, incomplete calls and stream problems come out exactly as in
//! exact mode; inner nodes have no measured ticks. Time comes from
//! [`Sample`]s, the positions a sampler beside the consumer reads with
//! `sprig_wire::ring::Region::positions`, each credited to the frame open
//! at its position once [`CctBuilder::process_run`] brings the thread's
//! stream there. Root calls keep their timestamps: each root node gets a
//! latency histogram of its complete calls, in both modes.
//!
//! ```
//! use sprig_callgraph::{CctBuilder, Sample, Timing};
//! use sprig_wire::event::{Event, EventKind};
//! use sprig_wire::ring::{Run, StreamPosition};
//!
//! let mut b = CctBuilder::new(1_000_000_000);
//! b.set_timing(Timing::Sampled);
//! // The sampler read thread 0 when it had published 2 events of the
//! // segment with claim number 7: the ring's StreamPosition, stamped with
//! // the reading's time and its weight (ticks since the previous reading).
//! let pos = StreamPosition { thread: 0, claim: 7, committed: 2 };
//! b.add_samples(&[Sample::at(pos, 150, 100)]);
//! // What Consumer::poll_runs hands over: the root is timed, A is not.
//! let run = Run { thread: 0, claim: 7, start: 0 };
//! b.process_run(run, &[
//!     Event::new(EventKind::RootEntry, 1, 100),
//!     Event::new(EventKind::MethodEntry, 2, 0),
//!     Event::new(EventKind::MethodExit, 2, 0),
//!     Event::new(EventKind::RootExit, 1, 400),
//! ]);
//! let p = b.finish();
//! let tree = &p.threads[0].tree;
//! let times = p.times(tree);
//! assert_eq!((tree.nodes[1].calls, times[1].self_ns, times[1].self_samples), (1, 100, 1));
//! assert_eq!(p.latency_ns(&tree.nodes[0]).unwrap().max_ns, 300);
//! ```

pub mod diff;
pub mod latency;
pub mod snapshot;

use crate::profile::{
    Bursts, Calibration, Latency, MethodInfo, Node, Profile, RECAL_UNIT, Recal, SampleCounts,
    ThreadProfile, Timing, Tree, ticks_to_ns,
};
use sprig_wire::control::{ClockKind, Message};
use sprig_wire::event::{ADJUST_OPEN_FRAMES, Event, EventKind};
use sprig_wire::ring::{Run, StreamPosition};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

const NONE: u32 = u32::MAX;
/// Children of a node are found by walking a sibling list up to this many;
/// beyond, a per-thread hash map keyed by (parent, method) is used.
const WIDE: u32 = 8;

const K_ENTRY: u16 = EventKind::MethodEntry as u16;
const K_EXIT: u16 = EventKind::MethodExit as u16;
const K_ROOT_ENTRY: u16 = EventKind::RootEntry as u16;
const K_ROOT_EXIT: u16 = EventKind::RootExit as u16;
const K_ADJUST: u16 = EventKind::AdjustTime as u16;
const K_THREAD_START: u16 = EventKind::ThreadStart as u16;
const K_THREAD_END: u16 = EventKind::ThreadEnd as u16;
const K_LAST_KNOWN: u16 = EventKind::Marker as u16;
const BURST_EMPTY: u32 = sprig_wire::event::CALIBRATION_EMPTY_ID;
/// A burst measures the probes from at least this many calls (the agent's
/// probe class makes 32).
const BURST_MIN_CALLS: usize = 16;
/// The probe cost charged to a thread's calls is the median of its last
/// this many bursts' figures (one burst every 10 ms by default).
const BURST_RECENT: usize = 3;
/// Bursts whose pair is outside these factors of the session calibration
/// are left out (the first burst of a thread can run in the interpreter).
const BURST_SANE: (f64, f64) = (0.5, 4.0);
/// Pairs kept per thread for the report's median.
const BURST_PAIRS_KEPT: usize = 4096;

/// Builder-side node, the part every entry reads: the tree is kept as
/// first-child / next-sibling links so creating a child never reallocates
/// a per-node vector, and its call count. 32 bytes, two to a cache line:
/// finding the child an entry goes to reads a few of these, and on a large
/// tree each read may miss the cache (the figures a node adds up on
/// exits and samples are in a [`BNode`] apart).
#[derive(Clone, Debug)]
struct Link {
    method: u32,
    first_child: u32,
    next_sibling: u32,
    /// The child found by the last lookup (loops call the same method again).
    last_hit: u32,
    /// The sibling looked up right after this node the last time its
    /// parent called this one (a method calls its callees in the same order
    /// call after call, and a loop body calls each of them in turn).
    next_hit: u32,
    nchildren: u32,
    calls: u64,
}

impl Link {
    fn new(method: u32) -> Link {
        Link {
            method,
            first_child: NONE,
            next_sibling: NONE,
            last_hit: NONE,
            next_hit: NONE,
            nchildren: 0,
            calls: 0,
        }
    }
}

/// Builder-side node, the figures an exit, a sample or a root exit adds
/// to (same index as its [`Link`]). Under sampled timing an exit adds
/// nothing here unless the thread waited for the profiler.
#[derive(Clone, Debug, Default)]
struct BNode {
    total: u64,
    adjust: u64,
    incomplete: u64,
    recal: Recal,
    samples: u64,
    sampled: u64,
    latency: Option<Box<Latency>>,
}

/// A calibration burst being read on one thread (wire
/// `CALIBRATION_EMPTY_ID`): a run of entry/exit pairs of the calibration
/// class's empty method inside a root context.
#[derive(Clone, Debug, Default)]
struct Burst {
    /// Timestamp of the first entry.
    start: u64,
    /// The empty method's open entry.
    entry: Option<u64>,
    last_exit: Option<u64>,
    /// Exit minus entry of each call: t_I.
    inners: Vec<u64>,
    /// Entry minus the previous call's exit: t_O.
    gaps: Vec<u64>,
    /// Something else happened inside (a wait for ring space, a broken pair).
    disturbed: bool,
    /// The thread's adjust sum when the burst began: a wait inside the
    /// burst is subtracted as adjust-time already.
    adjust_before: u64,
}

/// The bursts of one thread, and the probe cost they measured.
#[derive(Clone, Debug, Default)]
struct Recalibration {
    /// (t_I, t_O) in 1/`RECAL_UNIT` ticks of the latest used bursts.
    recent: Vec<(u64, u64)>,
    /// What the thread's calls are charged now: the median of `recent`.
    current: Option<(u64, u64)>,
    /// The first used burst's figures, which the thread's calls closed
    /// before it are charged too: they ran on the same core, moments
    /// before, and the calibration at attach may have run in a slow moment
    /// or on the other core.
    first: Option<(u64, u64)>,
    used: u64,
    rejected: u64,
    /// Pair ticks of used bursts (the first `BURST_PAIRS_KEPT`, then every
    /// other one replaces an older one).
    pairs: Vec<u64>,
}

impl Recalibration {
    fn summary(&self, ticks_per_sec: u64) -> Bursts {
        let mut p = self.pairs.clone();
        p.sort_unstable();
        // 1/RECAL_UNIT ticks to picoseconds
        let ps = |units: Option<&u64>| {
            units.map_or(0, |&u| {
                ticks_to_ns(u.saturating_mul(1000), ticks_per_sec) / RECAL_UNIT
            })
        };
        Bursts {
            used: self.used,
            rejected: self.rejected,
            min_pair_ps: ps(p.first()),
            median_pair_ps: ps(p.get(p.len() / 2)),
            max_pair_ps: ps(p.last()),
        }
    }
}

fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// The mean of the values within half to twice the median, in
/// 1/`RECAL_UNIT` ticks: a burst's first calls run cold and a call can be
/// preempted, but the median alone will not do, because a clock read
/// comes in steps (about 10 ns on some virtual machines, so one call
/// reads 49 or 73 ticks and the median is one or the other while the
/// mean of many is right).
fn typical_mean(v: &mut [u64]) -> u64 {
    let m = median_u64(v);
    let (lo, hi) = (m / 2, m.saturating_mul(2));
    let (sum, n) = v
        .iter()
        .filter(|&&x| (lo..=hi).contains(&x))
        .fold((0u128, 0u128), |(s, n), &x| (s + u128::from(x), n + 1));
    if n == 0 {
        return m.saturating_mul(RECAL_UNIT);
    }
    (sum * u128::from(RECAL_UNIT) / n) as u64
}

#[derive(Clone, Copy, Debug)]
struct Frame {
    node: u32,
    method: u32,
    start: u64,
    /// The thread's adjust sum when the frame was entered.
    adjust: u64,
    /// The call began before a reset: its node counts it as incomplete
    /// already (see [`CctBuilder::reset_at`]).
    partial: bool,
    /// A root frame (opened by a root entry, at depth 0).
    root: bool,
    /// Its time counts: every frame in exact mode, root frames only in
    /// sampled mode (the other probes record no time).
    timed: bool,
}

/// A sample not yet matched with its thread's stream.
#[derive(Clone, Copy, Debug)]
struct PendingSample {
    key: (u64, u32),
    ts: u64,
    weight: u64,
    /// A reset's mark ([`CctBuilder::mark_reset`]): places the reset, carries
    /// no time and is not a sample.
    mark: bool,
}

/// A reading of a thread's place in its event stream, for sampled timing:
/// "at time `ts`, thread `thread` had published `index` events of the
/// segment it claimed with number `claim`" (a
/// [`StreamPosition`] read by [`sprig_wire::ring::Region::positions`]),
/// worth `weight` ticks of the session clock: the wall time since the
/// sampler's previous reading, or the thread's CPU time since then,
/// converted to the session clock's ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sample {
    pub thread: u32,
    pub claim: u64,
    pub index: u32,
    /// Session clock ticks at the reading (places the sample against a
    /// reset, [`CctBuilder::reset_at`]).
    pub ts: u64,
    pub weight: u64,
}

impl Sample {
    /// The sample of one position read at `ts`, worth `weight` ticks.
    pub fn at(pos: StreamPosition, ts: u64, weight: u64) -> Sample {
        Sample {
            thread: pos.thread,
            claim: pos.claim,
            index: pos.committed,
            ts,
            weight,
        }
    }
}

/// Multiplicative hasher for the (parent, method) keys of wide nodes.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // A multiply alone leaves the low bits (the bucket index) depending
        // on the key's low bits only, i.e. on the method id: fold the high
        // half (the parent) in before and after (splitmix64's mixer).
        let mut x = (self.0 ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = x ^ (x >> 31);
    }
}

type WideMap = HashMap<u64, u32, BuildHasherDefault<KeyHasher>>;

#[inline]
fn wide_key(parent: u32, method: u32) -> u64 {
    ((parent as u64) << 32) | method as u64
}

/// Counters of stream problems on one thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamIssues {
    /// MethodEntry with no open root context: ignored.
    pub entries_outside_root: u64,
    /// Exit (method or root) with an empty shadow stack: ignored.
    pub exits_without_entry: u64,
    /// Exit whose id is not the top frame's but is further down the stack
    /// (for a root exit: not the only frame's): the frames above it were
    /// closed at the exit's timestamp.
    pub mismatched_exits: u64,
    /// Exit whose id is nowhere on the stack: ignored.
    pub unmatched_exits: u64,
    /// Frames closed because a mismatched exit skipped over them.
    pub frames_closed_by_mismatch: u64,
    /// Frames still open at ThreadEnd, closed at its timestamp.
    pub frames_open_at_thread_end: u64,
    /// Frames still open at the end of profiling, closed at the last timestamp.
    pub frames_open_at_finish: u64,
    /// RootEntry while a root context was already open (its exits were
    /// lost): the open frames were closed at the entry's timestamp.
    pub root_entries_in_context: u64,
    /// Frames closed that way (marked incomplete).
    pub frames_closed_by_root_entry: u64,
    /// Exits whose timestamp was before the entry's (counted as 0 ticks).
    pub clock_went_backwards: u64,
    /// Records of a kind this build does not know.
    pub unknown_kinds: u64,
}

impl StreamIssues {
    fn describe(&self, thread: u32, out: &mut Vec<String>) {
        let items: [(u64, &str); 10] = [
            (
                self.entries_outside_root,
                "method entries outside a root context were ignored",
            ),
            (
                self.exits_without_entry,
                "exits without a matching entry were ignored",
            ),
            (
                self.mismatched_exits,
                "exits did not match the top frame (frames above the matching one were closed)",
            ),
            (
                self.unmatched_exits,
                "exits matched no open frame and were ignored",
            ),
            (
                self.frames_closed_by_mismatch,
                "frames were closed by a mismatched exit (marked incomplete)",
            ),
            (
                self.frames_closed_by_root_entry,
                "frames were open when a new root context began (closed there, marked incomplete)",
            ),
            (
                self.frames_open_at_thread_end,
                "frames were still open when the thread ended (closed there, marked incomplete)",
            ),
            (
                self.frames_open_at_finish,
                "frames were still open at the end of profiling (closed at the last timestamp, marked incomplete)",
            ),
            (
                self.clock_went_backwards,
                "exits had a timestamp before their entry (counted as 0)",
            ),
            (
                self.unknown_kinds,
                "records of an unknown kind were skipped",
            ),
        ];
        for (n, what) in items {
            if n > 0 {
                out.push(format!("thread {thread}: {n} {what}"));
            }
        }
    }

    fn add(&mut self, o: &StreamIssues) {
        self.entries_outside_root += o.entries_outside_root;
        self.exits_without_entry += o.exits_without_entry;
        self.mismatched_exits += o.mismatched_exits;
        self.unmatched_exits += o.unmatched_exits;
        self.frames_closed_by_mismatch += o.frames_closed_by_mismatch;
        self.frames_open_at_thread_end += o.frames_open_at_thread_end;
        self.frames_open_at_finish += o.frames_open_at_finish;
        self.root_entries_in_context += o.root_entries_in_context;
        self.frames_closed_by_root_entry += o.frames_closed_by_root_entry;
        self.clock_went_backwards += o.clock_went_backwards;
        self.unknown_kinds += o.unknown_kinds;
    }
}

#[derive(Clone, Debug)]
struct ThreadState {
    index: u32,
    /// Root calls entered on this thread (resets do not clear it).
    root_entries: u64,
    /// Node 0 is a sentinel whose children are the root contexts.
    links: Vec<Link>,
    /// Each node's figures, parallel to `links`.
    nodes: Vec<BNode>,
    stack: Vec<Frame>,
    wide: WideMap,
    adjust_sum: u64,
    /// Adjust ticks read but not yet charged (until the next event).
    pending_adjust: u64,
    last_ts: u64,
    issues: StreamIssues,
    /// The generation of the last reset applied to this thread.
    reset_generation: u32,
    in_burst: bool,
    burst: Burst,
    recal: Recalibration,
    /// The session calibration's pair in ticks (0: none yet), against
    /// which bursts are checked.
    reference_pair: f64,
    /// The session calibration's (t_I, t_O) in 1/`RECAL_UNIT` ticks, what
    /// a root call's latency is charged for calls no burst measured.
    session_cost: (u64, u64),
    /// Probe cost (1/`RECAL_UNIT` ticks) of the calls closed since the
    /// current root call began while a burst's figures were known.
    call_cost: u64,
    /// Calls closed since the current root call began before any burst
    /// measured the thread: charged the first burst's figures when one
    /// has come by the root's exit, as the tree's totals charge them.
    uncal_calls: u64,
    /// Sampled timing: entry and exit timestamps are ignored.
    sampled: bool,
    /// Where the stream stands: (claim number, events of that segment
    /// processed); `None` until a [`Run`] was seen.
    pos: Option<(u64, u32)>,
    /// Samples ahead of the stream; sorted by key unless `pending_dirty`.
    pending: Vec<PendingSample>,
    pending_dirty: bool,
    samples: SampleCounts,
}

impl ThreadState {
    fn new(index: u32, sampled: bool) -> ThreadState {
        ThreadState {
            index,
            root_entries: 0,
            links: vec![Link::new(NONE)],
            nodes: vec![BNode::default()],
            stack: Vec::with_capacity(64),
            wide: WideMap::default(),
            adjust_sum: 0,
            pending_adjust: 0,
            last_ts: 0,
            issues: StreamIssues::default(),
            reset_generation: 0,
            in_burst: false,
            burst: Burst::default(),
            recal: Recalibration::default(),
            reference_pair: 0.0,
            session_cost: (0, 0),
            call_cost: 0,
            uncal_calls: 0,
            sampled,
            pos: None,
            pending: Vec::new(),
            pending_dirty: false,
            samples: SampleCounts::default(),
        }
    }

    /// Forgets everything recorded so far, as of time `at` (not before the
    /// last event processed): the tree keeps only the frames still open,
    /// each counted as one incomplete call whose time starts at `at`.
    fn reset(&mut self, at: u64) {
        let at = at.max(self.last_ts);
        let mut links = Vec::with_capacity(self.stack.len() + 1);
        let mut nodes = Vec::with_capacity(self.stack.len() + 1);
        links.push(Link::new(NONE));
        nodes.push(BNode::default());
        for f in &mut self.stack {
            let id = links.len() as u32;
            let parent = &mut links[id as usize - 1];
            parent.first_child = id;
            parent.last_hit = id;
            parent.nchildren = 1;
            let mut l = Link::new(f.method);
            l.calls = 1;
            links.push(l);
            nodes.push(BNode {
                incomplete: 1,
                ..BNode::default()
            });
            f.node = id;
            f.start = at;
            f.adjust = self.adjust_sum;
            f.partial = true;
        }
        self.links = links;
        self.nodes = nodes;
        self.wide.clear();
        self.issues = StreamIssues::default();
        // Samples read before the reset belong to the forgotten part.
        self.samples = SampleCounts::default();
        self.pending.retain(|p| p.ts >= at);
        self.last_ts = at;
        self.burst.start = self.burst.start.max(at);
    }

    /// Applies reset `r` unless this thread had it already.
    fn catch_up(&mut self, r: PendingReset) {
        if self.reset_generation != r.generation {
            self.reset(r.at);
            self.reset_generation = r.generation;
        }
    }

    /// The child of `parent` for `method`, created when missing: the child
    /// the parent called last, or the one called after it last time, or
    /// found by [`ThreadState::child_slow`].
    #[inline(always)]
    fn child(&mut self, parent: u32, method: u32) -> u32 {
        let hint = self.links[parent as usize].last_hit;
        if hint == NONE {
            return self.child_slow(parent, method);
        }
        let h = &self.links[hint as usize];
        if h.method == method {
            return hint;
        }
        let next = h.next_hit;
        if next != NONE && self.links[next as usize].method == method {
            self.links[parent as usize].last_hit = next;
            return next;
        }
        let c = self.child_slow(parent, method);
        self.links[hint as usize].next_hit = c;
        c
    }

    #[inline(never)]
    fn child_slow(&mut self, parent: u32, method: u32) -> u32 {
        let p = &self.links[parent as usize];
        let c = if p.nchildren <= WIDE {
            let mut c = p.first_child;
            while c != NONE && self.links[c as usize].method != method {
                c = self.links[c as usize].next_sibling;
            }
            if c == NONE {
                c = self.new_child(parent, method);
                if self.links[parent as usize].nchildren == WIDE + 1 {
                    // the list just got too long: index every child
                    let mut k = c;
                    while k != NONE {
                        let n = &self.links[k as usize];
                        self.wide.insert(wide_key(parent, n.method), k);
                        k = n.next_sibling;
                    }
                }
            }
            c
        } else {
            // one probe of the map whether the child exists or not
            match self.wide.entry(wide_key(parent, method)) {
                Entry::Occupied(o) => *o.get(),
                Entry::Vacant(v) => {
                    let id = self.links.len() as u32;
                    v.insert(id);
                    let created = self.new_child(parent, method);
                    debug_assert_eq!(created, id);
                    id
                }
            }
        };
        self.links[parent as usize].last_hit = c;
        c
    }

    /// Appends a node for `method` as the first child of `parent`.
    fn new_child(&mut self, parent: u32, method: u32) -> u32 {
        let id = self.links.len() as u32;
        let mut n = Link::new(method);
        n.next_sibling = self.links[parent as usize].first_child;
        self.links.push(n);
        self.nodes.push(BNode::default());
        let p = &mut self.links[parent as usize];
        p.first_child = id;
        p.nchildren += 1;
        id
    }

    #[inline(always)]
    fn enter(&mut self, parent: u32, method: u32, ts: u64) {
        let c = self.child(parent, method);
        self.links[c as usize].calls += 1;
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
            match self.recal.current {
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
        let recal = self.recal.current;
        // An untimed call that waited for nothing (sampled timing's usual
        // exit) leaves its figures as they are: no write, no cache miss.
        if d == 0 && waited == 0 && recal.is_none() {
            return;
        }
        let n = &mut self.nodes[f.node as usize];
        n.total = n.total.saturating_add(d);
        n.adjust = n.adjust.saturating_add(waited);
        if let Some((inner, outer)) = recal {
            n.recal.calls += 1;
            n.recal.inner = n.recal.inner.saturating_add(inner);
            n.recal.outer = n.recal.outer.saturating_add(outer);
        }
    }

    /// The empty method entered inside a root context: a burst begins.
    #[cold]
    fn start_burst(&mut self, ts: u64) {
        self.in_burst = true;
        let b = &mut self.burst;
        b.start = ts;
        b.adjust_before = self.adjust_sum;
        b.entry = Some(ts);
        b.last_exit = None;
        b.inners.clear();
        b.gaps.clear();
        b.disturbed = false;
    }

    /// An event inside a burst; false when it is not the burst's (the burst
    /// ends there and the event is processed as usual).
    #[cold]
    fn burst_event(&mut self, e: &Event) -> bool {
        let b = &mut self.burst;
        match (e.kind, e.id) {
            (K_ENTRY, BURST_EMPTY) => {
                if b.entry.is_some() {
                    b.disturbed = true;
                }
                if let Some(x) = b.last_exit {
                    b.gaps.push(e.ts.saturating_sub(x));
                }
                b.entry = Some(e.ts);
            }
            (K_EXIT, BURST_EMPTY) => {
                match b.entry.take() {
                    Some(en) if e.ts >= en => b.inners.push(e.ts - en),
                    _ => b.disturbed = true,
                }
                b.last_exit = Some(e.ts);
            }
            (K_ADJUST, _) => {
                b.disturbed = true;
                return false;
            }
            _ => {
                self.end_open_burst();
                return false;
            }
        }
        self.last_ts = e.ts;
        true
    }

    /// Ends the burst being read: at its last exit, or, cut short with a
    /// call open, at the last event read.
    fn end_open_burst(&mut self) {
        let whole = self.burst.entry.is_none();
        let at = self
            .burst
            .last_exit
            .filter(|_| whole)
            .unwrap_or(self.last_ts);
        self.end_burst(at, whole);
    }

    /// Ends the burst at `ts`: its time goes out of the frames around it
    /// (as adjust-time), and its figures, when it ran whole and undisturbed
    /// and measured a sane pair, become the thread's probe cost.
    #[cold]
    fn end_burst(&mut self, ts: u64, whole: bool) {
        self.in_burst = false;
        let b = &mut self.burst;
        let waited = self.adjust_sum.wrapping_sub(b.adjust_before);
        let span = ts.saturating_sub(b.start).saturating_sub(waited);
        self.adjust_sum = self.adjust_sum.wrapping_add(span);
        if !whole
            || b.disturbed
            || b.inners.len() < BURST_MIN_CALLS
            || b.gaps.len() + 1 < BURST_MIN_CALLS
        {
            self.recal.rejected += 1;
            return;
        }
        let inner = typical_mean(&mut b.inners);
        let outer = typical_mean(&mut b.gaps);
        let pair = (inner + outer) as f64 / RECAL_UNIT as f64;
        let r = self.reference_pair;
        if r > 0.0 && !(r * BURST_SANE.0..=r * BURST_SANE.1).contains(&pair) {
            self.recal.rejected += 1;
            return;
        }
        let rc = &mut self.recal;
        rc.used += 1;
        let pair_units = inner + outer;
        if rc.pairs.len() < BURST_PAIRS_KEPT {
            rc.pairs.push(pair_units);
        } else if rc.used.is_multiple_of(2) {
            let k = (rc.used / 2) as usize % BURST_PAIRS_KEPT;
            rc.pairs[k] = pair_units;
        }
        if rc.recent.len() == BURST_RECENT {
            rc.recent.remove(0);
        }
        rc.recent.push((inner, outer));
        rc.first.get_or_insert((inner, outer));
        let mut i: Vec<u64> = rc.recent.iter().map(|r| r.0).collect();
        let mut o: Vec<u64> = rc.recent.iter().map(|r| r.1).collect();
        rc.current = Some((median_u64(&mut i), median_u64(&mut o)));
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
        let waits = self.adjust_sum.wrapping_sub(f.adjust);
        let cost = if self.sampled {
            0
        } else {
            // Calls closed before the thread's first burst: its figures
            // when it has come (what the tree's totals charge them), the
            // session calibration's before.
            let (i0, o0) = self.recal.first.unwrap_or(self.session_cost);
            let before = self.uncal_calls.saturating_mul(i0.saturating_add(o0));
            let inner = self.recal.current.unwrap_or(self.session_cost).0;
            self.call_cost.saturating_add(before).saturating_add(inner) / RECAL_UNIT
        };
        let v = ts
            .saturating_sub(f.start)
            .saturating_sub(waits)
            .saturating_sub(cost);
        self.nodes[f.node as usize]
            .latency
            .get_or_insert_with(Default::default)
            .record(v);
    }

    fn close_incomplete(&mut self, f: Frame, ts: u64) {
        self.close(f, ts);
        if !f.partial {
            self.nodes[f.node as usize].incomplete += 1;
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
    fn close_all(&mut self, ts: u64) -> u64 {
        let mut n = 0;
        while let Some(f) = self.stack.pop() {
            self.close_incomplete(f, ts);
            n += 1;
        }
        n
    }

    #[inline]
    fn process(&mut self, events: &[Event]) {
        if self.sampled {
            self.process_mode::<true>(events)
        } else {
            self.process_mode::<false>(events)
        }
    }

    /// The event loop; `SAMPLED`: method entries and exits carry no time
    /// (the probes write 0), so they take the thread's last timestamp.
    #[inline(always)]
    fn process_mode<const SAMPLED: bool>(&mut self, events: &[Event]) {
        for e in events {
            if self.in_burst && self.burst_event(e) {
                self.flush_adjust();
                continue;
            }
            match e.kind {
                K_ENTRY => {
                    let ts = if SAMPLED { self.last_ts } else { e.ts };
                    self.last_ts = ts;
                    match self.stack.last() {
                        Some(_) if e.id == BURST_EMPTY => self.start_burst(ts),
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
                k if k > K_LAST_KNOWN || k == 0 => self.issues.unknown_kinds += 1,
                _ => {}
            }
            self.flush_adjust();
        }
    }

    /// Credits one sample to the frame open now, or counts it outside.
    fn credit(&mut self, weight: u64) {
        match self.stack.last() {
            Some(f) => {
                let n = &mut self.nodes[f.node as usize];
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

    /// Takes a sample: credited now when the stream stands exactly at its
    /// position, kept when the stream has not reached it, dropped (late)
    /// when the stream is past it.
    fn add_sample(
        &mut self,
        key: (u64, u32),
        ts: u64,
        weight: u64,
        mark: bool,
        reset: Option<PendingReset>,
    ) {
        match self.pos {
            Some(p) if key < p => {
                if !mark {
                    self.samples.late += 1;
                }
            }
            // (the pending ones all lie further on: the order of credits
            // does not matter, each goes to the frame open at its position)
            Some(p) if key == p => {
                self.reset_before_sample(ts, reset);
                if !mark {
                    self.credit(weight);
                }
            }
            _ => {
                if self.pending.last().is_some_and(|l| l.key > key) {
                    self.pending_dirty = true;
                }
                self.pending.push(PendingSample {
                    key,
                    ts,
                    weight,
                    mark,
                });
            }
        }
    }

    /// A sample read after a reset's time that reaches a thread the reset
    /// has not reached yet (in sampled mode method events carry no time,
    /// so a sample can place the reset earlier than the next timestamp).
    fn reset_before_sample(&mut self, ts: u64, reset: Option<PendingReset>) {
        if let Some(r) = reset
            && ts >= r.at
        {
            self.catch_up(r);
        }
    }

    /// Key of the first pending sample (`None` when there is none).
    fn next_pending(&mut self) -> Option<(u64, u32)> {
        if self.pending_dirty {
            self.pending.sort_by_key(|p| p.key);
            self.pending_dirty = false;
        }
        self.pending.first().map(|p| p.key)
    }

    /// Credits every pending sample at or before the stream's position.
    fn credit_due(&mut self, reset: Option<PendingReset>) {
        let Some(pos) = self.pos else { return };
        if self.next_pending().is_none_or(|k| k > pos) {
            return;
        }
        let due = self.pending.partition_point(|p| p.key <= pos);
        let taken: Vec<PendingSample> = self.pending.drain(..due).collect();
        for p in taken {
            self.reset_before_sample(p.ts, reset);
            if !p.mark {
                self.credit(p.weight);
            }
        }
    }

    #[inline(always)]
    fn flush_adjust(&mut self) {
        if self.pending_adjust != 0 {
            self.adjust_sum = self.adjust_sum.wrapping_add(self.pending_adjust);
            self.pending_adjust = 0;
        }
    }

    /// Children of builder node `b` in creation order.
    fn children_of(&self, b: u32) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.links[b as usize].nchildren as usize);
        let mut c = self.links[b as usize].first_child;
        while c != NONE {
            v.push(c);
            c = self.links[c as usize].next_sibling;
        }
        v.reverse();
        v
    }

    /// Converts the builder arena to a [`Tree`] numbered in pre-order
    /// (children in creation order), so equal streams give equal trees and
    /// a snapshot round trip gives back the same numbering.
    /// Also returns, per builder node, its index in the tree.
    fn to_tree(&self) -> (Tree, Vec<u32>) {
        let mut map = vec![NONE; self.nodes.len()];
        let mut tree = Tree {
            nodes: Vec::with_capacity(self.nodes.len().saturating_sub(1)),
            roots: Vec::new(),
        };
        // (builder node, parent in the new tree)
        let mut stack: Vec<(u32, Option<u32>)> = self
            .children_of(0)
            .into_iter()
            .rev()
            .map(|c| (c, None))
            .collect();
        while let Some((b, parent)) = stack.pop() {
            let n = &self.nodes[b as usize];
            let l = &self.links[b as usize];
            let recal = match self.recal.first {
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
                },
            );
            map[b as usize] = id;
            stack.extend(self.children_of(b).into_iter().rev().map(|c| (c, Some(id))));
        }
        tree.recount();
        (tree, map)
    }
}

/// The name reports use for a clock.
pub fn clock_name(clock: ClockKind) -> &'static str {
    match clock {
        ClockKind::Tsc => "tsc",
        ClockKind::Monotonic => "monotonic",
        ClockKind::ThreadCpu => "thread-cpu",
    }
}

/// Two calibrations of one session whose probe pairs differ by more than
/// this factor get a warning in the report.
pub const CALIBRATION_SPREAD: f64 = 1.25;

/// Builds calling context trees from ring events. See the module docs.
#[derive(Clone, Debug)]
pub struct CctBuilder {
    ticks_per_sec: u64,
    threads: Vec<ThreadState>,
    slots: HashMap<u32, usize>,
    last: Option<(u32, usize)>,
    names: BTreeMap<u32, (u64, String)>,
    methods: BTreeMap<u32, MethodInfo>,
    calibration: Option<Calibration>,
    pending_calibration_ticks: Option<(f64, f64)>,
    /// The slowest probe pair (inner + outer ticks) of the calibrations
    /// received, against the one kept: far apart, the report says so.
    slowest_calibration_ticks: Option<f64>,
    events: u64,
    profile_template: Profile,
    /// The latest reset, applied to each thread as its events reach it.
    reset: Option<PendingReset>,
    resets: u32,
    timing: Timing,
}

/// A reset some threads may not have reached yet (see [`CctBuilder::reset_at`]).
#[derive(Clone, Copy, Debug)]
struct PendingReset {
    at: u64,
    generation: u32,
}

impl CctBuilder {
    /// A builder for timestamps in ticks of a clock running at `ticks_per_sec`.
    pub fn new(ticks_per_sec: u64) -> CctBuilder {
        CctBuilder {
            ticks_per_sec,
            threads: Vec::new(),
            slots: HashMap::new(),
            last: None,
            names: BTreeMap::new(),
            methods: BTreeMap::new(),
            calibration: None,
            pending_calibration_ticks: None,
            slowest_calibration_ticks: None,
            events: 0,
            profile_template: Profile::new(ticks_per_sec),
            reset: None,
            resets: 0,
            timing: Timing::Exact,
        }
    }

    /// Chooses how nodes are timed (before the first event; the default
    /// is [`Timing::Exact`]). In [`Timing::Sampled`] mode the timestamps of
    /// `MethodEntry`/`MethodExit` are ignored (the probes write 0 there):
    /// calls and shape stay exact, root entries and exits keep their
    /// timestamps (root latency), and node times come from
    /// [`CctBuilder::add_samples`].
    pub fn set_timing(&mut self, timing: Timing) {
        self.timing = timing;
        for t in &mut self.threads {
            t.sampled = timing == Timing::Sampled;
        }
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    fn slot(&mut self, thread: u32) -> usize {
        if let Some((t, s)) = self.last
            && t == thread
        {
            return s;
        }
        let s = match self.slots.get(&thread) {
            Some(&s) => s,
            None => {
                let s = self.threads.len();
                self.threads
                    .push(ThreadState::new(thread, self.timing == Timing::Sampled));
                self.slots.insert(thread, s);
                s
            }
        };
        self.last = Some((thread, s));
        s
    }

    /// Consumes a batch of events recorded by thread `thread` (the ring
    /// segment's thread index), in the order they were recorded.
    pub fn process(&mut self, thread: u32, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        let s = self.prepare(thread);
        self.feed(s, events);
    }

    /// [`CctBuilder::process`] for a slice that
    /// [`sprig_wire::ring::Consumer::poll_runs`] delivered: the run says
    /// where in the thread's stream the slice lies, so the samples of
    /// [`CctBuilder::add_samples`] can be matched. In sampled mode the
    /// caller uses this instead of `process`.
    pub fn process_run(&mut self, run: Run, events: &[Event]) {
        let s = self.prepare(run.thread);
        let reset = self.reset;
        let len = u32::try_from(events.len()).unwrap_or(u32::MAX);
        let end = run.start.saturating_add(len);
        let t = &mut self.threads[s];
        t.pos = Some((run.claim, run.start));
        t.credit_due(reset);
        let mut done = 0u32;
        while done < len {
            // Up to the next sample inside this run, or to its end.
            let stop = match self.threads[s].next_pending() {
                Some((c, i)) if c == run.claim && i > run.start.saturating_add(done) && i < end => {
                    i - run.start
                }
                _ => len,
            };
            self.feed(s, &events[done as usize..stop as usize]);
            done = stop;
            let t = &mut self.threads[s];
            t.pos = Some((run.claim, run.start.saturating_add(done)));
            t.credit_due(self.reset);
        }
    }

    /// Samples of the threads' positions (sampled mode; ignored in exact
    /// mode), in any order. Each is credited, once its thread's stream
    /// (fed with [`CctBuilder::process_run`]) reaches its position, to the
    /// frame open there: its weight to that node's sampled self time, one
    /// to its sample count; a sample that finds the thread outside every
    /// root context is counted outside ([`SampleCounts`]).
    ///
    /// Ordering contract: a sample must be given before the events past
    /// its position are processed. A sample whose position the stream has
    /// passed already is dropped and counted (`late`); the caller keeps
    /// this from happening by giving every sample read so far before it
    /// processes a poll whose reading of the segments began after them
    /// (for instance: the sampler appends to a queue under a lock while it
    /// reads the positions; the consumer polls into a buffer, then takes
    /// the queue under the lock, adds it, then processes the buffer).
    /// Samples whose position the stream never reaches are dropped at
    /// [`CctBuilder::finish`] and counted (`unmatched`): they point at
    /// events that were lost, and crediting them to whatever is open at the
    /// end would charge the wrong node.
    pub fn add_samples(&mut self, samples: &[Sample]) {
        self.take_readings(samples, false);
    }

    /// Places the pending reset at each thread's position read right after
    /// its time (`marks`: one reading per thread, `ts` the reset's time).
    /// Under sampled timing the events inside a root carry no time, so
    /// without a mark a thread meets the reset only at its next timed event
    /// (a root's entry or exit) or sample, and what it recorded between the
    /// reset and that point would be forgotten with what came before.
    pub fn mark_reset(&mut self, marks: &[Sample]) {
        self.take_readings(marks, true);
    }

    /// Hands each reading to its thread: a sample, or a reset's mark.
    fn take_readings(&mut self, readings: &[Sample], mark: bool) {
        if self.timing != Timing::Sampled {
            return;
        }
        let reset = self.reset;
        for x in readings {
            let s = self.slot(x.thread);
            let t = &mut self.threads[s];
            let reset = reset.filter(|r| r.generation != t.reset_generation);
            let weight = if mark { 0 } else { x.weight };
            t.add_sample((x.claim, x.index), x.ts, weight, mark, reset);
        }
    }

    /// The thread's slot, with the builder-wide figures it needs.
    fn prepare(&mut self, thread: u32) -> usize {
        let reference_pair = self.reference_pair_ticks();
        let session_cost = self.session_cost_units();
        let s = self.slot(thread);
        let t = &mut self.threads[s];
        t.reference_pair = reference_pair;
        t.session_cost = session_cost;
        s
    }

    /// Processes events of the thread in slot `s`, applying a pending
    /// reset where the events reach its time.
    fn feed(&mut self, s: usize, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        self.events += events.len() as u64;
        let t = &mut self.threads[s];
        match self.reset {
            Some(r) if t.reset_generation != r.generation => {
                // Timestamps rise within a thread; an AdjustTime record
                // carries a duration, and goes with the event after it.
                let split = events
                    .iter()
                    .position(|e| e.kind != K_ADJUST && e.ts >= r.at)
                    .unwrap_or(events.len());
                t.process(&events[..split]);
                if split < events.len() {
                    t.catch_up(r);
                    t.process(&events[split..]);
                }
            }
            _ => t.process(events),
        }
    }

    /// Forgets what was recorded before `at`, a timestamp of the session's
    /// clock shared by all threads (TSC or monotonic): every thread's tree
    /// starts again from the frames it has open at `at`, each counted as
    /// one incomplete call timed from `at`, so the profile shows the calls
    /// made from then on (a user leaving out warm-up, a benchmark timing a
    /// steady window). Events arrive late and per thread, so each thread is
    /// reset when its own events reach `at`; [`CctBuilder::snapshot`] and
    /// [`CctBuilder::finish`] reset the threads that had none since.
    pub fn reset_at(&mut self, at: u64) {
        self.resets = self.resets.wrapping_add(1).max(1);
        self.reset = Some(PendingReset {
            at,
            generation: self.resets,
        });
    }

    /// Forgets what was recorded so far, at each thread's last timestamp:
    /// for thread CPU time, whose timestamps no two threads share (so the
    /// cut falls where the consumer has read to, a few ms late).
    pub fn reset_now(&mut self) {
        // A thread is never reset before its last timestamp.
        self.reset_at(0);
        self.apply_pending_reset();
    }

    /// Applies a pending reset to the threads that had no event since its
    /// time: for a caller that knows every event recorded before it has
    /// been processed (the CLI, a second after the reset). Saves
    /// [`CctBuilder::snapshot`] from applying it to a copy every time.
    pub fn apply_pending_reset(&mut self) {
        if let Some(r) = self.reset {
            for t in &mut self.threads {
                t.catch_up(r);
            }
        }
    }

    /// Resets made so far.
    pub fn resets(&self) -> u32 {
        self.resets
    }

    /// `t` with the pending reset applied, if it still needs it.
    fn reset_view<'a>(&self, t: &'a ThreadState) -> std::borrow::Cow<'a, ThreadState> {
        match self.reset {
            Some(r) if t.reset_generation != r.generation => {
                let mut c = t.clone();
                c.catch_up(r);
                std::borrow::Cow::Owned(c)
            }
            _ => std::borrow::Cow::Borrowed(t),
        }
    }

    /// The session calibration's (t_I, t_O) in 1/`RECAL_UNIT` ticks.
    fn session_cost_units(&self) -> (u64, u64) {
        let (i, o) = match self.pending_calibration_ticks {
            Some(p) => p,
            None => self.calibration.map_or((0.0, 0.0), |c| {
                let per_ns = self.ticks_per_sec.max(1) as f64 / 1e9;
                (c.inner_ns * per_ns, c.outer_ns * per_ns)
            }),
        };
        // `as` saturates and maps NaN to 0.
        let units = |x: f64| (x * RECAL_UNIT as f64).round() as u64;
        (units(i), units(o))
    }

    /// The session calibration's pair (t_I + t_O) in ticks, 0 when none.
    fn reference_pair_ticks(&self) -> f64 {
        if let Some((i, o)) = self.pending_calibration_ticks {
            return i + o;
        }
        self.calibration.map_or(0.0, |c| {
            (c.inner_ns + c.outer_ns) * self.ticks_per_sec.max(1) as f64 / 1e9
        })
    }

    /// Names a thread (control message `Thread`).
    pub fn set_thread_name(&mut self, index: u32, java_id: u64, name: &str) {
        self.names.insert(index, (java_id, name.to_owned()));
    }

    /// Registers a method id (control message `Method`).
    pub fn set_method(&mut self, id: u32, class: &str, name: &str, descriptor: &str) {
        self.methods
            .insert(id, MethodInfo::new(class, name, descriptor));
    }

    /// Sets the calibrated probe cost in nanoseconds.
    pub fn set_calibration(&mut self, calibration: Calibration) {
        self.calibration = Some(calibration);
        self.pending_calibration_ticks = None;
    }

    /// Sets the calibrated probe cost in ticks of the session clock (as the
    /// agent's `Calibration` message carries it). The agent calibrates at
    /// attach and again at a requested detach: of two calibrations the one
    /// with the smaller pair (inner + outer) stays, since anything that
    /// disturbs a calibration only makes the probes look slower.
    pub fn set_calibration_ticks(&mut self, inner_ticks: f64, outer_ticks: f64) {
        let pair = inner_ticks + outer_ticks;
        if self.slowest_calibration_ticks.is_none_or(|s| pair > s) {
            self.slowest_calibration_ticks = Some(pair);
        }
        if let Some((i, o)) = self.pending_calibration_ticks
            && i + o <= pair
        {
            return;
        }
        self.calibration = None;
        self.pending_calibration_ticks = Some((inner_ticks, outer_ticks));
    }

    /// Changes the clock frequency used to convert ticks (timestamps already
    /// processed are kept in ticks, so this may come at any time before
    /// [`CctBuilder::finish`]).
    pub fn set_ticks_per_sec(&mut self, ticks_per_sec: u64) {
        self.ticks_per_sec = ticks_per_sec;
    }

    /// Target facts and counters copied into the profile.
    pub fn profile_fields_mut(
        &mut self,
    ) -> (&mut crate::profile::Target, &mut crate::profile::Stats) {
        (
            &mut self.profile_template.target,
            &mut self.profile_template.stats,
        )
    }

    /// Takes what the builder needs from a control message: `Method`,
    /// `Thread`, `Calibration`, `Started` (clock and frequency), `AgentHello`
    /// (target), `Status`/`Detached` (counters), `Warning`/`ClassFailed`
    /// (kept as warnings). Returns whether the message was used.
    pub fn apply_message(&mut self, msg: &Message) -> bool {
        match msg {
            Message::Method {
                id,
                class,
                name,
                descriptor,
            } => self.set_method(*id, class, name, descriptor),
            Message::Thread {
                index,
                java_id,
                name,
                ..
            } => self.set_thread_name(*index, *java_id, name),
            Message::Calibration {
                inner_ticks,
                outer_ticks,
                ..
            } => self.set_calibration_ticks(*inner_ticks, *outer_ticks),
            Message::Started {
                ticks_per_sec,
                clock,
            } => {
                self.set_ticks_per_sec(*ticks_per_sec);
                self.profile_template.clock = clock_name(*clock).to_owned();
            }
            Message::AgentHello { jvm, .. } => {
                self.profile_template.target.pid = jvm.pid;
                self.profile_template.target.jvm =
                    format!("{} {}", jvm.vm_name, jvm.version).trim().to_owned();
            }
            Message::Status(s) | Message::Detached(s) => {
                self.profile_template.stats.set_agent(s);
            }
            Message::Warning(w) => self.profile_template.warnings.push(format!("agent: {w}")),
            Message::ClassFailed(f) => {
                let why = [f.jvmti_error.as_str(), f.reason.as_str()]
                    .into_iter()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(": ");
                self.profile_template.warnings.push(format!(
                    "class {} failed to instrument or restore: {why}",
                    f.class
                ));
            }
            _ => return false,
        }
        true
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Root calls entered so far on every thread (for a progress line;
    /// resets do not clear it).
    pub fn root_calls(&self) -> u64 {
        self.threads.iter().map(|t| t.root_entries).sum()
    }

    /// Stream problems summed over threads, so far.
    pub fn issues(&self) -> StreamIssues {
        let mut all = StreamIssues::default();
        for t in &self.threads {
            all.add(&t.issues);
        }
        all
    }

    /// A profile of everything so far, with open frames counted up to their
    /// thread's last timestamp (and marked incomplete); the builder goes on
    /// untouched. For the live view.
    pub fn snapshot(&self) -> Profile {
        let mut p = self.profile_template.clone();
        p.ticks_per_sec = self.ticks_per_sec;
        p.timing = self.timing;
        p.calibration = match self.pending_calibration_ticks {
            Some((i, o)) => Some(Calibration::from_ticks(i, o, self.ticks_per_sec)),
            None => self.calibration,
        };
        if p.stats.events == 0 {
            p.stats.events = self.events;
        }
        p.methods = self.methods.clone();
        let mut threads: Vec<_> = self.threads.iter().map(|t| self.reset_view(t)).collect();
        threads.sort_by_key(|t| t.index);
        let mut warnings = Vec::new();
        for t in &threads {
            t.issues.describe(t.index, &mut warnings);
            if self.timing == Timing::Sampled {
                describe_samples(t.index, &t.samples, &mut warnings);
            }
            if t.nodes.len() <= 1 {
                continue;
            }
            let (mut tree, map) = t.to_tree();
            for f in &t.stack {
                if let Some(n) = map
                    .get(f.node as usize)
                    .and_then(|&i| tree.nodes.get_mut(i as usize))
                {
                    if f.timed {
                        n.total_ticks = n
                            .total_ticks
                            .saturating_add(t.last_ts.saturating_sub(f.start));
                    }
                    n.adjust_ticks = n
                        .adjust_ticks
                        .saturating_add(t.adjust_sum.wrapping_sub(f.adjust));
                    if !f.partial {
                        n.incomplete += 1;
                    }
                }
            }
            let (java_id, name) = self
                .names
                .get(&t.index)
                .cloned()
                .unwrap_or((0, format!("thread-{}", t.index)));
            p.threads.push(ThreadProfile {
                index: t.index,
                java_id,
                name,
                tree,
                bursts: t.recal.summary(self.ticks_per_sec),
                samples: t.samples,
            });
        }
        p.warnings.extend(warnings);
        if let Some(w) = self.calibration_spread_warning() {
            p.warnings.push(w);
        }
        p
    }

    /// A warning when the two calibrations of a session (at attach and at
    /// detach) found probe pairs more than [`CALIBRATION_SPREAD`] apart.
    /// The faster one is subtracted, but the probes may have run at the
    /// slower speed for part of the session: on shared hosts the pair was
    /// seen to flip between 27 and 45-50 ns for seconds at a time while
    /// plain code kept its speed (2026-11-25, eaa7f51; docs/accuracy.md), and
    /// the difference is then left in the times of call-dense methods.
    fn calibration_spread_warning(&self) -> Option<String> {
        let (i, o) = self.pending_calibration_ticks?;
        let slowest = self.slowest_calibration_ticks?;
        let kept = i + o;
        if kept <= 0.0 || slowest <= kept * CALIBRATION_SPREAD {
            return None;
        }
        let ns = |ticks: f64| ticks * 1e9 / self.ticks_per_sec.max(1) as f64;
        let (subtracted, per) = if self.threads.iter().any(|t| t.recal.used > 0) {
            (
                "Calls made after their thread's first calibration burst are charged what the \
                 bursts measured; the others the faster figure, and methods making many short \
                 calls",
                "such call",
            )
        } else {
            (
                "The faster figure is subtracted, so methods making many short calls",
                "call they make",
            )
        };
        Some(format!(
            "the probes measured {:.1} ns a call at one calibration and {:.1} ns at the other: \
             something slowed them for part of the session (on a shared host, often its other \
             tenants). {subtracted} may keep up to {:.1} ns of probe cost per {per}",
            ns(kept),
            ns(slowest),
            ns(slowest - kept)
        ))
    }

    /// Closes frames still open at their thread's last timestamp (counted,
    /// marked incomplete, reported in `warnings`) and returns the profile.
    pub fn finish(mut self) -> Profile {
        self.apply_pending_reset();
        for t in &mut self.threads {
            if t.in_burst {
                // the stream stopped inside a burst: its time still goes
                t.end_open_burst();
            }
            let ts = t.last_ts;
            let n = t.close_all(ts);
            t.issues.frames_open_at_finish += n;
            t.samples.unmatched += t.pending.len() as u64;
            t.pending.clear();
        }
        self.snapshot()
    }
}

/// Warnings about samples that could not be used.
fn describe_samples(thread: u32, s: &SampleCounts, out: &mut Vec<String>) {
    if s.late > 0 {
        out.push(format!(
            "thread {thread}: {} samples came after the events past them had been processed \
             (dropped)",
            s.late
        ));
    }
    if s.unmatched > 0 {
        out.push(format!(
            "thread {thread}: {} samples pointed past the end of the thread's events (dropped)",
            s.unmatched
        ));
    }
}

#[cfg(test)]
mod sampled_tests;
#[cfg(test)]
mod tests;

const _: () = {
    const fn send<T: Send + Sync>() {}
    send::<CctBuilder>();
    send::<Profile>();
};
