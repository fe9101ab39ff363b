//! `sprig profile` and `sprig run`: set up a private session, get the agent
//! into the JVM (attach or -agentpath), drive the session, build the CCT,
//! write the report.

use std::io::{IsTerminal, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use sprig::{attach, jvm};
use sprig_callgraph::pattern::MethodPattern;
use sprig_callgraph::report::escape::escape;
use sprig_callgraph::report::live::Live;
use sprig_callgraph::{CctBuilder, Profile, Render, RenderOptions};
use sprig_wire::control::{AgentStats, ClockKind, Scheme, SessionOptions};
use sprig_wire::ring::{Consumer, Region, RingConfig};
use sprig_wire::session::{Channel, Listener, PeerExpectation, SessionDir, SessionError};
use sprig_wire::{Message, clock};

use crate::output::{self, ViewArgs};
use crate::signals;

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

    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub view: ViewArgs,

    /// Redraw the hottest paths on the terminal every second while
    /// profiling (stderr; ignored when stderr is not a terminal).
    #[arg(long)]
    pub live: bool,

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
    /// system call of several hundred ns, so overhead is far higher).
    #[arg(long, value_enum, default_value_t = ClockArg::Wall)]
    pub clock: ClockArg,

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

    /// Leave out trivial methods: getters, setters, constants, empty
    /// methods, any method of at most BYTES bytes of bytecode (default 16)
    /// that calls nothing, allocates nothing, throws nothing and has no
    /// loop. Their time then counts in their callers' self time and they
    /// get no node of their own. On code that calls many such methods
    /// (compilers, parsers, collections-heavy code) this leaves out a
    /// quarter to two fifths of the probed calls, and their probes' cost;
    /// the tree keeps every method that calls further.
    /// Roots are always profiled. `--skip-trivial=6` keeps to getters,
    /// setters and constants.
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

    /// Skip the probe calibration at attach (about 0.2 s). Times then
    /// include the probes' own cost, which dominates short methods; see
    /// `sprig calibrate`.
    #[arg(long)]
    pub no_calibrate: bool,

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

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    Wall,
    Cpu,
}

/// How long to wait for the agent to answer a detach before giving up
/// (the agent then detaches by itself when the socket closes).
const DETACH_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between ring polls while the consumer keeps up. Each poll frees
/// the segments it read, and a producer that took one of those at once
/// wrote into lines still in this process's cache (BENCHMARKS.md, "Ninth
/// session"): polling less often was the first cure found (a 2 ms pause
/// left the probe pair ~3 ns dearer than 10 or 20 ms, and 12-28 ns dearer
/// for a whole session in 13 sessions of 96). Producers now take the
/// oldest free segment instead, which cures it at 2 ms too; the longer
/// pause stays because it costs nothing: at the probes' fastest one
/// thread writes about 12 MiB of ring in 10 ms, and the pause shortens
/// when the ring would fill faster.
const POLL_PAUSE: Duration = Duration::from_millis(10);
/// The pause is shortened so that, at the rate the last poll saw, the
/// producers fill at most this share of the ring (1/4) before the next
/// poll: many busy threads would otherwise fill it and wait.
const FILL_SHARE_PER_PAUSE: f64 = 0.25;
/// Shortest pause: below it the consumer polls again at once.
const MIN_POLL_PAUSE: Duration = Duration::from_millis(1);

/// How long the consumer waits before its next poll, after a poll that
/// delivered `n` events `since` the one before, on a ring of
/// `ring_events` slots; `None` when it is behind and must poll at once
/// (the poll delivered an eighth of the ring or more, or the producers
/// would fill a quarter of it within [`MIN_POLL_PAUSE`]).
fn next_pause(n: usize, since: Duration, ring_events: usize) -> Option<Duration> {
    if n >= ring_events.div_ceil(8) {
        return None;
    }
    if n == 0 || since.is_zero() {
        return Some(POLL_PAUSE);
    }
    let rate = n as f64 / since.as_secs_f64();
    let fill = Duration::from_secs_f64(ring_events as f64 * FILL_SHARE_PER_PAUSE / rate);
    let pause = fill.min(POLL_PAUSE);
    (pause >= MIN_POLL_PAUSE).then_some(pause)
}

impl SessionArgs {
    /// Validates every pattern and option before anything touches the JVM.
    fn validate(&self) -> Result<()> {
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
        if self.ring_mib == 0 || self.ring_mib > 4096 {
            bail!("--ring-mib must be between 1 and 4096");
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
        let outer = class.split('$').next().unwrap_or(&class);
        self.exclude.iter().map(String::as_str).find(|p| {
            MethodPattern::parse(&format!("{}::*", p.trim()))
                .is_ok_and(|g| g.matches_class(&class) || g.matches_class(outer))
        })
    }

    /// The clock the probes read for `--clock`.
    fn clock_kind(&self) -> ClockKind {
        match self.clock {
            ClockArg::Wall => ClockKind::Tsc,
            ClockArg::Cpu => ClockKind::ThreadCpu,
        }
    }

    fn session_options(&self) -> SessionOptions {
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
            calibrate: !self.no_calibrate,
            wait_bound_ms: self.wait_bound_ms,
            no_dormant: self.no_dormant,
            skip_trivial: self
                .skip_trivial
                .map_or(0, |b| b.unwrap_or(sprig_rewriter::TRIVIAL_BYTES_DEFAULT)),
            receivers: self.virtual_calls == VirtualArg::Receiver,
            // The agent runs bursts only after its calibration at attach.
            recalibrate_ms: self.recalibrate_every,
        }
    }
}

