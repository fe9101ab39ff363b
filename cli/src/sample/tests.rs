//! A `sprig sample` session against an agent played by a thread: the
//! `Start` it sends, the samples it takes from the messages, the report.

use std::time::Duration;

use clap::Parser;
use serde_json::Value;
use sprig_wire::control::{AgentStats, JvmInfo, SampledState, StackSample};

use super::*;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SampleArgs,
}

fn frame(id: u32, class: &str, name: &str) -> Message {
    Message::FrameMethod {
        id,
        class: class.into(),
        name: name.into(),
        descriptor: "()V".into(),
    }
}

/// The agent's side: checks `Start`, sends 100 rounds (a worker 70% in
/// `heavy`, 30% in `light` under `work`; a thread blocked in `locked`),
/// answers the detach. Returns what `Start` asked for.
fn agent(opts: sprig_wire::control::AgentOptions) -> anyhow::Result<Option<StackOptions>> {
    let jvm = JvmInfo {
        pid: std::process::id(),
        version: "17".into(),
        vm_name: "Test VM".into(),
        vendor: "test".into(),
    };
    let mut ch = sprig_wire::session::connect(&opts, jvm, Duration::from_secs(10))?;
    let Message::Start(options) = ch.recv()? else {
        bail!("no Start");
    };
    if !options.roots.is_empty() || options.calibrate {
        bail!("a sampling session asked for roots or calibration: {options:?}");
    }
    ch.send(&Message::Started {
        clock: ClockKind::Monotonic,
        ticks_per_sec: 1_000_000_000,
    })?;
    for m in [
        frame(1, "java.lang.Thread", "run"),
        frame(2, "app.A", "work"),
        frame(3, "app.A", "heavy"),
        frame(4, "app.A", "light"),
        frame(5, "app.A", "locked"),
    ] {
        ch.send(&m)?;
    }
    ch.send(&Message::SampledThread {
        java_id: 20,
        name: "worker".into(),
    })?;
    ch.send(&Message::SampledThread {
        java_id: 21,
        name: "waiter".into(),
    })?;
    for r in 0..100u64 {
        let leaf = if r % 10 < 7 { 3 } else { 4 };
        ch.send(&Message::StackSamples {
            time_ns: 5_000_000_000 + r * 20_000_000,
            cost_ns: 200_000,
            samples: vec![
                StackSample {
                    thread: 20,
                    state: SampledState::Running,
                    cpu_ns: 20_000_000,
                    frames: vec![leaf, 2, 1],
                    truncated: false,
                },
                StackSample {
                    thread: 21,
                    state: SampledState::Blocked,
                    cpu_ns: 0,
                    frames: vec![5, 1],
                    truncated: false,
                },
            ],
        })?;
    }
    // The session's --duration is 0.3 s; the wait is long so that only a
    // session that never detaches fails here (one did in two CI runs,
    // after 10 s, not reproduced: the label says which session).
    let waited = std::time::Instant::now();
    match ch.recv_timeout(Duration::from_secs(60))? {
        Some(Message::Detach) => {}
        other => bail!(
            "expected Detach, got {other:?} after {:?}",
            waited.elapsed()
        ),
    }
    ch.send(&Message::Detached(AgentStats::default()))?;
    Ok(options.stacks)
}

