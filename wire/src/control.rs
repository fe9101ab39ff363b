//! Control-channel messages between the CLI (listener) and the agent
//! (connector). Encoded with bincode 2 by [`crate::codec`] as
//! length-prefixed frames; never change a variant's meaning, add new ones at
//! the end and bump [`PROTOCOL_VERSION`] when the layout changes.

use bincode::{Decode, Encode};

/// Version of the control protocol and of the ring layout together.
pub const PROTOCOL_VERSION: u32 = 17;

/// What the agent's `Agent_OnAttach` returns when it cannot start (the JVM
/// answers the attach with `return code: N`; 0 is success). A session
/// already running is not among them: the agent refuses it over the
/// control socket, where it can name that session.
pub mod agent_code {
    /// The option string is missing or malformed.
    pub const OPTIONS: i32 = 1;
    /// No JavaVM, JVMTI environment or attached thread.
    pub const NO_VM: i32 = 2;
    /// A JVMTI call failed.
    pub const JVMTI: i32 = 3;
    /// A JNI call failed.
    pub const JNI: i32 = 4;
    /// A session runs in this JVM (agents before the refusal over the
    /// socket).
    pub const BUSY: i32 = 5;
    /// The agent's control thread could not be started.
    pub const THREAD: i32 = 6;
    /// An internal error (a panic) in the agent.
    pub const PANIC: i32 = 7;
    /// The JVM holds the probe class of an older sprig.
    pub const OLD_PROBE_CLASS: i32 = 8;
    /// The agent could not keep its library loaded.
    pub const PIN: i32 = 9;
}

/// How the agent is told where its session lives. Passed as the agent's
/// option string on attach (`-agentpath:...=<options>` or the attach `load`
/// command). Format: `dir=<abs path>,token=<32 hex>,cli=<pid>`; see
/// [`AgentOptions::parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentOptions {
    /// Private 0700 session directory holding `control.sock` and `ring`.
    pub dir: std::path::PathBuf,
    /// Per-session secret the agent must present in its `Hello`.
    pub token: [u8; 16],
    /// PID of the sprig process that started the session; the agent talks
    /// only to a listener whose SO_PEERCRED pid is this one.
    pub cli_pid: u32,
}

/// Which clock the probes read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub enum ClockKind {
    /// Invariant TSC read with rdtsc; frequency measured at session start.
    Tsc,
    /// CLOCK_MONOTONIC in nanoseconds (fallback when the TSC is not invariant).
    Monotonic,
    /// CLOCK_THREAD_CPUTIME_ID in nanoseconds (`--clock cpu`).
    ThreadCpu,
}

/// Where a profile's times come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Encode, Decode)]
pub enum Timing {
    /// Every call timed by its probes (two clock reads a call); adjust-time
    /// and the calibrated probe cost subtracted.
    #[default]
    Exact,
    /// Calls counted by the probes, which read no clock inside a root
    /// context; time from samples of each thread's position in its event
    /// stream. Root entries and exits keep their timestamps.
    Sampled,
}

impl Timing {
    /// `exact` or `sampled`, as reports and the command line write it.
    pub fn name(self) -> &'static str {
        match self {
            Timing::Exact => "exact",
            Timing::Sampled => "sampled",
        }
    }
}

/// Which revelation scheme the agent runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub enum Scheme {
    /// Scheme B: reveal callees at a method's first call.
    Lazy,
    /// Scheme A: instrument the whole reachable graph over loaded classes at once.
    Eager,
}

