//! Builder tests on synthetic streams with hand-computed expectations.

use super::*;
use crate::profile::Times;
use crate::profile::{Calibration, Node, Profile, Tree};
use sprig_wire::control::Message;
use sprig_wire::event::{ADJUST_OPEN_FRAMES, Event, EventKind};

const NS: u64 = 1_000_000_000;
const R: u32 = 1;
const A: u32 = 2;
const B: u32 = 3;

fn ev(kind: EventKind, id: u32, ts: u64) -> Event {
    Event::new(kind, id, ts)
}
fn root(id: u32, ts: u64) -> Event {
    ev(EventKind::RootEntry, id, ts)
}
fn root_exit(id: u32, ts: u64) -> Event {
    ev(EventKind::RootExit, id, ts)
}
fn enter(id: u32, ts: u64) -> Event {
    ev(EventKind::MethodEntry, id, ts)
}
fn exit(id: u32, ts: u64) -> Event {
    ev(EventKind::MethodExit, id, ts)
}
fn adjust(ticks: u64) -> Event {
    ev(EventKind::AdjustTime, 0, ticks)
}

/// (method path from the root) -> node, for readable assertions.
fn find<'a>(t: &'a Tree, path: &[u32]) -> &'a Node {
    let mut level: &[u32] = &t.roots;
    let mut node = None;
    for &m in path {
        let id = *level
            .iter()
            .find(|&&c| t.nodes[c as usize].method == m)
            .unwrap_or_else(|| panic!("no node for {m} on path {path:?}"));
        node = Some(&t.nodes[id as usize]);
        level = &t.nodes[id as usize].children;
    }
    node.expect("empty path")
}

fn times_of(p: &Profile, thread: usize, path: &[u32]) -> Times {
    let t = &p.threads[thread].tree;
    let n = find(t, path) as *const Node;
    let i = t.nodes.iter().position(|x| std::ptr::eq(x, n)).unwrap();
    p.times(t)[i]
}

/// R { A(10..30) A(40..70) B(80 { A(90..95) } ..100) } at 0..110
fn known_stream() -> Vec<Event> {
    vec![
        root(R, 0),
        enter(A, 10),
        exit(A, 30),
        enter(A, 40),
        exit(A, 70),
        enter(B, 80),
        enter(A, 90),
        exit(A, 95),
        exit(B, 100),
        root_exit(R, 110),
    ]
}

#[test]
fn known_tree_counts_totals_and_self() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &known_stream());
    let p = b.finish();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.stats.events, 10);
    let t = &p.threads[0].tree;
    assert_eq!(t.roots.len(), 1);
    let r = find(t, &[R]);
    assert_eq!((r.calls, r.total_ticks, r.child_calls), (1, 110, 3));
    let a = find(t, &[R, A]);
    assert_eq!((a.calls, a.total_ticks, a.child_calls), (2, 50, 0));
    let b_ = find(t, &[R, B]);
    assert_eq!((b_.calls, b_.total_ticks, b_.child_calls), (1, 20, 1));
    let ba = find(t, &[R, B, A]);
    assert_eq!((ba.calls, ba.total_ticks), (1, 5));
    assert_eq!(t.nodes.iter().map(|n| n.incomplete).sum::<u64>(), 0);
    // no calibration: self R = 110 - 50 - 20, self B = 20 - 5
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 40);
    assert_eq!(times_of(&p, 0, &[R, B]).self_ns, 15);
    assert_eq!(times_of(&p, 0, &[R, A]).self_ns, 50);
}

#[test]
fn calibration_subtraction_by_hand() {
    // t_I = 2, t_O = 1; own time = measured minus the children's measured:
    // R>B>A: own 5, 1 call:                 self 5 - 2 = 3,            total 3
    // R>A:   own 50, 2 calls:               self 50 - 4 = 46,          total 46
    // R>B:   own 20 - 5 = 15, 1 call, m = 1: self 15 - 2 - 1 = 12,      total 12 + 3 = 15
    // R:     own 110 - 50 - 20 = 40, m = 3:  self 40 - 2 - 3 = 35,      total 35 + 46 + 15 = 96
    // i.e. R's measured 110 minus every probe inside it: t_I of R, B and
    // the three A calls (5 * 2) and t_O of the four calls R and B made.
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(2.0, 1.0));
    b.process(1, &known_stream());
    let p = b.finish();
    let get = |path: &[u32]| times_of(&p, 0, path);
    assert_eq!((get(&[R, B, A]).self_ns, get(&[R, B, A]).total_ns), (3, 3));
    assert_eq!((get(&[R, A]).self_ns, get(&[R, A]).total_ns), (46, 46));
    assert_eq!((get(&[R, B]).self_ns, get(&[R, B]).total_ns), (12, 15));
    assert_eq!((get(&[R]).self_ns, get(&[R]).total_ns), (35, 96));
    assert_eq!(get(&[R]).total_ns, 110 - 5 * 2 - 4);
    assert_eq!(get(&[R]).raw_total_ns, 110);
    // Nothing clamped: the probe cost is what total_ns lost.
    assert_eq!(get(&[R]).probe_cost_ns, 5 * 2 + 4);
    assert_eq!(get(&[R, B]).probe_cost_ns, 2 * 2 + 1);
}

#[test]
fn calibration_in_ticks_converted_with_frequency() {
    // 2 ticks per ns: t_I = 4 ticks = 2 ns, t_O = 2 ticks = 1 ns.
    // R: own 40 ticks = 20 ns, self 20 - 2 - 3 = 15;
    // R>A: 50 ticks = 25 ns, self 25 - 4 = 21;
    // R>B: own 15 ticks = 7 ns (7.5 truncated), self 7 - 2 - 1 = 4;
    // R>B>A: 5 ticks = 2 ns (2.5 truncated), self 2 - 2 = 0;
    // R total = 15 + 21 + (4 + 0) = 40
    let p = known_stream_calibrated(2 * NS, &[(4.0, 2.0)]);
    let c = p.calibration.expect("calibration kept");
    assert_eq!((c.inner_ns, c.outer_ns), (2.0, 1.0));
    assert_eq!(times_of(&p, 0, &[R]).raw_total_ns, 55);
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 15);
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 40);
}

