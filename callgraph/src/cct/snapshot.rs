//! Snapshot files (`-o run.sprig`): a compact, versioned, little-endian
//! binary encoding of a whole [`Profile`].
//!
//! ```text
//! magic "SPRIGSNP", u32 version
//! u64 ticks_per_sec, str clock
//! target:      u32 pid, str jvm, (v8) str command
//! stats:       u64 events, instrumented_methods, called_methods, lost_events, duration_ms
//! calibration: u8 present, f64 inner_ns, f64 outer_ns
//! agent (v2):  u64 instrumented_classes, failed_classes, threads,
//!              redefinition_batches, redefinition_ns, reveal_ns,
//!              u8 revelation present [u32 n, n × (str kind, u64 methods),
//!              u64 scanned, reachable, reachable_unloaded, classes_mirrored,
//!              unmodifiable_skipped, reflective_sites,
//!              (v3) dormant, activated_in_place, (v5) trivial_skipped]
//! reset (v4):  u64 reset_after_ms
//! timing (v7): u8 0 = exact, 1 = sampled
//! methods:     u32 n, n × (u32 id, str class, str name, str descriptor)
//! threads:     u32 n, n × (u32 index, u64 java_id, str name,
//!                          (v6) u64 bursts used, rejected, min, median, max pair ps,
//!                          (v7) u64 samples credited, outside, outside_ticks, late, unmatched,
//!                          (v8) u64 virtual threads (0: a platform thread),
//!                          u32 roots, u64 nodes,
//!                          nodes in pre-order × (u32 method, u64 calls, u64 total_ticks,
//!                                                u64 adjust_ticks, u64 incomplete,
//!                                                (v6) u64 recal calls, inner, outer,
//!                                                (v7) u64 samples, sampled_ticks,
//!                                                u8 latency present [u64 count, sum, min, max,
//!                                                u32 n, n × (u32 bucket, u64 calls)],
//!                                                (v8) u32 n, n × (u32 site, u8 level,
//!                                                u64 count, u64 bytes),
//!                                                (v10) u32 n, n × (u32 owner, u64 count,
//!                                                u64 ticks),
//!                                                (v10) u32 n, n × (u32 class, u64 samples,
//!                                                u64 bytes_est, (v12) u64 probed_samples,
//!                                                u64 probed_bytes_est),
//!                                                u32 children))
//! warnings:    u32 n, n × str
//! alloc sites (v8): u32 n, n × (u32 id, u32 method, u32 bci, str descriptor, u8 dims)
//! cost (v9):  u8 present [u32 method, u64 recorded_calls, recorded_p50_ns,
//!              silent_calls, silent_p50_ns]
//! owners (v10): u32 n, n × (u32 id, str thread, str context)
//! sampled (v10): u32 n, n × (u32 id, str class signature),
//!              u8 present [u64 samples outside roots, u64 bytes_est]
//! live (v11): u8 present [the live objects' figures]
//! windows (v13): u8 present [u32 counting_ms, silent_ms, u64 interval_us,
//!              counted_root_calls, silent_root_calls, samples, samples_outside,
//!              u8 source (0 none, 1 jvmti, 2 timer), u64 samples_dropped,
//!              samples_in_probes, u8 silence (0 dormant, 1 original),
//!              u8 switches present [u32 to_original, to_instrumented,
//!              u64 classes, failed, ns, max_ns, u32 cut]]
//! magic "SPRIGEND"
//! str = u32 byte length + UTF-8 bytes
//! ```
//!
//! Raw ticks are stored; exact times are a pure function of them and the
//! stored calibration ([`Profile::times`]), so a re-rendered report equals
//! the one written at the end of the run. Nodes are written in pre-order
//! with their child count, so reading rebuilds the tree without indices to
//! validate and without recursion. Reading never trusts a count for an
//! allocation and never panics on a damaged file.

use crate::profile::live::{LiveFigures, LiveGc, LiveProfile, LiveRow};
use crate::profile::{
    Bursts, Calibration, Latency, MethodInfo, Node, Profile, Recal, SampleCounts, ThreadProfile,
    Timing, Tree,
};
use std::io::{self, Read, Write};

