//! The builder: one [`ThreadState`] per thread of the ring, the methods and
//! thread names the control messages bring, the calibrations, resets, and
//! the [`Profile`] it hands over.

use super::credit::PositionSample;
use super::issues::StreamIssues;
use super::thread::{K_ADJUST, PendingReset, ThreadState};
use crate::profile::{
    Calibration, CostFacts, Latency, MethodInfo, Profile, RECAL_UNIT, SampleCounts, ThreadProfile,
    Timing, ticks_to_ns,
};
use sprig_wire::control::{ClockKind, Message};
use sprig_wire::event::Event;
use sprig_wire::ring::Run;
use sprig_wire::{WaitKind, wait_row_id};
use std::collections::{BTreeMap, HashMap};

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
    /// The indices of virtual threads (control message `VirtualThread`).
    virtual_threads: std::collections::BTreeSet<u32>,
    methods: BTreeMap<u32, MethodInfo>,
    calibration: Option<Calibration>,
    pending_calibration_ticks: Option<(f64, f64)>,
    /// The slowest probe pair (inner + outer ticks) of the calibrations
    /// received, against the one kept: far apart, the report says so.
    slowest_calibration_ticks: Option<f64>,
    events: u64,
    profile_template: Profile,
    /// Frame id -> method, from the agent's `FrameMethod` messages: names
    /// the frames of the allocation samples outside every root.
    frame_names: HashMap<u32, crate::profile::MethodInfo>,
    /// The latest reset, applied to each thread as its events reach it.
    reset: Option<PendingReset>,
    resets: u32,
    timing: Timing,
    /// Windows timing: counted root calls record no latency (silent ones
    /// do), and stack samples are credited by path (`credit_stack`).
    windows: bool,
    /// Live objects (`--alloc=live`).
    live: super::live::LiveTable,
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
            virtual_threads: Default::default(),
            methods: BTreeMap::new(),
            calibration: None,
            pending_calibration_ticks: None,
            slowest_calibration_ticks: None,
            events: 0,
            profile_template: Profile::new(ticks_per_sec),
            frame_names: HashMap::new(),
            reset: None,
            resets: 0,
            timing: Timing::Exact,
            windows: false,
            live: Default::default(),
        }
    }

    /// Windows timing (with [`Timing::Sampled`]): root latencies come from
    /// the silent root calls only (`SilentRootEntry`/`SilentRootExit`;
    /// counted root calls are slowed by the probes inside), and node
    /// times from the stack samples of silent root calls
    /// ([`CctBuilder::credit_stack`]).
    pub fn set_windows(&mut self, on: bool) {
        self.windows = on;
        for t in &mut self.threads {
            t.windows = on;
        }
    }

    /// Credits one stack sample of thread `thread`, taken inside a silent
    /// root call, worth `weight` ticks, to the node of `path` (the root's
    /// method id first, then each frame below it toward the leaf): nodes
    /// the counted calls never made are created with no call.
    pub fn credit_stack(&mut self, thread: u32, path: &[u32], weight: u64) {
        if path.is_empty() {
            return;
        }
        let s = self.prepare(thread);
        self.threads[s].credit_path(path, weight);
    }

    /// Root calls timed in silent windows (windows timing), on every
    /// thread.
    pub fn silent_root_calls(&self) -> u64 {
        self.threads.iter().map(|t| t.silent_root_calls).sum()
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
                let mut t = ThreadState::new(thread, self.timing == Timing::Sampled);
                t.windows = self.windows;
                self.threads.push(t);
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
    /// (for instance: the position samples' thread appends to a queue under a lock while it
    /// reads the positions; the consumer polls into a buffer, then takes
    /// the queue under the lock, adds it, then processes the buffer).
    /// Samples whose position the stream never reaches are dropped at
    /// [`CctBuilder::finish`] and counted (`unmatched`): they point at
    /// events that were lost, and crediting them to whatever is open at the
    /// end would charge the wrong node.
    pub fn add_samples(&mut self, samples: &[PositionSample]) {
        self.take_readings(samples, false);
    }

    /// Places the pending reset at each thread's position read right after
    /// its time (`marks`: one reading per thread, `ts` the reset's time).
    /// Under sampled timing the events inside a root carry no time, so
    /// without a mark a thread meets the reset only at its next timed event
    /// (a root's entry or exit) or sample, and what it recorded between the
    /// reset and that point would be forgotten with what came before.
    pub fn mark_reset(&mut self, marks: &[PositionSample]) {
        self.take_readings(marks, true);
    }

    /// Hands each reading to its thread: a sample, or a reset's mark.
    fn take_readings(&mut self, readings: &[PositionSample], mark: bool) {
        if self.timing != Timing::Sampled {
            return;
        }
        let reset = self.reset;
        for x in readings {
            let s = self.slot(x.thread);
            let t = &mut self.threads[s];
            let reset = reset.filter(|r| r.generation != t.reset_generation);
            let weight = if mark { 0 } else { x.weight };
            t.observe((x.claim, x.index), x.ts, weight, mark, reset);
        }
    }

    /// The thread's slot, with the builder-wide figures it needs.
    fn prepare(&mut self, thread: u32) -> usize {
        let reference_pair = self.reference_pair_ticks();
        let session_cost = self.session_cost_units();
        let s = self.slot(thread);
        let t = &mut self.threads[s];
        t.bursts.reference_pair = reference_pair;
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
                // The cut falls before an event or a record's head, never
                // inside a record (whose payload slots carry no time).
                let split = first_at(events, t.skip as usize, r.at);
                t.process(&events[..split]);
                if split < events.len() {
                    t.catch_up(r);
                    t.process(&events[split..]);
                }
            }
            _ => t.process(events),
        }
        if !t.tagged.is_empty() {
            let index = t.index;
            for tagged in std::mem::take(&mut t.tagged) {
                self.live.record(index, tagged);
            }
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

    /// Names an allocation site (the agent's `AllocSite`).
    pub fn set_alloc_site(&mut self, id: u32, site: crate::profile::AllocSite) {
        self.profile_template.alloc_sites.insert(id, site);
    }

    /// Registers a method id (control message `Method`).
    pub fn set_method(&mut self, id: u32, class: &str, name: &str, descriptor: &str) {
        self.methods
            .insert(id, MethodInfo::new(class, name, descriptor));
    }

    /// Names the rows of the waits on monitor class `id` (`--locks`).
    pub fn set_wait_class(&mut self, id: u32, class: &str) {
        for kind in [WaitKind::Blocked, WaitKind::Waiting, WaitKind::Parked] {
            self.methods
                .insert(wait_row_id(kind, id), MethodInfo::wait_row(kind, class));
        }
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
            Message::WaitClass { id, class } => self.set_wait_class(*id, class),
            Message::WaitOwner {
                id,
                thread,
                context,
            } => {
                self.profile_template.owners.insert(
                    *id,
                    crate::profile::OwnerInfo {
                        thread: thread.clone(),
                        context: context.clone(),
                    },
                );
            }
            Message::AllocClass { id, class } => {
                self.profile_template
                    .sampled_classes
                    .insert(*id, class.clone());
            }
            Message::SampledOutside { samples, bytes_est } => {
                self.profile_template.sampled_outside = Some((*samples, *bytes_est));
            }
            Message::FrameMethod {
                id,
                class,
                name,
                descriptor,
            } => {
                self.frame_names.insert(
                    *id,
                    crate::profile::MethodInfo::new(class, name, descriptor),
                );
            }
            Message::SampledOutsideStacks(batch) => {
                let names = &self.frame_names;
                self.profile_template
                    .outside_allocs
                    .get_or_insert_with(Default::default)
                    .add_batch(batch, |f| names.get(&f).cloned());
            }
            Message::LiveFreed { tags, lost } => self.live.free(tags, *lost),
            Message::LiveGc { gc } => self.live.mark_gc(*gc),
            Message::AllocSite {
                id,
                method,
                bci,
                descriptor,
                dims,
            } => self.set_alloc_site(
                *id,
                crate::profile::AllocSite {
                    method: *method,
                    bci: *bci,
                    descriptor: descriptor.clone(),
                    dims: *dims,
                },
            ),
            Message::VirtualThread { index } => {
                self.virtual_threads.insert(*index);
            }
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
            Message::Warning(w) => {
                let w = format!("agent: {w}");
                if !self.profile_template.warnings.contains(&w) {
                    self.profile_template.warnings.push(w);
                }
            }
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
        let mut node_maps = HashMap::new();
        p.stats.cost = cost_facts(&threads, self.ticks_per_sec);
        let mut warnings = Vec::new();
        for t in &threads {
            t.issues.describe(t.index, &mut warnings);
            if self.timing == Timing::Sampled {
                describe_samples(t.index, &t.samples, &mut warnings);
            }
            if t.arena.nodes.len() <= 1 {
                continue;
            }
            let (mut tree, map) = t.to_tree();
            if self.live.is_on() {
                node_maps.insert(t.index, map.clone());
            }
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
                virtual_threads: u64::from(self.virtual_threads.contains(&t.index)),
                index: t.index,
                java_id,
                name,
                tree,
                bursts: t.bursts.recal.summary(self.ticks_per_sec),
                samples: t.samples,
            });
        }
        if self.windows {
            let roots = super::windows::root_calls(&p.threads);
            let session = super::windows::session(&roots);
            super::windows::share_times(&mut p.threads, session.scale());
            warnings.extend(super::windows::skew_warnings(&roots, session, |m| {
                p.methods
                    .get(&m)
                    .map_or_else(|| MethodInfo::unknown(m).frame(), MethodInfo::frame)
            }));
            if let Some(w) = p.stats.windows.as_mut() {
                // the figures the times were scaled by (a reset leaves out
                // the root calls before it; partial silent calls had no time)
                w.counted_root_calls = session.counted;
                w.silent_root_calls = session.silent;
            }
        }
        p.warnings.extend(warnings);
        p.live = self.live.profile(|thread, node| {
            let id = *node_maps.get(&thread)?.get(node as usize)?;
            (id != u32::MAX).then_some(id)
        });
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
        let (subtracted, per) = if self.threads.iter().any(|t| t.bursts.recal.used > 0) {
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
            t.finish();
        }
        self.snapshot()
    }
}

