//! The command line of `sprig sample` and its validation: everything is
//! checked before a JVM is touched.

use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::{Args, ValueEnum};
use sprig::pattern;
use sprig_callgraph::stacks::View;
use sprig_wire::control::StackSource;

use crate::output::Format;
pub use crate::profile::args::SourceArg;

/// The interval `sprig sample` samples at by default, in ms.
pub const DEFAULT_INTERVAL_MS: f64 = 20.0;

/// `sprig sample PID`.
#[derive(Args, Debug)]
pub struct SampleArgs {
    /// PID of the JVM to sample (see `sprig list`).
    pub pid: u32,

    /// Stop after this many seconds of sampling (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,

    /// Milliseconds between two sampling rounds; each round takes the
    /// stack of every live Java thread. Between 1 and 10000.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_INTERVAL_MS)]
    pub interval: f64,

    /// Which samples count: `cpu` (the default) only the threads on the
    /// CPU, each sample weighing the CPU time its thread used since its
    /// previous one; `wall` every thread whatever it does (blocked,
    /// waiting, sleeping, in I/O), each sample weighing the time between
    /// two rounds. Suggested roots follow the same view.
    #[arg(long, value_enum, default_value_t = ViewArg::Cpu)]
    pub clock: ViewArg,

    /// Where stacks come from. `timer` (the default with `--clock cpu`):
    /// a CPU-time timer on each thread whose signal handler walks the
    /// thread where it runs (HotSpot's AsyncGetCallTrace): no safepoint
    /// bias, threads on the CPU only, each sample one interval of that
    /// thread's CPU time. `jvmti` (the default with `--clock wall`, which
    /// needs every thread, waiting ones included): every thread every
    /// interval at a safepoint (JVMTI GetAllStackTraces), safepoint-biased.
    /// Where the timer cannot run (no AsyncGetCallTrace, or another
    /// profiler holds SIGPROF) sprig says so and uses `jvmti`.
    #[arg(long, value_enum)]
    pub source: Option<SourceArg>,

    /// CPU view of threads running Java code only: a thread on the CPU
    /// inside a native method (JNI, I/O, zlib, `Thread.yield`) is left
    /// out of the view and counted apart. This is what JFR's execution
    /// samples (`jdk.ExecutionSample`) show, so compare a JFR recording
    /// with a report taken with it (`sprig diff --overlap`); JFR puts the
    /// native ones in `jdk.NativeMethodSample`. Needs `--clock cpu`.
    #[arg(long)]
    pub java_only: bool,

    /// One tree per thread instead of the tree merged over threads.
    #[arg(long)]
    pub threads: bool,

    /// Show each run of JDK frames (java.*, javax.*, jdk.*, sun.*,
    /// com.sun.*) in the tree as one `[jdk]` frame.
    #[arg(long)]
    pub fold_jdk: bool,

    /// List this many suggested roots (0 for none).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub suggest_roots: usize,

    /// Text report: list this many hot methods (by self samples).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub hot: usize,

    /// Text report: hide tree nodes below this percentage of the samples.
    #[arg(long, value_name = "PCT", default_value_t = 1.0)]
    pub min_percent: f64,

    /// Text report: show who called the methods matching PATTERN
    /// (`pkg.Class::method`), with each caller path's share. Repeatable.
    #[arg(long = "back-trace", value_name = "PATTERN")]
    pub back_traces: Vec<String>,

    /// Frames kept per stack, from the leaf (at most 2048); deeper stacks
    /// hang under a `[truncated]` frame.
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub max_depth: u32,

    /// Report format. Collapsed, the flame graph and pprof weigh frames
    /// by samples of the view. `-o FILE.sprig` writes a snapshot instead
    /// (for `sprig report` and `sprig diff --overlap`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Redraw the hottest methods on the terminal every second while
    /// sampling, like `top` (stderr; ignored when stderr is not a
    /// terminal).
    #[arg(long)]
    pub live: bool,

    /// No progress line on stderr while sampling.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Give up attaching after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub attach_timeout: f64,

    /// Call-edge frequencies (Arnold and Grove's bursts): after
    /// `--edges-after` seconds of sampling, the non-JDK classes seen in
    /// the samples get dormant probes, and every `--edge-interval` the
    /// next `--edge-budget` method entries in them each record the edge
    /// from their caller; between the bursts, short counting windows count
    /// every entry into those classes where it runs (an increment in
    /// Java), for the calls per second. Before sampling, the probes' cost
    /// is measured in the JVM as `sprig calibrate` does. The report gains
    /// the edges with their estimated calls per second, and the suggested
    /// roots their predicted overhead (an estimate; unknown without
    /// `--edges`). The classes are put back at the end.
    #[arg(long)]
    pub edges: bool,

    /// With `--edges`: seconds of sampling before the classes get their
    /// probes (between 0.1 and 3600).
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub edges_after: f64,

    /// With `--edges`: milliseconds between two bursts (between 1 and
    /// 10000).
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub edge_interval: f64,

