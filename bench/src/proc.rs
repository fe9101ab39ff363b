//! Child processes under guards: a JVM driven through stdin/stdout, and a
//! `sprig profile` session stopped with SIGINT. Both are killed on drop, every
//! wait is bounded, and a JVM's "error ..." line fails the wait at once.

use anyhow::{Context, Result, anyhow, bail};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Scheme name of a `--skip-trivial` row, followed by its byte bound.
pub const TRIVIAL_SCHEME: &str = "lazy-trivial=";
/// Scheme B with every method instrumented, trivial ones included
/// (`--keep-trivial`): the micro benchmarks time probes around methods
/// that sprig leaves out by default.
pub const KEEP_TRIVIAL_SCHEME: &str = "lazy-trivial=0";
/// Scheme B with `--locks` (`--compare-locks`, row `Bl`).
pub const LOCKS_SCHEME: &str = "lazy-locks";
/// Scheme B with exact allocations only (`--alloc --alloc-interval 0`;
/// `--compare-alloc`, row `Bx`).
pub const ALLOC_EXACT_SCHEME: &str = "lazy-alloc-exact";
/// Scheme B with the JVM's heap sampler alone at `--alloc`'s default
/// interval (`--alloc-interval 524288`; `--compare-alloc`, row `Bs`).
pub const ALLOC_SAMPLED_SCHEME: &str = "lazy-alloc-sampled";

/// Scheme B with `--alloc` (exact allocations and the heap sampler at
/// its default interval; `--compare-alloc`, row `Bxs`).
pub const ALLOC_SCHEME: &str = "lazy-alloc";
/// Scheme B once more, a session of its own (`--compare-alloc`, row
/// `B'`): the control of the rows compared with B in the same JVM, what
/// running one session after another does to B itself.
pub const AGAIN_SCHEME: &str = "lazy-again";
/// Scheme B with `--alloc` and the heap sampler every BYTES
/// (`lazy-alloc@BYTES`: `--alloc --alloc-interval BYTES`; `--only
/// alloc-hist`).
pub const ALLOC_AT_SCHEME: &str = "lazy-alloc@";

/// The schemes that add a source to Scheme B and are compared with it
/// repeat by repeat (`--locks`, `--alloc`): they differ from B whatever
/// is instrumented, so they run while only roots are.
pub fn beside_lazy(scheme: &str) -> bool {
    [
        LOCKS_SCHEME,
        ALLOC_EXACT_SCHEME,
        ALLOC_SAMPLED_SCHEME,
        ALLOC_SCHEME,
        AGAIN_SCHEME,
    ]
    .contains(&scheme)
}

/// How many of a JVM's last stdout lines an error message quotes.
const TAIL: usize = 12;

/// A JVM running one of the bench fixtures.
pub struct Jvm {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    tail: VecDeque<String>,
    stderr_log: PathBuf,
}

impl Jvm {
    /// Starts `java ARGS`, stderr to `log_dir/NAME.stderr`, and waits for its
    /// "ready" line.
    pub fn start(
        java: &Path,
        args: &[String],
        name: &str,
        log_dir: &Path,
        ready_within: Duration,
    ) -> Result<Jvm> {
        Jvm::start_with_env(java, args, &[], name, log_dir, ready_within)
    }

