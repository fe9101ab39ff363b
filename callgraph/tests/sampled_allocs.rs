//! Allocation samples (`--alloc-interval`) in the builder and the model:
//! each record lands on the frame open at its place in the thread's
//! stream, by class, those at a probed allocating frame counted apart; the JSON report lists them apart from the exact
//! allocations, with Java source names; snapshots (version 10; the probed split from 12) carry them
//! and the samples taken outside every root context.

use sprig_callgraph::profile::Metric;
use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::{Message, SampledAlloc};

fn sample(class: u32, size: u32, bytes_est: u64) -> Vec<Event> {
    tagged(class, size, bytes_est, 0)
}

/// A sample whose allocating frame is a probed method.
fn at_probed(class: u32, size: u32, bytes_est: u64) -> Vec<Event> {
    record(class, size, bytes_est, 0, true)
}

fn tagged(class: u32, size: u32, bytes_est: u64, tag: u64) -> Vec<Event> {
    record(class, size, bytes_est, tag, false)
}

fn record(class: u32, size: u32, bytes_est: u64, tag: u64, probed: bool) -> Vec<Event> {
    SampledAlloc {
        class,
        size,
        bytes_est,
        tag,
        probed,
    }
    .record(0)
    .unwrap()
    .as_slice()
    .to_vec()
}

fn profile() -> Profile {
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "p.Main", "root", "()V");
    b.set_method(2, "p.Main", "work", "()V");
    b.apply_message(&Message::AllocClass {
        id: 1,
        class: "[B".into(),
    });
    b.apply_message(&Message::AllocClass {
        id: 2,
        class: "Ljava/lang/Integer;".into(),
    });
    let mut evs = Vec::new();
    for call in 0..2u64 {
        let t = call * 100;
        evs.push(Event::new(EventKind::RootEntry, 1, t + 1));
        evs.extend(sample(2, 16, 1000));
        evs.push(Event::new(EventKind::MethodEntry, 2, t + 2));
        // `work` allocated the arrays itself (a probed allocating frame);
        // the `Integer`s came from unprofiled code below it.
        evs.extend(at_probed(1, 4000, 5000));
        evs.extend(sample(2, 16, 1000));
        evs.push(Event::new(EventKind::MethodExit, 2, t + 3));
        evs.push(Event::new(EventKind::RootExit, 1, t + 4));
    }
    b.process(0, &evs);
    b.apply_message(&Message::SampledOutside {
        samples: 7,
        bytes_est: 7000,
    });
    b.finish()
}

