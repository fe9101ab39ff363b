//! The model's derived figures on hand-made trees.

use super::*;

fn leaf(method: u32, calls: u64, total: u64) -> Node {
    Node {
        method,
        calls,
        total_ticks: total,
        ..Node::default()
    }
}

#[test]
fn sample_bound_by_hand() {
    // 100 samples of 1 ms out of 1000: 1.96 * 1 ms * sqrt(100 * 0.9)
    assert_eq!(sample_bound_ns(100, 100_000_000, 1000), 18_594_193);
    // every sample of the window: nothing left to vary
    assert_eq!(sample_bound_ns(50, 50_000_000, 50), 0);
    assert_eq!(sample_bound_ns(0, 0, 1000), 0);
    // a window smaller than the count (inconsistent input): no panic
    assert_eq!(sample_bound_ns(5, 5_000, 2), 0);
    // one sample of 1 ms out of many: about 1.96 ms
    assert_eq!(sample_bound_ns(1, 1_000_000, 1_000_000), 1_959_999);
}

#[test]
fn ticks_convert_with_frequency() {
    assert_eq!(ticks_to_ns(3_000, 3_000_000_000), 1_000);
    assert_eq!(ticks_to_ns(7, 0), 7);
    assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
}

#[test]
fn calibration_from_ticks_and_sanitised() {
    let c = Calibration::from_ticks(30.0, 15.0, 3_000_000_000);
    assert!((c.inner_ns - 10.0).abs() < 1e-9);
    assert!((c.outer_ns - 5.0).abs() < 1e-9);
    let c = Calibration::new(f64::NAN, -3.0);
    assert_eq!((c.inner_ns, c.outer_ns), (0.0, 0.0));
}

#[test]
fn exact_formula_by_hand() {
    // t_I = 20, t_O = 7
    // child: 10 calls, 400 ns, no children: self = 400 - 10*20 = 200 = total
    // root: 2 calls, 1000 ns measured, 100 ns adjust, 10 child calls:
    //   own = (1000 - 100) - 400 = 500; self = 500 - 2*20 - 10*7 = 390
    //   total = 390 + 200 = 590
    let mut p = Profile::new(1_000_000_000);
    p.calibration = Some(Calibration::new(20.0, 7.0));
    let mut t = Tree::default();
    let r = t.push(
        None,
        Node {
            adjust_ticks: 100,
            ..leaf(1, 2, 1000)
        },
    );
    t.push(Some(r), leaf(2, 10, 400));
    t.recount();
    assert_eq!(t.nodes[0].child_calls, 10);
    let times = p.times(&t);
    assert_eq!(times[1].total_ns, 200);
    assert_eq!(times[1].self_ns, 200);
    assert_eq!(times[0].self_ns, 390);
    assert_eq!(times[0].total_ns, 590);
    assert_eq!(times[0].raw_total_ns, 1000);
    assert_eq!(times[0].adjust_ns, 100);
    assert_eq!(p.probe_cost_ns(2, 10), 110);
    // Probe cost taken out: the child's own 200, the root's 110 and,
    // in its subtree, the child's.
    assert_eq!((times[1].probe_self_ns, times[1].probe_ns), (200, 200));
    assert_eq!((times[0].probe_self_ns, times[0].probe_ns), (110, 310));
    assert!(!times[0].probe_bound() && !times[1].probe_bound());
}

