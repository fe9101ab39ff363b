//! Session directory, listener and connector: modes, peer checks, token,
//! version, and the channel's framing over a real Unix socket.

use sprig_wire::codec::{self, CodecError};
use sprig_wire::control::{AgentOptions, JvmInfo, Message, PROTOCOL_VERSION};
use sprig_wire::session::{
    self, Listener, PeerExpectation, SessionDir, SessionError, connect, euid,
};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);

fn jvm() -> JvmInfo {
    JvmInfo {
        pid: std::process::id(),
        version: "17.0.15+6".into(),
        vm_name: "OpenJDK 64-Bit Server VM".into(),
        vendor: "test".into(),
    }
}

fn expect_me(dir: &SessionDir) -> PeerExpectation {
    PeerExpectation {
        pid: Some(std::process::id()),
        uid: euid(),
        token: dir.token(),
    }
}

fn mode(p: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn directory_and_socket_are_private_and_removed_on_drop() {
    let dir = SessionDir::create().unwrap();
    let path = dir.path().to_path_buf();
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with(&format!("sprig-{}-", euid())), "{name}");
    assert!(path.starts_with("/tmp"));
    assert_eq!(mode(&path), 0o700);
    assert_eq!(std::fs::metadata(&path).unwrap().uid(), euid());
    assert_eq!(dir.socket_path(), path.join("control.sock"));
    assert_eq!(dir.ring_path(), path.join("ring"));
    let other = SessionDir::create().unwrap();
    assert_ne!(other.path(), dir.path());
    assert_ne!(other.token(), dir.token());

    let listener = Listener::bind(&dir).unwrap();
    assert_eq!(mode(&dir.socket_path()), 0o600);
    drop(listener);
    assert!(
        !dir.socket_path().exists(),
        "listener drop removes the socket"
    );
    std::fs::write(path.join("extra"), b"x").unwrap();
    drop(dir);
    assert!(!path.exists(), "session dir drop removes the directory");
}

#[test]
fn mode_is_0700_even_with_a_loose_umask() {
    // A umask that strips the owner's write bit: mkdir alone would give
    // 0500. umask is process wide, but every file this suite creates gets
    // its mode set explicitly after creation anyway.
    // SAFETY: umask only swaps the process's file-creation mask.
    let old = unsafe { libc::umask(0o200) };
    let dir = SessionDir::create_in(std::path::Path::new("/tmp"));
    // SAFETY: as above, restoring the previous mask.
    unsafe { libc::umask(old) };
    let dir = dir.unwrap();
    assert_eq!(mode(dir.path()), 0o700);
    assert!(SessionDir::create_in(std::path::Path::new("relative")).is_err());
    assert!(SessionDir::create_in(std::path::Path::new("/tmp/a,b")).is_err());
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
    assert!(SessionDir::create_in(std::path::Path::new(not_utf8)).is_err());
}

#[test]
fn agent_options_point_at_the_session() {
    let dir = SessionDir::create().unwrap();
    let opts = dir.agent_options(1234);
    let parsed = AgentOptions::parse(&opts.format()).unwrap();
    assert_eq!(parsed, opts);
    assert_eq!(parsed.socket_path(), dir.socket_path());
    assert_eq!(parsed.ring_path(), dir.ring_path());
    assert_eq!(parsed.token, dir.token());
}

#[test]
fn handshake_then_messages_both_ways() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id());
    let agent = thread::spawn(move || {
        let mut ch = connect(&opts, jvm(), T).unwrap();
        ch.send(&Message::Warning("from agent".into())).unwrap();
        let m = ch.recv().unwrap();
        assert_eq!(m, Message::StatusRequest);
        // Waits for the CLI to close.
        match ch.recv() {
            Err(e) => assert!(e.is_closed(), "{e}"),
            Ok(m) => panic!("unexpected {m:?}"),
        }
    });
    let (mut ch, info) = listener.accept(&expect_me(&dir), T).unwrap();
    assert_eq!(info, jvm());
    assert_eq!(ch.peer().unwrap().pid, std::process::id());
    assert_eq!(ch.recv().unwrap(), Message::Warning("from agent".into()));
    // Nothing more is coming: a short recv_timeout returns None.
    let t0 = Instant::now();
    assert!(
        ch.recv_timeout(Duration::from_millis(50))
            .unwrap()
            .is_none()
    );
    assert!(t0.elapsed() >= Duration::from_millis(45));
    // A writer clone sends while this handle could be reading.
    let writer = ch.try_clone().unwrap();
    writer.send(&Message::StatusRequest).unwrap();
    ch.shutdown().unwrap();
    agent.join().unwrap();
}

