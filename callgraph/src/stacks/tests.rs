//! The stack-sample model on synthetic rounds.

use sprig_wire::control::{EdgeCount, EdgeMethod, EdgeSamples, SampledState, StackSample};

use super::*;
use crate::profile::{MethodInfo, Metric};

const MS: u64 = 1_000_000;

/// Frame ids of the synthetic program.
const RUN: u32 = 1; // java.lang.Thread.run
const LAMBDA: u32 = 2; // app.A.lambda$main$0
const WORK: u32 = 3; // app.A.work
const HEAVY: u32 = 4; // app.A.heavy
const LIGHT: u32 = 5; // app.A.light
const LOCK: u32 = 6; // app.A.locked
const HASH: u32 = 7; // java.util.HashMap.get
const PHASE: u32 = 8; // app.A.phase (only in the first half)
const MAIN: u32 = 9; // app.A.main

fn profile() -> StackProfile {
    let mut p = StackProfile::new(20 * MS);
    for (id, class, name) in [
        (RUN, "java.lang.Thread", "run"),
        (LAMBDA, "app.A", "lambda$main$0"),
        (WORK, "app.A", "work"),
        (HEAVY, "app.A", "heavy"),
        (LIGHT, "app.A", "light"),
        (LOCK, "app.A", "locked"),
        (HASH, "java.util.HashMap", "get"),
        (PHASE, "app.A", "phase"),
        (MAIN, "app.A", "main"),
    ] {
        p.add_method(id, MethodInfo::new(class, name, "()V"));
    }
    p.add_thread(10, "worker");
    p.add_thread(11, "blocked");
    p
}

/// A sample, frames given outermost first (as read), sent leaf first.
fn sample(thread: u64, state: SampledState, cpu_ns: u64, outer_first: &[u32]) -> StackSample {
    StackSample {
        thread,
        state,
        cpu_ns,
        frames: outer_first.iter().rev().copied().collect(),
        truncated: false,
    }
}

/// 100 rounds, 20 ms apart: the worker runs heavy 7 rounds in 10 and
/// light 3, the other thread is blocked in `locked` all along.
fn worker_and_blocked() -> StackProfile {
    let mut p = profile();
    for r in 0..100u64 {
        let leaf = if r % 10 < 7 { HEAVY } else { LIGHT };
        p.add_round(
            1_000 * MS + r * 20 * MS,
            5_000,
            &[
                sample(
                    10,
                    SampledState::Running,
                    20 * MS,
                    &[RUN, LAMBDA, WORK, leaf],
                ),
                sample(11, SampledState::Blocked, 0, &[RUN, LAMBDA, LOCK]),
            ],
        );
    }
    p
}

fn total_of(p: &StackProfile, m: u32, view: View) -> u64 {
    p.counts.get(&m).map_or(0, |c| c.of(view).1)
}

#[test]
fn counts_per_node_self_and_total() {
    let p = worker_and_blocked();
    assert_eq!(p.rounds, 100);
    assert_eq!(p.wall_samples, 200);
    let t = &p.threads[&10];
    assert_eq!(t.name, "worker");
    let tree = &t.tree;
    // run -> lambda -> work -> {heavy, light}: five nodes, one root
    assert_eq!(tree.roots.len(), 1);
    assert_eq!(tree.nodes.len(), 5, "{:?}", tree.nodes);
    let totals = tree.totals(View::Wall);
    let node = |m: u32| tree.nodes.iter().position(|n| n.method == m).expect("node");
    assert_eq!(totals[node(RUN)].0, 100);
    assert_eq!(totals[node(WORK)].0, 100);
    assert_eq!(tree.nodes[node(WORK)].wall_self, 0);
    assert_eq!(tree.nodes[node(HEAVY)].wall_self, 70);
    assert_eq!(tree.nodes[node(LIGHT)].wall_self, 30);
    // wall weight: the 20 ms between rounds
    assert_eq!(totals[node(HEAVY)].1, 70 * 20 * MS);
    // hot methods by self, then total
    let hot = p.hot_methods(View::Wall);
    assert_eq!(hot[0], (LOCK, 100, 100));
    assert_eq!(hot[1], (HEAVY, 70, 70));
    assert_eq!(hot[2], (LIGHT, 30, 30));
    assert_eq!(total_of(&p, RUN, View::Wall), 200);
    assert_eq!(total_of(&p, WORK, View::Wall), 100);
}