pub const SNAPSHOT_MAGIC: &[u8; 8] = b"SPRIGSNP";
const END_MAGIC: &[u8; 8] = b"SPRIGEND";
pub const SNAPSHOT_VERSION: u32 = 13;
/// Oldest version this build still reads (v1 lacks the agent block).
const OLDEST_VERSION: u32 = 1;
/// Longest string accepted when reading (class names, thread names, warnings).
const MAX_STR: u32 = 1 << 20;
/// Most elements reserved ahead of reading them.
const MAX_PREALLOC: usize = 1 << 16;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot I/O failed: {0}")]
    Io(#[from] io::Error),
    #[error("not a sprig snapshot (bad magic)")]
    BadMagic,
    #[error(
        "snapshot version {0} is not supported (this sprig reads versions {OLDEST_VERSION} to {SNAPSHOT_VERSION})"
    )]
    UnsupportedVersion(u32),
    #[error("snapshot is damaged: {0}")]
    Corrupt(String),
}

fn corrupt(what: impl Into<String>) -> SnapshotError {
    SnapshotError::Corrupt(what.into())
}

struct W<'a> {
    w: &'a mut dyn Write,
}

impl W<'_> {
    fn u8(&mut self, v: u8) -> io::Result<()> {
        self.w.write_all(&[v])
    }
    fn u32(&mut self, v: u32) -> io::Result<()> {
        self.w.write_all(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.w.write_all(&v.to_le_bytes())
    }
    fn f64(&mut self, v: f64) -> io::Result<()> {
        self.w.write_all(&v.to_le_bytes())
    }
    fn len(&mut self, n: usize) -> io::Result<()> {
        let n = u32::try_from(n)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many elements"))?;
        self.u32(n)
    }
    fn str(&mut self, s: &str) -> io::Result<()> {
        let b = s.as_bytes();
        let b = &b[..b.len().min(MAX_STR as usize)];
        // Cutting may split a UTF-8 sequence: back up to a char boundary.
        let mut end = b.len();
        while end > 0 && !s.is_char_boundary(end) {
            end -= 1;
        }
        self.len(end)?;
        self.w.write_all(&b[..end])
    }
}

struct R<'a> {
    r: &'a mut dyn Read,
}

impl R<'_> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                corrupt("file ends early")
            } else {
                SnapshotError::Io(e)
            }
        })?;
        Ok(b)
    }
    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.bytes::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, SnapshotError> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }
    fn u64(&mut self) -> Result<u64, SnapshotError> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }
    fn f64(&mut self) -> Result<f64, SnapshotError> {
        Ok(f64::from_le_bytes(self.bytes()?))
    }
    fn str(&mut self) -> Result<String, SnapshotError> {
        let n = self.u32()?;
        if n > MAX_STR {
            return Err(corrupt(format!("string of {n} bytes")));
        }
        let mut v = Vec::new();
        let got = (&mut self.r).take(n as u64).read_to_end(&mut v)?;
        if got != n as usize {
            return Err(corrupt("file ends early"));
        }
        String::from_utf8(v).map_err(|_| corrupt("string is not UTF-8"))
    }
}

fn reserve<T>(n: u64) -> Vec<T> {
    Vec::with_capacity((n as usize).min(MAX_PREALLOC))
}