#[test]
fn wrong_pid_or_uid_is_dropped_and_accept_keeps_waiting() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id());
    // Expect a different pid: our own connection must be ignored.
    let mut wrong_pid = expect_me(&dir);
    wrong_pid.pid = Some(1);
    let o = opts.clone();
    let agent = thread::spawn(move || connect(&o, jvm(), T));
    let t0 = Instant::now();
    let r = listener.accept(&wrong_pid, Duration::from_millis(300));
    assert!(matches!(r, Err(SessionError::Timeout(_))), "{r:?}");
    assert!(t0.elapsed() >= Duration::from_millis(290));
    let agent_result = agent.join().unwrap();
    assert!(
        matches!(&agent_result, Err(e) if e.is_closed()),
        "agent sees the drop: {agent_result:?}"
    );

    let mut wrong_uid = expect_me(&dir);
    wrong_uid.uid = euid().wrapping_add(1);
    wrong_uid.pid = None;
    let o = opts.clone();
    let agent = thread::spawn(move || connect(&o, jvm(), T));
    let r = listener.accept(&wrong_uid, Duration::from_millis(300));
    assert!(matches!(r, Err(SessionError::Timeout(_))), "{r:?}");
    assert!(agent.join().unwrap().is_err());

    // A wrong-uid connection did not stop the listener: the right agent
    // still gets in.
    let o = opts.clone();
    let agent = thread::spawn(move || connect(&o, jvm(), T).map(|_| ()));
    let (_ch, info) = listener.accept(&expect_me(&dir), T).unwrap();
    assert_eq!(info.pid, std::process::id());
    agent.join().unwrap().unwrap();
}

#[test]
fn silent_or_wrong_token_peer_cannot_block_an_unverified_accept() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id());
    let mut any_pid = expect_me(&dir);
    any_pid.pid = None;
    // A same-uid process connects first and says nothing, a second one
    // presents a wrong token; then the real agent connects.
    let silent = UnixStream::connect(dir.socket_path()).unwrap();
    let mut bad = opts.clone();
    bad.token[3] ^= 0x40;
    let liar = thread::spawn(move || connect(&bad, jvm(), T));
    thread::sleep(Duration::from_millis(50));
    let o = opts.clone();
    let agent = thread::spawn(move || connect(&o, jvm(), Duration::from_secs(10)).map(|_| ()));
    let t0 = Instant::now();
    let (_ch, info) = listener.accept(&any_pid, Duration::from_secs(10)).unwrap();
    assert_eq!(info, jvm());
    let waited = t0.elapsed();
    assert!(
        waited >= session::HELLO_TIMEOUT,
        "silent peer dropped too early: {waited:?}"
    );
    assert!(waited < session::HELLO_TIMEOUT * 3, "{waited:?}");
    agent.join().unwrap().unwrap();
    assert!(matches!(
        liar.join().unwrap(),
        Err(SessionError::Rejected(_))
    ));
    drop(silent);

    // Alone, the liar's error is what accept reports when time runs out.
    let mut bad = opts.clone();
    bad.token[0] ^= 1;
    let liar = thread::spawn(move || connect(&bad, jvm(), T));
    let r = listener.accept(&any_pid, Duration::from_millis(500));
    assert!(matches!(r, Err(SessionError::BadToken)), "{r:?}");
    assert!(liar.join().unwrap().is_err());
}

#[test]
fn wrong_token_is_rejected_on_both_sides() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let mut opts = dir.agent_options(std::process::id());
    opts.token[0] ^= 1;
    let agent = thread::spawn(move || connect(&opts, jvm(), T));
    let r = listener.accept(&expect_me(&dir), T);
    assert!(matches!(r, Err(SessionError::BadToken)), "{r:?}");
    match agent.join().unwrap() {
        Err(SessionError::Rejected(text)) => assert!(text.contains("token"), "{text}"),
        other => panic!("agent should be rejected, got {other:?}"),
    }
}

