//! Suggested roots: methods worth profiling exactly with `sprig profile`,
//! and what profiling each is predicted to cost.
//!
//! A candidate holds at least [`SuggestOptions::min_share`] of the view's
//! samples inclusively, holds it steadily (in every window of the run at
//! least half its share over the whole run), and is neither a method of
//! the JDK's library ([`is_library_class`]: the tools the JDK ships, such
//! as javac, are candidates), nor sprig's own ([`is_sprig_class`]), nor a
//! thread's entry frame (the outermost
//! frame of a whole stack: `Thread.run`, `main`). What a performance engineer picks among them is
//! a unit of work: a method entered anew for each request, below the
//! thread's loop and the framework's dispatch loops, above the leaf work.
//! The ranking says so in three tiers (docs/stack-sampling.md has the
//! reasons):
//!
//! 1. **Units of work**: candidates that are not loops and have no other
//!    candidate that is not a loop above them (for most of their
//!    samples): the outermost methods entered per unit of work.
//! 2. **Parts**: the other candidates that are not loops, the methods a
//!    unit of work calls (and a helper every part calls, such as a spin
//!    loop, even when it is on every stack).
//! 3. **Loops**: a candidate on the stack in at least
//!    [`SuggestOptions::loop_presence`] of the samples of its thread, for
//!    most of its samples (counting threads with at least
//!    [`JUDGE_SAMPLES`] samples in the view, and those with fewer that
//!    lived through half the run together): a frame present in nearly
//!    every sample of its thread across the whole session is a loop that
//!    never returns (a pool's worker loop, a selector's produce loop, a
//!    driver's iteration loop) or cannot be told from one by sampling; a
//!    `sprig profile` rooted there opens a context only when it is
//!    entered again, and a method entered once never is.
//!
//! Within a tier, by share. A method that hands all of its time on to one
//! callee (a JDBC statement's `executeQuery` calling the engine's
//! `Command.executeQuery`) is the same root as the callee: from each
//! candidate the suggestion goes down, one direct callee at a time, while
//! the callee holds [`SuggestOptions::hold`] of the first one's samples
//! and has not many more of its own elsewhere, and names the deepest of
//! that run, where the work splits (`same_time` lists the others, outer
//! first: profiling any of them measures the same time within `1 - hold`
//! of it). (A helper every callee calls, such as a leaf both branches
//! use, is not a callee of the candidate: the run stops above the
//! branches.)
//!
//! # The predicted overhead
//!
//! An estimate, and only with call-edge bursts (`--edges`): each call
//! `sprig profile` would probe costs one probe pair, so the share of the
//! root's time the probes add is its calls per CPU second below it, as the
//! bursts measured them ([`EdgeProfile::per_cpu_s_under`]), times the
//! pair's cost:
//!
//! ```text
//! overhead = calls_per_cpu_s_under_root * pair_ns / 1e9
//! ```
//!
//! with the pair of sampled timing ([`SAMPLED_PAIR_NS`]) and of exact
//! timing ([`EXACT_PAIR_NS`]), as measured in BENCHMARKS.md (the JSON says
//! so: `pair_source`), and the calls per CPU second with the bursts' own
//! path taken out of the time between entries (`burst_path_ns`). Its calls per
//! wall second are that rate times the CPU time sampled under the root a
//! second. Left out: what the root's own probes add (a root context opened
//! and closed per call), and the CPU the profiling CLI takes to read every
//! event, which costs the target throughput only on a host with no idle
//! core (docs/stack-sampling.md). Without bursts there is no prediction: Whaley's edge
//! activations are a lower bound on the calls that sampling cannot bound
//! from above (a call that starts and ends between two samples of its
//! thread is not seen), and on call-dense code they were 100,000 times
//! below the calls; the activations are reported, the overhead is not.

use std::collections::{BTreeMap, HashMap};

use super::View;
use super::build::StackProfile;

pub use crate::profile::{EXACT_PAIR_NS, SAMPLED_PAIR_NS};

/// Whether a class is the JDK's (java.*, javax.*, jdk.*, sun.*,
/// com.sun.*).
pub fn is_jdk_class(class: &str) -> bool {
    ["java.", "javax.", "jdk.", "sun.", "com.sun."]
        .iter()
        .any(|p| class.starts_with(p))
}