impl Profile {
    /// Writes the whole profile as a snapshot.
    pub fn write_snapshot(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut w = W { w: out };
        w.w.write_all(SNAPSHOT_MAGIC)?;
        w.u32(SNAPSHOT_VERSION)?;
        w.u64(self.ticks_per_sec)?;
        w.str(&self.clock)?;
        w.u32(self.target.pid)?;
        w.str(&self.target.jvm)?;
        w.str(&self.target.command)?;
        let s = &self.stats;
        for v in [
            s.events,
            s.instrumented_methods,
            s.called_methods,
            s.lost_events,
            s.duration_ms,
        ] {
            w.u64(v)?;
        }
        match self.calibration {
            Some(c) => {
                w.u8(1)?;
                w.f64(c.inner_ns)?;
                w.f64(c.outer_ns)?;
            }
            None => {
                w.u8(0)?;
                w.f64(0.0)?;
                w.f64(0.0)?;
            }
        }
        for v in [
            s.instrumented_classes,
            s.failed_classes,
            s.threads,
            s.redefinition_batches,
            s.redefinition_ns,
            s.reveal_ns,
        ] {
            w.u64(v)?;
        }
        match &s.reveal {
            None => w.u8(0)?,
            Some(r) => {
                w.u8(1)?;
                w.len(r.revealed_by.len())?;
                for (k, n) in &r.revealed_by {
                    w.str(k)?;
                    w.u64(*n)?;
                }
                for v in [
                    r.scanned,
                    r.reachable,
                    r.reachable_unloaded,
                    r.classes_mirrored,
                    r.unmodifiable_skipped,
                    r.reflective_sites,
                    r.dormant,
                    r.activated_in_place,
                    r.trivial_skipped,
                ] {
                    w.u64(v)?;
                }
            }
        }
        w.u64(s.reset_after_ms)?;
        w.u8(match self.timing {
            Timing::Exact => 0,
            Timing::Sampled => 1,
        })?;
        w.len(self.methods.len())?;
        for (&id, m) in &self.methods {
            w.u32(id)?;
            w.str(&m.class)?;
            w.str(&m.name)?;
            w.str(&m.descriptor)?;
        }
        w.len(self.threads.len())?;
        for t in &self.threads {
            w.u32(t.index)?;
            w.u64(t.java_id)?;
            w.str(&t.name)?;
            let b = &t.bursts;
            for v in [
                b.used,
                b.rejected,
                b.min_pair_ps,
                b.median_pair_ps,
                b.max_pair_ps,
            ] {
                w.u64(v)?;
            }
            let c = &t.samples;
            for v in [c.credited, c.outside, c.outside_ticks, c.late, c.unmatched] {
                w.u64(v)?;
            }
            w.u64(t.virtual_threads)?;
            write_tree(&mut w, &t.tree)?;
        }
        w.len(self.warnings.len())?;
        for s in &self.warnings {
            w.str(s)?;
        }
        w.len(self.alloc_sites.len())?;
        for (&id, s) in &self.alloc_sites {
            w.u32(id)?;
            w.u32(s.method)?;
            w.u32(s.bci)?;
            w.str(&s.descriptor)?;
            w.u8(s.dims)?;
        }
        match &self.stats.cost {
            None => w.u8(0)?,
            Some(c) => {
                w.u8(1)?;
                w.u32(c.method)?;
                for v in [
                    c.recorded_calls,
                    c.recorded_p50_ns,
                    c.silent_calls,
                    c.silent_p50_ns,
                ] {
                    w.u64(v)?;
                }
            }
        }
        w.len(self.owners.len())?;
        for (&id, o) in &self.owners {
            w.u32(id)?;
            w.str(&o.thread)?;
            w.str(&o.context)?;
        }
        w.len(self.sampled_classes.len())?;
        for (&id, class) in &self.sampled_classes {
            w.u32(id)?;
            w.str(class)?;
        }
        match self.sampled_outside {
            None => w.u8(0)?,
            Some((samples, bytes_est)) => {
                w.u8(1)?;
                w.u64(samples)?;
                w.u64(bytes_est)?;
            }
        }
        // v11: live objects (`--alloc=live`)
        match &self.live {
            None => w.u8(0)?,
            Some(l) => {
                w.u8(1)?;
                write_live(&mut w, l)?;
            }
        }
        // v13: windows timing's facts
        match &self.stats.windows {
            None => w.u8(0)?,
            Some(f) => {
                w.u8(1)?;
                write_windows(&mut w, f)?;
            }
        }
        w.w.write_all(END_MAGIC)
    }