/// Fails unless `path` can be written, so that a profile is never lost for
/// want of a place to put it: an existing file is opened for writing (and
/// left as it is), a new one is created and removed again.
fn check_writable(path: &std::path::Path) -> Result<()> {
    let context = || format!("cannot write {}", path.display());
    if path.is_dir() {
        return Err(anyhow!("it is a directory")).with_context(context);
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

/// Everything created for one session on the CLI side. Dropping it removes
/// the private directory and the socket; the ring (a memfd) goes with the
/// last reference to its mapping.
struct Prepared {
    dir: SessionDir,
    region: Arc<Region>,
    /// The ring's sealed memfd, handed to the agent with `Start`.
    ring_fd: OwnedFd,
    listener: Listener,
}

fn prepare(args: &SessionArgs, owner: Option<(u32, u32)>) -> Result<Prepared> {
    prepare_with(args.clock_kind(), args.ring_mib, owner)
}

fn prepare_with(
    clock_kind: ClockKind,
    ring_mib: u32,
    owner: Option<(u32, u32)>,
) -> Result<Prepared> {
    let dir = match owner {
        Some((uid, gid)) => SessionDir::create_for_owner(uid, gid),
        None => SessionDir::create_in(&std::env::temp_dir()),
    }
    .context("cannot create the private session directory")?;
    let (clock_kind, ticks_per_sec) = clock::choose(clock_kind);
    let cfg = ring_config(ring_mib, clock_kind, ticks_per_sec)?;
    // Anonymous shared memory, handed over the control socket: nothing on
    // a disk, nothing another user could open or truncate.
    let (region, ring_fd) = Region::create_memfd(&cfg).context("cannot create the event ring")?;
    let listener = Listener::bind(&dir).context("cannot create the control socket")?;
    Ok(Prepared {
        dir,
        region,
        ring_fd,
        listener,
    })
}

/// The ring of `ring_mib` MiB in 64 KiB segments. The size is computed in
/// 64 bits (4096 MiB, the largest `--ring-mib`, is 2^32 bytes) and checked
/// against the ring's limits.
fn ring_config(ring_mib: u32, clock: ClockKind, ticks_per_sec: u64) -> Result<RingConfig> {
    const SEGMENT_BYTES: u32 = 64 * 1024;
    let bytes = u64::from(ring_mib) * 1024 * 1024;
    let segments = u32::try_from(bytes / u64::from(SEGMENT_BYTES))
        .ok()
        .filter(|&n| {
            n <= sprig_wire::ring::MAX_SEGMENTS && bytes <= sprig_wire::ring::MAX_REGION_BYTES
        })
        .ok_or_else(|| anyhow!("--ring-mib {ring_mib} is larger than the event ring allows"))?;
    Ok(RingConfig {
        segment_bytes: SEGMENT_BYTES,
        segments,
        clock,
        ticks_per_sec,
    })
}

/// `sprig profile <pid>`.
pub fn profile(args: ProfileArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    if !(args.attach_timeout.is_finite() && args.attach_timeout > 0.0) {
        bail!("--attach-timeout must be a positive number of seconds");
    }
    let timeout = Duration::from_secs_f64(args.attach_timeout);
    let (prepared, channel, jvm_line) = attach_to(
        args.pid,
        args.session.clock_kind(),
        args.session.ring_mib,
        timeout,
    )?;
    drive(&args.session, &prepared, channel, args.pid, jvm_line, None)
}

/// Loads the agent into JVM `pid` and waits for it to connect back: the
/// session's files, the control channel and the JVM's name and version.
fn attach_to(
    pid: u32,
    clock_kind: ClockKind,
    ring_mib: u32,
    timeout: Duration,
) -> Result<(Prepared, Channel, String)> {
    let target = jvm::inspect(pid)?;
    let agent = attach::agent_library_path()?;
    let me = sprig_wire::session::euid();
    let owner = (me == 0 && target.uid != 0).then_some((target.uid, target.gid));
    let prepared = prepare_with(clock_kind, ring_mib, owner)?;
    let options = prepared.dir.agent_options(std::process::id());
    let started = Instant::now();
    attach::load_agent(&target, &agent, &options.format(), timeout)?;
    let expect = PeerExpectation {
        pid: Some(pid),
        uid: target.uid,
        token: prepared.dir.token(),
    };
    let left = timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(2));
    let (channel, jvm_info) = prepared
        .listener
        .accept(&expect, left)
        .map_err(|e| match e {
            SessionError::Timeout(_) => {
                anyhow!("the agent loaded into JVM {pid} but never connected back within {left:?}")
            }
            other => anyhow!(other).context("the agent's connection was refused"),
        })?;
    let jvm_line = format!("{} {}", jvm_info.vm_name, jvm_info.version);
    Ok((prepared, channel, jvm_line))
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

/// `sprig calibrate <pid>`: attaches, measures the probes' cost inside the
/// JVM exactly as `profile` does at the start of a session, prints it,
/// detaches. Nothing is instrumented but sprig's own calibration class.
pub fn calibrate(args: CalibrateArgs) -> Result<ExitCode> {
    if !(args.attach_timeout.is_finite() && args.attach_timeout > 0.0) {
        bail!("--attach-timeout must be a positive number of seconds");
    }
    let clock_kind = match args.clock {
        ClockArg::Wall => ClockKind::Tsc,
        ClockArg::Cpu => ClockKind::ThreadCpu,
    };
    let timeout = Duration::from_secs_f64(args.attach_timeout);
    let (prepared, channel, jvm_line) = attach_to(args.pid, clock_kind, 1, timeout)?;
    let writer = channel
        .try_clone()
        .context("cannot duplicate the control socket")?;
    writer.send_with_fd(
        &Message::Start(SessionOptions {
            roots: Vec::new(),
            include: Vec::new(),
            exclude: Vec::new(),
            scheme: Scheme::Lazy,
            clock: clock_kind,
            roots_only: true,
            calibrate: true,
            wait_bound_ms: 2000,
            no_dormant: false,
            skip_trivial: 0,
            receivers: false,
            recalibrate_ms: 0,
        }),
        prepared.ring_fd.as_fd(),
    )?;
    let messages = spawn_reader(channel);
    let mut clock_used = prepared.region.clock();
    let mut ticks_per_sec = prepared.region.ticks_per_sec();
    let mut figures: Option<(f64, f64, u32)> = None;
    let mut problems: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "the agent in JVM {} did not finish calibrating within 30 s",
                args.pid
            );
        }
        match messages.recv_timeout(left) {
            Ok(Ok(Message::Started {
                clock,
                ticks_per_sec: t,
            })) => {
                clock_used = clock;
                ticks_per_sec = t;
            }
            Ok(Ok(Message::Calibration {
                inner_ticks,
                outer_ticks,
                samples,
            })) => figures = Some((inner_ticks, outer_ticks, samples)),
            Ok(Ok(Message::Warning(w))) => problems.push(w),
            Ok(Ok(Message::Error(e))) => bail!("the agent failed: {e}"),
            Ok(Ok(Message::Detached(_))) => break,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => bail!("the agent's connection broke before calibration ended: {e}"),
            Err(_) => bail!(
                "the agent in JVM {} did not finish calibrating within 30 s",
                args.pid
            ),
        }
    }
    let Some((inner, outer, samples)) = figures else {
        bail!(
            "the agent could not calibrate: {}",
            if problems.is_empty() {
                "no figures came back".to_string()
            } else {
                problems.join("; ")
            }
        );
    };
    let ns = |ticks: f64| ticks * 1e9 / ticks_per_sec.max(1) as f64;
    let (inner_ns, outer_ns) = (ns(inner), ns(outer));
    let clock_name = format!("{clock_used:?}").to_lowercase();
    let mut out = std::io::stdout().lock();
    if args.json {
        let js = |out: &mut dyn Write, v: &str| sprig_callgraph::report::json::write_str(out, v);
        write!(out, "{{\n  \"pid\": {},\n  \"jvm\": ", args.pid)?;
        js(&mut out, &jvm_line)?;
        write!(out, ",\n  \"clock\": ")?;
        js(&mut out, &clock_name)?;
        writeln!(out, ",\n  \"ticks_per_sec\": {ticks_per_sec},")?;
        writeln!(
            out,
            "  \"calibration\": {{\"inner_ns\": {inner_ns:.3}, \"outer_ns\": {outer_ns:.3}, \
             \"pair_ns\": {:.3}, \"batches\": {samples}, \"calls_per_batch\": 1000}},",
            inner_ns + outer_ns
        )?;
        write!(out, "  \"warnings\": [")?;
        for (i, p) in problems.iter().enumerate() {
            if i > 0 {
                write!(out, ", ")?;
            }
            js(&mut out, p)?;
        }
        writeln!(out, "]\n}}")?;
    } else {
        writeln!(
            out,
            "sprig calibrate: pid {}, {}",
            args.pid,
            escape(&jvm_line)
        )?;
        writeln!(out, "  clock        {clock_name} ({ticks_per_sec} ticks/s)")?;
        writeln!(
            out,
            "  inner  t_I   {inner_ns:8.2} ns per call, inside the called method's own time"
        )?;
        writeln!(
            out,
            "  outer  t_O   {outer_ns:8.2} ns per call, inside the caller's time"
        )?;
        writeln!(
            out,
            "  pair         {:8.2} ns per instrumented call (entry + exit probe)",
            inner_ns + outer_ns
        )?;
        writeln!(
            out,
            "  samples      {samples} batches of 1000 calls, the median batch of the fastest few ms kept"
        )?;
        for p in &problems {
            writeln!(out, "  warning      {}", escape(p))?;
        }
    }
    drop(prepared);
    Ok(ExitCode::SUCCESS)
}