#[test]
fn a_blocked_thread_counts_in_wall_not_in_cpu() {
    let p = worker_and_blocked();
    assert_eq!(p.cpu_samples, 100);
    assert_eq!(p.threads[&11].wall_samples, 100);
    assert_eq!(p.threads[&11].cpu_samples, 0);
    assert_eq!(total_of(&p, LOCK, View::Wall), 100);
    assert_eq!(total_of(&p, LOCK, View::Cpu), 0);
    assert_eq!(total_of(&p, HEAVY, View::Cpu), 70);
    // In the profile model too: the CPU view has no `locked` node time.
    let cpu = p.to_profile(ConvertOptions {
        view: View::Cpu,
        fold_jdk: false,
    });
    let merged = cpu.merged();
    let w = cpu.weights(&merged.tree, Metric::Samples);
    let locked: u64 = merged
        .tree
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.method == LOCK)
        .map(|(i, _)| w[i].total)
        .sum();
    assert_eq!(locked, 0);
    let wall = p.to_profile(ConvertOptions {
        view: View::Wall,
        fold_jdk: false,
    });
    let merged = wall.merged();
    let w = wall.weights(&merged.tree, Metric::Samples);
    let roots: u64 = merged.tree.roots.iter().map(|&r| w[r as usize].total).sum();
    assert_eq!(roots, 200);
    // a native method that used the CPU counts; one that did not, not
    let mut q = profile();
    q.add_round(0, 0, &[sample(10, SampledState::Native, 0, &[RUN, WORK])]);
    q.add_round(
        20 * MS,
        0,
        &[sample(10, SampledState::Native, 0, &[RUN, WORK])],
    );
    q.add_round(
        40 * MS,
        0,
        &[sample(10, SampledState::Native, 19 * MS, &[RUN, WORK])],
    );
    assert_eq!((q.wall_samples, q.cpu_samples), (3, 1));
    // the CPU weight is the CPU time used
    assert_eq!(q.counts[&WORK].cpu_total_ns, 19 * MS);
    // A thread JVMTI calls runnable that used (almost) no CPU since its
    // previous sample, as HotSpot's Reference Handler waiting for the
    // pending list inside the VM, is not on the CPU.
    let mut r = profile();
    for (i, cpu) in [u64::MAX, 0, 100_000, MS].into_iter().enumerate() {
        r.add_round(
            i as u64 * 20 * MS,
            0,
            &[sample(10, SampledState::Running, cpu, &[RUN, WORK])],
        );
    }
    // The first sample (CPU unknown) and the last one (1 ms of 20).
    assert_eq!((r.wall_samples, r.cpu_samples), (4, 2));
}

#[test]
fn edge_activations_count_frames_below_the_common_part() {
    let mut p = profile();
    let rounds: [&[u32]; 4] = [
        &[RUN, WORK, HEAVY],       // all new: 3
        &[RUN, WORK, HEAVY],       // same stack: 0
        &[RUN, WORK, LIGHT],       // light is new: 1
        &[RUN, WORK, HEAVY, HASH], // heavy and get: 2
    ];
    for (i, s) in rounds.iter().enumerate() {
        p.add_round(
            i as u64 * 20 * MS,
            0,
            &[sample(10, SampledState::Running, u64::MAX, s)],
        );
    }
    let tree = &p.threads[&10].tree;
    let act = |path: &[u32]| {
        (0..tree.nodes.len() as u32)
            .find(|&n| tree.path(n) == path)
            .map(|n| tree.nodes[n as usize].activations)
    };
    assert_eq!(act(&[RUN]), Some(1));
    assert_eq!(act(&[RUN, WORK]), Some(1));
    assert_eq!(act(&[RUN, WORK, HEAVY]), Some(2));
    assert_eq!(act(&[RUN, WORK, LIGHT]), Some(1));
    assert_eq!(act(&[RUN, WORK, HEAVY, HASH]), Some(1));
    // A sample without Java frames: the next stack is all new.
    p.add_round(100 * MS, 0, &[sample(10, SampledState::Running, 0, &[])]);
    p.add_round(
        120 * MS,
        0,
        &[sample(10, SampledState::Running, 0, &[RUN, WORK, LIGHT])],
    );
    let tree = &p.threads[&10].tree;
    let n = (0..tree.nodes.len() as u32)
        .find(|&n| tree.path(n) == [RUN])
        .unwrap();
    assert_eq!(tree.nodes[n as usize].activations, 2);
    assert_eq!(p.threads[&10].empty, 1);
}