/// The profile of `known_stream` on thread 1 after the agent's
/// `Calibration` messages `(inner, outer)` ticks, in order.
fn known_stream_calibrated(ticks_per_sec: u64, calibrations: &[(f64, f64)]) -> Profile {
    let mut b = CctBuilder::new(ticks_per_sec);
    for &(inner_ticks, outer_ticks) in calibrations {
        assert!(b.apply_message(&Message::Calibration {
            inner_ticks,
            outer_ticks,
            samples: 100,
        }));
    }
    b.process(1, &known_stream());
    b.finish()
}

#[test]
fn of_two_calibrations_the_faster_stays() {
    // A disturbed calibration (first, then last) never replaces a faster one.
    for order in [[(8.0, 6.0), (4.0, 2.0)], [(4.0, 2.0), (8.0, 6.0)]] {
        let p = known_stream_calibrated(2 * NS, &order);
        let c = p.calibration.expect("calibration kept");
        assert_eq!((c.inner_ns, c.outer_ns), (2.0, 1.0), "{order:?}");
        assert_eq!(times_of(&p, 0, &[R]).total_ns, 40);
    }
}

#[test]
fn calibrations_far_apart_are_reported() {
    // 1 tick per ns: pairs of 6 and 14 ns are more than 25% apart, pairs of
    // 6 and 7 ns are not.
    for (second, warned) in [((9.0, 5.0), true), ((4.0, 3.0), false)] {
        let p = known_stream_calibrated(NS, &[(4.0, 2.0), second]);
        let w: Vec<_> = p
            .warnings
            .iter()
            .filter(|w| w.contains("at one calibration"))
            .collect();
        assert_eq!(w.len(), usize::from(warned), "{second:?}: {:?}", p.warnings);
        if warned {
            assert!(
                w[0].contains("6.0 ns a call") && w[0].contains("14.0 ns at the other"),
                "{}",
                w[0]
            );
            assert!(w[0].contains("up to 8.0 ns"), "{}", w[0]);
        }
        // The faster calibration is the one subtracted either way.
        let c = p.calibration.expect("calibration kept");
        assert_eq!((c.inner_ns, c.outer_ns), (4.0, 2.0));
    }
}

#[test]
fn calibration_never_below_zero() {
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(30.0, 30.0));
    b.process(1, &known_stream());
    let p = b.finish();
    // R>B>A: 5 - 30 -> 0; R>B: 20 - 30 - 30 -> 0; R>A: 50 - 60 -> 0
    assert_eq!(times_of(&p, 0, &[R, B, A]).total_ns, 0);
    assert_eq!(times_of(&p, 0, &[R, B]).total_ns, 0);
    assert_eq!(times_of(&p, 0, &[R, A]).total_ns, 0);
    // R: 110 - 30 - 90 -> 0
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 0);
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 0);
    // Unclamped, the subtree's probe cost is every call's t_I (R, B and
    // three A: 5 * 30) and every child call's t_O (4 * 30), beyond the
    // 110 measured: the calibration took out 160 ns more than there was.
    assert_eq!(times_of(&p, 0, &[R]).probe_cost_ns, 5 * 30 + 4 * 30);
    assert_eq!(times_of(&p, 0, &[R, B]).probe_cost_ns, 2 * 30 + 30);
    assert_eq!(times_of(&p, 0, &[R, B, A]).probe_cost_ns, 30);
}

#[test]
fn adjust_time_subtracted_from_open_frames_only() {
    // The ring writes AdjustTime just before the event whose probe waited;
    // the wait came after that event's timestamp.
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[
            root(R, 0),
            adjust(5), // A's entry probe waited after ts 10: inside A and R
            enter(A, 10),
            adjust(7), // A's exit probe waited after ts 40: inside R only
            exit(A, 40),
            enter(B, 50),
            exit(B, 60), // B saw no wait
            adjust(3),   // R's exit probe waited after ts 100: in no frame
            root_exit(R, 100),
            root(R, 200),
            root_exit(R, 210),
        ],
    );
    let p = b.finish();
    let t = &p.threads[0].tree;
    let r = find(t, &[R]);
    assert_eq!((r.calls, r.total_ticks, r.adjust_ticks), (2, 110, 12));
    let a = find(t, &[R, A]);
    assert_eq!((a.total_ticks, a.adjust_ticks), (30, 5));
    assert_eq!(find(t, &[R, B]).adjust_ticks, 0);
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 98);
    assert_eq!(times_of(&p, 0, &[R, A]).total_ns, 25);
    assert_eq!(times_of(&p, 0, &[R, B]).total_ns, 10);
    // self R = 98 - 25 - 10
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 63);
    assert_eq!(times_of(&p, 0, &[R]).adjust_ns, 12);
}

/// Adjust-time of work done before a probe read any timestamp (the class
/// file load hook of a class a frame defines, revelation before a
/// reflective call): charged to the frames open when it is read, not to
/// the frame the next event opens.
fn adjust_open(ticks: u64) -> Event {
    adjust(ticks).with_aux(ADJUST_OPEN_FRAMES)
}

