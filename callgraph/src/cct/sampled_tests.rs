//! Sampled timing and root latency on synthetic streams: samples matched
//! against runs of a thread's stream, by hand.

use super::*;
use crate::profile::Times;
use crate::profile::{Calibration, Node, Profile, Timing, Tree};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::Run;

const NS: u64 = 1_000_000_000;
const R: u32 = 1;
const A: u32 = 2;
const B: u32 = 3;

fn ev(kind: EventKind, id: u32, ts: u64) -> Event {
    Event::new(kind, id, ts)
}
fn root(ts: u64) -> Event {
    ev(EventKind::RootEntry, R, ts)
}
fn root_exit(ts: u64) -> Event {
    ev(EventKind::RootExit, R, ts)
}
/// Inner events of sampled mode carry no time.
fn enter(id: u32) -> Event {
    ev(EventKind::MethodEntry, id, 0)
}
fn exit(id: u32) -> Event {
    ev(EventKind::MethodExit, id, 0)
}

fn run(thread: u32, claim: u64, start: u32) -> Run {
    Run {
        thread,
        claim,
        start,
    }
}

fn sample(thread: u32, claim: u64, index: u32, weight: u64) -> PositionSample {
    PositionSample {
        thread,
        claim,
        index,
        ts: 0,
        weight,
    }
}

fn sampled() -> CctBuilder {
    let mut b = CctBuilder::new(NS);
    b.set_timing(Timing::Sampled);
    b
}

/// Index in the stream:  0 R(100) 1 A 2 B 3 /B 4 /A 5 /R(1100) 6
/// Open after i events: 0 -, 1 R, 2 A, 3 B, 4 A, 5 R, 6 -
fn call() -> Vec<Event> {
    vec![
        root(100),
        enter(A),
        enter(B),
        exit(B),
        exit(A),
        root_exit(1100),
    ]
}

fn find<'a>(t: &'a Tree, path: &[u32]) -> (usize, &'a Node) {
    let mut level: &[u32] = &t.roots;
    let mut found = None;
    for &m in path {
        let id = *level
            .iter()
            .find(|&&c| t.nodes[c as usize].method == m)
            .unwrap_or_else(|| panic!("no node for {m} on path {path:?}"));
        found = Some(id as usize);
        level = &t.nodes[id as usize].children;
    }
    let i = found.expect("empty path");
    (i, &t.nodes[i])
}

/// (calls, self samples, self ns, total ns) of a node.
fn node(p: &Profile, thread: usize, path: &[u32]) -> (u64, u64, u64, u64) {
    let t = &p.threads[thread].tree;
    let (i, n) = find(t, path);
    let times: Times = p.times(t)[i];
    (n.calls, n.samples, times.self_ns, times.total_ns)
}

#[test]
fn samples_before_inside_and_after_a_root_call() {
    let mut b = sampled();
    // weight 10 * (index + 1), given before the events
    let s: Vec<PositionSample> = (0..=6)
        .map(|i| sample(0, 5, i, 10 * (u64::from(i) + 1)))
        .collect();
    b.add_samples(&s);
    b.process_run(run(0, 5, 0), &call());
    let p = b.finish();
    assert_eq!(p.timing, Timing::Sampled);
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // R: indices 1 and 5; A: 2 and 4; B: 3; outside: 0 and 6
    assert_eq!(node(&p, 0, &[R, A, B]), (1, 1, 40, 40));
    assert_eq!(node(&p, 0, &[R, A]), (1, 2, 30 + 50, 120));
    assert_eq!(node(&p, 0, &[R]), (1, 2, 20 + 60, 200));
    let c = p.threads[0].samples;
    assert_eq!((c.credited, c.outside, c.outside_ticks), (5, 2, 10 + 70));
    assert_eq!((c.late, c.unmatched), (0, 0));
    // Inner nodes have no measured time; the root keeps its timestamps.
    let t = &p.threads[0].tree;
    assert_eq!(find(t, &[R]).1.total_ticks, 1000);
    assert_eq!(find(t, &[R, A]).1.total_ticks, 0);
    assert_eq!(find(t, &[R, A, B]).1.total_ticks, 0);
    let times = p.times(t);
    assert_eq!(times[find(t, &[R]).0].raw_total_ns, 1000);
    assert_eq!(times[find(t, &[R]).0].total_samples, 5);
}