#[test]
fn suggested_roots_skip_entry_and_jdk_frames_and_pick_the_stable_one() {
    let mut p = profile();
    // 200 rounds on one CPU-bound thread: main -> lambda -> work -> heavy
    // (in HashMap.get half the time) all along; in the first half, a
    // second thread runs main -> phase -> light, in the second half it
    // sleeps. `phase` holds 25% over the run but 50% then 0%.
    p.add_thread(12, "phased");
    for r in 0..200u64 {
        let mut s = vec![sample(
            10,
            SampledState::Running,
            20 * MS,
            if r % 2 == 0 {
                &[MAIN, LAMBDA, WORK, HEAVY, HASH]
            } else {
                &[MAIN, LAMBDA, WORK, HEAVY]
            },
        )];
        if r < 100 {
            s.push(sample(
                12,
                SampledState::Running,
                20 * MS,
                &[MAIN, PHASE, LIGHT],
            ));
        } else {
            s.push(sample(12, SampledState::Sleeping, 0, &[MAIN, PHASE]));
        }
        p.add_round(r * 20 * MS, 0, &s);
    }
    let opts = SuggestOptions {
        view: View::Cpu,
        max: 5,
        ..SuggestOptions::default()
    };
    let roots = suggest_roots(&p, &opts);
    let names: Vec<&str> = roots.iter().map(|r| r.pattern.as_str()).collect();
    // main is an entry frame, HashMap.get is the JDK's; lambda holds all
    // of its samples in work and work all of its in heavy: heavy is the
    // deepest; phase and light are not stable.
    assert_eq!(names, ["app.A::heavy"], "{roots:?}");
    let r = &roots[0];
    assert!((r.share - 200.0 / 300.0).abs() < 1e-9, "{r:?}");
    assert_eq!(r.window_shares.len(), 4, "{r:?}");
    // heavy entered once, HashMap.get is JDK: one activation in 4 s
    assert_eq!(r.activations, 1);
    // Without call-edge bursts no overhead is predicted.
    assert_eq!((r.sampled_pct, r.exact_pct), (None, None), "{r:?}");
    assert_eq!(r.edge_calls_per_sec, None, "{r:?}");
    // The threads' CPU time under the application's code: 4 s and 2 s
    // over a run of 4 s.
    let app = app_cpu_per_s(&p);
    assert!((app - 1.5).abs() < 0.02, "{app}");
    // Bursts whose entries below heavy came 1 µs of CPU time apart: a
    // million calls a CPU second, at 58 ns a pair exact and 8 sampled; and
    // heavy holds one CPU second a second, so a million a wall second.
    let method = |name: &str| EdgeMethod {
        class: "app.A".into(),
        name: name.into(),
        descriptor: "()V".into(),
    };
    let mut edges = EdgeProfile::default();
    edges.add(&EdgeSamples {
        bursts: 1,
        samples: 10,
        effective_ns: 50 * MS,
        cost_ns: 0,
        dropped: 0,
        edges: vec![EdgeCount {
            caller: method("work"),
            callee: method("heavy"),
            samples: 10,
            intervals: 8,
            interval_cpu_ns: 8_000,
        }],
        intervals: 8,
        interval_cpu_ns: 8_000,
        path_ns: 0,
        ..EdgeSamples::default()
    });
    let mut estimated = roots.clone();
    with_edges(&mut estimated, &edges, &p);
    let r = &estimated[0];
    assert_eq!(r.edge_calls_per_cpu_s, Some(1e6), "{r:?}");
    let wall = r.edge_calls_per_sec.unwrap();
    assert!((wall / 1e6 - 1.0).abs() < 0.01, "{r:?}");
    assert!((r.exact_pct.unwrap() - 5.8).abs() < 1e-9, "{r:?}");
    assert!((r.sampled_pct.unwrap() - 0.8).abs() < 1e-9, "{r:?}");
    // Counting windows that counted 3 million entries a wall second, all
    // along work -> heavy: heavy holds one CPU second a second, so 3
    // million a CPU second, whatever the intervals said; and a pair of
    // 20 ns calibrated in this JVM instead of the benchmark's.
    edges.add(&EdgeSamples {
        counted: 300_000,
        counted_ns: 100 * MS,
        ..EdgeSamples::default()
    });
    edges.exact_pair_ns = Some(20.0);
    let mut counted = roots.clone();
    with_edges(&mut counted, &edges, &p);
    let r = &counted[0];
    assert!((r.edge_calls_per_sec.unwrap() - 3e6).abs() < 1.0, "{r:?}");
    assert!(
        (r.edge_calls_per_cpu_s.unwrap() / 3e6 - 1.0).abs() < 0.01,
        "{r:?}"
    );
    assert!((r.exact_pct.unwrap() / 6.0 - 1.0).abs() < 0.01, "{r:?}");
    assert!((r.sampled_pct.unwrap() / 2.4 - 1.0).abs() < 0.01, "{r:?}");

    // With every thread stable, work holding 70% in heavy stays the root.
    let q = worker_and_blocked();
    let roots = suggest_roots(
        &q,
        &SuggestOptions {
            max: 5,
            ..SuggestOptions::default()
        },
    );
    let names: Vec<&str> = roots.iter().map(|r| r.pattern.as_str()).collect();
    // work and lambda are on every sample of the worker: a loop, after
    // the units of work below it, and one root (work, lambda handing it
    // all of its time).
    assert_eq!(
        names,
        ["app.A::heavy", "app.A::light", "app.A::work"],
        "{roots:?}"
    );
    assert_eq!(roots[2].kind, RootKind::Loop, "{roots:?}");
    assert_eq!(roots[2].same_time, ["app.A::lambda$main$0"], "{roots:?}");
    assert!(!names.contains(&"java.lang.Thread::run"));
}

