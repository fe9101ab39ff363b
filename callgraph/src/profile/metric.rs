//! The metrics a node carries, named once: what a figure counts and in
//! which unit, so that reports and diffs choose a metric instead of
//! reading a node's fields by name. A new sensor (allocations) adds
//! a variant here and the figures behind it to the tree; every renderer
//! that weighs by a metric (flame graph, collapsed, pprof) can then weigh
//! by it.

use super::Profile;
use super::tree::Tree;

/// What a node's figure counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Time in the node, in nanoseconds: exact (measured, probe cost
    /// subtracted) or sampled, as the profile's timing gives it.
    #[default]
    Time,
    /// Completed calls of the node, exact.
    Calls,
    /// Samples behind the time (sampled timing; none under exact timing).
    Samples,
    /// Time the node's thread waited (`--locks`): blocked, waiting,
    /// parked, sleeping or stopped by a GC pause, measured, in
    /// nanoseconds; only wait rows carry it.
    Waits,
    /// Objects the node's code allocated (`--alloc`), exact.
    Objects,
    /// Bytes of those objects, as the JVM's `GetObjectSize` counts them.
    Bytes,
    /// Bytes the JVM's allocation samples stand for (`--alloc-interval`):
    /// an estimate of what the node's own code and the unprofiled code
    /// below it allocated.
    SampledBytes,
}

/// The unit of a metric's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    Nanoseconds,
    Count,
    Bytes,
}

impl Unit {
    /// The unit's name as pprof and JSON write it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Nanoseconds => "nanoseconds",
            Unit::Count => "count",
            Unit::Bytes => "bytes",
        }
    }
}

impl Metric {
    /// Every metric, in the order reports list them.
    pub const ALL: [Metric; 7] = [
        Metric::Time,
        Metric::Calls,
        Metric::Samples,
        Metric::Waits,
        Metric::Objects,
        Metric::Bytes,
        Metric::SampledBytes,
    ];

    /// The metric's name on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Time => "time",
            Metric::Calls => "calls",
            Metric::Samples => "samples",
            Metric::Waits => "waits",
            Metric::Objects => "objects",
            Metric::Bytes => "bytes",
            Metric::SampledBytes => "sampled-bytes",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::Time | Metric::Waits => Unit::Nanoseconds,
            Metric::Calls | Metric::Samples | Metric::Objects => Unit::Count,
            Metric::Bytes | Metric::SampledBytes => Unit::Bytes,
        }
    }

    /// A node's own part of the metric, `times` being its derived times.
    fn own(self, node: &super::tree::Node, times: &super::times::Times) -> u64 {
        match self {
            Metric::Time => times.self_ns,
            // A wait's row counts waits, not calls.
            Metric::Calls if node.is_wait() => 0,
            Metric::Calls => node.calls,
            Metric::Samples => node.samples,
            Metric::Waits if node.is_wait() => times.raw_total_ns,
            Metric::Waits => 0,
            Metric::Objects => super::alloc::own_allocs(node).0,
            Metric::Bytes => super::alloc::own_allocs(node).1,
            Metric::SampledBytes => super::alloc::own_sampled(node),
        }
    }
}

/// The names [`Metric`] parses from, for error messages.
pub const METRIC_NAMES: &str = "time, calls, samples, waits, objects, bytes, sampled-bytes";

/// A name that is not a metric's.
#[derive(Debug, thiserror::Error)]
#[error("unknown metric {0:?} (known: {METRIC_NAMES})")]
pub struct UnknownMetric(pub String);

impl std::str::FromStr for Metric {
    type Err = UnknownMetric;

    fn from_str(s: &str) -> Result<Metric, UnknownMetric> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMetric(s.to_owned()))
    }
}

/// A node's value of one metric: its own part, and its subtree's (its own
/// plus its children's totals).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Weight {
    pub own: u64,
    pub total: u64,
}

impl Profile {
    /// Every node's value of `metric` in `tree`, indexed like
    /// `tree.nodes`. For [`Metric::Time`] these are [`Profile::times`]'s
    /// `self_ns` and `total_ns`.
    pub fn weights(&self, tree: &Tree, metric: Metric) -> Vec<Weight> {
        self.weights_from(tree, metric, &self.times(tree))
    }

    /// [`Profile::weights`] with the tree's times already derived.
    pub fn weights_from(
        &self,
        tree: &Tree,
        metric: Metric,
        times: &[super::times::Times],
    ) -> Vec<Weight> {
        let len = tree.nodes.len().min(times.len());
        let mut out = vec![Weight::default(); len];
        // Children have greater indices: walking backwards sees them first.
        for i in (0..len).rev() {
            let n = &tree.nodes[i];
            let own = metric.own(n, &times[i]);
            let kids = n
                .children
                .iter()
                .filter(|&&c| c as usize > i && (c as usize) < len)
                .map(|&c| out[c as usize].total)
                .fold(0u64, u64::saturating_add);
            out[i] = Weight {
                own,
                total: own.saturating_add(kids),
            };
        }
        out
    }
}