#[test]
fn wrong_version_names_both_versions() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let sock = dir.socket_path();
    let token = dir.token();
    let agent = thread::spawn(move || {
        let mut s = UnixStream::connect(sock).unwrap();
        codec::write_frame(
            &mut s,
            &Message::AgentHello {
                version: 99,
                token,
                jvm: jvm(),
            },
        )
        .unwrap();
        codec::read_frame(&mut s).unwrap()
    });
    let err = listener.accept(&expect_me(&dir), T).unwrap_err();
    match &err {
        SessionError::VersionMismatch { ours, theirs } => {
            assert_eq!(*ours, PROTOCOL_VERSION);
            assert_eq!(*theirs, 99);
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(&PROTOCOL_VERSION.to_string()) && text.contains("99"),
        "{text}"
    );
    match agent.join().unwrap() {
        Message::Error(t) => assert!(
            t.contains("99") && t.contains(&format!("speaks {PROTOCOL_VERSION}")),
            "{t}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn agent_refuses_a_listener_that_is_not_the_cli() {
    let dir = SessionDir::create().unwrap();
    let _listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id() + 1);
    match connect(&opts, jvm(), T) {
        Err(SessionError::WrongPeer { got, .. }) => assert_eq!(got.pid, std::process::id()),
        other => panic!("{other:?}"),
    }
    // Nobody listening at all.
    let gone = SessionDir::create().unwrap();
    assert!(connect(&gone.agent_options(std::process::id()), jvm(), T).is_err());
}

#[test]
fn garbage_first_frame_is_an_error_not_a_hang() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let sock = dir.socket_path();
    let t = thread::spawn(move || {
        let mut s = UnixStream::connect(sock).unwrap();
        // Claims 4 GiB - 1: must be refused without allocating.
        s.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let r = listener.accept(&expect_me(&dir), T);
    assert!(
        matches!(r, Err(SessionError::Codec(CodecError::TooLarge { len })) if len == u32::MAX as usize),
        "{r:?}"
    );
    drop(listener);
    t.join().unwrap();

    let listener = Listener::bind(&dir).unwrap();
    let sock = dir.socket_path();
    let t = thread::spawn(move || {
        let mut s = UnixStream::connect(sock).unwrap();
        let frame = codec::encode(&Message::Detach).unwrap();
        s.write_all(&frame).unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    });
    let r = listener.accept(&expect_me(&dir), T);
    assert!(
        matches!(&r, Err(SessionError::Unexpected { expected: "AgentHello", got }) if got == "Detach"),
        "{r:?}"
    );
    drop(listener);
    t.join().unwrap();
}

#[test]
fn partial_frame_survives_a_timeout() {
    // The CLI side is a real channel; the agent side is a raw socket so the
    // test controls how the bytes of a frame are split.
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let sock = dir.socket_path();
    let token = dir.token();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let agent = thread::spawn(move || {
        let mut s = UnixStream::connect(sock).unwrap();
        let hello = Message::AgentHello {
            version: PROTOCOL_VERSION,
            token,
            jvm: jvm(),
        };
        codec::write_frame(&mut s, &hello).unwrap();
        assert_eq!(
            codec::read_frame(&mut s).unwrap(),
            Message::CliHello {
                version: PROTOCOL_VERSION
            }
        );
        let frame = codec::encode(&Message::Warning("split across writes".into())).unwrap();
        s.write_all(&frame[..3]).unwrap();
        rx.recv().unwrap();
        s.write_all(&frame[3..7]).unwrap();
        rx.recv().unwrap();
        s.write_all(&frame[7..]).unwrap();
        // Half a frame then close: the channel reports truncation.
        let second = codec::encode(&Message::Detach).unwrap();
        s.write_all(&second[..second.len() - 1]).unwrap();
    });
    let (mut ch, _) = listener.accept(&expect_me(&dir), T).unwrap();
    assert!(
        ch.recv_timeout(Duration::from_millis(30))
            .unwrap()
            .is_none()
    );
    tx.send(()).unwrap();
    assert!(
        ch.recv_timeout(Duration::from_millis(30))
            .unwrap()
            .is_none()
    );
    tx.send(()).unwrap();
    assert_eq!(
        ch.recv_timeout(T).unwrap(),
        Some(Message::Warning("split across writes".into()))
    );
    agent.join().unwrap();
    match ch.recv() {
        Err(SessionError::Codec(CodecError::Truncated { .. })) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn peer_cred_reports_this_process() {
    let (a, _b) = UnixStream::pair().unwrap();
    let c = session::peer_cred(&a).unwrap();
    assert_eq!(c.pid, std::process::id());
    assert_eq!(c.uid, euid());
}

#[test]
fn slow_hello_survives_accepting_in_short_slices() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let sock = dir.socket_path();
    let token = dir.token();
    let agent = thread::spawn(move || {
        let mut s = UnixStream::connect(sock).unwrap();
        // Slower than one accept slice.
        thread::sleep(Duration::from_millis(300));
        let hello = Message::AgentHello {
            version: PROTOCOL_VERSION,
            token,
            jvm: jvm(),
        };
        codec::write_frame(&mut s, &hello).unwrap();
        codec::read_frame(&mut s).unwrap()
    });
    let start = Instant::now();
    let accepted = loop {
        match listener.accept(&expect_me(&dir), Duration::from_millis(50)) {
            Err(SessionError::Timeout(_)) if start.elapsed() < T => continue,
            other => break other,
        }
    };
    let (_ch, info) = accepted.unwrap();
    assert_eq!(info, jvm());
    assert_eq!(
        agent.join().unwrap(),
        Message::CliHello {
            version: PROTOCOL_VERSION
        }
    );
}

/// The ring travels as a descriptor with `Start`: the agent side maps the
/// very memory the CLI created (an event pushed there is consumed here),
/// and messages before and after the descriptor arrive intact.
#[test]
fn the_ring_descriptor_travels_with_start() {
    use sprig_wire::control::{ClockKind, SessionOptions};
    use sprig_wire::event::{Event, EventKind};
    use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
    use std::os::fd::AsFd;

    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id());
    let agent = thread::spawn(move || {
        let mut ch = connect(&opts, jvm(), T).unwrap();
        assert_eq!(ch.recv().unwrap(), Message::StatusRequest);
        let Message::Start(o) = ch.recv().unwrap() else {
            panic!("expected Start")
        };
        assert_eq!(o.roots, vec!["a.B::c".to_string()]);
        let region = Region::from_fd(ch.take_fd().expect("the ring came with Start")).unwrap();
        let mut p = Producer::new(region, 7, Duration::from_secs(1));
        p.push(Event::new(EventKind::MethodEntry, 42, 1234))
            .unwrap();
        p.release();
        ch.send(&Message::Warning("pushed".into())).unwrap();
        assert_eq!(ch.recv().unwrap(), Message::Detach);
        assert!(ch.take_fd().is_none());
    });
    let (mut ch, _) = listener.accept(&expect_me(&dir), T).unwrap();
    let cfg = RingConfig {
        segment_bytes: 4096,
        segments: 4,
        clock: ClockKind::Tsc,
        ticks_per_sec: 1_000_000_000,
    };
    let (region, fd) = Region::create_memfd(&cfg).unwrap();
    ch.send(&Message::StatusRequest).unwrap();
    let start = Message::Start(SessionOptions {
        roots: vec!["a.B::c".into()],
        clock: ClockKind::Tsc,
        wait_bound_ms: 1000,
        ..SessionOptions::without_roots()
    });
    ch.send_with_fd(&start, fd.as_fd()).unwrap();
    assert_eq!(ch.recv().unwrap(), Message::Warning("pushed".into()));
    let mut seen = Vec::new();
    Consumer::new(region).poll(&mut |t, evs| seen.extend(evs.iter().map(|e| (t, e.id))));
    assert_eq!(seen, vec![(7, 42)]);
    ch.send(&Message::Detach).unwrap();
    agent.join().unwrap();
}

#[test]
fn send_all_delivers_a_burst_in_order_then_the_close() {
    let dir = SessionDir::create().unwrap();
    let listener = Listener::bind(&dir).unwrap();
    let opts = dir.agent_options(std::process::id());
    let burst: Vec<Message> = (0..5_000u32)
        .flat_map(|index| {
            [
                Message::Thread {
                    index,
                    java_id: u64::from(index) + 100,
                    name: format!("worker-{index}"),
                    tid: 0,
                },
                Message::VirtualThread { index },
            ]
        })
        .collect();
    let sent = burst.clone();
    // The agent side sends the burst and goes away at once, as a JVM
    // that exits right after VMDeath does.
    let agent = thread::spawn(move || {
        let ch = connect(&opts, jvm(), T).unwrap();
        ch.send_all(&sent).unwrap();
        ch.send_all(&[]).unwrap();
    });
    let (mut ch, _) = listener.accept(&expect_me(&dir), T).unwrap();
    agent.join().unwrap();
    let mut got = Vec::new();
    loop {
        match ch.recv() {
            Ok(m) => got.push(m),
            Err(e) => {
                assert!(e.is_closed(), "{e}");
                break;
            }
        }
    }
    assert_eq!(got.len(), burst.len());
    assert!(got == burst, "the burst arrived out of order or changed");
}