    /// Reads a snapshot written by [`Profile::write_snapshot`].
    pub fn read_snapshot(input: &mut dyn Read) -> Result<Profile, SnapshotError> {
        let mut r = R { r: input };
        let magic: [u8; 8] = r.bytes().map_err(|_| SnapshotError::BadMagic)?;
        if &magic != SNAPSHOT_MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let version = r.u32()?;
        if !(OLDEST_VERSION..=SNAPSHOT_VERSION).contains(&version) {
            return Err(SnapshotError::UnsupportedVersion(version));
        }
        let mut p = Profile::new(r.u64()?);
        p.clock = r.str()?;
        p.target.pid = r.u32()?;
        p.target.jvm = r.str()?;
        if version >= 8 {
            p.target.command = r.str()?;
        }
        p.stats.events = r.u64()?;
        p.stats.instrumented_methods = r.u64()?;
        p.stats.called_methods = r.u64()?;
        p.stats.lost_events = r.u64()?;
        p.stats.duration_ms = r.u64()?;
        let has_cal = r.u8()?;
        let (inner, outer) = (r.f64()?, r.f64()?);
        p.calibration = match has_cal {
            0 => None,
            1 => Some(Calibration::new(inner, outer)),
            x => return Err(corrupt(format!("calibration flag {x}"))),
        };
        if version >= 2 {
            let st = &mut p.stats;
            st.instrumented_classes = r.u64()?;
            st.failed_classes = r.u64()?;
            st.threads = r.u64()?;
            st.redefinition_batches = r.u64()?;
            st.redefinition_ns = r.u64()?;
            st.reveal_ns = r.u64()?;
            st.reveal = match r.u8()? {
                0 => None,
                1 => {
                    let n = r.u32()?;
                    let mut revealed_by = Vec::new();
                    for _ in 0..n.min(64) {
                        let k = r.str()?;
                        revealed_by.push((k, r.u64()?));
                    }
                    if n > 64 {
                        return Err(corrupt(format!("{n} edge kinds")));
                    }
                    Some(crate::profile::RevealStats {
                        revealed_by,
                        scanned: r.u64()?,
                        reachable: r.u64()?,
                        reachable_unloaded: r.u64()?,
                        classes_mirrored: r.u64()?,
                        unmodifiable_skipped: r.u64()?,
                        reflective_sites: r.u64()?,
                        dormant: if version >= 3 { r.u64()? } else { 0 },
                        activated_in_place: if version >= 3 { r.u64()? } else { 0 },
                        trivial_skipped: if version >= 5 { r.u64()? } else { 0 },
                    })
                }
                x => return Err(corrupt(format!("revelation flag {x}"))),
            };
        }
        if version >= 4 {
            p.stats.reset_after_ms = r.u64()?;
        }
        if version >= 7 {
            p.timing = match r.u8()? {
                0 => Timing::Exact,
                1 => Timing::Sampled,
                x => return Err(corrupt(format!("timing {x}"))),
            };
        }
        let n = r.u32()?;
        for _ in 0..n {
            let id = r.u32()?;
            let m = MethodInfo {
                class: r.str()?,
                name: r.str()?,
                descriptor: r.str()?,
            };
            p.methods.insert(id, m);
        }
        let n = r.u32()?;
        p.threads = reserve(n as u64);
        for _ in 0..n {
            let index = r.u32()?;
            let java_id = r.u64()?;
            let name = r.str()?;
            let bursts = if version >= 6 {
                Bursts {
                    used: r.u64()?,
                    rejected: r.u64()?,
                    min_pair_ps: r.u64()?,
                    median_pair_ps: r.u64()?,
                    max_pair_ps: r.u64()?,
                }
            } else {
                Bursts::default()
            };
            let samples = if version >= 7 {
                SampleCounts {
                    credited: r.u64()?,
                    outside: r.u64()?,
                    outside_ticks: r.u64()?,
                    late: r.u64()?,
                    unmatched: r.u64()?,
                }
            } else {
                SampleCounts::default()
            };
            let virtual_threads = if version >= 8 { r.u64()? } else { 0 };
            let tree = read_tree(&mut r, version)?;
            p.threads.push(ThreadProfile {
                virtual_threads,
                index,
                java_id,
                name,
                tree,
                bursts,
                samples,
            });
        }
        let n = r.u32()?;
        for _ in 0..n {
            p.warnings.push(r.str()?);
        }
        if version >= 8 {
            let n = r.u32()?;
            for _ in 0..n {
                let id = r.u32()?;
                let site = crate::profile::AllocSite {
                    method: r.u32()?,
                    bci: r.u32()?,
                    descriptor: r.str()?,
                    dims: r.u8()?,
                };
                p.alloc_sites.insert(id, site);
            }
        }
        if version >= 9 {
            p.stats.cost = match r.u8()? {
                0 => None,
                1 => Some(crate::profile::CostFacts {
                    method: r.u32()?,
                    recorded_calls: r.u64()?,
                    recorded_p50_ns: r.u64()?,
                    silent_calls: r.u64()?,
                    silent_p50_ns: r.u64()?,
                }),
                x => return Err(corrupt(format!("cost flag {x}"))),
            };
        }
        if version >= 10 {
            let n = r.u32()?;
            for _ in 0..n {
                let id = r.u32()?;
                let info = crate::profile::OwnerInfo {
                    thread: r.str()?,
                    context: r.str()?,
                };
                p.owners.insert(id, info);
            }
            let n = r.u32()?;
            for _ in 0..n {
                let id = r.u32()?;
                p.sampled_classes.insert(id, r.str()?);
            }
            // Before version 12 samples did not say whether they were at
            // a probed method (a profile without samples has nothing to say).
            p.probed_split = version >= 12 || p.sampled_classes.is_empty();
            p.sampled_outside = match r.u8()? {
                0 => None,
                1 => Some((r.u64()?, r.u64()?)),
                x => return Err(corrupt(format!("sampled flag {x}"))),
            };
        }
        if version >= 11 {
            p.live = match r.u8()? {
                0 => None,
                1 => Some(read_live(&mut r)?),
                x => return Err(corrupt(format!("live flag {x}"))),
            };
        }
        if version >= 13 {
            p.stats.windows = match r.u8()? {
                0 => None,
                1 => Some(read_windows(&mut r)?),
                x => return Err(corrupt(format!("windows flag {x}"))),
            };
        }
        let end: [u8; 8] = r.bytes()?;
        if &end != END_MAGIC {
            return Err(corrupt("missing end marker"));
        }
        Ok(p)
    }
}

