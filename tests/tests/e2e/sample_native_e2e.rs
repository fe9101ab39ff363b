//! `sprig sample`'s Java and native views on real JVMs (JDK 17, and JDK
//! 25 where installed), on `fixtures.NativeBurn`: thread `burn-native`
//! spends its CPU in the JDK's native `Deflater.deflateBytesBytes`
//! (zlib), thread `burn-java` in Java code. The timer source tells a
//! sample of a thread in a native method from one in Java: the report's
//! share of the CPU view in native methods is within 10 points of the
//! fixture's own clocks, `--java-only` (what JFR's execution samples
//! show) leaves the native samples out of the view and still counts them,
//! and the report holds the CPU time sprig's work took in the target
//! (its signal handler and its threads) beside the target's.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Proc, fixture_classes, fixture_shares, start_sample_in_window, test_jdks};

const CLASS: &str = "fixtures.NativeBurn";

/// `sprig sample PID --format json --interval 5 --duration SECS` with
/// `extra`: the report, and the fixture's totals over the sampling (reset
/// when sprig says it samples, read once it exited): in deflate, the
/// native thread's, the Java thread's, wall ns.
fn sample(jvm: &mut Proc, secs: &str, extra: &[&str]) -> (Value, Vec<f64>) {
    let dir = sprig_tests::TempDir::new("native-sample");
    let out = dir.path().join("report.json");
    let mut args = vec!["--interval", "5", "--duration", secs];
    args.extend_from_slice(extra);
    let mut sprig = start_sample_in_window(jvm, &args, &out);
    let report = sprig.ended_json("sprig sample", &out, Duration::from_secs(60));
    (report, fixture_shares(jvm))
}

/// A method's total samples in the report's view, 0 when absent.
fn total(report: &Value, class: &str, method: &str) -> u64 {
    report["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["class"] == class && m["method"] == method)
        .map_or(0, |m| m["total"].as_u64().unwrap())
}

fn num(report: &Value, key: &str) -> u64 {
    report[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in the report: {report}"))
}

#[test]
fn sample_tells_native_from_java_and_counts_its_own_cost() {
    for jdk in test_jdks("sample_tells_native_from_java_and_counts_its_own_cost") {
        let classes = fixture_classes(&jdk);
        let mut cmd = Command::new(jdk.java());
        cmd.arg("-cp").arg(classes.path()).arg(CLASS);
        let mut jvm = Proc::spawn(&format!("native-burn-jdk{}", jdk.major), cmd);
        jvm.wait_for("ready", Duration::from_secs(30), |l| l == "ready");

        // All of the CPU view: the native share by the fixture's clocks.
        // The samples come with the CPU the JVM gets: on a loaded host
        // (20% of a core at load 16) a longer run gathers the 250 wanted.
        let (mut all, mut v) = (Value::Null, Vec::new());
        for secs in ["3", "8", "16"] {
            (all, v) = sample(&mut jvm, secs, &[]);
            if num(&all, "cpu_samples") >= 250 {
                break;
            }
        }
        let truth = v[0] / (v[1] + v[2]);
        let cpu = num(&all, "cpu_samples");
        let native = num(&all, "native_cpu_samples");
        let share = native as f64 / cpu.max(1) as f64;
        let deflate = total(&all, "java.util.zip.Deflater", "deflateBytesBytes");
        let java = total(&all, CLASS, "javaWork");
        eprintln!(
            "JDK {}: {native} of {cpu} CPU samples in native methods ({:.1}%), the fixture's \
             clocks {:.1}% ({:.0}% and {:.0}% of a core); deflateBytesBytes {deflate}, \
             javaWork {java}",
            jdk.major,
            share * 100.0,
            truth * 100.0,
            v[1] / v[3] * 100.0,
            v[2] / v[3] * 100.0,
        );
        assert!(
            cpu >= 150 && deflate > 0 && java > 0,
            "JDK {}: {cpu} CPU samples, deflateBytesBytes {deflate}, javaWork {java}",
            jdk.major
        );
        assert!(
            (0.2..=0.8).contains(&truth),
            "JDK {}: the fixture spent {truth:.3} of its CPU time in deflate",
            jdk.major
        );
        assert!(
            (share - truth).abs() <= 0.10,
            "JDK {}: {:.1}% of the CPU view in native methods, {:.1}% by the fixture's clocks",
            jdk.major,
            share * 100.0,
            truth * 100.0
        );
        assert_eq!(all["java_only"], false, "JDK {}", jdk.major);

        // sprig's own CPU time in the target, beside the target's.
        let own = &all["sprig_cpu"];
        let handler = own["handler_ns"].as_u64().expect("handler_ns");
        let threads = own["threads_ns"].as_u64().expect("threads_ns");
        let target = own["target_cpu_ns"].as_u64().expect("target_cpu_ns");
        let burned = (v[1] + v[2]) as u64;
        eprintln!(
            "JDK {}: sprig's CPU in the target: handler {:.2} ms, threads {:.2} ms, of the \
             target's {:.0} ms (the fixture's threads {:.0} ms): {:.2}%",
            jdk.major,
            handler as f64 / 1e6,
            threads as f64 / 1e6,
            target as f64 / 1e6,
            burned as f64 / 1e6,
            own["share"].as_f64().unwrap_or(f64::NAN) * 100.0
        );
        assert!(
            handler > 0 && handler < burned,
            "JDK {}: the handler took {handler} ns of the fixture's {burned} ns",
            jdk.major
        );
        assert!(
            threads > 0 && threads < target && target >= burned / 2,
            "JDK {}: sprig's threads {threads} ns, the target {target} ns, the fixture's \
             threads {burned} ns",
            jdk.major
        );

        // Java only: what JFR's execution samples show.
        let (java_only, _) = sample(&mut jvm, "3", &["--java-only"]);
        let cpu = num(&java_only, "cpu_samples");
        let native = num(&java_only, "native_cpu_samples");
        let deflate = total(&java_only, "java.util.zip.Deflater", "deflateBytesBytes");
        let java = total(&java_only, CLASS, "javaWork");
        eprintln!(
            "JDK {}: --java-only: {cpu} CPU samples, {native} native ones left out; \
             deflateBytesBytes {deflate}, javaWork {java}",
            jdk.major
        );
        assert_eq!(java_only["java_only"], true, "JDK {}", jdk.major);
        assert!(
            cpu >= 20 && deflate == 0 && java * 10 >= cpu * 9 && native * 5 >= cpu,
            "JDK {}: --java-only: deflateBytesBytes {deflate}, javaWork {java} of {cpu}, \
             {native} native samples left out",
            jdk.major
        );
    }
}
