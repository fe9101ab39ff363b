//! Windows timing's times: each root's silent calls' measured time,
//! scaled to all of that root's calls and shared out over its subtree by
//! the stack samples of those calls, in the units of the tree's calls.
//!
//! The tree's calls are per counted root call, and one session scale
//! `S = all root calls / counted root calls` takes them to every root
//! call. The counting windows do not catch each root in that proportion:
//! a root that runs in phases (H2's queries, then its updates) can have 4
//! of its 83,196 calls counted while another has 301 of 79,859. Its time
//! is therefore taken to all of its own calls first, then divided by the
//! session's `S`, so that times and calls share one scale: summed over
//! roots and threads they weigh each root by the time it really took, and
//! `S` takes both to the whole session.
//!
//! ```text
//! time(root)  = sum of its silent latencies * (counted + silent) / silent / S
//! time(node)  = time(root) * samples(node) / samples(root's subtree)
//! ```
//!
//! For a root counted in the session's proportion this is the mean silent
//! call times its counted calls. A root whose proportion is far from the
//! session's is named in a warning: its calls scale to its own calls by
//! another factor than `S`.

use crate::profile::{RootCalls, ThreadProfile, Tree};
use std::collections::BTreeMap;

/// A root's own scale this far from the session's (either way) is named.
const SKEW_WARN: f64 = 4.0;
/// Roots with fewer silent calls are not named (too few to say).
const SKEW_MIN_SILENT: u64 = 20;

/// The root calls of every root method over `threads`.
pub(crate) fn root_calls(threads: &[ThreadProfile]) -> BTreeMap<u32, RootCalls> {
    let mut out: BTreeMap<u32, RootCalls> = BTreeMap::new();
    for t in threads {
        for &r in &t.tree.roots {
            let Some(n) = t.tree.nodes.get(r as usize) else {
                continue;
            };
            let c = RootCalls::of(n);
            let e = out.entry(n.method).or_default();
            e.counted += c.counted;
            e.silent += c.silent;
        }
    }
    out
}

/// The session's figures: every root method's calls summed.
pub(crate) fn session(roots: &BTreeMap<u32, RootCalls>) -> RootCalls {
    roots.values().fold(RootCalls::default(), |a, r| RootCalls {
        counted: a.counted + r.counted,
        silent: a.silent + r.silent,
    })
}

/// Sets every node's `sampled_ticks` under a root with timed silent calls
/// and samples (see the module's formula); a root whose silent calls no
/// sample found keeps the samples' interval weights (none).
pub(crate) fn share_times(threads: &mut [ThreadProfile], session_scale: f64) {
    for t in threads {
        share_tree(&mut t.tree, session_scale);
    }
}

fn share_tree(tree: &mut Tree, session_scale: f64) {
    for r in tree.roots.clone() {
        let Some(root) = tree.nodes.get(r as usize) else {
            continue;
        };
        let Some((silent, sum)) = root.latency.as_ref().map(|l| (l.count, l.sum)) else {
            continue;
        };
        let counted = root.calls;
        let sub = subtree(tree, r);
        let samples: u64 = sub.iter().map(|&n| tree.nodes[n as usize].samples).sum();
        if samples == 0 || silent == 0 {
            continue;
        }
        let all = sum as f64 * (counted + silent) as f64 / silent as f64;
        let basis = all / session_scale.max(1.0);
        for &n in &sub {
            let node = &mut tree.nodes[n as usize];
            node.sampled_ticks = (basis * node.samples as f64 / samples as f64).round() as u64;
        }
    }
}

/// `r` and every node below it.
fn subtree(tree: &Tree, r: u32) -> Vec<u32> {
    let mut sub = vec![r];
    let mut i = 0;
    while i < sub.len() {
        if let Some(n) = tree.nodes.get(sub[i] as usize) {
            sub.extend(
                n.children
                    .iter()
                    .copied()
                    .filter(|&c| (c as usize) < tree.nodes.len()),
            );
        }
        i += 1;
    }
    sub
}

