//! Roots and `--include` on the JDK code sprig's own probes call
//! (`Thread.getId`, `Thread.isVirtual`, `Unsafe`, the FFM downcalls of JDK
//! 22+): sprig leaves those methods out and says so in one line, and every
//! thread of the JVM lives on. Probes in them called themselves without end:
//! the thread that ran them died of a `StackOverflowError` (the JVM's main
//! thread, and with it the JVM), or, under exact timing, the agent's own
//! control thread looped until the CLI gave up on the detach.

use std::process::Command;
use std::time::{Duration, Instant};

use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, sprig_bin, start_workload, test_jdks};

const LONG: Duration = Duration::from_secs(60);

/// What a session of a case ends with.
enum Ends {
    /// Profiles what is left after `--duration`; stderr says which methods
    /// were left out in a line containing this.
    Profiles(&'static str),
    /// Refused by itself with this in its one-line error (nothing is left
    /// to profile).
    Refused(&'static str),
}

struct Case {
    args: Vec<&'static str>,
    /// Workload command run while profiling, and the line that answers it.
    during: (&'static str, &'static str),
    ends: Ends,
}

fn cases(jdk: &Jdk) -> Vec<Case> {
    // The method of `Thread` the root probes call on this JDK.
    let only = if jdk.major >= 22 {
        "java.lang.Thread::isVirtual"
    } else {
        "java.lang.Thread::getId"
    };
    vec![
        Case {
            args: vec!["--root", "java.lang.Thread::*"],
            during: ("run calls 200 2", "done calls"),
            ends: Ends::Profiles("java.lang.Thread.getId"),
        },
        Case {
            args: vec!["--root", only],
            during: ("run calls 200 2", "done calls"),
            ends: Ends::Refused("names only code sprig's own probes run"),
        },
        Case {
            args: vec!["--root", "**::*", "--roots-only", "--timing", "exact"],
            during: ("run calls 200 2", "done calls"),
            ends: Ends::Profiles("java.lang.Thread.getId"),
        },
        Case {
            args: vec!["--root", "**::*", "--roots-only"],
            during: ("run calls 200 2", "done calls"),
            ends: Ends::Profiles("java.lang.Thread.getId"),
        },
        Case {
            // The root starts and joins threads: revelation redefines
            // `Thread`, whose other methods get dormant probes (trivial
            // ones too: `getId` and `threadId` return a field).
            args: vec![
                "--root",
                "fixtures.Workload::run",
                "--include",
                "java.**",
                "--keep-trivial",
            ],
            during: ("run sleepy 50 2", "done sleepy"),
            ends: Ends::Profiles("--include: the JDK code sprig's own probes call"),
        },
        Case {
            // The same through Scheme A: the whole reachable graph at once.
            args: vec![
                "--root",
                "fixtures.Workload::run",
                "--include",
                "java.**",
                "--keep-trivial",
                "--scheme",
                "eager",
            ],
            during: ("run sleepy 50 2", "done sleepy"),
            ends: Ends::Profiles("--include: the JDK code sprig's own probes call"),
        },
    ]
}

fn one_case(jdk: &Jdk, classes: &std::path::Path, case: &Case) {
    let what = format!("JDK {} sprig profile {}", jdk.major, case.args.join(" "));
    eprintln!("== {what}");
    let tmp = TempDir::new("probe-path");
    let out = tmp.path().join("report.txt");
    let mut jvm = start_workload(jdk, classes, &[]);
    // The fixture's classes loaded before the attach.
    for warm in ["run calls 1 1", "run sleepy 1 1"] {
        jvm.send(warm);
        let done = format!("done {}", warm.split(' ').nth(1).unwrap_or(""));
        jvm.wait_for(&done, LONG, |l| l.starts_with(&done));
    }
    let mut cmd = Command::new(sprig_bin());
    cmd.arg("profile")
        .arg(jvm.pid().to_string())
        .args(&case.args)
        .args(["--duration", "1", "-o"])
        .arg(&out);
    let mut sprig = Proc::spawn("sprig", cmd);
    let transcripts = |sprig: &Proc, jvm: &Proc| {
        format!(
            "{what}\nsprig:\n{}\nJVM:\n{}",
            sprig.transcript(),
            jvm.transcript()
        )
    };
    let t0 = Instant::now();
    match case.ends {
        Ends::Profiles(_) => {
            let profiling = sprig.try_wait_for(LONG, |_, l| l.starts_with("sprig: profiling"));
            assert!(
                profiling.is_some(),
                "never profiled: {}",
                transcripts(&sprig, &jvm)
            );
            let (command, answer) = case.during;
            jvm.send(command);
            let answered = jvm.try_wait_for(LONG, |_, l| l.starts_with(answer));
            assert!(
                answered.is_some(),
                "the workload did not answer {command:?} while profiled: {}",
                transcripts(&sprig, &jvm)
            );
            let status = sprig.wait_exit(LONG);
            let elapsed = t0.elapsed();
            let status = status
                .unwrap_or_else(|| panic!("sprig did not end: {}", transcripts(&sprig, &jvm)));
            let err = sprig.stderr();
            assert!(
                status.success() && !err.contains("did not confirm the detach"),
                "the session did not end cleanly ({status}, {elapsed:?}): {}",
                transcripts(&sprig, &jvm)
            );
        }
        Ends::Refused(notice) => {
            let status = sprig.wait_exit(LONG);
            let status = status
                .unwrap_or_else(|| panic!("sprig did not end: {}", transcripts(&sprig, &jvm)));
            let err = sprig.stderr();
            assert!(
                !status.success() && err.lines().filter(|l| l.contains(notice)).count() == 1,
                "the session is not refused in one line ({status}): {}",
                transcripts(&sprig, &jvm)
            );
        }
    }
    // The detach, bounded: the CLI waits 20 s for it at most.
    assert!(
        t0.elapsed() < Duration::from_secs(40),
        "the session took {:?}: {}",
        t0.elapsed(),
        transcripts(&sprig, &jvm)
    );
    // The JVM lives on: it answers, no thread of it died, and it exits 0
    // by itself.
    jvm.send("run calls 100 1");
    let answered = jvm.try_wait_for(LONG, |_, l| l.starts_with("done calls"));
    assert!(
        answered.is_some(),
        "the JVM does not answer after the session: {}",
        transcripts(&sprig, &jvm)
    );
    jvm.send("exit");
    let status = jvm.wait_exit(LONG);
    assert!(
        status.is_some_and(|s| s.success()),
        "the JVM did not exit 0 by itself ({status:?}): {}",
        transcripts(&sprig, &jvm)
    );
    let died = jvm.stderr();
    assert!(
        !died.contains("Exception in thread")
            && !died.contains("StackOverflowError")
            && !died.contains("thrown from the UncaughtExceptionHandler"),
        "a JVM thread died: {}",
        transcripts(&sprig, &jvm)
    );
    // One line said what was left out, and why.
    if let Ends::Profiles(notice) = case.ends {
        let err = sprig.stderr();
        let lines: Vec<&str> = err.lines().filter(|l| l.contains(notice)).collect();
        assert_eq!(
            lines.len(),
            1,
            "one line names what was left out: {}",
            transcripts(&sprig, &jvm)
        );
        assert!(
            lines[0].starts_with("sprig: warning: ")
                && lines[0].contains("would call themselves without end"),
            "{}",
            lines[0]
        );
    }
}

#[test]
fn roots_and_includes_on_what_the_probes_call_leave_every_jvm_thread_alive() {
    let mut failed = Vec::new();
    for jdk in test_jdks("roots_and_includes_on_what_the_probes_call_leave_every_jvm_thread_alive")
    {
        let classes = fixture_classes(&jdk);
        for case in cases(&jdk) {
            // Every case runs, and the failures are listed together.
            let run = std::panic::catch_unwind(|| one_case(&jdk, classes.path(), &case));
            if let Err(why) = run {
                let why = why
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| why.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let first = why.lines().next().unwrap_or("").to_string();
                failed.push(format!(
                    "JDK {}: {}: {first}",
                    jdk.major,
                    case.args.join(" ")
                ));
            }
        }
    }
    assert!(failed.is_empty(), "failed cases:\n{}", failed.join("\n"));
}

/// The class file `class` (internal name) of a JDK, extracted from its
/// runtime image with the JDK's `jimage`.
fn jdk_class(jdk: &Jdk, dir: &std::path::Path, class: &str) -> Option<Vec<u8>> {
    let path = dir.join(format!("java.base/{class}.class"));
    if !path.is_file() {
        let status = Command::new(jdk.home.join("bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(dir)
            .arg("--include")
            .arg(format!("glob:/java.base/{class}.class"))
            .arg(jdk.home.join("lib/modules"))
            .status()
            .expect("run jimage");
        assert!(status.success(), "jimage extract {class}: {status}");
    }
    std::fs::read(path).ok()
}

/// What the JDK methods the probes call by name (the entries of
/// `PROBES_CALL` that name one method, not a whole class or package) call
/// in turn on each JDK: only what the list names, natives, or the
/// constructor of the exception or error they throw (never on the probes'
/// path: they call them with a thread and a symbol that are there).
#[test]
fn what_the_named_jdk_methods_call_in_turn_is_left_out_too() {
    use sprig_rewriter::vocab::access::NO_CODE;
    for jdk in test_jdks("what_the_named_jdk_methods_call_in_turn_is_left_out_too") {
        let tmp = TempDir::new("jimage");
        // The named classes in one run of jimage (each run reads the image).
        let globs: Vec<String> = sprig_reveal::PROBES_CALL
            .iter()
            .filter_map(|e| e.split_once("::"))
            .filter(|(c, _)| !c.contains('*'))
            .map(|(c, _)| format!("glob:/java.base/{}.class", c.replace('.', "/")))
            .collect();
        let status = Command::new(jdk.home.join("bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(tmp.path())
            .arg("--include")
            .arg(globs.join(","))
            .arg(jdk.home.join("lib/modules"))
            .status()
            .expect("run jimage");
        assert!(status.success(), "jimage extract: {status}");
        let mut checked = 0;
        let mut missing = Vec::new();
        for entry in sprig_reveal::PROBES_CALL {
            let (class, method) = entry.split_once("::").expect("class::method");
            if method.contains('*') || class.contains('*') {
                continue;
            }
            let internal = class.replace('.', "/");
            let bytes = jdk_class(&jdk, tmp.path(), &internal)
                .unwrap_or_else(|| panic!("JDK {}: no class {class}", jdk.major));
            let info = sprig_rewriter::class_info(&bytes).expect("a JDK class parses");
            let all = sprig_rewriter::callees_all(&bytes).expect("call sites");
            for (name, desc, calls) in all.iter().filter(|(n, _, _)| n == method) {
                checked += 1;
                for c in calls {
                    if sprig_reveal::probes_call(&c.owner, &c.name, &c.descriptor)
                        || (c.name == "<init>"
                            && (c.owner.ends_with("Exception") || c.owner.ends_with("Error")))
                    {
                        continue;
                    }
                    let native = jdk_class(&jdk, tmp.path(), &c.owner)
                        .and_then(|b| sprig_rewriter::class_info(&b).ok())
                        .and_then(|i| {
                            i.methods
                                .into_iter()
                                .find(|m| m.name == c.name && m.descriptor == c.descriptor)
                        })
                        .is_some_and(|m| m.access & NO_CODE != 0);
                    if !native {
                        missing.push(format!(
                            "{}.{name}{desc} calls {}.{}{}",
                            info.name, c.owner, c.name, c.descriptor
                        ));
                    }
                }
            }
        }
        eprintln!("JDK {}: {checked} named JDK methods checked", jdk.major);
        assert!(
            checked >= 5,
            "JDK {}: only {checked} methods found",
            jdk.major
        );
        assert!(
            missing.is_empty(),
            "JDK {}: calls out of sprig_reveal::PROBES_CALL: {missing:?}",
            jdk.major
        );
    }
}
