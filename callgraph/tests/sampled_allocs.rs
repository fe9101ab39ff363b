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
    SampledAlloc {
        class,
        size,
        bytes_est,
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
