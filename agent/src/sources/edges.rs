//! The call-edge bursts as a source (`sprig sample --edges`; Arnold and
//! Grove): started by `EdgeProbes` in a session that samples stacks. It
//! gives the classes named dormant probes in every method (the ledger's
//! edge classes, through `instrument::instrument_edges`; classes of those
//! names that load later get them from the hook), and runs the
//! `sprig-edges` thread: every interval it closes the open burst and opens
//! the next (`probe::edges`), before every fourth a counting window
//! (`edges::count_window`: the probes count entries in Java, for the
//! rates), and about every 200 ms sends the edges sampled since, named,
//! with the entries counted (`EdgeSamples`). Before the first burst the
//! thread measures the bursts' own path between two sampled entries on
//! the calibration class (`edges::calibrate_path`); every message carries
//! it. At the end the thread is stopped,
//! the probes silenced and every class put back.

use super::stacks::{Running, start_thread, stop_thread, wait_until};
use super::{Ending, Needs, Source};
use crate::calibrate;
use crate::env::Agent;
use crate::error::step;
use crate::ffi::{Capabilities, Event, Jni, Jvmti, MethodId};
use crate::instrument;
use crate::ledger;
use crate::outbox;
use crate::probe::edges;
use crate::probe_class;
use sprig_rewriter::vocab::names::{binary_name, descriptor_class};
use sprig_wire::Message;
use sprig_wire::clock;
use sprig_wire::control::{EdgeCount, EdgeMethod, EdgeSamples};
use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const THREAD_NAME: &str = "sprig-edges";
/// How often the sampled edges go to the CLI.
const SEND_EVERY: Duration = Duration::from_millis(200);
/// Bounds of `EdgeProbes`' figures (the CLI checks them first).
pub const MIN_INTERVAL_US: u32 = 1_000;
pub const MAX_INTERVAL_US: u32 = 10_000_000;
pub const MAX_BUDGET: u32 = 10_000;
/// A counting window (`edges::count_window`) opens before every
/// `COUNT_EVERY`th burst, for [`count_window_length`].
const COUNT_EVERY: u64 = 4;

/// A counting window's length at a burst interval of `interval`: 40% of
/// it, so the windows hold a tenth of the time (every fourth interval),
/// at least 100 µs and at most 50 ms. The windows cost the profiled code
/// an increment of a counter per entry while open, and the agent a read
/// of the counters (256 KiB) at each end.
fn count_window_length(interval: Duration) -> Duration {
    (interval * 2 / 5).clamp(Duration::from_micros(100), Duration::from_millis(50))
}

pub struct Edges {
    classes: Vec<String>,
    interval_us: u32,
    budget: u32,
    thread: Option<Running>,
}

impl Edges {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities::NONE,
        events: &[Event::ClassFileLoadHook],
        ring: false,
    };

    /// `Err` (one line) for figures out of bounds.
    pub fn new(classes: Vec<String>, interval_us: u32, budget: u32) -> Result<Edges, String> {
        if !(MIN_INTERVAL_US..=MAX_INTERVAL_US).contains(&interval_us) {
            return Err(format!(
                "call-edge bursts: interval {interval_us} µs is out of range \
                 ({MIN_INTERVAL_US}..={MAX_INTERVAL_US})"
            ));
        }
        if !(1..=MAX_BUDGET).contains(&budget) {
            return Err(format!(
                "call-edge bursts: budget {budget} is out of range (1..={MAX_BUDGET})"
            ));
        }
        Ok(Edges {
            classes,
            interval_us,
            budget,
            thread: None,
        })
    }
}

