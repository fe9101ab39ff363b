//! Allocation samples (`--alloc-interval`) in the builder and the model:
//! each record lands on the frame open at its place in the thread's
//! stream, by class; the JSON report lists them apart from the exact
//! allocations, with Java source names; snapshots (version 10) carry them
//! and the samples taken outside every root context.

use sprig_callgraph::profile::Metric;
use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::{Message, SampledAlloc};

fn sample(class: u32, size: u32, bytes_est: u64) -> Vec<Event> {
    tagged(class, size, bytes_est, 0)
}

fn tagged(class: u32, size: u32, bytes_est: u64, tag: u64) -> Vec<Event> {
    SampledAlloc {
        class,
        size,
        bytes_est,
        tag,
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
        evs.extend(sample(1, 4000, 5000));
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
                .map(|c| (c.class, c.samples, c.bytes_est))
                .collect::<Vec<_>>()
        };
        assert_eq!(by(root), vec![("java.lang.Integer".to_string(), 2, 2000)]);
        assert_eq!(
            by(work),
            vec![
                ("byte[]".to_string(), 2, 10_000),
                ("java.lang.Integer".to_string(), 2, 2000),
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
            r#""sampled_allocations":[{"class":"byte[]","samples":2,"bytes_est":10000},{"class":"java.lang.Integer","samples":2,"bytes_est":2000}]"#
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
