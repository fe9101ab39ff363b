//! `sprig report` and `sprig diff` on snapshots made from the callgraph's
//! synthetic event scripts (no JVM): pipes, views and diff options.

#[path = "../../callgraph/tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Writes the snapshot of `callgraph/tests/data/<rel>` into this test's
/// scratch directory and returns its path.
fn snapshot(rel: &str, name: &str) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../callgraph/tests/data");
    let script = common::load(&data.join(rel));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(format!("{name}.sprig"));
    let mut f = std::fs::File::create(&path).expect("create snapshot");
    script
        .profile
        .write_snapshot(&mut f)
        .expect("write snapshot");
    path
}

/// Runs sprig with its stdout a pipe whose reading end is already closed.
fn sprig_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_sprig"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run sprig")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn report_and_diff_into_a_closed_pipe_end_quietly() {
    let a = snapshot("diff/before.events", "pipe-a");
    let b = snapshot("diff/after.events", "pipe-b");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    for args in [vec!["report", a], vec!["diff", a, b]] {
        let out = sprig_into_closed_pipe(&args);
        let stderr = text(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "sprig {args:?} into a closed pipe: {:?}, stderr {stderr:?}",
            out.status
        );
    }
}

fn sprig(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sprig"))
        .args(args)
        .output()
        .expect("run sprig")
}

/// sprig's stdout, after checking it succeeded with nothing on stderr.
fn sprig_ok(args: &[&str]) -> String {
    let out = sprig(args);
    assert!(
        out.status.success(),
        "sprig {args:?}: {:?}, stderr {}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn hot_spots_alone_shows_only_the_hot_spots() {
    let snap = snapshot("sampled.events", "hot");
    let snap = snap.to_str().unwrap();
    // Without the option: the tree, then the hot spots.
    let all = sprig_ok(&["report", snap]);
    assert!(
        all.contains("% root") && all.contains("hot spots:"),
        "{all}"
    );

    // Given without a number: the default count, and no tree.
    let only = sprig_ok(&["report", snap, "--hot-spots"]);
    assert!(
        only.contains("hot spots:") && only.contains("(5 of 5 methods)"),
        "{only}"
    );
    assert!(
        !only.contains("% root") && !only.contains("latency "),
        "{only}"
    );

    // With a number: that many, still no tree.
    let two = sprig_ok(&["report", snap, "--hot-spots", "2"]);
    assert!(two.contains("(2 of 5 methods)"), "{two}");
    assert!(!two.contains("% root"), "{two}");

    // --tree brings the tree back beside the hot spots.
    let both = sprig_ok(&["report", snap, "--hot-spots", "2", "--tree"]);
    assert!(
        both.contains("% root") && both.contains("(2 of 5 methods)"),
        "{both}"
    );
}

#[test]
fn diff_writes_to_a_file_per_root_call_or_in_totals() {
    let a = snapshot("diff/before.events", "diff-o-a");
    let b = snapshot("diff/after.events", "diff-o-b");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports/diff.txt");
    let _ = std::fs::remove_file(&file);
    let stdout = sprig_ok(&["diff", a, b, "-o", file.to_str().unwrap()]);
    assert!(stdout.is_empty(), "{stdout}");
    let written = std::fs::read_to_string(&file).expect("diff -o wrote its file");
    assert!(written.starts_with("sprig diff: a -> b"), "{written}");
    assert!(written.contains("per root call"), "{written}");
    let totals = sprig_ok(&["diff", a, b, "--totals"]);
    assert!(
        totals.lines().next().unwrap().contains("whole runs"),
        "{totals}"
    );
}

#[test]
fn signatures_on_request() {
    let snap = snapshot("sampled.events", "signatures");
    let snap = snap.to_str().unwrap();
    let short = sprig_ok(&["report", snap]);
    assert!(
        short.contains("com.acme.Db.query\n") && !short.contains("(Ljava"),
        "{short}"
    );
    let long = sprig_ok(&["report", snap, "--signatures"]);
    assert!(long.contains("com.acme.Db.query(String)\n"), "{long}");
}

/// The text report fits `--width` columns, and 120 when it goes to a pipe:
/// names are cut from the left of their package, figures are kept.
#[test]
fn the_text_report_fits_the_width() {
    let snap = snapshot("long_names.events", "width");
    let snap = snap.to_str().unwrap();
    for (args, width) in [
        (vec!["report", snap, "--width", "80"], 80),
        (vec!["report", snap, "--width", "120"], 120),
        (vec!["report", snap], 120),
    ] {
        let out = sprig_ok(&args);
        let tree: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.contains("% root"))
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(tree.len() >= 7, "{args:?}:\n{out}");
        for l in &tree {
            assert!(l.chars().count() <= width, "{args:?}: {l:?}\n{out}");
        }
        // every method is still there, whole, with its figures
        for m in ["handleIncomingOrder", "serializeResponse", "executeQuery"] {
            assert!(out.contains(m), "{args:?}: {m}\n{out}");
        }
        assert!(out.contains('…'), "{args:?}: nothing was cut\n{out}");
    }
    let bad = sprig(&["report", snap, "--width", "10"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

/// `sprig diff` writes names short, with signatures on request, and fits
/// its width as `report` does.
#[test]
fn diff_names_are_short_and_fit() {
    let a = snapshot("diff/before.events", "diff-n-a");
    let b = snapshot("diff/after.events", "diff-n-b");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let short = sprig_ok(&["diff", a, b]);
    assert!(
        short.contains("app.Math.mul\n") && !short.contains("(JJ)J"),
        "{short}"
    );
    let long = sprig_ok(&["diff", a, b, "--signatures"]);
    assert!(long.contains("app.Math.mul(long, long)\n"), "{long}");
    let narrow = sprig_ok(&["diff", a, b, "--width", "100", "--signatures"]);
    for l in narrow.lines().skip(1) {
        assert!(l.chars().count() <= 100, "{l:?}\n{narrow}");
    }
    assert!(narrow.contains("…p.Math.mul(long, long)"), "{narrow}");
}
