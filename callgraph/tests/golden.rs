//! Golden files: every `tests/data/*.events` script is replayed through the
//! builder and rendered as text, JSON and collapsed stacks; each output must
//! equal `tests/results/<script>.<txt|json|collapsed>`. Re-bless with
//! `SPRIG_BLESS=1 cargo test -p sprig-callgraph --test golden`; on mismatch
//! the actual output is saved next to the expected one as `*.actual`.

mod common;

use sprig_callgraph::diff;
use sprig_callgraph::report::diff::{DiffCollapsed, DiffText};
use sprig_callgraph::report::{Format, RenderOptions};

#[test]
fn reports_match_golden_files() {
    let scripts = common::scripts();
    assert!(scripts.len() >= 4, "tests/data holds the golden inputs");
    let mut failures = Vec::new();
    for path in scripts {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let s = common::load(&path);
        for (format, ext) in [
            (Format::Text, "txt"),
            (Format::Json, "json"),
            (Format::Collapsed, "collapsed"),
        ] {
            let mut out = Vec::new();
            format
                .renderer()
                .render(&s.profile, &s.opts, &mut out)
                .expect("render to memory");
            // same input, same bytes
            let mut again = Vec::new();
            format
                .renderer()
                .render(&s.profile, &s.opts, &mut again)
                .unwrap();
            assert_eq!(out, again, "{stem}.{ext} is not deterministic");
            if let Err(e) = common::golden(&format!("{stem}.{ext}"), &out) {
                failures.push(e);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches:\n{}",
        failures.join("\n")
    );
}

#[test]
fn diff_reports_match_golden_files() {
    let dir = common::data_dir().join("diff");
    let a = common::load(&dir.join("before.events")).profile;
    let b = common::load(&dir.join("after.events")).profile;
    let d = diff(&a, &b);
    let opts = RenderOptions::default();
    let mut text = Vec::new();
    DiffText.render(&d, &opts, &mut text).unwrap();
    let mut collapsed = Vec::new();
    DiffCollapsed.render(&d, &opts, &mut collapsed).unwrap();
    let failures: Vec<String> = [
        common::golden("diff.txt", &text),
        common::golden("diff.collapsed", &collapsed),
    ]
    .into_iter()
    .filter_map(Result::err)
    .collect();
    assert!(
        failures.is_empty(),
        "golden mismatches:\n{}",
        failures.join("\n")
    );
}