#[test]
fn a_time_mostly_probe_cost_is_probe_bound() {
    // 10 calls of 25 ns with t_I = 20: 50 ns left, 200 taken out.
    let mut p = Profile::new(1_000_000_000);
    p.calibration = Some(Calibration::new(20.0, 10.0));
    let mut t = Tree::default();
    let r = t.push(None, leaf(1, 1, 10_000));
    t.push(Some(r), leaf(2, 10, 250));
    t.recount();
    let times = p.times(&t);
    assert_eq!((times[1].self_ns, times[1].probe_self_ns), (50, 200));
    assert!(times[1].probe_bound() && times[1].self_probe_bound());
    // The root's 9,750 ns of own code carry 20 + 10 * 10 ns.
    assert_eq!(times[0].probe_ns, 320);
    assert!(!times[0].probe_bound() && !times[0].self_probe_bound());
    // A subtraction clamped at 0 counts only what it took.
    let mut t = Tree::default();
    t.push(None, leaf(1, 3, 30));
    t.recount();
    let times = p.times(&t);
    assert_eq!((times[0].self_ns, times[0].probe_self_ns), (0, 30));
    assert!(times[0].probe_bound());
    p.calibration = None;
    let times = p.times(&t);
    assert_eq!(times[0].probe_ns, 0);
    assert!(!times[0].probe_bound());
}

#[test]
fn probe_model_gives_true_times_back() {
    // Probes cost e1 before and e2 after the entry timestamp, x1 before
    // and x2 after the exit timestamp: t_I = e2 + x1, t_O = e1 + x2.
    // A (own code 50 ns) calls B (100 ns) once:
    //   B measured = e2 + 100 + x1
    //   A measured = e2 + 50 + (e1 + B measured + x2) + x1
    let (e1, e2, x1, x2) = (3u64, 4u64, 6u64, 2u64);
    let b = e2 + 100 + x1;
    let a = e2 + 50 + e1 + b + x2 + x1;
    let mut p = Profile::new(1_000_000_000);
    p.calibration = Some(Calibration::new((e2 + x1) as f64, (e1 + x2) as f64));
    let mut t = Tree::default();
    let r = t.push(None, leaf(1, 1, a));
    t.push(Some(r), leaf(2, 1, b));
    t.recount();
    let times = p.times(&t);
    assert_eq!((times[1].self_ns, times[1].total_ns), (100, 100));
    assert_eq!((times[0].self_ns, times[0].total_ns), (50, 150));
}

#[test]
fn exact_never_below_zero() {
    let mut p = Profile::new(1_000_000_000);
    p.calibration = Some(Calibration::new(50.0, 50.0));
    let mut t = Tree::default();
    let r = t.push(None, leaf(1, 1, 120));
    t.push(Some(r), leaf(2, 1, 100));
    t.recount();
    // child: 100 - 50 = 50; root own: 20 - 50 - 50 -> 0, total 0 + 50
    let times = p.times(&t);
    assert_eq!(times[1].total_ns, 50);
    assert_eq!(times[0].self_ns, 0);
    assert_eq!(times[0].total_ns, 50);
    // adjust larger than measured
    let mut t = Tree::default();
    t.push(
        None,
        Node {
            adjust_ticks: 500,
            ..leaf(1, 1, 100)
        },
    );
    assert_eq!(p.times(&t)[0].total_ns, 0);
}

#[test]
fn malformed_trees_do_not_panic_or_loop() {
    let mut p = Profile::new(0);
    let mut t = Tree::default();
    t.nodes.push(Node {
        children: vec![0, 1, 99],
        ..leaf(1, 1, 10)
    });
    t.nodes.push(Node {
        children: vec![0],
        ..leaf(2, 1, 5)
    });
    t.roots = vec![0, 1, 7];
    t.recount();
    assert_eq!(t.parents(), vec![None, Some(0)]);
    assert_eq!(t.depths(), vec![0, 1]);
    let _ = p.times(&t);
    p.threads.push(ThreadProfile {
        virtual_threads: 0,
        tree: t,
        ..ThreadProfile::default()
    });
    let m = p.merged();
    assert_eq!(m.tree.nodes.len(), 3);
    let opts = crate::report::RenderOptions {
        back_traces: vec![1, 2],
        merged: true,
        ..Default::default()
    };
    for f in [
        crate::report::Format::Text,
        crate::report::Format::Json,
        crate::report::Format::Collapsed,
    ] {
        let mut out = Vec::new();
        f.renderer().render(&p, &opts, &mut out).unwrap();
    }
    let mut snap = Vec::new();
    p.write_snapshot(&mut snap).unwrap();
    assert!(Profile::read_snapshot(&mut snap.as_slice()).is_ok());
}