fn write_windows(w: &mut W<'_>, f: &crate::profile::WindowFacts) -> io::Result<()> {
    use sprig_wire::control::{Silence, StackSource};
    w.u32(f.counting_ms)?;
    w.u32(f.silent_ms)?;
    for v in [
        f.interval_us,
        f.counted_root_calls,
        f.silent_root_calls,
        f.samples,
        f.samples_outside,
    ] {
        w.u64(v)?;
    }
    w.u8(match f.source {
        None => 0,
        Some(StackSource::Jvmti) => 1,
        Some(StackSource::Timer) => 2,
    })?;
    w.u64(f.samples_dropped)?;
    w.u64(f.samples_in_probes)?;
    w.u8(match f.silence {
        Silence::Dormant => 0,
        Silence::Original => 1,
    })?;
    match &f.switches {
        None => w.u8(0),
        Some(s) => {
            w.u8(1)?;
            w.u32(s.to_original)?;
            w.u32(s.to_instrumented)?;
            for v in [s.classes, s.failed, s.ns, s.max_ns] {
                w.u64(v)?;
            }
            w.u32(s.cut)
        }
    }
}

fn read_windows(r: &mut R<'_>) -> Result<crate::profile::WindowFacts, SnapshotError> {
    use sprig_wire::control::{Silence, StackSource, WindowSwitches};
    let counting_ms = r.u32()?;
    let silent_ms = r.u32()?;
    let interval_us = r.u64()?;
    let counted_root_calls = r.u64()?;
    let silent_root_calls = r.u64()?;
    let samples = r.u64()?;
    let samples_outside = r.u64()?;
    let source = match r.u8()? {
        0 => None,
        1 => Some(StackSource::Jvmti),
        2 => Some(StackSource::Timer),
        x => return Err(corrupt(format!("stack source {x}"))),
    };
    let samples_dropped = r.u64()?;
    let samples_in_probes = r.u64()?;
    let silence = match r.u8()? {
        0 => Silence::Dormant,
        1 => Silence::Original,
        x => return Err(corrupt(format!("silence {x}"))),
    };
    let switches = match r.u8()? {
        0 => None,
        1 => Some(WindowSwitches {
            to_original: r.u32()?,
            to_instrumented: r.u32()?,
            classes: r.u64()?,
            failed: r.u64()?,
            ns: r.u64()?,
            max_ns: r.u64()?,
            cut: r.u32()?,
        }),
        x => return Err(corrupt(format!("switches flag {x}"))),
    };
    Ok(crate::profile::WindowFacts {
        counting_ms,
        silent_ms,
        interval_us,
        counted_root_calls,
        silent_root_calls,
        samples,
        samples_outside,
        source,
        samples_dropped,
        samples_in_probes,
        silence,
        switches,
    })
}

fn write_figures(w: &mut W<'_>, f: &LiveFigures) -> io::Result<()> {
    w.u64(f.bytes)?;
    w.u64(f.objects)?;
    w.u64(f.samples)
}