    /// [`Jvm::start`] with extra environment variables.
    pub fn start_with_env(
        java: &Path,
        args: &[String],
        env: &[(&str, &str)],
        name: &str,
        log_dir: &Path,
        ready_within: Duration,
    ) -> Result<Jvm> {
        let stderr_log = log_dir.join(format!("{name}.stderr"));
        let err = File::create(&stderr_log)
            .with_context(|| format!("creating {}", stderr_log.display()))?;
        let mut child = Command::new(java)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("starting {}", java.display()))?;
        let stdout = child.stdout.take().context("JVM stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut jvm = Jvm {
            name: name.to_owned(),
            child,
            stdin,
            lines,
            tail: VecDeque::new(),
            stderr_log,
        };
        jvm.expect("ready", ready_within)?;
        Ok(jvm)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The JVM's stderr so far (it goes to a log file).
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    pub fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("JVM stdin closed")?;
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .with_context(|| format!("{}: writing {line:?}", self.name))
    }

    /// The next line starting with `prefix` (other lines are skipped).
    pub fn expect(&mut self, prefix: &str, within: Duration) -> Result<String> {
        let deadline = Instant::now() + within;
        loop {
            let line = self.next_line(deadline, prefix)?;
            if line.starts_with(prefix) {
                return Ok(line);
            }
        }
    }

    /// Every line up to the one starting with `end` (exclusive).
    pub fn collect_until(&mut self, end: &str, within: Duration) -> Result<Vec<String>> {
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        loop {
            let line = self.next_line(deadline, end)?;
            if line.starts_with(end) {
                return Ok(out);
            }
            out.push(line);
        }
    }

    fn next_line(&mut self, deadline: Instant, waiting_for: &str) -> Result<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                if self.tail.len() == TAIL {
                    self.tail.pop_front();
                }
                self.tail.push_back(line.clone());
                if line.starts_with("error") {
                    bail!(
                        "{}: the workload failed: {line}{}",
                        self.name,
                        self.context()
                    );
                }
                Ok(line)
            }
            Err(RecvTimeoutError::Timeout) => Err(anyhow!(
                "{}: no {waiting_for:?} line within the time bound{}",
                self.name,
                self.context()
            )),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                Err(anyhow!(
                    "{}: the JVM exited ({}) while sprig-bench waited for {waiting_for:?}{}",
                    self.name,
                    status.map_or("unknown status".to_owned(), |s| s.to_string()),
                    self.context()
                ))
            }
        }
    }

    fn context(&self) -> String {
        let err = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        let err_tail: Vec<&str> = err.lines().rev().take(TAIL).collect();
        let err_tail: Vec<&str> = err_tail.into_iter().rev().collect();
        format!(
            "\n  last stdout lines: {:?}\n  last stderr lines ({}): {:?}",
            self.tail,
            self.stderr_log.display(),
            err_tail
        )
    }

    /// Asks the fixture to quit and waits for it (bounded), killing it otherwise.
    pub fn quit(mut self) -> Result<()> {
        let _ = self.send("quit");
        self.stdin = None;
        match wait_bounded(&mut self.child, Duration::from_secs(20))? {
            Some(s) if s.success() => Ok(()),
            Some(s) => bail!("{}: the JVM exited with {s}{}", self.name, self.context()),
            None => bail!("{}: the JVM did not exit within 20 s of quit", self.name),
        }
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Waits up to `within` for the child to exit; Ok(None) when it did not.
fn wait_bounded(child: &mut Child, within: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Arguments added to every `sprig profile` command (`--sprig-arg`).
static EXTRA_SPRIG_ARGS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Sets the arguments added to every `sprig profile` command; once.
pub fn set_extra_sprig_args(args: Vec<String>) {
    let _ = EXTRA_SPRIG_ARGS.set(args);
}

/// Whether `--sprig-arg` gave this option (`--interval` or
/// `--interval=...`), which the bench then leaves to it.
pub fn extra_sprig_arg_given(flag: &str) -> bool {
    EXTRA_SPRIG_ARGS
        .get()
        .into_iter()
        .flatten()
        .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
}

/// The bench's timing mode for windows timing with the classes put back
/// to their original bytes in silent windows.
pub const WINDOWS_ORIGINAL: &str = "windows-original";

/// Whether a bench timing mode is windows timing (either silence).
pub fn is_windows(mode: &str) -> bool {
    mode == "windows" || mode == WINDOWS_ORIGINAL
}

/// What a `sprig profile` session is asked to do.
#[derive(Clone, Debug)]
pub struct SprigArgs {
    pub roots: Vec<String>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// `lazy`, `eager`, `lazy-redefine` (lazy with `--no-dormant`),
    /// `lazy-receiver` (lazy with `--virtual-calls receiver`),
    /// `lazy-trivial=N` (lazy with `--skip-trivial=N`; 0: `--keep-trivial`)
    /// `lazy-locks` (lazy with `--locks`), `lazy-alloc-exact` (lazy with
    /// exact allocations) or `lazy-alloc-sampled` (lazy with sampled
    /// allocations alone).
    pub scheme: String,
    /// `--timing` (`exact`, `sampled`, `windows`, or `windows-original`:
    /// windows timing with `--windows-silence original`); None leaves
    /// sprig's default.
    pub timing: Option<String>,
    /// `--interval` in ms; None leaves sprig's default.
    pub interval_ms: Option<f64>,
}

/// A running `sprig profile PID ... --format json -o FILE`.
pub struct Sprig {
    child: Child,
    stderr: Receiver<(Instant, String)>,
    stderr_seen: Vec<String>,
    out: PathBuf,
    spawned: Instant,
    /// CPU time of the `sprig` process when profiling began.
    cpu_at_start: Option<Duration>,
}

/// A stopped session: its JSON report, the stderr it printed, and timings.
pub struct Stopped {
    pub report: serde_json::Value,
    pub stderr: Vec<String>,
    /// From SIGINT to the `sprig` process's exit (detach + report).
    pub stop_time: Duration,
    /// CPU time (user + system) the `sprig` process used from its
    /// `profiling` line to the SIGINT: reading the ring and building the
    /// tree, on cores the workload may need.
    pub cli_cpu: Option<Duration>,
}

impl Sprig {
    pub fn start(sprig: &Path, pid: u32, args: &SprigArgs, out: &Path) -> Result<Sprig> {
        let _ = std::fs::remove_file(out);
        let mut cmd = Command::new(sprig);
        cmd.arg("profile").arg(pid.to_string());
        for r in &args.roots {
            cmd.arg("--root").arg(r);
        }
        for i in &args.include {
            cmd.arg("--include").arg(i);
        }
        for x in &args.exclude {
            cmd.arg("--exclude").arg(x);
        }
        match args.scheme.as_str() {
            "lazy-redefine" => cmd.args(["--scheme", "lazy", "--no-dormant"]),
            "lazy-receiver" => cmd.args(["--scheme", "lazy", "--virtual-calls", "receiver"]),
            AGAIN_SCHEME => cmd.args(["--scheme", "lazy"]),
            KEEP_TRIVIAL_SCHEME => cmd.args(["--scheme", "lazy", "--keep-trivial"]),
            LOCKS_SCHEME => cmd.args(["--scheme", "lazy", "--locks"]),
            ALLOC_EXACT_SCHEME => {
                cmd.args(["--scheme", "lazy", "--alloc", "--alloc-interval", "0"])
            }
            ALLOC_SAMPLED_SCHEME => cmd.args(["--scheme", "lazy", "--alloc-interval", "524288"]),
            ALLOC_SCHEME => cmd.args(["--scheme", "lazy", "--alloc"]),
            scheme => match (
                scheme.strip_prefix(TRIVIAL_SCHEME),
                scheme.strip_prefix(ALLOC_AT_SCHEME),
            ) {
                (Some(bound), _) => cmd
                    .args(["--scheme", "lazy"])
                    .arg(format!("--skip-trivial={bound}")),
                (_, Some(bytes)) => cmd
                    .args(["--scheme", "lazy", "--alloc", "--alloc-interval"])
                    .arg(bytes),
                _ => cmd.args(["--scheme", scheme]),
            },
        };
        match args.timing.as_deref() {
            Some(WINDOWS_ORIGINAL) => {
                cmd.args(["--timing", "windows", "--windows-silence", "original"]);
            }
            Some(t) => {
                cmd.args(["--timing", t]);
            }
            None => {}
        }
        if let Some(ms) = args.interval_ms {
            cmd.arg("--interval").arg(ms.to_string());
        }
        cmd.args(EXTRA_SPRIG_ARGS.get().into_iter().flatten());
        cmd.args(["--format", "json", "-o"])
            .arg(out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let spawned = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", sprig.display()))?;
        let stderr = child.stderr.take().context("sprig stderr")?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Ok(Sprig {
            child,
            stderr: rx,
            stderr_seen: Vec::new(),
            out: out.to_path_buf(),
            spawned,
            cpu_at_start: None,
        })
    }

    /// Waits for the line saying the root is instrumented (or will be when
    /// its class loads); returns the time from spawning `sprig` to that line.
    pub fn wait_profiling(&mut self, within: Duration) -> Result<Duration> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok((at, line)) => {
                    let started = line.starts_with("sprig: profiling")
                        || (line.starts_with("sprig: root ")
                            && line.contains("when its class loads"));
                    self.stderr_seen.push(line);
                    if started {
                        self.cpu_at_start = process_cpu(self.child.id());
                        return Ok(at.duration_since(self.spawned));
                    }
                }
                Err(RecvTimeoutError::Timeout) => bail!(
                    "sprig did not start profiling within {:?}; its stderr: {:?}",
                    within,
                    self.stderr_seen
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().ok();
                    bail!(
                        "sprig exited ({}) before profiling started; its stderr: {:?}",
                        status.map_or("unknown status".to_owned(), |s| s.to_string()),
                        self.stderr_seen
                    )
                }
            }
        }
    }

    /// `kill -SIG` to the sprig process.
    fn signal(&self, sig: &str) -> Result<()> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status()
            .with_context(|| format!("running kill -{sig}"))?;
        if !sent.success() {
            bail!("kill -{sig} {pid} failed");
        }
        Ok(())
    }

    /// SIGUSR1: sprig forgets what it recorded so far; waits (bounded) for
    /// the line saying so. Called between iterations, so no root call is
    /// open at the cut.
    pub fn reset(&mut self, within: Duration) -> Result<()> {
        self.signal("USR1")?;
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok((_, line)) => {
                    let done = line.starts_with("sprig: results reset");
                    self.stderr_seen.push(line);
                    if done {
                        return Ok(());
                    }
                }
                Err(_) => bail!(
                    "sprig did not confirm the reset within {within:?}; its stderr: {:?}",
                    self.stderr_seen
                ),
            }
        }
    }

    /// SIGINT, wait (bounded) for a clean exit, read the JSON report.
    pub fn stop(mut self, within: Duration) -> Result<Stopped> {
        let cli_cpu = process_cpu(self.child.id())
            .zip(self.cpu_at_start)
            .map(|(now, then)| now.saturating_sub(then));
        let t0 = Instant::now();
        self.signal("INT")?;
        let status = wait_bounded(&mut self.child, within)?;
        let stop_time = t0.elapsed();
        while let Ok((_, line)) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.stderr_seen.push(line);
        }
        let stderr = std::mem::take(&mut self.stderr_seen);
        match status {
            None => bail!("sprig did not exit within {within:?} of SIGINT; stderr: {stderr:?}"),
            Some(s) if !s.success() => bail!("sprig exited with {s}; stderr: {stderr:?}"),
            Some(_) => {}
        }
        let text = std::fs::read_to_string(&self.out)
            .with_context(|| format!("reading sprig's report {}", self.out.display()))?;
        let report = parse_deep(text)
            .with_context(|| format!("parsing sprig's JSON report {}", self.out.display()))?;
        Ok(Stopped {
            report,
            stderr,
            stop_time,
            cli_cpu,
        })
    }
}

