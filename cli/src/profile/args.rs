//! The command lines of `profile`, `run` and `calibrate` (clap), and their
//! validation: everything is checked here, before anything touches a JVM.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use sprig::pattern::excluded_by;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::control::{
    ClockKind, Scheme, SessionOptions, Silence, StackOptions, Timing, WindowOptions,
};

use crate::output::{Sections, ViewArgs};

/// Options shared by `profile` and `run`.
#[derive(Args, Debug, Clone)]
pub struct SessionArgs {
    /// Root method(s) whose call subgraph is profiled: `pkg.Class::method`,
    /// `pkg.Class::method(Ljava/lang/String;)V`, or `pkg.Class::*`. `*`
    /// matches within a package segment, `**` across segments; nested
    /// classes use `$`. Repeat for several roots. A root whose class is not
    /// loaded yet is instrumented when it loads.
    #[arg(long = "root", value_name = "PATTERN", required = true)]
    pub roots: Vec<String>,

    /// Stop after this many seconds of profiling (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,

    /// Reset the results this many seconds into profiling: the report then
    /// shows the calls made from that moment on (calls running at that
    /// moment count from it, marked incomplete). Leaves out the warm-up
    /// after attaching, while revelation redefines classes and the JIT
    /// recompiles the code that deoptimised. `kill -USR1 <sprig's pid>`
    /// resets at any moment, as often as wanted.
    #[arg(long, value_name = "SECS")]
    pub reset_after: Option<f64>,

    /// Write the report to FILE instead of stdout (`sprig run`: instead
    /// of stderr, since stdout is the application's).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub view: ViewArgs,

    #[command(flatten)]
    pub sections: Sections,

    /// Redraw the hottest paths on the terminal every second while
    /// profiling (stderr; ignored when stderr is not a terminal).
    #[arg(long)]
    pub live: bool,

    /// No progress line on stderr while profiling (elapsed time, root
    /// calls, events a second, methods instrumented and called). It is
    /// off anyway when stderr is not a terminal.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Also instrument classes matching this pattern (package or class
    /// glob, e.g. `com.sun.tools.javac.**`), even in the JDK's packages.
    #[arg(long, value_name = "PATTERN")]
    pub include: Vec<String>,

    /// Never instrument classes matching this pattern.
    #[arg(long, value_name = "PATTERN")]
    pub exclude: Vec<String>,

    /// How the root's callees are found: `lazy` instruments a method's
    /// callees when it first runs (JFluid's Scheme B, the default); `eager`
    /// instruments the whole reachable graph at once (Scheme A).
    #[arg(long, value_enum, default_value_t = SchemeArg::Lazy)]
    pub scheme: SchemeArg,

    /// How the lazy scheme finds what profiled methods call. `hierarchy`
    /// (JFluid's way, the default): at a method's first call, every method
    /// its call sites can reach: for a virtual or interface call, every
    /// override in the loaded subclasses and implementors, and those of
    /// classes loaded later; with dormant probes (the default) those that
    /// hold them already are switched on only when a root context enters
    /// them (1.00-1.005 instrumented per called method on the benchmark
    /// roots; 1.42-2.07 with `--no-dormant`). `receiver`: a check before
    /// each call of a profiled method into profiled code instruments the
    /// target just before it first runs, the method the receiver's class
    /// selects for a virtual call (javac: 1.07 instrumented per called
    /// method, a Jetty servlet 1.09, and no call seen with `hierarchy` is
    /// missed).
    /// The check (a class test where the receiver's class chooses among
    /// methods, else a flag) sits at every such call of the instrumented
    /// classes, outside the root too: on a server, code around the root
    /// runs slower than with `hierarchy` (Jetty: about 30 points more
    /// overhead). A call site that sees more than 8 receiver classes, or
    /// receivers of a few classes taking turns (a visitor's `accept`), is
    /// watched no more: the methods it can reach get probes that stay
    /// silent until a root first runs them (with `--no-dormant`, that
    /// site falls back to `hierarchy`). Calls on JDK types (except `toString`, `hashCode`
    /// and `equals`, which `hierarchy` would take to every loaded class)
    /// keep `hierarchy`.
    #[arg(long, value_enum, default_value_t = VirtualArg::Hierarchy, value_name = "HOW")]
    pub virtual_calls: VirtualArg,

