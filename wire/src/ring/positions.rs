//! Where the producers stand, read without consuming anything: a
//! [`StreamPosition`] per owned segment, by a scan of every segment header
//! ([`Region::positions`]) or by a [`PositionReader`] that follows the
//! header's claim log.

use super::layout::{CLAIM_LOG, OWNED, VirtualCpu};
use super::region::Region;
use std::sync::atomic::Ordering;

/// How far one producer has written: thread `thread` had published
/// `committed` events of the segment it claimed with number `claim` when
/// [`Region::positions`] read it. Matched against [`Run`](super::Run)s, this says
/// which event of a thread's stream was the last before the reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamPosition {
    pub thread: u32,
    pub claim: u64,
    pub committed: u32,
    /// A virtual thread's CPU clock as its producer published it
    /// (`--clock cpu`); `None` for a platform thread.
    pub cpu: Option<VirtualCpu>,
}

impl Region {
    /// Appends to `out` the position of every producer that owns a segment
    /// now (`OWNED`; a producer waiting for a free segment owns none, and a
    /// thread that never pushed has none). For position samples taken outside the
    /// producers' process: it reads segment headers only, with `Acquire`
    /// loads, writes nothing to the shared file and takes nothing from the
    /// consumer, so it may run on any thread beside the [`Consumer`](super::Consumer).
    ///
    /// `committed` is clamped to the segment capacity. A header is read
    /// twice (state and claim number before and after the other fields)
    /// and left out when the segment changed owner in between, or when its
    /// claim number was never handed out (a damaged header); a position is
    /// data to validate like an event (its claim may name no segment the
    /// consumer ever delivers).
    pub fn positions(&self, out: &mut Vec<StreamPosition>) {
        if self.is_retired() {
            return;
        }
        let start = out.len();
        out.extend((0..self.segments).filter_map(|i| self.position_in(i)));
        // Read after the headers: a claim made while they were read counts.
        let handed_out = self.header().claims.load(Ordering::Acquire);
        keep_handed_out(out, start, handed_out);
    }

    /// The position of the producer owning segment `i`, `None` when none
    /// owns it or its owner changed while it was read (see
    /// [`Region::positions`]; the caller checks the claim number).
    pub(super) fn position_in(&self, i: u32) -> Option<StreamPosition> {
        let h = self.seg(i);
        if h.state.load(Ordering::Acquire) != OWNED {
            return None;
        }
        let claim = h.seq.load(Ordering::Acquire);
        let thread = h.thread.load(Ordering::Acquire);
        let committed = h.committed.load(Ordering::Acquire).min(self.capacity);
        let cpu = h.read_cpu();
        if h.state.load(Ordering::Acquire) != OWNED || h.seq.load(Ordering::Acquire) != claim {
            return None;
        }
        Some(StreamPosition {
            thread,
            claim,
            committed,
            cpu,
        })
    }
}

/// Leaves out of `out[start..]` the positions whose claim number was never
/// handed out (not below `handed_out`: a damaged header).
fn keep_handed_out(out: &mut Vec<StreamPosition>, start: usize, handed_out: u64) {
    let mut kept = start;
    for j in start..out.len() {
        if out[j].claim < handed_out {
            out[kept] = out[j];
            kept += 1;
        }
    }
    out.truncate(kept);
}