#[test]
fn adjust_time_of_open_frames_leaves_the_next_frame_alone() {
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[
            root(R, 0),
            enter(A, 10),
            adjust_open(20), // A defined a class at 15..35: inside A and R
            enter(B, 40),    // B starts after it: none of it is B's
            exit(B, 50),
            adjust_open(4), // again, with no event in between
            adjust_open(6),
            exit(A, 70),
            root_exit(R, 100),
        ],
    );
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(find(t, &[R]).adjust_ticks, 30);
    assert_eq!(find(t, &[R, A]).adjust_ticks, 30);
    assert_eq!(find(t, &[R, A, B]).adjust_ticks, 0);
    assert_eq!(times_of(&p, 0, &[R, A, B]).total_ns, 10);
    // A: 60 measured - 30 adjust; its own code 30 - 10 (B)
    assert_eq!(times_of(&p, 0, &[R, A]).total_ns, 30);
    assert_eq!(times_of(&p, 0, &[R, A]).self_ns, 20);
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 70);
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 40);
    // The same wait marked for the next event is charged to B as well:
    // B's 10 ticks cannot hold 20 of adjust-time (clamped to 0).
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[
            root(R, 0),
            enter(A, 10),
            adjust(20),
            enter(B, 40),
            exit(B, 50),
            exit(A, 70),
            root_exit(R, 100),
        ],
    );
    let p = b.finish();
    assert_eq!(find(&p.threads[0].tree, &[R, A, B]).adjust_ticks, 20);
    assert_eq!(times_of(&p, 0, &[R, A, B]).total_ns, 0);
}

#[test]
fn adjust_time_is_per_thread_and_survives_batch_boundaries() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 0)]);
    b.process(2, &[root(R, 0)]);
    b.process(2, &[adjust(40)]); // the waiting event comes in the next batch
    b.process(1, &[enter(A, 10), exit(A, 20)]);
    b.process(2, &[enter(A, 10), exit(A, 60)]);
    b.process(1, &[root_exit(R, 100)]);
    b.process(2, &[root_exit(R, 100)]);
    let p = b.finish();
    assert_eq!(p.threads[0].index, 1);
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 100);
    assert_eq!(times_of(&p, 0, &[R, A]).total_ns, 10);
    assert_eq!(times_of(&p, 1, &[R]).total_ns, 60);
    assert_eq!(times_of(&p, 1, &[R, A]).total_ns, 10);
}

#[test]
fn thread_ends_mid_call() {
    let mut b = CctBuilder::new(NS);
    b.process(
        4,
        &[root(R, 0), enter(A, 10), ev(EventKind::ThreadEnd, 4, 50)],
    );
    let p = b.finish();
    let t = &p.threads[0].tree;
    let r = find(t, &[R]);
    let a = find(t, &[R, A]);
    assert_eq!((r.calls, r.total_ticks, r.incomplete), (1, 50, 1));
    assert_eq!((a.calls, a.total_ticks, a.incomplete), (1, 40, 1));
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].starts_with("thread 4: 2 frames were still open when the thread ended"));
}

#[test]
fn detach_mid_call_closes_at_last_timestamp() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 0), enter(A, 10), exit(A, 20), enter(B, 30)]);
    assert_eq!(b.issues().frames_open_at_finish, 0);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(find(t, &[R]).total_ticks, 30);
    assert_eq!(find(t, &[R]).incomplete, 1);
    assert_eq!(find(t, &[R, A]).incomplete, 0);
    assert_eq!(
        (find(t, &[R, B]).calls, find(t, &[R, B]).total_ticks),
        (1, 0)
    );
    assert_eq!(find(t, &[R, B]).incomplete, 1);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("2 frames were still open at the end of profiling"));
}

#[test]
fn entries_and_exits_outside_context_are_ignored_and_counted() {
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[
            exit(A, 1),  // exit without entry
            enter(A, 2), // outside root context
            exit(A, 3),  // exit without entry again
            root(R, 10),
            root_exit(R, 20),
            enter(B, 30), // outside again
        ],
    );
    let issues = b.issues();
    assert_eq!(issues.exits_without_entry, 2);
    assert_eq!(issues.entries_outside_root, 2);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len(), 1);
    assert_eq!(find(t, &[R]).total_ticks, 10);
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
}

#[test]
fn mismatched_exit_pops_to_the_matching_frame() {
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[
            root(R, 0),
            enter(A, 10),
            enter(B, 20),
            exit(A, 30),  // B's exit was lost: B closed at 30, incomplete
            exit(99, 35), // nothing matches: ignored
            root_exit(R, 40),
        ],
    );
    let i = b.issues();
    assert_eq!((i.mismatched_exits, i.unmatched_exits), (1, 1));
    assert_eq!(i.frames_closed_by_mismatch, 1);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(
        (find(t, &[R]).total_ticks, find(t, &[R]).incomplete),
        (40, 0)
    );
    assert_eq!(
        (find(t, &[R, A]).total_ticks, find(t, &[R, A]).incomplete),
        (20, 0)
    );
    assert_eq!(
        (
            find(t, &[R, A, B]).total_ticks,
            find(t, &[R, A, B]).incomplete
        ),
        (10, 1)
    );
    assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
}

#[test]
fn root_exit_skipping_frames_closes_them() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 0), enter(A, 5), root_exit(R, 50), root(R, 60)]);
    b.process(1, &[root_exit(R, 70)]);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!((find(t, &[R]).calls, find(t, &[R]).total_ticks), (2, 60));
    assert_eq!(find(t, &[R, A]).incomplete, 1);
}

#[test]
fn clock_backwards_and_unknown_kinds() {
    let mut b = CctBuilder::new(NS);
    let mut weird = Event::new(EventKind::Marker, 0, 0);
    weird.kind = 999;
    b.process(1, &[root(R, 100), weird, root_exit(R, 50)]);
    let i = b.issues();
    assert_eq!((i.clock_went_backwards, i.unknown_kinds), (1, 1));
    let p = b.finish();
    assert_eq!(find(&p.threads[0].tree, &[R]).total_ticks, 0);
}