    /// Which clock times calls: `wall` (TSC when invariant, ~10 ns to read)
    /// or `cpu` (thread CPU time: excludes time blocked, but every read is a
    /// system call of several hundred ns, so overhead is far higher; with
    /// `--timing sampled` only root calls read it, and each sample weighs
    /// the thread's CPU time since its last one, read by sprig from
    /// /proc).
    #[arg(long, value_enum, default_value_t = ClockArg::Wall)]
    pub clock: ClockArg,

    /// How time is measured. `sampled` (the default): the probes inside a
    /// root context read no clock and, on JDK 17+, record in Java without a
    /// native call (a probe pair costs 0.2-0.35 of one System.nanoTime(),
    /// 4-8 ns on the benchmark hosts); the tree's shape and every call count
    /// are exact, and so is each root call's latency (min, p50, p90, p99,
    /// max per root), while the time inside comes from sampling where each
    /// profiled thread is in its event stream every --interval, done by
    /// sprig, not in the JVM; each node shows the samples behind its time
    /// and a 95% bound. `exact`: every call inside a root context reads the
    /// clock at its entry and exit and the probes' calibrated cost is
    /// subtracted: per-call times with no sampling error, at two clock
    /// reads a call (a pair costs ~2.5 nanoTime()s on JDK 17, ~1.8 on JDK
    /// 25), which puts a floor under the overhead of call-dense code and
    /// blurs methods of a few ns. Use `exact` for sessions too short to
    /// gather samples (a few hundred) or when every method's time must be
    /// measured rather than estimated. `windows`: the probes count in
    /// counting windows and are silent in the others (--windows), where
    /// the program runs at about its own speed (a probe inside a silent
    /// root call costs a load and a branch): the roots' own probes time
    /// each silent root call, and the agent's stack sampler shares that
    /// time out over the tree, each sample credited to the path its stack
    /// falls on (JDK frames folded into their caller unless --include
    /// names them); a root call is counted or silent as a whole. Calls are
    /// exact per counted root call; times are those of the program without
    /// probes (see --source for the sampler's); root latencies come from
    /// the silent root calls.
    #[arg(long, value_enum, default_value_t = TimingArg::Sampled, value_name = "HOW")]
    pub timing: TimingArg,

    /// With `--timing windows`: where the stack samples come from. `timer`
    /// (the default): a CPU-time timer per thread whose signal handler
    /// walks the thread where it runs (AsyncGetCallTrace: no safepoint, no
    /// safepoint bias, a few µs a sample on the sampled thread), and keeps
    /// only samples of threads inside a silent root call. Its samples are
    /// of CPU time: a silent root call's time spent blocked, waiting or
    /// sleeping gets none, so its measured time (--clock) is shared over
    /// the code that ran; with `--clock cpu` the roots' silent calls are
    /// timed in CPU time too and every time in the tree is CPU time.
    /// `jvmti`: every thread, whatever its state, at a safepoint each
    /// round (safepoint-biased: time in code without a safepoint poll
    /// lands on the nearest poll), for roots whose wall time blocks. Where
    /// the timer cannot run (no AsyncGetCallTrace, or another profiler
    /// holds SIGPROF) sprig says so in one line and uses `jvmti`.
    #[arg(long, value_enum, value_name = "FROM")]
    pub source: Option<SourceArg>,

    /// With `--timing sampled`: milliseconds between two samples, jittered
    /// by up to half either way so that it cannot lock onto a periodic
    /// workload. Each sample costs the JVM nothing; sprig reads the ring's
    /// segment headers (a few µs a sample). With `--timing windows`:
    /// milliseconds between two stack samples (default 5): of each
    /// thread's CPU time with `--source timer`, a round over every thread
    /// in silent windows with `--source jvmti` (each round stops the JVM's
    /// threads at a safepoint).
    #[arg(long, value_name = "MS")]
    pub interval: Option<f64>,

