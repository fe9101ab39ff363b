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
//! [`crate::cct::PositionSample`]):
//!
//! ```text
//! self(node)  = sum of the weights of its samples      (Node::sampled_ticks)
//! total(node) = self(node) + sum(total(child))
//! ```
//!
//! Nothing is subtracted: the probes' own cost is inside the samples like
//! any other code. Neither is adjust-time: a thread waiting for ring space
//! owns no segment, so position sampling does not see it at all, while a wait
//! with its segment still owned (revelation, class-load handling) is
//! sampled in the node it happened in; `adjust_ticks` stay what they
//! measured, and root latencies have them taken out. With `n` samples behind a figure, a mean weight (period)
//! `p` and `N` samples of the thread in the window, the 95% bound is about
//! `1.96 * p * sqrt(n * (1 - n/N))` ([`sample_bound_ns`]).
//!
//! Root calls keep their timestamps in both modes: each root node carries
//! a [`Latency`] histogram of its complete calls.

mod alloc;
mod latency;
pub mod live;
mod method;
mod metric;
mod outside;
mod probe_cost;
mod run;
mod times;
mod tree;

pub use alloc::{
    AllocSite, ClassAllocs, ClassSampled, Physical, SCALAR_MAX_SHARE, SCALAR_MIN_EXPECTED,
    add_alloc, add_sampled, java_type_name, own_allocs, own_sampled,
};
pub use latency::{BUCKETS, Latency};
pub use method::MethodInfo;
pub use metric::{METRIC_NAMES, Metric, Unit, UnknownMetric, Weight};
pub use outside::{OutsideAllocStack, OutsideAllocs};
pub use probe_cost::{EXACT_PAIR_NS, ProbeCost, SAMPLED_PAIR_NS};
pub use run::{
    Calibration, CostFacts, LatencySummary, RevealStats, SampleCounts, Stats, Target, WindowFacts,
    sample_bound_ns,
};
pub(crate) use times::RootCalls;
pub use times::{Times, ticks_to_ns};
pub use tree::{
    Alloc, Bursts, MERGED_THREAD, Node, NodeId, Owned, RECAL_UNIT, Recal, SampledAllocs,
    ThreadProfile, Tree, add_owned,
};

use std::collections::{BTreeMap, HashMap};

/// Where a profile's times come from (the agent's session option).
pub use sprig_wire::control::Timing;

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
    /// Allocation site id -> the site (`--alloc`).
    pub alloc_sites: BTreeMap<u32, AllocSite>,
    /// Owner id -> the thread that held a contended monitor and where it
    /// was (`--locks`, [`WaitOwner`](sprig_wire::Message::WaitOwner)).
    pub owners: BTreeMap<u32, OwnerInfo>,
    /// Sampled allocations' class id -> JVMTI class signature
    /// (`--alloc-interval`).
    pub sampled_classes: BTreeMap<u32, String>,
    /// Allocation samples taken outside every root context, and the bytes
    /// they stand for.
    pub sampled_outside: Option<(u64, u64)>,
    /// Whether the allocation samples say which were taken at a probed
    /// method (`probed_samples`; not in snapshots before version 12).
    pub probed_split: bool,
    /// The allocation samples outside every root context by stack (not
    /// kept in snapshots).
    pub outside_allocs: Option<OutsideAllocs>,
    /// Live objects (`--alloc=live`): estimates per allocation context and
    /// class after each garbage collection and at the end.
    pub live: Option<live::LiveProfile>,
}

/// A contended monitor's owner: its thread's name, and its innermost
/// frames outside the JDK (`pkg.Class.method < ...`; empty: not read).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct OwnerInfo {
    pub thread: String,
    pub context: String,
}

