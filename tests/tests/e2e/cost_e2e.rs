//! What the session cost the program, measured (JDK 17, and JDK 25 where
//! installed): after a session that ends while its root still runs, the
//! probes go silent and the root's own probes time a short tail of root
//! calls; the report sets the root's latency while the probes recorded
//! against the latency with them silent. A root that is not called after
//! the session keeps the estimate, and the tail never adds a call to the
//! tree.
//!
//! The root is `fixtures.Calls::root` (four calls inside, a few ns each):
//! the probes are most of its recorded latency.

use std::time::Duration;

use serde_json::Value;
use sprig_tests::{
    Jdk, Proc, TempDir, calls_by_path, fixture_classes, run_sprig, start_sprig, start_workload,
    test_jdks,
};

const LONG: Duration = Duration::from_secs(120);
const ROOT: [&str; 2] = ["--root", "fixtures.Calls::root"];

/// The calls `done roots N` counted.
fn done_roots(jvm: &mut Proc) -> u64 {
    let line = jvm.wait_for("done roots", LONG, |l| l.starts_with("done roots"));
    line.trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a count: {line}"))
}

/// One session into `snapshot`, stopped by Ctrl-C after `during`; the
/// JSON and text reports read back from the snapshot.
fn session(
    jvm: &mut Proc,
    snapshot: &std::path::Path,
    timing: &str,
    during: impl FnOnce(&mut Proc),
) -> (Value, String) {
    let mut args = ROOT.to_vec();
    args.extend_from_slice(&["--timing", timing]);
    let mut p = start_sprig(jvm.pid(), &args, snapshot);
    during(jvm);
    p.stop(&format!("--timing {timing}"));
    let snap = snapshot.to_str().unwrap();
    let (code, json, err) = run_sprig(&["report", snap, "--format", "json"], LONG);
    assert_eq!(code, 0, "{err}");
    let (code, text, err) = run_sprig(&["report", snap], LONG);
    assert_eq!(code, 0, "{err}");
    let json = serde_json::from_str(&json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    (json, text)
}

#[test]
fn the_cost_is_measured_after_the_session_and_the_tree_keeps_its_counts() {
    for jdk in test_jdks("the_cost_is_measured_after_the_session") {
        run_on(&jdk);
    }
}

fn run_on(jdk: &Jdk) {
    let major = jdk.major;
    let classes = fixture_classes(jdk);
    let mut jvm = start_workload(jdk, classes.path(), &[]);
    let tmp = TempDir::new("cost");
    // Calls.root compiled before any session.
    jvm.send("roots 300");
    done_roots(&mut jvm);

    for timing in ["sampled", "exact"] {
        // The root runs before, through and after the session's end.
        let (json, text) = session(
            &mut jvm,
            &tmp.path().join(format!("running-{timing}.sprig")),
            timing,
            |jvm| {
                jvm.send("roots 4000");
                std::thread::sleep(Duration::from_millis(1500));
            },
        );
        done_roots(&mut jvm);
        let c = &json["cost"];
        assert_eq!(c["measured"], true, "JDK {major} {timing}: {c}\n{text}");
        let silent = c["silent_calls"].as_u64().expect("silent_calls");
        assert!(silent > 0, "JDK {major} {timing}: {c}");
        let (rec, sil) = (
            c["recorded_p50_ns"].as_f64().expect("recorded_p50_ns"),
            c["silent_p50_ns"].as_f64().expect("silent_p50_ns"),
        );
        // Exact timing's probes cost the root measurably; sampled timing's
        // pairs (a fifth of a clock read each) can fall within the clock's
        // step: a fresh host read both medians at 60 ns (2026-11-30).
        let exact = timing == "exact";
        assert!(
            if exact { sil < rec } else { sil <= rec },
            "JDK {major} {timing}: silent p50 {sil} ns above (or, exact, not below) recorded p50 {rec} ns: {c}"
        );
        assert!(
            c["ratio"]
                .as_f64()
                .is_some_and(|r| if exact { r > 1.0 } else { r >= 1.0 }),
            "JDK {major} {timing}: {c}"
        );
        let line = text
            .lines()
            .find(|l| l.starts_with("cost: "))
            .unwrap_or_else(|| panic!("JDK {major} {timing}: no cost line:\n{text}"));
        assert!(
            line.contains("while recording")
                && line.contains("with probes silent")
                && line.contains(&format!("({silent} calls after the session)")),
            "JDK {major} {timing}: {line}"
        );
        assert!(
            !text.contains("probes: about"),
            "JDK {major} {timing}: the estimate beside a measurement:\n{text}"
        );
    }

    // The root is not called after the session: not measured, the
    // estimate stays, and the tree holds exactly the calls the fixture made.
    let mut made = 0;
    let (json, text) = session(&mut jvm, &tmp.path().join("idle.sprig"), "sampled", |jvm| {
        jvm.send("roots 500");
        made = done_roots(jvm);
    });
    let c = &json["cost"];
    assert_eq!(c["measured"], false, "JDK {major}: {c}\n{text}");
    assert_eq!(c["silent_calls"], 0, "JDK {major}: {c}");
    assert!(json["probe_cost"].is_object(), "JDK {major}: {json}");
    assert!(
        text.contains("probes: about") && text.contains("cost: not measured"),
        "JDK {major}:\n{text}"
    );
    let calls = calls_by_path(&json, &["fixtures."]);
    assert_eq!(calls["Calls.root"], made, "JDK {major}: {calls:?}");
    jvm.send("exit");
}
