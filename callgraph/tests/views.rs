//! Views and renderers over built profiles: hot spots, back traces,
//! thresholds, JSON schema, 10k-deep recursion through every renderer,
//! stacks cut at the maximum stack depth.

mod common;

use common::{Json, parse_json};
use sprig_callgraph::profile::Metric;
use sprig_callgraph::report::diff::DiffCollapsed;
use sprig_callgraph::report::flamegraph::DiffFlameGraph;
use sprig_callgraph::report::view::{back_traces, hot_spots, tree_view};
use sprig_callgraph::report::{DEFAULT_MAX_STACK, Format};
use sprig_callgraph::{CctBuilder, Profile, RenderOptions, diff};
use sprig_wire::event::{Event, EventKind};

fn script(name: &str) -> common::Script {
    common::load(&common::data_dir().join(name))
}

fn render(p: &Profile, opts: &RenderOptions, f: Format) -> String {
    let mut v = Vec::new();
    f.renderer().render(p, opts, &mut v).unwrap();
    String::from_utf8(v).expect("reports are UTF-8")
}

#[test]
fn hot_spots_by_exact_self_time() {
    // basic.events, t_I = 20 ns, t_O = 10 ns, merged over both threads
    // (same path, so one node): Db.query has 3 calls, 3,500,000 ns measured,
    // 100,000 ns adjust, one child call Db.connect (1,000,000 ns measured).
    //   connect: self = total = 1,000,000 - 20 = 999,980
    //   query:   own = 3,400,000 - 1,000,000 = 2,400,000
    //            self = 2,400,000 - 3*20 - 1*10 = 2,399,930
    //            total = 2,399,930 + 999,980 = 3,399,910
    let s = script("basic.events");
    let m = s.profile.merged();
    let hs = hot_spots(&s.profile, &m.tree);
    let name = |id| s.profile.display_name(id);
    assert_eq!(
        name(hs[0].method),
        "com.acme.Db.query(Ljava/lang/String;)Ljava/util/List;"
    );
    assert_eq!(
        (hs[0].calls, hs[0].self_ns, hs[0].total_ns),
        (3, 2_399_930, 3_399_910)
    );
    assert_eq!(hs[0].avg_ns, 3_399_910 / 3);
    assert!(hs.windows(2).all(|w| w[0].self_ns >= w[1].self_ns));
    // Shop.unused never ran: not a hot spot
    assert!(hs.iter().all(|h| h.method != 6));
    assert_eq!(hs.len(), 5);
}

#[test]
fn back_traces_give_callers_and_shares() {
    // recursion.events (ms ticks): walk(0..100) { walk(10..95) { walk(20..50) { visit(30..40) } visit(60..90) } }
    const MS: u64 = 1_000_000;
    let s = script("recursion.events");
    let t = &s.profile.threads[0].tree;
    let bt = back_traces(&s.profile, t, 2, None);
    assert_eq!((bt.calls(), bt.total_ns()), (2, 40 * MS));
    // direct callers: walk (both calls), followed up to the root
    let lines = bt.lines(&s.profile);
    let caller = &bt.nodes[lines[1].0];
    assert_eq!(caller.method, Some(1));
    assert_eq!((caller.calls, caller.total_ns), (2, 40 * MS));
    assert!((bt.share(lines[1].0) - 1.0).abs() < 1e-12);
    // both visits were called by a walk that was itself called by walk
    let depth2: Vec<_> = lines.iter().filter(|l| l.1 == 2).collect();
    assert_eq!(depth2.len(), 1, "{lines:?}");
    let n = &bt.nodes[depth2[0].0];
    assert_eq!((n.method, n.calls, n.total_ns), (Some(1), 2, 40 * MS));
    // back traces of the recursive method: its outermost call is the root
    let bt = back_traces(&s.profile, t, 1, None);
    assert_eq!(bt.calls(), 3);
    assert_eq!(bt.total_ns(), 100 * MS);
    let kinds: Vec<Option<u32>> = bt.nodes[0]
        .children
        .iter()
        .map(|&c| bt.nodes[c].method)
        .collect();
    assert!(
        kinds.contains(&None) && kinds.contains(&Some(1)),
        "{kinds:?}"
    );
}

