//! What `sprig profile` does to a JVM when a session cannot start, as a
//! user meets it (JDK 17, and JDK 25 where installed): a JVM holding an
//! older sprig's probe class gets one line saying so and exits normally
//! later; a second `sprig profile` from another copy of the agent is
//! refused with one line naming the session that runs, which counts on
//! exactly.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{
    Jdk, Proc, TempDir, agent_lib, fixture_classes, old_probe_class, run_sprig, sprig_bin,
    start_sprig, start_workload, test_jdks,
};

const LONG: Duration = Duration::from_secs(60);

/// Exits the workload JVM and checks it ended with status 0 and left no
/// crash file in its working directory.
fn assert_clean_exit(jdk: &Jdk, jvm: &mut Proc) {
    jvm.send("exit");
    let status = jvm.wait_exit(LONG).expect("the JVM exits");
    let cwd = jvm.cwd.as_ref().expect("start_workload gives a cwd").path();
    let crashes = sprig_tests::files_with_prefix(cwd, "hs_err");
    assert!(
        status.success() && crashes.is_empty(),
        "JDK {}: the JVM ended with {status:?}, crash files {crashes:?}:\n{}",
        jdk.major,
        jvm.transcript()
    );
}

/// Calls of `fixtures.Calls::root` in a JSON report, over every thread.
fn root_calls(report: &Value) -> u64 {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .flat_map(|t| t["roots"].as_array().expect("roots"))
        .filter(|r| r["class"] == "fixtures.Calls" && r["method"] == "root")
        .map(|r| r["calls"].as_u64().expect("calls"))
        .sum()
}

#[test]
fn a_jvm_with_an_older_probe_class_gets_one_line_and_exits_cleanly() {
    for jdk in test_jdks("a_jvm_with_an_older_probe_class_gets_one_line_and_exits_cleanly") {
        let classes = fixture_classes(&jdk);
        let old = old_probe_class(&jdk);
        let boot = format!("-Xbootclasspath/a:{}", old.path().join("boot").display());
        let mut flags = vec![boot.as_str()];
        if jdk.major >= 21 {
            flags.push("-XX:+EnableDynamicAgentLoading");
        }
        let mut jvm = start_workload(&jdk, classes.path(), &flags);
        let out = TempDir::new("old-probe-out");
        let report = out.path().join("r.json");
        let pid = jvm.pid().to_string();
        let (code, _, stderr) = run_sprig(
            &[
                "profile",
                &pid,
                "--root",
                "fixtures.Calls::root",
                "--duration",
                "1",
                "-o",
                report.to_str().unwrap(),
            ],
            LONG,
        );
        assert_ne!(code, 0, "JDK {}: {stderr}", jdk.major);
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("older sprig"))
            .collect();
        assert!(
            lines.len() == 1 && !stderr.contains("return code") && lines[0].contains("restart"),
            "JDK {}: sprig said:\n{stderr}",
            jdk.major
        );
        // The JVM runs on, and exits normally.
        jvm.send("run calls 10 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        assert_clean_exit(&jdk, &mut jvm);
    }
}

#[test]
fn a_second_sprig_from_another_agent_copy_is_refused_and_the_first_counts_exactly() {
    for jdk in
        test_jdks("a_second_sprig_from_another_agent_copy_is_refused_and_the_first_counts_exactly")
    {
        let classes = fixture_classes(&jdk);
        let mut flags = vec![];
        if jdk.major >= 21 {
            flags.push("-XX:+EnableDynamicAgentLoading");
        }
        let mut jvm = start_workload(&jdk, classes.path(), &flags);
        // The root's class loaded.
        jvm.send("run calls 1 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let out = TempDir::new("two-copies-out");
        let first_out = out.path().join("first.json");
        let first = start_sprig(
            jvm.pid(),
            &["--root", "fixtures.Calls::root", "--format", "json"],
            &first_out,
        );

        // Another sprig build: a different agent library, which the JVM
        // loads as a second copy.
        let install = TempDir::new("other-sprig");
        let bin = install.path().join("sprig");
        std::fs::copy(sprig_bin(), &bin).expect("copy sprig");
        let mut lib = std::fs::read(agent_lib()).expect("read the agent");
        lib.extend_from_slice(b"another build");
        std::fs::write(install.path().join("libsprig_agent.so"), lib).expect("write the agent");
        let mut cmd = Command::new(&bin);
        cmd.args(["profile", &jvm.pid().to_string()])
            .args(["--root", "fixtures.Calls::root", "--duration", "1", "-o"])
            .arg(out.path().join("second.json"));
        let mut second = Proc::spawn("second-sprig", cmd);
        let status = second.wait_exit(LONG).expect("the second sprig ends");
        let stderr = second.stderr();
        assert!(!status.success(), "JDK {}: {stderr}", jdk.major);
        let refusal: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("already running"))
            .collect();
        let user = sprig_tests_user();
        assert!(
            refusal.len() == 1
                && refusal[0].contains(&format!("sprig pid {}", first.pid()))
                && refusal[0].contains(&format!("user {user}")),
            "JDK {}: the second sprig said:\n{stderr}",
            jdk.major
        );

        jvm.send("run calls 2000 2");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let report = stop(first, &first_out);
        assert_eq!(root_calls(&report), 2000 * 2, "JDK {}", jdk.major);
        assert_clean_exit(&jdk, &mut jvm);
    }
}

/// The name of this process's effective user, as /etc/passwd has it.
fn sprig_tests_user() -> String {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
            })
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// Ctrl-C to sprig; the parsed report.
fn stop(mut sprig: Proc, out: &Path) -> Value {
    sprig.stop_and_json("lifecycle session", out)
}