/// What the CLI asks the agent to profile.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct SessionOptions {
    /// Root patterns: `pkg.Class::method`, `pkg.Class::method(desc)ret`, `pkg.Class::*`.
    pub roots: Vec<String>,
    /// Package/class patterns to instrument even though filtered by default.
    pub include: Vec<String>,
    /// Package/class patterns never to instrument.
    pub exclude: Vec<String>,
    pub scheme: Scheme,
    pub clock: ClockKind,
    /// Instrument only the roots (no revelation).
    pub roots_only: bool,
    /// Run the in-target probe calibration before profiling.
    pub calibrate: bool,
    /// Longest time (ms) a producer waits for ring space before it records
    /// adjust-time and, if the consumer is gone, switches profiling off.
    pub wait_bound_ms: u32,
    /// Redefine a class again for each revelation in it, instead of giving
    /// all its methods (dormant) probes the first time.
    pub no_dormant: bool,
    /// Leave out trivial methods of at most this many bytes of bytecode
    /// (short straight-line leaves: getters, setters, constants); 0 keeps
    /// every method. Roots are always instrumented.
    pub skip_trivial: u32,
    /// Reveal the virtual and interface calls of profiled methods by the
    /// receivers they see (a check before each call), instead of by class
    /// hierarchy analysis at the caller's first call. Lazy scheme only.
    pub receivers: bool,
    /// Milliseconds between two calibration bursts of one thread (a few
    /// dozen probed calls of an empty method as the thread opens a root
    /// context, see `event::CALIBRATION_LOOP_ID`); 0 for none. Only with
    /// `calibrate`.
    pub recalibrate_ms: u32,
    /// Whether the probes inside a root context read the clock.
    pub timing: Timing,
    /// Stack samples of the JVM's threads (`sprig sample`), taken by the
    /// agent's stack sampler; `None` runs no sampler. With no `roots` a
    /// session samples only: no class is redefined.
    pub stacks: Option<StackOptions>,
    /// Snapshots of every Java thread: its state, stack and locks (`sprig
    /// threads`); `None` takes none. With no `roots` and no `stacks` the
    /// session takes them and ends: no class is redefined.
    pub threads: Option<ThreadsOptions>,
    /// `--locks`: the waits of threads inside a root context (contended
    /// monitors, `Object.wait`) go into their streams as wait records.
    pub locks: bool,
    /// Exact allocations inside root contexts: a probe after every
    /// allocation instruction of the profiled methods, writing one
    /// [`RECORD_ALLOC`](crate::record::RECORD_ALLOC) record into the
    /// thread's stream (`AllocSite` names each site first).
    pub alloc: bool,
    /// Windows timing: the probes count in counting windows and are
    /// silent in the others, where the stack sampler (`stacks`, which must
    /// be set) takes the time; `None` keeps the probes on throughout.
    pub windows: Option<WindowOptions>,
    /// Milliseconds of the silent tail at a requested detach (0: none):
    /// before the classes go back, the probes inside roots go silent and
    /// the roots' own probes time root calls (`SilentRootEntry`,
    /// `SilentRootExit`) until [`COST_TAIL_CALLS`] of them closed or this
    /// long, whichever first: the root's latency with the probes silent,
    /// set against its latency while they recorded.
    pub cost_tail_ms: u32,
    /// Sampled allocations (JVMTI SampledObjectAlloc): the mean bytes
    /// between two samples (SetHeapSamplingInterval); 0 samples nothing.
    /// A sample taken inside a root context goes into the allocating
    /// thread's stream as a
    /// [`RECORD_SAMPLED_ALLOC`](crate::record::RECORD_SAMPLED_ALLOC)
    /// record (`AllocClass` names its class first); the others are counted
    /// (`SampledOutside`).
    pub alloc_interval: u32,
    /// Live objects (`--alloc=live`): each allocation sample taken inside a
    /// root context is tagged (JVMTI `SetTag`) and its tag carried by its
    /// record; the agent sends the tags the JVM frees (`LiveFreed`) and
    /// marks each garbage collection (`LiveGc`). Needs `alloc_interval`.
    pub alloc_live: bool,
}

/// Silent root calls that end the cost tail ([`SessionOptions::cost_tail_ms`]).
pub const COST_TAIL_CALLS: u64 = 200;