#[test]
fn shape_and_calls_equal_exact_mode() {
    let timed = vec![
        ev(EventKind::RootEntry, R, 100),
        ev(EventKind::MethodEntry, A, 200),
        ev(EventKind::MethodEntry, B, 300),
        ev(EventKind::MethodExit, B, 400),
        ev(EventKind::MethodExit, A, 500),
        ev(EventKind::MethodEntry, A, 600),
        ev(EventKind::MethodExit, A, 700),
        ev(EventKind::RootExit, R, 1100),
    ];
    let untimed: Vec<Event> = timed
        .iter()
        .map(|e| match e.kind() {
            Some(EventKind::MethodEntry | EventKind::MethodExit) => Event { ts: 0, ..*e },
            _ => *e,
        })
        .collect();
    let mut e = CctBuilder::new(NS);
    e.process(0, &timed);
    let mut s = sampled();
    s.process_run(run(0, 1, 0), &untimed);
    let (e, s) = (e.finish(), s.finish());
    let shape = |p: &Profile| -> Vec<(u32, u64, u64, Vec<u32>)> {
        p.threads[0]
            .tree
            .nodes
            .iter()
            .map(|n| (n.method, n.calls, n.incomplete, n.children.clone()))
            .collect()
    };
    assert_eq!(shape(&e), shape(&s));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

#[test]
fn a_sample_ahead_of_its_events_waits_for_them() {
    let mut b = sampled();
    let events = call();
    b.process_run(run(0, 5, 0), &events[..3]);
    // The stream stands after 3 events (in B): a sample there is credited
    // at once (even with others waiting), one further on waits.
    b.add_samples(&[sample(0, 5, 5, 11), sample(0, 5, 3, 7)]);
    let live = b.snapshot();
    assert_eq!(node(&live, 0, &[R, A, B]).1, 1);
    assert_eq!(node(&live, 0, &[R]).1, 0);
    b.process_run(run(0, 5, 3), &events[3..]);
    let p = b.finish();
    assert_eq!(node(&p, 0, &[R, A, B]), (1, 1, 7, 7));
    assert_eq!(node(&p, 0, &[R]), (1, 1, 11, 18));
}

#[test]
fn samples_across_segments() {
    // The call spans claim 5 (4 events) and claim 9 (2 events).
    let events = call();
    let mut b = sampled();
    b.add_samples(&[
        // in any order
        sample(0, 9, 2, 1000), // after the root exit: outside
        sample(0, 9, 1, 100),  // after /A: in R
        sample(0, 5, 4, 1),    // end of claim 5, after /B: in A
        sample(0, 9, 0, 10),   // start of claim 9: still in A
        // a claim of this thread whose events never come: credited where
        // the stream stands when a later claim begins (end of claim 5)
        sample(0, 7, 3, 10_000),
    ]);
    b.process_run(run(0, 5, 0), &events[..4]);
    b.process_run(run(0, 9, 0), &events[4..]);
    let p = b.finish();
    assert_eq!(node(&p, 0, &[R, A]), (1, 3, 10_011, 10_011));
    assert_eq!(node(&p, 0, &[R]), (1, 1, 100, 10_111));
    let c = p.threads[0].samples;
    assert_eq!((c.credited, c.outside, c.outside_ticks), (4, 1, 1000));
}

#[test]
fn late_and_unmatched_samples_are_dropped_and_counted() {
    let mut b = sampled();
    b.process_run(run(0, 5, 0), &call());
    // behind the stream: late; exactly where it stands: outside now
    b.add_samples(&[sample(0, 5, 2, 5), sample(0, 5, 6, 3)]);
    // past the end of what ever comes
    b.add_samples(&[sample(0, 5, 40, 9), sample(0, 6, 0, 9)]);
    let p = b.finish();
    let c = p.threads[0].samples;
    assert_eq!(
        (c.credited, c.outside, c.late, c.unmatched),
        (0, 1, 1, 2),
        "{c:?}"
    );
    assert_eq!(node(&p, 0, &[R]).1, 0);
    let w = p.warnings.join("\n");
    assert!(w.contains("thread 0: 1 samples came after"), "{w}");
    assert!(
        w.contains("thread 0: 2 samples pointed past the end"),
        "{w}"
    );
}

#[test]
fn two_threads_each_get_their_own_samples() {
    let mut b = sampled();
    b.add_samples(&[
        sample(1, 3, 3, 100), // thread 1 in B
        sample(0, 4, 2, 1),   // thread 0 in A
        sample(1, 3, 5, 200), // thread 1 in R
    ]);
    b.process_run(run(1, 3, 0), &call());
    b.process_run(run(0, 4, 0), &call());
    let p = b.finish();
    assert_eq!(p.threads.len(), 2);
    assert_eq!(node(&p, 0, &[R, A]), (1, 1, 1, 1));
    assert_eq!(node(&p, 1, &[R, A, B]), (1, 1, 100, 100));
    assert_eq!(node(&p, 1, &[R]), (1, 1, 200, 300));
    let m = p.merged();
    assert_eq!(m.samples.credited, 3);
    let (i, n) = find(&m.tree, &[R]);
    assert_eq!((n.calls, n.samples), (2, 1));
    assert_eq!(p.times(&m.tree)[i].total_ns, 301);
    assert_eq!(n.latency.as_ref().map(|l| l.count), Some(2));
}

#[test]
fn exact_mode_ignores_samples() {
    let timed = vec![
        ev(EventKind::RootEntry, R, 0),
        ev(EventKind::MethodEntry, A, 10),
        ev(EventKind::MethodExit, A, 30),
        ev(EventKind::RootExit, R, 110),
    ];
    let mut with = CctBuilder::new(NS);
    with.add_samples(&[sample(0, 1, 1, 50)]);
    with.process_run(run(0, 1, 0), &timed);
    let mut without = CctBuilder::new(NS);
    without.process(0, &timed);
    assert_eq!(with.finish(), without.finish());
}

#[test]
fn a_reset_forgets_the_samples_before_it() {
    // two calls: R{A} at 100..200, R{B} at 300..400
    let events = vec![
        root(100),
        enter(A),
        exit(A),
        root_exit(200),
        root(300),
        enter(B),
        exit(B),
        root_exit(400),
    ];
    let at = |index: u32, ts: u64, weight: u64| PositionSample {
        ts,
        ..sample(0, 1, index, weight)
    };
    // The reset falls between the calls: the first call's sample goes.
    let mut b = sampled();
    b.reset_at(250);
    b.add_samples(&[at(2, 150, 10), at(6, 350, 20)]);
    b.process_run(run(0, 1, 0), &events);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len(), 2, "{t:?}");
    assert_eq!(node(&p, 0, &[R, B]), (1, 1, 20, 20));
    assert_eq!(p.threads[0].samples.credited, 1);
    assert_eq!(find(t, &[R]).1.latency.as_ref().map(|l| l.count), Some(1));
    // The reset falls inside the second call, at no timestamp of the
    // stream: the sample read after it places it.
    let mut b = sampled();
    b.reset_at(320);
    b.add_samples(&[at(2, 150, 10), at(6, 350, 20)]);
    b.process_run(run(0, 1, 0), &events);
    let p = b.finish();
    let t = &p.threads[0].tree;
    let (_, r) = find(t, &[R]);
    let (_, bn) = find(t, &[R, B]);
    assert_eq!((r.calls, r.incomplete, r.total_ticks), (1, 1, 80));
    assert_eq!((bn.calls, bn.incomplete, bn.samples), (1, 1, 1));
    // a call cut by the reset has no latency
    assert!(r.latency.is_none());
    assert_eq!(p.threads[0].samples.credited, 1);
}

