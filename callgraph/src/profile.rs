//! The profile model every output uses: per-thread calling context trees with
//! raw tick counts, the method table, calibration, target facts and counters.
//!
//! Times are stored raw (clock ticks, as measured, plus the adjust-time ticks
//! measured inside each node). Everything a user reads is derived by
//! [`Profile::times`]: nanoseconds, adjust-time taken out, and the calibrated
//! probe cost subtracted per node (JFluid's exact time, docs/accuracy.md:
//! `t_exact = t_meas - t_I - m * t_O`):
//!
//! ```text
//! own(node)   = (measured - adjust)(node) - sum((measured - adjust)(child))
//! self(node)  = own(node) - calls * t_I - m * t_O          (never below 0)
//! total(node) = self(node) + sum(total(child))
//! ```
//!
//! where `m` is the number of direct calls the node made to instrumented
//! methods (the sum of its children's `calls`). The formula is applied to
//! the time a node spends in its own code (`t_meas` = the node's own time):
//! that time holds exactly its own probes' inner part and the outer part of
//! each direct call. Applying it to the measured total instead would leave
//! every descendant's probe cost inside the total, and the children's inner
//! parts inside the parent's self time. So an exact total is the time of the
//! subtree with every probe in it taken out.
//!
//! # Sampled timing
//!
//! With [`Timing::Sampled`] the probes inside a root context record no
//! time: calls and shape stay exact, and a node's time is the weight of
//! the samples that found its thread inside it (a sample is "at time t,
//! this thread had written its stream up to here", see
//! [`crate::cct::Sample`]):
//!
//! ```text
//! self(node)  = sum of the weights of its samples      (Node::sampled_ticks)
//! total(node) = self(node) + sum(total(child))
//! ```
//!
//! Nothing is subtracted: the probes' own cost is inside the samples like
//! any other code. Neither is adjust-time: a thread waiting for ring space
//! owns no segment, so the sampler does not see it at all, while a wait
//! with its segment still owned (revelation, class-load handling) is
//! sampled in the node it happened in; `adjust_ticks` stay what they
//! measured, and root latencies have them taken out. With `n` samples behind a figure, a mean weight (period)
//! `p` and `N` samples of the thread in the window, the 95% bound is about
//! `1.96 * p * sqrt(n * (1 - n/N))` ([`sample_bound_ns`]).
//!
//! Root calls keep their timestamps in both modes: each root node carries
//! a [`Latency`] histogram of its complete calls.

pub use crate::cct::latency::Latency;
use std::collections::{BTreeMap, HashMap};

/// Where a profile's times come from (the agent's session option).
pub use sprig_wire::control::Timing;

/// What became of the samples of one thread (see [`crate::cct::Sample`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts {
    /// Samples credited to a node of the tree.
    pub credited: u64,
    /// Samples that found the thread outside every root context, and
    /// their weight in ticks: not in the tree.
    pub outside: u64,
    pub outside_ticks: u64,
    /// Samples given after the builder had processed the thread's stream
    /// past their position (the caller broke the ordering contract of
    /// [`crate::CctBuilder::add_samples`]): dropped.
    pub late: u64,
    /// Samples whose position the stream never reached (events lost, or
    /// profiling ended first): dropped at the end.
    pub unmatched: u64,
}

impl SampleCounts {
    /// N of the error bound: every sample that found the thread, in a root
    /// context or not.
    pub fn window(&self) -> u64 {
        self.credited.saturating_add(self.outside)
    }

    pub fn add(&mut self, o: &SampleCounts) {
        self.credited = self.credited.saturating_add(o.credited);
        self.outside = self.outside.saturating_add(o.outside);
        self.outside_ticks = self.outside_ticks.saturating_add(o.outside_ticks);
        self.late = self.late.saturating_add(o.late);
        self.unmatched = self.unmatched.saturating_add(o.unmatched);
    }
}

/// The 95% bound of a time estimated from samples: `n` samples whose
/// weights add up to `estimate_ns`, out of `window` samples taken of the
/// thread(s): about `1.96 * p * sqrt(n * (1 - n/N))` with `p` the mean
/// weight (the sampling period), the normal approximation of the binomial
/// count of samples. 0 without samples (a node no sample found is not
/// shown to have no time, only none measured: its time is below about
/// one period).
pub fn sample_bound_ns(n: u64, estimate_ns: u64, window: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let nf = n as f64;
    let p = estimate_ns as f64 / nf;
    let rest = if window > n {
        1.0 - nf / window as f64
    } else {
        0.0
    };
    (1.96 * p * (nf * rest).sqrt()).round() as u64
}

