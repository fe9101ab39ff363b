//! Facts about a run: the target, the counters, the calibration, what
//! became of the samples, and a root's latency as reports show it.

/// What became of the samples of one thread (see [`crate::cct::PositionSample`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCounts {
    /// Samples credited to a node of the tree.
    pub credited: u64,
    /// Samples that found the thread outside every root context, and
    /// their weight in ticks: not in the tree.
    pub outside: u64,
    pub outside_ticks: u64,
    /// Samples given after the builder had processed the thread's stream
    /// past their position (the caller broke the ordering contract of
    /// [`crate::CctBuilder::add_samples`]): dropped.
    pub late: u64,
    /// Samples whose position the stream never reached (events lost, or
    /// profiling ended first): dropped at the end.
    pub unmatched: u64,
}

impl SampleCounts {
    /// N of the error bound: every sample that found the thread, in a root
    /// context or not.
    pub fn window(&self) -> u64 {
        self.credited.saturating_add(self.outside)
    }

    pub fn add(&mut self, o: &SampleCounts) {
        self.credited = self.credited.saturating_add(o.credited);
        self.outside = self.outside.saturating_add(o.outside);
        self.outside_ticks = self.outside_ticks.saturating_add(o.outside_ticks);
        self.late = self.late.saturating_add(o.late);
        self.unmatched = self.unmatched.saturating_add(o.unmatched);
    }
}

/// The 95% bound of a time estimated from samples: `n` samples whose
/// weights add up to `estimate_ns`, out of `window` samples taken of the
/// thread(s): about `1.96 * p * sqrt(n * (1 - n/N))` with `p` the mean
/// weight (the sampling period), the normal approximation of the binomial
/// count of samples. 0 without samples (a node no sample found is not
/// shown to have no time, only none measured: its time is below about
/// one period).
pub fn sample_bound_ns(n: u64, estimate_ns: u64, window: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let nf = n as f64;
    let p = estimate_ns as f64 / nf;
    let rest = if window > n {
        1.0 - nf / window as f64
    } else {
        0.0
    };
    (1.96 * p * (nf * rest).sqrt()).round() as u64
}

/// Calibrated probe cost in nanoseconds (t_I and t_O, docs/accuracy.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// t_I: charged to a call itself, once per call.
    pub inner_ns: f64,
    /// t_O: charged to the caller, once per direct call it makes.
    pub outer_ns: f64,
}

impl Calibration {
    /// Builds a calibration from values in nanoseconds; negative or
    /// non-finite values become 0 (no subtraction).
    pub fn new(inner_ns: f64, outer_ns: f64) -> Calibration {
        Calibration {
            inner_ns: sane(inner_ns),
            outer_ns: sane(outer_ns),
        }
    }

    /// Converts the agent's calibration (ticks of the session clock).
    pub fn from_ticks(inner_ticks: f64, outer_ticks: f64, ticks_per_sec: u64) -> Calibration {
        let scale = if ticks_per_sec == 0 {
            1.0
        } else {
            1e9 / ticks_per_sec as f64
        };
        Calibration::new(inner_ticks * scale, outer_ticks * scale)
    }
}

fn sane(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

/// The profiled JVM.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Target {
    pub pid: u32,
    /// e.g. `OpenJDK 64-Bit Server VM 17.0.15+6`.
    pub jvm: String,
    /// The sprig command that made the profile (`profile`, `run`); empty
    /// reads as `profile`.
    pub command: String,
}

impl Target {
    /// The command that made the profile, as the report's first line
    /// names it.
    pub fn command(&self) -> &str {
        if self.command.is_empty() {
            "profile"
        } else {
            &self.command
        }
    }
}

use sprig_wire::control::AgentStats;
pub use sprig_wire::control::RevealStats;

/// Counters of the run; the CLI fills what the builder cannot know.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events consumed (the builder sets the number it processed).
    pub events: u64,
    pub instrumented_methods: u64,
    pub called_methods: u64,
    pub lost_events: u64,
    /// The time the profile covers: from the start of profiling, or from
    /// the last reset.
    pub duration_ms: u64,
    /// How long profiling had run when the results were last reset (what
    /// came before is not in the profile); 0 without a reset.
    pub reset_after_ms: u64,
    pub instrumented_classes: u64,
    /// Classes that failed to instrument or restore (each one is a warning).
    pub failed_classes: u64,
    /// Threads that entered a root context.
    pub threads: u64,
    /// Redefinition (retransformation) batches and the time they took.
    pub redefinition_batches: u64,
    pub redefinition_ns: u64,
    /// Time spent finding callees to instrument (scanning, the hierarchy).
    pub reveal_ns: u64,
    /// What revelation did (`None` with `--roots-only`).
    pub reveal: Option<RevealStats>,
    /// Windows timing's schedule and what it counted (`None` otherwise).
    pub windows: Option<WindowFacts>,
    /// What the probes cost the root, measured (`None` without a complete
    /// root call).
    pub cost: Option<CostFacts>,
}