#[test]
fn samples_land_on_the_open_frame_and_survive_a_snapshot() {
    let p = profile();
    let check = |p: &Profile| {
        let tree = &p.threads[0].tree;
        let root = &tree.nodes[tree.roots[0] as usize];
        let work = &tree.nodes[root.children[0] as usize];
        let by = |n| {
            p.node_sampled(n)
                .into_iter()
                .map(|c| {
                    let probed = (c.probed_samples, c.probed_bytes_est);
                    (c.class, c.samples, c.bytes_est, probed)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            by(root),
            vec![("java.lang.Integer".to_string(), 2, 2000, (0, 0))]
        );
        assert_eq!(
            by(work),
            vec![
                ("byte[]".to_string(), 2, 10_000, (2, 10_000)),
                ("java.lang.Integer".to_string(), 2, 2000, (0, 0)),
            ]
        );
        assert!(root.allocs.is_empty() && work.allocs.is_empty());
        let w = p.weights(tree, Metric::SampledBytes);
        assert_eq!(w[tree.roots[0] as usize].total, 14_000);
        assert_eq!(p.sampled_outside, Some((7, 7000)));
    };
    check(&p);
    let mut data = Vec::new();
    p.write_snapshot(&mut data).unwrap();
    let back = Profile::read_snapshot(&mut data.as_slice()).unwrap();
    check(&back);
    let mut json = Vec::new();
    Format::Json
        .renderer()
        .render(&back, &RenderOptions::default(), &mut json)
        .unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(
            r#""sampled_allocations":[{"class":"byte[]","samples":2,"bytes_est":10000,"probed_samples":2,"probed_bytes_est":10000},{"class":"java.lang.Integer","samples":2,"bytes_est":2000,"probed_samples":0,"probed_bytes_est":0}]"#
        ),
        "{json}"
    );
    assert!(
        json.contains(r#""sampled_outside_roots":{"samples":7,"bytes_est":7000}"#),
        "{json}"
    );
    let mut text = Vec::new();
    Format::Text
        .renderer()
        .render(&back, &RenderOptions::default(), &mut text)
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("~sampled bytes"), "{text}");
    // No exact allocation columns without exact allocations.
    assert!(!text.contains("self bytes"), "{text}");
}

/// Live objects (`--alloc=live`) through the builder: tagged samples on
/// their frames, frees and collections from the control messages, into
/// the profile's series, the nodes' figures and both reports.
#[test]
fn tagged_samples_are_live_until_freed() {
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "p.Main", "root", "()V");
    b.set_method(2, "p.Main", "grow", "()V");
    b.set_method(3, "p.Main", "churn", "()V");
    b.apply_message(&Message::AllocClass {
        id: 1,
        class: "[B".into(),
    });
    let mut tag = 0;
    for round in 0..3u64 {
        let t = round * 100;
        let mut evs = vec![Event::new(EventKind::RootEntry, 1, t + 1)];
        evs.push(Event::new(EventKind::MethodEntry, 2, t + 2));
        tag += 1;
        evs.extend(tagged(1, 16_384, 32_768, tag));
        evs.push(Event::new(EventKind::MethodExit, 2, t + 3));
        evs.push(Event::new(EventKind::MethodEntry, 3, t + 4));
        let mut churn = Vec::new();
        for _ in 0..4 {
            tag += 1;
            churn.push(tag);
            evs.extend(tagged(1, 2048, 32_768, tag));
        }
        evs.push(Event::new(EventKind::MethodExit, 3, t + 5));
        evs.push(Event::new(EventKind::RootExit, 1, t + 6));
        b.process(0, &evs);
        // The churn dies at the collection; a tag never seen changes nothing.
        churn.push(10_000 + round);
        b.apply_message(&Message::LiveFreed {
            tags: churn,
            lost: 0,
        });
        b.apply_message(&Message::LiveGc { gc: round + 1 });
    }
    let p = b.finish();
    let live = p.live.as_ref().expect("live objects");
    assert_eq!(live.series.len(), 3);
    for (i, g) in live.series.iter().enumerate() {
        assert_eq!(g.gc, i as u64 + 1);
        assert_eq!(g.total.bytes, 32_768 * (i as u64 + 1), "{g:?}");
        assert_eq!(g.rows.len(), 1);
        assert_eq!(live.contexts[g.rows[0].context as usize], vec![1, 2]);
    }
    let r = live.now.rows[0];
    assert_eq!(
        (r.live.bytes, r.live.objects, r.live.samples),
        (98_304, 6, 3)
    );
    assert_eq!(live.growth(r.context, r.class), Some(98_304 - 32_768));
    let tree = &p.threads[0].tree;
    let root = tree.roots[0];
    let grow = tree.nodes[root as usize].children[0];
    assert_eq!(live.nodes.get(&(0, grow)).map(|l| l.bytes), Some(98_304));
    assert_eq!(live.nodes.len(), 1, "{:?}", live.nodes);
    // Snapshots (version 11) carry them.
    let mut data = Vec::new();
    p.write_snapshot(&mut data).unwrap();
    let back = Profile::read_snapshot(&mut data.as_slice()).unwrap();
    assert_eq!(back.live, p.live);
    assert_eq!(back, p);

    let mut json = Vec::new();
    Format::Json
        .renderer()
        .render(&p, &RenderOptions::default(), &mut json)
        .unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(
            r#""live":{"estimate":true,"lost_frees":0,"now":{"gc":3,"bytes":98304,"objects":6,"samples":3,"rows":[{"context":["p.Main.root","p.Main.grow"],"class":"byte[]","bytes":98304,"objects":6,"samples":3,"growth_bytes":65536}]},"gcs":[{"gc":1,"bytes":32768,"#
        ),
        "{json}"
    );
    assert!(
        json.contains(r#""live":{"bytes":98304,"objects":6,"samples":3},"#),
        "{json}"
    );

    let mut text = Vec::new();
    Format::Text
        .renderer()
        .render(&p, &RenderOptions::default(), &mut text)
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("byte[]") && l.contains("grow"))
        .unwrap_or_else(|| panic!("no live row:\n{text}"));
    assert!(line.contains("98304") && line.contains("+65536"), "{line}");
    assert!(text.contains("live objects: estimates"), "{text}");
}

