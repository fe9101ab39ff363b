//! Root profiling another user's JVM: the session directory, socket and
//! ring are handed to the target user, who can reach them, and the
//! listener accepts exactly that user's process.
//!
//! As root, the test re-executes itself as `nobody` for the agent side.
//! As another user, it checks that handing a directory to someone else is
//! refused.

mod common;

use sprig_wire::control::JvmInfo;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
use sprig_wire::session::{Listener, PeerExpectation, SessionDir, connect, euid};
use sprig_wire::{AgentOptions, Message};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

const NOBODY: u32 = 65534;
const CHILD_ENV: &str = "SPRIG_OWNER_TEST_AGENT_OPTIONS";
/// Fits in the ring: the parent drains only after the agent is done.
const EVENTS: u32 = 1_500;

/// The agent side, running as `nobody`.
fn agent(options: &str) -> ! {
    let opts = AgentOptions::parse(options).expect("options parse");
    let jvm = JvmInfo {
        pid: std::process::id(),
        version: "test".into(),
        vm_name: "owner test".into(),
        vendor: String::new(),
    };
    let ch = connect(&opts, jvm, Duration::from_secs(10)).expect("agent connects");
    let region = Region::open(&opts.ring_path()).expect("agent maps the ring");
    let mut p = Producer::new(region, 3, Duration::from_secs(5));
    for i in 0..EVENTS {
        p.push(Event::new(EventKind::Marker, i, i as u64)).unwrap();
    }
    p.release();
    ch.send(&Message::Warning(format!("uid {}", euid())))
        .unwrap();
    std::process::exit(0);
}

#[test]
fn session_for_another_user() {
    if let Ok(options) = std::env::var(CHILD_ENV) {
        agent(&options);
    }
    if euid() != 0 {
        let e = SessionDir::create_for_owner(NOBODY, NOBODY).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        return;
    }
    let dir = SessionDir::create_for_owner(NOBODY, NOBODY).unwrap();
    assert_eq!(dir.owner(), Some((NOBODY, NOBODY)));
    // Root's and private until the socket is bound.
    let meta = std::fs::metadata(dir.path()).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (0, 0o700));
    let region = Region::create(
        &dir.ring_path(),
        &RingConfig {
            segment_bytes: 4096,
            segments: 8,
            ..RingConfig::default()
        },
    )
    .unwrap();
    dir.adopt(&dir.ring_path()).unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let meta = std::fs::metadata(dir.path()).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (NOBODY, NOBODY, 0o700)
    );
    // Handed over: nothing more is made or adopted in it.
    assert!(Listener::bind(&dir).is_err());
    assert!(dir.adopt(&dir.ring_path()).is_err());
    for p in [dir.ring_path(), dir.socket_path()] {
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (m.uid(), m.mode() & 0o777),
            (NOBODY, 0o600),
            "{}",
            p.display()
        );
    }
    let options = dir.agent_options(std::process::id()).format();
    let exe = common::SharedExe::new();
    let mut child = Command::new(&exe.path)
        .args(["--exact", "session_for_another_user", "--test-threads=1"])
        .env(CHILD_ENV, &options)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let expect = PeerExpectation {
        pid: Some(child.id()),
        uid: NOBODY,
        token: dir.token(),
    };
    let accepted = listener.accept(&expect, Duration::from_secs(20));
    let (mut ch, info) = match accepted {
        Ok(x) => x,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("accept: {e}");
        }
    };
    assert_eq!(info.pid, child.id());
    assert_eq!(
        ch.recv_timeout(Duration::from_secs(20)).unwrap(),
        Some(Message::Warning(format!("uid {NOBODY}")))
    );
    assert!(child.wait().unwrap().success());
    let mut cons = Consumer::new(region);
    let mut next = 0;
    cons.poll(&mut |t, evs| {
        assert_eq!(t, 3);
        for e in evs {
            assert_eq!(e.id, next);
            next += 1;
        }
    });
    assert_eq!(next, EVENTS);
}