/// A reset's mark places it where the thread stood when it was read: the
/// inner calls the thread makes after it count, though no timed event or
/// sample comes before the root's exit.
#[test]
fn a_reset_mark_places_the_reset_at_the_threads_position() {
    // R(100) A /A B /B /R(400): the reset at 250 falls after A's exit
    let events = vec![
        root(100),
        enter(A),
        exit(A),
        enter(B),
        exit(B),
        root_exit(400),
    ];
    let mark = |index: u32| PositionSample {
        ts: 250,
        ..sample(0, 1, index, 0)
    };
    // Without a mark, the reset falls at the root's exit: B is lost.
    let mut b = sampled();
    b.reset_at(250);
    b.process_run(run(0, 1, 0), &events);
    let p = b.finish();
    let (_, r) = find(&p.threads[0].tree, &[R]);
    assert_eq!((r.calls, r.incomplete), (1, 1));
    assert!(p.threads[0].tree.nodes.iter().all(|n| n.method != B));
    // With the mark at index 3 (after A's exit), B counts and A does not.
    let mut b = sampled();
    b.reset_at(250);
    b.mark_reset(&[mark(3)]);
    b.process_run(run(0, 1, 0), &events);
    let p = b.finish();
    let t = &p.threads[0].tree;
    let (_, r) = find(t, &[R]);
    assert_eq!((r.calls, r.incomplete), (1, 1));
    assert_eq!(node(&p, 0, &[R, B]).0, 1);
    assert!(t.nodes.iter().all(|n| n.method != A), "{t:?}");
    // A mark is not a sample.
    assert_eq!(p.threads[0].samples.credited, 0);
    assert_eq!(p.threads[0].samples.late, 0);
}