/// What the session cost the program, measured on one root (the one with
/// the most complete root calls): the median latency of its root calls
/// while the probes recorded against the median with the probes inside
/// the root silent (the cost tail the agent runs at the session's end, or
/// windows timing's silent windows). Silent root calls still pass the
/// dormant probes' loads and branches and the root's own probes, so the
/// difference is a lower bound of what the probes cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CostFacts {
    /// The root's method id.
    pub method: u32,
    /// Complete root calls while the probes recorded, and their median
    /// latency from entry to exit (nothing subtracted).
    pub recorded_calls: u64,
    pub recorded_p50_ns: u64,
    /// Root calls timed with the probes inside silent, and their median.
    pub silent_calls: u64,
    pub silent_p50_ns: u64,
}

impl CostFacts {
    /// Fewer silent root calls than this measure nothing (a root called
    /// rarely after the session): the report keeps the estimate.
    pub const MIN_SILENT_CALLS: u64 = 5;
    /// Recorded over silent latency from which the report suggests fewer
    /// probes.
    pub const LARGE_RATIO: f64 = 1.5;

    /// Whether both medians stand on enough calls.
    pub fn measured(&self) -> bool {
        self.recorded_calls > 0 && self.silent_calls >= Self::MIN_SILENT_CALLS
    }

    /// Recorded p50 over silent p50 (`None` unless measured).
    pub fn ratio(&self) -> Option<f64> {
        (self.measured() && self.silent_p50_ns > 0)
            .then(|| self.recorded_p50_ns as f64 / self.silent_p50_ns as f64)
    }

    /// The probes' share of the recorded p50, in percent: (recorded -
    /// silent) / recorded, 0 when the silent calls were the slower.
    pub fn probe_share_percent(&self) -> Option<f64> {
        (self.measured() && self.recorded_p50_ns > 0).then(|| {
            self.recorded_p50_ns.saturating_sub(self.silent_p50_ns) as f64 * 100.0
                / self.recorded_p50_ns as f64
        })
    }

    /// The probes slow the root by [`Self::LARGE_RATIO`] or more.
    pub fn large(&self) -> bool {
        self.ratio().is_some_and(|r| r >= Self::LARGE_RATIO)
    }
}

/// Windows timing: the probes counted root calls in counting windows and
/// were silent in the others, where each root call was timed by the
/// root's own probes and the stack sampler's samples of it were credited
/// to the tree. Calls in the tree are per counted root call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowFacts {
    pub counting_ms: u32,
    pub silent_ms: u32,
    /// Microseconds between two stack samples of a thread.
    pub interval_us: u64,
    /// Root calls counted (entered in counting windows).
    pub counted_root_calls: u64,
    /// Root calls timed in silent windows (the root latencies).
    pub silent_root_calls: u64,
    /// Stack samples credited to the tree, and those whose stack held no
    /// root frame (a stack cut short) or that came after the end.
    pub samples: u64,
    pub samples_outside: u64,
    /// The stack source that ran (`None`: the agent never said).
    pub source: Option<sprig_wire::control::StackSource>,
    /// The timer source: signals its handler dropped because their thread
    /// was outside a silent root call (never walked, never sent).
    pub samples_dropped: u64,
    /// Samples taken inside a silent root call whose leaf is one of
    /// sprig's own probe natives: not the program's time, not credited.
    pub samples_in_probes: u64,
    /// What silenced the probes in the silent windows.
    pub silence: sprig_wire::control::Silence,
    /// Original-bytes silence: what its switches did (`None`: none said).
    pub switches: Option<sprig_wire::control::WindowSwitches>,
}

impl WindowFacts {
    /// The factor that scales per-counted-root-call figures to every root
    /// call of the session (counted and silent).
    pub fn scale(&self) -> f64 {
        if self.counted_root_calls == 0 {
            0.0
        } else {
            (self.counted_root_calls + self.silent_root_calls) as f64
                / self.counted_root_calls as f64
        }
    }
}

impl Stats {
    /// Takes over the agent's counters (events, duration and lost events
    /// stay the CLI's business).
    pub fn set_agent(&mut self, a: &AgentStats) {
        self.instrumented_methods = a.instrumented_methods;
        self.called_methods = a.called_methods;
        self.lost_events = self.lost_events.max(a.lost_events);
        self.instrumented_classes = a.instrumented_classes;
        self.failed_classes = a.failed_classes;
        self.threads = a.threads;
        self.redefinition_batches = a.redefinition_batches;
        self.redefinition_ns = a.redefinition_ns;
        self.reveal_ns = a.reveal_ns;
        self.reveal = a.reveal.clone();
    }
}

/// What reports show of a root node's [`Latency`], in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Complete calls.
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Sum over the calls.
    pub sum_ns: u64,
}