/// Index of a node inside a [`Tree`].
pub type NodeId = u32;

/// Name of a method as the agent reported it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MethodInfo {
    /// Binary class name with dots, e.g. `com.acme.Service`.
    pub class: String,
    pub name: String,
    /// JVM descriptor, e.g. `(I)V`.
    pub descriptor: String,
}

impl MethodInfo {
    pub fn new(class: &str, name: &str, descriptor: &str) -> MethodInfo {
        MethodInfo {
            class: class.to_owned(),
            name: name.to_owned(),
            descriptor: descriptor.to_owned(),
        }
    }

    /// The placeholder for an id the method table does not know.
    pub fn unknown(id: u32) -> MethodInfo {
        MethodInfo {
            class: "<unknown>".to_owned(),
            name: format!("method#{id}"),
            descriptor: String::new(),
        }
    }

    /// `pkg.Class.method(desc)`, the form used in the text report.
    pub fn display(&self) -> String {
        format!("{}.{}{}", self.class, self.name, self.descriptor)
    }

    /// `pkg.Class::method`, the frame form used in collapsed stacks.
    pub fn frame(&self) -> String {
        format!("{}::{}", self.class, self.name)
    }
}

/// Calibrated probe cost in nanoseconds (t_I and t_O, docs/accuracy.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// t_I: charged to a call itself, once per call.
    pub inner_ns: f64,
    /// t_O: charged to the caller, once per direct call it makes.
    pub outer_ns: f64,
}

impl Calibration {
    /// Builds a calibration from values in nanoseconds; negative or
    /// non-finite values become 0 (no subtraction).
    pub fn new(inner_ns: f64, outer_ns: f64) -> Calibration {
        Calibration {
            inner_ns: sane(inner_ns),
            outer_ns: sane(outer_ns),
        }
    }

    /// Converts the agent's calibration (ticks of the session clock).
    pub fn from_ticks(inner_ticks: f64, outer_ticks: f64, ticks_per_sec: u64) -> Calibration {
        let scale = if ticks_per_sec == 0 {
            1.0
        } else {
            1e9 / ticks_per_sec as f64
        };
        Calibration::new(inner_ticks * scale, outer_ticks * scale)
    }
}

fn sane(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

/// The profiled JVM.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    /// e.g. `OpenJDK 64-Bit Server VM 17.0.15+6`.
    pub jvm: String,
}

use sprig_wire::control::AgentStats;
pub use sprig_wire::control::RevealStats;

/// Counters of the run; the CLI fills what the builder cannot know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events consumed (the builder sets the number it processed).
    pub events: u64,
    pub instrumented_methods: u64,
    pub called_methods: u64,
    pub lost_events: u64,
    /// The time the profile covers: from the start of profiling, or from
    /// the last reset.
    pub duration_ms: u64,
    /// How long profiling had run when the results were last reset (what
    /// came before is not in the profile); 0 without a reset.
    pub reset_after_ms: u64,
    pub instrumented_classes: u64,
    /// Classes that failed to instrument or restore (each one is a warning).
    pub failed_classes: u64,
    /// Threads that entered a root context.
    pub threads: u64,
    /// Redefinition (retransformation) batches and the time they took.
    pub redefinition_batches: u64,
    pub redefinition_ns: u64,
    /// Time spent finding callees to instrument (scanning, the hierarchy).
    pub reveal_ns: u64,
    /// What revelation did (`None` with `--roots-only`).
    pub reveal: Option<RevealStats>,
}

impl Stats {
    /// Takes over the agent's counters (events, duration and lost events
    /// stay the CLI's business).
    pub fn set_agent(&mut self, a: &AgentStats) {
        self.instrumented_methods = a.instrumented_methods;
        self.called_methods = a.called_methods;
        self.lost_events = self.lost_events.max(a.lost_events);
        self.instrumented_classes = a.instrumented_classes;
        self.failed_classes = a.failed_classes;
        self.threads = a.threads;
        self.redefinition_batches = a.redefinition_batches;
        self.redefinition_ns = a.redefinition_ns;
        self.reveal_ns = a.reveal_ns;
        self.reveal = a.reveal.clone();
    }
}