/// The measured cost ([`CostFacts`]) of the root with the most complete
/// recorded calls over every thread; `None` without one.
fn cost_facts<T: std::ops::Deref<Target = ThreadState>>(
    threads: &[T],
    ticks_per_sec: u64,
) -> Option<CostFacts> {
    let mut recorded: BTreeMap<u32, Latency> = BTreeMap::new();
    let mut silent: BTreeMap<u32, Latency> = BTreeMap::new();
    for t in threads {
        for (m, l) in &t.recorded {
            recorded.entry(*m).or_default().merge(l);
        }
        for (m, l) in &t.silent {
            silent.entry(*m).or_default().merge(l);
        }
    }
    let (&method, rec) = recorded
        .iter()
        .filter(|(_, l)| l.count > 0)
        .max_by_key(|(m, l)| (l.count, std::cmp::Reverse(**m)))?;
    let ns = |l: &Latency| ticks_to_ns(l.quantile(0.5), ticks_per_sec);
    let sil = silent.get(&method);
    Some(CostFacts {
        method,
        recorded_calls: rec.count,
        recorded_p50_ns: ns(rec),
        silent_calls: sil.map_or(0, |l| l.count),
        silent_p50_ns: sil.map_or(0, ns),
    })
}

/// Index of the first event or record head at or after `from` (the
/// thread's continuation slots still to step over) whose time is `at` or
/// later, not counting `AdjustTime`; the length when there is none.
fn first_at(events: &[Event], from: usize, at: u64) -> usize {
    let mut i = from;
    while let Some(e) = events.get(i) {
        if e.kind != K_ADJUST && e.ts >= at {
            return i;
        }
        i += sprig_wire::record::span(e);
    }
    events.len()
}

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