#[test]
fn root_entry_inside_a_context_starts_a_new_one() {
    // The agent sends RootEntry only at depth 0: a second one means the
    // exits of the open frames were lost.
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 0), enter(A, 5), root(B, 10), root_exit(B, 20)]);
    let i = b.issues();
    assert_eq!(
        (i.root_entries_in_context, i.frames_closed_by_root_entry),
        (1, 2)
    );
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.roots.len(), 2);
    assert_eq!(
        (find(t, &[R]).total_ticks, find(t, &[R]).incomplete),
        (10, 1)
    );
    assert_eq!(
        (find(t, &[R, A]).total_ticks, find(t, &[R, A]).incomplete),
        (5, 1)
    );
    assert_eq!(
        (find(t, &[B]).total_ticks, find(t, &[B]).incomplete),
        (10, 0)
    );
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(p.warnings[0].contains("2 frames were open when a new root context began"));
}

#[test]
fn root_exit_closes_the_outermost_root_frame() {
    // recursive root: R { R { A ... } } with the inner exits lost
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[root(R, 0), enter(R, 10), enter(A, 20), root_exit(R, 50)],
    );
    assert_eq!(b.issues().frames_closed_by_mismatch, 2);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(
        (find(t, &[R]).total_ticks, find(t, &[R]).incomplete),
        (50, 0)
    );
    assert_eq!(
        (find(t, &[R, R]).total_ticks, find(t, &[R, R]).incomplete),
        (40, 1)
    );
    assert_eq!(
        (
            find(t, &[R, R, A]).total_ticks,
            find(t, &[R, R, A]).incomplete
        ),
        (30, 1)
    );
    // a balanced recursive root: the nested exit is a MethodExit
    let mut b = CctBuilder::new(NS);
    b.process(
        1,
        &[root(R, 0), enter(R, 10), exit(R, 20), root_exit(R, 30)],
    );
    let p = b.finish();
    assert!(p.warnings.is_empty());
    assert_eq!(find(&p.threads[0].tree, &[R, R]).total_ticks, 10);
}

#[test]
fn several_roots_and_threads_with_names() {
    let mut b = CctBuilder::new(NS);
    b.set_thread_name(2, 17, "worker-1");
    b.apply_message(&Message::Thread {
        index: 1,
        java_id: 1,
        name: "main".into(),
        tid: 0,
    });
    b.apply_message(&Message::Method {
        id: R,
        class: "a.App".into(),
        name: "run".into(),
        descriptor: "()V".into(),
    });
    // interleaved batches, as the ring delivers them
    b.process(2, &[root(R, 0), enter(A, 1)]);
    b.process(1, &[root(B, 0), root_exit(B, 7)]);
    b.process(2, &[exit(A, 9), root_exit(R, 10)]);
    b.process(1, &[root(R, 20), root_exit(R, 25)]);
    let p = b.finish();
    assert_eq!(p.threads.len(), 2);
    assert_eq!(
        (
            p.threads[0].index,
            p.threads[0].java_id,
            p.threads[0].name.as_str()
        ),
        (1, 1, "main")
    );
    assert_eq!(
        (
            p.threads[1].index,
            p.threads[1].java_id,
            p.threads[1].name.as_str()
        ),
        (2, 17, "worker-1")
    );
    assert_eq!(p.threads[0].tree.roots.len(), 2);
    assert_eq!(find(&p.threads[0].tree, &[B]).total_ticks, 7);
    assert_eq!(find(&p.threads[1].tree, &[R, A]).total_ticks, 8);
    assert_eq!(p.method(R).display(), "a.App.run()V");
    let m = p.merged();
    assert_eq!(find(&m.tree, &[R]).calls, 2);
    assert_eq!(find(&m.tree, &[R]).total_ticks, 15);
    assert_eq!(find(&m.tree, &[R, A]).calls, 1);
    assert_eq!(find(&m.tree, &[B]).calls, 1);
}

#[test]
fn wide_node_children_stay_distinct() {
    // R calls 100 different methods, round robin, 5 times each: the sibling
    // list overflows into the hash map.
    let mut b = CctBuilder::new(NS);
    let mut evs = vec![root(R, 0)];
    let mut ts = 1;
    for _ in 0..5 {
        for m in 100..200 {
            evs.push(enter(m, ts));
            evs.push(enter(m + 1000, ts + 1));
            evs.push(exit(m + 1000, ts + 2));
            evs.push(exit(m, ts + 3));
            ts += 4;
        }
    }
    evs.push(root_exit(R, ts));
    b.process(1, &evs);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len(), 201);
    let r = find(t, &[R]);
    assert_eq!(r.children.len(), 100);
    assert_eq!(r.child_calls, 500);
    for m in 100..200 {
        let n = find(t, &[R, m]);
        assert_eq!((n.calls, n.total_ticks, n.children.len()), (5, 15, 1));
        assert_eq!(find(t, &[R, m, m + 1000]).calls, 5);
    }
    // creation order kept
    let first: Vec<u32> = r.children[..3]
        .iter()
        .map(|&c| t.nodes[c as usize].method)
        .collect();
    assert_eq!(first, vec![100, 101, 102]);
}

#[test]
fn children_called_in_turn_and_then_in_another_order_keep_their_counts() {
    // R calls A, B, C in turn (each lookup after the first round is the
    // successor of the one before), then in the reverse order, then only
    // C and A (the successor hint names B, which is not called), then a new
    // method D after A.
    const C: u32 = 4;
    const D: u32 = 5;
    let mut b = CctBuilder::new(NS);
    let mut evs = vec![root(R, 0)];
    let mut ts = 1;
    let mut call = |evs: &mut Vec<Event>, m: u32| {
        evs.push(enter(m, ts));
        evs.push(exit(m, ts + 2));
        ts += 3;
    };
    for _ in 0..4 {
        for m in [A, B, C] {
            call(&mut evs, m);
        }
    }
    for _ in 0..3 {
        for m in [C, B, A] {
            call(&mut evs, m);
        }
    }
    for _ in 0..2 {
        for m in [C, A] {
            call(&mut evs, m);
        }
    }
    call(&mut evs, A);
    call(&mut evs, D);
    evs.push(root_exit(R, ts));
    b.process(1, &evs);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len(), 5);
    assert_eq!(find(t, &[R]).children.len(), 4);
    for (m, calls) in [(A, 10), (B, 7), (C, 9), (D, 1)] {
        let n = find(t, &[R, m]);
        assert_eq!((n.calls, n.total_ticks), (calls, 2 * calls), "method {m}");
    }
}