#[test]
fn overlap_of_identical_profiles_is_100_and_of_disjoint_0() {
    let a: Vec<MethodShare> = vec![("a.A::x".into(), 70.0), ("a.A::y".into(), 30.0)];
    let b: Vec<MethodShare> = vec![("a.A::x".into(), 7.0), ("a.A::y".into(), 3.0)];
    let c: Vec<MethodShare> = vec![("b.B::z".into(), 1.0)];
    assert!((overlap(&a, &b).percent - 100.0).abs() < 1e-9);
    assert_eq!(overlap(&a, &c).percent, 0.0);
    // 70/30 against 30/70: 30 + 30
    let d: Vec<MethodShare> = vec![("a.A::x".into(), 3.0), ("a.A::y".into(), 7.0)];
    let o = overlap(&a, &d);
    assert!((o.percent - 60.0).abs() < 1e-9, "{o:?}");
    assert_eq!(o.methods.len(), 2);
    // A profile against its own model form.
    let p = worker_and_blocked();
    let prof = p.to_profile(ConvertOptions {
        view: View::Wall,
        fold_jdk: false,
    });
    let shares = prof.method_self_shares();
    assert!((overlap(&shares, &shares).percent - 100.0).abs() < 1e-9);
    assert!(overlap(&[], &shares).percent == 0.0);
}

#[test]
fn fold_jdk_makes_one_frame_of_each_run_of_jdk_frames() {
    let mut p = profile();
    p.add_round(
        0,
        0,
        &[sample(10, SampledState::Running, 0, &[RUN, WORK, HASH])],
    );
    let folded = p.to_profile(ConvertOptions {
        view: View::Wall,
        fold_jdk: true,
    });
    let t = &folded.threads[0].tree;
    let names: Vec<String> = t
        .nodes
        .iter()
        .map(|n| folded.method(n.method).frame())
        .collect();
    assert_eq!(names, ["[jdk]::[jdk]", "app.A::work", "[jdk]::[jdk]"]);
    let unfolded = p.to_profile(ConvertOptions::default());
    assert_eq!(unfolded.threads[0].tree.nodes.len(), 3);
    assert_eq!(
        unfolded
            .method(unfolded.threads[0].tree.nodes[0].method)
            .frame(),
        "java.lang.Thread::run"
    );
}

#[test]
fn the_json_report_has_the_documented_shape() {
    let p = worker_and_blocked();
    let roots = suggest_roots(&p, &SuggestOptions::default());
    let mut out = Vec::new();
    write_json(
        &p,
        ConvertOptions {
            view: View::Wall,
            fold_jdk: false,
        },
        true,
        &roots,
        4242,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.starts_with("{\"version\":1,\"view\":\"wall\",\"samples\":200,"),
        "{text}"
    );
    assert!(
        text.contains("{\"class\":\"app.A\",\"method\":\"heavy\",\"descriptor\":\"()V\",\"self\":70,\"total\":70,\"native_self\":0}"),
        "{text}"
    );
    assert!(
        text.contains("\"command\":\"sprig profile 4242 --root 'app.A::work'\""),
        "{text}"
    );
    // the merged tree carries Whaley's activations: each thread entered
    // run once; heavy was entered at rounds 0, 10, ..., 90
    assert!(
        text.contains(
            "\"tree\":[{\"class\":\"java.lang.Thread\",\"method\":\"run\",\"self\":0,\"total\":200,\"activations\":2,"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "{\"class\":\"app.A\",\"method\":\"heavy\",\"self\":70,\"total\":70,\"activations\":10,\"children\":[]}"
        ),
        "{text}"
    );
}

#[test]
fn deep_and_truncated_stacks() {
    let mut p = profile();
    let deep: Vec<u32> = (0..5000).map(|i| 100 + (i % 3)).collect();
    for id in 100..103 {
        p.add_method(id, MethodInfo::new("app.R", &format!("r{id}"), "()V"));
    }
    let mut s = sample(10, SampledState::Running, 0, &deep);
    s.truncated = true;
    p.add_round(0, 0, &[s.clone()]);
    p.add_round(20 * MS, 0, &[s]);
    assert_eq!(p.truncated, 2);
    // recursion counts a method once a sample
    assert_eq!(p.counts[&100].wall_total, 2);
    let prof = p.to_profile(ConvertOptions {
        view: View::Wall,
        fold_jdk: false,
    });
    assert_eq!(
        prof.method(prof.threads[0].tree.nodes[0].method).class,
        "[truncated]"
    );
    // the truncated pseudo-frame is no entry frame, nor a candidate root
    assert!(p.entry_frames.is_empty());
    let mut out = Vec::new();
    write_json(&p, ConvertOptions::default(), false, &[], 1, &mut out).unwrap();
}

