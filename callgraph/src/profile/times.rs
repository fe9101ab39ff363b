//! Times derived from a tree's raw figures: exact timing's subtraction of
//! the calibrated probe cost, sampled timing's sums of sample weights (the
//! formulas are in the `profile` module's docs).

use super::Profile;
use super::tree::{Node, RECAL_UNIT, Recal, Tree};
use sprig_wire::control::Timing;

/// Calls of a root under windows timing: counted (the root node's calls)
/// and timed silent (its latencies' count); summed over threads or roots
/// where a caller needs them so.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RootCalls {
    pub counted: u64,
    pub silent: u64,
}

impl RootCalls {
    /// A root node's calls.
    pub(crate) fn of(root: &Node) -> RootCalls {
        RootCalls {
            counted: root.calls,
            silent: root.latency.as_ref().map_or(0, |l| l.count),
        }
    }

    /// All root calls over the counted ones (1 when none was counted:
    /// the times are then the whole session's).
    pub(crate) fn scale(&self) -> f64 {
        if self.counted == 0 {
            1.0
        } else {
            (self.counted + self.silent) as f64 / self.counted as f64
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
        // A wait's row ran no probe.
        if n.is_wait() {
            return 0;
        }
        let session = self.probe_cost_ns(
            n.calls.saturating_sub(n.recal.calls),
            n.child_calls.saturating_sub(kids.calls),
        );
        let recal_ticks = n.recal.inner.saturating_add(kids.outer) / RECAL_UNIT;
        session.saturating_add(ticks_to_ns(recal_ticks, self.ticks_per_sec))
    }

    /// Windows timing: per node, what one of its calls counts for beside
    /// the times, which are on the session's scale
    /// (`crate::cct` `windows.rs`): its root's own scale (all of its calls
    /// over its counted ones, from the root node's calls and latencies)
    /// over the session's. 1 for a root counted in the session's
    /// proportion; `None` under the other timings. A node's time per call
    /// is `total / (calls * weight)`.
    pub fn window_call_weights(&self, tree: &Tree) -> Option<Vec<f64>> {
        let session = self.stats.windows.as_ref()?.scale();
        let len = tree.nodes.len();
        let mut out = vec![1.0; len];
        if session <= 0.0 {
            return Some(out);
        }
        for &r in &tree.roots {
            let Some(n) = tree.nodes.get(r as usize) else {
                continue;
            };
            let calls = RootCalls::of(n);
            if calls.counted > 0 {
                out[r as usize] = calls.scale() / session;
            }
        }
        // children have greater indices than their parents
        for i in 0..len {
            let w = out[i];
            for &c in &tree.nodes[i].children {
                if c as usize > i && (c as usize) < len {
                    out[c as usize] = w;
                }
            }
        }
        Some(out)
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
}