/// Whether a class is the JDK's library, whose methods are no root: a
/// JDK class ([`is_jdk_class`]) but for the tools the JDK ships
/// (`com.sun.tools.*`: javac, javadoc, jdeps), which an application that
/// runs one in process (a build server calling javac) runs as its own
/// work.
pub fn is_library_class(class: &str) -> bool {
    is_jdk_class(class) && !class.starts_with("com.sun.tools.")
}

/// Whether a class is sprig's own (`sprig.rt.Probe`, whose frames the
/// samples show above a probed method's while `--edges` counts or samples
/// entries): never a root.
pub fn is_sprig_class(class: &str) -> bool {
    class.starts_with("sprig.")
}

/// What the suggestions weigh.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuggestOptions {
    pub view: View,
    /// At most this many suggestions.
    pub max: usize,
    /// Smallest inclusive share of a candidate (0..1).
    pub min_share: f64,
    /// Windows the run is split into for stability.
    pub windows: usize,
    /// Share of a candidate's samples a direct callee must hold to be
    /// the same root (module docs: the delegation run).
    pub hold: f64,
    /// Share of its thread's samples a frame must be on the stack of to be
    /// a loop (module docs).
    pub loop_presence: f64,
}

/// A thread with fewer samples in the view does not tell a loop: a
/// thread sampled twice has every frame of its stack in every sample.
pub const JUDGE_SAMPLES: u64 = 10;

impl Default for SuggestOptions {
    fn default() -> SuggestOptions {
        SuggestOptions {
            view: View::Cpu,
            max: 3,
            min_share: 0.05,
            windows: 4,
            hold: 0.95,
            loop_presence: 0.9,
        }
    }
}

/// One suggested root.
#[derive(Clone, Debug, PartialEq)]
pub struct SuggestedRoot {
    pub method: u32,
    /// `pkg.Class::method`, as `--root` takes it.
    pub pattern: String,
    /// The other methods of its delegation run (module docs), outer
    /// first: the same root within `1 - hold` of its time.
    pub same_time: Vec<String>,
    /// Which tier it ranks in (module docs).
    pub kind: RootKind,
    /// Inclusive share of the view's samples (0..1), and per window.
    pub share: f64,
    pub window_shares: Vec<f64>,
    /// Edge activations at and below it (non-JDK), and per second of the
    /// run: a lower bound on the calls `sprig profile` would probe.
    pub activations: u64,
    pub activations_per_sec: f64,
    /// Time sampled under it in ns (the view's weight).
    pub time_ns: u64,
    /// Predicted overhead in percent of the time under the root, an
    /// estimate (module docs); `None` without call-edge bursts.
    pub sampled_pct: Option<f64>,
    pub exact_pct: Option<f64>,
    /// With `--edges`: the calls per wall second at and below it estimated
    /// from the call-edge bursts ([`with_edges`]).
    pub edge_calls_per_sec: Option<f64>,
    /// With `--edges`: the calls per CPU second below it the prediction
    /// rests on.
    pub edge_calls_per_cpu_s: Option<f64>,
}

/// The tier a suggestion ranks in (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RootKind {
    Unit,
    Part,
    Loop,
}

impl RootKind {
    pub fn name(self) -> &'static str {
        match self {
            RootKind::Unit => "unit",
            RootKind::Part => "part",
            RootKind::Loop => "loop",
        }
    }
}