#[test]
fn deep_recursion_without_stack_overflow() {
    const DEPTH: u64 = 10_000;
    let mut b = CctBuilder::new(NS);
    let mut evs = vec![root(R, 0)];
    for i in 0..DEPTH {
        evs.push(enter(A, 1 + i));
    }
    for i in 0..DEPTH {
        evs.push(exit(A, 1 + DEPTH + i));
    }
    evs.push(root_exit(R, 2 * DEPTH + 1));
    b.process(1, &evs);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len() as u64, DEPTH + 1);
    // the innermost call lasted 1 tick, each level 2 more than the one below
    let depths = t.depths();
    let deepest = depths.iter().position(|&d| d as u64 == DEPTH).unwrap();
    assert_eq!(t.nodes[deepest].total_ticks, 1);
    let times = p.times(t);
    assert_eq!(times[0].total_ns, 2 * DEPTH + 1);
    assert!(
        times
            .iter()
            .skip(1)
            .all(|t| t.self_ns == 2 || t.total_ns == 1)
    );
    let m = p.merged();
    assert_eq!(m.tree.nodes.len() as u64, DEPTH + 1);
    let p2 = p.clone();
    drop(p2);
}

#[test]
fn live_snapshot_leaves_builder_untouched() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 0), enter(A, 10)]);
    let live = b.snapshot();
    assert_eq!(find(&live.threads[0].tree, &[R]).total_ticks, 10);
    assert_eq!(find(&live.threads[0].tree, &[R]).incomplete, 1);
    b.process(1, &[exit(A, 30), root_exit(R, 40)]);
    let p = b.finish();
    assert!(p.warnings.is_empty());
    let t = &p.threads[0].tree;
    assert_eq!(
        (find(t, &[R]).total_ticks, find(t, &[R]).incomplete),
        (40, 0)
    );
    assert_eq!(find(t, &[R, A]).total_ticks, 20);
}

#[test]
fn empty_builder_gives_empty_profile() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[]);
    b.process(3, &[enter(A, 1)]);
    let p = b.finish();
    assert!(p.threads.is_empty());
    assert_eq!(p.warnings.len(), 1);
}

#[test]
fn hello_and_status_fill_target_and_stats() {
    use sprig_wire::control::{AgentStats, JvmInfo};
    let mut b = CctBuilder::new(NS);
    b.apply_message(&Message::AgentHello {
        version: 1,
        token: [0; 16],
        jvm: JvmInfo {
            pid: 42,
            version: "17.0.15".into(),
            vm_name: "OpenJDK 64-Bit Server VM".into(),
            vendor: "x".into(),
        },
    });
    b.apply_message(&Message::Status(AgentStats {
        instrumented_methods: 5,
        called_methods: 3,
        lost_events: 1,
        ..AgentStats::default()
    }));
    b.profile_fields_mut().1.duration_ms = 1500;
    assert!(!b.apply_message(&Message::StatusRequest));
    let p = b.finish();
    assert_eq!(p.target.pid, 42);
    assert_eq!(p.target.jvm, "OpenJDK 64-Bit Server VM 17.0.15");
    assert_eq!(
        (
            p.stats.instrumented_methods,
            p.stats.called_methods,
            p.stats.lost_events,
            p.stats.duration_ms
        ),
        (5, 3, 1, 1500)
    );
}

/// Two root calls before the reset at 150 and one after; the reset cuts
/// the second one in B.
#[test]
fn reset_forgets_what_came_before_and_times_open_frames_from_the_cut() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &known_stream()); // R at 0..110
    b.process(
        1,
        &[root(R, 120), enter(A, 125), exit(A, 130), enter(B, 140)],
    );
    b.reset_at(150);
    // one batch holding events from both sides of the cut
    b.process(
        1,
        &[
            enter(A, 145),
            exit(A, 148),
            adjust(1),
            enter(A, 160),
            exit(A, 170),
            exit(B, 180),
            root_exit(R, 190),
        ],
    );
    b.process(
        1,
        &[root(R, 200), enter(A, 210), exit(A, 230), root_exit(R, 240)],
    );
    assert_eq!(b.resets(), 1);
    let p = b.finish();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let t = &p.threads[0].tree;
    let r = find(t, &[R]);
    // the call open at the cut (150..190 counted) and the one after it
    assert_eq!((r.calls, r.total_ticks, r.incomplete), (2, 40 + 40, 1));
    let rb = find(t, &[R, B]);
    assert_eq!((rb.calls, rb.total_ticks, rb.incomplete), (1, 30, 1));
    // A under B: only the call after the cut, its wait taken out
    let rba = find(t, &[R, B, A]);
    assert_eq!((rba.calls, rba.total_ticks, rba.adjust_ticks), (1, 10, 1));
    // A directly under R: only the call of the last root call
    let ra = find(t, &[R, A]);
    assert_eq!((ra.calls, ra.total_ticks, ra.incomplete), (1, 20, 0));
    assert_eq!(t.nodes.len(), 4, "nothing else survives: {t:?}");
}