/// A leaf both children call (a helper such as a spin loop) holds all of
/// the parent's samples, but the parent does not call it: the descent
/// from a candidate only goes to the methods it calls directly.
#[test]
fn suggested_roots_descend_only_to_direct_callees() {
    const SPIN: u32 = 20;
    let mut p = profile();
    p.add_method(SPIN, MethodInfo::new("app.A", "spin", "()V"));
    for r in 0..200u64 {
        let mid = if r % 10 < 7 { HEAVY } else { LIGHT };
        p.add_round(
            r * 20 * MS,
            0,
            &[sample(
                10,
                SampledState::Running,
                20 * MS,
                &[RUN, LAMBDA, WORK, mid, SPIN],
            )],
        );
    }
    let roots = suggest_roots(
        &p,
        &SuggestOptions {
            max: 5,
            ..SuggestOptions::default()
        },
    );
    let names: Vec<&str> = roots.iter().map(|r| r.pattern.as_str()).collect();
    assert!(names.contains(&"app.A::work"), "{roots:?}");
    assert!(!names.contains(&"app.A::lambda$main$0"), "{roots:?}");
}

/// A thread JVMTI calls runnable that used no CPU since its previous
/// sample (HotSpot's Reference Handler waiting inside the VM in
/// `waitForReferencePendingList`, reported RUNNABLE and not in native) is
/// off the CPU: the wall view counts it, the CPU view does not (but for
/// its first sample, whose CPU time is unknown).
#[test]
fn a_runnable_thread_that_used_no_cpu_is_not_on_the_cpu() {
    let mut p = profile();
    for r in 0..50u64 {
        p.add_round(
            1_000 * MS + r * 20 * MS,
            5_000,
            &[
                sample(10, SampledState::Running, 20 * MS, &[RUN, WORK, HEAVY]),
                sample(
                    11,
                    SampledState::Running,
                    if r == 0 { u64::MAX } else { 0 },
                    &[RUN, LOCK],
                ),
            ],
        );
    }
    assert_eq!(total_of(&p, LOCK, View::Wall), 50);
    assert_eq!(total_of(&p, HEAVY, View::Cpu), 50);
    assert_eq!(
        total_of(&p, LOCK, View::Cpu),
        1,
        "a runnable thread with no CPU time counted on the CPU"
    );
    assert_eq!(p.threads[&11].cpu_samples, 1);
}

/// The timer source's samples are of threads on the CPU whatever the time
/// between two messages: a thread busy for 1 ms of CPU after 1 s idle (one
/// message, 1 s after the previous) counts in the CPU view, with the
/// interval as its CPU time.
#[test]
fn timer_samples_count_on_the_cpu_after_a_long_gap() {
    let mut p = StackProfile::new(MS);
    p.source = Some(sprig_wire::control::StackSource::Timer);
    p.add_method(WORK, MethodInfo::new("app.A", "work", "()V"));
    p.add_thread(10, "worker");
    p.add_round(1_000 * MS, 0, &[]);
    p.add_round(
        2_000 * MS,
        10_000,
        &[sample(10, SampledState::Running, MS, &[WORK])],
    );
    assert_eq!(p.cpu_samples, 1);
    assert_eq!(total_of(&p, WORK, View::Cpu), 1);
}

/// The timer source's samples in a native method are on the CPU (the
/// timer fired on the thread's CPU clock) and counted apart; `java_only`
/// leaves them out of the CPU view, not out of the wall view.
#[test]
fn timer_samples_in_native_methods_count_apart_and_java_only_drops_them() {
    for java_only in [false, true] {
        let mut p = profile();
        p.source = Some(sprig_wire::control::StackSource::Timer);
        p.java_only = java_only;
        for r in 0..10u64 {
            let (state, leaf) = if r < 3 {
                (SampledState::Native, HASH)
            } else {
                (SampledState::Running, HEAVY)
            };
            p.add_round(
                r * 10 * MS,
                1_000,
                &[sample(10, state, 10 * MS, &[RUN, WORK, leaf])],
            );
        }
        assert_eq!(p.native_cpu_samples, 3, "java_only {java_only}");
        assert_eq!(p.threads[&10].native_cpu_samples, 3);
        assert_eq!(p.wall_samples, 10);
        assert_eq!(p.counts[&HASH].wall_total, 3);
        assert_eq!(p.counts[&HASH].native_self, 3);
        assert_eq!(p.counts[&HEAVY].native_self, 0);
        if java_only {
            assert_eq!(p.cpu_samples, 7);
            assert_eq!(p.counts[&HASH].cpu_total, 0);
            assert_eq!(p.counts[&WORK].cpu_total, 7);
        } else {
            assert_eq!(p.cpu_samples, 10);
            assert_eq!(p.counts[&HASH].cpu_total, 3);
        }
        let mut out = Vec::new();
        write_json(&p, ConvertOptions::default(), false, &[], 1, &mut out).expect("json");
        let text = String::from_utf8(out).expect("UTF-8");
        let want =
            format!("\"native_cpu_samples\":3,\"java_only\":{java_only},\"sprig_cpu\":null,");
        assert!(text.contains(&want), "{want} not in {text}");
    }
}