#[test]
fn thresholds_hide_small_and_deep_nodes() {
    let s = script("thresholds.events");
    let m = s.profile.merged();
    let all = tree_view(&s.profile, &m.tree, &RenderOptions::default());
    assert_eq!(all.lines.len(), m.tree.nodes.len());
    let v = tree_view(&s.profile, &m.tree, &s.opts);
    let shown: Vec<String> = v
        .lines
        .iter()
        .map(|l| s.profile.method(m.tree.nodes[l.node as usize].method).name)
        .collect();
    assert!(!shown.contains(&"debug".to_owned()), "{shown:?}");
    assert!(!shown.contains(&"add".to_owned()), "{shown:?}");
    assert!(shown.contains(&"mul".to_owned()), "{shown:?}");
    assert!(v.lines.iter().all(|l| l.depth < 3));
    // children come by total descending
    assert_eq!(shown[..3], ["run", "compute", "mul"]);
    // collapsed keeps the total: hidden time goes to the nearest shown ancestor
    let collapsed = render(&s.profile, &s.opts, Format::Collapsed);
    let sum: u64 = collapsed
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, v.total);
    assert_eq!(v.total, (20_000_000 + 6_000_000) / 2);
}

#[test]
fn json_follows_the_issue_4_schema() {
    for path in common::scripts() {
        let s = common::load(&path);
        let text = render(&s.profile, &s.opts, Format::Json);
        let j = parse_json(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()));
        assert_eq!(j.get("version").and_then(Json::u64), Some(1));
        let target = j.get("target").expect("target");
        assert!(target.get("pid").and_then(Json::u64).is_some());
        assert!(target.get("jvm").and_then(Json::str).is_some());
        let stats = j.get("stats").expect("stats");
        for k in [
            "events",
            "instrumented_methods",
            "called_methods",
            "lost_events",
            "duration_ms",
        ] {
            assert!(stats.get(k).and_then(Json::u64).is_some(), "stats.{k}");
        }
        match j.get("calibration").expect("calibration") {
            Json::Null => assert!(s.profile.calibration.is_none()),
            c => {
                assert!(matches!(c.get("inner_ns"), Some(Json::Num(_))));
                assert!(matches!(c.get("outer_ns"), Some(Json::Num(_))));
            }
        }
        let threads = j.get("threads").expect("threads").arr();
        assert_eq!(threads.len(), s.profile.threads.len());
        let mut stack: Vec<&Json> = Vec::new();
        for (t, tp) in threads.iter().zip(&s.profile.threads) {
            assert_eq!(t.get("id").and_then(Json::u64), Some(tp.java_id));
            assert_eq!(t.get("name").and_then(Json::str), Some(tp.name.as_str()));
            stack.extend(t.get("roots").expect("roots").arr());
        }
        let mut nodes = 0;
        while let Some(n) = stack.pop() {
            nodes += 1;
            for k in ["class", "method", "descriptor"] {
                assert!(n.get(k).and_then(Json::str).is_some(), "{k} in {n:?}");
            }
            let total = n.get("total_ns").and_then(Json::u64).expect("total_ns");
            let self_ns = n.get("self_ns").and_then(Json::u64).expect("self_ns");
            assert!(n.get("calls").and_then(Json::u64).is_some());
            assert!(self_ns <= total);
            let kids = n.get("children").expect("children").arr();
            let totals: Vec<u64> = kids
                .iter()
                .map(|c| c.get("total_ns").and_then(Json::u64).unwrap())
                .collect();
            assert!(
                totals.windows(2).all(|w| w[0] >= w[1]),
                "children by total desc"
            );
            stack.extend(kids);
        }
        assert!(nodes > 0);
    }
}

