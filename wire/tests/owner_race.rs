//! Root making session directories for another user, with that user racing
//! every session: as soon as a session directory is theirs, a hostile
//! process of that user swaps the control socket for a link to a file of
//! root's, and once the directory is gone it puts a link where the
//! directory was, towards a directory of root's holding a `control.sock`.
//! Neither may make root change the mode or owner of, or remove, anything
//! of its own.
//!
//! As root, the test re-executes itself as `nobody` for the hostile side;
//! as another user it is skipped with a printed reason.

mod common;

use sprig_wire::session::{Listener, SessionDir, euid};
use std::collections::BTreeSet;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: u32 = 65534;
const CHILD_ENV: &str = "SPRIG_OWNER_RACE_BASE";
const SESSIONS: u32 = 300;

/// The hostile user's side: swaps what it can until `<base>/stop` appears
/// (or a minute passes), then prints how often it got in.
fn hostile(base: &Path) -> ! {
    let victim = base.join("victim");
    let private = base.join("private");
    let started = Instant::now();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let (mut swaps, mut links) = (0u32, 0u32);
    while !base.join("stop").exists() && started.elapsed() < Duration::from_secs(60) {
        let Ok(entries) = fs::read_dir(base) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().starts_with("sprig-") {
                continue;
            }
            let dir = entry.path();
            if !seen.insert(dir.clone()) {
                continue;
            }
            // A new session: watch its socket closely for a while and
            // swap it the moment it appears.
            let sock = dir.join("control.sock");
            let watch = Instant::now();
            while watch.elapsed() < Duration::from_millis(20) {
                match fs::symlink_metadata(&sock) {
                    Ok(m) if !m.file_type().is_symlink() => {
                        if fs::remove_file(&sock).is_ok()
                            && std::os::unix::fs::symlink(&victim, &sock).is_ok()
                        {
                            swaps += 1;
                        }
                        break;
                    }
                    Ok(_) => break,
                    Err(_) => {}
                }
            }
        }
        // Where a session directory was, a link to root's directory.
        seen.retain(|dir| {
            if fs::symlink_metadata(dir).is_err() {
                if std::os::unix::fs::symlink(&private, dir).is_ok() {
                    links += 1;
                }
                false
            } else {
                true
            }
        });
    }
    println!("HOSTILE swaps {swaps} links {links}");
    std::process::exit(0);
}

#[test]
fn a_hostile_owner_cannot_make_root_touch_its_files() {
    if let Ok(base) = std::env::var(CHILD_ENV) {
        hostile(Path::new(&base));
    }
    if euid() != 0 {
        println!("skipped: needs root to hand session directories to another user");
        return;
    }
    let base = PathBuf::from(format!(
        "/tmp/sprig-race-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    fs::create_dir(&base).unwrap();
    // Like /tmp: anybody may create, nobody may rename what is not theirs.
    fs::set_permissions(&base, fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = base.join("victim");
    fs::write(&victim, "root's\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).unwrap();
    let private = base.join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o755)).unwrap();
    let keep = private.join("control.sock");
    fs::write(&keep, "root's\n").unwrap();

    let exe = common::SharedExe::new();
    let mut child = Command::new(&exe.path)
        .args([
            "--exact",
            "a_hostile_owner_cannot_make_root_touch_its_files",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &base)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut bound = 0;
    for _ in 0..SESSIONS {
        let dir = match SessionDir::create_in_for_owner(&base, NOBODY, NOBODY) {
            Ok(d) => d,
            // The hostile side may have taken the name first.
            Err(_) => continue,
        };
        // The CLI makes the event ring between the directory and the
        // socket: the owner-to-be has that long to get ready.
        std::thread::sleep(Duration::from_millis(2));
        if let Ok(listener) = Listener::bind(&dir) {
            bound += 1;
            // Let the owner at it, then end the session the way the CLI
            // does: the directory goes first, the listener after.
            std::thread::sleep(Duration::from_millis(3));
            drop(dir);
            std::thread::sleep(Duration::from_millis(1));
            drop(listener);
        }
    }
    fs::write(base.join("stop"), "").unwrap();
    let status = child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(status.success(), "hostile side: {out}");
    let report = out
        .lines()
        .find_map(|l| l.find("HOSTILE").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("hostile side said nothing: {out}"));
    println!("{bound} sessions bound; {report}");

    let m = fs::metadata(&victim).unwrap();
    let k = fs::symlink_metadata(&keep);
    let victim_text = fs::read_to_string(&victim).unwrap();
    let _ = fs::remove_dir_all(&base);
    assert_eq!(
        (m.uid(), m.gid(), m.mode() & 0o7777),
        (0, 0, 0o644),
        "root changed the owner or mode of its own file through a link ({report})"
    );
    assert_eq!(victim_text, "root's\n");
    assert!(
        k.is_ok(),
        "root removed its own file through a link ({report})"
    );
    assert_eq!(bound, SESSIONS, "every session binds");
    // The race was really run: the hostile side got into session
    // directories and swapped their sockets.
    let swaps: u32 = report.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(swaps > 0, "the hostile side never got in: {report}");
}
