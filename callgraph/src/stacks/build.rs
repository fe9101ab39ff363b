//! [`StackProfile`]: the samples of a whole `sprig sample` session, fed
//! one sampling round at a time.

use std::collections::{BTreeMap, HashMap};

use sprig_wire::control::{SampledState, StackSample};

use super::pcct::{Hit, Pcct};
use super::{TRUNCATED_FRAME, View};
use crate::profile::MethodInfo;

/// Buckets of time kept for the windows of suggested roots; when a run
/// outgrows them, neighbours merge and each bucket spans twice the time.
const MAX_BUCKETS: usize = 256;
/// The first buckets' span.
const FIRST_BUCKET_NS: u64 = 50_000_000;

/// One sampled thread.
#[derive(Clone, Debug, Default)]
pub struct ThreadStacks {
    /// `Thread.getId()`.
    pub java_id: u64,
    pub name: String,
    pub tree: Pcct,
    /// Samples in each view; samples without a Java frame.
    pub wall_samples: u64,
    pub cpu_samples: u64,
    pub empty: u64,
    /// Samples on the CPU in a native method (counted with `java_only`
    /// too, where the CPU view leaves them out).
    pub native_cpu_samples: u64,
    /// The rounds (session clock, ns) of the thread's first and last
    /// sample: how much of the run it lived through.
    pub first_ns: Option<u64>,
    pub last_ns: u64,
}

impl ThreadStacks {
    /// The time from the thread's first sample to its last, ns.
    pub fn lived_ns(&self) -> u64 {
        self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f))
    }
}

/// A method's samples: `self` where it is the leaf, `total` where it is
/// anywhere on the stack (once a sample, however often it recurses), and
/// the weight of those in ns, per view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MethodCounts {
    pub wall_self: u64,
    pub wall_total: u64,
    pub wall_total_ns: u64,
    pub cpu_self: u64,
    pub cpu_total: u64,
    pub cpu_total_ns: u64,
    /// Samples on the CPU with the method as the leaf, in a native method
    /// (counted with `java_only` too, where `cpu_self` leaves them out).
    pub native_self: u64,
}

impl MethodCounts {
    /// (self, total, total ns) in `view`.
    pub fn of(&self, view: View) -> (u64, u64, u64) {
        match view {
            View::Wall => (self.wall_self, self.wall_total, self.wall_total_ns),
            View::Cpu => (self.cpu_self, self.cpu_total, self.cpu_total_ns),
        }
    }
}

/// One stretch of the run: the samples in each view, and each method's
/// inclusive samples.
#[derive(Clone, Debug, Default)]
pub(super) struct Bucket {
    pub wall: u64,
    pub cpu: u64,
    /// method -> (wall total, cpu total)
    pub totals: HashMap<u32, (u64, u64)>,
}

impl Bucket {
    fn merge(&mut self, o: Bucket) {
        self.wall += o.wall;
        self.cpu += o.cpu;
        for (m, (w, c)) in o.totals {
            let t = self.totals.entry(m).or_default();
            t.0 += w;
            t.1 += c;
        }
    }
}

/// The CPU time sprig's own work took in the target while it sampled,
/// beside the target's: an upper bound of sampling's overhead that needs
/// no comparison of two runs' throughputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnCpu {
    /// The timer source's signal handler, entry to exit on its thread's CPU
    /// clock, in every signal
    /// (0 with the JVMTI source, whose work is its thread's).
    pub handler_ns: u64,
    /// sprig's threads in the target (`sprig-*`).
    pub threads_ns: u64,
    /// The whole target process, sprig's work included.
    pub target_cpu_ns: u64,
}

impl OwnCpu {
    /// sprig's share of the target's CPU time (0 when the target used
    /// none).
    pub fn share(&self) -> f64 {
        if self.target_cpu_ns == 0 {
            return 0.0;
        }
        (self.handler_ns + self.threads_ns) as f64 / self.target_cpu_ns as f64
    }
}