#[test]
fn reset_reaches_threads_that_had_no_events_since() {
    let mut b = CctBuilder::new(NS);
    // thread 1: a finished root call and one still open, quiet since 50
    b.process(
        1,
        &[root(R, 0), root_exit(R, 10), root(R, 20), enter(A, 50)],
    );
    // thread 2: ended before the cut
    b.process(2, &[root(R, 0), ev(EventKind::ThreadEnd, 0, 30)]);
    b.reset_at(100);
    // thread 3 appears after the reset, with events from before it too
    b.process(
        3,
        &[
            root(R, 90),
            root_exit(R, 95),
            root(R, 110),
            root_exit(R, 130),
        ],
    );
    let live = b.snapshot();
    let p = b.finish();
    assert_eq!(
        live.threads, p.threads,
        "snapshot applies the reset as finish does"
    );
    let idx: Vec<u32> = p.threads.iter().map(|t| t.index).collect();
    assert_eq!(idx, vec![1, 3], "thread 2 ended before the cut");
    let t1 = &p.threads[0].tree;
    let r = find(t1, &[R]);
    assert_eq!((r.calls, r.total_ticks, r.incomplete), (1, 0, 1));
    let a = find(t1, &[R, A]);
    assert_eq!(
        (a.calls, a.incomplete),
        (1, 1),
        "counted once as incomplete"
    );
    let r3 = find(&p.threads[1].tree, &[R]);
    assert_eq!((r3.calls, r3.total_ticks, r3.incomplete), (1, 20, 0));
}

#[test]
fn reset_now_cuts_each_thread_where_it_was_read() {
    let mut b = CctBuilder::new(NS);
    b.process(1, &[root(R, 1000), root_exit(R, 1500), root(R, 1600)]);
    b.reset_now();
    b.process(1, &[enter(A, 1610), exit(A, 1630), root_exit(R, 1700)]);
    b.reset_now();
    b.reset_now();
    b.process(1, &[root(R, 2000), root_exit(R, 2100)]);
    assert_eq!(b.resets(), 3);
    let p = b.finish();
    let t = &p.threads[0].tree;
    assert_eq!(t.nodes.len(), 1);
    assert_eq!((find(t, &[R]).calls, find(t, &[R]).total_ticks), (1, 100));
}

const EMPTY: u32 = sprig_wire::event::CALIBRATION_EMPTY_ID;

/// A calibration burst of `n` calls of the empty method from `at`: each
/// call `inner` ticks long, `gap` ticks from one exit to the next entry.
fn burst(at: u64, n: u64, inner: u64, gap: u64) -> Vec<Event> {
    (0..n)
        .flat_map(|k| {
            let e = at + k * (inner + gap);
            [enter(EMPTY, e), exit(EMPTY, e + inner)]
        })
        .collect()
}

/// End of a burst made by `burst`.
fn burst_end(at: u64, n: u64, inner: u64, gap: u64) -> u64 {
    at + n * (inner + gap) - gap
}

#[test]
fn a_burst_is_left_out_and_charges_the_calls_after_it() {
    // Session calibration t_I 2, t_O 1 (ns = ticks). R opens at 0; a burst
    // of 32 calls (t_I 6, t_O 4) runs from 10 to 10 + 32 * 10 - 4 = 326;
    // then A(400..430) and A(440..470); R exits at 500.
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(2.0, 1.0));
    let mut s = vec![root(R, 0)];
    s.extend(burst(10, 32, 6, 4));
    assert_eq!(burst_end(10, 32, 6, 4), 326);
    s.extend([
        enter(A, 400),
        exit(A, 430),
        enter(A, 440),
        exit(A, 470),
        root_exit(R, 500),
    ]);
    b.process(1, &s);
    let p = b.finish();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let t = &p.threads[0];
    // No node for the calibration method: R has A only.
    let r = find(&t.tree, &[R]);
    assert_eq!(r.children.len(), 1, "{:?}", t.tree);
    assert_eq!((r.calls, r.total_ticks, r.adjust_ticks), (1, 500, 316));
    assert_eq!(t.bursts.used, 1);
    assert_eq!(t.bursts.rejected, 0);
    assert_eq!(t.bursts.median_pair_ps, 10_000);
    // A's two calls came after the burst: t_I 6 each, self 60 - 12 = 48.
    let a = find(&t.tree, &[R, A]);
    assert_eq!(a.recal.calls, 2);
    assert_eq!(times_of(&p, 0, &[R, A]).self_ns, 48);
    // R: own 500 - 316 (the burst) - 60 = 124, minus t_I 6 (its own call,
    // closed after the burst) and t_O 4 for each A: 124 - 6 - 8 = 110.
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 110);
    assert_eq!(times_of(&p, 0, &[R]).total_ns, 158);
}

#[test]
fn calls_before_a_threads_first_burst_are_charged_what_it_measured() {
    // Thread 1: A(10..40) closes before the burst, A(400..430) after it:
    // both are charged the burst's t_I 6 and t_O 4, not the session's 2
    // and 1. Thread 2 runs no burst: the session's figures.
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(2.0, 1.0));
    let mut s = vec![root(R, 0), enter(A, 10), exit(A, 40)];
    s.extend(burst(50, 32, 6, 4));
    s.extend([enter(A, 400), exit(A, 430), root_exit(R, 500)]);
    b.process(1, &s);
    b.process(
        2,
        &[root(R, 0), enter(A, 10), exit(A, 40), root_exit(R, 100)],
    );
    let p = b.finish();
    let a = find(&p.threads[0].tree, &[R, A]);
    assert_eq!((a.calls, a.recal.calls), (2, 2));
    // 60 measured, minus t_I 6 twice.
    assert_eq!(times_of(&p, 0, &[R, A]).self_ns, 48);
    // R: own 500 - 316 - 60 = 124; its call t_I 6; t_O 4 twice.
    assert_eq!(times_of(&p, 0, &[R]).self_ns, 124 - 6 - 8);
    let a = find(&p.threads[1].tree, &[R, A]);
    assert_eq!((a.calls, a.recal.calls), (1, 0));
    assert_eq!(times_of(&p, 1, &[R, A]).self_ns, 28);
    assert_eq!(times_of(&p, 1, &[R]).self_ns, 70 - 2 - 1);
    // Each root call's latency is charged the same: the call adds up to
    // the root's exact total (the A closed before the burst at 6 + 4).
    for (thread, total) in [(0, 158), (1, 95)] {
        assert_eq!(times_of(&p, thread, &[R]).total_ns, total);
        let r = find(&p.threads[thread].tree, &[R]);
        let l = p.latency_ns(r).expect("latency");
        assert_eq!((l.count, l.sum_ns), (1, total), "thread {thread}");
    }
}