/// The samples outside every root by stack (`SampledOutsideStacks`), their
/// frames named by the `FrameMethod`s before them: the text table, the
/// JSON list with every frame, collapsed lines under `[outside roots]` by
/// sampled bytes only; snapshots leave them out.
#[test]
fn samples_outside_roots_are_reported_by_stack() {
    use sprig_wire::control::{OutsideStack, OutsideStacks};
    let mut b = CctBuilder::new(1_000_000_000);
    b.apply_message(&Message::AllocClass {
        id: 1,
        class: "[B".into(),
    });
    b.apply_message(&Message::AllocClass {
        id: 2,
        class: "Lp/Outer$Inner;".into(),
    });
    for (id, name) in [(0, "outsideAlloc"), (1, "run"), (2, "make")] {
        b.apply_message(&Message::FrameMethod {
            id,
            class: "p.Work".into(),
            name: name.into(),
            descriptor: "()V".into(),
        });
    }
    let stack = |class, frames: &[u32], samples, bytes_est| OutsideStack {
        class,
        frames: frames.to_vec(),
        truncated: false,
        samples,
        bytes_est,
    };
    b.apply_message(&Message::SampledOutsideStacks(OutsideStacks {
        stacks: vec![stack(2, &[2, 1], 3, 3000)],
        unkept: 0,
        unkept_bytes_est: 0,
    }));
    b.apply_message(&Message::SampledOutsideStacks(OutsideStacks {
        stacks: vec![stack(1, &[0, 1], 5, 9000)],
        unkept: 2,
        unkept_bytes_est: 100,
    }));
    b.apply_message(&Message::SampledOutside {
        samples: 10,
        bytes_est: 12_100,
    });
    let p = b.finish();
    let render = |f: Format, opts: &RenderOptions| {
        let mut out = Vec::new();
        f.renderer().render(&p, opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let text = render(Format::Text, &RenderOptions::default());
    let table = &text[text
        .find("allocations outside roots (sampled)")
        .unwrap_or_else(|| panic!("no table\n{text}"))..];
    let rows: Vec<&str> = table.lines().skip(2).take(7).map(str::trim).collect();
    assert_eq!(
        rows,
        vec![
            "9000   74.4%         5  byte[]",
            "at p.Work.outsideAlloc",
            "at p.Work.run",
            "3000   24.8%         3  p.Outer$Inner",
            "at p.Work.make",
            "at p.Work.run",
            "(2 samples, ~100 bytes, kept no stack: the agent's table was full or the stack could \
             not be read)",
        ],
        "{table}"
    );
    let json = render(Format::Json, &RenderOptions::default());
    assert!(
        json.contains(
            r#""sampled_outside_roots":{"samples":10,"bytes_est":12100,"stacks_unkept":{"samples":2,"bytes_est":100}}"#
        ),
        "{json}"
    );
    let first = r#"{"class":"byte[]","samples":5,"bytes_est":9000,"truncated":false,"frames":[{"class":"p.Work","method":"outsideAlloc","descriptor":"()V"},{"class":"p.Work","method":"run","descriptor":"()V"}]}"#;
    let second = r#"{"class":"p.Outer$Inner","samples":3,"bytes_est":3000,"truncated":false,"frames":[{"class":"p.Work","method":"make","descriptor":"()V"},{"class":"p.Work","method":"run","descriptor":"()V"}]}"#;
    let at = |s: &str| json.find(s).unwrap_or_else(|| panic!("no {s} in\n{json}"));
    assert!(
        at("\"sampled_outside_stacks\":[") < at(first) && at(first) < at(second),
        "{json}"
    );
    let by_bytes = RenderOptions {
        weight: Metric::SampledBytes,
        ..RenderOptions::default()
    };
    let collapsed = render(Format::Collapsed, &by_bytes);
    assert_eq!(
        collapsed.lines().collect::<Vec<_>>(),
        vec![
            "[outside roots];p.Work::run;p.Work::outsideAlloc;byte[] 9000",
            "[outside roots];p.Work::run;p.Work::make;p.Outer$Inner 3000",
        ],
        "{collapsed}"
    );
    // Weighed by anything else, the stacks outside roots have no value.
    let by_time = render(Format::Collapsed, &RenderOptions::default());
    assert!(!by_time.contains("[outside roots]"), "{by_time}");
    // Snapshots keep the totals, not the stacks.
    let mut data = Vec::new();
    p.write_snapshot(&mut data).unwrap();
    let back = Profile::read_snapshot(&mut data.as_slice()).unwrap();
    assert_eq!(back.sampled_outside, Some((10, 12_100)));
    assert!(back.outside_allocs().is_none());
}
