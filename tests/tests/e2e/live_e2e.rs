//! Live objects (`--alloc=live`) end to end, on JDK 17 and 25, one JVM per
//! JDK for two sessions (fixture `fixtures.Leak`: a root whose callee
//! `grow` keeps 256 KiB a round in a list that only grows, while `churn`
//! makes 2 MiB a round that dies; each round ends with `System.gc()`):
//! the growing context ranks first by live bytes within 3 collections and
//! stays first, the churn holds under 5% of the live bytes at every
//! collection from then on, the growing node's JSON `live` figures are
//! there, and once that session detached, the next one on the same JVM
//! follows live objects again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, start_java, start_sprig};

const LONG: Duration = Duration::from_secs(120);
/// One sample every 32 KiB on average: about 8 of `grow`'s arrays a
/// round, 64 of `churn`'s.
const INTERVAL: &str = "32768";

fn start_jvm(jdk: &Jdk, classes: &std::path::Path, fault: Option<&str>) -> Proc {
    // A young generation that the rounds of one session do not fill: the
    // collections are the rounds' `System.gc()`.
    start_java(
        jdk,
        classes,
        &["-Xms256m", "-Xmx256m", "-Xmn160m"],
        "fixtures.Leak",
        fault.map(|f| ("SPRIG_AGENT_FAULT", f)).as_slice(),
    )
}

/// One session of `rounds` rounds; the JSON report and sprig's output.
fn session_with_output(jvm: &mut Proc, rounds: u32) -> (Value, String) {
    let tmp = TempDir::new("live");
    let out = tmp.path().join("report.json");
    let mut sprig = start_sprig(
        jvm.pid(),
        &[
            "--root",
            "fixtures.Leak::round",
            "--alloc=live",
            "--alloc-interval",
            INTERVAL,
            "--format",
            "json",
        ],
        &out,
    );
    jvm.send(&format!("run {rounds}"));
    jvm.wait_for("done", LONG, |l| l.starts_with("done "));
    let report = sprig.stop_and_json("live session", &out);
    (report, sprig.transcript())
}

fn session(jvm: &mut Proc, rounds: u32) -> Value {
    session_with_output(jvm, rounds).0
}

/// A point's live bytes per context, by its innermost method.
fn by_context(point: &Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for r in point["rows"].as_array().expect("rows") {
        let leaf = r["context"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|l| l.as_str())
            .and_then(|l| l.rsplit('.').next())
            .expect("context")
            .to_string();
        *m.entry(leaf).or_default() += r["bytes"].as_u64().expect("bytes");
    }
    m
}

/// The live bytes of the nodes named `method`, from their JSON `live`.
fn node_live(report: &Value, method: &str) -> u64 {
    fn walk(n: &Value, method: &str, sum: &mut u64) {
        if n["method"] == method {
            *sum += n["live"]["bytes"].as_u64().unwrap_or(0);
        }
        for c in n["children"].as_array().into_iter().flatten() {
            walk(c, method, sum);
        }
    }
    let mut sum = 0;
    for t in report["threads"].as_array().expect("threads") {
        for r in t["roots"].as_array().expect("roots") {
            walk(r, method, &mut sum);
        }
    }
    sum
}

fn check(what: &str, report: &Value, rounds: u64) {
    let live = &report["live"];
    assert_eq!(live["estimate"], true, "{what}: {live}");
    let gcs = live["gcs"].as_array().expect("live gcs");
    let series: Vec<(u64, BTreeMap<String, u64>, u64)> = gcs
        .iter()
        .map(|g| {
            (
                g["gc"].as_u64().expect("gc"),
                by_context(g),
                g["bytes"].as_u64().expect("bytes"),
            )
        })
        .collect();
    for (gc, ctx, total) in &series {
        println!("{what}: after gc {gc}: {total} live bytes {ctx:?}");
    }
    assert!(
        series.last().is_some_and(|s| s.0 >= rounds),
        "{what}: the series ends before the {rounds} collections\n{live}"
    );
    // Within 3 collections the growing context ranks first, and from then
    // on it stays first with the churn under 5% of the live bytes.
    let from = series
        .iter()
        .rposition(|s| s.0 <= 3)
        .unwrap_or_else(|| panic!("{what}: no point within 3 collections\n{live}"));
    for (gc, ctx, total) in &series[from..] {
        let first = ctx.iter().max_by_key(|(_, b)| **b).map(|(c, _)| c.as_str());
        assert_eq!(first, Some("grow"), "{what} gc {gc}: {ctx:?}");
        let churn = ctx.get("churn").copied().unwrap_or(0);
        assert!(
            (churn as f64) < 0.05 * *total as f64,
            "{what} gc {gc}: churn {churn} of {total} live bytes: {ctx:?}"
        );
    }
    // Its live bytes grow from the first collection to the last.
    let first_grow = series[0].1.get("grow").copied().unwrap_or(0);
    let last_grow = series.last().unwrap().1.get("grow").copied().unwrap_or(0);
    assert!(
        last_grow > first_grow,
        "{what}: grow's live bytes did not grow ({first_grow} -> {last_grow})"
    );
    // The growing node carries its live figures.
    assert!(
        node_live(report, "grow") > 0,
        "{what}: no live bytes on grow"
    );
}

#[test]
fn a_growing_context_ranks_first_by_live_bytes_amid_churn() {
    for jdk in sprig_tests::test_jdks("live_objects") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_jvm(&jdk, classes.path(), None);
        let report = session(&mut jvm, 4);
        check(&format!("JDK {} session A", jdk.major), &report, 4);
        // The JVM runs on, and the next session follows live objects again.
        let report = session(&mut jvm, 3);
        check(&format!("JDK {} session B", jdk.major), &report, 3);
        jvm.send("exit");
        let _ = jvm.wait_exit(LONG);
        println!("JDK {}: {:.1} s", jdk.major, t0.elapsed().as_secs_f64());
    }
}

#[test]
fn live_objects_without_samples_is_one_clear_line() {
    let (code, _, err) = sprig_tests::run_sprig(
        &[
            "run",
            "--alloc=live",
            "--alloc-interval",
            "0",
            "--root",
            "a.B::c",
            "--",
            "java",
        ],
        LONG,
    );
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("--alloc=live") && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, _, err) = sprig_tests::run_sprig(
        &["run", "--alloc=dead", "--root", "a.B::c", "--", "java"],
        LONG,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--alloc"), "{err}");
}

#[test]
fn without_the_capabilities_one_line_and_samples_only() {
    for jdk in sprig_tests::test_jdks("live_objects_unavailable") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_jvm(&jdk, classes.path(), Some("live-unavailable"));
        let (report, transcript) = session_with_output(&mut jvm, 2);
        let what = format!("JDK {}", jdk.major);
        let lines: Vec<&str> = transcript
            .lines()
            .filter(|l| l.contains("no live objects"))
            .collect();
        assert_eq!(lines.len(), 1, "{what}: one line expected\n{transcript}");
        assert!(lines[0].contains("can_tag_objects"), "{what}: {}", lines[0]);
        assert!(report.get("live").is_none(), "{what}: {}", report["live"]);
        // The allocation samples go on.
        let text = report.to_string();
        assert!(text.contains("\"sampled_allocations\""), "{what}");
        jvm.send("exit");
        let _ = jvm.wait_exit(LONG);
        println!("JDK {}: {:.1} s", jdk.major, t0.elapsed().as_secs_f64());
    }
}