impl OwnerInfo {
    /// `thread in context`, or the thread alone.
    pub fn display(&self) -> String {
        if self.context.is_empty() {
            self.thread.clone()
        } else {
            format!("{} in {}", self.thread, self.context)
        }
    }
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
            alloc_sites: BTreeMap::new(),
            owners: BTreeMap::new(),
            sampled_classes: BTreeMap::new(),
            sampled_outside: None,
            probed_split: true,
            outside_allocs: None,
            live: None,
        }
    }

    /// The method's name, or a placeholder for an unknown id (a wait
    /// row whose class was never named: its kind with `?`).
    pub fn method(&self, id: u32) -> MethodInfo {
        self.methods
            .get(&id)
            .cloned()
            .unwrap_or_else(|| unknown(id))
    }

    /// `pkg.Class.method(desc)` of a method id.
    pub fn display_name(&self, id: u32) -> String {
        match self.methods.get(&id) {
            Some(m) => m.display(),
            None => unknown(id).display(),
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
        let (tree, samples) = merge_trees(self.threads.iter());
        ThreadProfile {
            index: MERGED_THREAD,
            java_id: 0,
            name: "all threads".to_owned(),
            tree,
            bursts: Bursts::default(),
            samples,
            virtual_threads: self.threads.iter().map(|t| t.virtual_threads).sum(),
        }
    }

    /// Virtual threads counted over [`Profile::threads`].
    pub fn virtual_threads(&self) -> u64 {
        self.threads.iter().map(|t| t.virtual_threads).sum()
    }

    /// Threads counted over [`Profile::threads`], each merged virtual
    /// thread counted.
    pub fn thread_count(&self) -> u64 {
        self.threads.iter().map(|t| t.virtual_threads.max(1)).sum()
    }

    /// Merges the virtual threads into one tree named `virtual threads (N)`
    /// (nodes with the same path added together, each root's calls
    /// together): thousands of short-lived virtual threads, each with a
    /// root call or two, read as one. Platform threads stay as they are;
    /// the merged tree takes the place of the first virtual thread. The
    /// bursts' figures are combined (counts added, the extremes kept, the
    /// median the median of the threads' medians).
    pub fn group_virtual(&mut self) {
        let (virtual_threads, mut kept): (Vec<ThreadProfile>, Vec<ThreadProfile>) =
            self.threads.drain(..).partition(|t| t.virtual_threads > 0);
        if virtual_threads.len() > 1 {
            let (tree, samples) = merge_trees(virtual_threads.iter());
            let n: u64 = virtual_threads.iter().map(|t| t.virtual_threads).sum();
            let mut medians: Vec<u64> = virtual_threads
                .iter()
                .filter(|t| t.bursts.used > 0)
                .map(|t| t.bursts.median_pair_ps)
                .collect();
            medians.sort_unstable();
            let used = virtual_threads.iter().filter(|t| t.bursts.used > 0);
            let bursts = Bursts {
                used: virtual_threads.iter().map(|t| t.bursts.used).sum(),
                rejected: virtual_threads.iter().map(|t| t.bursts.rejected).sum(),
                min_pair_ps: used
                    .clone()
                    .map(|t| t.bursts.min_pair_ps)
                    .min()
                    .unwrap_or(0),
                median_pair_ps: medians.get(medians.len() / 2).copied().unwrap_or(0),
                max_pair_ps: used.map(|t| t.bursts.max_pair_ps).max().unwrap_or(0),
            };
            kept.push(ThreadProfile {
                index: virtual_threads[0].index,
                java_id: 0,
                name: format!("virtual threads ({n})"),
                tree,
                bursts,
                samples,
                virtual_threads: n,
            });
        } else {
            kept.extend(virtual_threads);
        }
        kept.sort_by_key(|t| t.index);
        self.threads = kept;
    }

    /// Total number of nodes over all threads.
    pub fn node_count(&self) -> usize {
        self.threads.iter().map(|t| t.tree.nodes.len()).sum()
    }
}

/// The name of an id the method table does not hold.
fn unknown(id: u32) -> MethodInfo {
    match sprig_wire::wait_row(id) {
        Some((kind, _)) => MethodInfo::wait_row(kind, ""),
        None => MethodInfo::unknown(id),
    }
}

/// The trees of `threads` combined: nodes with the same path (root method,
/// then method ids down the tree) are added together, threads visited in
/// the order given.
fn merge_trees<'a>(threads: impl Iterator<Item = &'a ThreadProfile>) -> (Tree, SampleCounts) {
    let mut tree = Tree::default();
    let mut samples = SampleCounts::default();
    // (parent in merged tree or u32::MAX for the root level, method) -> merged node
    let mut index: HashMap<(NodeId, u32), NodeId> = HashMap::new();
    let mut stack: Vec<(NodeId, NodeId)> = Vec::new();
    for t in threads {
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
            for a in &n.allocs {
                add_alloc(&mut m.allocs, a.site, a.level, a.count, a.bytes);
            }
            for o in &n.owners {
                add_owned(&mut m.owners, o.owner, o.count, o.ticks);
            }
            for a in &n.sampled_allocs {
                add_sampled(&mut m.sampled_allocs, *a);
            }
            // only children that keep the tree invariant: no cycles
            for &c in n.children.iter().rev().filter(|&&c| c > s) {
                stack.push((c, d));
            }
        }
    }
    tree.recount();
    (tree, samples)
}

#[cfg(test)]
mod tests;