impl SessionOptions {
    /// A session that profiles no root and runs no sensor: the base the
    /// sessions that only sample, snapshot or calibrate start from
    /// (`SessionOptions { stacks: Some(..), ..SessionOptions::without_roots() }`),
    /// so a field a new sensor adds is set in one place. Lazy scheme,
    /// monotonic clock, the default (exact) timing, a 2 s wait bound,
    /// nothing else on.
    pub fn without_roots() -> Self {
        SessionOptions {
            roots: Vec::new(),
            include: Vec::new(),
            exclude: Vec::new(),
            scheme: Scheme::Lazy,
            clock: ClockKind::Monotonic,
            roots_only: true,
            calibrate: false,
            wait_bound_ms: 2000,
            no_dormant: false,
            skip_trivial: 0,
            receivers: false,
            recalibrate_ms: 0,
            timing: Timing::Exact,
            stacks: None,
            threads: None,
            locks: false,
            alloc: false,
            windows: None,
            cost_tail_ms: 0,
            alloc_interval: 0,
            alloc_live: false,
        }
    }
}

/// The schedule of windows timing: a counting window, then a silent one,
/// and again. A root call is counted or silent as a whole: the window at
/// its entry decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct WindowOptions {
    /// Milliseconds of each counting window (the probes record).
    pub counting_ms: u32,
    /// Milliseconds of each silent window (the probes inside roots are
    /// silent; the roots' own probes time each call; stack samples).
    pub silent_ms: u32,
    /// A counting window also ends once this many root calls were
    /// entered in it (0: by its length only), for code whose counted root
    /// calls cost many times their bare time.
    pub counting_calls: u32,
    /// What silences the probes in a silent window.
    pub silence: Silence,
    /// The first milliseconds of each silent window take no stack sample
    /// (root calls entered then are timed, not sampled): the JIT
    /// recompiles what the switch deoptimised (0: none). Shorter than
    /// `silent_ms`.
    pub settle_ms: u32,
}

/// What silences the probes inside a silent root call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub enum Silence {
    /// The probes stay in the bytecode and take their dormant path (a load
    /// and a branch a call); no class is redefined at a switch.
    #[default]
    Dormant,
    /// The session's instrumented classes, but the roots' own, are put back
    /// to their original bytes for each silent window and instrumented
    /// again when the next counting window opens (a redefinition and the
    /// JIT's recompilation at each switch).
    Original,
}

/// What the thread snapshots are asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct ThreadsOptions {
    /// How many snapshots (1 to 10), each sent as a `ThreadDump`.
    pub snapshots: u32,
    /// Milliseconds between two snapshots (at most 1000).
    pub gap_ms: u32,
    /// Frames kept per stack, counted from the leaf (1 to 2048).
    pub max_depth: u32,
}

/// What the stack sampler is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct StackOptions {
    /// Microseconds between two sampling rounds (each round samples every
    /// live Java thread once).
    pub interval_us: u32,
    /// Frames kept per stack, counted from the leaf; a deeper stack is cut
    /// at its outer end and marked `truncated`.
    pub max_depth: u32,
    /// The source asked for; the agent falls back to JVMTI, with a
    /// `Warning` that says why, when the timer cannot run.
    pub source: StackSource,
}

/// Where stack samples come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub enum StackSource {
    /// JVMTI GetAllStackTraces every interval: every thread, whatever it
    /// does, at a safepoint (safepoint-biased).
    #[default]
    Jvmti,
    /// A per-thread CPU-time timer's signal and HotSpot's
    /// AsyncGetCallTrace: threads on the CPU, where they are (no
    /// safepoint bias). Each sample weighs one interval of CPU time.
    Timer,
}

