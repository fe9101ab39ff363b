//! Call-edge frequencies from the agent's bursts (`sprig sample --edges`;
//! Arnold and Grove's timer-triggered bursts of sampling at method entry).
//!
//! The bursts give each edge's share of the sampled entries. The entries
//! a second come from the counting windows between the bursts, where the
//! probes count every entry into the probed classes in Java
//! ([`EdgeProfile::counted_per_s`]): an edge's calls a second are its
//! share times that rate, and a root's calls per CPU second are the
//! share at and below it times that rate over the CPU time sampled under
//! it. What follows is the estimate from the bursts' own intervals, used
//! where the probe class cannot count (one an older sprig defined in the
//! JVM); on call-dense code it ran 0.5 to 100 times low.
//!
//! Every burst samples the next method entries into the probed classes
//! after its timer fired, each one edge (caller, callee). A thread's
//! sample after its first in the same burst closes an interval: the CPU
//! time the thread used since its previous sample, the sampling's own
//! time left out. Entries per CPU second are the intervals over their CPU
//! time; wall time would hold the threads' waits for a core, and a burst
//! opens while its threads are off the CPU as often as not (on a loaded
//! host the wall-time rate came out hundreds of times too low). The
//! calls per wall second of an edge are its share of the sampled entries,
//! times the entries per CPU second, times the CPU seconds a second that
//! the application's code used (`app_cpu_per_s`, from the stack samples:
//! the CPU time of the samples with a frame outside the JDK):
//!
//! ```text
//! calls_per_s_est(edge) = samples(edge) / samples * intervals / interval_cpu_s * app_cpu_per_s
//! ```
//!
//! Below a root the entries per CPU second are those of the intervals the
//! edges at and below it closed ([`EdgeProfile::per_cpu_s_under`]): the
//! CPU time before an entry below the root is, but for the first entry of
//! each call of the root, time spent below it. The estimate is of the
//! calls into the probed classes while the bursts ran; a method called
//! only in moments the bursts never fall into is missed, as with any
//! sampling.
//!
//! Every interval also holds the bursts' own path between two sampled
//! entries (the return into Java, an exit probe's and an entry probe's
//! calls into the agent: about 0.4 µs here, more than the code between
//! the calls of call-dense methods). The agent measures it when the
//! bursts begin, on an empty instrumented method (`path_ns`), and it is
//! taken out of the intervals' CPU time before any rate is formed
//! ([`EdgeProfile::app_cpu_ns`]), down to at most a twentieth of it (so
//! a path measured long cannot make a rate unbounded). The agent sends
//! each edge's intervals with every one above twice their median counted
//! at that bound (`probe::edges::clip`): the first entries of a burst find
//! the probes' slow path and the code after it cold.
//!
//! Methods are named `pkg.Class::method` (overloads together), as
//! `--root` takes them, so edges compare with `sprig profile`'s exact
//! parent-child counts ([`exact_edges`]) by Arnold and Grove's overlap
//! ([`edge_overlap`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sprig_wire::control::{EdgeMethod, EdgeSamples};

use crate::profile::Profile;

/// `pkg.Class::method`.
pub fn edge_name(m: &EdgeMethod) -> String {
    format!("{}::{}", m.class, m.name)
}

/// The call edges sampled over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdgeProfile {
    /// (caller, callee) -> sampled entries.
    pub edges: BTreeMap<(String, String), u64>,
    /// (caller, callee) -> the intervals its entries closed, and their CPU
    /// time in ns (module docs).
    pub spans: BTreeMap<(String, String), (u64, u64)>,
    /// Every interval of the bursts, and their CPU time in ns.
    pub intervals: u64,
    pub interval_cpu_ns: u64,
    pub bursts: u64,
    /// Entries sampled (named or not).
    pub samples: u64,
    pub effective_ns: u64,
    pub cost_ns: u64,
    pub dropped: u64,
    /// Classes and methods that held the dormant probes.
    pub classes: u32,
    pub methods: u32,
    /// Whether the agent said it probed them (`EdgeProbed`).
    pub probed: bool,
    /// The bursts' own path between two sampled entries of a thread, ns of
    /// CPU time (module docs); 0 when the agent could not measure it.
    pub path_ns: u64,
    /// Entries counted in Java in the counting windows, and the windows'
    /// wall time in ns (module docs); 0 where the probe class cannot count.
    pub counted: u64,
    pub counted_ns: u64,
    /// The exact-timing probe pair measured in the target as the session
    /// began (`sprig calibrate`'s figure: inner plus outer time), ns;
    /// `None` when it was not, and the prediction takes the benchmark's.
    pub exact_pair_ns: Option<f64>,
}

