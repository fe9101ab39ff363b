//! `sprig sample --suggest-roots` on a fixture shaped like a server
//! (`fixtures.Dispatch`, JDK 17 and 25): a loop thread that never returns
//! dispatches requests to a handler. The handler, the unit of work, is
//! among the first suggestions; the loop, on every stack of its thread, is
//! not first and ranks after the handler, as a loop.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, fixture_classes, run_sprig, test_jdks};

const CLASS: &str = "fixtures.Dispatch";

/// As in sample_e2e: C2 keeps the inlining scope of every instruction,
/// so a timer sample names the inlined method it lands in.
const PRECISE: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"];

fn start(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.args(PRECISE).arg("-cp").arg(classes).arg(CLASS);
    let mut p = Proc::spawn(&format!("dispatch-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
}

/// `sprig sample PID --interval 1 --suggest-roots 5` for `secs` seconds:
/// the report.
fn sample(jvm: &Proc, secs: &str) -> Value {
    let pid = jvm.pid().to_string();
    let args = [
        "sample",
        &pid,
        "--format",
        "json",
        "--quiet",
        "--interval",
        "1",
        "--duration",
        secs,
        "--suggest-roots",
        "5",
    ];
    let (code, out, err) = run_sprig(&args, Duration::from_secs(90));
    assert_eq!(code, 0, "sprig {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

#[test]
fn suggest_roots_puts_the_handler_before_the_dispatch_loop() {
    for jdk in test_jdks("suggest_roots_puts_the_handler_before_the_dispatch_loop") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let jvm = start(&jdk, classes.path());
        // The timer fires at the scheduler's ticks of the loop thread's
        // CPU time (1 ms asks for every tick), and the samples come with
        // the CPU the thread gets: on a loaded host a longer run gathers
        // the 300 that keep each of the 4 windows' shares steady.
        let mut report = Value::Null;
        for secs in ["3", "8"] {
            report = sample(&jvm, secs);
            if report["samples"].as_u64().unwrap_or(0) >= 300 {
                break;
            }
        }
        let roots = report["suggested_roots"]
            .as_array()
            .expect("suggested_roots");
        let names: Vec<&str> = roots.iter().map(|r| r["root"].as_str().unwrap()).collect();
        let kinds: Vec<&str> = roots
            .iter()
            .map(|r| r["kind"].as_str().unwrap_or("?"))
            .collect();
        println!(
            "JDK {}: {} samples; suggested {names:?} ({kinds:?}) in {:.1} s",
            jdk.major,
            report["samples"],
            t0.elapsed().as_secs_f64()
        );
        let at = |m: &str| names.iter().position(|&n| n == format!("{CLASS}::{m}"));
        let handle = at("handle")
            .unwrap_or_else(|| panic!("JDK {}: handle is not suggested: {names:?}", jdk.major));
        assert!(
            handle < 3,
            "JDK {}: handle is suggestion {}: {names:?}",
            jdk.major,
            handle + 1
        );
        assert_eq!(
            kinds[handle], "unit",
            "JDK {}: {names:?} {kinds:?}",
            jdk.major
        );
        if let Some(serve) = at("serve") {
            assert!(
                serve > handle,
                "JDK {}: the loop before the handler: {names:?}",
                jdk.major
            );
            assert_eq!(
                kinds[serve], "loop",
                "JDK {}: {names:?} {kinds:?}",
                jdk.major
            );
        }
        assert_ne!(
            names.first().copied(),
            Some(format!("{CLASS}::serve").as_str()),
            "JDK {}",
            jdk.major
        );
    }
}