#[test]
fn own_cpu_goes_into_the_json_with_its_share() {
    let mut p = profile();
    p.own_cpu = Some(OwnCpu {
        handler_ns: 2 * MS,
        threads_ns: 3 * MS,
        target_cpu_ns: 1_000 * MS,
    });
    let mut out = Vec::new();
    write_json(&p, ConvertOptions::default(), false, &[], 1, &mut out).expect("json");
    let text = String::from_utf8(out).expect("UTF-8");
    let want = "\"sprig_cpu\":{\"handler_ns\":2000000,\"threads_ns\":3000000,\"target_cpu_ns\":1000000000,\"share\":0.005000}";
    assert!(text.contains(want), "{want} not in {text}");
}

/// Frame ids of a synthetic server: a dispatch loop that never returns
/// (`serve`), reading and decoding requests itself and handing each to a
/// handler.
const SERVE: u32 = 30; // app.S.serve
const HANDLE: u32 = 31; // app.S.handle
const DECODE: u32 = 32; // app.S.decode
const COMPUTE: u32 = 33; // app.S.compute
const CHECK: u32 = 34; // app.S.check
const API: u32 = 35; // app.S.api
const CORE: u32 = 36; // app.S.core

fn server_profile() -> StackProfile {
    let mut p = profile();
    for (id, name) in [
        (SERVE, "serve"),
        (HANDLE, "handle"),
        (DECODE, "decode"),
        (COMPUTE, "compute"),
        (CHECK, "check"),
        (API, "api"),
        (CORE, "core"),
    ] {
        p.add_method(id, MethodInfo::new("app.S", name, "()V"));
    }
    p
}

fn names(roots: &[SuggestedRoot]) -> Vec<&str> {
    roots.iter().map(|r| r.pattern.as_str()).collect()
}

/// 400 rounds of 20 ms of thread 10's CPU, the stack of round `r` picked
/// by `r % 10`.
fn one_thread_rounds(p: &mut StackProfile, stack: impl Fn(u64) -> &'static [u32]) {
    for r in 0..400u64 {
        p.add_round(
            r * 20 * MS,
            0,
            &[sample(10, SampledState::Running, 20 * MS, stack(r % 10))],
        );
    }
}

/// The profile's first 10 suggested roots.
fn top10(p: &StackProfile) -> Vec<SuggestedRoot> {
    suggest_roots(
        p,
        &SuggestOptions {
            max: 10,
            ..SuggestOptions::default()
        },
    )
}

/// A dispatch loop on the stack of every sample of its thread is a loop,
/// not a unit of work, whatever its share: the handler it calls, entered
/// anew request after request, is suggested first, and the handler
/// itself rather than the deepest callee holding most of its time
/// (`compute`, 83%).
#[test]
fn a_never_returning_loop_is_not_suggested_over_the_unit_of_work_below_it() {
    let mut p = server_profile();
    // 400 rounds: 4 in 10 in decode, 5 in handle -> compute, 1 in
    // handle -> check.
    one_thread_rounds(&mut p, |r| match r {
        0..=3 => &[RUN, SERVE, DECODE],
        4..=8 => &[RUN, SERVE, HANDLE, COMPUTE],
        _ => &[RUN, SERVE, HANDLE, CHECK],
    });
    let roots = top10(&p);
    let names = names(&roots);
    assert_eq!(names[0], "app.S::handle", "{roots:?}");
    assert_eq!(names[1], "app.S::decode", "{roots:?}");
    let serve = names.iter().position(|&n| n == "app.S::serve");
    assert!(
        serve.is_none_or(|i| i > 1),
        "the loop before the units of work: {roots:?}"
    );
}