/// Every sampled thread's tree and what the suggestions need.
#[derive(Clone, Debug)]
pub struct StackProfile {
    /// The interval asked for, in ns.
    pub interval_ns: u64,
    pub methods: BTreeMap<u32, MethodInfo>,
    /// By Java thread id.
    pub threads: BTreeMap<u64, ThreadStacks>,
    pub counts: HashMap<u32, MethodCounts>,
    /// Methods seen as the outermost frame of a whole stack: the threads'
    /// entry frames.
    pub entry_frames: std::collections::BTreeSet<u32>,
    pub rounds: u64,
    /// Samples in each view, over all threads.
    pub wall_samples: u64,
    pub cpu_samples: u64,
    /// Samples on the CPU in a native method, over all threads: in the CPU
    /// view, or left out of it with `java_only`.
    pub native_cpu_samples: u64,
    /// The CPU view holds the samples of threads running Java code only
    /// (what JFR's execution samples show): a thread on the CPU in a
    /// native method counts in the wall view and in `native_cpu_samples`.
    pub java_only: bool,
    /// Stacks cut at the maximum depth.
    pub truncated: u64,
    /// What the rounds cost the agent's sampling thread, in ns (with the
    /// timer source, what the samples cost the signal handler).
    pub cost_ns: u64,
    /// The source the agent took the stacks with, when it said.
    pub source: Option<sprig_wire::control::StackSource>,
    /// sprig's CPU time in the target, when it was measured.
    pub own_cpu: Option<OwnCpu>,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    pub(super) buckets: Vec<Bucket>,
    pub(super) bucket_ns: u64,
    scratch: Vec<u32>,
    /// The first frame id of each (class, name, descriptor), and the ids
    /// that name a method already known, with that first id: a class
    /// redefined while its frames run (`--edges` gives dormant probes to
    /// the classes it samples) has its running frames reported under the
    /// obsolete method's id, so one method would count as two.
    by_name: HashMap<(String, String, String), u32>,
    alias: HashMap<u32, u32>,
}

/// The id samples count `id` under: the first id of its method
/// ([`StackProfile`]'s `alias`).
fn canonical(alias: &HashMap<u32, u32>, id: u32) -> u32 {
    alias.get(&id).copied().unwrap_or(id)
}

impl StackProfile {
    pub fn new(interval_ns: u64) -> StackProfile {
        StackProfile {
            interval_ns: interval_ns.max(1),
            methods: BTreeMap::new(),
            threads: BTreeMap::new(),
            counts: HashMap::new(),
            entry_frames: Default::default(),
            rounds: 0,
            wall_samples: 0,
            cpu_samples: 0,
            native_cpu_samples: 0,
            java_only: false,
            truncated: 0,
            cost_ns: 0,
            source: None,
            own_cpu: None,
            first_ns: None,
            last_ns: 0,
            buckets: Vec::new(),
            bucket_ns: FIRST_BUCKET_NS,
            scratch: Vec::new(),
            by_name: HashMap::new(),
            alias: HashMap::new(),
        }
    }

    /// A `FrameMethod`.
    pub fn add_method(&mut self, id: u32, info: MethodInfo) {
        let key = (
            info.class.clone(),
            info.name.clone(),
            info.descriptor.clone(),
        );
        let first = *self.by_name.entry(key).or_insert(id);
        if first != id {
            self.alias.insert(id, first);
        }
        self.methods.insert(id, info);
    }

    /// A `SampledThread`.
    pub fn add_thread(&mut self, java_id: u64, name: &str) {
        let t = self.threads.entry(java_id).or_default();
        t.java_id = java_id;
        t.name = name.to_owned();
    }

    /// The method's name, a placeholder for an unknown id.
    pub fn method(&self, id: u32) -> MethodInfo {
        match id {
            TRUNCATED_FRAME => MethodInfo::new("[truncated]", "[truncated]", ""),
            super::JDK_FRAME => MethodInfo::new("[jdk]", "[jdk]", ""),
            _ => self
                .methods
                .get(&id)
                .cloned()
                .unwrap_or_else(|| MethodInfo::unknown(id)),
        }
    }