/// One line for each root method whose own scale is more than
/// [`SKEW_WARN`] times from the session's (or that has silent calls and
/// no counted one while others were counted), named by `name`.
pub(crate) fn skew_warnings(
    roots: &BTreeMap<u32, RootCalls>,
    session: RootCalls,
    name: impl Fn(u32) -> String,
) -> Vec<String> {
    if session.counted == 0 {
        return Vec::new();
    }
    let s = session.scale();
    let mut out = Vec::new();
    for (&m, r) in roots {
        if r.silent < SKEW_MIN_SILENT {
            continue;
        }
        let all = r.counted + r.silent;
        if r.counted == 0 {
            out.push(format!(
                "windows timing: no call of {} was counted ({all} silent): its time is in the \
                 report, on paths without calls; the counting windows missed it (a root that \
                 runs in phases: longer counting windows catch it)",
                name(m)
            ));
            continue;
        }
        let own = r.scale();
        if own > s * SKEW_WARN || own * SKEW_WARN < s {
            out.push(format!(
                "windows timing: {} had {} of its {all} calls counted (the session's roots 1 in \
                 {s:.0}): its calls scale to all of its own by x{own:.0}, not the session's x{s:.1}; \
                 its times are weighed by all of its calls (a root that runs in phases: longer \
                 counting windows catch it more evenly)",
                name(m),
                r.counted,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Latency, Node};

    /// A root method, its counted calls, its silent calls' latencies and
    /// its children (method, samples).
    type RootSpec<'a> = (u32, u64, &'a [u64], &'a [(u32, u64)]);

    fn thread(index: u32, roots: &[RootSpec<'_>]) -> ThreadProfile {
        let mut tree = Tree::default();
        for &(m, calls, lat, kids) in roots {
            let mut latency = Latency::default();
            for &v in lat {
                latency.record(v);
            }
            let r = tree.push(
                None,
                Node {
                    method: m,
                    calls,
                    latency: (!lat.is_empty()).then_some(Box::new(latency)),
                    ..Node::default()
                },
            );
            for &(k, samples) in kids {
                tree.push(
                    Some(r),
                    Node {
                        method: k,
                        calls,
                        samples,
                        ..Node::default()
                    },
                );
            }
        }
        ThreadProfile {
            index,
            tree,
            ..ThreadProfile::default()
        }
    }

    fn ticks(t: &ThreadProfile, m: u32) -> u64 {
        t.tree
            .nodes
            .iter()
            .find(|n| n.method == m)
            .map(|n| n.sampled_ticks)
            .expect("node")
    }

    /// Two roots counted in different proportions (1 of 3 calls, and 1
    /// of 11), both 100 ticks a silent call: summed, each weighs what its
    /// calls took (300 and 1,100 ticks), divided by the session's scale
    /// (15 / 2 = 7.5); a thread with no counted call adds its silent time
    /// at that scale too.
    #[test]
    fn each_root_is_timed_over_its_own_calls_at_the_sessions_scale() {
        let mut threads = vec![
            thread(
                1,
                &[
                    (1, 1, &[100, 100], &[(11, 4)]),
                    (2, 1, &[100; 10], &[(21, 1), (22, 3)]),
                ],
            ),
            thread(2, &[(1, 0, &[70], &[(11, 2)])]),
        ];
        let roots = root_calls(&threads);
        assert_eq!(
            roots[&1],
            RootCalls {
                counted: 1,
                silent: 3
            }
        );
        assert_eq!(
            roots[&2],
            RootCalls {
                counted: 1,
                silent: 10
            }
        );
        let s = session(&roots);
        assert_eq!((s.counted, s.silent, s.scale()), (2, 13, 7.5));
        share_times(&mut threads, s.scale());
        // thread 1, root 1: 200 ticks over 2 silent calls, 3 calls: 300 / 7.5
        assert_eq!(ticks(&threads[0], 11), 40);
        // root 2: 1,000 over 10, 11 calls: 1,100 / 7.5 = 146.7, by samples 1:3
        assert_eq!((ticks(&threads[0], 21), ticks(&threads[0], 22)), (37, 110));
        // thread 2: 70 ticks, its only call: 70 / 7.5
        assert_eq!(ticks(&threads[1], 11), 9);
        // Their sum times the session's scale is every call's time.
        let sum: u64 = [40u64, 37, 110, 9].iter().sum();
        assert!((sum as f64 * 7.5 - 1470.0).abs() < 10.0, "{sum}");
    }

    /// A root counted in the session's proportion keeps the mean silent
    /// call times its counted calls.
    #[test]
    fn a_root_in_the_sessions_proportion_is_its_mean_call_per_counted_call() {
        let mut threads = vec![thread(1, &[(1, 2, &[300, 500, 400, 400], &[(11, 1)])])];
        let s = session(&root_calls(&threads));
        assert_eq!(s.scale(), 3.0);
        share_times(&mut threads, s.scale());
        assert_eq!(ticks(&threads[0], 11), 800);
    }

    #[test]
    fn roots_far_from_the_sessions_proportion_are_named() {
        let mut roots = BTreeMap::new();
        roots.insert(
            1,
            RootCalls {
                counted: 4,
                silent: 83_196,
            },
        );
        roots.insert(
            2,
            RootCalls {
                counted: 301,
                silent: 79_859,
            },
        );
        roots.insert(
            3,
            RootCalls {
                counted: 0,
                silent: 500,
            },
        );
        roots.insert(
            4,
            RootCalls {
                counted: 0,
                silent: 5,
            },
        );
        let s = session(&roots);
        let w = skew_warnings(&roots, s, |m| format!("m{m}"));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].contains("m1 had 4 of its 83200 calls counted"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("by x20800, not the session's x"), "{}", w[0]);
        assert!(
            w[1].contains("no call of m3 was counted (500 silent)"),
            "{}",
            w[1]
        );
        // Nothing counted anywhere: nothing to compare with.
        roots.retain(|&m, _| m > 2);
        assert!(skew_warnings(&roots, session(&roots), |m| format!("m{m}")).is_empty());
    }
}
