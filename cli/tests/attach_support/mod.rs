//! Shared harness for the attach tests: fixture compilation, JVMs that are
//! killed on drop, waiting for their "ready" line, and leftover checks.

#![allow(dead_code)] // each test binary uses a different part

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Bound for a JVM to print "ready".
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound for one attach in the tests.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(20);

const JDK17_DEFAULT: &str = "/usr/lib/jvm/java-17-openjdk-amd64";
const JDK25_DEFAULT: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";

/// The JDK 17 home: `SPRIG_TEST_JDK17`, or Debian's default location.
pub fn jdk17() -> PathBuf {
    let home = std::env::var_os("SPRIG_TEST_JDK17")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(JDK17_DEFAULT));
    assert!(
        home.join("bin/javac").exists(),
        "JDK 17 not found at {} (set SPRIG_TEST_JDK17)",
        home.display()
    );
    home
}

/// The JDK 25 home (`SPRIG_TEST_JDK25` or Temurin's location), if installed.
pub fn jdk25() -> Option<PathBuf> {
    let home = std::env::var_os("SPRIG_TEST_JDK25")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(JDK25_DEFAULT));
    if home.join("bin/java").exists() {
        Some(home)
    } else {
        eprintln!(
            "note: no JDK 25 at {}: JDK 25 cases skipped",
            home.display()
        );
        None
    }
}

/// Whether the tests run as root; cases that need it (other users, new
/// namespaces) say so and are skipped otherwise.
pub fn is_root(case: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let root = fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    if !root {
        eprintln!("note: {case} needs root: skipped");
    }
    root
}

/// Whether users other than the owner can reach `path` (every directory
/// on the way searchable by others).
fn others_can_reach(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    path.ancestors().all(|a| {
        a.as_os_str().is_empty()
            || fs::metadata(a)
                .map(|m| m.mode() & 0o001 != 0)
                .unwrap_or(false)
    })
}

/// A directory the JVMs and helpers of other users can reach: the
/// target's tmp dir, or, when the checkout sits in a private directory (a
/// clone under a 0700 home), a fresh 0755 directory under /tmp for this
/// test process (those of test processes that are gone are removed).
pub fn reachable_tmp() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        if others_can_reach(&target) {
            return target;
        }
        let prefix = "sprig-test-reachable-";
        if let Ok(entries) = fs::read_dir("/tmp") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let gone = name
                    .strip_prefix(prefix)
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
                if gone {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = PathBuf::from(format!("/tmp/{prefix}{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).expect("create a reachable test directory");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        dir
    })
}

/// This test binary, or a copy of it that other users can run.
pub fn reachable_exe() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        if others_can_reach(&exe) {
            return exe;
        }
        let copy = reachable_tmp().join(exe.file_name().unwrap());
        fs::copy(&exe, &copy).expect("copy the test binary");
        fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
        copy
    })
}

/// Compiled fixtures: `classes/` with Sleeper, and `probe-agent.jar`.
pub struct Fixtures {
    pub classes: PathBuf,
    pub agent_jar: PathBuf,
}

/// Compiles the fixtures once per test binary into [`reachable_tmp`],
/// world-readable so JVMs of other users can load them.
pub fn fixtures() -> &'static Fixtures {
    static FIXTURES: OnceLock<Fixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let name = exe.file_name().unwrap().to_string_lossy().into_owned();
        let dir = reachable_tmp().join(format!("{name}-fixtures"));
        let _ = fs::remove_dir_all(&dir);
        let classes = dir.join("classes");
        let agent_classes = dir.join("agent-classes");
        fs::create_dir_all(&classes).unwrap();
        fs::create_dir_all(&agent_classes).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
        let jdk = jdk17();
        run(Command::new(jdk.join("bin/javac"))
            .args(["--release", "11", "-d"])
            .arg(&classes)
            .arg(src.join("Sleeper.java")));
        run(Command::new(jdk.join("bin/javac"))
            .args(["--release", "11", "-d"])
            .arg(&agent_classes)
            .arg(src.join("ProbeAgent.java")));
        let manifest = dir.join("manifest.txt");
        fs::write(&manifest, "Agent-Class: ProbeAgent\n").unwrap();
        let agent_jar = dir.join("probe-agent.jar");
        run(Command::new(jdk.join("bin/jar"))
            .arg("cfm")
            .arg(&agent_jar)
            .arg(&manifest)
            .arg("-C")
            .arg(&agent_classes)
            .arg("."));
        make_world_readable(&dir);
        Fixtures { classes, agent_jar }
    })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run a JDK tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_world_readable(path: &Path) {
    let meta = fs::metadata(path).unwrap();
    let mode = if meta.is_dir() { 0o755 } else { 0o644 };
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    if meta.is_dir() {
        for e in fs::read_dir(path).unwrap() {
            make_world_readable(&e.unwrap().path());
        }
    }
}

/// A fresh directory under [`reachable_tmp`], removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = reachable_tmp().join(format!("attach-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Who runs a test JVM.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    Me,
    Nobody,
    /// As root in new PID and mount namespaces with a private /tmp, as in a
    /// container: the JVM's PID differs inside, and its /tmp is reachable
    /// only through /proc/PID/root.
    Container,
}

/// A running fixture JVM; terminated (SIGTERM, then SIGKILL) on drop.
pub struct Jvm {
    child: Child,
    pub pid: u32,
    pub cwd: TempDir,
    output: Arc<Mutex<String>>,
    in_container: bool,
}

impl Jvm {
    /// Starts `Sleeper` on the JDK at `home` with extra JVM `flags`, in a
    /// fresh working directory, and waits for its "ready" line.
    pub fn start(home: &Path, flags: &[&str], run_as: RunAs) -> Jvm {
        Jvm::start_with_env(home, flags, &[], run_as)
    }