/// `sprig run -- java ...`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    let agent = attach::agent_library_path()?;
    let prepared = prepare(&args.session, None)?;
    let options = prepared.dir.agent_options(std::process::id());
    let (java, rest) = args
        .command
        .split_first()
        .ok_or_else(|| anyhow!("missing java command after --"))?;
    let mut cmd = std::process::Command::new(java);
    cmd.arg(format!(
        "-agentpath:{}={}",
        agent.display(),
        options.format()
    ));
    cmd.args(rest);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {java:?}"))?;
    let pid = child.id();
    let expect = PeerExpectation {
        pid: Some(pid),
        uid: sprig_wire::session::euid(),
        token: prepared.dir.token(),
    };
    let accepted = loop {
        match prepared
            .listener
            .accept(&expect, Duration::from_millis(200))
        {
            Ok(c) => break Ok(c),
            Err(SessionError::Timeout(_)) => {
                if let Some(status) = child.try_wait()? {
                    break Err(anyhow!(
                        "the JVM exited ({status}) before the sprig agent connected: check the java command line"
                    ));
                }
            }
            Err(e) => break Err(anyhow!(e).context("the agent's connection was refused")),
        }
    };
    let (channel, jvm_info) = match accepted {
        Ok(c) => c,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    let jvm_line = format!("{} {}", jvm_info.vm_name, jvm_info.version);
    let code = drive(
        &args.session,
        &prepared,
        channel,
        pid,
        jvm_line,
        Some(&mut child),
    );
    // Ctrl-C reaches the JVM too (same process group); reap it.
    let _ = child.wait();
    code
}