    /// With `--edges`: method entries sampled per burst (between 1 and
    /// 10000).
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub edge_budget: u32,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViewArg {
    Cpu,
    Wall,
}

impl SampleArgs {
    /// Checks every option; the first problem as one line.
    pub fn validate(&self) -> Result<()> {
        if !(self.interval.is_finite() && (1.0..=10_000.0).contains(&self.interval)) {
            bail!(
                "--interval must be between 1 and 10000 milliseconds, not {}",
                self.interval
            );
        }
        if let Some(d) = self.duration
            && !(d.is_finite() && d > 0.0 && d <= 31_536_000.0)
        {
            bail!("--duration must be a positive number of seconds (at most a year), not {d}");
        }
        if self.clock == ViewArg::Wall && self.source == Some(SourceArg::Timer) {
            bail!(
                "--source timer samples only threads on the CPU; the wall view (--clock wall) needs --source jvmti"
            );
        }
        if self.java_only && self.clock == ViewArg::Wall {
            bail!("--java-only selects from the CPU view; it needs --clock cpu");
        }
        if self.max_depth == 0 || self.max_depth > 2048 {
            bail!(
                "--max-depth must be between 1 and 2048 frames, not {}",
                self.max_depth
            );
        }
        if self.suggest_roots > 100 {
            bail!(
                "--suggest-roots must be at most 100, not {}",
                self.suggest_roots
            );
        }
        if !(self.min_percent.is_finite() && (0.0..=100.0).contains(&self.min_percent)) {
            bail!(
                "--min-percent must be between 0 and 100, not {}",
                self.min_percent
            );
        }
        for b in &self.back_traces {
            pattern::parse(b).map_err(|e| anyhow!("bad --back-trace pattern {b:?}: {e}"))?;
        }
        if let Some(path) = &self.output {
            crate::profile::args::check_writable(path)?;
        }
        if !(self.edges_after.is_finite() && (0.1..=3600.0).contains(&self.edges_after)) {
            bail!(
                "--edges-after must be between 0.1 and 3600 seconds, not {}",
                self.edges_after
            );
        }
        if !(self.edge_interval.is_finite() && (1.0..=10_000.0).contains(&self.edge_interval)) {
            bail!(
                "--edge-interval must be between 1 and 10000 milliseconds, not {}",
                self.edge_interval
            );
        }
        if !(1..=10_000).contains(&self.edge_budget) {
            bail!(
                "--edge-budget must be between 1 and 10000, not {}",
                self.edge_budget
            );
        }
        Ok(())
    }

    /// `--edge-interval` in µs.
    pub fn edge_interval_us(&self) -> u32 {
        (self.edge_interval * 1000.0).round() as u32
    }

    pub fn view(&self) -> View {
        match self.clock {
            ViewArg::Cpu => View::Cpu,
            ViewArg::Wall => View::Wall,
        }
    }

    /// The stack source asked of the agent: `--source`, or the timer for
    /// the CPU view and JVMTI for the wall view.
    pub fn stack_source(&self) -> StackSource {
        match (self.source, self.clock) {
            (Some(SourceArg::Jvmti), _) | (None, ViewArg::Wall) => StackSource::Jvmti,
            (Some(SourceArg::Timer), _) | (None, ViewArg::Cpu) => StackSource::Timer,
        }
    }

    /// `--interval` in µs.
    pub fn interval_us(&self) -> u32 {
        (self.interval * 1000.0).round() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SampleArgs,
    }

    fn check(line: &[&str]) -> Result<SampleArgs> {
        let mut argv = vec!["sprig", "4242"];
        argv.extend_from_slice(line);
        let cli = Cli::try_parse_from(argv).map_err(|e| anyhow!("{e}"))?;
        cli.args.validate()?;
        Ok(cli.args)
    }

    fn error(line: &[&str]) -> String {
        match check(line) {
            Ok(_) => panic!("{line:?} accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn defaults_are_sane() {
        let a = check(&[]).expect("defaults");
        assert_eq!(a.interval_us(), 20_000);
        assert_eq!(a.view(), View::Cpu);
        assert_eq!(a.suggest_roots, 3);
        assert_eq!(a.max_depth, 2048);
        assert_eq!(a.stack_source(), StackSource::Timer);
        let a = check(&["--interval", "1", "--clock", "wall", "--duration", "3"]).unwrap();
        assert_eq!((a.interval_us(), a.view()), (1000, View::Wall));
        assert_eq!(a.stack_source(), StackSource::Jvmti);
        let a = check(&["--source", "jvmti"]).unwrap();
        assert_eq!(a.stack_source(), StackSource::Jvmti);
        let a = check(&["--clock", "wall", "--source", "jvmti"]).unwrap();
        assert_eq!(a.stack_source(), StackSource::Jvmti);
    }

    #[test]
    fn bad_arguments_are_one_clear_line() {
        for (line, want) in [
            (
                &["--interval", "0"][..],
                "--interval must be between 1 and 10000 milliseconds, not 0",
            ),
            (
                &["--interval", "NaN"],
                "--interval must be between 1 and 10000 milliseconds, not NaN",
            ),
            (
                &["--interval", "100000"],
                "--interval must be between 1 and 10000 milliseconds",
            ),
            (
                &["--duration", "0"],
                "--duration must be a positive number of seconds",
            ),
            (
                &["--duration=-3"],
                "--duration must be a positive number of seconds",
            ),
            (
                &["--max-depth", "0"],
                "--max-depth must be between 1 and 2048",
            ),
            (
                &["--clock", "wall", "--source", "timer"],
                "--source timer samples only threads on the CPU",
            ),
            (
                &["--max-depth", "5000"],
                "--max-depth must be between 1 and 2048",
            ),
            (
                &["--clock", "wall", "--java-only"],
                "--java-only selects from the CPU view; it needs --clock cpu",
            ),
            (
                &["--suggest-roots", "1000"],
                "--suggest-roots must be at most 100",
            ),
            (
                &["--min-percent", "101"],
                "--min-percent must be between 0 and 100",
            ),
            (&["--back-trace", "no colons"], "bad --back-trace pattern"),
            (&["--clock", "tsc"], "invalid value 'tsc' for '--clock"),
        ] {
            let e = error(line);
            assert!(e.contains(want), "{line:?}: {e}");
            if !line.contains(&"--clock") {
                assert_eq!(e.lines().count(), 1, "{line:?}: {e}");
            }
        }
    }
}