/// A method that only hands its call on (`api` -> `core`, all of its
/// time) is one root with its callee: the suggestion is where the work
/// splits (`core`, whose callee `heavy` holds 86% of it), not the
/// deepest callee holding most of it.
#[test]
fn a_delegation_run_is_one_suggestion_where_the_work_splits() {
    let mut p = server_profile();
    one_thread_rounds(&mut p, |r| match r {
        0..=2 => &[RUN, SERVE, DECODE],
        3..=8 => &[RUN, SERVE, API, CORE, HEAVY],
        _ => &[RUN, SERVE, API, CORE, LIGHT],
    });
    let roots = top10(&p);
    let names = names(&roots);
    assert_eq!(names[0], "app.S::core", "{roots:?}");
    assert!(!names.contains(&"app.S::api"), "{roots:?}");
    assert_eq!(roots[0].same_time, ["app.S::api"], "{roots:?}");
    assert_eq!(roots[0].kind, RootKind::Unit, "{roots:?}");
    assert!((roots[0].share - 0.7).abs() < 1e-9, "{roots:?}");
    assert_eq!(names[1], "app.S::decode", "{roots:?}");
}

/// Threads too short-lived to judge (a few samples each, as the clients
/// a load generator starts per batch) do not make the frames they hold
/// loops: a method in every sample of 40 threads of 2 samples each is
/// still a unit of work, ranked above a long thread's loop.
#[test]
fn short_lived_threads_do_not_make_loops() {
    let mut p = server_profile();
    for r in 0..200u64 {
        let mut s = vec![sample(
            10,
            SampledState::Running,
            20 * MS,
            if r % 2 == 0 {
                &[RUN, SERVE, DECODE]
            } else {
                &[RUN, SERVE, SERVE, CHECK]
            },
        )];
        // thread 100 + r/5 lives 5 rounds
        let leaf = if r % 5 < 3 { HEAVY } else { LIGHT };
        s.push(sample(
            100 + r / 5,
            SampledState::Running,
            20 * MS,
            &[RUN, WORK, leaf],
        ));
        p.add_round(r * 20 * MS, 0, &s);
    }
    let roots = top10(&p);
    let names = names(&roots);
    let work = names.iter().position(|&n| n == "app.A::work");
    let serve = names.iter().position(|&n| n == "app.S::serve");
    assert!(work.is_some(), "{roots:?}");
    assert!(
        serve.is_none_or(|s| work < Some(s)),
        "the long thread's loop before the short threads' work: {roots:?}"
    );
}

/// A method whose class was redefined while its frame ran (`--edges`
/// gives the sampled classes dormant probes) comes back under the
/// obsolete method's frame id: the samples count it as one method, so a
/// never-returning loop is still on every sample of its thread (Jetty's
/// `QueuedThreadPool$Runner::run` split 464 : 52 and was ranked the first
/// unit of work).
#[test]
fn a_method_under_two_frame_ids_counts_as_one() {
    const SERVE_OBSOLETE: u32 = 60;
    let mut p = server_profile();
    p.add_method(SERVE_OBSOLETE, MethodInfo::new("app.S", "serve", "()V"));
    // 800 rounds: serve's frame id changes halfway (the redefinition),
    // 4 in 10 in decode, 6 in handle -> compute.
    one_thread_rounds(&mut p, |r| match r {
        0..=3 => &[RUN, SERVE, DECODE],
        _ => &[RUN, SERVE, HANDLE, COMPUTE],
    });
    for r in 400..800u64 {
        let stack: &[u32] = if r % 10 < 4 {
            &[RUN, SERVE_OBSOLETE, DECODE]
        } else {
            &[RUN, SERVE_OBSOLETE, HANDLE, COMPUTE]
        };
        p.add_round(
            r * 20 * MS,
            0,
            &[sample(10, SampledState::Running, 20 * MS, stack)],
        );
    }
    assert_eq!(total_of(&p, SERVE, View::Cpu), 800);
    assert_eq!(total_of(&p, SERVE_OBSOLETE, View::Cpu), 0);
    let roots = top10(&p);
    let serve = roots.iter().find(|r| r.pattern == "app.S::serve");
    assert_eq!(serve.map(|r| r.kind.name()), Some("loop"), "{roots:?}");
    assert_ne!(roots[0].pattern, "app.S::serve", "{roots:?}");
}