/// Status line on stderr: redrawn in place on a terminal, printed once
/// (plus the start line) otherwise.
struct Status {
    tty: bool,
    last: Instant,
    drawn: bool,
    out: Box<dyn Write>,
}

impl Status {
    fn new() -> Status {
        Status::to(Box::new(std::io::stderr()), std::io::stderr().is_terminal())
    }

    /// A status writing to `out` (redrawn in place when `tty`).
    fn to(out: Box<dyn Write>, tty: bool) -> Status {
        Status {
            tty,
            last: Instant::now(),
            drawn: false,
            out,
        }
    }

    fn update(&mut self, elapsed: Duration, events: u64, rate: f64, stats: &AgentStats) {
        if !self.tty || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let _ = write!(
            self.out,
            "\r\x1b[2Ksprig: profiling {:>6.1} s, {} events ({}/s), {} methods instrumented / {} called",
            elapsed.as_secs_f64(),
            human(events as f64),
            human(rate),
            stats.instrumented_methods,
            stats.called_methods
        );
        self.drawn = true;
    }

    fn line(&mut self, text: &str) {
        if self.drawn {
            let _ = write!(self.out, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(self.out, "{}", escape(text));
    }
}

fn human(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Reads control messages on a thread so the main loop never blocks on the
/// socket while draining the ring.
fn spawn_reader(mut channel: Channel) -> Receiver<Result<Message, SessionError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("sprig-control-reader".into())
        .spawn(move || {
            loop {
                let m = channel.recv();
                let end = m.is_err();
                if tx.send(m).is_err() || end {
                    break;
                }
            }
        })
        .expect("spawn control reader thread");
    rx
}

#[derive(PartialEq, Eq, Debug)]
enum Phase {
    /// Waiting for the agent to start the session.
    Starting,
    Profiling,
    /// Detach requested; waiting for `Detached`.
    Detaching,
}

/// Why the session ended.
enum End {
    Detached,
    /// The JVM exited (normal for `sprig run`, an early end for `profile`).
    JvmExited(String),
    /// The JVM or the agent went away without detaching.
    Lost(String),
    /// The agent reported a fatal error.
    AgentError(String),
}

fn drive(
    args: &SessionArgs,
    prepared: &Prepared,
    channel: Channel,
    pid: u32,
    jvm_line: String,
    mut child: Option<&mut std::process::Child>,
) -> Result<ExitCode> {
    let child_mode = child.is_some();
    let live = args.live && std::io::stderr().is_terminal();
    if args.live && !live {
        eprintln!(
            "sprig: note: --live needs stderr on a terminal; showing the report at the end only"
        );
    }
    let mut last_live = Instant::now();
    signals::install();
    let writer = channel
        .try_clone()
        .context("cannot duplicate the control socket")?;
    writer.send_with_fd(
        &Message::Start(args.session_options()),
        prepared.ring_fd.as_fd(),
    )?;
    let messages = spawn_reader(channel);
    let ticks_per_sec = prepared.region.ticks_per_sec();
    let mut consumer = Consumer::new(prepared.region.clone());
    let ring_events =
        prepared.region.segments() as usize * prepared.region.segment_capacity() as usize;
    let mut last_poll = Instant::now();
    let mut builder = CctBuilder::new(ticks_per_sec);
    {
        let (target, _) = builder.profile_fields_mut();
        target.pid = pid;
        target.jvm = jvm_line;
    }
    let mut stats = AgentStats::default();
    let mut status = Status::new();
    let mut phase = Phase::Starting;
    let mut events: u64 = 0;
    let mut profiling_since: Option<Instant> = None;
    let mut detach_sent_at: Option<Instant> = None;
    let mut signals_seen = 0;
    let mut resets_seen = 0;
    let mut timed_reset_done = false;
    // When the results were last reset, and when to reset the threads that
    // had no event since (the builder holds the reset for them till then).
    let mut reset_when: Option<Instant> = None;
    let mut catch_up_at: Option<Instant> = None;
    let mut rate_window = (Instant::now(), 0u64, 0.0f64);
    let mut announced_roots = false;
    // Whether the agent's counts (`Status`, `Detached`) ever arrived.
    let mut stats_seen = false;

    let end = loop {
        let polled_at = Instant::now();
        let n = consumer.poll(&mut |thread, evs| builder.process(thread, evs));
        let since_last_poll = polled_at.duration_since(last_poll);
        last_poll = polled_at;
        events += n as u64;

        // Control messages.
        let mut ended = None;
        loop {
            match messages.try_recv() {
                Ok(Ok(msg)) => {
                    builder.apply_message(&msg);
                    stats_seen |= carries_stats(&msg);
                    if let Some(e) = handle_message(
                        msg,
                        &mut phase,
                        &mut stats,
                        &mut status,
                        &mut profiling_since,
                        &mut announced_roots,
                        pid,
                    ) {
                        ended = Some(e);
                        break;
                    }
                }
                Ok(Err(e)) => {
                    ended = Some(if e.is_closed() {
                        connection_closed(pid, child.as_deref_mut())
                    } else {
                        End::Lost(format!("control connection failed: {e}"))
                    });
                    break;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    ended = Some(connection_closed(pid, child.as_deref_mut()));
                    break;
                }
            }
        }
        if let Some(e) = ended {
            break e;
        }

        // Stop conditions.
        let sigs = signals::count();
        if sigs > signals_seen {
            signals_seen = sigs;
            if phase == Phase::Detaching {
                status.line(
                    "sprig: interrupted again: exiting now; the agent restores the JVM by itself",
                );
                break End::Lost("interrupted twice".into());
            }
            status.line(
                "sprig: stopping: restoring classes and detaching (Ctrl-C again to exit at once)",
            );
            writer.send(&Message::Detach)?;
            detach_sent_at = Some(Instant::now());
            phase = Phase::Detaching;
        }
        // Resets: SIGUSR1 at any time while profiling, or --reset-after.
        let resets = signals::resets();
        if phase == Phase::Detaching {
            resets_seen = resets;
        }
        if phase == Phase::Profiling
            && let Some(since) = profiling_since
        {
            let timed = !timed_reset_done
                && args
                    .reset_after
                    .is_some_and(|r| since.elapsed().as_secs_f64() >= r);
            if timed || resets > resets_seen {
                timed_reset_done |= timed;
                resets_seen = resets;
                match prepared.region.clock() {
                    ClockKind::ThreadCpu => builder.reset_now(),
                    wall => builder.reset_at(clock::read(wall)),
                }
                let now = Instant::now();
                reset_when = Some(now);
                // By then every event recorded before the reset has long
                // been published and read.
                catch_up_at = Some(now + Duration::from_secs(1));
                status.line(&format!(
                    "sprig: results reset {:.1} s into profiling: the report covers what runs from now on",
                    since.elapsed().as_secs_f64()
                ));
            }
        }
        if catch_up_at.is_some_and(|at| Instant::now() >= at) {
            builder.apply_pending_reset();
            catch_up_at = None;
        }
        if phase == Phase::Profiling
            && let (Some(d), Some(since)) = (args.duration, profiling_since)
            && since.elapsed().as_secs_f64() >= d
        {
            writer.send(&Message::Detach)?;
            detach_sent_at = Some(Instant::now());
            phase = Phase::Detaching;
        }
        if let Some(at) = detach_sent_at
            && at.elapsed() > DETACH_TIMEOUT
        {
            break End::Lost(format!(
                "the agent did not confirm the detach within {DETACH_TIMEOUT:?}"
            ));
        }
        if let Some(c) = child.as_deref_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            // Drain what the agent managed to publish, then stop.
            let n = consumer.poll(&mut |thread, evs| builder.process(thread, evs));
            events += n as u64;
            break End::JvmExited(format!("the JVM exited ({st})"));
        }

        // Status line.
        if let Some(since) = profiling_since {
            let (t0, e0, r) = rate_window;
            let dt = t0.elapsed().as_secs_f64();
            let rate = if dt >= 1.0 {
                let r = (events - e0) as f64 / dt;
                rate_window = (Instant::now(), events, r);
                r
            } else {
                r
            };
            status.update(since.elapsed(), events, rate, &stats);
            if live && last_live.elapsed() >= Duration::from_secs(1) {
                last_live = Instant::now();
                draw_live(&builder, args);
            }
        }
        // Poll in batches: every poll costs the probes it reads behind
        // (see POLL_PAUSE). Only a consumer that is behind polls again
        // without a pause.
        if let Some(pause) = next_pause(n, since_last_poll, ring_events) {
            std::thread::sleep(pause);
        }
    };

    // An agent-reported error ends the session: make sure the agent has
    // restored the JVM before we go (a new session may follow at once).
    if matches!(end, End::AgentError(_)) && phase != Phase::Detaching {
        let _ = writer.send(&Message::Detach);
        let deadline = Instant::now() + DETACH_TIMEOUT;
        while Instant::now() < deadline {
            match messages.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(Message::Detached(s))) => {
                    stats = s;
                    break;
                }
                Ok(Ok(_)) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Ok(Err(_)) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    // A JVM that exits ends the session before the control messages it
    // sent last are read (its `Detached`, when it got that out): read what
    // is left, up to the closed connection.
    if matches!(end, End::JvmExited(_) | End::Lost(_)) {
        let deadline = Instant::now() + Duration::from_secs(1);
        while let Ok(Ok(msg)) =
            messages.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            builder.apply_message(&msg);
            stats_seen |= carries_stats(&msg);
            if let Message::Status(s) | Message::Detached(s) = msg {
                stats = s;
            }
        }
    }

    // Final drain: everything the agent published before it retired the ring.
    let n = consumer.poll(&mut |thread, evs| builder.process(thread, evs));
    events += n as u64;
    prepared.region.mark_consumer_gone();

    let duration_ms = reset_when
        .or(profiling_since)
        .map(|s| s.elapsed().as_millis() as u64)
        .unwrap_or(0);
    let reset_after_ms = match (profiling_since, reset_when) {
        (Some(p), Some(r)) => r.duration_since(p).as_millis().max(1) as u64,
        _ => 0,
    };
    {
        let (_, st) = builder.profile_fields_mut();
        st.events = events;
        st.set_agent(&stats);
        st.lost_events = st.lost_events.max(prepared.region.lost_events());
        st.duration_ms = duration_ms;
        st.reset_after_ms = reset_after_ms;
    }
    let mut profile: Profile = builder.finish();
    if !stats_seen {
        count_methods_from_profile(&mut profile);
    }

    let (code, note) = match &end {
        End::Detached => (ExitCode::SUCCESS, None),
        // `sprig run` profiles until the JVM ends: that is the normal end.
        End::JvmExited(why) if child_mode => (
            ExitCode::SUCCESS,
            Some(format!("sprig: {why}; profile complete")),
        ),
        End::JvmExited(why) => (
            ExitCode::from(3),
            Some(format!(
                "sprig: session ended early: {why}; showing what was collected"
            )),
        ),
        End::Lost(why) => (
            ExitCode::from(3),
            Some(format!(
                "sprig: session ended early: {why}; showing what was collected"
            )),
        ),
        End::AgentError(why) => (
            ExitCode::from(1),
            Some(format!("sprig: error: the agent stopped: {why}")),
        ),
    };
    if let Some(note) = &note {
        status.line(note);
    }
    if phase == Phase::Starting && !matches!(end, End::Detached) {
        return Ok(code);
    }
    output::write(&profile, &args.view, args.output.as_deref())?;
    if profile.stats.lost_events > 0 {
        status.line(&format!(
            "sprig: warning: {} events were lost (the ring was full for longer than the wait bound)",
            profile.stats.lost_events
        ));
    }
    Ok(code)
}

/// Whether `msg` carries the agent's counts.
fn carries_stats(msg: &Message) -> bool {
    matches!(msg, Message::Status(_) | Message::Detached(_))
}

/// The method counts of a session whose agent never sent its own (a JVM
/// that exited within its first second, before a status message, and
/// before the agent's last one): the methods that got probes, as the
/// agent announced them, and the methods of the tree.
fn count_methods_from_profile(profile: &mut Profile) {
    let called: std::collections::BTreeSet<u32> = profile
        .threads
        .iter()
        .flat_map(|t| t.tree.nodes.iter())
        .filter(|n| n.calls > 0)
        .map(|n| n.method)
        .collect();
    let st = &mut profile.stats;
    st.called_methods = called.len() as u64;
    st.instrumented_methods = (profile.methods.len() as u64).max(st.called_methods);
    profile.warnings.push(
        "the agent's counts did not arrive before the JVM exited: methods counted from the \
         profile (instrumented: every method the agent gave probes, dormant ones too)"
            .to_owned(),
    );
}

/// Whether process `pid` is gone (or a zombie) within `bound`.
fn jvm_gone_within(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The control connection closed: the JVM exited (or is exiting) unless it is
/// still there after a short wait, in which case the agent went away.
fn connection_closed(pid: u32, child: Option<&mut std::process::Child>) -> End {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut child = child;
    while Instant::now() < deadline {
        let gone = match child.as_deref_mut() {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
        };
        if gone {
            return End::JvmExited(format!("JVM {pid} exited"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    End::Lost(format!("the agent in JVM {pid} closed the connection"))
}

/// Whether `pid` has exited but not been reaped.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// What the session loop itself does with a control message (the CCT
/// builder has already taken what it needs). Returns how the session ended,
/// if it did.
fn handle_message(
    msg: Message,
    phase: &mut Phase,
    stats: &mut AgentStats,
    status: &mut Status,
    profiling_since: &mut Option<Instant>,
    announced: &mut bool,
    pid: u32,
) -> Option<End> {
    let mut start_profiling = |phase: &mut Phase| {
        if *phase == Phase::Starting {
            *phase = Phase::Profiling;
            *profiling_since = Some(Instant::now());
        }
    };
    match msg {
        Message::RootInstrumented {
            pattern,
            methods: n,
        } => {
            if !*announced {
                *announced = true;
                status.line(&format!(
                    "sprig: profiling JVM {pid}: root {pattern} instrumented ({n} method{})",
                    if n == 1 { "" } else { "s" }
                ));
            }
            start_profiling(phase);
        }
        Message::RootNotFound {
            pattern,
            class_loaded,
            suggestions,
        } => {
            if class_loaded {
                let near = if suggestions.is_empty() {
                    String::new()
                } else {
                    format!("; near matches: {}", suggestions.join(", "))
                };
                return Some(End::AgentError(format!(
                    "root {pattern} matches no method of the loaded classes{near}"
                )));
            }
            // Suggestions name loaded classes close to the pattern's class.
            let mut classes: Vec<&str> = suggestions
                .iter()
                .map(|s| s.split("::").next().unwrap_or(s))
                .collect();
            classes.dedup();
            let near = if classes.is_empty() {
                String::new()
            } else {
                format!(
                    " (loaded classes with similar names: {})",
                    classes.join(", ")
                )
            };
            status.line(&format!(
                "sprig: root {pattern} matches no loaded class yet; it is instrumented when its class loads{near}"
            ));
            start_profiling(phase);
        }
        Message::Status(s) => *stats = s,
        Message::ClassFailed(f) => {
            let err = if f.jvmti_error.is_empty() {
                String::new()
            } else {
                format!("{}: ", f.jvmti_error)
            };
            status.line(&format!(
                "sprig: warning: class {} left uninstrumented: {err}{}",
                f.class, f.reason
            ));
        }
        Message::Warning(w) => status.line(&format!("sprig: warning: {w}")),
        Message::Error(e) => return Some(End::AgentError(e)),
        Message::Detached(s) => {
            *stats = s;
            // Not asked for: the agent ended the session itself. When the
            // JVM is exiting it may still get its `Detached` out before the
            // process goes; that is an early end, not a normal detach.
            if *phase != Phase::Detaching && jvm_gone_within(pid, Duration::from_secs(2)) {
                return Some(End::JvmExited(format!("JVM {pid} exited")));
            }
            return Some(End::Detached);
        }
        _ => {}
    }
    None
}

/// Redraws the live view (the hottest merged paths) on stderr.
fn draw_live(builder: &CctBuilder, args: &SessionArgs) {
    let snapshot = builder.snapshot();
    let opts = RenderOptions {
        min_percent: args.view.min_percent.max(1.0),
        max_depth: args.view.depth,
        ..RenderOptions::default()
    };
    let mut buf = Vec::new();
    if (Live { max_lines: 30 })
        .render(&snapshot, &opts, &mut buf)
        .is_ok()
    {
        // Clear the screen, home the cursor, draw.
        eprint!("\x1b[2J\x1b[H{}", String::from_utf8_lossy(&buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RING: usize = 2_000_000;

    #[derive(clap::Parser)]
    struct Cmd {
        #[command(flatten)]
        session: SessionArgs,
    }

    fn session_args(args: &[&str]) -> SessionArgs {
        use clap::Parser;
        Cmd::try_parse_from(std::iter::once("sprig").chain(args.iter().copied()))
            .unwrap()
            .session
    }

    /// A sink the test keeps a handle on.
    #[derive(Clone, Default)]
    struct Captured(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn agent_messages_are_printed_with_control_characters_escaped() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let (mut phase, mut stats) = (Phase::Starting, AgentStats::default());
        let (mut since, mut announced) = (None, false);
        let esc = "a.B\u{1b}]0;t\u{7}";
        for msg in [
            Message::RootInstrumented {
                pattern: format!("{esc}::run"),
                methods: 1,
            },
            Message::RootNotFound {
                pattern: format!("{esc}::x"),
                class_loaded: false,
                suggestions: vec![format!("{esc}::y")],
            },
            Message::Warning(format!("class {esc} \u{9b}")),
            Message::ClassFailed(sprig_wire::control::ClassFailure {
                class: esc.into(),
                jvmti_error: "E\u{1b}".into(),
                reason: "r\r".into(),
            }),
        ] {
            let end = handle_message(
                msg,
                &mut phase,
                &mut stats,
                &mut status,
                &mut since,
                &mut announced,
                1,
            );
            assert!(end.is_none());
        }
        let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(
            text.contains("warning: class a.B\\x1b]0;t\\x07 \\u{9b}"),
            "{text}"
        );
    }

    #[test]
    fn the_documented_largest_ring_is_made() {
        let args = session_args(&["--root", "a.B::c", "--ring-mib", "4096"]);
        args.validate().unwrap();
        let p = prepare_with(ClockKind::Tsc, args.ring_mib, None).expect("a 4 GiB ring");
        assert_eq!(
            u64::from(p.region.segments()) * 64 * 1024,
            4096 * 1024 * 1024
        );
        let args = session_args(&["--root", "a.B::c", "--ring-mib", "4097"]);
        assert!(args.validate().is_err());
    }

    #[test]
    fn a_root_in_an_excluded_class_is_refused_before_attaching() {
        let args = session_args(&["--root", "com.acme.A::run", "--exclude", "com.acme.**"]);
        let err = args.validate().unwrap_err().to_string();
        assert_eq!(
            err,
            "--root com.acme.A::run is excluded by --exclude com.acme.**: nothing would be profiled"
        );
        // A nested class is excluded with its outer class.
        let args = session_args(&["--root", "com.acme.A$In::run", "--exclude", "com.acme.A"]);
        assert!(args.validate().is_err());
        // Other roots and patterns are not.
        for (root, exclude) in [
            ("com.acme.A::run", "com.acme.B"),
            ("com.acme.AB::run", "com.acme.A"),
            ("com.acme.*::run", "com.acme.A"),
        ] {
            let args = session_args(&["--root", root, "--exclude", exclude]);
            args.validate().unwrap();
        }
    }

    #[test]
    fn an_unwritable_output_is_refused_before_attaching() {
        let dir = std::env::temp_dir().join(format!("sprig-out-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let missing = dir.join("no-such-dir/out.json");
        let args = session_args(&["--root", "a.B::c", "-o", missing.to_str().unwrap()]);
        let err = format!("{:#}", args.validate().unwrap_err());
        assert!(
            err.starts_with(&format!("cannot write {}", missing.display())),
            "{err}"
        );
        // A directory is no output file either.
        let args = session_args(&["--root", "a.B::c", "-o", dir.to_str().unwrap()]);
        assert!(args.validate().is_err());
        // A writable path passes and is left as it was: a new file is not
        // left behind, an existing one keeps its contents.
        let fresh = dir.join("fresh.json");
        session_args(&["--root", "a.B::c", "-o", fresh.to_str().unwrap()])
            .validate()
            .unwrap();
        assert!(!fresh.exists());
        let old = dir.join("old.json");
        std::fs::write(&old, b"keep").unwrap();
        session_args(&["--root", "a.B::c", "-o", old.to_str().unwrap()])
            .validate()
            .unwrap();
        assert_eq!(std::fs::read(&old).unwrap(), b"keep");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_quiet_ring_is_read_every_poll_pause() {
        assert_eq!(
            next_pause(0, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        assert_eq!(next_pause(0, Duration::ZERO, RING), Some(POLL_PAUSE));
        // One busy thread: 720,000 events in 10 ms fill a quarter of the
        // ring in ~7 ms.
        assert_eq!(
            next_pause(100_000, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        let p = next_pause(200_000, Duration::from_millis(4), RING).expect("a pause");
        assert_eq!(p, Duration::from_millis(10));
        let p = next_pause(200_000, Duration::from_millis(2), RING).expect("a pause");
        assert!((p.as_secs_f64() - 0.005).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn a_consumer_behind_polls_again_at_once() {
        // An eighth of the ring in one poll.
        assert_eq!(next_pause(RING / 8, Duration::from_millis(10), RING), None);
        // A rate that fills a quarter of the ring in under 1 ms.
        assert_eq!(next_pause(200_000, Duration::from_micros(300), RING), None);
    }
}