/// Per-call durations, the brute-force way: (exit - entry - waits - probe
/// cost) of each call, with the inner calls it made.
#[test]
fn root_latency_matches_brute_force_and_adds_up_to_the_exact_total() {
    let (t_i, t_o) = (3u64, 2u64);
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(t_i as f64, t_o as f64));
    let mut expected = Vec::new();
    let mut ts = 1_000u64;
    let mut events = Vec::new();
    let mut x = 12345u64;
    for _ in 0..500 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let inner = (x >> 40) % 5;
        let wait = if inner > 0 && (x >> 20).is_multiple_of(7) {
            (x >> 30) % 300
        } else {
            0
        };
        let start = ts;
        events.push(ev(EventKind::RootEntry, R, ts));
        for k in 0..inner {
            ts += 50 + (x >> (k * 3)) % 1000;
            events.push(ev(EventKind::MethodEntry, A, ts));
            if k == 0 && wait > 0 {
                events.push(ev(EventKind::AdjustTime, 0, wait));
            }
            ts += 100 + (x >> (k * 5)) % 5000;
            events.push(ev(EventKind::MethodExit, A, ts));
        }
        ts += 20 + (x >> 50) % 100_000;
        events.push(ev(EventKind::RootExit, R, ts));
        // t_I for the root, t_I + t_O for each inner call
        let cost = t_i + (t_i + t_o) * inner;
        expected.push(ts - start - wait - cost);
        ts += 10;
    }
    b.process(0, &events);
    let p = b.finish();
    let t = &p.threads[0].tree;
    let (i, r) = find(t, &[R]);
    let lat = p.latency_ns(r).expect("a root has a latency");
    expected.sort_unstable();
    let n = expected.len();
    let rank = |q: f64| expected[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    assert_eq!(lat.count, n as u64);
    assert_eq!(lat.min_ns, expected[0]);
    assert_eq!(lat.max_ns, expected[n - 1]);
    for (got, q) in [(lat.p50_ns, 0.5), (lat.p90_ns, 0.9), (lat.p99_ns, 0.99)] {
        let want = rank(q);
        assert!(
            got.abs_diff(want) * 256 <= want,
            "q {q}: {got} vs brute force {want}"
        );
    }
    // The calls add up to the root's exact total.
    let total = p.times(t)[i].total_ns;
    assert_eq!(lat.sum_ns, expected.iter().sum::<u64>());
    assert_eq!(lat.sum_ns, total);
}

#[test]
fn sampled_latency_takes_out_waits_only() {
    let mut b = sampled();
    b.set_calibration(Calibration::new(5.0, 5.0));
    let events = vec![
        root(1000),
        enter(A),
        ev(EventKind::AdjustTime, 0, 300),
        exit(A),
        root_exit(5000),
        root(6000),
        root_exit(6100),
        // an incomplete call: no latency
        root(7000),
    ];
    b.process_run(run(0, 1, 0), &events);
    let p = b.finish();
    let (_, r) = find(&p.threads[0].tree, &[R]);
    let l = p.latency_ns(r).unwrap();
    assert_eq!(
        (l.count, l.min_ns, l.max_ns, l.sum_ns),
        (2, 100, 3700, 3800)
    );
    assert_eq!(r.incomplete, 1);
}