/// One edge of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeRow {
    pub caller: String,
    pub callee: String,
    pub samples: u64,
    /// Calls per wall second (module docs); 0 when the bursts closed no
    /// interval.
    pub calls_per_s_est: f64,
}

impl EdgeProfile {
    /// Adds one `EdgeSamples` message.
    pub fn add(&mut self, m: &EdgeSamples) {
        self.bursts += u64::from(m.bursts);
        self.samples += m.samples;
        self.effective_ns += m.effective_ns;
        self.cost_ns += m.cost_ns;
        self.dropped += m.dropped;
        self.intervals += m.intervals;
        self.interval_cpu_ns += m.interval_cpu_ns;
        if m.path_ns > 0 {
            self.path_ns = m.path_ns;
        }
        self.counted += m.counted;
        self.counted_ns += m.counted_ns;
        for e in &m.edges {
            let key = (edge_name(&e.caller), edge_name(&e.callee));
            let span = self.spans.entry(key.clone()).or_default();
            span.0 += u64::from(e.intervals);
            span.1 += e.interval_cpu_ns;
            *self.edges.entry(key).or_default() += u64::from(e.samples);
        }
    }

    /// Sampled entries that name an edge.
    pub fn named(&self) -> u64 {
        self.edges.values().sum()
    }

    /// Method entries into the probed classes per wall second, as the
    /// counting windows counted them; `None` before any window closed (or
    /// where the probe class cannot count).
    pub fn counted_per_s(&self) -> Option<f64> {
        (self.counted_ns > 0).then(|| self.counted as f64 * 1e9 / self.counted_ns as f64)
    }

    /// Method entries into the probed classes per CPU second of the
    /// threads that made them; `None` before any interval closed.
    pub fn per_cpu_s(&self) -> Option<f64> {
        rate(
            self.intervals,
            self.app_cpu_ns(self.intervals, self.interval_cpu_ns),
        )
    }

    /// The CPU time of `n` intervals that held `cpu_ns`, less the bursts'
    /// own path in each (module docs): the application's own time between
    /// the entries, never below a twentieth of `cpu_ns`.
    pub fn app_cpu_ns(&self, n: u64, cpu_ns: u64) -> u64 {
        cpu_ns
            .saturating_sub(n.saturating_mul(self.path_ns))
            .max(cpu_ns / 20)
    }

    /// The edges, most sampled first (then by name), with their calls per
    /// wall second: their share of the sampled entries times the entries
    /// counted a second, or without counting windows, times the entries
    /// per CPU second of the intervals when the application's code used
    /// `app_cpu_per_s` CPU seconds a second (module docs).
    pub fn rows(&self, app_cpu_per_s: f64) -> Vec<EdgeRow> {
        let k = match (self.counted_per_s(), self.per_cpu_s()) {
            _ if self.samples == 0 => 0.0,
            (Some(r), _) => r / self.samples as f64,
            (None, Some(r)) => r * app_cpu_per_s / self.samples as f64,
            (None, None) => 0.0,
        };
        let mut rows: Vec<EdgeRow> = self
            .edges
            .iter()
            .map(|((a, b), &n)| EdgeRow {
                caller: a.clone(),
                callee: b.clone(),
                samples: n,
                calls_per_s_est: n as f64 * k,
            })
            .collect();
        rows.sort_by(|x, y| {
            y.samples
                .cmp(&x.samples)
                .then_with(|| x.caller.cmp(&y.caller))
                .then_with(|| x.callee.cmp(&y.callee))
        });
        rows
    }

    /// Each edge's share of the named samples.
    pub fn shares(&self) -> HashMap<(String, String), f64> {
        shares_of(&self.edges)
    }

    /// Calls at and below `root` (`pkg.Class::method`) per CPU second
    /// spent below it: the calls into `root` and along every edge out of a
    /// method the edges reach from it (a method reached also from
    /// elsewhere counts whole), over the CPU time of the intervals those
    /// entries closed (module docs). `None` when no edge names `root` or
    /// its edges closed no interval.
    pub fn per_cpu_s_under(&self, root: &str) -> Option<f64> {
        let reach = self.reach(root)?;
        let (n, cpu) = self
            .spans
            .iter()
            .filter(|((a, b), _)| b == root || reach.contains(a.as_str()))
            .fold((0u64, 0u64), |(n, c), (_, &(i, ns))| {
                (n + i, c.saturating_add(ns))
            });
        rate(n, self.app_cpu_ns(n, cpu))
    }