    /// With `--timing windows`: milliseconds of each counting window and of
    /// each silent window, `COUNT,SILENT` (each 1 to 600000), and
    /// optionally `,CALLS`: a counting window counts exactly CALLS root
    /// calls (the root entries after them in it are silent) and ends once
    /// they were entered (checked every --interval), for code whose
    /// counted root calls cost many times their bare time, or whose root
    /// calls repeat a cycle of CALLS different calls (a counting window of
    /// one cycle counts each once). The session starts with a counting
    /// window. Default: 50,950 with `--windows-silence dormant`,
    /// 1000,20000 with `original` (each switch costs a recompilation of
    /// the session's classes, paid once every 21 s rather than every
    /// second).
    #[arg(long, value_name = "COUNT,SILENT[,CALLS]")]
    pub windows: Option<String>,

    /// With `--timing windows`: what silences the probes in a silent
    /// window. `dormant` (the default): the probes stay in the bytecode and
    /// take their dormant path, a load and a branch a call (no switch
    /// costs anything, but the JIT compiles around that bytecode: in code
    /// of a few ns a call the silent root calls run slower than without
    /// sprig). `original`: the session's instrumented classes, but the
    /// roots' own, are put back to their original bytes for each silent
    /// window and instrumented again when the next counting window opens,
    /// so the silent root calls run the program's own code; each switch
    /// redefines those classes (90-135 ms a switch for Lucene's 45 classes
    /// on a loaded 2-core host) and the JIT compiles their methods again,
    /// so its silent windows are far longer than the counting ones
    /// (--windows defaults to 1000,20000 with it).
    #[arg(long, value_enum, default_value_t = SilenceArg::Dormant, value_name = "HOW")]
    pub windows_silence: SilenceArg,

    /// With `--timing windows`: the first MS milliseconds of each silent
    /// window take no stack sample (the root calls entered then are timed,
    /// not sampled), while the JIT compiles again what the switch
    /// deoptimised. Shorter than the silent window.
    #[arg(long, value_name = "MS", default_value_t = SETTLE_MS_DEFAULT)]
    pub windows_settle: u32,