#[test]
fn a_burst_reads_the_mean_of_a_coarse_clock() {
    // The clock reads in steps of 25 ticks: a call of 60 ticks reads as 50
    // or 75 (here 10 and 22 of 32 calls, mean 67.2 with the others; the
    // median would say 75); the first call ran cold (900) and is left out.
    let mut s = vec![root(R, 0)];
    let mut ts = 100;
    let mut inners = vec![900u64];
    inners.extend(std::iter::repeat_n(50, 10));
    inners.extend(std::iter::repeat_n(75, 21));
    for &d in &inners {
        s.push(enter(EMPTY, ts));
        s.push(exit(EMPTY, ts + d));
        ts += d + 50;
    }
    s.push(root_exit(R, ts + 100));
    let mut b = CctBuilder::new(NS);
    b.process(1, &s);
    let p = b.finish();
    let bursts = p.threads[0].bursts;
    assert_eq!(bursts.used, 1);
    // (10 * 50 + 21 * 75) / 31 = 66.94 ticks, plus gaps of 50.
    let expected_ps = ((10 * 50 + 21 * 75) as f64 / 31.0 + 50.0) * 1000.0;
    assert!(
        (bursts.median_pair_ps as f64 - expected_ps).abs() < 10.0,
        "{bursts:?} against {expected_ps}"
    );
}

#[test]
fn disturbed_short_or_insane_bursts_are_left_out_but_their_time_still_goes() {
    let run = |s: Vec<Event>, calibration: Option<Calibration>| {
        let mut b = CctBuilder::new(NS);
        if let Some(c) = calibration {
            b.set_calibration(c);
        }
        b.process(1, &s);
        b.finish()
    };
    // A wait for ring space inside the burst: left out; the wait (50) is
    // adjust-time once, the rest of the burst (316) too.
    let mut s = vec![root(R, 0)];
    let mut bs = burst(10, 32, 6, 4);
    bs.insert(20, adjust(50));
    for e in bs.iter_mut().skip(21) {
        e.ts += 50;
    }
    s.extend(bs);
    s.extend([enter(A, 400), exit(A, 430), root_exit(R, 500)]);
    let p = run(s, None);
    let t = &p.threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (0, 1));
    assert_eq!(find(&t.tree, &[R]).adjust_ticks, 366);
    assert_eq!(find(&t.tree, &[R, A]).recal.calls, 0);
    // Too few calls (the thread was told to stop).
    let mut s = vec![root(R, 0)];
    s.extend(burst(10, 8, 6, 4));
    s.push(root_exit(R, 200));
    let t = &run(s, None).threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (0, 1));
    assert_eq!(find(&t.tree, &[R]).adjust_ticks, 76);
    // Cut short by the end of the thread, with a call open.
    let mut s = vec![root(R, 0)];
    s.extend(burst(10, 32, 6, 4));
    s.pop();
    s.push(ev(EventKind::ThreadEnd, 1, 400));
    let p = run(s, None);
    let t = &p.threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (0, 1));
    assert_eq!(find(&t.tree, &[R]).incomplete, 1);
    assert!(find(&t.tree, &[R]).children.is_empty());
    // The stream stops inside a burst (profiling ended): the burst's time
    // still goes, up to its last exit.
    let mut s = vec![root(R, 0)];
    s.extend(burst(10, 20, 6, 4));
    let t = &run(s, None).threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (1, 0));
    let r = find(&t.tree, &[R]);
    assert_eq!((r.total_ticks, r.adjust_ticks, r.incomplete), (206, 196, 1));
    // A pair of 10 against a calibration of 50 (the first burst of a thread
    // that ran in the interpreter looks the other way: far dearer).
    let mut s = vec![root(R, 0)];
    s.extend(burst(10, 32, 6, 4));
    s.push(root_exit(R, 400));
    let t = &run(s.clone(), Some(Calibration::new(25.0, 25.0))).threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (0, 1));
    let t = &run(s, Some(Calibration::new(5.0, 5.0))).threads[0];
    assert_eq!((t.bursts.used, t.bursts.rejected), (1, 0));
}

#[test]
fn a_thread_is_charged_the_median_of_its_latest_bursts() {
    // Bursts measuring t_I 6, 30 (a slow moment) and 8 ticks, t_O 4, one
    // per root call: the call after the third is charged the median, 8.
    let mut s = Vec::new();
    let mut at = 0;
    for inner in [6, 30, 8] {
        s.push(root(R, at));
        s.extend(burst(at + 10, 32, inner, 4));
        at = burst_end(at + 10, 32, inner, 4) + 10;
        s.push(root_exit(R, at));
        at += 10;
    }
    s.extend([
        root(R, at),
        enter(A, at + 10),
        exit(A, at + 110),
        root_exit(R, at + 200),
    ]);
    let mut b = CctBuilder::new(NS);
    b.process(1, &s);
    let p = b.finish();
    let t = &p.threads[0];
    assert_eq!(t.bursts.used, 3);
    assert_eq!(t.bursts.min_pair_ps, 10_000);
    assert_eq!(t.bursts.median_pair_ps, 12_000);
    assert_eq!(t.bursts.max_pair_ps, 34_000);
    assert_eq!(times_of(&p, 0, &[R, A]).self_ns, 92);
}

#[test]
fn in_session_figures_survive_merging_and_snapshots() {
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(2.0, 1.0));
    for thread in [1, 2] {
        let mut s = vec![root(R, 0)];
        s.extend(burst(10, 32, 6, 4));
        s.extend([enter(A, 400), exit(A, 430), root_exit(R, 500)]);
        b.process(thread, &s);
    }
    let p = b.finish();
    let m = p.merged();
    let a = find(&m.tree, &[R, A]);
    assert_eq!((a.calls, a.recal.calls), (2, 2));
    let i = m.tree.nodes.iter().position(|n| n.method == A).unwrap();
    assert_eq!(p.times(&m.tree)[i].self_ns, 2 * (30 - 6));
    let mut file = Vec::new();
    p.write_snapshot(&mut file).unwrap();
    let back = Profile::read_snapshot(&mut file.as_slice()).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.threads[1].bursts.used, 1);
}