/// One calling context: a method reached through one path from a root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub method: u32,
    /// Completed calls, including the ones closed artificially (`incomplete`).
    pub calls: u64,
    /// Measured ticks, summed over calls (exit minus entry timestamp).
    pub total_ticks: u64,
    /// Ticks of adjust-time (the profiler blocking the thread) inside these calls.
    pub adjust_ticks: u64,
    /// m: direct calls this node made (sum of its children's `calls`).
    pub child_calls: u64,
    /// Calls that never saw their exit (thread end, detach, lost events,
    /// mismatched exit): closed at the last known timestamp.
    pub incomplete: u64,
    /// The probe cost of those of these calls that ran after a calibration
    /// burst on their thread (the in-session calibration); the other calls
    /// are charged the session's calibration.
    pub recal: Recal,
    /// Children; every child index is greater than its parent's index.
    pub children: Vec<NodeId>,
    /// Sampled timing: samples that found the thread in this node's own
    /// code, and the sum of their weights in ticks (0 in exact mode).
    pub samples: u64,
    pub sampled_ticks: u64,
    /// Root nodes: the latency of each complete call (exit minus entry,
    /// minus the waits for the profiler inside, in exact mode minus the
    /// probe cost too); `None` on other nodes.
    pub latency: Option<Box<Latency>>,
}

/// Units of [`Recal::inner`] and [`Recal::outer`] per clock tick.
pub const RECAL_UNIT: u64 = 256;

/// In-session probe cost of a node's calls, in 1/[`RECAL_UNIT`] ticks:
/// each call closed after its thread had measured the probes in a burst
/// adds that thread's current t_I and t_O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recal {
    /// Calls charged this way (at most the node's `calls`).
    pub calls: u64,
    /// Sum of t_I over those calls: taken out of the node's own time.
    pub inner: u64,
    /// Sum of t_O over those calls: taken out of the caller's own time.
    pub outer: u64,
}

impl Recal {
    pub fn add(&mut self, o: &Recal) {
        self.calls = self.calls.saturating_add(o.calls);
        self.inner = self.inner.saturating_add(o.inner);
        self.outer = self.outer.saturating_add(o.outer);
    }
}

/// A thread's calibration bursts (see `sprig_wire::event::CALIBRATION_EMPTY_ID`):
/// how many were used and the probe pair (t_I + t_O) they measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bursts {
    /// Bursts whose figures were used.
    pub used: u64,
    /// Bursts left out: disturbed (a wait, an unexpected event), too short,
    /// or measuring a pair under half or over four times the session's
    /// calibration (a first burst running in the interpreter).
    pub rejected: u64,
    /// The pair over the used bursts, in picoseconds.
    pub min_pair_ps: u64,
    pub median_pair_ps: u64,
    pub max_pair_ps: u64,
}

/// A forest of calling contexts stored in an arena.
///
/// Invariant (kept by every constructor in this crate): a child's index is
/// greater than its parent's, and each node has at most one parent. Walks
/// rely on it to work without recursion and skip children that break it, so
/// a hand-built tree that does not keep it gives odd numbers, never a panic
/// or an endless loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub roots: Vec<NodeId>,
}

impl Tree {
    /// Adds a node (as a root when `parent` is `None`) and returns its index.
    /// Does not update `child_calls`: call [`Tree::recount`] once done.
    pub fn push(&mut self, parent: Option<NodeId>, node: Node) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(node);
        match parent {
            Some(p) => {
                if let Some(parent) = self.nodes.get_mut(p as usize) {
                    parent.children.push(id);
                }
            }
            None => self.roots.push(id),
        }
        id
    }

    /// Recomputes `child_calls` of every node from its children.
    pub fn recount(&mut self) {
        for i in 0..self.nodes.len() {
            let m = self.nodes[i]
                .children
                .iter()
                .filter_map(|&c| self.nodes.get(c as usize))
                .map(|c| c.calls)
                .fold(0u64, u64::saturating_add);
            self.nodes[i].child_calls = m;
        }
    }

    /// Parent of each node (`None` for roots and for nodes only reachable
    /// through links that break the invariant).
    pub fn parents(&self) -> Vec<Option<NodeId>> {
        let mut parents = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &c in n.children.iter().filter(|&&c| c as usize > i) {
                if let Some(p) = parents.get_mut(c as usize) {
                    *p = Some(i as NodeId);
                }
            }
        }
        parents
    }

    /// Depth of each node, roots at 0.
    pub fn depths(&self) -> Vec<usize> {
        let mut depth = vec![0usize; self.nodes.len()];
        for i in 0..self.nodes.len() {
            let d = depth[i] + 1;
            for &c in self.nodes[i].children.iter().filter(|&&c| c as usize > i) {
                if let Some(x) = depth.get_mut(c as usize) {
                    *x = d;
                }
            }
        }
        depth
    }
}