    /// Count allocations, exactly, inside root contexts: every `new`,
    /// `newarray`, `anewarray` and `multianewarray` of the profiled
    /// methods, and every copy their `clone()` calls make (an array's, an
    /// instance's `super.clone()` from a class whose superclass is
    /// `Object`), records the objects it made, by class, in the calling
    /// context that made them, with the bytes the JVM's GetObjectSize
    /// gives (compact object headers included). Allocations in code sprig
    /// does not instrument (the JDK's own, unless `--include`d) are not
    /// counted. Works with either timing mode. The text report adds
    /// allocation columns and a hot-spot table by site and class, the JSON
    /// report a per-node `allocations` list; `--weight bytes` or `objects`
    /// weighs the collapsed and flame graph outputs by them.
    /// `--alloc=live` also follows the sampled objects (JVMTI tags): after
    /// each garbage collection and at the end it reports the live bytes
    /// per allocation context and class, estimated from the samples the
    /// JVM has not freed (a `live objects` table, JSON `live`), so a leak
    /// shows as the context whose live bytes grow.
    #[arg(
        long,
        value_name = "live",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "exact"
    )]
    pub alloc: Option<AllocArg>,

    /// Sample allocations with the JVM's heap sampler (JVMTI
    /// SampledObjectAlloc): about one sample every BYTES bytes a thread
    /// allocates, the JDK's code below the profiled methods included. A
    /// sample inside a root context goes to the calling context that was
    /// open (`~sampled bytes` in the text report, `sampled_allocations` in
    /// the JSON report: estimates, each sample standing for the bytes its
    /// size and the interval give); the others are counted apart. Default
    /// with `--alloc`: 524288 (512 KiB); alone it samples without the
    /// exact probes; 0 turns sampling off. When another JVMTI agent holds
    /// the JVM's one sampler, sprig says so and counts exact allocations
    /// only.
    #[arg(long, value_name = "BYTES", value_parser = parse_alloc_interval)]
    pub alloc_interval: Option<u32>,

    /// Instrument only the roots, not their callees.
    #[arg(long)]
    pub roots_only: bool,

    /// By default, at the start every class holding a method the root can
    /// reach (through every override of a virtual call, up to 2,000
    /// classes) gets probes in all its methods, dormant: they record
    /// nothing until revelation reaches them (with class hierarchy
    /// analysis: until a root context enters them), which then switches
    /// them on without a redefinition (javac `Gen::genClass`: 10
    /// redefinitions instead of 108, and only the methods that run
    /// instrumented); a class redefined later for some of its methods gets
    /// probes in all of them too.
    /// A dormant method that runs inside a root context anyway (a JDK
    /// callback no rule foresees, such as a sort calling `compareTo` on
    /// objects made before the root ran) is revealed there and recorded
    /// from that call on (`entered` in the revelation counts).
    /// Redefinitions pause the JVM (tens of ms each on a big application);
    /// a dormant probe costs a load and a test in Java per call, and makes
    /// the method's bytecode a little larger.
    /// This flag redefines a class for every revelation instead, one link
    /// of the call chain at a time, and misses such calls (`--scheme
    /// eager` never uses dormant probes).
    #[arg(long)]
    pub no_dormant: bool,

    /// Which trivial methods get no probes (on by default, 16 bytes):
    /// getters, setters, constants, empty methods, any method of at most
    /// BYTES bytes of bytecode that calls nothing, allocates nothing,
    /// throws nothing and has no loop. Their time counts in their callers'
    /// self time and they get no node of their own; every other method
    /// keeps its node and exact counts. Such methods are a quarter to two
    /// fifths of the calls of compilers, parsers and collections-heavy
    /// code, and the JIT inlines them everywhere: a probe in each costs
    /// far more than its own run time, as it makes its callers too large to
    /// inline (Jetty's server root at its plateau: +5-10% over bare with
    /// them left out, +20-46% with them in). `--skip-trivial=6` keeps to
    /// getters, setters and constants (+5-12% there); `--keep-trivial`
    /// instruments them all. Roots are always profiled.
    // `Some(None)`: the option given without a bound.
    #[arg(
        long,
        value_name = "BYTES",
        num_args = 0..=1,
        require_equals = true,
        value_parser = clap::value_parser!(u32)
            .range(1..=i64::from(sprig_rewriter::TRIVIAL_BYTES_MAX))
    )]
    pub skip_trivial: Option<Option<u32>>,

    /// Instrument trivial methods too (see --skip-trivial): every method
    /// the roots reach gets a node and exact call counts, getters and
    /// setters included, at a much higher cost in code that calls them
    /// often.
    #[arg(long, conflicts_with = "skip_trivial")]
    pub keep_trivial: bool,

    /// With `--timing exact`: skip the probe calibration at attach (about
    /// 0.2 s). Times then include the probes' own cost, which dominates
    /// short methods; see `sprig calibrate`. Sampled timing never
    /// calibrates.
    #[arg(long)]
    pub no_calibrate: bool,

    /// Show where the roots' threads wait: each contended monitor enter
    /// (`synchronized`) and each `Object.wait` inside a root call becomes
    /// a row of its own under the method that waited, `(blocked on
    /// pkg.Class)` or `(waiting on pkg.Class)`, named by the monitor's
    /// class, so that the method's self time is its own work.
    #[arg(long)]
    pub locks: bool,

    /// Measure the probes again on each profiled thread, at most every MS
    /// milliseconds: as a thread leaves a root (or, in a root call running
    /// longer than MS, at a method exit inside it) it runs 32 probed calls
    /// of an empty method (1-2 µs), and its calls are charged the probe cost
    /// measured there (the median of its latest three bursts; its calls
    /// before its first burst, that burst's). On shared hosts, and right
    /// after a thread wakes up, the probes can cost twice what the
    /// calibration at attach measured in a hot loop. The bursts are left out
    /// of the tree and of the root's time; the report's `in session` line
    /// sums them up. 0: charge the attach-time calibration throughout.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub recalibrate_every: u32,

    /// Longest a JVM thread waits for room in the event ring before it
    /// gives up and profiling switches off (milliseconds).
    #[arg(long, value_name = "MS", default_value_t = 2000, hide = true)]
    pub wait_bound_ms: u32,

    /// Size of the shared event ring in MiB (anonymous shared memory,
    /// all of it taken when the session starts; a thread waits, and the
    /// wait is taken out of its times, when the ring is full).
    #[arg(long, value_name = "MIB", default_value_t = 32)]
    pub ring_mib: u32,
}