/// What a sampled thread was doing, from its JVMTI thread state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Encode, Decode)]
pub enum SampledState {
    /// Runnable and executing Java code (or in the VM on its behalf).
    Running,
    /// Runnable inside a native method (I/O, a JNI call): on the CPU or
    /// blocked in the kernel, JVMTI cannot tell which.
    Native,
    /// Waiting to enter a contended monitor.
    Blocked,
    /// In `Object.wait`.
    Waiting,
    /// Parked (`LockSupport.park*`, all of `java.util.concurrent`).
    Parked,
    /// In `Thread.sleep`.
    Sleeping,
    /// Any other waiting state.
    Other,
}

/// One thread's stack in one sampling round.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct StackSample {
    /// The thread's Java id (`Thread.getId`), named by a `SampledThread`
    /// message sent before its first sample.
    pub thread: u64,
    pub state: SampledState,
    /// CPU time the thread consumed since its previous sample, in ns
    /// (`u64::MAX` when unknown, as for its first sample).
    pub cpu_ns: u64,
    /// Frame method ids (`FrameMethod`), the leaf first; inlined methods
    /// are frames of their own.
    pub frames: Vec<u32>,
    /// The stack was deeper than `StackOptions::max_depth`.
    pub truncated: bool,
}

/// Facts about the target JVM, sent in the agent's hello.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct JvmInfo {
    pub pid: u32,
    /// `java.vm.version`, e.g. "17.0.15+6-Debian-1deb12u1".
    pub version: String,
    /// `java.vm.name`, e.g. "OpenJDK 64-Bit Server VM".
    pub vm_name: String,
    pub vendor: String,
}

/// Counters reported by the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct AgentStats {
    pub instrumented_methods: u64,
    pub instrumented_classes: u64,
    /// Methods whose entry probe fired at least once.
    pub called_methods: u64,
    /// Events the producers could not write (ring dead or bound exceeded).
    pub lost_events: u64,
    pub redefinition_batches: u64,
    pub redefinition_ns: u64,
    pub reveal_ns: u64,
    pub failed_classes: u64,
    pub threads: u64,
    /// Revelation (absent with `--roots-only` and before a session starts).
    pub reveal: Option<RevealStats>,
}

/// What callee revelation (Scheme A or B) did in a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct RevealStats {
    /// Methods instrumented, by the kind of call edge that first reached
    /// them (`root`, `static`, `special`, `virtual`, `interface`,
    /// `dynamic`, `method-handle`, `reflective`, `callback`).
    pub revealed_by: Vec<(String, u64)>,
    /// Methods whose callees were scanned (first calls under Scheme B).
    pub scanned: u64,
    /// Methods found reachable, instrumented or not.
    pub reachable: u64,
    /// Reachable methods whose class is not loaded yet.
    pub reachable_unloaded: u64,
    /// Loaded classes in the class-hierarchy mirror.
    pub classes_mirrored: u64,
    /// Hidden or unmodifiable classes left alone.
    pub unmodifiable_skipped: u64,
    /// Reflective call sites (`Method.invoke`, ...) found in the subgraph;
    /// sprig then watches `Method.invoke` and `Constructor.newInstance`.
    pub reflective_sites: u64,
    /// Methods that hold probes but were never revealed: a redefined class
    /// gets probes in all its methods, dormant (recording nothing) until
    /// revelation reaches them.
    pub dormant: u64,
    /// Methods revealed in a class that already held their dormant probes,
    /// activated without a redefinition.
    pub activated_in_place: u64,
    /// Methods revelation reached that were left out as trivial
    /// (`--skip-trivial`): no probes, their time is their callers' self time.
    pub trivial_skipped: u64,
}

/// A class that could not be instrumented or restored.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct ClassFailure {
    /// Binary name with dots, e.g. `com.acme.Service`.
    pub class: String,
    /// JVMTI error name and number, e.g. `JVMTI_ERROR_INVALID_CLASS_FORMAT (60)`,
    /// or empty when the rewriter refused the class.
    pub jvmti_error: String,
    pub reason: String,
}