/// The suggested roots of `p`, best first (module docs: units of work,
/// then parts, then loops, each by share, then name).
pub fn suggest_roots(p: &StackProfile, opts: &SuggestOptions) -> Vec<SuggestedRoot> {
    let all = p.samples(opts.view);
    if all == 0 || opts.max == 0 {
        return Vec::new();
    }
    let windows = p.window_shares(opts.view, opts.windows);
    let mut candidates: BTreeMap<u32, (f64, Vec<f64>)> = BTreeMap::new();
    for (&m, c) in &p.counts {
        let Some(info) = p.methods.get(&m) else {
            continue;
        };
        if is_library_class(&info.class)
            || is_sprig_class(&info.class)
            || p.entry_frames.contains(&m)
        {
            continue;
        }
        let (_, total, _) = c.of(opts.view);
        let share = total as f64 / all as f64;
        if share < opts.min_share {
            continue;
        }
        let ws: Vec<f64> = windows
            .iter()
            .map(|w| w.get(&m).copied().unwrap_or(0.0))
            .collect();
        if ws.iter().any(|&w| w < share / 2.0) {
            continue;
        }
        candidates.insert(m, (share, ws));
    }
    let total = |m: u32| p.counts.get(&m).map_or(0, |c| c.of(opts.view).1);
    let loops = loop_frames(p, opts, &candidates);
    let units: Vec<u32> = candidates
        .keys()
        .copied()
        .filter(|m| !loops.contains(m))
        .collect();
    let under = under_any(p, opts.view, &units);
    let kind = |m: u32| {
        if under
            .get(&m)
            .is_some_and(|&u| u.saturating_mul(2) > total(m))
        {
            RootKind::Part
        } else if loops.contains(&m) {
            RootKind::Loop
        } else {
            RootKind::Unit
        }
    };
    let mut order: Vec<(RootKind, u32)> = candidates.keys().map(|&m| (kind(m), m)).collect();
    order.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| candidates[&b.1].0.total_cmp(&candidates[&a.1].0))
            .then_with(|| p.method(a.1).cmp(&p.method(b.1)))
    });
    // Each candidate's delegation run, named after its deepest method.
    let mut covered: Vec<u32> = Vec::new();
    let mut chosen: Vec<(u32, RootKind, Vec<u32>)> = Vec::new();
    for &(k, top) in &order {
        if covered.contains(&top) {
            continue;
        }
        let top_total = total(top);
        let mut run = vec![top];
        let mut at = top;
        loop {
            let next = samples_below(p, at, opts.view)
                .into_iter()
                .filter(|&(c, n)| {
                    candidates.contains_key(&c)
                        && !run.contains(&c)
                        && n as f64 >= opts.hold * top_total as f64
                        && total(c) as f64 * opts.hold <= top_total as f64
                })
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
            match next {
                Some((c, _)) => {
                    run.push(c);
                    at = c;
                }
                None => break,
            }
        }
        covered.extend(&run);
        if chosen.iter().any(|c| c.0 == at) {
            continue;
        }
        run.pop();
        chosen.push((at, k, run));
    }
    chosen.truncate(opts.max);
    let secs = p.span_ns() as f64 / 1e9;
    chosen
        .into_iter()
        .map(|(m, kind, run)| {
            let (share, ws) = candidates[&m].clone();
            let (_, _, time_ns) = p.counts[&m].of(opts.view);
            let activations = activations_under(p, m);
            let info = p.method(m);
            SuggestedRoot {
                method: m,
                pattern: format!("{}::{}", info.class, info.name),
                same_time: run
                    .iter()
                    .map(|&o| {
                        let i = p.method(o);
                        format!("{}::{}", i.class, i.name)
                    })
                    .collect(),
                kind,
                share,
                window_shares: ws,
                activations,
                activations_per_sec: if secs > 0.0 {
                    activations as f64 / secs
                } else {
                    0.0
                },
                time_ns,
                sampled_pct: None,
                exact_pct: None,
                edge_calls_per_sec: None,
                edge_calls_per_cpu_s: None,
            }
        })
        .collect()
}

/// With call-edge bursts (`--edges`): each root the edges name gets its
/// predicted overhead (module docs) and its calls per wall second, the
/// calls per CPU second below it times the CPU time `p` sampled under it
/// a second. A root no edge names keeps none.
pub fn with_edges(roots: &mut [SuggestedRoot], edges: &super::EdgeProfile, p: &StackProfile) {
    let span_ns = p.span_ns();
    for r in roots {
        let cpu_ns = p.counts.get(&r.method).map_or(0, |c| c.of(View::Cpu).2);
        // CPU seconds a second under the root, from the stack samples.
        let cpu_per_s = (span_ns > 0).then(|| cpu_ns as f64 / span_ns as f64);
        let (per_cpu_s, per_s) = match (edges.counted_per_s_under(&r.pattern), cpu_per_s) {
            (Some(per_s), Some(c)) if c > 0.0 => (per_s / c, Some(per_s)),
            (Some(_), _) => continue,
            (None, _) => {
                let Some(per_cpu_s) = edges.per_cpu_s_under(&r.pattern) else {
                    continue;
                };
                (per_cpu_s, cpu_per_s.map(|c| per_cpu_s * c))
            }
        };
        r.edge_calls_per_cpu_s = Some(per_cpu_s);
        r.edge_calls_per_sec = per_s;
        r.sampled_pct = Some(100.0 * per_cpu_s * SAMPLED_PAIR_NS / 1e9);
        r.exact_pct = Some(100.0 * per_cpu_s * super::EdgeProfile::exact_pair(Some(edges)).0 / 1e9);
    }
}