#[derive(Args, Debug)]
pub struct ProfileArgs {
    /// PID of the JVM to profile (see `sprig list`).
    pub pid: u32,

    #[command(flatten)]
    pub session: SessionArgs,

    /// Give up attaching after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub attach_timeout: f64,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub session: SessionArgs,

    /// The java command line: `java [jvm options] MainClass|-jar app.jar [args]`.
    #[arg(last = true, required = true, value_name = "JAVA COMMAND")]
    pub command: Vec<String>,
}

/// What `--alloc` follows: exact allocations (with allocation samples),
/// and with `live` the sampled objects until they are freed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum AllocArg {
    Exact,
    Live,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchemeArg {
    Lazy,
    Eager,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum VirtualArg {
    Hierarchy,
    Receiver,
}

/// `--windows-settle`'s default: milliseconds at the start of each silent
/// window with no stack sample.
pub const SETTLE_MS_DEFAULT: u32 = 0;

/// `--windows`' default with dormant silence: no switch costs anything,
/// so the windows are short and many.
const WINDOWS_DORMANT_DEFAULT: &str = "50,950";
/// `--windows`' default with original-bytes silence: each switch
/// redefines the session's classes and the JIT compiles them again, so a
/// silent window is long (on H2, Lucene and Jetty the settled silent
/// windows ran at bare speed, BENCHMARKS.md).
const WINDOWS_ORIGINAL_DEFAULT: &str = "1000,20000";

/// What silences the probes in a silent window (`--windows-silence`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum SilenceArg {
    Dormant,
    Original,
}

/// Where stack samples come from (`--source`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum SourceArg {
    Timer,
    Jvmti,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum TimingArg {
    Exact,
    Sampled,
    Windows,
}

/// The silent tail at the end of a session, in ms (`SessionOptions::
/// cost_tail_ms`; the agent's warm-up of 100 ms included): the root calls
/// it times (at most `sprig_wire::control::COST_TAIL_CALLS`) give the
/// root's latency with the probes silent, the measured side of the
/// report's `cost` line.
pub const COST_TAIL_MS: u32 = 300;

/// Frames the stack sampler keeps under windows timing (its most): a
/// sample whose root frame lies deeper is not credited.
pub const WINDOWS_STACK_DEPTH: u32 = 2048;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    Wall,
    Cpu,
}

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// PID of the JVM (see `sprig list`).
    pub pid: u32,

    /// The clock to calibrate, as for `sprig profile --clock`.
    #[arg(long, value_enum, default_value_t = ClockArg::Wall)]
    pub clock: ClockArg,

    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Give up attaching after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub attach_timeout: f64,
}

impl CalibrateArgs {
    /// The clock `--clock` names.
    pub fn clock_kind(&self) -> ClockKind {
        clock_kind(self.clock)
    }
}

/// The clock the probes read for `--clock`.
fn clock_kind(clock: ClockArg) -> ClockKind {
    match clock {
        ClockArg::Wall => ClockKind::Tsc,
        ClockArg::Cpu => ClockKind::ThreadCpu,
    }
}