/// One profiled thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadProfile {
    /// sprig's thread index (the ring segment).
    pub index: u32,
    /// `java.lang.Thread.getId()`, 0 when unknown.
    pub java_id: u64,
    pub name: String,
    pub tree: Tree,
    pub bursts: Bursts,
    /// Sampled timing: what became of this thread's samples.
    pub samples: SampleCounts,
}

impl ThreadProfile {
    /// The thread's name, or `thread-<index>` when the agent gave none.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("thread-{}", self.index)
        } else {
            self.name.clone()
        }
    }
}

/// Derived times of one node, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Times {
    /// Measured, nothing subtracted.
    pub raw_total_ns: u64,
    /// Adjust-time inside the node (the profiler blocking the thread).
    pub adjust_ns: u64,
    /// Exact: the node's exact self time plus its children's exact totals
    /// (adjust-time and the cost of every probe in the subtree taken out).
    pub total_ns: u64,
    /// Exact time in the node's own code: own measured time minus adjust,
    /// minus `calls * t_I + m * t_O`, never below 0.
    pub self_ns: u64,
    /// Calibrated probe cost taken out of the subtree (what `total_ns`
    /// lost to the subtraction beyond adjust-time).
    pub probe_ns: u64,
    /// Sampled timing: samples behind `self_ns` and behind `total_ns`
    /// (0 in exact mode).
    pub self_samples: u64,
    pub total_samples: u64,
    /// The part of `probe_ns` taken out of the node's own code.
    pub probe_self_ns: u64,
    /// Calibrated probe cost of every call in the subtree as computed,
    /// before any node's time is clamped at zero: `raw_total_ns -
    /// adjust_ns - probe_cost_ns` is the subtree's exact time unclamped,
    /// negative where more was subtracted than measured (how far the
    /// calibration is off, for the accuracy tests and bug reports).
    pub probe_cost_ns: u64,
}

impl Times {
    /// Whether more probe cost was taken out of the subtree than time is
    /// left: a few percent of error in the probes' cost (which moves by
    /// a few ns a call with the code around the probes) is then tens of
    /// percent of the figure.
    pub fn probe_bound(&self) -> bool {
        self.probe_ns > self.total_ns
    }

    /// The same for the node's own code (`self_ns`).
    pub fn self_probe_bound(&self) -> bool {
        self.probe_self_ns > self.self_ns
    }
}

/// Everything a report shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Clock ticks per second of the session clock (`Event::ts` unit).
    pub ticks_per_sec: u64,
    /// Which clock the probes read: `tsc`, `monotonic` (both wall clock) or
    /// `thread-cpu`; empty when unknown.
    pub clock: String,
    pub target: Target,
    pub stats: Stats,
    pub calibration: Option<Calibration>,
    /// Where the times come from.
    pub timing: Timing,
    /// Method id -> name.
    pub methods: BTreeMap<u32, MethodInfo>,
    /// Sorted by `index`.
    pub threads: Vec<ThreadProfile>,
    /// Problems found in the event stream, in a stable order.
    pub warnings: Vec<String>,
}

/// What reports show of a root node's [`Latency`], in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Complete calls.
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Sum over the calls.
    pub sum_ns: u64,
}

/// Thread index used by [`Profile::merged`].
pub const MERGED_THREAD: u32 = u32::MAX;