    /// The exact-timing pair the prediction takes, and where it comes
    /// from: the calibration's, or the benchmark's
    /// [`crate::profile::EXACT_PAIR_NS`] (also for a sample without
    /// edges: `None`).
    pub fn exact_pair(edges: Option<&Self>) -> (f64, &'static str) {
        match edges.and_then(|e| e.exact_pair_ns) {
            Some(ns) if ns.is_finite() && ns > 0.0 => (ns, "calibration"),
            _ => (crate::profile::EXACT_PAIR_NS, "benchmark"),
        }
    }

    /// Calls at and below `root` per wall second, from the counting
    /// windows: the entries counted a second times the share of the
    /// sampled entries that went along the edge into `root` or out of a
    /// method the edges reach from it (as [`Self::per_cpu_s_under`]).
    /// `None` without counting windows or when no edge names `root`.
    pub fn counted_per_s_under(&self, root: &str) -> Option<f64> {
        let per_s = self.counted_per_s()?;
        let reach = self.reach(root)?;
        if self.samples == 0 {
            return None;
        }
        let n: u64 = self
            .edges
            .iter()
            .filter(|((a, b), _)| b == root || reach.contains(a.as_str()))
            .map(|(_, &n)| n)
            .sum();
        Some(per_s * n as f64 / self.samples as f64)
    }

    /// `root` and the methods the edges reach from it; `None` when no edge
    /// names `root`.
    fn reach<'a>(&'a self, root: &'a str) -> Option<BTreeSet<&'a str>> {
        if !self.edges.keys().any(|(a, b)| a == root || b == root) {
            return None;
        }
        let mut reach: BTreeSet<&str> = BTreeSet::new();
        reach.insert(root);
        let mut frontier = vec![root];
        while let Some(m) = frontier.pop() {
            for (a, b) in self.edges.keys() {
                if a == m && reach.insert(b.as_str()) {
                    frontier.push(b.as_str());
                }
            }
        }
        Some(reach)
    }
}

/// `n` per second of `ns`; `None` for none of either.
fn rate(n: u64, ns: u64) -> Option<f64> {
    (n > 0 && ns > 0).then(|| n as f64 * 1e9 / ns as f64)
}

fn shares_of(edges: &BTreeMap<(String, String), u64>) -> HashMap<(String, String), f64> {
    let all: u64 = edges.values().sum();
    if all == 0 {
        return HashMap::new();
    }
    edges
        .iter()
        .map(|(k, &n)| (k.clone(), n as f64 / all as f64))
        .collect()
}

/// The exact call edges of a profile (`sprig profile`'s calling context
/// trees): every parent-child pair of nodes, the child's calls, summed by
/// (caller, callee) method name, over every thread. A root's own calls
/// have no caller in the tree and are left out.
pub fn exact_edges(p: &Profile) -> BTreeMap<(String, String), u64> {
    let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
    let name = |id: u32| {
        let m = p.method(id);
        format!("{}::{}", m.class, m.name)
    };
    for t in &p.threads {
        for n in &t.tree.nodes {
            if n.is_wait() {
                continue;
            }
            for &c in &n.children {
                let Some(child) = t.tree.nodes.get(c as usize) else {
                    continue;
                };
                if child.calls == 0 || child.is_wait() {
                    continue;
                }
                *out.entry((name(n.method), name(child.method))).or_default() += child.calls;
            }
        }
    }
    out
}

/// Arnold and Grove's overlap of two edge profiles: Σ over edges of
/// min(share in `a`, share in `b`), 0..1.
pub fn edge_overlap(
    a: &BTreeMap<(String, String), u64>,
    b: &BTreeMap<(String, String), u64>,
) -> f64 {
    let (sa, sb) = (shares_of(a), shares_of(b));
    sa.iter()
        .map(|(k, &x)| sb.get(k).map_or(0.0, |&y| x.min(y)))
        .sum()
}