fn read_figures(r: &mut R<'_>) -> Result<LiveFigures, SnapshotError> {
    Ok(LiveFigures {
        bytes: r.u64()?,
        objects: r.u64()?,
        samples: r.u64()?,
    })
}

fn write_point(w: &mut W<'_>, g: &LiveGc) -> io::Result<()> {
    w.u64(g.gc)?;
    write_figures(w, &g.total)?;
    w.len(g.rows.len())?;
    for row in &g.rows {
        w.u32(row.context)?;
        w.u32(row.class)?;
        write_figures(w, &row.live)?;
    }
    Ok(())
}

fn read_point(r: &mut R<'_>) -> Result<LiveGc, SnapshotError> {
    let gc = r.u64()?;
    let total = read_figures(r)?;
    let n = r.u32()?;
    let mut rows = Vec::new();
    for _ in 0..n {
        rows.push(LiveRow {
            context: r.u32()?,
            class: r.u32()?,
            live: read_figures(r)?,
        });
    }
    Ok(LiveGc { gc, total, rows })
}

fn write_live(w: &mut W<'_>, l: &LiveProfile) -> io::Result<()> {
    w.len(l.contexts.len())?;
    for c in &l.contexts {
        w.len(c.len())?;
        for &m in c {
            w.u32(m)?;
        }
    }
    w.len(l.series.len())?;
    for g in &l.series {
        write_point(w, g)?;
    }
    write_point(w, &l.now)?;
    w.len(l.nodes.len())?;
    for (&(thread, node), f) in &l.nodes {
        w.u32(thread)?;
        w.u32(node)?;
        write_figures(w, f)?;
    }
    w.u64(l.lost_frees)
}

fn read_live(r: &mut R<'_>) -> Result<LiveProfile, SnapshotError> {
    let mut l = LiveProfile::default();
    let n = r.u32()?;
    for _ in 0..n {
        let len = r.u32()?;
        let mut c = Vec::new();
        for _ in 0..len {
            c.push(r.u32()?);
        }
        l.contexts.push(c);
    }
    let n = r.u32()?;
    for _ in 0..n {
        l.series.push(read_point(r)?);
    }
    l.now = read_point(r)?;
    let n = r.u32()?;
    for _ in 0..n {
        let key = (r.u32()?, r.u32()?);
        l.nodes.insert(key, read_figures(r)?);
    }
    l.lost_frees = r.u64()?;
    Ok(l)
}

/// Children of `i` that respect the tree invariant (index greater than the
/// parent's, inside the arena): following only those can never loop.
fn kids(tree: &Tree, i: u32) -> impl DoubleEndedIterator<Item = u32> + '_ {
    let len = tree.nodes.len();
    tree.nodes[i as usize]
        .children
        .iter()
        .copied()
        .filter(move |&c| c > i && (c as usize) < len)
}

fn write_tree(w: &mut W<'_>, tree: &Tree) -> io::Result<()> {
    let roots: Vec<u32> = tree
        .roots
        .iter()
        .copied()
        .filter(|&r| (r as usize) < tree.nodes.len())
        .collect();
    // Count what the pre-order walk will write.
    let mut count: u64 = 0;
    let mut stack: Vec<u32> = roots.iter().rev().copied().collect();
    while let Some(i) = stack.pop() {
        count += 1;
        stack.extend(kids(tree, i).rev());
    }
    w.len(roots.len())?;
    w.u64(count)?;
    stack.extend(roots.iter().rev().copied());
    while let Some(i) = stack.pop() {
        let n = &tree.nodes[i as usize];
        w.u32(n.method)?;
        w.u64(n.calls)?;
        w.u64(n.total_ticks)?;
        w.u64(n.adjust_ticks)?;
        w.u64(n.incomplete)?;
        w.u64(n.recal.calls)?;
        w.u64(n.recal.inner)?;
        w.u64(n.recal.outer)?;
        w.u64(n.samples)?;
        w.u64(n.sampled_ticks)?;
        match n.latency.as_deref() {
            None => w.u8(0)?,
            Some(l) => {
                w.u8(1)?;
                for v in [l.count, l.sum, l.min, l.max] {
                    w.u64(v)?;
                }
                w.len(l.buckets().count())?;
                for (b, calls) in l.buckets() {
                    w.u32(b)?;
                    w.u64(calls)?;
                }
            }
        }
        w.len(n.allocs.len())?;
        for a in &n.allocs {
            w.u32(a.site)?;
            w.u8(a.level)?;
            w.u64(a.count)?;
            w.u64(a.bytes)?;
        }
        w.len(n.owners.len())?;
        for o in &n.owners {
            w.u32(o.owner)?;
            w.u64(o.count)?;
            w.u64(o.ticks)?;
        }
        w.len(n.sampled_allocs.len())?;
        for a in &n.sampled_allocs {
            w.u32(a.class)?;
            w.u64(a.samples)?;
            w.u64(a.bytes_est)?;
            w.u64(a.probed_samples)?;
            w.u64(a.probed_bytes_est)?;
        }
        w.len(kids(tree, i).count())?;
        stack.extend(kids(tree, i).rev());
    }
    Ok(())
}