#[test]
fn json_escapes_thread_names() {
    let s = script("basic.events");
    let text = render(&s.profile, &s.opts, Format::Json);
    assert!(text.contains(r#""name":"http-nio-8080-exec-1 \"quoted\" \\ name""#));
}

#[test]
fn text_report_has_header_tree_and_hot_spots() {
    let s = script("basic.events");
    let text = render(&s.profile, &s.opts, Format::Text);
    assert!(text.starts_with("sprig profile: pid 4242, OpenJDK 64-Bit Server VM 17.0.15"));
    assert!(text.contains("probe cost 20.0 + 10.0 ns subtracted per call"));
    assert!(text.contains("thread \"main\" (java id 1, sprig #1)"));
    assert!(text.contains("hot spots: exact self time"));
    assert!(text.contains("back traces of com.acme.Db.query"));
    // every tree row has the same column layout
    let trees = &text[..text.find("hot spots").unwrap()];
    let rows: Vec<&str> = trees
        .lines()
        .filter(|l| l.contains("com.acme.") && l.contains('%') && !l.starts_with("back"))
        .collect();
    assert!(rows.len() > 5);
    let header = text
        .lines()
        .find(|l| l.ends_with("% root  method"))
        .unwrap();
    assert_eq!(header.find("method"), Some(44));
    assert!(
        rows.iter()
            .all(|l| &l[42..44] == "  " && l.as_bytes()[44] != b' '),
        "{rows:#?}"
    );
}

#[test]
fn unbalanced_streams_are_reported() {
    let s = script("unbalanced.events");
    let w = s.profile.warnings.join("\n");
    assert!(
        w.contains("thread 1: 1 method entries outside a root context"),
        "{w}"
    );
    assert!(
        w.contains("thread 1: 1 exits without a matching entry"),
        "{w}"
    );
    assert!(
        w.contains("thread 1: 1 exits did not match the top frame"),
        "{w}"
    );
    assert!(
        w.contains("thread 7: 2 frames were still open when the thread ended"),
        "{w}"
    );
    assert!(
        w.contains("thread 3: 3 frames were still open at the end of profiling"),
        "{w}"
    );
    let text = render(&s.profile, &RenderOptions::default(), Format::Text);
    assert!(text.contains("[1 incomplete]"));
    assert!(text.contains("<unknown>.method#9"));
}

fn deep_profile(depth: u64) -> Profile {
    let mut evs = vec![Event::new(EventKind::RootEntry, 1, 0)];
    evs.extend((0..depth).map(|i| Event::new(EventKind::MethodEntry, 2, 1 + i)));
    evs.extend((0..depth).map(|i| Event::new(EventKind::MethodExit, 2, 1 + depth + i)));
    evs.push(Event::new(EventKind::RootExit, 1, 2 * depth + 1));
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "r.Main", "main", "([Ljava/lang/String;)V");
    b.set_method(2, "r.Main", "down", "(I)I");
    b.process(0, &evs);
    b.finish()
}

#[test]
fn ten_thousand_levels_through_every_renderer() {
    const DEPTH: u64 = 10_000;
    let p = deep_profile(DEPTH);
    let opts = RenderOptions {
        back_traces: vec![2],
        ..RenderOptions::default()
    };
    let text = render(&p, &opts, Format::Text);
    assert!(text.contains("[10000] \\- r.Main.down"), "{text}");
    // Stacks of 2,048 frames at most: main and 2,047 down() calls, then
    // the 7,953 deeper ones as one frame.
    let collapsed = render(&p, &opts, Format::Collapsed);
    assert_eq!(collapsed.lines().count(), DEFAULT_MAX_STACK + 1);
    let deepest = collapsed.lines().max_by_key(|l| l.len()).unwrap();
    assert_eq!(deepest.matches(';').count(), DEFAULT_MAX_STACK);
    assert!(
        deepest.contains(";r.Main::down;[truncated 7953 frames] "),
        "{}",
        &deepest[deepest.len() - 80..]
    );
    let full = RenderOptions {
        max_stack: 20_000,
        ..opts.clone()
    };
    let uncut = render(&p, &full, Format::Collapsed);
    assert_eq!(uncut.lines().count() as u64, DEPTH + 1);
    let deepest = uncut.lines().max_by_key(|l| l.len()).unwrap();
    assert_eq!(deepest.matches(';').count() as u64, DEPTH);
    assert_eq!(collapsed_sum(&collapsed), collapsed_sum(&uncut));
    let json = render(&p, &opts, Format::Json);
    // parse and drop on a thread with room for the nested value's drop
    let h = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || parse_json(&json).map(|_| ()))
        .unwrap();
    h.join().unwrap().unwrap();
    let m = p.merged();
    let hs = hot_spots(&p, &m.tree);
    assert_eq!(hs[0].calls, DEPTH);
    // recursive time counted once: the outermost down() call
    assert_eq!(hs[0].total_ns, 2 * DEPTH - 1);
    let d = diff(&p, &deep_profile(DEPTH / 2));
    assert_eq!(d.nodes.len() as u64, DEPTH + 1);
}