fn session(extra: &[&str]) -> (Value, Option<StackOptions>) {
    let dir = std::env::temp_dir().join(format!(
        "sprig-sample-test-{}-{}",
        std::process::id(),
        extra.join("")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("report.json");
    let out_s = out.to_str().unwrap().to_owned();
    let mut argv = vec![
        "sprig",
        "1",
        "--format",
        "json",
        "-o",
        &out_s,
        "--interval",
        "20",
        "--suggest-roots",
        "5",
    ];
    argv.extend_from_slice(extra);
    let args = Cli::parse_from(argv).args;
    args.validate().unwrap();
    let (prepared, channel, thread) = session::played_agent(agent);
    let plan = Plan {
        pid: std::process::id(),
        duration: Some(0.3),
        quiet: true,
        excludes: Vec::new(),
    };
    let s = Session::start(&prepared, channel, session_options(&args), plan, None).unwrap();
    let work = Stacks {
        profile: StackProfile::new(u64::from(args.interval_us()) * 1000),
        args: &args,
        jvm_line: "Test VM 17".into(),
        since_poll: 0,
        live: None,
        announced: false,
        edges: None,
        own_cpu: super::own_cpu::Meter::new(0),
    };
    let code = s.run(work).expect("the session");
    // What the played agent met, before the session's exit code: a session
    // that ended early says only that the agent closed the connection.
    let agent_result = thread.join().unwrap();
    assert_eq!(
        code,
        ExitCode::SUCCESS,
        "session {extra:?}: the played agent: {agent_result:?}"
    );
    let stacks = agent_result.expect("the agent");
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
        stacks,
    )
}

fn method<'v>(report: &'v Value, name: &str) -> &'v Value {
    report["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["method"] == name)
        .unwrap_or_else(|| panic!("no {name}: {report}"))
}