/// One frame on the control socket, either direction.
#[derive(Clone, Debug, PartialEq, Encode, Decode)]
pub enum Message {
    // ---- agent -> CLI ----
    /// First frame the agent sends after connecting.
    AgentHello {
        version: u32,
        token: [u8; 16],
        jvm: JvmInfo,
    },
    /// The ring is mapped and the session options are accepted; `clock` and
    /// `ticks_per_sec` are also in the ring header.
    Started {
        clock: ClockKind,
        ticks_per_sec: u64,
    },
    /// A method id was assigned. Sent before any event carrying the id is
    /// published. `class` is the binary name with dots.
    Method {
        id: u32,
        class: String,
        name: String,
        descriptor: String,
    },
    /// A root pattern's classes are loaded and instrumented: probes are live.
    RootInstrumented { pattern: String, methods: u32 },
    /// A root pattern matched no loaded method. When `class_loaded` is false
    /// no loaded class matches either and the pattern stays armed for classes
    /// loaded later; when true, matching classes are loaded but none has such
    /// a method (the CLI reports an error). `suggestions` are near matches
    /// (`pkg.Class::method`).
    RootNotFound {
        pattern: String,
        class_loaded: bool,
        suggestions: Vec<String>,
    },
    /// A thread index was assigned (first probe on that thread).
    Thread {
        index: u32,
        java_id: u64,
        name: String,
        /// The thread's kernel id (0 when unknown): the CLI reads its CPU
        /// time from `/proc/<pid>/task/<tid>` for sampled CPU timing.
        tid: u32,
    },
    /// Probe calibration measured in the target, in ticks of the session clock.
    Calibration {
        inner_ticks: f64,
        outer_ticks: f64,
        samples: u32,
    },
    /// Periodic or requested counters.
    Status(AgentStats),
    /// A class failed to instrument or restore; profiling goes on.
    ClassFailed(ClassFailure),
    /// A non-fatal problem worth showing the user.
    Warning(String),
    /// A fatal problem: the agent detaches after sending it.
    Error(String),
    /// Every class is restored, probes are silent, the ring is released.
    Detached(AgentStats),
    // ---- CLI -> agent ----
    /// First frame the CLI sends, answering `AgentHello`.
    CliHello { version: u32 },
    /// Start profiling with these options.
    Start(SessionOptions),
    /// Ask for a `Status` now.
    StatusRequest,
    /// Restore every class and detach.
    Detach,

    // ---- verification (tests), either direction ----
    /// CLI -> agent: digest the bytecodes the VM now holds for every method
    /// of `class` (binary name with dots). Allowed any time after the
    /// handshake; answered with `Digest`.
    BytecodeDigest { class: String },
    /// agent -> CLI: FNV-1a 64 over each method's name, descriptor and
    /// JVMTI GetBytecodes, methods in (name, descriptor) order; `methods` is
    /// 0 when no class of that name is loaded.
    Digest {
        class: String,
        methods: u32,
        digest: u64,
    },

    // ---- agent -> CLI: the stack sampler ----
    /// A method seen in a stack sample got a frame id (its own id space,
    /// apart from the probes' `Method` ids). Sent before any sample that
    /// carries it. `class` is the binary name with dots.
    FrameMethod {
        id: u32,
        class: String,
        name: String,
        descriptor: String,
    },
    /// A thread seen by the stack sampler, before its first sample.
    SampledThread { java_id: u64, name: String },
    /// One sampling round: every live Java thread's stack at `time_ns`
    /// (the session clock's monotonic ns), and what the round cost the
    /// sampling thread (`cost_ns`).
    StackSamples {
        time_ns: u64,
        cost_ns: u64,
        samples: Vec<StackSample>,
    },