/// The edges of `a` between two methods that `within` has an edge into or
/// out of: a whole-JVM edge profile (the bursts', the activations')
/// narrowed to the methods an exact profile of one root reached, so that
/// the overlap with it weighs the root's subgraph only (the edges above
/// the root and beside it are left out of both).
pub fn edges_within(
    a: &BTreeMap<(String, String), u64>,
    within: &BTreeMap<(String, String), u64>,
) -> BTreeMap<(String, String), u64> {
    let methods: BTreeSet<&str> = within
        .keys()
        .flat_map(|(x, y)| [x.as_str(), y.as_str()])
        .collect();
    a.iter()
        .filter(|((x, y), _)| methods.contains(x.as_str()) && methods.contains(y.as_str()))
        .map(|(k, &n)| (k.clone(), n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_wire::control::EdgeCount;

    fn m(name: &str) -> EdgeMethod {
        EdgeMethod {
            class: "p.C".into(),
            name: name.into(),
            descriptor: "()V".into(),
        }
    }

    fn e(a: &str, b: &str, samples: u32, intervals: u32, interval_cpu_ns: u64) -> EdgeCount {
        EdgeCount {
            caller: m(a),
            callee: m(b),
            samples,
            intervals,
            interval_cpu_ns,
        }
    }

    #[test]
    fn rates_rest_on_the_intervals_cpu_time_and_the_reach_of_a_root() {
        let mut p = EdgeProfile::default();
        // Two messages: 40 sampled entries, 36 intervals over 36 µs of CPU
        // time (1 µs each), whatever wall time the bursts took.
        p.add(&EdgeSamples {
            bursts: 1,
            samples: 20,
            effective_ns: 9_000_000,
            cost_ns: 5,
            dropped: 0,
            edges: vec![e("r", "a", 5, 4, 4_000), e("a", "b", 15, 14, 14_000)],
            intervals: 18,
            interval_cpu_ns: 18_000,
            path_ns: 0,
            ..EdgeSamples::default()
        });
        p.add(&EdgeSamples {
            bursts: 1,
            samples: 20,
            effective_ns: 1_000,
            cost_ns: 5,
            dropped: 0,
            edges: vec![
                e("r", "a", 5, 5, 5_000),
                e("a", "b", 10, 9, 4_500),
                e("x", "y", 5, 4, 8_500),
            ],
            intervals: 18,
            interval_cpu_ns: 18_000,
            path_ns: 0,
            ..EdgeSamples::default()
        });
        assert_eq!(p.named(), 40);
        assert_eq!(p.per_cpu_s(), Some(1e6));
        // Half a CPU second a second: 500,000 entries a wall second, of
        // which a -> b holds 25 of 40.
        let rows = p.rows(0.5);
        assert_eq!(
            (rows[0].caller.as_str(), rows[0].callee.as_str()),
            ("p.C::a", "p.C::b")
        );
        assert!((rows[0].calls_per_s_est - 312_500.0).abs() < 1e-6);
        // Below a: a's 9 intervals (9 µs) and its 23 calls of b (18.5 µs):
        // 32 over 27.5 µs.
        let under_a = p.per_cpu_s_under("p.C::a").unwrap();
        assert!((under_a - 32.0 / 27.5e-6).abs() < 1e-3, "{under_a}");
        // Below r: r's callers' edges into r (none) and everything r
        // reaches; x -> y, slower, is not below it.
        assert!((p.per_cpu_s_under("p.C::r").unwrap() - under_a).abs() < 1e-3);
        assert!((p.per_cpu_s_under("p.C::x").unwrap() - 4.0 / 8.5e-6).abs() < 1e-3);
        assert_eq!(p.per_cpu_s_under("p.C::z"), None);
        // The bursts' own path, 250 ns an interval, out of every
        // interval: a's 32 intervals hold 27.5 - 8 = 19.5 µs of its own.
        let mut q = p.clone();
        q.add(&EdgeSamples {
            path_ns: 250,
            ..EdgeSamples::default()
        });
        assert_eq!(q.path_ns, 250);
        assert!((q.per_cpu_s().unwrap() - 36.0 / 27e-6).abs() < 1e-3);
        let under_a = q.per_cpu_s_under("p.C::a").unwrap();
        assert!((under_a - 32.0 / 19.5e-6).abs() < 1e-3, "{under_a}");
        // A path as long as the intervals: a twentieth of their time left.
        q.path_ns = 5_000;
        assert!((q.per_cpu_s().unwrap() - 36.0 / 1.8e-6).abs() < 1e-3);
        // No interval, no rate.
        assert_eq!(EdgeProfile::default().per_cpu_s(), None);
        assert_eq!(EdgeProfile::default().rows(1.0), vec![]);
        let mut exact = BTreeMap::new();
        exact.insert(("p.C::a".to_owned(), "p.C::b".to_owned()), 50);
        exact.insert(("p.C::r".to_owned(), "p.C::a".to_owned()), 20);
        // Shares 25/40, 10/40, 5/40 against 50/70, 20/70.
        let o = edge_overlap(&p.edges, &exact);
        assert!((o - (25.0 / 40.0 + 10.0 / 40.0)).abs() < 1e-9, "{o}");
    }

    #[test]
    fn counting_windows_give_the_rates_when_they_ran() {
        let mut p = EdgeProfile::default();
        // 40 sampled entries (2 not named), and 2,000,000 entries counted
        // in 0.5 s of windows: 4,000,000 a second, whatever the intervals
        // say (their CPU time, a rate of 1e6 a CPU second, is not used).
        p.add(&EdgeSamples {
            bursts: 2,
            samples: 40,
            dropped: 2,
            edges: vec![
                e("r", "a", 10, 9, 9_000),
                e("a", "b", 20, 19, 19_000),
                e("x", "y", 8, 8, 8_000),
            ],
            intervals: 36,
            interval_cpu_ns: 36_000,
            counted: 1_500_000,
            counted_ns: 300_000_000,
            ..EdgeSamples::default()
        });
        p.add(&EdgeSamples {
            counted: 500_000,
            counted_ns: 200_000_000,
            ..EdgeSamples::default()
        });
        assert_eq!(p.counted_per_s(), Some(4e6));
        // An edge's share of every sampled entry (named or not).
        let rows = p.rows(0.5);
        assert_eq!(rows[0].callee, "p.C::b");
        assert!((rows[0].calls_per_s_est - 2e6).abs() < 1e-6);
        assert!((rows[1].calls_per_s_est - 1e6).abs() < 1e-6);
        // At and below r: r -> a and a -> b, 30 of 40.
        let under_r = p.counted_per_s_under("p.C::r").unwrap();
        assert!((under_r - 3e6).abs() < 1e-6, "{under_r}");
        let under_a = p.counted_per_s_under("p.C::a").unwrap();
        assert!((under_a - 3e6).abs() < 1e-6, "{under_a}");
        assert!((p.counted_per_s_under("p.C::x").unwrap() - 0.8e6).abs() < 1e-6);
        assert_eq!(p.counted_per_s_under("p.C::z"), None);
        // Without windows: none, and the intervals give the rows.
        let mut q = p.clone();
        (q.counted, q.counted_ns) = (0, 0);
        assert_eq!(q.counted_per_s(), None);
        assert_eq!(q.counted_per_s_under("p.C::r"), None);
        assert!((q.rows(0.5)[0].calls_per_s_est - 1e6 * 0.5 * 20.0 / 40.0).abs() < 1e-6);
        // The exact pair: the calibration's when it came, else the
        // benchmark's.
        assert_eq!(
            EdgeProfile::exact_pair(Some(&p)),
            (crate::profile::EXACT_PAIR_NS, "benchmark")
        );
        assert_eq!(
            EdgeProfile::exact_pair(None),
            (crate::profile::EXACT_PAIR_NS, "benchmark")
        );
        p.exact_pair_ns = Some(31.5);
        assert_eq!(EdgeProfile::exact_pair(Some(&p)), (31.5, "calibration"));
        p.exact_pair_ns = Some(f64::NAN);
        assert_eq!(EdgeProfile::exact_pair(Some(&p)).1, "benchmark");
    }

    #[test]
    fn edges_within_keep_those_between_the_exact_profiles_methods() {
        let edges = |v: &[(&str, &str, u64)]| -> BTreeMap<(String, String), u64> {
            v.iter()
                .map(|&(a, b, n)| ((a.to_owned(), b.to_owned()), n))
                .collect()
        };
        // The root r's exact subgraph: r -> a -> b.
        let exact = edges(&[("r", "a", 10), ("a", "b", 30)]);
        // The whole JVM's: the caller of r above it, x beside it, and an
        // edge out of a to a method the root never reached.
        let sampled = edges(&[
            ("loop", "r", 5),
            ("r", "a", 10),
            ("a", "b", 30),
            ("a", "z", 20),
            ("x", "y", 35),
        ]);
        let within = edges_within(&sampled, &exact);
        assert_eq!(within, edges(&[("r", "a", 10), ("a", "b", 30)]));
        assert!((edge_overlap(&within, &exact) - 1.0).abs() < 1e-9);
        assert!((edge_overlap(&sampled, &exact) - 0.4).abs() < 1e-9);
        assert!(edges_within(&sampled, &BTreeMap::new()).is_empty());
    }
}