/// The sum of the values of collapsed stacks.
fn collapsed_sum(text: &str) -> u64 {
    text.lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

#[test]
fn stacks_deeper_than_max_stack_end_in_one_truncation_frame() {
    // main, then 100 nested down(): 101 frames.
    let p = deep_profile(100);
    let cut = |max_stack, max_depth| RenderOptions {
        max_stack,
        max_depth,
        ..RenderOptions::default()
    };
    let whole = render(&p, &cut(usize::MAX, None), Format::Collapsed);
    assert_eq!(whole.lines().count(), 101);
    assert!(!whole.contains("[truncated"));

    let c = render(&p, &cut(10, None), Format::Collapsed);
    let lines: Vec<&str> = c.lines().collect();
    assert_eq!(lines.len(), 11, "{c}");
    let (stack, value) = lines[10].rsplit_once(' ').unwrap();
    let frames: Vec<&str> = stack.split(';').collect();
    assert_eq!(frames.len(), 11);
    assert_eq!(frames[10], "[truncated 91 frames]");
    assert_eq!(frames[9], "r.Main::down");
    // the cut frames' exact total: 91 nested calls, 2 ns each but the last
    assert_eq!(value, "181");
    assert_eq!(collapsed_sum(&c), collapsed_sum(&whole));

    // A depth limit at or above the cut folds the time, unmarked, as always.
    let folded = render(&p, &cut(10, Some(10)), Format::Collapsed);
    assert_eq!(folded.lines().count(), 10);
    assert!(!folded.contains("[truncated"));
    assert_eq!(collapsed_sum(&folded), collapsed_sum(&whole));
    let deeper = render(&p, &cut(10, Some(50)), Format::Collapsed);
    assert_eq!(deeper, c);

    // The thread's frame comes on top of the stack's frames.
    let threads = RenderOptions {
        thread_frames: true,
        ..cut(10, None)
    };
    let t = render(&p, &threads, Format::Collapsed);
    let last = t.lines().last().unwrap();
    assert_eq!(last.matches(';').count(), 11, "{last}");
    assert!(last.contains(";[truncated 91 frames] 181"), "{last}");

    // The flame graph: one frame for the cut, as wide as its time.
    let page = render(&p, &cut(10, None), Format::Flamegraph);
    assert!(page.contains("11 frames"), "frame count");
    assert!(
        page.contains("data-d=\"10\" data-n=\"[truncated 91 frames]\""),
        "the marker frame sits above the tenth"
    );

    // The diff's stack formats cut alike, with each side's time.
    let d = diff(&p, &deep_profile(50));
    let mut out = Vec::new();
    DiffCollapsed.render(&d, &cut(10, None), &mut out).unwrap();
    let dc = String::from_utf8(out).unwrap();
    assert_eq!(dc.lines().count(), 11, "{dc}");
    assert!(
        dc.lines()
            .last()
            .unwrap()
            .ends_with(";[truncated 91 frames] 181 81"),
        "{dc}"
    );
    let mut out = Vec::new();
    DiffFlameGraph.render(&d, &cut(10, None), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    assert!(page.contains("11 frames"));
    assert!(page.contains("[truncated 91 frames]"));
}

/// Under a table with `~` times, the legend suggests `--skip-trivial` when
/// revelation ran without it, and not when it left methods out (or when
/// there was no revelation at all: `--roots-only` or an older snapshot).
#[test]
fn the_probe_bound_legend_suggests_skip_trivial_only_when_it_applies() {
    use sprig_callgraph::report::text::{LEGEND, TRIVIAL_HINT};
    let s = script("probe_bound.events");
    let mut p = s.profile.clone();
    let without = render(&p, &s.opts, Format::Text);
    assert!(without.contains(LEGEND), "{without}");
    assert!(!without.contains(TRIVIAL_HINT), "{without}");
    p.stats.reveal = Some(Default::default());
    let hinted = render(&p, &s.opts, Format::Text);
    assert!(
        hinted.contains(&format!("{LEGEND}\n{TRIVIAL_HINT}\n")),
        "{hinted}"
    );
    p.stats.reveal.as_mut().unwrap().trivial_skipped = 12;
    let verbose = RenderOptions {
        verbose: true,
        ..s.opts.clone()
    };
    let skipped = render(&p, &verbose, Format::Text);
    assert!(!skipped.contains(TRIVIAL_HINT), "{skipped}");
    assert!(
        skipped.contains("trivial      12 methods left out (--skip-trivial)"),
        "{skipped}"
    );
}

/// The fields sampled timing added: `timing` at the top, `latency` on
/// every root node (both modes), `samples` and the bounds per node and
/// per thread in sampled mode only.
#[test]
fn json_carries_timing_latency_and_samples() {
    for path in common::scripts() {
        let s = common::load(&path);
        let sampled = s.profile.timing == sprig_callgraph::Timing::Sampled;
        let text = render(&s.profile, &s.opts, Format::Json);
        let j = parse_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.display();
        assert_eq!(
            j.get("timing").and_then(Json::str),
            Some(if sampled { "sampled" } else { "exact" }),
            "{name}"
        );
        for t in j.get("threads").expect("threads").arr() {
            let counts = t.get("samples");
            assert_eq!(counts.is_some(), sampled, "{name}: thread samples");
            if let Some(c) = counts {
                for k in ["credited", "outside", "outside_ns", "late", "unmatched"] {
                    assert!(c.get(k).and_then(Json::u64).is_some(), "{name}: {k}");
                }
            }
            let mut stack: Vec<(&Json, bool)> = t
                .get("roots")
                .expect("roots")
                .arr()
                .iter()
                .map(|r| (r, true))
                .collect();
            while let Some((n, is_root)) = stack.pop() {
                let calls = n.get("calls").and_then(Json::u64).unwrap();
                let incomplete = n.get("incomplete").and_then(Json::u64).unwrap();
                match n.get("latency") {
                    Some(l) => {
                        assert!(is_root, "{name}: latency on an inner node");
                        let f = |k: &str| l.get(k).and_then(Json::u64).expect(k);
                        assert_eq!(f("count"), calls - incomplete, "{name}");
                        assert!(f("min_ns") <= f("p50_ns"), "{name}: {l:?}");
                        assert!(f("p50_ns") <= f("p90_ns"), "{name}: {l:?}");
                        assert!(f("p90_ns") <= f("p99_ns"), "{name}: {l:?}");
                        assert!(f("p99_ns") <= f("max_ns"), "{name}: {l:?}");
                    }
                    None => assert!(
                        !is_root || calls == incomplete,
                        "{name}: a root with complete calls has a latency: {n:?}"
                    ),
                }
                for k in [
                    "samples",
                    "total_samples",
                    "self_bound_ns",
                    "total_bound_ns",
                ] {
                    assert_eq!(
                        n.get(k).and_then(Json::u64).is_some(),
                        sampled,
                        "{name}: {k}"
                    );
                }
                stack.extend(
                    n.get("children")
                        .expect("children")
                        .arr()
                        .iter()
                        .map(|c| (c, false)),
                );
            }
        }
    }
}

/// In exact mode a root's calls add up to its exact total (the latency
/// of each call has the probe cost of every call inside taken out).
#[test]
fn exact_root_latencies_add_up_to_the_exact_total() {
    let s = script("basic.events");
    let p = &s.profile;
    let mut roots = 0;
    for t in &p.threads {
        let times = p.times(&t.tree);
        for &r in &t.tree.roots {
            let n = &t.tree.nodes[r as usize];
            let l = p.latency_ns(n).expect("latency");
            assert_eq!(l.count, n.calls);
            assert_eq!(l.sum_ns, times[r as usize].total_ns);
            roots += 1;
        }
    }
    assert_eq!(roots, 2);
    let text = render(p, &s.opts, Format::Text);
    assert!(
        text.contains(
            "  latency      com.acme.Shop.handle: 2 calls, min 0.500, p50 0.500, p90 2.90, \
             p99 2.90, max 2.90 ms"
        ),
        "{text}"
    );
}

#[test]
fn stack_formats_weigh_by_the_metric_asked_for() {
    const DEPTH: u64 = 100;
    let p = deep_profile(DEPTH);
    let tree = &p.threads[0].tree;
    // Time's weights are the derived times, node for node.
    let times = p.times(tree);
    let by_time = p.weights(tree, Metric::Time);
    for (w, t) in by_time.iter().zip(&times) {
        assert_eq!((w.own, w.total), (t.self_ns, t.total_ns));
    }
    // Calls: a node's own calls, its subtree's in `total`.
    let by_calls = p.weights(tree, Metric::Calls);
    assert_eq!(
        (by_calls[0].own, by_calls[0].total),
        (1, 1 + DEPTH),
        "the root: one call of main, and DEPTH calls of down below it"
    );
    // Collapsed by calls: each path's value is its last node's calls (one
    // each here), so the values add up to every call in the tree.
    let opts = RenderOptions {
        weight: Metric::Calls,
        ..RenderOptions::default()
    };
    let collapsed = render(&p, &opts, Format::Collapsed);
    assert_eq!(collapsed.lines().count() as u64, DEPTH + 1);
    assert!(collapsed.lines().all(|l| l.ends_with(" 1")), "{collapsed}");
    assert_eq!(collapsed_sum(&collapsed), 1 + DEPTH);
    // ... and cut at max_stack, the cut frame holds the calls below it.
    let cut = RenderOptions {
        max_stack: 10,
        ..opts.clone()
    };
    let collapsed = render(&p, &cut, Format::Collapsed);
    assert_eq!(collapsed_sum(&collapsed), 1 + DEPTH);
    assert!(collapsed.contains(&format!(
        "[truncated {} frames] {}",
        DEPTH + 1 - 10,
        DEPTH + 1 - 10
    )));
    // The flame graph's frames are as wide as their subtree's calls.
    let html = render(&p, &opts, Format::Flamegraph);
    let time = render(&p, &RenderOptions::default(), Format::Flamegraph);
    assert_ne!(html, time, "weighing by calls changed no frame");
    assert!(
        html.contains("widths: calls"),
        "the subtitle says what the widths are"
    );
    // No samples under exact timing: weighed by samples, nothing to show.
    let samples = RenderOptions {
        weight: Metric::Samples,
        ..RenderOptions::default()
    };
    assert_eq!(render(&p, &samples, Format::Collapsed), "");
    // Names round-trip; an unknown one is refused with the known ones.
    for m in Metric::ALL {
        assert_eq!(m.name().parse::<Metric>().unwrap(), m);
    }
    let e = "heap".parse::<Metric>().unwrap_err().to_string();
    assert!(
        e.contains("time, calls, samples, waits, objects, bytes"),
        "{e}"
    );
}

/// `--locks`: the text report's waits table names each kind and monitor
/// with its time and the contexts that waited, the method that waited
/// first; the collapsed stacks weighed by waits hold the wait rows only.
#[test]
fn the_waits_table_and_the_waits_weight() {
    use sprig_wire::{Wait, WaitKind, wait_row_id};
    const NS: u64 = 1_000_000_000;
    let ev = |k, id, ts| Event::new(k, id, ts);
    let mut s = vec![
        ev(EventKind::RootEntry, 1, 0),
        ev(EventKind::MethodEntry, 2, 10),
    ];
    let w = |end, ticks| Wait {
        kind: WaitKind::Blocked,
        class: 4,
        start: end - ticks,
        ticks,
        owner: 0,
    };
    s.extend_from_slice(w(500, 400).record(500).unwrap().as_slice());
    s.push(ev(EventKind::MethodExit, 2, 600));
    s.extend_from_slice(w(900, 250).record(900).unwrap().as_slice());
    s.push(ev(EventKind::RootExit, 1, 1000));
    let mut b = CctBuilder::new(NS);
    b.set_method(1, "app.Server", "handle", "()V");
    b.set_method(2, "app.Cache", "get", "()V");
    b.apply_message(&sprig_wire::Message::WaitClass {
        id: 4,
        class: "app.Cache$Lock".into(),
    });
    b.process(0, &s);
    let p = b.finish();
    let text = render(&p, &RenderOptions::default(), Format::Text);
    let table = text
        .split("waits: all threads")
        .nth(1)
        .unwrap_or_else(|| panic!("no waits table:\n{text}"));
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    assert!(
        lines[2].ends_with("2  (blocked on app.Cache$Lock)"),
        "{table}"
    );
    assert!(lines[2].starts_with("650"), "{table}");
    assert!(lines[3].starts_with("400"), "{table}");
    assert!(
        lines[3].ends_with("in app.Cache.get < app.Server.handle"),
        "{table}"
    );
    assert!(lines[4].ends_with("in app.Server.handle"), "{table}");
    let opts = RenderOptions {
        weight: Metric::Waits,
        ..RenderOptions::default()
    };
    let collapsed = render(&p, &opts, Format::Collapsed);
    let row = wait_row_id(WaitKind::Blocked, 4);
    assert_eq!(p.display_name(row), "(blocked on app.Cache$Lock)");
    assert!(
        collapsed.contains("app.Server::handle;app.Cache::get;(blocked on app.Cache$Lock) 400"),
        "{collapsed}"
    );
    assert!(
        collapsed.contains("app.Server::handle;(blocked on app.Cache$Lock) 250"),
        "{collapsed}"
    );
    assert_eq!(collapsed.lines().count(), 2, "{collapsed}");
}

/// `--locks`, the owners: each contended enter's record names who held
/// the monitor; the lock view (text `held by` lines, JSON `locks`) sums
/// the per-node rows: its `blocked_ns` and `waits` are the sums of the
/// nodes' `contention` entries over every thread, its owners' the sums of
/// the entries' owners, and all of it survives a snapshot.
#[test]
fn the_lock_view_sums_the_rows_and_names_the_owners() {
    use sprig_wire::{Wait, WaitKind};
    const NS: u64 = 1_000_000_000;
    let ev = |k, id, ts| Event::new(k, id, ts);
    let w = |end: u64, ticks: u64, owner: u32| Wait {
        kind: WaitKind::Blocked,
        class: 4,
        start: end - ticks,
        ticks,
        owner,
    };
    // Thread 0: get waits 400 (held by 1) and 100 (owner not read);
    // handle waits 250 (held by 2). Thread 1: get waits 300 (held by 1).
    let mut s0 = vec![
        ev(EventKind::RootEntry, 1, 0),
        ev(EventKind::MethodEntry, 2, 10),
    ];
    s0.extend_from_slice(w(500, 400, 1).record(500).unwrap().as_slice());
    s0.extend_from_slice(w(650, 100, 0).record(650).unwrap().as_slice());
    s0.push(ev(EventKind::MethodExit, 2, 700));
    s0.extend_from_slice(w(980, 250, 2).record(980).unwrap().as_slice());
    s0.push(ev(EventKind::RootExit, 1, 1000));
    let mut s1 = vec![
        ev(EventKind::RootEntry, 1, 0),
        ev(EventKind::MethodEntry, 2, 10),
    ];
    s1.extend_from_slice(w(400, 300, 1).record(400).unwrap().as_slice());
    s1.push(ev(EventKind::MethodExit, 2, 500));
    s1.push(ev(EventKind::RootExit, 1, 600));
    let mut b = CctBuilder::new(NS);
    b.set_method(1, "app.Server", "handle", "()V");
    b.set_method(2, "app.Cache", "get", "()V");
    b.apply_message(&sprig_wire::Message::WaitClass {
        id: 4,
        class: "app.Cache$Lock".into(),
    });
    for (id, thread, context) in [
        (1, "loader", "app.Cache.fill < app.Cache.refresh"),
        (2, "pool-1", "app.Server.flush"),
    ] {
        b.apply_message(&sprig_wire::Message::WaitOwner {
            id,
            thread: thread.into(),
            context: context.into(),
        });
    }
    b.process(0, &s0);
    b.process(1, &s1);
    let p = b.finish();
    let mut snap = Vec::new();
    p.write_snapshot(&mut snap).unwrap();
    let back = Profile::read_snapshot(&mut snap.as_slice()).unwrap();
    assert_eq!(back, p);

    for p in [&p, &back] {
        let json = render(p, &RenderOptions::default(), Format::Json);
        let v = parse_json(&json).unwrap();
        // The per-node rows, over every thread.
        let (mut waits, mut ns) = (0u64, 0u64);
        let mut owners: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        fn walk(n: &Json, f: &mut dyn FnMut(&Json)) {
            f(n);
            for c in n.get("children").map(Json::arr).into_iter().flatten() {
                walk(c, f);
            }
        }
        for t in v.get("threads").map(Json::arr).unwrap() {
            for r in t.get("roots").map(Json::arr).unwrap() {
                walk(r, &mut |n| {
                    for c in n.get("contention").map(Json::arr).into_iter().flatten() {
                        waits += c.get("count").and_then(Json::u64).unwrap();
                        ns += c.get("blocked_ns").and_then(Json::u64).unwrap();
                        for o in c.get("owners").map(Json::arr).into_iter().flatten() {
                            let e = owners
                                .entry(o.get("thread").and_then(Json::str).unwrap().to_owned())
                                .or_default();
                            e.0 += o.get("waits").and_then(Json::u64).unwrap();
                            e.1 += o.get("blocked_ns").and_then(Json::u64).unwrap();
                        }
                    }
                });
            }
        }
        assert_eq!((waits, ns), (4, 1050), "{json}");
        let locks = v
            .get("locks")
            .map(Json::arr)
            .unwrap_or_else(|| panic!("{json}"));
        assert_eq!(locks.len(), 1, "{json}");
        let l = &locks[0];
        assert_eq!(l.get("monitor").and_then(Json::str), Some("app.Cache$Lock"));
        assert_eq!(l.get("kind").and_then(Json::str), Some("blocked"));
        assert_eq!(l.get("waits").and_then(Json::u64), Some(waits), "{json}");
        assert_eq!(l.get("blocked_ns").and_then(Json::u64), Some(ns), "{json}");
        let waiters = l.get("waiters").map(Json::arr).unwrap();
        let sum: u64 = waiters
            .iter()
            .map(|w| w.get("blocked_ns").and_then(Json::u64).unwrap())
            .sum();
        assert_eq!(sum, ns, "{json}");
        let first: Vec<&str> = waiters[0]
            .get("context")
            .map(Json::arr)
            .unwrap()
            .iter()
            .filter_map(Json::str)
            .collect();
        assert_eq!(first, ["app.Cache.get", "app.Server.handle"], "{json}");
        let lo: Vec<(String, String, u64, u64)> = l
            .get("owners")
            .map(Json::arr)
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o.get("thread").and_then(Json::str).unwrap().to_owned(),
                    o.get("context").and_then(Json::str).unwrap().to_owned(),
                    o.get("waits").and_then(Json::u64).unwrap(),
                    o.get("blocked_ns").and_then(Json::u64).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            lo,
            [
                (
                    "loader".into(),
                    "app.Cache.fill < app.Cache.refresh".into(),
                    2,
                    700
                ),
                ("pool-1".into(), "app.Server.flush".into(), 1, 250),
            ],
            "{json}"
        );
        for (t, _, c, n) in &lo {
            assert_eq!(owners.get(t), Some(&(*c, *n)), "{json}");
        }
        let text = render(p, &RenderOptions::default(), Format::Text);
        let table = text
            .split("waits: all threads")
            .nth(1)
            .unwrap_or_else(|| panic!("no waits table:\n{text}"));
        let held: Vec<&str> = table
            .lines()
            .map(str::trim)
            .filter(|l| l.contains("held by"))
            .collect();
        assert_eq!(held.len(), 2, "{table}");
        assert!(held[0].starts_with("0.700"), "{table}");
        assert!(
            held[0].ends_with("2    held by loader in app.Cache.fill < app.Cache.refresh"),
            "{table}"
        );
        assert!(
            held[1].ends_with("held by pool-1 in app.Server.flush"),
            "{table}"
        );
    }
}