impl Source for Edges {
    fn name(&self) -> &'static str {
        "edges"
    }

    fn needs(&self) -> Needs {
        Edges::NEEDS
    }

    /// Gives the classes their dormant probes, then starts the bursts.
    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String> {
        ledger::begin_session(Vec::new());
        instrument::begin_session(&agent.jvmti)
            .map_err(|e| format!("cannot enable the class file load hook: {e}"))?;
        let (classes, methods) = instrument::instrument_edges(&agent.jvmti, jni, &self.classes);
        outbox::send(Message::EdgeProbed { classes, methods });
        edges::begin(&probe_class::probe_methods(&agent.jvmti));
        // The counting windows' array (none in a probe class an older
        // sprig defined: the rates then rest on the bursts' intervals).
        probe_class::ensure_counts(jni);
        probe_class::set_inside_all(jni, true);
        let interval = Duration::from_micros(u64::from(self.interval_us));
        let budget = self.budget;
        let jvmti = agent.jvmti;
        start_thread(agent, THREAD_NAME, &mut self.thread, move |_jni, stop| {
            Ok(move |jni: Jni<'_>| {
                step("the call-edge bursts' path calibration", (), || {
                    measure_path(jni)
                });
                let mut names: HashMap<usize, Option<EdgeMethod>> = HashMap::new();
                let mut pending = EdgeSamples::default();
                let mut next = Instant::now();
                let mut sent = Instant::now();
                let mut round: u64 = 0;
                let window = count_window_length(interval);
                let mut counts = Vec::new();
                loop {
                    let now = clock::monotonic_ns();
                    if let Some(b) = edges::close_burst(jni, now) {
                        add_burst(&mut pending, &b);
                    }
                    // Between two bursts: the edges drained are those of
                    // the bursts `pending` holds (their clipping comes out
                    // of its sum).
                    if sent.elapsed() >= SEND_EVERY {
                        sent = Instant::now();
                        send(&jvmti, jni, &mut names, &mut pending);
                    }
                    // Every `COUNT_EVERY` bursts, a counting window
                    // before the next one (a tenth of the bursts' time).
                    round += 1;
                    if round.is_multiple_of(COUNT_EVERY)
                        && let Some(c) = edges::count_window(jni, window, &mut counts)
                    {
                        pending.counted += c.entries;
                        pending.counted_ns += c.ns;
                    }
                    edges::open_burst(jni, budget, clock::monotonic_ns());
                    next += interval;
                    if next < Instant::now() {
                        next = Instant::now() + interval;
                    }
                    if wait_until(&stop, next) {
                        break;
                    }
                }
                if let Some(b) = edges::close_burst(jni, clock::monotonic_ns()) {
                    add_burst(&mut pending, &b);
                }
                send(&jvmti, jni, &mut names, &mut pending);
            })
        })
    }

    /// Stops the bursts (the thread sends what it holds), silences the
    /// probes and puts every class back.
    fn stop(&mut self, agent: &'static Agent, jni: Jni<'_>, ending: &mut Ending) {
        stop_thread(self.thread.take());
        step("the call-edge bursts' end", (), || edges::end(jni));
        let vm_death = ending.vm_death;
        let counters = step("the restore", ledger::Counters::default(), || {
            if vm_death {
                ledger::end_session()
            } else {
                instrument::restore_all(&agent.jvmti, jni).0
            }
        });
        ending.counters = counters;
    }
}

/// The bursts' own path, measured on the calibration class (defined if
/// this JVM has none yet); a `Warning` when it cannot be, and the rates
/// then hold it.
fn measure_path(jni: Jni<'_>) {
    let measured = jni.with_local_frame(8, |jni| {
        let class = calibrate::calibration_class(jni)?;
        if !jni.has_static_method(class, "burst", c"(I)V") {
            return Err(
                "the calibration class an older sprig defined in this JVM has no burst".into(),
            );
        }
        edges::calibrate_path(jni, class).ok_or_else(|| "no batch was measured".to_owned())
    });
    if let Err(e) = measured {
        outbox::send(Message::Warning(format!(
            "call-edge bursts: their own path between two entries could not be measured ({e}); \
             call rates of call-dense code are estimated low"
        )));
    }
}

/// A closed burst's figures into the next message.
fn add_burst(pending: &mut EdgeSamples, b: &edges::Burst) {
    pending.bursts += 1;
    pending.samples += b.samples;
    pending.effective_ns += b.effective_ns;
    pending.cost_ns += b.cost_ns;
    pending.intervals += b.intervals;
    pending.interval_cpu_ns += b.interval_cpu_ns;
}

/// Sends the edges sampled since the last send with the bursts `pending`
/// holds, named, their intervals' CPU time clipped (`edges::clip`, taken
/// out of the bursts' sum too); nothing when there is nothing.
fn send(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    names: &mut HashMap<usize, Option<EdgeMethod>>,
    pending: &mut EdgeSamples,
) {
    let drained = edges::drain();
    pending.dropped += drained.dropped;
    pending.interval_cpu_ns = pending.interval_cpu_ns.saturating_sub(drained.clipped_ns);
    for (caller, callee, t) in drained.edges {
        let (Some(caller), Some(callee)) = (
            name_of(jvmti, jni, names, caller),
            name_of(jvmti, jni, names, callee),
        ) else {
            pending.dropped += u64::from(t.samples);
            continue;
        };
        pending.edges.push(EdgeCount {
            caller,
            callee,
            samples: t.samples,
            intervals: t.intervals,
            interval_cpu_ns: t.cpu_ns,
        });
    }
    if pending.bursts > 0 || !pending.edges.is_empty() || pending.counted_ns > 0 {
        pending.path_ns = edges::path_ns();
        outbox::send(Message::EdgeSamples(std::mem::take(pending)));
    }
}

/// A method's name, looked up once.
fn name_of(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    names: &mut HashMap<usize, Option<EdgeMethod>>,
    m: MethodId,
) -> Option<EdgeMethod> {
    names
        .entry(m.addr())
        .or_insert_with(|| {
            jni.with_local_frame(4, |jni| {
                let (name, descriptor) = jvmti.method_name(m).ok()?;
                let class = jvmti.method_declaring_class(&jni, m).ok()?;
                let sig = jvmti.class_signature(class).ok()?;
                let class = binary_name(descriptor_class(&sig)?);
                Some(EdgeMethod {
                    class,
                    name,
                    descriptor,
                })
            })
        })
        .clone()
}