/// Reads the producers' positions as [`Region::positions`] does, for
/// position samples read every millisecond, in time that grows with the
/// producers and their claims, not with the ring's size. A segment becomes
/// owned only by a claim, and each claim leaves its segment's index in the
/// header's claim log once the segment is owned; so the reader keeps the
/// segments it saw owned, reads only their headers, and adds those of the
/// claims counted since its last read from the log. A claim whose entry is
/// not written yet (its producer is between taking the number and
/// publishing the segment) is looked up again at the next read. It scans
/// every header only at its first read, and when the log has gone round
/// since (more than [`CLAIM_LOG`] claims between two reads).
///
/// An idle session's `sprig` process took 1.2% of a core with the default
/// 32 MiB ring when every read scanned every header; with
/// `--ring-mib 1024` (16,384 segments) 22.3%, and 4.8% when it scanned
/// only after a claim (2026-11-27, quiet host). Under Jetty's 2,300 claims
/// a second that still meant a scan at nearly every read: with the 1 GiB
/// ring `sprig` took 13.7-13.8 ms of CPU a Jetty iteration, and 5.8-6.2 ms
/// with the claim log, as with the default ring (docs/event-ring.md).
#[derive(Debug, Default)]
pub struct PositionReader {
    /// Segments seen owned, in index order.
    owned: Vec<u32>,
    /// The next claim number to look up in the log; `None` before the
    /// first read.
    next: Option<u64>,
    /// Claims counted whose log entry was not written yet.
    pub(super) pending: Vec<u64>,
    /// Full scans so far (for tests and figures).
    pub full_scans: u64,
}

/// Claims looked up again after a full scan: a claim counted before the
/// scan may have published its segment as owned only after the scan
/// passed it.
const SCAN_OVERLAP: u64 = 64;

/// Claims pending at most before the reader scans instead.
const MAX_PENDING: usize = 1024;

impl PositionReader {
    /// Appends the positions of the producers owning a segment now.
    pub fn read(&mut self, region: &Region, out: &mut Vec<StreamPosition>) {
        if region.is_retired() {
            return;
        }
        let start = out.len();
        let claims = region.header().claims.load(Ordering::Acquire);
        let followed = match self.next {
            Some(next) => self.follow_log(region, next, claims),
            None => false,
        };
        if followed {
            self.next = Some(claims);
            self.owned.retain(|&i| match region.position_in(i) {
                Some(p) => {
                    out.push(p);
                    true
                }
                None => false,
            });
        } else {
            self.full_scans += 1;
            self.owned.clear();
            self.pending.clear();
            for i in 0..region.segments {
                if let Some(p) = region.position_in(i) {
                    self.owned.push(i);
                    out.push(p);
                }
            }
            self.next = Some(claims.saturating_sub(SCAN_OVERLAP));
        }
        // As in `Region::positions`: read after the headers.
        let handed_out = region.header().claims.load(Ordering::Acquire);
        keep_handed_out(out, start, handed_out);
    }

    /// Adds to `owned` the segments of the pending claims and of claims
    /// `next..claims`; false when the log no longer holds one of them (a
    /// full scan is due).
    fn follow_log(&mut self, region: &Region, next: u64, claims: u64) -> bool {
        if claims.saturating_sub(next) > CLAIM_LOG as u64 {
            return false;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let mut ok = true;
        pending.retain(|&k| match self.look_up(region, k) {
            Lookup::Found => false,
            Lookup::NotYet => true,
            Lookup::Gone => {
                ok = false;
                false
            }
        });
        for k in next..claims.max(next) {
            match self.look_up(region, k) {
                Lookup::Found => {}
                Lookup::NotYet => pending.push(k),
                Lookup::Gone => ok = false,
            }
        }
        self.pending = pending;
        ok && self.pending.len() <= MAX_PENDING
    }

    /// Claim `k`'s log entry, its segment added to `owned` when found.
    fn look_up(&mut self, region: &Region, k: u64) -> Lookup {
        let e = region.header().claim_log[(k % CLAIM_LOG as u64) as usize].load(Ordering::Acquire);
        let written = (e >> 20).wrapping_sub(1);
        if e == 0 || written < k {
            return Lookup::NotYet;
        }
        if written > k {
            return Lookup::Gone;
        }
        // The index is data from the other process: checked like any.
        let i = (e & ((1 << 20) - 1)) as u32;
        if i < region.segments
            && let Err(at) = self.owned.binary_search(&i)
        {
            self.owned.insert(at, i);
        }
        Lookup::Found
    }
}

/// What the claim log says of one claim.
enum Lookup {
    /// Its segment was added (or is known already).
    Found,
    /// Its entry is not written yet.
    NotYet,
    /// A later claim wrote over its entry.
    Gone,
}