/// A pool's workers, mostly idle, each with a few CPU samples spread over
/// the whole run: their worker loop (`serve`, on every sample of theirs)
/// is a loop, judged over all of them, and the work below it comes
/// first. Threads of one request each (a thread per request, as virtual
/// threads are) with the handler on every sample of their short lives do
/// not make it a loop.
#[test]
fn a_pool_of_thin_long_lived_threads_makes_its_worker_loop_a_loop() {
    let mut p = server_profile();
    // 400 rounds over 8 s; 12 pool threads, each sampled in 3 rounds
    // spread from start to end: 2 in handle -> compute, 1 in decode.
    for r in 0..400u64 {
        let mut s = Vec::new();
        if r == 0 || r == 200 || r == 399 {
            for k in 0..12u64 {
                let stack: &[u32] = if (r / 199 + k) % 3 == 0 {
                    &[RUN, SERVE, DECODE]
                } else {
                    &[RUN, SERVE, HANDLE, COMPUTE]
                };
                s.push(sample(200 + k, SampledState::Running, 20 * MS, stack));
            }
        }
        p.add_round(r * 20 * MS, 0, &s);
    }
    let roots = top10(&p);
    let kind = |name: &str| {
        roots
            .iter()
            .find(|r| r.pattern == name)
            .map(|r| r.kind.name())
    };
    assert_eq!(kind("app.S::serve"), Some("loop"), "{roots:?}");
    // handle hands all of its time to compute: one suggestion, named
    // where the work splits.
    assert_eq!(names(&roots)[0], "app.S::compute", "{roots:?}");
    assert_eq!(roots[0].same_time, ["app.S::handle"], "{roots:?}");

    // A thread per request: 120 threads of 3 samples each within 60 ms,
    // the handler on all of them: it stays a unit of work.
    let mut q = server_profile();
    for r in 0..360u64 {
        let t = 300 + r / 3;
        q.add_round(
            r * 20 * MS,
            0,
            &[sample(
                t,
                SampledState::Running,
                20 * MS,
                &[RUN, HANDLE, COMPUTE],
            )],
        );
    }
    let roots = top10(&q);
    assert_eq!(
        roots
            .iter()
            .find(|r| r.pattern == "app.S::handle"
                || r.same_time.iter().any(|m| m == "app.S::handle"))
            .map(|r| r.kind.name()),
        Some("unit"),
        "{roots:?}"
    );
}

/// A tool the JDK ships, run inside the application (javac through its
/// API, as a build server does), is the application's work: its methods
/// are candidates, unlike the JDK's library (`java.util.HashMap`).
#[test]
fn a_jdk_tool_run_in_process_is_the_applications_work() {
    const COMPILE: u32 = 40;
    const GEN: u32 = 41;
    const ATTR: u32 = 42;
    let mut p = server_profile();
    for (id, class, name) in [
        (COMPILE, "com.sun.tools.javac.main.JavaCompiler", "compile"),
        (GEN, "com.sun.tools.javac.jvm.Gen", "genClass"),
        (ATTR, "com.sun.tools.javac.comp.Attr", "attribClass"),
    ] {
        p.add_method(id, MethodInfo::new(class, name, "()V"));
    }
    one_thread_rounds(&mut p, |r| match r {
        0..=5 => &[RUN, SERVE, COMPILE, ATTR, HASH],
        _ => &[RUN, SERVE, COMPILE, GEN],
    });
    let roots = top10(&p);
    let names = names(&roots);
    assert!(names.len() >= 2, "{roots:?}");
    assert_eq!(
        &names[..2],
        [
            "com.sun.tools.javac.comp.Attr::attribClass",
            "com.sun.tools.javac.jvm.Gen::genClass"
        ],
        "{roots:?}"
    );
    assert!(!names.contains(&"java.util.HashMap::get"), "{roots:?}");
}

/// sprig's own probe frames (`sprig.rt.Probe::enter`, on the stack while
/// `--edges` counts entries) are never suggested, whatever their share:
/// a bench run on H2 suggested `part: sprig.rt.Probe::enter`.
#[test]
fn sprigs_own_frames_are_not_suggested() {
    const ENTER: u32 = 50;
    let mut p = server_profile();
    p.add_method(ENTER, MethodInfo::new("sprig.rt.Probe", "enter", "(I)V"));
    one_thread_rounds(&mut p, |r| match r {
        0..=5 => &[RUN, SERVE, HANDLE, ENTER],
        _ => &[RUN, SERVE, HANDLE, COMPUTE, ENTER],
    });
    let roots = top10(&p);
    let names = names(&roots);
    assert!(names.contains(&"app.S::handle"), "{roots:?}");
    assert!(!names.iter().any(|n| n.starts_with("sprig.")), "{roots:?}");
}

/// A suggested root in javac (a tool the JDK ships) pastes as a command
/// that instruments javac's packages too; an application's root and a
/// class directly under `com.sun.tools` do not get one, and a quote in
/// the pattern stays quoted.
#[test]
fn a_javac_roots_command_includes_javacs_packages() {
    assert_eq!(
        super::profile_command(7, "com.sun.tools.javac.jvm.Gen::genClass"),
        "sprig profile 7 --root 'com.sun.tools.javac.jvm.Gen::genClass' --include 'com.sun.tools.javac.**'"
    );
    assert_eq!(
        super::profile_command(7, "app.A::work"),
        "sprig profile 7 --root 'app.A::work'"
    );
    assert_eq!(
        super::profile_command(7, "com.sun.tools.Main::run"),
        "sprig profile 7 --root 'com.sun.tools.Main::run'"
    );
    assert_eq!(
        super::profile_command(7, "app.A::it's"),
        "sprig profile 7 --root 'app.A::it'\\''s'"
    );
}