fn read_latency(r: &mut R<'_>) -> Result<Latency, SnapshotError> {
    let (count, sum, min, max) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    let n = r.u32()?;
    if n > crate::profile::BUCKETS {
        return Err(corrupt(format!("latency histogram of {n} buckets")));
    }
    let mut buckets = reserve(u64::from(n));
    for _ in 0..n {
        buckets.push((r.u32()?, r.u64()?));
    }
    Latency::from_parts(count, sum, min, max, buckets)
        .ok_or_else(|| corrupt("latency histogram does not add up"))
}

fn read_tree(r: &mut R<'_>, version: u32) -> Result<Tree, SnapshotError> {
    let roots = r.u32()?;
    let count = r.u64()?;
    let mut tree = Tree {
        nodes: reserve(count),
        roots: reserve(roots as u64),
    };
    // (node, children still to read)
    let mut open: Vec<(u32, u32)> = Vec::new();
    let mut roots_left = roots;
    for _ in 0..count {
        while let Some(&(_, 0)) = open.last() {
            open.pop();
        }
        let parent = match open.last_mut() {
            Some((p, left)) => {
                *left -= 1;
                Some(*p)
            }
            None => {
                if roots_left == 0 {
                    return Err(corrupt("more nodes than the tree holds"));
                }
                roots_left -= 1;
                None
            }
        };
        let mut node = Node {
            method: r.u32()?,
            calls: r.u64()?,
            total_ticks: r.u64()?,
            adjust_ticks: r.u64()?,
            incomplete: r.u64()?,
            ..Node::default()
        };
        if version >= 6 {
            node.recal = Recal {
                calls: r.u64()?,
                inner: r.u64()?,
                outer: r.u64()?,
            };
            if node.recal.calls > node.calls {
                return Err(corrupt("more recalibrated calls than calls"));
            }
        }
        if version >= 7 {
            node.samples = r.u64()?;
            node.sampled_ticks = r.u64()?;
            node.latency = match r.u8()? {
                0 => None,
                1 => Some(Box::new(read_latency(r)?)),
                x => return Err(corrupt(format!("latency flag {x}"))),
            };
        }
        if version >= 8 {
            let n = r.u32()?;
            for _ in 0..n {
                let (site, level) = (r.u32()?, r.u8()?);
                let (count, bytes) = (r.u64()?, r.u64()?);
                crate::profile::add_alloc(&mut node.allocs, site, level, count, bytes);
            }
        }
        if version >= 10 {
            let n = r.u32()?;
            for _ in 0..n {
                let owner = r.u32()?;
                let (count, ticks) = (r.u64()?, r.u64()?);
                crate::profile::add_owned(&mut node.owners, owner, count, ticks);
            }
            let n = r.u32()?;
            for _ in 0..n {
                let class = r.u32()?;
                let (samples, bytes_est) = (r.u64()?, r.u64()?);
                let (probed_samples, probed_bytes_est) = if version >= 12 {
                    (r.u64()?, r.u64()?)
                } else {
                    (0, 0)
                };
                crate::profile::add_sampled(
                    &mut node.sampled_allocs,
                    crate::profile::SampledAllocs {
                        class,
                        samples,
                        bytes_est,
                        probed_samples,
                        probed_bytes_est,
                    },
                );
            }
        }
        let children = r.u32()?;
        let id = tree.push(parent, node);
        open.push((id, children));
    }
    if roots_left != 0 || open.iter().any(|&(_, left)| left != 0) {
        return Err(corrupt("fewer nodes than the tree holds"));
    }
    tree.recount();
    Ok(tree)
}
