//! The `sprig` CLI killed (SIGKILL) at random points of its sessions
//! while 50 threads of the target run root calls: during the attach,
//! while it instruments, mid-session under either timing (the probes
//! writing the ring natively and, under sampled timing, in Java), and
//! during the detach. Afterwards the JVM still runs, every later session
//! counts every call exactly, and the JVM exits cleanly with no crash
//! report. On JDK 17, JDK 17 `-Xint` (every probe interpreted) and JDK 25.
//!
//! The points are random: the seed is printed, and `SPRIG_KILL_SEED=N`
//! replays it. Bounded in time (rounds stop at a deadline), so the test
//! costs well under a minute per JVM.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use sprig_tests::{
    Jdk, Proc, TempDir, calls_by_path, files_with_prefix, fixture_classes, jdk17, jdk25, sprig_bin,
    start_workload,
};

const THREADS: u32 = 50;
/// Most kill rounds, and the time they may take, per JVM.
const MAX_ROUNDS: u32 = 12;
const ROUNDS_FOR: Duration = Duration::from_secs(18);
/// Rounds whose CLI must have been profiling when it was killed.
const MIN_MID_SESSION: u32 = 3;
const LONG: Duration = Duration::from_secs(120);

/// A small xorshift generator: the test needs no crate for randomness,
/// and a printed seed replays a run.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let seed = std::env::var("SPRIG_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
            })
            .max(1);
        eprintln!("cli_kill_e2e: SPRIG_KILL_SEED={seed}");
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` milliseconds.
    fn millis(&mut self, n: u64) -> Duration {
        Duration::from_millis(self.next() % n)
    }
}

/// The target's load: `THREADS` threads making root calls, sent again
/// whenever the last batch is done, so that roots run at every point of a
/// round.
struct Load {
    per_thread: u32,
    running: bool,
}

impl Load {
    fn command(&self) -> String {
        format!("run calls {} {THREADS}", self.per_thread)
    }

    /// Keeps the load running for `d`.
    fn keep_busy(&mut self, jvm: &mut Proc, d: Duration) {
        let until = Instant::now() + d;
        loop {
            if self.running
                && jvm
                    .try_wait_for(Duration::ZERO, |_, l| l.starts_with("done calls"))
                    .is_some()
            {
                self.running = false;
            }
            if !self.running {
                jvm.send(&self.command());
                self.running = true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left.min(Duration::from_millis(10)));
        }
    }

    /// Waits for the batch in flight.
    fn finish(&mut self, jvm: &mut Proc) {
        if self.running {
            jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
            self.running = false;
        }
    }
}

fn profile_cmd(jvm: &Proc, timing: &str, out: &Path) -> Command {
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["profile", &jvm.pid().to_string()])
        .args(["--root", "fixtures.Calls::root", "--keep-trivial"])
        .args(["--timing", timing, "--format", "json", "-o"])
        .arg(out);
    cmd
}

/// One round: a session started under load and its CLI killed at a random
/// point. Returns whether the CLI was profiling when it died.
fn kill_round(jvm: &mut Proc, load: &mut Load, rng: &mut Rng, timing: &str, out: &Path) -> bool {
    let mut cli = Proc::spawn("sprig-killed", profile_cmd(jvm, timing, out));
    match rng.next() % 3 {
        0 => {
            // Anywhere from the attach on: loading the agent, starting the
            // session, instrumenting under load, or well into the session.
            load.keep_busy(jvm, rng.millis(2000));
        }
        mode => {
            // Mid-session (the probes of 50 threads writing the ring), or
            // in the detach: asked to stop, then killed while it detaches,
            // drains or writes the report.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10)
                && !cli.transcript().contains("sprig: profiling")
                && cli.wait_exit(Duration::ZERO).is_none()
            {
                load.keep_busy(jvm, Duration::from_millis(10));
            }
            load.keep_busy(jvm, rng.millis(1000));
            if mode == 2 && cli.wait_exit(Duration::ZERO).is_none() {
                cli.signal("INT");
                load.keep_busy(jvm, rng.millis(300));
            }
        }
    }
    let was_profiling = cli.transcript().contains("sprig: profiling");
    if cli.wait_exit(Duration::ZERO).is_none() {
        cli.signal("KILL");
    }
    cli.wait_exit(Duration::from_secs(10))
        .expect("the CLI ends");
    was_profiling
}

/// Starts a session once the agent took down the killed one (it notices
/// the CLI is gone and detaches by itself), within 20 seconds.
fn next_session(jvm: &mut Proc, timing: &str, out: &Path, major: u32) -> Proc {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        let mut p = Proc::spawn("sprig-after", profile_cmd(jvm, timing, out));
        if p.try_wait_for(Duration::from_secs(10), |_, l| {
            l.starts_with("sprig: profiling")
        })
        .is_some()
        {
            return p;
        }
        p.wait_exit(Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("JDK {major}: no new session within 20 s of the last kill")
}

/// A session after the kills: every root call made during it, counted
/// exactly, with its whole tree.
fn exact_session(jvm: &mut Proc, timing: &str, out: &Path, major: u32) {
    let mut p = next_session(jvm, timing, out, major);
    jvm.send(&format!("run calls 20 {THREADS}"));
    jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
    let report = p.stop_and_json(&format!("JDK {major}"), out);
    let got = calls_by_path(&report, &["fixtures."]);
    let calls = u64::from(20 * THREADS);
    let want = [
        ("Calls.root".to_string(), calls),
        ("Calls.root > Calls.a".to_string(), calls),
        ("Calls.root > Calls.a > Calls.leaf".to_string(), 2 * calls),
        ("Calls.root > Calls.b".to_string(), calls),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        got,
        want,
        "JDK {major} {timing}: a session after the kills miscounted; {}",
        p.transcript()
    );
}

fn run_on(jdk: &Jdk, flags: &[&str]) {
    let name = format!(
        "JDK {}{}",
        jdk.major,
        flags.iter().map(|f| format!(" {f}")).collect::<String>()
    );
    let started = Instant::now();
    let classes = fixture_classes(jdk);
    let mut jvm = start_workload(jdk, classes.path(), flags);
    let interpreted = flags.contains(&"-Xint");
    let mut load = Load {
        per_thread: if interpreted { 2_000 } else { 20_000 },
        running: false,
    };
    let tmp = TempDir::new("cli-kill");
    let mut rng = Rng::new();
    let mut rounds = 0;
    let mut mid_session = 0;
    let t0 = Instant::now();
    while rounds < MAX_ROUNDS && t0.elapsed() < ROUNDS_FOR {
        let timing = if rng.next().is_multiple_of(2) {
            "sampled"
        } else {
            "exact"
        };
        let out = tmp.path().join(format!("killed-{rounds}.json"));
        let at = Instant::now();
        let profiling = kill_round(&mut jvm, &mut load, &mut rng, timing, &out);
        if profiling {
            mid_session += 1;
        }
        eprintln!(
            "{name}: round {rounds}: {timing}, killed after {} ms{}",
            at.elapsed().as_millis(),
            if profiling { ", profiling" } else { "" }
        );
        rounds += 1;
        assert!(
            jvm.wait_exit(Duration::ZERO).is_none(),
            "{name}: the JVM died in round {rounds}:\n{}",
            jvm.transcript()
        );
    }
    load.finish(&mut jvm);
    eprintln!("{name}: {rounds} kills, {mid_session} of them mid-session");
    assert!(
        mid_session >= MIN_MID_SESSION,
        "{name}: only {mid_session} of {rounds} kills came while profiling"
    );
    // Every later session counts exactly, under either timing.
    for (i, timing) in ["sampled", "exact"].into_iter().enumerate() {
        let out = tmp.path().join(format!("after-{i}.json"));
        exact_session(&mut jvm, timing, &out, jdk.major);
    }
    // And the JVM exits cleanly, leaving no crash report.
    jvm.send("exit");
    let status = jvm.wait_exit(LONG).expect("the JVM exits");
    assert!(status.success(), "{name}: {status}\n{}", jvm.transcript());
    let cwd = jvm.cwd.as_ref().expect("the workload's own directory");
    assert_eq!(
        files_with_prefix(cwd.path(), "hs_err"),
        Vec::<std::path::PathBuf>::new(),
        "{name}: crash report"
    );
    eprintln!("{name}: {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn killing_the_cli_at_random_points_leaves_exact_sessions_jdk17() {
    run_on(&jdk17(), &[]);
}

#[test]
fn killing_the_cli_at_random_points_leaves_exact_sessions_jdk17_interpreted() {
    run_on(&jdk17(), &["-Xint"]);
}

#[test]
fn killing_the_cli_at_random_points_leaves_exact_sessions_jdk25() {
    if let Some(jdk) = jdk25("killing_the_cli_at_random_points_leaves_exact_sessions_jdk25") {
        run_on(&jdk, &[]);
    }
}