#[test]
fn a_sampling_session_from_start_to_report() {
    let (cpu, stacks) = session(&[]);
    assert_eq!(
        stacks,
        Some(StackOptions {
            interval_us: 20_000,
            max_depth: 2048,
            source: sprig_wire::control::StackSource::Timer,
        })
    );
    assert_eq!(cpu["view"], "cpu");
    assert_eq!(cpu["samples"], 100);
    assert_eq!(cpu["wall_samples"], 200);
    assert_eq!(method(&cpu, "heavy")["total"], 70);
    assert_eq!(method(&cpu, "light")["self"], 30);
    assert_eq!(method(&cpu, "work")["total"], 100);
    // blocked: not in the CPU view
    assert!(
        cpu["methods"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["method"] != "locked"),
        "{cpu}"
    );
    let roots: Vec<&str> = cpu["suggested_roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["root"].as_str().unwrap())
        .collect();
    // work is on every sample of the worker (a loop by sampling): after
    // the units of work below it.
    assert_eq!(roots[0], "app.A::heavy", "{cpu}");
    assert!(roots.contains(&"app.A::work"), "{cpu}");
    assert!(!roots.contains(&"java.lang.Thread::run"));
    let cmd = cpu["suggested_roots"][0]["command"].as_str().unwrap();
    assert!(cmd.ends_with(" --root 'app.A::heavy'"), "{cmd}");

    let (wall, _) = session(&["--clock", "wall", "--threads"]);
    assert_eq!(wall["samples"], 200);
    assert_eq!(method(&wall, "locked")["total"], 100);
    let waiter = wall["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "waiter")
        .expect("the waiter");
    assert_eq!(waiter["wall_samples"], 100);
    assert_eq!(waiter["cpu_samples"], 0);
    assert!(waiter["tree"].is_array());
}

#[test]
fn the_text_report_shows_hot_methods_the_tree_and_ready_commands() {
    let args = Cli::parse_from(["sprig", "4242", "--back-trace", "app.A::heavy"]).args;
    let mut profile = StackProfile::new(20_000_000);
    for (id, class, name) in [
        (1, "java.lang.Thread", "run"),
        (2, "app.A", "work"),
        (3, "app.A", "heavy"),
    ] {
        profile.add_method(id, MethodInfo::new(class, name, "()V"));
    }
    for r in 0..40u64 {
        profile.add_round(
            r * 20_000_000,
            1000,
            &[StackSample {
                thread: 7,
                state: SampledState::Running,
                cpu_ns: 20_000_000,
                frames: if r % 2 == 0 {
                    vec![3, 2, 1]
                } else {
                    vec![2, 1]
                },
                truncated: false,
            }],
        );
    }
    let s = Stacks {
        args: &args,
        profile,
        jvm_line: "Test VM".into(),
        since_poll: 0,
        live: None,
        announced: false,
        edges: None,
        own_cpu: super::own_cpu::Meter::new(0),
    };
    let mut out = Vec::new();
    text::write(&s, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut top = Vec::new();
    text::live(&s, 1, &mut top).unwrap();
    let top = String::from_utf8(top).unwrap();
    assert!(
        top.starts_with("sprig sample: JVM 4242, 1 s, 40 cpu samples, 1 threads"),
        "{top}"
    );
    assert_eq!(top.lines().count(), 5, "{top}");
    for want in [
        "cpu view: 40 samples (wall view: 40, CPU view: 40)",
        "   50.0%   50.0%       20  app.A.heavy()V",
        "  100.0%        0  java.lang.Thread.run()V",
        "  100.0%       20    app.A.work()V",
        "     predicted overhead: unknown (run with --edges)",
        "Back traces of app.A.heavy()V",
        // work is on every sample of its thread: a loop, after heavy
        "  1. app.A::heavy  50.0% (windows: 50, 50, 50, 50%)",
        "  2. app.A::work  100.0% (windows: 100, 100, 100, 100%)",
        "     sprig profile 4242 --root 'app.A::work'",
        "     a loop: on the stack in nearly every sample of its thread",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

/// An agent that refuses to sample (one without the stack sampler):
/// the session ends with its error and a failing exit code, and no
/// report is written.
#[test]
fn an_agent_that_cannot_sample_ends_the_session_with_its_error() {
    let dir = std::env::temp_dir().join(format!("sprig-sample-refused-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("report.json");
    let args = Cli::parse_from([
        "sprig",
        "1",
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
    ])
    .args;
    let (prepared, channel, thread) = session::played_agent(|opts| -> anyhow::Result<()> {
        let jvm = JvmInfo {
            pid: std::process::id(),
            version: "17".into(),
            vm_name: "Test VM".into(),
            vendor: "test".into(),
        };
        let mut ch = sprig_wire::session::connect(&opts, jvm, Duration::from_secs(10))?;
        let _start = ch.recv()?;
        ch.send(&Message::Started {
            clock: ClockKind::Monotonic,
            ticks_per_sec: 1_000_000_000,
        })?;
        ch.send(&Message::Error("no root pattern given".into()))?;
        if let Some(Message::Detach) = ch.recv_timeout(Duration::from_secs(10))? {
            ch.send(&Message::Detached(AgentStats::default()))?;
        }
        Ok(())
    });
    let plan = Plan {
        pid: std::process::id(),
        duration: Some(5.0),
        quiet: true,
        excludes: Vec::new(),
    };
    let s = Session::start(&prepared, channel, session_options(&args), plan, None).unwrap();
    let work = Stacks {
        profile: StackProfile::new(20_000_000),
        args: &args,
        jvm_line: String::new(),
        since_poll: 0,
        live: None,
        announced: false,
        edges: None,
        own_cpu: super::own_cpu::Meter::new(0),
    };
    let code = s
        .run(work)
        .expect("the session ends with the agent's error");
    assert_ne!(code, ExitCode::SUCCESS);
    thread.join().unwrap().expect("the agent");
    assert!(!out.exists(), "a report was written");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--edges` probes the classes sampled outside the JDK's library: an
/// application's and the tools the JDK ships (javac), not the library's
/// nor sprig's own.
#[test]
fn edge_classes_are_the_sampled_classes_outside_the_jdks_library() {
    let mut p = StackProfile::new(20_000_000);
    let methods = [
        (1, "java.lang.Thread", "run"),
        (2, "app.A", "work"),
        (3, "com.sun.tools.javac.jvm.Gen", "genClass"),
        (4, "sprig.rt.Probe", "enter"),
        (5, "app.A", "leaf"),
        (6, "app.B", "never"),
    ];
    for (id, class, name) in methods {
        p.add_method(id, MethodInfo::new(class, name, "()V"));
    }
    p.add_thread(10, "worker");
    p.add_round(
        0,
        0,
        &[StackSample {
            thread: 10,
            state: SampledState::Running,
            cpu_ns: 1_000_000,
            frames: vec![4, 5, 3, 2, 1],
            truncated: false,
        }],
    );
    assert_eq!(edge_classes(&p), ["app.A", "com.sun.tools.javac.jvm.Gen"]);
}