#[test]
fn merged_adds_same_paths() {
    let mut p = Profile::new(0);
    for (index, extra) in [(1u32, 3u32), (2, 4)] {
        let mut t = Tree::default();
        let r = t.push(None, leaf(1, 1, 100));
        t.push(Some(r), leaf(2, 4, 40));
        t.push(Some(r), leaf(extra, 1, 10));
        t.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index,
            java_id: index as u64,
            name: format!("t{index}"),
            tree: t,
            bursts: Default::default(),
            samples: Default::default(),
        });
    }
    let m = p.merged();
    assert_eq!(m.tree.roots.len(), 1);
    let root = &m.tree.nodes[m.tree.roots[0] as usize];
    assert_eq!(
        (root.calls, root.total_ticks, root.child_calls),
        (2, 200, 10)
    );
    let kids: Vec<(u32, u64, u64)> = root
        .children
        .iter()
        .map(|&c| {
            let n = &m.tree.nodes[c as usize];
            (n.method, n.calls, n.total_ticks)
        })
        .collect();
    assert_eq!(kids, vec![(2, 8, 80), (3, 1, 10), (4, 1, 10)]);
}

#[test]
fn group_virtual_merges_virtual_threads_only() {
    let mut p = Profile::new(0);
    // thread 0 platform, 1-3 virtual, 4 platform; each one root call
    for (index, is_virtual) in [(0u32, 0u64), (1, 1), (2, 1), (3, 1), (4, 0)] {
        let mut t = Tree::default();
        let r = t.push(None, leaf(1, 1, 100));
        t.push(Some(r), leaf(2 + index % 2, 2, 40));
        t.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: is_virtual,
            index,
            java_id: 10 + u64::from(index),
            name: format!("t{index}"),
            tree: t,
            bursts: Bursts {
                used: u64::from(index),
                median_pair_ps: 1000 * u64::from(index),
                min_pair_ps: 500 * u64::from(index),
                max_pair_ps: 2000 * u64::from(index),
                rejected: 1,
            },
            samples: Default::default(),
        });
    }
    assert_eq!((p.thread_count(), p.virtual_threads()), (5, 3));
    // a snapshot keeps which threads were virtual
    let mut snap = Vec::new();
    p.write_snapshot(&mut snap).unwrap();
    assert_eq!(Profile::read_snapshot(&mut snap.as_slice()).unwrap(), p);
    p.group_virtual();
    let names: Vec<(u32, &str, u64)> = p
        .threads
        .iter()
        .map(|t| (t.index, t.name.as_str(), t.virtual_threads))
        .collect();
    assert_eq!(
        names,
        vec![(0, "t0", 0), (1, "virtual threads (3)", 3), (4, "t4", 0)]
    );
    assert_eq!((p.thread_count(), p.virtual_threads()), (5, 3));
    let v = &p.threads[1];
    assert_eq!(v.tree.roots.len(), 1);
    let root = &v.tree.nodes[v.tree.roots[0] as usize];
    assert_eq!((root.calls, root.total_ticks), (3, 300));
    let kids: Vec<(u32, u64)> = root
        .children
        .iter()
        .map(|&c| {
            (
                v.tree.nodes[c as usize].method,
                v.tree.nodes[c as usize].calls,
            )
        })
        .collect();
    // threads 1 and 3 call method 3, thread 2 method 2
    assert_eq!(kids, vec![(3, 4), (2, 2)]);
    assert_eq!(
        v.bursts,
        Bursts {
            used: 6,
            rejected: 3,
            min_pair_ps: 500,
            median_pair_ps: 2000,
            max_pair_ps: 6000,
        }
    );
    // a second grouping changes nothing; one virtual thread stays as it is
    let once = p.clone();
    p.group_virtual();
    assert_eq!(p, once);
}