/// CPU seconds a second the application's code used: the CPU time of the
/// samples with a frame outside the JDK (at each thread's outermost such
/// frame), over the run's span; 0 before any sample.
pub fn app_cpu_per_s(p: &StackProfile) -> f64 {
    let span = p.span_ns();
    if span == 0 {
        return 0.0;
    }
    let jdk = |id: u32| p.methods.get(&id).is_none_or(|i| is_jdk_class(&i.class));
    let mut ns = 0u64;
    for t in p.threads.values() {
        let tree = &t.tree;
        let totals = tree.totals(View::Cpu);
        let mut app = vec![false; tree.nodes.len()];
        for (i, n) in tree.nodes.iter().enumerate() {
            let parent_app = n
                .parent
                .filter(|&q| (q as usize) < i)
                .is_some_and(|q| app[q as usize]);
            app[i] = parent_app || !jdk(n.method);
            if app[i] && !parent_app {
                ns = ns.saturating_add(totals[i].1);
            }
        }
    }
    ns as f64 / span as f64
}

/// One visit of a tree node in [`walk`]: entering or leaving it, its
/// method, its subtree's samples in the view, and whether it is the
/// method's outermost occurrence on the path.
struct Visit {
    leaving: bool,
    method: u32,
    samples: u64,
    outermost: bool,
}

/// Depth-first over every node of `tree`, outermost first.
fn walk(tree: &super::Pcct, view: View, mut visit: impl FnMut(&Visit)) {
    let totals = tree.totals(view);
    let mut on_path: HashMap<u32, u32> = HashMap::new();
    let mut stack: Vec<(u32, bool)> = tree.roots.iter().rev().map(|&r| (r, false)).collect();
    while let Some((n, leaving)) = stack.pop() {
        let Some(node) = tree.nodes.get(n as usize) else {
            continue;
        };
        let depth = on_path.entry(node.method).or_default();
        if leaving {
            *depth = depth.saturating_sub(1);
        }
        let v = Visit {
            leaving,
            method: node.method,
            samples: totals[n as usize].0,
            outermost: *depth == 0,
        };
        if !leaving {
            *depth += 1;
        }
        visit(&v);
        if !leaving {
            stack.push((n, true));
            for &ch in node.children.iter().rev().filter(|&&ch| ch > n) {
                stack.push((ch, false));
            }
        }
    }
}