    // ---- agent -> CLI: the thread snapshots ----
    /// One snapshot of every live Java thread (`sprig threads`), sent
    /// `ThreadsOptions::snapshots` times before `Detached`.
    ThreadDump(ThreadDump),
    // ---- agent -> CLI: `--locks` ----
    /// The class of a monitor some wait record names got an id (its own id
    /// space). Sent before the first record that carries it. `class` is
    /// the binary name with dots.
    WaitClass { id: u32, class: String },
    // ---- agent -> CLI: allocations ----
    /// An allocation site got an id: the allocation instruction at
    /// bytecode offset `bci` of method `method` (a `Method` id, sent
    /// before). `descriptor` is the type it allocates as a field descriptor
    /// (`Lpkg/C;`, `[I`); `dims` how many dimensions a `multianewarray`
    /// creates (1 for other arrays, 0 for objects). Sent before any record
    /// that carries the id.
    AllocSite {
        id: u32,
        method: u32,
        bci: u32,
        descriptor: String,
        dims: u8,
    },
    /// Thread `index` (named by its `Thread` message just before) is a
    /// virtual thread: its stream is its own whatever carrier ran it.
    VirtualThread { index: u32 },
    /// The stack source the agent runs, before its first sample. With the
    /// timer, `StackSamples::cost_ns` is the time its samples took the
    /// signal handler, and a message holds the samples of one drain.
    StackSource(StackSource),
    /// Windows timing with the timer source: the timer signals so far
    /// (cumulative) that found their thread outside a silent root call of
    /// the session (in a counted root call, between root calls, outside
    /// every root, or not a Java thread), dropped by the signal handler
    /// without a walk. Sent with a drain that counted more.
    TimerOutside { signals: u64 },
    // ---- call-edge bursts (`sprig sample --edges`) ----
    /// CLI -> agent, in a session that samples stacks and redefines
    /// nothing: give these classes (binary names with dots) dormant probes
    /// and sample call edges in bursts: every `interval_us` the agent
    /// allows the next `budget` probed method entries (any thread) to each
    /// record the edge from its caller. Sent once; the classes are put
    /// back when the session ends.
    EdgeProbes {
        classes: Vec<String>,
        interval_us: u32,
        budget: u32,
    },
    /// agent -> CLI: what `EdgeProbes` did: classes and methods that hold
    /// dormant probes now.
    EdgeProbed { classes: u32, methods: u32 },
    /// agent -> CLI: the edges the bursts ended since the last message
    /// sampled, and the bursts themselves.
    EdgeSamples(EdgeSamples),
    // ---- agent -> CLI: `--locks`, the owners ----
    /// The owner of a contended monitor some wait record names got an id
    /// (its own id space): the thread that held the monitor when the wait
    /// began (`thread`, its name) and where it was (`context`: its
    /// innermost frames outside the JDK, `pkg.Class.method`, innermost
    /// first, joined with ` < `; empty when none was read). Sent before
    /// the first record that carries it.
    WaitOwner {
        id: u32,
        thread: String,
        context: String,
    },
    // ---- agent -> CLI: sampled allocations ----
    /// The class of some sampled allocation record got an id (its own id
    /// space). Sent before the first record that carries it. `class` is
    /// the JVMTI class signature (`Ljava/lang/String;`, `[I`).
    AllocClass { id: u32, class: String },
    /// Sent before `Detached`: the allocation samples taken outside every
    /// root context (or on a thread that records nothing), and the bytes
    /// they stand for.
    SampledOutside { samples: u64, bytes_est: u64 },
    /// `--alloc=live`: tags of sampled objects the JVM freed (JVMTI
    /// ObjectFree), in batches; `lost` frees the agent's queue could not
    /// keep since the last batch (their objects stay counted live).
    LiveFreed { tags: Vec<u64>, lost: u64 },
    /// `--alloc=live`: garbage collections finished so far in the session
    /// (JVMTI GarbageCollectionFinish), sent after the frees the agent had
    /// received by then.
    LiveGc { gc: u64 },
    // ---- agent -> CLI: sampled allocations outside every root ----
    /// Allocation samples taken outside every root context, by the
    /// allocating thread's stack and the object's class, in batches, before
    /// `Detached` (after the `FrameMethod` and `AllocClass` messages that
    /// name their frames and classes). Part of `SampledOutside`'s totals.
    SampledOutsideStacks(OutsideStacks),
    // ---- agent -> CLI: windows timing's original-bytes silence ----
    /// What the switches between original and instrumented bytes did so
    /// far (cumulative), sent after each switch.
    WindowSwitches(WindowSwitches),
    // ---- CLI -> agent: windows timing ----
    /// The results were reset (SIGUSR1, `--reset-after`): open a counting
    /// window now if a silent one is on, so the results after the reset
    /// hold counted root calls without waiting out the silent window.
    /// Ignored outside windows timing.
    CountingWindowNow,
}