/// User plus system CPU time of a live process, from /proc/PID/stat
/// (fields 14 and 15, in clock ticks of 1/100 s on Linux x86-64).
fn process_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3, so field n is f[n - 3].
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// The names (`comm`, cut to 15 bytes by the kernel) HotSpot gives its JIT
/// compiler threads: `C1 CompilerThread0`, `C2 CompilerThread1`, ...
const JIT_THREADS: [&str; 2] = ["C1 CompilerThre", "C2 CompilerThre"];

/// CPU time the JIT compiler threads of the live process `pid` have used,
/// from /proc/PID/task/*/stat: how much compiling a window cost, where
/// the probes' redefinitions make the JIT compile again what it had
/// compiled. A compiler thread that ended (HotSpot starts and stops them
/// with the queue's length) takes its time with it: a lower bound.
pub fn jit_cpu(pid: u32) -> Option<Duration> {
    threads_cpu(
        &Path::new("/proc").join(pid.to_string()).join("task"),
        &JIT_THREADS,
    )
}

/// User plus system CPU of the threads under `task_dir` (a /proc
/// `task` directory) whose name starts with one of `names`; None when
/// the directory cannot be read.
fn threads_cpu(task_dir: &Path, names: &[&str]) -> Option<Duration> {
    let mut ticks = 0u64;
    for entry in std::fs::read_dir(task_dir).ok()?.flatten() {
        // A thread may end between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        if !names.iter().any(|n| name.starts_with(n)) {
            continue;
        }
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // f starts at field 3: utime (14) and stime (15) are f[11], f[12].
        let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += t(11) + t(12);
    }
    Some(Duration::from_millis(ticks * 10))
}

