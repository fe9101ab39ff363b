//! The CLI side of a session, played by the tests: session directory,
//! listener, ring and consumer, plus helpers to start the fixture JVM.

#![allow(dead_code)]

use sprig_tests::{Jdk, Proc, TempDir};
use sprig_wire::clock;
use sprig_wire::control::{AgentStats, ClockKind, SessionOptions};
use sprig_wire::ring::{Consumer, Region, RingConfig};
use sprig_wire::session::{Channel, Listener, PeerExpectation, SessionDir, euid};
use sprig_wire::{Event, EventKind, Message};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The options of a test session: no calibration, TSC clock, lazy scheme.
fn session_options(roots: &[&str], roots_only: bool) -> SessionOptions {
    SessionOptions {
        roots: roots.iter().map(|s| s.to_string()).collect(),
        clock: ClockKind::Tsc,
        roots_only,
        ..SessionOptions::without_roots()
    }
}

pub fn agent_lib() -> PathBuf {
    sprig_tests::agent_lib()
}

/// The agent's Java test fixtures compiled for `jdk` (once per content,
/// see `sprig_tests::compiled`).
pub fn fixture_classes(jdk: &Jdk) -> TempDir {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
    let probe_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("java");
    sprig_tests::compiled(
        jdk,
        "agent-fixture",
        &src,
        &[
            "-sourcepath",
            &probe_src.display().to_string(),
            "-implicit:none",
            // The probe class's Java path names jdk.internal.misc.Unsafe.
            "--add-exports",
            "java.base/jdk.internal.misc=ALL-UNNAMED",
        ],
    )
}

/// JVM flags every fixture JVM gets.
pub fn jvm_flags(jdk: &Jdk) -> Vec<String> {
    let mut f = vec!["-Xverify:all".to_string(), "-Xmx256m".to_string()];
    if jdk.major >= 21 {
        f.push("-XX:+EnableDynamicAgentLoading".into());
    }
    f
}

/// Starts `class` from `classes` with `extra` JVM flags (not waiting).
pub fn spawn_java(jdk: &Jdk, classes: &Path, extra: &[String], class: &str) -> Proc {
    spawn_java_args(jdk, classes, extra, class, &[])
}

/// Starts `class` with program arguments `args` (not waiting).
pub fn spawn_java_args(
    jdk: &Jdk,
    classes: &Path,
    extra: &[String],
    class: &str,
    args: &[&str],
) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.args(jvm_flags(jdk))
        .args(extra)
        .arg("-cp")
        .arg(classes)
        .arg(class)
        .args(args);
    Proc::spawn(&format!("{class}-jdk{}", jdk.major), cmd)
}

pub fn wait_ready(p: &mut Proc) {
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
}

/// Loads the agent into a running JVM with `jcmd <pid> JVMTI.agent_load`.
pub fn jcmd_load(jdk: &Jdk, pid: u32, options: &str) -> String {
    let jcmd = jdk.home.join("bin/jcmd");
    let out = Command::new(jcmd)
        .arg(pid.to_string())
        .arg("JVMTI.agent_load")
        .arg(agent_lib())
        .arg(jcmd_quote(options))
        .output()
        .expect("run jcmd");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "jcmd failed: {text}");
    text
}

/// Per-thread event counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub thread_start: u64,
    pub thread_end: u64,
    pub root_entry: u64,
    pub root_exit: u64,
    pub method_entry: u64,
    pub method_exit: u64,
    pub other: u64,
}

/// The CLI side of one session.
pub struct FakeCli {
    pub dir: SessionDir,
    listener: Listener,
    pub region: std::sync::Arc<Region>,
    consumer: Consumer,
    ring_fd: std::os::fd::OwnedFd,
    pub ch: Option<Channel>,
    pub msgs: Vec<Message>,
    pub events: BTreeMap<u32, Vec<Event>>,
}

impl FakeCli {
    pub fn new() -> FakeCli {
        FakeCli::with_segments(256)
    }