/// `events` with a multi-slot record of an unknown kind after each one,
/// of every length, whose payload slots read as events would be method
/// entries, exits and a root's exit; the head carries the time of the
/// event before it.
fn with_records(events: &[Event]) -> Vec<Event> {
    use sprig_wire::record::{MAX_RECORD_WORDS, RecordSlots};
    let look_like = |e: Event| [e.ts, e.id as u64 | (e.kind as u64) << 32];
    let mut words = Vec::new();
    words.extend(look_like(enter(B, 1)));
    words.extend(look_like(exit(A, 2)));
    words.extend(look_like(root_exit(R, 3)));
    let mut out = Vec::new();
    for (i, e) in events.iter().enumerate() {
        out.push(*e);
        let n = 1 + i % MAX_RECORD_WORDS;
        let rec = RecordSlots::new(0x5eed_0000 + i as u32, e.ts, &words[..n]).unwrap();
        out.extend_from_slice(rec.as_slice());
    }
    out
}

/// The threads and issues of a profile, for comparing two streams.
fn shape(b: &CctBuilder) -> String {
    let p = b.snapshot();
    format!("{:?}\n{:?}\n{:?}", p.threads, p.warnings, b.issues())
}

/// Records of any kind are stepped over exactly, wherever the stream is
/// cut into batches (inside a record too): the tree, its times and the
/// stream's issues are those of the same events without the records.
#[test]
fn records_are_stepped_over_wherever_the_batches_are_cut() {
    let plain = known_stream();
    let mut want = CctBuilder::new(NS);
    want.process(1, &plain);
    let stream = with_records(&plain);
    assert!(stream.len() > 2 * plain.len());
    for cut in 0..=stream.len() {
        let mut b = CctBuilder::new(NS);
        b.process(1, &stream[..cut]);
        b.process(1, &stream[cut..]);
        assert_eq!(shape(&b), shape(&want), "cut at {cut}");
    }
}

/// A reset inside a batch that holds records: it falls where it falls
/// without them.
#[test]
fn a_reset_lands_between_records_as_between_events() {
    let run = |f: fn(&[Event]) -> Vec<Event>| {
        let mut b = CctBuilder::new(NS);
        b.process(
            1,
            &f(&[root(R, 120), enter(A, 125), exit(A, 130), enter(B, 140)]),
        );
        b.reset_at(150);
        b.process(
            1,
            &f(&[
                enter(A, 145),
                exit(A, 148),
                adjust(1),
                enter(A, 160),
                exit(A, 170),
                exit(B, 180),
                root_exit(R, 190),
            ]),
        );
        shape(&b)
    };
    assert_eq!(run(with_records), run(|e| e.to_vec()));
}

/// The slots of a wait record of `ticks` ending at `end`.
fn wait(kind: sprig_wire::WaitKind, class: u32, end: u64, ticks: u64) -> Vec<Event> {
    sprig_wire::Wait {
        kind,
        class,
        start: end - ticks,
        ticks,
        owner: 0,
    }
    .record(end)
    .unwrap()
    .as_slice()
    .to_vec()
}

/// A wait is a row of its own under the frame open when its record comes:
/// its time leaves that frame's self time, and it is no call (no probe
/// cost is charged for it, to it or to the frame).
#[test]
fn a_wait_is_a_row_under_the_frame_that_waited() {
    use sprig_wire::{WaitKind, wait_row_id};
    // R { A(10..30) A(40..70) B(80 { A(90..95) wait 12 } ..100) } at 0..110
    let mut s = known_stream();
    let at = s.iter().position(|e| e.ts == 95).unwrap() + 1;
    s.splice(at..at, wait(WaitKind::Blocked, 7, 99, 12));
    let mut b = CctBuilder::new(NS);
    b.set_calibration(Calibration::new(2.0, 1.0));
    b.apply_message(&Message::WaitClass {
        id: 7,
        class: "pkg.Lock".into(),
    });
    b.process(1, &s);
    let p = b.finish();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let row = wait_row_id(WaitKind::Blocked, 7);
    let t = &p.threads[0].tree;
    let w = find(t, &[R, B, row]);
    assert_eq!((w.calls, w.total_ticks), (1, 12));
    assert_eq!(find(t, &[R, B]).child_calls, 1, "the wait is no call");
    assert_eq!(p.display_name(row), "(blocked on pkg.Lock)");
    assert_eq!(p.method(row).monitor(), Some("pkg.Lock"));
    let get = |path: &[u32]| times_of(&p, 0, path);
    // B as in calibration_subtraction_by_hand, its own 15 less the wait:
    // self 15 - 12 - 2 - 1 = 0; total 0 + 3 + 12.
    assert_eq!(
        (get(&[R, B, row]).self_ns, get(&[R, B, row]).total_ns),
        (12, 12)
    );
    assert_eq!((get(&[R, B]).self_ns, get(&[R, B]).total_ns), (0, 15));
    assert_eq!(get(&[R]).total_ns, 110 - 5 * 2 - 4);
    // A wait outside every root context is dropped; a class never named
    // reads as `?`.
    let mut b = CctBuilder::new(NS);
    let mut s = wait(WaitKind::Waiting, 3, 5, 5);
    s.extend(known_stream());
    s.splice(4..4, wait(WaitKind::Waiting, 3, 10, 1));
    b.process(1, &s);
    let p = b.finish();
    let row = wait_row_id(WaitKind::Waiting, 3);
    assert_eq!(p.threads[0].tree.nodes.len(), 5, "one wait row more");
    assert_eq!(find(&p.threads[0].tree, &[R, row]).calls, 1);
    assert_eq!(p.display_name(row), "(waiting on ?)");
}
