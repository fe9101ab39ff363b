//! The command lines' parsing and validation, without a JVM.

use super::*;

#[derive(clap::Parser)]
struct Cmd {
    #[command(flatten)]
    session: SessionArgs,
}

fn session_args(args: &[&str]) -> SessionArgs {
    use clap::Parser;
    Cmd::try_parse_from(std::iter::once("sprig").chain(args.iter().copied()))
        .unwrap()
        .session
}

#[test]
fn trivial_methods_are_left_out_by_default_and_kept_on_request() {
    let bound = |args: &[&str]| {
        let mut all = vec!["--root", "a.B::c"];
        all.extend_from_slice(args);
        session_args(&all).session_options().skip_trivial
    };
    assert_eq!(bound(&[]), sprig_rewriter::TRIVIAL_BYTES_DEFAULT);
    assert_eq!(
        bound(&["--skip-trivial"]),
        sprig_rewriter::TRIVIAL_BYTES_DEFAULT
    );
    assert_eq!(bound(&["--skip-trivial=6"]), 6);
    assert_eq!(bound(&["--keep-trivial"]), 0);
    use clap::Parser;
    let both = [
        "sprig",
        "--root",
        "a.B::c",
        "--keep-trivial",
        "--skip-trivial=6",
    ];
    assert!(Cmd::try_parse_from(both).is_err());
}

#[test]
fn ring_sizes_up_to_4096_mib_are_accepted() {
    session_args(&["--root", "a.B::c", "--ring-mib", "4096"])
        .validate()
        .unwrap();
    for bad in ["0", "4097"] {
        let args = session_args(&["--root", "a.B::c", "--ring-mib", bad]);
        assert!(args.validate().is_err());
    }
}

#[test]
fn a_root_in_an_excluded_class_is_refused_before_attaching() {
    let args = session_args(&["--root", "com.acme.A::run", "--exclude", "com.acme.**"]);
    let err = args.validate().unwrap_err().to_string();
    assert_eq!(
        err,
        "--root com.acme.A::run is excluded by --exclude com.acme.**: nothing would be profiled"
    );
    // A nested class is excluded with its outer class.
    let args = session_args(&["--root", "com.acme.A$In::run", "--exclude", "com.acme.A"]);
    assert!(args.validate().is_err());
    // Other roots and patterns are not.
    for (root, exclude) in [
        ("com.acme.A::run", "com.acme.B"),
        ("com.acme.AB::run", "com.acme.A"),
        ("com.acme.*::run", "com.acme.A"),
    ] {
        let args = session_args(&["--root", root, "--exclude", exclude]);
        args.validate().unwrap();
    }
}

#[test]
fn an_unwritable_output_is_refused_before_attaching() {
    let dir = std::env::temp_dir().join(format!("sprig-out-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let missing = dir.join("no-such-dir/out.json");
    let args = session_args(&["--root", "a.B::c", "-o", missing.to_str().unwrap()]);
    let err = format!("{:#}", args.validate().unwrap_err());
    assert!(
        err.starts_with(&format!("cannot write {}", missing.display())),
        "{err}"
    );
    // A directory is no output file either.
    let args = session_args(&["--root", "a.B::c", "-o", dir.to_str().unwrap()]);
    assert!(args.validate().is_err());
    // A writable path passes and is left as it was: a new file is not
    // left behind, an existing one keeps its contents.
    let fresh = dir.join("fresh.json");
    session_args(&["--root", "a.B::c", "-o", fresh.to_str().unwrap()])
        .validate()
        .unwrap();
    assert!(!fresh.exists());
    let old = dir.join("old.json");
    std::fs::write(&old, b"keep").unwrap();
    session_args(&["--root", "a.B::c", "-o", old.to_str().unwrap()])
        .validate()
        .unwrap();
    assert_eq!(std::fs::read(&old).unwrap(), b"keep");
    // A named pipe nobody reads yet: not opened (that would block).
    let fifo = dir.join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    session_args(&["--root", "a.B::c", "-o", fifo.to_str().unwrap()])
        .validate()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn windows_timing_asks_for_the_stack_sampler_and_its_schedule() {
    let opts = |args: &[&str]| {
        let mut all = vec!["--root", "a.B::c", "--timing", "windows"];
        all.extend_from_slice(args);
        let a = session_args(&all);
        a.validate().map(|()| a.session_options())
    };
    let o = opts(&[]).unwrap();
    assert_eq!(o.timing, Timing::Sampled);
    assert_eq!(
        o.windows,
        Some(WindowOptions {
            counting_ms: 50,
            silent_ms: 950,
            counting_calls: 0,
            silence: Silence::Dormant,
            settle_ms: SETTLE_MS_DEFAULT,
        })
    );
    assert_eq!(o.stacks.map(|s| s.interval_us), Some(5000));
    let o = opts(&["--windows", "20,980,4", "--interval", "2"]).unwrap();
    assert_eq!(
        o.windows,
        Some(WindowOptions {
            counting_ms: 20,
            silent_ms: 980,
            counting_calls: 4,
            silence: Silence::Dormant,
            settle_ms: SETTLE_MS_DEFAULT,
        })
    );
    assert_eq!(o.stacks.map(|s| s.interval_us), Some(2000));
    for bad in ["0,5", "5", "5,600001", "1,2,x", "a,b"] {
        let e = opts(&["--windows", bad]).unwrap_err().to_string();
        assert!(
            e.starts_with("--windows must be") && !e.contains('\n'),
            "{e}"
        );
    }
    // original-bytes silence: long silent windows unless told
    let o = opts(&["--windows-silence", "original"]).unwrap();
    assert_eq!(
        o.windows.map(|w| (w.counting_ms, w.silent_ms, w.silence)),
        Some((1000, 20000, Silence::Original))
    );
    let o = opts(&["--windows-silence", "original", "--windows", "200,4800"]).unwrap();
    assert_eq!(o.windows.map(|w| w.silent_ms), Some(4800));
    let o = opts(&["--windows", "200,4800", "--windows-settle", "1000"]).unwrap();
    assert_eq!(o.windows.map(|w| w.settle_ms), Some(1000));
    for bad in ["4800", "5000"] {
        let e = opts(&["--windows", "200,4800", "--windows-settle", bad])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--windows-settle must be shorter") && !e.contains('\n'),
            "{e}"
        );
    }
    // other modes ask for neither
    let a = session_args(&["--root", "a.B::c"]);
    let o = a.session_options();
    assert_eq!((o.windows, o.stacks), (None, None));
}

#[test]
fn windows_timing_samples_with_the_timer_unless_told() {
    use sprig_wire::control::StackSource;
    let source = |args: &[&str]| {
        let mut all = vec!["--root", "a.B::c", "--timing", "windows"];
        all.extend_from_slice(args);
        let a = session_args(&all);
        a.validate()
            .map(|()| a.session_options().stacks.map(|s| s.source))
    };
    assert_eq!(source(&[]).unwrap(), Some(StackSource::Timer));
    assert_eq!(
        source(&["--source", "timer"]).unwrap(),
        Some(StackSource::Timer)
    );
    assert_eq!(
        source(&["--source", "jvmti"]).unwrap(),
        Some(StackSource::Jvmti)
    );
    // --source means nothing to the other timing modes
    let e = session_args(&["--root", "a.B::c", "--source", "jvmti"])
        .validate()
        .unwrap_err()
        .to_string();
    assert_eq!(e, "--source applies to --timing windows only");
}