/// Converts clock ticks to nanoseconds (ticks are taken as nanoseconds when
/// `ticks_per_sec` is 0).
pub fn ticks_to_ns(ticks: u64, ticks_per_sec: u64) -> u64 {
    if ticks_per_sec == 0 || ticks_per_sec == 1_000_000_000 {
        return ticks;
    }
    let ns = ticks as u128 * 1_000_000_000u128 / ticks_per_sec as u128;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

impl Profile {
    /// An empty profile whose ticks are nanoseconds.
    pub fn new(ticks_per_sec: u64) -> Profile {
        Profile {
            ticks_per_sec,
            clock: String::new(),
            target: Target::default(),
            stats: Stats::default(),
            calibration: None,
            timing: Timing::Exact,
            methods: BTreeMap::new(),
            threads: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// The method's name, or a placeholder for an unknown id.
    pub fn method(&self, id: u32) -> MethodInfo {
        self.methods
            .get(&id)
            .cloned()
            .unwrap_or_else(|| MethodInfo::unknown(id))
    }

    /// `pkg.Class.method(desc)` of a method id.
    pub fn display_name(&self, id: u32) -> String {
        match self.methods.get(&id) {
            Some(m) => m.display(),
            None => MethodInfo::unknown(id).display(),
        }
    }

    /// Method ids whose name satisfies `pred`, ascending.
    pub fn methods_matching(&self, mut pred: impl FnMut(&MethodInfo) -> bool) -> Vec<u32> {
        self.methods
            .iter()
            .filter(|(_, m)| pred(m))
            .map(|(&id, _)| id)
            .collect()
    }

    /// Calibrated probe cost charged to a node: `calls * t_I + m * t_O`,
    /// rounded to whole nanoseconds (0 without calibration).
    pub fn probe_cost_ns(&self, calls: u64, child_calls: u64) -> u64 {
        match self.calibration {
            None => 0,
            Some(c) => {
                let ns = calls as f64 * c.inner_ns + child_calls as f64 * c.outer_ns;
                // `as` saturates and maps NaN to 0.
                ns.round() as u64
            }
        }
    }

    /// Probe cost charged to node `n` whose children's in-session figures
    /// sum to `kids` (`calls`: their calls, `outer`: their t_O): the calls
    /// measured by a burst of their thread are charged what it measured
    /// (`Recal`), the others the session's calibration.
    fn node_probe_ns(&self, n: &Node, kids: &Recal) -> u64 {
        let session = self.probe_cost_ns(
            n.calls.saturating_sub(n.recal.calls),
            n.child_calls.saturating_sub(kids.calls),
        );
        let recal_ticks = n.recal.inner.saturating_add(kids.outer) / RECAL_UNIT;
        session.saturating_add(ticks_to_ns(recal_ticks, self.ticks_per_sec))
    }

    /// Derived times of every node of `tree`, indexed like `tree.nodes`
    /// (see the module documentation for the formulas).
    pub fn times(&self, tree: &Tree) -> Vec<Times> {
        if self.timing == Timing::Sampled {
            return self.sampled_times(tree);
        }
        let len = tree.nodes.len();
        let mut out = vec![Times::default(); len];
        let net = |n: &Node| n.total_ticks.saturating_sub(n.adjust_ticks);
        // Children have greater indices: walking backwards sees them first.
        for i in (0..len).rev() {
            let n = &tree.nodes[i];
            let (mut kids_net, mut kids_total, mut kids_probe) = (0u64, 0u64, 0u64);
            let mut kids_cost = 0u64;
            let mut kids_recal = Recal::default();
            for &c in n
                .children
                .iter()
                .filter(|&&c| c as usize > i && (c as usize) < len)
            {
                let k = &tree.nodes[c as usize];
                kids_net = kids_net.saturating_add(net(k));
                kids_total = kids_total.saturating_add(out[c as usize].total_ns);
                kids_probe = kids_probe.saturating_add(out[c as usize].probe_ns);
                kids_cost = kids_cost.saturating_add(out[c as usize].probe_cost_ns);
                kids_recal.add(&Recal {
                    calls: k.recal.calls,
                    inner: 0,
                    outer: k.recal.outer,
                });
            }
            let own = ticks_to_ns(net(n).saturating_sub(kids_net), self.ticks_per_sec);
            let cost = self.node_probe_ns(n, &kids_recal);
            let self_ns = own.saturating_sub(cost);
            let probe_self_ns = own - self_ns;
            out[i] = Times {
                raw_total_ns: ticks_to_ns(n.total_ticks, self.ticks_per_sec),
                adjust_ns: ticks_to_ns(n.adjust_ticks, self.ticks_per_sec),
                total_ns: self_ns.saturating_add(kids_total),
                self_ns,
                probe_ns: probe_self_ns.saturating_add(kids_probe),
                probe_self_ns,
                probe_cost_ns: cost.saturating_add(kids_cost),
                self_samples: 0,
                total_samples: 0,
            };
        }
        out
    }

    /// [`Profile::times`] of a sampled profile: self time = the samples'
    /// weight, total = self + the children's totals; nothing subtracted.
    fn sampled_times(&self, tree: &Tree) -> Vec<Times> {
        let len = tree.nodes.len();
        let mut out = vec![Times::default(); len];
        for i in (0..len).rev() {
            let n = &tree.nodes[i];
            let (mut kids_total, mut kids_samples) = (0u64, 0u64);
            for &c in n
                .children
                .iter()
                .filter(|&&c| c as usize > i && (c as usize) < len)
            {
                kids_total = kids_total.saturating_add(out[c as usize].total_ns);
                kids_samples = kids_samples.saturating_add(out[c as usize].total_samples);
            }
            let self_ns = ticks_to_ns(n.sampled_ticks, self.ticks_per_sec);
            out[i] = Times {
                raw_total_ns: ticks_to_ns(n.total_ticks, self.ticks_per_sec),
                adjust_ns: ticks_to_ns(n.adjust_ticks, self.ticks_per_sec),
                total_ns: self_ns.saturating_add(kids_total),
                self_ns,
                self_samples: n.samples,
                total_samples: n.samples.saturating_add(kids_samples),
                ..Times::default()
            };
        }
        out
    }

    /// What reports show of a root node's latency histogram, in
    /// nanoseconds; `None` for nodes without one.
    pub fn latency_ns(&self, node: &Node) -> Option<LatencySummary> {
        let l = node.latency.as_deref()?;
        let ns = |t: u64| ticks_to_ns(t, self.ticks_per_sec);
        Some(LatencySummary {
            count: l.count,
            min_ns: ns(l.min),
            p50_ns: ns(l.quantile(0.5)),
            p90_ns: ns(l.quantile(0.9)),
            p99_ns: ns(l.quantile(0.99)),
            max_ns: ns(l.max),
            sum_ns: ns(l.sum),
        })
    }

    /// All threads combined: nodes with the same path (root method, then
    /// method ids down the tree) are added together. Threads are visited in
    /// index order, so the result is deterministic.
    pub fn merged(&self) -> ThreadProfile {
        let mut tree = Tree::default();
        let mut samples = SampleCounts::default();
        // (parent in merged tree or u32::MAX for the root level, method) -> merged node
        let mut index: HashMap<(NodeId, u32), NodeId> = HashMap::new();
        let mut stack: Vec<(NodeId, NodeId)> = Vec::new();
        for t in &self.threads {
            samples.add(&t.samples);
            let src = &t.tree;
            for &r in src.roots.iter().rev() {
                stack.push((r, NodeId::MAX));
            }
            while let Some((s, parent)) = stack.pop() {
                let Some(n) = src.nodes.get(s as usize) else {
                    continue;
                };
                let key = (parent, n.method);
                let d = match index.get(&key) {
                    Some(&d) => d,
                    None => {
                        let node = Node {
                            method: n.method,
                            ..Node::default()
                        };
                        let p = (parent != NodeId::MAX).then_some(parent);
                        let d = tree.push(p, node);
                        index.insert(key, d);
                        d
                    }
                };
                let m = &mut tree.nodes[d as usize];
                m.calls = m.calls.saturating_add(n.calls);
                m.total_ticks = m.total_ticks.saturating_add(n.total_ticks);
                m.adjust_ticks = m.adjust_ticks.saturating_add(n.adjust_ticks);
                m.incomplete = m.incomplete.saturating_add(n.incomplete);
                m.recal.add(&n.recal);
                m.samples = m.samples.saturating_add(n.samples);
                m.sampled_ticks = m.sampled_ticks.saturating_add(n.sampled_ticks);
                if let Some(l) = &n.latency {
                    m.latency.get_or_insert_with(Default::default).merge(l);
                }
                // only children that keep the tree invariant: no cycles
                for &c in n.children.iter().rev().filter(|&&c| c > s) {
                    stack.push((c, d));
                }
            }
        }
        tree.recount();
        ThreadProfile {
            index: MERGED_THREAD,
            java_id: 0,
            name: "all threads".to_owned(),
            tree,
            bursts: Bursts::default(),
            samples,
        }
    }

    /// Total number of nodes over all threads.
    pub fn node_count(&self) -> usize {
        self.threads.iter().map(|t| t.tree.nodes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(method: u32, calls: u64, total: u64) -> Node {
        Node {
            method,
            calls,
            total_ticks: total,
            ..Node::default()
        }
    }

    #[test]
    fn sample_bound_by_hand() {
        // 100 samples of 1 ms out of 1000: 1.96 * 1 ms * sqrt(100 * 0.9)
        assert_eq!(sample_bound_ns(100, 100_000_000, 1000), 18_594_193);
        // every sample of the window: nothing left to vary
        assert_eq!(sample_bound_ns(50, 50_000_000, 50), 0);
        assert_eq!(sample_bound_ns(0, 0, 1000), 0);
        // a window smaller than the count (inconsistent input): no panic
        assert_eq!(sample_bound_ns(5, 5_000, 2), 0);
        // one sample of 1 ms out of many: about 1.96 ms
        assert_eq!(sample_bound_ns(1, 1_000_000, 1_000_000), 1_959_999);
    }

    #[test]
    fn ticks_convert_with_frequency() {
        assert_eq!(ticks_to_ns(3_000, 3_000_000_000), 1_000);
        assert_eq!(ticks_to_ns(7, 0), 7);
        assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn calibration_from_ticks_and_sanitised() {
        let c = Calibration::from_ticks(30.0, 15.0, 3_000_000_000);
        assert!((c.inner_ns - 10.0).abs() < 1e-9);
        assert!((c.outer_ns - 5.0).abs() < 1e-9);
        let c = Calibration::new(f64::NAN, -3.0);
        assert_eq!((c.inner_ns, c.outer_ns), (0.0, 0.0));
    }

    #[test]
    fn exact_formula_by_hand() {
        // t_I = 20, t_O = 7
        // child: 10 calls, 400 ns, no children: self = 400 - 10*20 = 200 = total
        // root: 2 calls, 1000 ns measured, 100 ns adjust, 10 child calls:
        //   own = (1000 - 100) - 400 = 500; self = 500 - 2*20 - 10*7 = 390
        //   total = 390 + 200 = 590
        let mut p = Profile::new(1_000_000_000);
        p.calibration = Some(Calibration::new(20.0, 7.0));
        let mut t = Tree::default();
        let r = t.push(
            None,
            Node {
                adjust_ticks: 100,
                ..leaf(1, 2, 1000)
            },
        );
        t.push(Some(r), leaf(2, 10, 400));
        t.recount();
        assert_eq!(t.nodes[0].child_calls, 10);
        let times = p.times(&t);
        assert_eq!(times[1].total_ns, 200);
        assert_eq!(times[1].self_ns, 200);
        assert_eq!(times[0].self_ns, 390);
        assert_eq!(times[0].total_ns, 590);
        assert_eq!(times[0].raw_total_ns, 1000);
        assert_eq!(times[0].adjust_ns, 100);
        assert_eq!(p.probe_cost_ns(2, 10), 110);
        // Probe cost taken out: the child's own 200, the root's 110 and,
        // in its subtree, the child's.
        assert_eq!((times[1].probe_self_ns, times[1].probe_ns), (200, 200));
        assert_eq!((times[0].probe_self_ns, times[0].probe_ns), (110, 310));
        assert!(!times[0].probe_bound() && !times[1].probe_bound());
    }

    #[test]
    fn a_time_mostly_probe_cost_is_probe_bound() {
        // 10 calls of 25 ns with t_I = 20: 50 ns left, 200 taken out.
        let mut p = Profile::new(1_000_000_000);
        p.calibration = Some(Calibration::new(20.0, 10.0));
        let mut t = Tree::default();
        let r = t.push(None, leaf(1, 1, 10_000));
        t.push(Some(r), leaf(2, 10, 250));
        t.recount();
        let times = p.times(&t);
        assert_eq!((times[1].self_ns, times[1].probe_self_ns), (50, 200));
        assert!(times[1].probe_bound() && times[1].self_probe_bound());
        // The root's 9,750 ns of own code carry 20 + 10 * 10 ns.
        assert_eq!(times[0].probe_ns, 320);
        assert!(!times[0].probe_bound() && !times[0].self_probe_bound());
        // A subtraction clamped at 0 counts only what it took.
        let mut t = Tree::default();
        t.push(None, leaf(1, 3, 30));
        t.recount();
        let times = p.times(&t);
        assert_eq!((times[0].self_ns, times[0].probe_self_ns), (0, 30));
        assert!(times[0].probe_bound());
        p.calibration = None;
        let times = p.times(&t);
        assert_eq!(times[0].probe_ns, 0);
        assert!(!times[0].probe_bound());
    }

    #[test]
    fn probe_model_gives_true_times_back() {
        // Probes cost e1 before and e2 after the entry timestamp, x1 before
        // and x2 after the exit timestamp: t_I = e2 + x1, t_O = e1 + x2.
        // A (own code 50 ns) calls B (100 ns) once:
        //   B measured = e2 + 100 + x1
        //   A measured = e2 + 50 + (e1 + B measured + x2) + x1
        let (e1, e2, x1, x2) = (3u64, 4u64, 6u64, 2u64);
        let b = e2 + 100 + x1;
        let a = e2 + 50 + e1 + b + x2 + x1;
        let mut p = Profile::new(1_000_000_000);
        p.calibration = Some(Calibration::new((e2 + x1) as f64, (e1 + x2) as f64));
        let mut t = Tree::default();
        let r = t.push(None, leaf(1, 1, a));
        t.push(Some(r), leaf(2, 1, b));
        t.recount();
        let times = p.times(&t);
        assert_eq!((times[1].self_ns, times[1].total_ns), (100, 100));
        assert_eq!((times[0].self_ns, times[0].total_ns), (50, 150));
    }

    #[test]
    fn exact_never_below_zero() {
        let mut p = Profile::new(1_000_000_000);
        p.calibration = Some(Calibration::new(50.0, 50.0));
        let mut t = Tree::default();
        let r = t.push(None, leaf(1, 1, 120));
        t.push(Some(r), leaf(2, 1, 100));
        t.recount();
        // child: 100 - 50 = 50; root own: 20 - 50 - 50 -> 0, total 0 + 50
        let times = p.times(&t);
        assert_eq!(times[1].total_ns, 50);
        assert_eq!(times[0].self_ns, 0);
        assert_eq!(times[0].total_ns, 50);
        // adjust larger than measured
        let mut t = Tree::default();
        t.push(
            None,
            Node {
                adjust_ticks: 500,
                ..leaf(1, 1, 100)
            },
        );
        assert_eq!(p.times(&t)[0].total_ns, 0);
    }

    #[test]
    fn malformed_trees_do_not_panic_or_loop() {
        let mut p = Profile::new(0);
        let mut t = Tree::default();
        t.nodes.push(Node {
            children: vec![0, 1, 99],
            ..leaf(1, 1, 10)
        });
        t.nodes.push(Node {
            children: vec![0],
            ..leaf(2, 1, 5)
        });
        t.roots = vec![0, 1, 7];
        t.recount();
        assert_eq!(t.parents(), vec![None, Some(0)]);
        assert_eq!(t.depths(), vec![0, 1]);
        let _ = p.times(&t);
        p.threads.push(ThreadProfile {
            tree: t,
            ..ThreadProfile::default()
        });
        let m = p.merged();
        assert_eq!(m.tree.nodes.len(), 3);
        let opts = crate::report::RenderOptions {
            back_traces: vec![1, 2],
            merged: true,
            ..Default::default()
        };
        for f in [
            crate::report::Format::Text,
            crate::report::Format::Json,
            crate::report::Format::Collapsed,
        ] {
            let mut out = Vec::new();
            f.renderer().render(&p, &opts, &mut out).unwrap();
        }
        let mut snap = Vec::new();
        p.write_snapshot(&mut snap).unwrap();
        assert!(Profile::read_snapshot(&mut snap.as_slice()).is_ok());
    }

    #[test]
    fn merged_adds_same_paths() {
        let mut p = Profile::new(0);
        for (index, extra) in [(1u32, 3u32), (2, 4)] {
            let mut t = Tree::default();
            let r = t.push(None, leaf(1, 1, 100));
            t.push(Some(r), leaf(2, 4, 40));
            t.push(Some(r), leaf(extra, 1, 10));
            t.recount();
            p.threads.push(ThreadProfile {
                index,
                java_id: index as u64,
                name: format!("t{index}"),
                tree: t,
                bursts: Default::default(),
                samples: Default::default(),
            });
        }
        let m = p.merged();
        assert_eq!(m.tree.roots.len(), 1);
        let root = &m.tree.nodes[m.tree.roots[0] as usize];
        assert_eq!(
            (root.calls, root.total_ticks, root.child_calls),
            (2, 200, 10)
        );
        let kids: Vec<(u32, u64, u64)> = root
            .children
            .iter()
            .map(|&c| {
                let n = &m.tree.nodes[c as usize];
                (n.method, n.calls, n.total_ticks)
            })
            .collect();
        assert_eq!(kids, vec![(2, 8, 80), (3, 1, 10), (4, 1, 10)]);
    }
}