    /// A CLI whose ring has `segments` segments of 64 KiB.
    pub fn with_segments(segments: u32) -> FakeCli {
        let dir = SessionDir::create().expect("session dir");
        let listener = Listener::bind(&dir).expect("listen");
        let (clock, ticks_per_sec) = clock::choose(ClockKind::Tsc);
        let cfg = RingConfig {
            segment_bytes: 64 << 10,
            segments,
            clock,
            ticks_per_sec,
        };
        let (region, ring_fd) = Region::create_memfd(&cfg).expect("ring");
        let consumer = Consumer::new(region.clone());
        FakeCli {
            dir,
            listener,
            region,
            ring_fd,
            consumer,
            ch: None,
            msgs: Vec::new(),
            events: BTreeMap::new(),
        }
    }

    /// The agent option string.
    pub fn options(&self) -> String {
        self.dir.agent_options(std::process::id()).format()
    }

    pub fn accept(&mut self, jvm_pid: u32) {
        let expect = PeerExpectation {
            pid: Some(jvm_pid),
            uid: euid(),
            token: self.dir.token(),
        };
        let (ch, jvm) = self
            .listener
            .accept(&expect, Duration::from_secs(20))
            .expect("agent connects");
        assert_eq!(jvm.pid, jvm_pid);
        assert!(!jvm.version.is_empty());
        self.ch = Some(ch);
    }

    pub fn send(&self, m: &Message) {
        self.ch.as_ref().expect("connected").send(m).expect("send");
    }

    /// Sends `Start` with the ring attached, as the CLI does.
    fn send_start(&self, o: sprig_wire::control::SessionOptions) {
        use std::os::fd::AsFd;
        self.ch
            .as_ref()
            .expect("connected")
            .send_with_fd(&Message::Start(o), self.ring_fd.as_fd())
            .expect("send Start");
    }

    /// Starts a session that instruments only `roots`.
    pub fn start(&mut self, roots: &[&str]) {
        self.send_start(session_options(roots, true));
    }

    /// Starts a session that reveals what `roots` call (Scheme B).
    pub fn start_revealing(&mut self, roots: &[&str]) {
        self.send_start(session_options(roots, false));
    }

    /// Starts a session that only samples stacks (no root: no class is
    /// redefined).
    pub fn start_sampling(&mut self, stacks: sprig_wire::control::StackOptions) {
        let mut o = session_options(&[], true);
        o.stacks = Some(stacks);
        self.send_start(o);
    }

    /// Starts a session that instruments only `roots` with `--locks`.
    pub fn start_with_locks(&mut self, roots: &[&str]) {
        let mut o = session_options(roots, true);
        o.locks = true;
        self.send_start(o);
    }

    /// Starts a session that instruments only `roots` and samples stacks.
    pub fn start_with_stacks(&mut self, roots: &[&str], stacks: sprig_wire::control::StackOptions) {
        let mut o = session_options(roots, true);
        o.stacks = Some(stacks);
        self.send_start(o);
    }

    /// Starts a revealing session of `roots` under windows timing.
    pub fn start_windows(
        &mut self,
        roots: &[&str],
        stacks: sprig_wire::control::StackOptions,
        windows: sprig_wire::control::WindowOptions,
    ) {
        let mut o = session_options(roots, false);
        o.stacks = Some(stacks);
        o.windows = Some(windows);
        o.cost_tail_ms = 0;
        self.send_start(o);
    }

    pub fn poll(&mut self) {
        let events = &mut self.events;
        self.consumer.poll(&mut |thread, evs| {
            events.entry(thread).or_default().extend_from_slice(evs);
        });
    }