/// The candidates that are loops (module docs): on the stack of at least
/// `loop_presence` of their thread's samples, in threads with at least
/// [`JUDGE_SAMPLES`] samples, for more than half of their samples. Threads
/// with fewer samples that lived through at least half the run (a pool's
/// workers, mostly idle: a few CPU samples each) are judged together: a
/// method on the stack of `loop_presence` of all their samples, at least
/// [`JUDGE_SAMPLES`] of them, is their loop (Jetty's
/// `QueuedThreadPool$Runner::run` was ranked a unit of work, first, and a
/// profile of it recorded no call). Short-lived threads are never pooled:
/// a thread per request (a virtual thread's) has its handler on every
/// sample of its life, and that is a unit of work.
fn loop_frames(
    p: &StackProfile,
    opts: &SuggestOptions,
    candidates: &BTreeMap<u32, (f64, Vec<f64>)>,
) -> std::collections::BTreeSet<u32> {
    let mut in_loops: HashMap<u32, u64> = HashMap::new();
    // Long-lived thin threads: per method, its samples there and all the
    // samples of the threads it was seen in.
    let mut pooled: HashMap<u32, (u64, u64)> = HashMap::new();
    let half_run = p.span_ns() / 2;
    for t in p.threads.values() {
        let n = match opts.view {
            View::Wall => t.wall_samples,
            View::Cpu => t.cpu_samples,
        };
        let thin = n < JUDGE_SAMPLES;
        if n == 0 || (thin && t.lived_ns() < half_run) {
            continue;
        }
        let mut here: HashMap<u32, u64> = HashMap::new();
        walk(&t.tree, opts.view, |v| {
            if !v.leaving && v.outermost && candidates.contains_key(&v.method) {
                *here.entry(v.method).or_default() += v.samples;
            }
        });
        for (m, s) in here {
            if thin {
                let e = pooled.entry(m).or_default();
                e.0 += s;
                e.1 += n;
            } else if s as f64 >= opts.loop_presence * n as f64 {
                *in_loops.entry(m).or_default() += s;
            }
        }
    }
    for (m, (s, n)) in pooled {
        if n >= JUDGE_SAMPLES && s as f64 >= opts.loop_presence * n as f64 {
            *in_loops.entry(m).or_default() += s;
        }
    }
    in_loops
        .into_iter()
        .filter(|&(m, s)| {
            let all = p.counts.get(&m).map_or(0, |c| c.of(opts.view).1);
            s.saturating_mul(2) > all
        })
        .map(|(m, _)| m)
        .collect()
}

/// For each method: its samples (at its outermost occurrence) with
/// another method of `units` above it on the stack.
fn under_any(p: &StackProfile, view: View, units: &[u32]) -> HashMap<u32, u64> {
    let mut out: HashMap<u32, u64> = HashMap::new();
    for t in p.threads.values() {
        let mut above = 0u32;
        walk(&t.tree, view, |v| {
            if !v.outermost {
                return;
            }
            let unit = units.contains(&v.method);
            if v.leaving {
                above -= u32::from(unit);
                return;
            }
            if above > 0 {
                *out.entry(v.method).or_default() += v.samples;
            }
            above += u32::from(unit);
        });
    }
    out
}

/// For every method `m` calls directly: the view's samples in which it
/// is called from `m` (from `m`'s outermost occurrence on the stack, so
/// each sample counts once). One walk of each tree, keeping how often
/// `m` is on the current path.
fn samples_below(p: &StackProfile, m: u32, view: View) -> HashMap<u32, u64> {
    let mut out: HashMap<u32, u64> = HashMap::new();
    for t in p.threads.values() {
        let tree = &t.tree;
        let totals = tree.totals(view);
        let mut depth_of_m = 0u32;
        // (node, leaving)
        let mut stack: Vec<(u32, bool)> = tree.roots.iter().rev().map(|&r| (r, false)).collect();
        while let Some((n, leaving)) = stack.pop() {
            let Some(node) = tree.nodes.get(n as usize) else {
                continue;
            };
            let is_m = node.method == m;
            if leaving {
                depth_of_m -= u32::from(is_m);
                continue;
            }
            if is_m && depth_of_m == 0 {
                for &c in node.children.iter().filter(|&&c| c > n) {
                    if let Some(child) = tree.nodes.get(c as usize)
                        && child.method != m
                    {
                        *out.entry(child.method).or_default() += totals[c as usize].0;
                    }
                }
            }
            depth_of_m += u32::from(is_m);
            stack.push((n, true));
            for &ch in node.children.iter().rev().filter(|&&ch| ch > n) {
                stack.push((ch, false));
            }
        }
    }
    out
}

/// The activations on the non-JDK nodes at and below every outermost
/// occurrence of `m`.
fn activations_under(p: &StackProfile, m: u32) -> u64 {
    let jdk = |id: u32| p.methods.get(&id).is_none_or(|i| is_jdk_class(&i.class));
    let mut sum = 0u64;
    for t in p.threads.values() {
        let tree = &t.tree;
        let mut under = vec![false; tree.nodes.len()];
        for (i, n) in tree.nodes.iter().enumerate() {
            let parent_under = n
                .parent
                .filter(|&q| (q as usize) < i)
                .is_some_and(|q| under[q as usize]);
            under[i] = parent_under || n.method == m;
            if under[i] && !jdk(n.method) {
                sum = sum.saturating_add(n.activations);
            }
        }
    }
    sum
}