/// Windows timing's original-bytes switches of a session
/// (`Message::WindowSwitches`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct WindowSwitches {
    /// Switches to the original bytes (silent windows begun).
    pub to_original: u32,
    /// Switches back to the instrumented bytes (counting windows begun).
    pub to_instrumented: u32,
    /// Classes redefined, over all switches, and those that failed.
    pub classes: u64,
    pub failed: u64,
    /// Time in RetransformClasses over all switches, and the longest one.
    pub ns: u64,
    pub max_ns: u64,
    /// Silent windows whose switch stopped waiting for a counted root call
    /// still open (its calls after the switch went uncounted).
    pub cut: u32,
}

/// One batch of the allocation samples outside every root context, by
/// stack (`Message::SampledOutsideStacks`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct OutsideStacks {
    pub stacks: Vec<OutsideStack>,
    /// Samples the agent kept no stack for (its table was full or the
    /// stack could not be read), and the bytes they stand for; counted in
    /// `SampledOutside` all the same. Cumulative: the last batch's holds.
    pub unkept: u64,
    pub unkept_bytes_est: u64,
}

/// The allocation samples of one class taken on one stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct OutsideStack {
    /// The class id (`AllocClass`).
    pub class: u32,
    /// Frame method ids (`FrameMethod`), the leaf first.
    pub frames: Vec<u32>,
    /// The stack was deeper than the frames kept.
    pub truncated: bool,
    pub samples: u64,
    /// The bytes the samples stand for (as `SampledAlloc::bytes_est`).
    pub bytes_est: u64,
}

/// The call-edge bursts drained at once (`Message::EdgeSamples`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct EdgeSamples {
    /// Bursts ended.
    pub bursts: u32,
    /// Method entries sampled in them (each one edge below, or dropped).
    pub samples: u64,
    /// The time the bursts' samples stand for, in ns: from each burst's
    /// start to its last sample (or to its end when its budget was not
    /// used up), less the time the sampling itself took the threads that
    /// sampled (its cost over the number of threads in the burst).
    pub effective_ns: u64,
    /// The time the sampling took the sampled threads, in ns.
    pub cost_ns: u64,
    /// Sampled entries whose caller could not be named.
    pub dropped: u64,
    pub edges: Vec<EdgeCount>,
    /// The bursts' intervals: a sampled entry of a thread after its first
    /// in the same burst, each closing the CPU time the thread used since
    /// its previous sample (the sampling's own time left out).
    pub intervals: u64,
    /// The CPU time of those intervals, in ns.
    pub interval_cpu_ns: u64,
    /// The bursts' own path between two sampled entries of a thread (the
    /// return into Java, an exit probe's and an entry probe's calls into
    /// the agent), in ns of CPU time: part of every interval, measured
    /// when the bursts began on an empty instrumented method; 0 when it
    /// could not be measured.
    pub path_ns: u64,
    /// The counting windows between the bursts: method entries into the
    /// probed classes counted where they ran (each entry probe adds one to
    /// its thread's counter in Java, no call into the agent), and the wall
    /// time the windows were open, in ns; both 0 where the probe class
    /// cannot count (one an older sprig defined in this JVM).
    pub counted: u64,
    pub counted_ns: u64,
}