/// Checks `--attach-timeout` and returns it.
pub fn attach_timeout(secs: f64) -> Result<std::time::Duration> {
    if !(secs.is_finite() && secs > 0.0) {
        bail!("--attach-timeout must be a positive number of seconds");
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

impl SessionArgs {
    /// Validates every pattern and option before anything touches the JVM.
    pub fn validate(&self) -> Result<()> {
        for r in &self.roots {
            MethodPattern::parse(r).map_err(|e| anyhow!("bad --root pattern {r:?}: {e}"))?;
        }
        for p in self.include.iter().chain(&self.exclude) {
            if p.trim().is_empty() || p.contains(char::is_whitespace) {
                bail!(
                    "bad --include/--exclude pattern {p:?}: expected a package or class glob like com.acme.**"
                );
            }
        }
        if let Some(d) = self.duration
            && !(d.is_finite() && d > 0.0)
        {
            bail!("--duration must be a positive number of seconds, not {d}");
        }
        if let Some(r) = self.reset_after {
            if !(r.is_finite() && r > 0.0) {
                bail!("--reset-after must be a positive number of seconds, not {r}");
            }
            if let Some(d) = self.duration
                && r >= d
            {
                bail!("--reset-after {r} is not before --duration {d}: the report would be empty");
            }
        }
        for r in &self.roots {
            if let Some(p) = self.excluding(r) {
                bail!("--root {r} is excluded by --exclude {p}: nothing would be profiled");
            }
        }
        self.view.validate()?;
        let interval = self.interval_ms();
        if !(interval.is_finite() && (0.1..=1000.0).contains(&interval)) {
            bail!("--interval must be between 0.1 and 1000 milliseconds, not {interval}");
        }
        self.window_options()?;
        if self.source.is_some() && self.timing != TimingArg::Windows {
            bail!("--source applies to --timing windows only");
        }
        if self.ring_mib == 0 || self.ring_mib > 4096 {
            bail!("--ring-mib must be between 1 and 4096");
        }
        if self.alloc == Some(AllocArg::Live) && self.alloc_interval == Some(0) {
            bail!("--alloc=live follows allocation samples: --alloc-interval 0 turns them off");
        }
        if let Some(path) = &self.output {
            check_writable(path)?;
        }
        Ok(())
    }

    /// The `--exclude` pattern that leaves out the one class root `r`
    /// names, if one does (a class pattern covers its nested classes).
    fn excluding(&self, r: &str) -> Option<&str> {
        let class = MethodPattern::parse(r).ok()?.exact_class()?;
        excluded_by(&class, &self.exclude)
    }

    /// `--interval`, or its default for the timing mode.
    pub fn interval_ms(&self) -> f64 {
        self.interval.unwrap_or(match self.timing {
            TimingArg::Windows => 5.0,
            _ => 1.0,
        })
    }

    /// The stack source windows timing asks for: `--source`, the timer
    /// unless told.
    pub fn stack_source(&self) -> sprig_wire::control::StackSource {
        match self.source {
            Some(SourceArg::Jvmti) => sprig_wire::control::StackSource::Jvmti,
            Some(SourceArg::Timer) | None => sprig_wire::control::StackSource::Timer,
        }
    }

    /// `--windows` and `--windows-settle` as the agent takes them.
    pub fn window_options(&self) -> Result<WindowOptions> {
        let windows = self
            .windows
            .as_deref()
            .unwrap_or(match self.windows_silence {
                SilenceArg::Dormant => WINDOWS_DORMANT_DEFAULT,
                SilenceArg::Original => WINDOWS_ORIGINAL_DEFAULT,
            });
        let bad = || {
            anyhow!(
                "--windows must be COUNT,SILENT in milliseconds (each 1 to 600000), then \
                 optionally ,CALLS, not {windows:?}"
            )
        };
        let (c, rest) = windows.split_once(',').ok_or_else(bad)?;
        let (s, calls) = match rest.split_once(',') {
            Some((s, n)) => (s, n.trim().parse::<u32>().map_err(|_| bad())?),
            None => (rest, 0),
        };
        let ms = |v: &str| -> Result<u32> {
            match v.trim().parse::<u32>() {
                Ok(n) if (1..=600_000).contains(&n) => Ok(n),
                _ => Err(bad()),
            }
        };
        let silent_ms = ms(s)?;
        if self.windows_settle >= silent_ms {
            bail!(
                "--windows-settle must be shorter than the silent window ({silent_ms} ms), not {}",
                self.windows_settle
            );
        }
        Ok(WindowOptions {
            counting_ms: ms(c)?,
            silent_ms,
            counting_calls: calls,
            settle_ms: self.windows_settle,
            silence: match self.windows_silence {
                SilenceArg::Dormant => Silence::Dormant,
                SilenceArg::Original => Silence::Original,
            },
        })
    }

    /// The clock the probes read for `--clock`.
    pub fn clock_kind(&self) -> ClockKind {
        clock_kind(self.clock)
    }

    pub fn session_options(&self) -> SessionOptions {
        SessionOptions {
            roots: self.roots.clone(),
            include: self.include.clone(),
            exclude: self.exclude.clone(),
            scheme: match self.scheme {
                SchemeArg::Lazy => Scheme::Lazy,
                SchemeArg::Eager => Scheme::Eager,
            },
            clock: self.clock_kind(),
            roots_only: self.roots_only,
            // Sampled timing subtracts no probe cost: nothing to calibrate.
            calibrate: !self.no_calibrate && self.timing == TimingArg::Exact,
            wait_bound_ms: self.wait_bound_ms,
            no_dormant: self.no_dormant,
            skip_trivial: if self.keep_trivial {
                0
            } else {
                self.skip_trivial
                    .flatten()
                    .unwrap_or(sprig_rewriter::TRIVIAL_BYTES_DEFAULT)
            },
            receivers: self.virtual_calls == VirtualArg::Receiver,
            // The agent runs bursts only after its calibration at attach.
            recalibrate_ms: match self.timing {
                TimingArg::Exact => self.recalibrate_every,
                TimingArg::Sampled | TimingArg::Windows => 0,
            },
            timing: match self.timing {
                TimingArg::Exact => Timing::Exact,
                // windows timing counts as sampled timing does
                TimingArg::Sampled | TimingArg::Windows => Timing::Sampled,
            },
            stacks: (self.timing == TimingArg::Windows).then(|| StackOptions {
                interval_us: (self.interval_ms() * 1000.0).round() as u32,
                max_depth: WINDOWS_STACK_DEPTH,
                // the stack source keeps the windows' schedule
                source: self.stack_source(),
            }),
            windows: match self.timing {
                TimingArg::Windows => self.window_options().ok(),
                _ => None,
            },
            threads: None,
            locks: self.locks,
            alloc: self.alloc.is_some(),
            alloc_interval: match self.alloc_interval {
                Some(n) => n,
                None if self.alloc.is_some() => DEFAULT_ALLOC_INTERVAL,
                None => 0,
            },
            alloc_live: self.alloc == Some(AllocArg::Live),
            // windows timing's silent windows already time root calls
            cost_tail_ms: match self.timing {
                TimingArg::Windows => 0,
                TimingArg::Exact | TimingArg::Sampled => COST_TAIL_MS,
            },
        }
    }
}

/// The mean bytes between two allocation samples with `--alloc` and no
/// `--alloc-interval`.
pub const DEFAULT_ALLOC_INTERVAL: u32 = 512 * 1024;

/// `--alloc-interval`: bytes, 0 to 2^31 - 1 (JVMTI takes a `jint`).
fn parse_alloc_interval(s: &str) -> std::result::Result<u32, String> {
    match s.parse::<u64>() {
        Ok(n) if n <= i32::MAX as u64 => Ok(n as u32),
        Ok(_) => Err(format!("at most {} bytes", i32::MAX)),
        Err(_) => Err("a number of bytes (0 turns sampling off)".into()),
    }
}

/// Fails unless `path` can be written, so that a profile is never lost for
/// want of a place to put it: an existing file is opened for writing (and
/// left as it is), a new one is created and removed again; a pipe or a
/// device is left for the end.
pub(crate) fn check_writable(path: &std::path::Path) -> Result<()> {
    let context = || format!("cannot write {}", path.display());
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(anyhow!("it is a directory")).with_context(context),
        // A pipe or a device: opening it now could block, or end the
        // reader's input before the report is written.
        Ok(m) if !m.is_file() => return Ok(()),
        _ => {}
    }
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(context)?;
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) => Err(e).with_context(context),
    }
}

#[cfg(test)]
mod tests;
