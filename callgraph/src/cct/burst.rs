//! Calibration bursts read from one thread's stream (exact timing): runs
//! of entry/exit pairs of the calibration class's empty method inside a
//! root context, which measure what the probes cost on that thread now.
//! Their time goes out of the frames around them, and the pair they
//! measure becomes the probe cost charged to the thread's next calls.

use crate::profile::{Bursts, RECAL_UNIT, ticks_to_ns};
use sprig_wire::event::{Event, EventKind};

const K_ENTRY: u16 = EventKind::MethodEntry as u16;
const K_EXIT: u16 = EventKind::MethodExit as u16;
const K_ADJUST: u16 = EventKind::AdjustTime as u16;
pub(super) const BURST_EMPTY: u32 = sprig_wire::event::CALIBRATION_EMPTY_ID;
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
pub(super) struct Recalibration {
    /// (t_I, t_O) in 1/`RECAL_UNIT` ticks of the latest used bursts.
    pub(super) recent: Vec<(u64, u64)>,
    /// What the thread's calls are charged now: the median of `recent`.
    pub(super) current: Option<(u64, u64)>,
    /// The first used burst's figures, which the thread's calls closed
    /// before it are charged too: they ran on the same core, moments
    /// before, and the calibration at attach may have run in a slow moment
    /// or on the other core.
    pub(super) first: Option<(u64, u64)>,
    pub(super) used: u64,
    pub(super) rejected: u64,
    /// Pair ticks of used bursts (the first `BURST_PAIRS_KEPT`, then every
    /// other one replaces an older one).
    pub(super) pairs: Vec<u64>,
}

impl Recalibration {
    pub(super) fn summary(&self, ticks_per_sec: u64) -> Bursts {
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

/// One thread's bursts: the one being read, and what the used ones
/// measured.
#[derive(Clone, Debug, Default)]
pub(super) struct BurstState {
    /// A burst is being read.
    pub(super) on: bool,
    burst: Burst,
    pub(super) recal: Recalibration,
    /// The session calibration's pair in ticks (0: none yet), against
    /// which bursts are checked.
    pub(super) reference_pair: f64,
}

impl BurstState {
    /// The empty method entered inside a root context at `ts`, the
    /// thread's adjust sum `adjust_sum`: a burst begins.
    #[cold]
    pub(super) fn start(&mut self, ts: u64, adjust_sum: u64) {
        self.on = true;
        let b = &mut self.burst;
        b.start = ts;
        b.adjust_before = adjust_sum;
        b.entry = Some(ts);
        b.last_exit = None;
        b.inners.clear();
        b.gaps.clear();
        b.disturbed = false;
    }

    /// An event inside a burst; false when it is not the burst's (the burst
    /// ends there and the event is processed as usual). `last_ts` is the
    /// thread's last timestamp, `adjust_sum` its adjust sum.
    #[cold]
    pub(super) fn event(&mut self, e: &Event, last_ts: &mut u64, adjust_sum: &mut u64) -> bool {
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
                self.end_open(*last_ts, adjust_sum);
                return false;
            }
        }
        *last_ts = e.ts;
        true
    }

    /// Ends the burst being read: at its last exit, or, cut short with a
    /// call open, at the last event read (`last_ts`).
    pub(super) fn end_open(&mut self, last_ts: u64, adjust_sum: &mut u64) {
        let whole = self.burst.entry.is_none();
        let at = self.burst.last_exit.filter(|_| whole).unwrap_or(last_ts);
        self.end(at, whole, adjust_sum);
    }

    /// Ends the burst at `ts`: its time goes out of the frames around it
    /// (as adjust-time, added to `adjust_sum`), and its figures, when it
    /// ran whole and undisturbed and measured a sane pair, become the
    /// thread's probe cost.
    #[cold]
    fn end(&mut self, ts: u64, whole: bool, adjust_sum: &mut u64) {
        self.on = false;
        let b = &mut self.burst;
        let waited = adjust_sum.wrapping_sub(b.adjust_before);
        let span = ts.saturating_sub(b.start).saturating_sub(waited);
        *adjust_sum = adjust_sum.wrapping_add(span);
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

    /// A reset at `at`: a burst being read counts from there.
    pub(super) fn reset(&mut self, at: u64) {
        self.burst.start = self.burst.start.max(at);
    }
}