/// One call edge and how many sampled entries went along it.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct EdgeCount {
    pub caller: EdgeMethod,
    pub callee: EdgeMethod,
    pub samples: u32,
    /// Of its samples, those that closed an interval of their thread
    /// (`EdgeSamples::intervals`), and those intervals' CPU time in ns.
    pub intervals: u32,
    pub interval_cpu_ns: u64,
}

/// A method named by an edge: class binary name with dots.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Encode, Decode)]
pub struct EdgeMethod {
    pub class: String,
    pub name: String,
    pub descriptor: String,
}

/// Every live Java thread at one moment (`sprig threads`): states and
/// stacks from one JVMTI GetAllStackTraces, then each thread's locks. The
/// locks are read thread by thread after the stacks, so a thread that
/// moved in between shows where it is now in its locks and where it was
/// in its stack.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct ThreadDump {
    /// CLOCK_MONOTONIC ns when the snapshot began.
    pub time_ns: u64,
    /// How long the snapshot took the agent, in ns.
    pub took_ns: u64,
    pub threads: Vec<DumpedThread>,
    /// Every lock the snapshot names, indexed by `LockRef`s.
    pub locks: Vec<DumpedLock>,
}

/// A lock in a [`ThreadDump`]: an index into `ThreadDump::locks`.
pub type LockRef = u32;

/// One thread in a [`ThreadDump`].
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct DumpedThread {
    /// The thread's Java id (`Thread.threadId`).
    pub java_id: u64,
    pub name: String,
    pub daemon: bool,
    /// JVMTI thread state bits (`JVMTI_THREAD_STATE_*`).
    pub state: u32,
    /// The innermost frame first.
    pub frames: Vec<DumpedFrame>,
    /// The stack was deeper than `ThreadsOptions::max_depth`.
    pub truncated: bool,
    /// The monitors it holds, each with the depth of the frame that
    /// entered it (0 is the innermost frame; -1 entered through JNI).
    pub owns: Vec<(LockRef, i32)>,
    /// The monitor it waits to enter, or waits on in `Object.wait`
    /// (JVMTI GetCurrentContendedMonitor); which one its state says.
    pub contended: Option<LockRef>,
    /// What it is parked on (`LockSupport.getBlocker`), when parked with a
    /// blocker.
    pub parked_on: Option<LockRef>,
}

/// One frame of a [`DumpedThread`].
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct DumpedFrame {
    /// Binary name with dots.
    pub class: String,
    pub method: String,
    pub descriptor: String,
    /// The source line, or -1 when unknown, -2 in a native method.
    pub line: i32,
}

/// What kind of lock a [`DumpedLock`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Encode, Decode)]
pub enum LockKind {
    /// An object's monitor (`synchronized`, `Object.wait`).
    Monitor,
    /// A `java.util.concurrent.locks.AbstractOwnableSynchronizer` a thread
    /// is parked on (`ReentrantLock`, `ReentrantReadWriteLock`'s write
    /// lock, ...).
    Synchronizer,
    /// Any other park blocker.
    Blocker,
}

/// A lock a [`ThreadDump`] names.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode)]
pub struct DumpedLock {
    /// The class of the lock object, binary name with dots.
    pub class: String,
    /// Its identity hash code (`System.identityHashCode`), the lock's name
    /// across snapshots.
    pub hash: i32,
    pub kind: LockKind,
    /// The Java id of the thread that holds it, when one does and it is
    /// known: a monitor's owner (JVMTI GetObjectMonitorUsage, or the
    /// thread whose owned monitors list it), a synchronizer's exclusive
    /// owner (`getExclusiveOwnerThread`).
    pub owner: Option<u64>,
}
