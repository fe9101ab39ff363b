//! One profiled window's figures (`Sample`) and the columns derived from
//! them: overheads, root and charged times, the probes' floor.

use crate::profile::ProfileSummary;
use crate::stats::median;
use std::collections::BTreeMap;

pub(super) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// One profiled window's figures.
pub(super) struct Sample {
    pub(super) bare_mean: f64,
    pub(super) bare_median: f64,
    pub(super) total_mean: f64,
    pub(super) total_median: f64,
    pub(super) after_mean: f64,
    /// With `--settle`: the bare window timed after `settle` more bare
    /// iterations, and the profiled window timed after `settle` more
    /// profiled ones. The profile then covers the settled window only
    /// (sprig's results are reset just before it), under windows timing
    /// the whole session.
    pub(super) settled: Option<(Vec<f64>, Vec<f64>)>,
    /// With `--plateau`: the iterations run past `settle` until the bare
    /// and the profiled iteration times stopped falling.
    pub(super) plateau_runs: (usize, usize),
    pub(super) p: ProfileSummary,
    pub(super) attach_ms: f64,
    pub(super) detach_ms: f64,
    /// CPU the `sprig` process used while profiling, ms.
    pub(super) cli_cpu_ms: Option<f64>,
    pub(super) k: usize,
    /// Profiled iterations the report covers before the window of `k`:
    /// with `--settle` under windows timing, which resets nothing (the
    /// report covers the whole session), the profiled and settling
    /// iterations; 0 otherwise.
    pub(super) before_report: usize,
    /// With `--settle` (not `--plateau`): every profiled iteration's time,
    /// ms, from the attach to the detach.
    pub(super) session: Option<Vec<f64>>,
    pub(super) whole: bool,
    /// Calls per calling-context path (with several timing modes).
    pub(super) paths: Option<BTreeMap<u64, (u64, String)>>,
    /// The root calls the trees counted (`paths` are theirs).
    pub(super) counted_root_calls: u64,
    pub(super) repeat: usize,
    /// CPU of the JVM's JIT compiler threads in the repeat's bare window
    /// and in the profiled window, ms.
    pub(super) jit_ms: Option<(f64, f64)>,
}

impl Sample {
    /// Iterations the report covers: the measured window, or with
    /// `--settle` the settled window (the results are reset before it;
    /// under windows timing the whole session).
    pub(super) fn profiled(&self) -> f64 {
        (self.k + self.before_report) as f64
    }
    /// The profiled window's median iteration time, ms: with `--settle`
    /// the settled window's.
    pub(super) fn steady_median(&self) -> f64 {
        self.settled
            .as_ref()
            .map_or(self.total_median, |(_, prof)| median(prof))
    }
    /// Bare and profiled means of the window the report covers.
    pub(super) fn covered_means(&self) -> (f64, f64) {
        self.settled
            .as_ref()
            .map_or((self.bare_mean, self.total_mean), |(bare, prof)| {
                (mean(bare), mean(prof))
            })
    }
    /// The whole session's throughput over bare (with `--settle`): the
    /// settled bare window's mean iteration (timed after as many bare
    /// iterations as the session ran before its settled window: the
    /// workload's speed once warm, where the repeat's first bare window
    /// of a few iterations may still be warming) over the mean of every
    /// profiled iteration.
    pub(super) fn session_throughput(&self) -> Option<f64> {
        let v = self.session.as_ref()?;
        let (bare, _) = self.settled.as_ref()?;
        Some(mean(bare) / mean(v))
    }
    /// Under windows timing the trees hold the counted root calls only:
    /// calls and times scaled to every root call (the report's scale).
    pub(super) fn calls_per_iter(&self) -> f64 {
        self.p.all_calls as f64 * self.p.scale() / self.profiled()
    }
    /// The root's time before the probes' cost is taken off; under
    /// windows timing, whose counted root calls carry no time of theirs,
    /// the root's time from its silent calls.
    pub(super) fn root_ms(&self) -> f64 {
        let ns = if self.p.windows.is_some() {
            self.p.root_total_ns
        } else {
            self.p.root_raw_ns
        };
        ns * self.p.scale() / 1e6 / self.profiled()
    }
    pub(super) fn charged_ms(&self) -> f64 {
        self.p.root_total_ns * self.p.scale() / 1e6 / self.profiled()
    }
    /// Throughput while profiling over bare, over the whole session's
    /// window (attach and revelation included): bare mean / profiled mean.
    pub(super) fn throughput(&self) -> f64 {
        self.bare_mean / self.total_mean
    }
    pub(super) fn overhead(&self) -> f64 {
        (self.total_mean / self.bare_mean - 1.0) * 100.0
    }
    pub(super) fn steady(&self) -> f64 {
        (self.total_median / self.bare_median - 1.0) * 100.0
    }
    pub(super) fn settled(&self) -> Option<f64> {
        self.settled
            .as_ref()
            .map(|(bare, prof)| (median(prof) / median(bare) - 1.0) * 100.0)
    }
    /// What the probes' own cost adds to an iteration if nothing else
    /// changes: calls per iteration times the calibrated probe pair, over
    /// the bare time of the window the report covers, in percent. The part
    /// of an overhead no change outside the probes can take away.
    pub(super) fn probe_floor(&self) -> Option<f64> {
        let c = &self.p.calibration;
        let pair = c.get("inner_ns")?.as_f64()? + c.get("outer_ns")?.as_f64()?;
        Some(self.calls_per_iter() * pair / 1e6 / self.covered_means().0 * 100.0)
    }
    pub(super) fn charged_bare(&self) -> Option<f64> {
        self.whole
            .then(|| self.charged_ms() / self.covered_means().0)
    }
    pub(super) fn share(&self) -> f64 {
        self.root_ms() / self.covered_means().1
    }
}
