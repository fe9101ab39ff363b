//! What the probes cost the profiled program: an estimate per root call
//! from the probed calls and the price of one probe pair (the session's
//! calibration when it ran, else the benchmark's figure for the timing).

use super::{Profile, Timing};

/// A probe pair in a root context under sampled timing, in ns (JDK 17
/// and 25, BENCHMARKS.md: 7-9 ns).
pub const SAMPLED_PAIR_NS: f64 = 8.0;
/// A probe pair under exact timing, in ns (BENCHMARKS.md: 41-58 ns).
pub const EXACT_PAIR_NS: f64 = 58.0;

/// The probes' cost per root call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbeCost {
    /// One probe pair (entry and exit of one call), in ns.
    pub pair_ns: f64,
    /// Where `pair_ns` comes from: the session's calibration, or the
    /// benchmark's figure (BENCHMARKS.md) when it did not calibrate.
    pub from_calibration: bool,
    /// Probed calls (root calls included) per root call.
    pub calls_per_root_call: f64,
    /// `pair_ns * calls_per_root_call`.
    pub per_root_call_ns: f64,
    /// Whether the root latencies and times hold this cost (sampled
    /// timing) or had it subtracted (exact timing).
    pub in_latencies: bool,
    /// The mean root latency as the report shows it, in ns (0 unknown).
    pub mean_root_ns: f64,
}

impl ProbeCost {
    /// `source` as the reports name it.
    pub fn source(&self) -> &'static str {
        if self.from_calibration {
            "calibration"
        } else {
            "benchmark"
        }
    }

    /// The estimate's share of the mean root latency (sampled timing,
    /// where the latency holds it), in percent.
    pub fn share_percent(&self) -> Option<f64> {
        (self.in_latencies && self.mean_root_ns > 0.0)
            .then(|| self.per_root_call_ns * 100.0 / self.mean_root_ns)
    }
}

impl Profile {
    /// The probes' estimated cost per root call; `None` without a root call.
    pub fn probe_cost(&self) -> Option<ProbeCost> {
        let (mut calls, mut roots, mut root_ns) = (0u64, 0u64, 0u64);
        for t in &self.threads {
            let times = self.times(&t.tree);
            calls = t
                .tree
                .nodes
                .iter()
                .map(|n| n.calls)
                .fold(calls, u64::saturating_add);
            for &r in &t.tree.roots {
                let Some(n) = t.tree.nodes.get(r as usize) else {
                    continue;
                };
                roots = roots.saturating_add(n.calls);
                let ns = match self.latency_ns(n) {
                    Some(l) => l.sum_ns,
                    None => times[r as usize].total_ns,
                };
                root_ns = root_ns.saturating_add(ns);
            }
        }
        if roots == 0 {
            return None;
        }
        let (pair_ns, from_calibration) = match self.calibration {
            Some(c) => (c.inner_ns + c.outer_ns, true),
            None if self.timing == Timing::Sampled => (SAMPLED_PAIR_NS, false),
            None => (EXACT_PAIR_NS, false),
        };
        let calls_per_root_call = calls as f64 / roots as f64;
        Some(ProbeCost {
            pair_ns,
            from_calibration,
            calls_per_root_call,
            per_root_call_ns: pair_ns * calls_per_root_call,
            in_latencies: self.timing == Timing::Sampled || self.calibration.is_none(),
            mean_root_ns: root_ns as f64 / roots as f64,
        })
    }
}