    /// The time the samples span in ns (from the first round to the last,
    /// plus one interval: the first round stands for the interval before
    /// it).
    pub fn span_ns(&self) -> u64 {
        match self.first_ns {
            Some(f) => self.last_ns.saturating_sub(f) + self.interval_ns,
            None => 0,
        }
    }

    /// Samples in `view`.
    pub fn samples(&self, view: View) -> u64 {
        match view {
            View::Wall => self.wall_samples,
            View::Cpu => self.cpu_samples,
        }
    }

    /// One `StackSamples` message: a round taken at `time_ns` (the session
    /// clock), costing `cost_ns`.
    pub fn add_round(&mut self, time_ns: u64, cost_ns: u64, samples: &[StackSample]) {
        let gap = match self.first_ns {
            None => self.interval_ns,
            // A round out of order weighs one interval.
            Some(_) if time_ns <= self.last_ns => self.interval_ns,
            Some(_) => time_ns - self.last_ns,
        };
        let first = *self.first_ns.get_or_insert(time_ns);
        self.last_ns = self.last_ns.max(time_ns);
        self.rounds += 1;
        self.cost_ns = self.cost_ns.saturating_add(cost_ns);
        let bucket = self.bucket_at(time_ns.saturating_sub(first));
        for s in samples {
            self.add_sample(s, gap, bucket, time_ns);
        }
    }

    /// The index of the bucket for `offset_ns` into the run, merging
    /// buckets when the run outgrows them.
    fn bucket_at(&mut self, offset_ns: u64) -> usize {
        let mut i = (offset_ns / self.bucket_ns) as usize;
        while i >= MAX_BUCKETS {
            let old = std::mem::take(&mut self.buckets);
            let mut merged: Vec<Bucket> = Vec::with_capacity(MAX_BUCKETS / 2 + 1);
            for (j, b) in old.into_iter().enumerate() {
                if j % 2 == 0 {
                    merged.push(b);
                } else if let Some(last) = merged.last_mut() {
                    last.merge(b);
                }
            }
            self.buckets = merged;
            self.bucket_ns = self.bucket_ns.saturating_mul(2);
            i = (offset_ns / self.bucket_ns) as usize;
        }
        if self.buckets.len() <= i {
            self.buckets.resize_with(i + 1, Bucket::default);
        }
        i
    }