#[test]
fn sampled_snapshot_round_trips() {
    let mut b = sampled();
    b.set_method(R, "a.B", "r", "()V");
    b.add_samples(&[sample(0, 5, 2, 10), sample(0, 5, 0, 4)]);
    b.process_run(run(0, 5, 0), &call());
    let p = b.finish();
    let mut file = Vec::new();
    p.write_snapshot(&mut file).unwrap();
    let back = Profile::read_snapshot(&mut file.as_slice()).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.timing, Timing::Sampled);
    assert_eq!(back.threads[0].samples.outside, 1);
}

/// In sampled mode a wait moves the samples its frame got while it
/// waited (up to the wait's length) to its row.
#[test]
fn a_sampled_wait_takes_its_time_from_the_frame_that_waited() {
    use sprig_wire::{Wait, WaitKind, wait_row_id};
    let rec = Wait {
        kind: WaitKind::Parked,
        class: 0,
        start: 200,
        ticks: 80,
        owner: 0,
    }
    .record(280)
    .unwrap();
    // 0 R(100) 1 A 2 [wait: 3 slots] 5 /A 6 /R(1100) 7
    let mut s = vec![root(100), enter(A)];
    s.extend_from_slice(rec.as_slice());
    s.extend([exit(A), root_exit(1100)]);
    let mut b = sampled();
    b.add_samples(&[sample(0, 5, 1, 10), sample(0, 5, 2, 100)]);
    b.process_run(run(0, 5, 0), &s);
    let p = b.finish();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let row = wait_row_id(WaitKind::Parked, 0);
    assert_eq!(node(&p, 0, &[R, A, row]), (1, 0, 80, 80));
    assert_eq!(node(&p, 0, &[R, A]), (1, 1, 20, 100));
    assert_eq!(node(&p, 0, &[R]), (1, 1, 10, 110));
    assert_eq!(p.display_name(row), "(parked: ?)");
}

/// Windows timing: a counted root call (its calls, no latency), two silent
/// ones (latencies, no call), and stack samples of the silent ones: the
/// root's time is the silent calls' measured time on the basis of the
/// counted call, shared out by the samples; a sampled path never counted
/// is a node with samples and no call.
#[test]
fn windows_timing_shares_the_silent_calls_time_by_their_samples() {
    let mut b = sampled();
    b.set_windows(true);
    let silent = |entry: u64, exit: u64| {
        [
            ev(EventKind::SilentRootEntry, R, entry),
            ev(EventKind::SilentRootExit, R, exit),
        ]
    };
    let mut events = vec![root(100), enter(A), exit(A), root_exit(1100)];
    events.extend(silent(2000, 2400));
    events.extend(silent(3000, 3800));
    b.process(1, &events);
    // three samples in A, one in B (never counted), under R
    for _ in 0..3 {
        b.credit_stack(1, &[R, A], 7);
    }
    b.credit_stack(1, &[R, B], 7);
    assert_eq!((b.root_calls(), b.silent_root_calls()), (1, 2));
    let p = b.finish();
    let t = &p.threads[0].tree;
    let node = |m: u32| {
        t.nodes
            .iter()
            .position(|n| n.method == m)
            .unwrap_or_else(|| panic!("no node of {m}"))
    };
    let (r, a, bn) = (node(R), node(A), node(B));
    assert_eq!(
        (t.nodes[r].calls, t.nodes[a].calls, t.nodes[bn].calls),
        (1, 1, 0)
    );
    let l = t.nodes[r].latency.as_ref().expect("latency");
    assert_eq!((l.count, l.sum, l.min, l.max), (2, 1200, 400, 800));
    // the mean silent call (600 ns) on the basis of the one counted call
    let times = p.times(t);
    assert_eq!(times[r].total_ns, 600);
    assert_eq!((times[a].total_ns, times[bn].total_ns), (450, 150));
    assert_eq!(times[r].self_ns, 0);
}