    /// `start` with extra environment variables for the JVM.
    pub fn start_with_env(home: &Path, flags: &[&str], env: &[(&str, &str)], run_as: RunAs) -> Jvm {
        let fixtures = fixtures();
        let cwd = TempDir::new("cwd");
        let java = home.join("bin/java");
        let mut cmd = match run_as {
            RunAs::Me => Command::new(&java),
            RunAs::Nobody => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
                    .arg(&java);
                c
            }
            RunAs::Container => {
                // sh stays PID 1 of the namespace; java runs as its child.
                let mut c = Command::new("unshare");
                c.args([
                    "--pid",
                    "--fork",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    // The classes may live under /tmp (a target dir there),
                    // which the private tmpfs hides: enter their directory
                    // first (a working directory survives the mount) and
                    // copy them into the private /tmp (the JVM would turn a
                    // relative class path into a hidden absolute one).
                    // The agent jar crosses the mount on an open descriptor.
                    "cd \"$SPRIG_CLASSES\" && exec 3<\"$SPRIG_AGENT_JAR\" && mount -t tmpfs tmpfs /tmp && mkdir /tmp/classes && cp -R . /tmp/classes && cat <&3 >/tmp/classes/probe-agent.jar && exec 3<&- && \"$0\" \"$@\" & wait",
                ])
                .env("SPRIG_CLASSES", &fixtures.classes)
                .env("SPRIG_AGENT_JAR", &fixtures.agent_jar)
                .arg(&java);
                c
            }
        };
        let classpath = if run_as == RunAs::Container {
            PathBuf::from("/tmp/classes")
        } else {
            fixtures.classes.clone()
        };
        cmd.args(["-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(flags)
            .arg("-cp")
            .arg(&classpath)
            .arg("Sleeper")
            .envs(env.iter().copied())
            .current_dir(&cwd.0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A second of slack below: file times are not finer than the clock.
        let spawned = std::time::SystemTime::now() - Duration::from_secs(1);
        let mut child = cmd.spawn().expect("start java");
        let mut pid = child.id();
        let output = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let out = Arc::clone(&output);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line == "ready" {
                    let _ = ready_tx.send(());
                }
                let mut o = out.lock().unwrap();
                o.push_str(&line);
                o.push('\n');
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let err = Arc::clone(&output);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                err.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let mut jvm = Jvm {
            child,
            pid,
            cwd,
            output,
            in_container: run_as == RunAs::Container,
        };
        if ready_rx.recv_timeout(READY_TIMEOUT).is_err() {
            let out = jvm.output();
            jvm.terminate();
            panic!("JVM did not print ready within {READY_TIMEOUT:?}: {out}");
        }
        if run_as == RunAs::Container {
            // unshare -> sh -> java
            pid = descendant_named(jvm.child.id(), "java").unwrap_or_else(|| {
                jvm.terminate();
                panic!("no java process under unshare")
            });
            jvm.pid = pid;
        } else {
            // A socket older than this JVM is a dead JVM's whose PID this
            // one reuses (tests assert that none gets created). With -Xrs
            // the JVM makes its own at startup: that one stays.
            let socket = format!("/tmp/.java_pid{pid}");
            if fs::metadata(&socket)
                .and_then(|m| m.modified())
                .is_ok_and(|m| m < spawned)
            {
                let _ = fs::remove_file(&socket);
            }
        }
        jvm
    }

    /// The JVM's PID inside its own PID namespace.
    pub fn ns_pid(&self) -> u32 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|v| v.split_whitespace().last()?.parse().ok())
            .unwrap_or(self.pid)
    }

    /// Everything the JVM wrote on stdout and stderr so far.
    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits until the JVM's output contains `text`; false after `limit`.
    pub fn wait_for_output(&self, text: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if self.output().contains(text) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        self.output().contains(text)
    }

    /// Whether the JVM is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid.to_string())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} {}", self.pid);
    }

    fn terminate(&mut self) {
        if !self.alive() {
            let _ = self.child.wait();
            return;
        }
        // SIGTERM lets the JVM remove its attach socket and PerfData file.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if !self.alive() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.terminate();
        // A JVM that cannot clean up (-Xrs skips the shutdown path on
        // SIGTERM; SIGKILL) leaves its attach socket in /tmp. A container's
        // private /tmp is gone with its namespace.
        if !self.in_container {
            let _ = fs::remove_file(format!("/tmp/.java_pid{}", self.pid));
        }
    }
}

/// Trigger files `.attach_pid*` left in `dir`.
pub fn attach_files_in(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(".attach_pid"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Asserts sprig left no trigger file for `jvm` in its cwd, in its /tmp,
/// or in sprig's /tmp.
pub fn assert_no_trigger_files(jvm: &Jvm) {
    let in_cwd = attach_files_in(&jvm.cwd.0);
    assert!(in_cwd.is_empty(), "left in the JVM's cwd: {in_cwd:?}");
    let ns_pid = jvm.ns_pid();
    for path in [
        format!("/tmp/.attach_pid{}", jvm.pid),
        format!("/tmp/.attach_pid{ns_pid}"),
        format!("/proc/{}/root/tmp/.attach_pid{ns_pid}", jvm.pid),
    ] {
        assert!(!Path::new(&path).exists(), "left behind: {path}");
    }
}

/// The first process named `name` below `pid` (children, grandchildren...).
fn descendant_named(pid: u32, name: &str) -> Option<u32> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let mut queue = vec![pid];
        while let Some(p) = queue.pop() {
            let children =
                fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
            for c in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                if fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == name) {
                    return Some(c);
                }
                queue.push(c);
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A PID no process can have: above the kernel's pid_max.
pub fn unused_pid() -> u32 {
    let max: u32 = fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    max + 1
}