impl Drop for Sprig {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Parses a report whose trees may nest far deeper than serde_json's default
/// limit of 128 (javac's call trees do), on a thread with a large stack.
fn parse_deep(text: String) -> Result<serde_json::Value> {
    let worker = std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || -> Result<serde_json::Value> {
            use serde::Deserialize;
            let mut de = serde_json::Deserializer::from_str(&text);
            de.disable_recursion_limit();
            let v = serde_json::Value::deserialize(&mut de)?;
            de.end()?;
            Ok(v)
        })
        .context("spawning the JSON parser thread")?;
    worker
        .join()
        .map_err(|_| anyhow!("the JSON parser thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_reads_this_process_and_grows_with_work() {
        let pid = std::process::id();
        let before = process_cpu(pid).expect("own /proc stat");
        // Spin until 50 ms of CPU show (bounded: on a busy host this
        // thread may get a small share of a core).
        let t0 = Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after < before + Duration::from_millis(50) && t0.elapsed() < Duration::from_secs(20) {
            for _ in 0..1_000_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            std::hint::black_box(x);
            after = process_cpu(pid).expect("own /proc stat");
        }
        assert!(
            after >= before + Duration::from_millis(50),
            "{before:?} -> {after:?} in {:?}",
            t0.elapsed()
        );
        assert!(process_cpu(u32::MAX).is_none());
    }

    /// A /proc task directory of three threads: two compiler threads
    /// (one named with a space inside its parentheses, as HotSpot's are)
    /// and a worker whose time must not count.
    #[test]
    fn threads_cpu_sums_only_the_named_threads() {
        let dir = std::env::temp_dir().join(format!("sprig-bench-tasks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let stat = |tid: u32, name: &str, utime: u64, stime: u64| {
            std::fs::create_dir_all(dir.join(tid.to_string())).unwrap();
            std::fs::write(
                dir.join(tid.to_string()).join("stat"),
                format!("{tid} ({name}) S 1 1 1 0 -1 4194368 10 0 0 0 {utime} {stime} 0 0 20 0 30 0 100 0 0\n"),
            )
            .unwrap();
        };
        stat(11, "C2 CompilerThre", 120, 30);
        stat(12, "C1 CompilerThre", 7, 3);
        stat(13, "qtp1-14", 500, 100);
        // A directory without a stat file (a thread that just ended).
        std::fs::create_dir_all(dir.join("14")).unwrap();
        let got = threads_cpu(&dir, &JIT_THREADS);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(got, Some(Duration::from_millis((120 + 30 + 7 + 3) * 10)));
        assert_eq!(threads_cpu(&dir, &JIT_THREADS), None);
    }

    /// A JVM's compiler threads show up under their HotSpot names.
    #[test]
    fn jit_cpu_reads_a_running_jvm() {
        let java = Path::new("/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
        if !java.is_file() {
            eprintln!("skipped: no JDK 17 at {}", java.display());
            return;
        }
        // -Xcomp compiles every method it runs: its compiler threads spend
        // CPU at once, within the JVM's start-up.
        let mut child = Command::new(java)
            .args([
                "-Xcomp",
                "-XX:-UseDynamicNumberOfCompilerThreads",
                "-version",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start java");
        let mut most = Duration::ZERO;
        while matches!(child.try_wait(), Ok(None)) {
            if let Some(t) = jit_cpu(child.id()) {
                most = most.max(t);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            most >= Duration::from_millis(10),
            "compiler threads' CPU of a -Xcomp JVM read as {most:?}"
        );
        assert!(jit_cpu(u32::MAX).is_none());
    }
}