/// Windows timing with two roots the counting windows caught in
/// different proportions (R: 1 counted call of 4, Q: 1 of 12; over both
/// roots, 2 counted calls of 16): each root weighs what all of its calls took on the
/// session's scale (R 1,600 ns in all, Q 1,200, over 8), the report's
/// counted and silent root calls are the tree's, and the hot spot of `A`
/// (once a call of R, twice a call of Q) has the mean of all its calls.
#[test]
fn windows_timing_weighs_each_root_by_all_of_its_calls() {
    const Q: u32 = 4;
    let mut b = sampled();
    b.set_windows(true);
    b.profile_fields_mut().1.windows = Some(crate::profile::WindowFacts::default());
    let silent = |m: u32, entry: u64, exit: u64| {
        [
            ev(EventKind::SilentRootEntry, m, entry),
            ev(EventKind::SilentRootExit, m, exit),
        ]
    };
    let mut events = vec![root(100), enter(A), exit(A), root_exit(1100)];
    events.extend([
        ev(EventKind::RootEntry, Q, 1200),
        enter(A),
        exit(A),
        enter(A),
        exit(A),
        ev(EventKind::RootExit, Q, 1300),
    ]);
    for k in 0..3 {
        events.extend(silent(R, 2000 + k * 1000, 2400 + k * 1000));
    }
    for k in 0..11 {
        events.extend(silent(Q, 9000 + k * 1000, 9100 + k * 1000));
    }
    b.process(1, &events);
    for _ in 0..2 {
        b.credit_stack(1, &[R, A], 7);
        b.credit_stack(1, &[Q, A], 7);
    }
    let p = b.finish();
    let w = p.stats.windows.expect("windows");
    assert_eq!((w.counted_root_calls, w.silent_root_calls), (2, 14));
    assert_eq!(w.scale(), 8.0);
    let t = &p.threads[0].tree;
    let times = p.times(t);
    let (r, _) = find(t, &[R]);
    let (q, _) = find(t, &[Q]);
    assert_eq!((times[r].total_ns, times[q].total_ns), (200, 150));
    // Summed, on the session's scale: every call's time.
    assert_eq!((times[r].total_ns + times[q].total_ns) * 8, 2800);
    let weights = p.window_call_weights(t).expect("weights");
    let (ra, _) = find(t, &[R, A]);
    let (qa, _) = find(t, &[Q, A]);
    assert_eq!((weights[ra], weights[qa]), (0.5, 1.5));
    let spots = crate::report::view::hot_spots(&p, t);
    let a = spots.iter().find(|h| h.method == A).expect("A");
    // 28 calls of A in 2,800 ns; the counted calls alone would say 117
    assert_eq!((a.calls, a.total_ns, a.avg_ns), (3, 350, 100));
    // Neither root is 4 times off the session's 1 in 8.
    assert!(
        !p.warnings.iter().any(|w| w.contains("windows timing")),
        "{:?}",
        p.warnings
    );
}

/// The cost tail (sampled timing, not windows): silent root calls after
/// the counted ones leave the tree and the root's latencies as they were
/// and give the measured cost: the recorded median (entry to exit) against
/// the silent median.
#[test]
fn the_cost_tail_measures_without_touching_the_tree() {
    let silent = |entry: u64, exit: u64| {
        [
            ev(EventKind::SilentRootEntry, R, entry),
            ev(EventKind::SilentRootExit, R, exit),
        ]
    };
    // latencies below 128 ticks: the histogram holds them exactly
    let counted = [
        root(100),
        enter(A),
        exit(A),
        root_exit(200),
        root(300),
        enter(A),
        exit(A),
        root_exit(400),
    ];
    let mut b = sampled();
    b.process(1, &counted);
    let without = b.snapshot();
    let mut events = Vec::new();
    for k in 0..6 {
        events.extend(silent(1000 + k * 100, 1040 + k * 100));
    }
    b.process(1, &events);
    let p = b.finish();
    assert_eq!(p.threads, without.threads, "the tail changed the tree");
    let c = p.stats.cost.expect("cost");
    assert_eq!(
        (c.method, c.recorded_calls, c.silent_calls),
        (R, 2, 6),
        "{c:?}"
    );
    assert_eq!((c.recorded_p50_ns, c.silent_p50_ns), (100, 40));
    assert!(c.measured() && c.large(), "{c:?}");
    assert_eq!(c.probe_share_percent(), Some(60.0));
    // Without a silent call, nothing is measured.
    let c = without.stats.cost.expect("cost");
    assert_eq!(c.silent_calls, 0);
    assert!(!c.measured() && c.ratio().is_none(), "{c:?}");
}
