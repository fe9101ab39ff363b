//! Exact allocations against the heap sampler's (`--alloc` with
//! `--alloc-interval`): a context whose exact objects should have drawn
//! many samples and drew none is marked likely scalar-replaced in the
//! JSON report and listed in the text report's table; one sampled near
//! its exact bytes, one with too few bytes to tell, and a profile without
//! samples are not.

use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::record::{AllocRecord, RECORD_ALLOC, RecordSlots};
use sprig_wire::{Message, SampledAlloc};

const INTERVAL: u64 = 4096;

fn alloc(site: u32, count: u32, bytes: u64) -> Vec<Event> {
    let rec = AllocRecord {
        site,
        level: 0,
        count,
        bytes,
    };
    RecordSlots::new(RECORD_ALLOC, 0, &rec.words())
        .unwrap()
        .as_slice()
        .to_vec()
}

fn sample(class: u32, size: u32, probed: bool) -> Vec<Event> {
    SampledAlloc {
        class,
        size,
        bytes_est: INTERVAL + u64::from(size) / 2,
        tag: 0,
        probed,
    }
    .record(0)
    .unwrap()
    .as_slice()
    .to_vec()
}

/// Root `root` calls `local` (a `Point` a call, never sampled at its
/// site; one sample a call of a `Point` allocated below it), `kept` (a
/// `Point` a call, sampled as often as its bytes say) and `few` (20
/// `Point`s every tenth call, never sampled: 4.8 KB in all, too few bytes
/// to expect 20 samples). With `sampled` false no sample is
/// taken at all.
fn profile(sampled: bool) -> Profile {
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "p.Main", "root", "()V");
    b.set_method(2, "p.Main", "local", "()J");
    b.set_method(3, "p.Main", "kept", "()J");
    b.set_method(4, "p.Main", "few", "()J");
    for (id, method) in [(1, 2), (2, 3), (3, 4)] {
        b.apply_message(&Message::AllocSite {
            id,
            method,
            bci: 0,
            descriptor: "Lp/Main$Point;".into(),
            dims: 0,
        });
    }
    b.apply_message(&Message::AllocClass {
        id: 1,
        class: "Lp/Main$Point;".into(),
    });
    let mut evs = Vec::new();
    let mut kept_bytes = 0u64;
    let mut t = 0u64;
    for call in 0..100u64 {
        t += 10;
        evs.push(Event::new(EventKind::RootEntry, 1, t));
        for (m, site) in [(2u32, 1u32), (3, 2)] {
            evs.push(Event::new(EventKind::MethodEntry, m, t + 1));
            // 1,000 objects of 24 bytes a call.
            evs.extend(alloc(site, 1000, 24_000));
            if m == 3 && sampled {
                kept_bytes += 24_000;
                while kept_bytes >= INTERVAL {
                    kept_bytes -= INTERVAL;
                    evs.extend(sample(1, 24, true));
                }
            }
            // `local`'s callees without probes allocate `Point`s too: their
            // samples are the node's, not its sites'.
            if m == 2 && sampled {
                evs.extend(sample(1, 24, false));
            }
            evs.push(Event::new(EventKind::MethodExit, m, t + 2));
        }
        if call % 10 == 0 {
            evs.push(Event::new(EventKind::MethodEntry, 4, t + 3));
            evs.extend(alloc(3, 20, 480));
            evs.push(Event::new(EventKind::MethodExit, 4, t + 4));
        }
        evs.push(Event::new(EventKind::RootExit, 1, t + 5));
    }
    b.process(0, &evs);
    if sampled {
        b.apply_message(&Message::SampledOutside {
            samples: 0,
            bytes_est: 0,
        });
    }
    b.finish()
}

fn render(p: &Profile, format: Format) -> String {
    let mut out = Vec::new();
    format
        .renderer()
        .render(p, &RenderOptions::default(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// The `allocations` list of the node `method` opens (the JSON report's
/// text of it).
fn entry(json: &str, method: &str) -> String {
    let at = json
        .find(&format!("\"method\":\"{method}\""))
        .unwrap_or_else(|| panic!("no {method} in {json}"));
    let rest = &json[at..];
    let from = rest.find("\"allocations\":[").expect("allocations");
    let list = &rest[from..];
    list[..=list.find(']').unwrap()].to_string()
}

#[test]
fn exact_allocations_the_sampler_never_saw_are_marked() {
    let p = profile(true);
    assert_eq!(p.sampling_gauge(), Some(INTERVAL + 12));
    let json = render(&p, Format::Json);
    let local = entry(&json, "local");
    // 2.4 MB over an interval of at most 4,108 bytes: 582 samples or more.
    assert_eq!(
        local,
        r#""allocations":[{"class":"p.Main$Point","count":100000,"bytes":2400000,"physical_samples":0,"physical_estimate_bytes":0,"expected_samples":582.5,"likely_scalar_replaced":true}]"#
    );
    let kept = entry(&json, "kept");
    assert!(
        kept.contains(r#""physical_samples":585,"#)
            && kept.contains(r#""likely_scalar_replaced":false}"#),
        "{kept}"
    );
    let few = entry(&json, "few");
    assert!(
        few.contains(r#""count":200,"#)
            && few.contains(r#""physical_samples":0,"#)
            && few.contains(r#""likely_scalar_replaced":false}"#),
        "{few}"
    );

    let text = render(&p, Format::Text);
    let table = text
        .split("logical allocations the JIT likely removed (escape analysis)")
        .nth(1)
        .unwrap_or_else(|| panic!("no table in\n{text}"));
    let rows: Vec<&str> = table
        .lines()
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(rows.len(), 1, "{table}");
    let row = rows[0];
    assert!(
        row.contains("2400000") && row.contains("100000") && row.contains("p.Main$Point"),
        "{row}"
    );
    assert!(row.contains("p.Main.root > p.Main.local"), "{row}");
    assert!(table.contains("an inference"), "{text}");

    // A profile whose samples do not say which were at probed sites (a
    // snapshot before version 12) compares all of the node's samples:
    // `local`'s 100 samples from below it then stand for its sites.
    let mut old = profile(true);
    old.probed_split = false;
    let local = entry(&render(&old, Format::Json), "local");
    assert!(
        local.contains(r#""physical_samples":100,"#)
            && local.contains(r#""likely_scalar_replaced":false}"#),
        "{local}"
    );
}

#[test]
fn without_samples_nothing_is_inferred() {
    let p = profile(false);
    assert_eq!(p.sampling_gauge(), None);
    let json = render(&p, Format::Json);
    assert!(!json.contains("likely_scalar_replaced"), "{json}");
    assert!(!json.contains("physical_estimate_bytes"), "{json}");
    let text = render(&p, Format::Text);
    assert!(!text.contains("JIT likely removed"), "{text}");
}