    fn add_sample(&mut self, s: &StackSample, gap: u64, bucket: usize, time_ns: u64) {
        let t = self
            .threads
            .entry(s.thread)
            .or_insert_with(|| ThreadStacks {
                java_id: s.thread,
                ..ThreadStacks::default()
            });
        t.first_ns.get_or_insert(time_ns);
        t.last_ns = t.last_ns.max(time_ns);
        if s.frames.is_empty() {
            t.empty += 1;
            t.tree.forget_previous();
            return;
        }
        let cpu_known = s.cpu_ns != u64::MAX;
        // Runnable in Java is on the CPU unless the thread used under a
        // hundredth of the interval since its previous sample (a thread
        // busy 5% of the time, caught running, used more): JVMTI calls a
        // thread runnable that waits inside the VM (HotSpot's Reference
        // Handler on the pending list) and it uses none. In a native
        // method it must have used half the interval.
        // A sample of the CPU-time timer source is one of a thread on the
        // CPU by construction, whatever the time between two messages, in
        // Java code or in a native method.
        let timer = self.source == Some(sprig_wire::control::StackSource::Timer);
        let on_cpu = match s.state {
            SampledState::Running => timer || !cpu_known || s.cpu_ns.saturating_mul(100) >= gap,
            SampledState::Native => timer || (cpu_known && s.cpu_ns.saturating_mul(2) >= gap),
            _ => false,
        };
        let native = on_cpu && s.state == SampledState::Native;
        if native {
            t.native_cpu_samples += 1;
            self.native_cpu_samples += 1;
        }
        let on_cpu = on_cpu && !(native && self.java_only);
        let hit = Hit {
            wall_ns: gap,
            cpu_ns: on_cpu.then_some(if cpu_known { s.cpu_ns } else { gap }),
        };
        // Outermost first, under the pseudo-frame when the outer end is
        // missing.
        let mut frames = std::mem::take(&mut self.scratch);
        frames.clear();
        if s.truncated {
            frames.push(TRUNCATED_FRAME);
            self.truncated += 1;
        } else if let Some(&outer) = s.frames.last() {
            self.entry_frames.insert(canonical(&self.alias, outer));
        }
        frames.extend(s.frames.iter().rev().map(|&m| canonical(&self.alias, m)));
        t.tree.add(&frames, hit);
        t.wall_samples += 1;
        self.wall_samples += 1;
        if on_cpu {
            t.cpu_samples += 1;
            self.cpu_samples += 1;
        }
        let cpu_w = hit.cpu_ns.unwrap_or(0);
        let leaf = canonical(&self.alias, s.frames[0]);
        let c = self.counts.entry(leaf).or_default();
        c.wall_self += 1;
        c.cpu_self += u64::from(on_cpu);
        c.native_self += u64::from(native);
        // Each method once, however often it recurses.
        frames.retain(|&m| m != TRUNCATED_FRAME);
        frames.sort_unstable();
        frames.dedup();
        let b = &mut self.buckets[bucket];
        b.wall += 1;
        b.cpu += u64::from(on_cpu);
        for &m in frames.iter() {
            let c = self.counts.entry(m).or_default();
            c.wall_total += 1;
            c.wall_total_ns = c.wall_total_ns.saturating_add(gap);
            if on_cpu {
                c.cpu_total += 1;
                c.cpu_total_ns = c.cpu_total_ns.saturating_add(cpu_w);
            }
            let bt = b.totals.entry(m).or_default();
            bt.0 += 1;
            bt.1 += u64::from(on_cpu);
        }
        self.scratch = frames;
    }

    /// Hot methods in `view`: (method, self, total), by self then total
    /// descending, then by name; methods with no sample in the view left
    /// out.
    pub fn hot_methods(&self, view: View) -> Vec<(u32, u64, u64)> {
        let mut v: Vec<(u32, u64, u64)> = self
            .counts
            .iter()
            .map(|(&m, c)| {
                let (s, t, _) = c.of(view);
                (m, s, t)
            })
            .filter(|&(_, _, t)| t > 0)
            .collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then(b.2.cmp(&a.2))
                .then_with(|| self.method(a.0).cmp(&self.method(b.0)))
                .then(a.0.cmp(&b.0))
        });
        v
    }

    /// Each method's inclusive share of `view`'s samples in each of `n`
    /// windows of the run (equal spans of time); windows without a
    /// sample in the view are left out.
    pub(super) fn window_shares(&self, view: View, n: usize) -> Vec<HashMap<u32, f64>> {
        let len = self.buckets.len();
        let n = n.clamp(1, len.max(1));
        let mut out = Vec::new();
        for w in 0..n {
            let (lo, hi) = (w * len / n, (w + 1) * len / n);
            let mut all = 0u64;
            let mut per: HashMap<u32, u64> = HashMap::new();
            for b in &self.buckets[lo..hi] {
                all += match view {
                    View::Wall => b.wall,
                    View::Cpu => b.cpu,
                };
                for (&m, &(wt, ct)) in &b.totals {
                    *per.entry(m).or_default() += match view {
                        View::Wall => wt,
                        View::Cpu => ct,
                    };
                }
            }
            if all > 0 {
                out.push(
                    per.into_iter()
                        .map(|(m, c)| (m, c as f64 / all as f64))
                        .collect(),
                );
            }
        }
        out
    }
}