    /// Waits (polling the ring) for a message matching `pred`; keeps every
    /// message seen in `msgs`.
    pub fn wait_msg(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Message) -> bool,
    ) -> Message {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll();
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {what} within {timeout:?}; messages: {:#?}",
                self.msgs
            );
            let ch = self.ch.as_mut().expect("connected");
            match ch.recv_timeout(left.min(Duration::from_millis(50))) {
                Ok(Some(m)) => {
                    self.msgs.push(m.clone());
                    if pred(&m) {
                        return m;
                    }
                }
                Ok(None) => {}
                Err(e) => panic!("waiting for {what}: {e}; messages: {:#?}", self.msgs),
            }
        }
    }

    /// The agent's digest of the bytecodes the VM holds for `class`
    /// (dotted name): (methods, FNV-1a hash).
    pub fn digest(&mut self, class: &str) -> (u32, u64) {
        self.send(&Message::BytecodeDigest {
            class: class.to_string(),
        });
        match self.wait_msg("Digest", Duration::from_secs(10), |m| {
            matches!(m, Message::Digest { .. })
        }) {
            Message::Digest {
                methods, digest, ..
            } => (methods, digest),
            _ => unreachable!(),
        }
    }

    /// Sends `Detach`, waits for `Detached`, drains the ring.
    pub fn detach(&mut self) -> AgentStats {
        self.send(&Message::Detach);
        let m = self.wait_msg("Detached", Duration::from_secs(20), |m| {
            matches!(m, Message::Detached(_))
        });
        self.poll();
        match m {
            Message::Detached(s) => s,
            _ => unreachable!(),
        }
    }

    /// Thread index → name, from the `Thread` messages.
    pub fn thread_names(&self) -> BTreeMap<u32, String> {
        self.msgs
            .iter()
            .filter_map(|m| match m {
                Message::Thread { index, name, .. } => Some((*index, name.clone())),
                _ => None,
            })
            .collect()
    }

    /// Method id for `class::name`, from the `Method` messages.
    pub fn method_id(&self, class: &str, name: &str) -> Option<u32> {
        self.msgs.iter().find_map(|m| match m {
            Message::Method {
                id,
                class: c,
                name: n,
                ..
            } if c == class && n == name => Some(*id),
            _ => None,
        })
    }

    /// Event counts per thread name.
    pub fn counts(&self) -> BTreeMap<String, Counts> {
        let names = self.thread_names();
        let mut out = BTreeMap::new();
        for (thread, evs) in &self.events {
            let name = names
                .get(thread)
                .cloned()
                .unwrap_or_else(|| format!("#{thread}"));
            let c: &mut Counts = out.entry(name).or_default();
            for e in events_of(evs) {
                match e.kind() {
                    Some(EventKind::ThreadStart) => c.thread_start += 1,
                    Some(EventKind::ThreadEnd) => c.thread_end += 1,
                    Some(EventKind::RootEntry) => c.root_entry += 1,
                    Some(EventKind::RootExit) => c.root_exit += 1,
                    Some(EventKind::MethodEntry) => c.method_entry += 1,
                    Some(EventKind::MethodExit) => c.method_exit += 1,
                    _ => c.other += 1,
                }
            }
        }
        out
    }

    /// Checks that each thread's stream is a well-nested sequence of
    /// root contexts with non-decreasing timestamps.
    pub fn assert_balanced(&self) {
        for (thread, evs) in &self.events {
            let mut depth = 0i64;
            let mut last_ts = 0u64;
            for e in events_of(evs) {
                let kind = e.kind().expect("known kind");
                if kind != EventKind::AdjustTime {
                    assert!(e.ts >= last_ts, "thread {thread}: time went backwards");
                    last_ts = e.ts;
                }
                match kind {
                    EventKind::RootEntry => {
                        assert_eq!(depth, 0, "thread {thread}: RootEntry inside a root");
                        depth = 1;
                    }
                    EventKind::RootExit => {
                        assert_eq!(depth, 1, "thread {thread}: RootExit at depth {depth}");
                        depth = 0;
                    }
                    EventKind::MethodEntry => {
                        assert!(depth >= 1, "thread {thread}: MethodEntry outside a root");
                        depth += 1;
                    }
                    EventKind::MethodExit => {
                        assert!(depth >= 2, "thread {thread}: MethodExit at depth {depth}");
                        depth -= 1;
                    }
                    _ => {}
                }
            }
            assert_eq!(depth, 0, "thread {thread}: ends inside a root");
        }
    }
}

/// The 16-byte events of a thread's stream, each multi-slot record
/// stepped over whole (its head and continuation slots are no events).
pub fn events_of(evs: &[Event]) -> impl Iterator<Item = &Event> {
    sprig_wire::Records::new(evs).filter_map(|item| match item {
        sprig_wire::record::Item::Event(e) => Some(e),
        _ => None,
    })
}

/// Fails on any verification error in the JVM's output.
pub fn assert_no_verify_error(p: &Proc) {
    let t = p.transcript();
    assert!(
        !t.contains("VerifyError") && !t.contains("ClassFormatError"),
        "verification failure in the JVM:\n{t}"
    );
}

/// jcmd's argument parser splits `key=value` tokens: a quoted option string
/// reaches the agent whole.
pub fn jcmd_quote(options: &str) -> String {
    format!("\"{options}\"")
}
