//! Probe calibration inside the target, at the start of a session.
//!
//! JFluid's method: run many entry/exit pairs of the very probes the
//! profiled code runs, in batches (here the median batch of the fastest
//! window of batches is kept, see `best`). The
//! class `sprig.rt.Calibration` is instrumented by the rewriter exactly like
//! user code (`loop` with the root probes, `empty` with the plain ones)
//! and defined once per JVM in the bootstrap loader. The agent's control
//! thread calls `Calibration.loop(n)` through JNI until the JIT has compiled it;
//! its probes record into a private ring (same producer code as the
//! session's ring, see `probe::with_private_ring`) that this module drains
//! after every batch, so no calibration event reaches the CLI.
//!
//! From the timestamps of one batch (`e_k`, `x_k`: entry and exit of the
//! k-th call of `empty`):
//! - inner time t_I = mean of `x_k - e_k`: what a call's own measured time
//!   holds of its two probes (entry after its clock read, exit up to its
//!   clock read);
//! - outer time t_O = mean spacing `e_{k+1} - e_k` minus the mean inner
//!   time: what the caller's measured time holds of the pair (entry up to
//!   its clock read, exit after it, the call and return themselves).
//!
//! The CCT builder then charges a node `own - calls * t_I - children * t_O`.

use crate::ffi::Jni;
use crate::probe;
use crate::probe_class;
use sprig_wire::ring::{Consumer, Region, RingConfig};
use sprig_wire::{ClockKind, Event, EventKind};
use std::time::{Duration, Instant};

/// Internal name of the calibration class. (An earlier sprig defined
/// `sprig/rt/Calib`, with method ids past the tracked range, in the JVMs it
/// attached to; this class has a name of its own so those JVMs get it too.)
const CLASS: &str = "sprig/rt/Calibration";
static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Calibration.class"));

/// Method ids of the calibration class: the last two ids of the tracked
/// range, which the session's id table never hands out
/// (`methods::RESERVED_FIRST`). Being tracked ids, switched on and marked
/// called before the calibration runs (`methods::reserve_calibration`),
/// they take every check a revealed user method's probes take (the agent's
/// active and first-call bitmaps) and nothing else.
pub const LOOP_ID: u32 = sprig_wire::event::CALIBRATION_LOOP_ID;
pub const EMPTY_ID: u32 = sprig_wire::event::CALIBRATION_EMPTY_ID;
const _: () = assert!(LOOP_ID == crate::methods::MAX_TRACKED - 1);
const _: () = assert!(EMPTY_ID == crate::methods::RESERVED_FIRST);

/// Calls of `empty` per batch.
const BATCH: i32 = 1000;
/// The private ring is drained after this many batches (about 48,000
/// events, one to two milliseconds of probing). The CLI reads the
/// session's ring every 10 ms or so; draining every 120 batches here (in a
/// private ring of 96 segments) gave the same figures to 0.1 ns on JDK 17
/// (five profiling sessions, 2026-11-25, 732b2b7), so the shorter cadence and the smaller
/// ring stay.
const DRAIN_EVERY: u32 = 24;
/// Batches run before any is measured (interpreter and C1 code).
const WARMUP_BATCHES: u32 = 96;

/// The calibration result, in ticks of the session clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub inner_ticks: f64,
    pub outer_ticks: f64,
    /// Batches measured (each of `BATCH` calls).
    pub samples: u32,
    /// The calibration class has `burst(int)`, which the probe class calls
    /// for the profiled threads' own calibration bursts (a class an older
    /// sprig defined in this JVM has not).
    pub bursts: bool,
}

/// Calibrates the probes on the calling (agent) thread within about
/// `budget`, recording into a private ring in anonymous shared memory, like
/// the session's; `clock` and `ticks_per_sec` are the session ring's, so the
/// figures are in the ticks the events carry.
pub fn run(
    jni: Jni<'_>,
    clock: ClockKind,
    ticks_per_sec: u64,
    budget: Duration,
) -> Result<Figures, String> {
    let cfg = RingConfig {
        segment_bytes: 64 << 10,
        segments: 32,
        clock,
        ticks_per_sec,
    };
    let (region, _fd) = Region::create_memfd(&cfg).map_err(|e| format!("private ring: {e}"))?;
    let mut consumer = Consumer::new(region.clone());
    crate::methods::reserve_calibration(&[LOOP_ID, EMPTY_ID]);
    let result = jni.with_local_frame(16, |jni| {
        let class = calibration_class(jni)?;
        let bursts = jni.has_static_method(class, "burst", c"(I)V");
        probe::with_private_ring(region, || measure(jni, class, &mut consumer, budget))
            .map(|f| Figures { bursts, ..f })
    });
    drop(consumer);
    result
}

/// A global reference to the calibration class, once defined (for the
/// bursts inside long root calls).
pub fn class_ref(jni: Jni<'_>) -> Option<crate::ffi::Global> {
    jni.with_local_frame(4, |jni| {
        let c = jni.find_class(CLASS).ok()??;
        jni.new_global(c).ok()
    })
}

/// The calibration class, defined (instrumented) by the first profiling
/// session in this JVM (or the first `--edges` session, which measures
/// its bursts' own path on it).
pub fn calibration_class<'a>(jni: Jni<'a>) -> Result<crate::ffi::Local<'a>, String> {
    if let Some(c) = jni.find_class(CLASS).map_err(|e| e.to_string())? {
        return Ok(c);
    }
    let targets = [
        sprig_rewriter::Target {
            name: "loop".into(),
            descriptor: "(I)V".into(),
            id: LOOP_ID,
            probes: probe_class::ROOT_PROBES,
        },
        sprig_rewriter::Target {
            name: "empty".into(),
            descriptor: "()V".into(),
            id: EMPTY_ID,
            probes: probe_class::PLAIN_PROBES,
        },
    ];
    let out = sprig_rewriter::instrument(BYTES, &targets, probe_class::probe_sets())
        .map_err(|e| format!("cannot instrument the calibration class: {e}"))?;
    if out.instrumented_count() != targets.len() {
        return Err("the calibration class was not fully instrumented".into());
    }
    jni.define_bootstrap_class(CLASS, &out.bytes)
        .map_err(|e| format!("cannot define the calibration class: {e}"))
}

fn measure(
    jni: Jni<'_>,
    class: crate::ffi::Local<'_>,
    consumer: &mut Consumer,
    budget: Duration,
) -> Result<Figures, String> {
    let start = Instant::now();
    let mut events: Vec<Event> =
        Vec::with_capacity((2 * BATCH as usize + 16) * DRAIN_EVERY as usize);
    let mut windows: Vec<Window> = Vec::new();
    let mut window: Vec<(f64, f64)> = Vec::new();
    let mut measured = 0u32;
    let mut batches = 0u32;
    // Each window runs on the next CPU this thread may use: the host can
    // slow one of this machine's virtual CPUs for seconds while the other
    // runs at full speed (a calibration that ran slow throughout over-
    // subtracted, charging a call-dense root 0 ns), and the fastest window
    // is the one kept. Put back as it was afterwards.
    let affinity = crate::ffi::Affinity::current().filter(|a| a.cpus().len() > 1);
    let pin = |n: usize| {
        if let Some(a) = &affinity {
            let cpus = a.cpus();
            a.pin(cpus[n % cpus.len()]);
        }
    };
    let mut cpu_turn = 0usize;
    pin(cpu_turn);
    loop {
        let elapsed = start.elapsed();
        if batches >= WARMUP_BATCHES && elapsed >= budget && settled(&windows) {
            break;
        }
        if elapsed >= budget * 3 {
            break;
        }
        jni.call_static_void_int(class, "loop", BATCH)
            .map_err(|e| format!("Calibration.loop: {e}"))?;
        batches += 1;
        if !batches.is_multiple_of(DRAIN_EVERY) {
            continue;
        }
        events.clear();
        consumer.poll(&mut |_, evs| events.extend_from_slice(evs));
        if batches <= WARMUP_BATCHES {
            continue;
        }
        for batch in split_batches(&events) {
            if let Some(f) = batch_figures(batch) {
                measured += 1;
                window.push(f);
            }
        }
        if window.len() >= WINDOW {
            windows.extend(Window::of(&window));
            window.clear();
            cpu_turn += 1;
            pin(cpu_turn);
        }
    }
    if let Some(a) = &affinity {
        a.restore();
    }
    windows.extend(Window::of(&window));
    if crate::probe_class::debug_on() {
        let list: Vec<String> = windows
            .iter()
            .map(|w| format!("{:.1}+{:.1}", w.pair(), w.spread))
            .collect();
        eprintln!(
            "sprig agent: calibration windows (pair ticks + spread): {}",
            list.join(" ")
        );
    }
    match best(&windows) {
        Some(w) => Ok(Figures {
            inner_ticks: w.inner,
            outer_ticks: w.outer,
            samples: measured,
            bursts: false,
        }),
        None => Err(format!(
            "no usable batch in {batches} (the probes recorded nothing: is profiling on?)"
        )),
    }
}

/// Batches per window (four drains, a few milliseconds).
const WINDOW: usize = 4 * DRAIN_EVERY as usize;

/// The median batch of a few milliseconds of calibration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub inner: f64,
    pub outer: f64,
    /// Interquartile range of the batches' pair time, relative to the
    /// median pair: a window that was disturbed part of the time is wide.
    pub spread: f64,
}

impl Window {
    /// Inner plus outer time: what one instrumented call costs.
    pub fn pair(&self) -> f64 {
        self.inner + self.outer
    }

    /// `None` for a window of fewer than a quarter of `WINDOW` batches.
    pub fn of(batches: &[(f64, f64)]) -> Option<Window> {
        if batches.len() < WINDOW / 4 {
            return None;
        }
        let (inner, outer) = typical(batches)?;
        let mut pairs: Vec<f64> = batches.iter().map(|b| b.0 + b.1).collect();
        pairs.sort_by(f64::total_cmp);
        let q = |f: f64| pairs[((pairs.len() - 1) as f64 * f) as usize];
        let pair = inner + outer;
        let spread = if pair > 0.0 {
            (q(0.75) - q(0.25)) / pair
        } else {
            f64::INFINITY
        };
        Some(Window {
            inner,
            outer,
            spread,
        })
    }
}

/// Windows needed before the result can be trusted.
const MIN_WINDOWS: usize = 6;

/// The probes run at their settled speed once the best window is not among
/// the latest two (the JIT has finished with the loop; a C2 compile that
/// lands late makes the newest windows the fastest, and calibration goes
/// on, up to three budgets).
fn settled(windows: &[Window]) -> bool {
    if windows.len() < MIN_WINDOWS {
        return false;
    }
    let best_at = windows
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.pair().total_cmp(&b.1.pair()))
        .map(|(i, _)| i);
    best_at.is_some_and(|i| i + 2 < windows.len())
}

/// The fastest window's median batch. Every disturbance (a compiler thread
/// or the CLI on the same core, preemption, code not yet compiled) only
/// slows a window, so the fastest is the probes' own cost; a window's
/// median is immune to the odd batch that ran fast (the minimum batch,
/// JFluid's choice, sits about 1 ns per pair below it). Of windows within
/// 2% of the fastest, the steadiest is taken.
pub fn best(windows: &[Window]) -> Option<Window> {
    let fastest = windows.iter().map(Window::pair).min_by(f64::total_cmp)?;
    windows
        .iter()
        .filter(|w| w.pair() <= fastest * 1.02)
        .min_by(|a, b| a.spread.total_cmp(&b.spread))
        .copied()
}

/// The median over batches of the inner and of the outer time (each batch
/// is already a mean over 1,000 calls).
pub fn typical(figures: &[(f64, f64)]) -> Option<(f64, f64)> {
    if figures.is_empty() {
        return None;
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Some((
        med(figures.iter().map(|f| f.0).collect()),
        med(figures.iter().map(|f| f.1).collect()),
    ))
}

/// The batches (root contexts) in a drained sequence of events: each
/// slice runs from a `RootEntry` of the loop to the next one.
fn split_batches(events: &[Event]) -> impl Iterator<Item = &[Event]> {
    let starts: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == Some(EventKind::RootEntry) && e.id == LOOP_ID)
        .map(|(i, _)| i)
        .collect();
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .copied()
        .chain(std::iter::once(events.len()))
        .collect();
    starts
        .into_iter()
        .zip(ends)
        .map(move |(a, b)| &events[a..b])
}

/// Inner and outer time (mean ticks) of one batch: the events of one
/// `Calib.loop` call. `None` when the batch is not one clean root context
/// of entry/exit pairs (e.g. the ring made the thread wait).
pub fn batch_figures(events: &[Event]) -> Option<(f64, f64)> {
    let start = events
        .iter()
        .position(|e| e.kind() == Some(EventKind::RootEntry) && e.id == LOOP_ID)?;
    let mut entries: Vec<u64> = Vec::with_capacity(events.len() / 2);
    let mut inners: Vec<u64> = Vec::with_capacity(events.len() / 2);
    let mut inner_sum: u128 = 0;
    let mut open: Option<u64> = None;
    for e in &events[start + 1..] {
        match e.kind()? {
            EventKind::MethodEntry if e.id == EMPTY_ID && open.is_none() => {
                open = Some(e.ts);
                entries.push(e.ts);
            }
            EventKind::MethodExit if e.id == EMPTY_ID => {
                let t = open.take()?;
                let d = e.ts.checked_sub(t)?;
                inner_sum += u128::from(d);
                inners.push(d);
            }
            EventKind::RootExit if e.id == LOOP_ID && open.is_none() => break,
            _ => return None,
        }
    }
    let n = entries.len();
    if n < 2 || inners.len() != n {
        return None;
    }
    let inner = inner_sum as f64 / n as f64;
    // The spacing covers calls 0..n-1: take their inner time out of the
    // same calls, so a call slowed down (say, preempted) counts in both
    // terms and cancels instead of making the outer time negative.
    let span = entries[n - 1].checked_sub(entries[0])?;
    let inner_first: u64 = inners[..n - 1].iter().sum();
    let outer = span.checked_sub(inner_first)? as f64 / (n - 1) as f64;
    Some((inner, outer))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, id: u32, ts: u64) -> Event {
        Event::new(kind, id, ts)
    }

    #[test]
    fn figures_from_a_synthetic_batch() {
        // Entries every 30 ticks, each call 12 ticks long: t_I 12, t_O 18.
        let mut v = vec![ev(EventKind::RootEntry, LOOP_ID, 100)];
        for k in 0..10u64 {
            let e = 110 + 30 * k;
            v.push(ev(EventKind::MethodEntry, EMPTY_ID, e));
            v.push(ev(EventKind::MethodExit, EMPTY_ID, e + 12));
        }
        v.push(ev(EventKind::RootExit, LOOP_ID, 500));
        let (i, o) = batch_figures(&v).unwrap();
        assert!((i - 12.0).abs() < 1e-9, "{i}");
        assert!((o - 18.0).abs() < 1e-9, "{o}");
    }

    #[test]
    fn uneven_calls_average() {
        let mut v = vec![ev(EventKind::RootEntry, LOOP_ID, 0)];
        // inner 10 and 20 (mean 15), entries at 0, 40, 80 (spacing 40).
        for (e, d) in [(0u64, 10u64), (40, 20), (80, 15)] {
            v.push(ev(EventKind::MethodEntry, EMPTY_ID, e));
            v.push(ev(EventKind::MethodExit, EMPTY_ID, e + d));
        }
        v.push(ev(EventKind::RootExit, LOOP_ID, 120));
        let (i, o) = batch_figures(&v).unwrap();
        assert!((i - 15.0).abs() < 1e-9, "{i}");
        assert!((o - 25.0).abs() < 1e-9, "{o}");
    }

    #[test]
    fn a_slow_last_call_does_not_make_the_outer_time_negative() {
        // Calls 0 and 1 take 10 ticks at a spacing of 30; the last one is
        // preempted for 1,000 ticks.
        let v = vec![
            ev(EventKind::RootEntry, LOOP_ID, 0),
            ev(EventKind::MethodEntry, EMPTY_ID, 0),
            ev(EventKind::MethodExit, EMPTY_ID, 10),
            ev(EventKind::MethodEntry, EMPTY_ID, 30),
            ev(EventKind::MethodExit, EMPTY_ID, 40),
            ev(EventKind::MethodEntry, EMPTY_ID, 60),
            ev(EventKind::MethodExit, EMPTY_ID, 1060),
            ev(EventKind::RootExit, LOOP_ID, 1070),
        ];
        let (i, o) = batch_figures(&v).unwrap();
        assert!((o - 20.0).abs() < 1e-9, "{o}");
        assert!(i > 300.0, "{i}");
    }

    #[test]
    fn a_batch_with_a_wait_or_a_broken_pair_is_rejected() {
        let mut v = vec![ev(EventKind::RootEntry, LOOP_ID, 0)];
        v.push(ev(EventKind::MethodEntry, EMPTY_ID, 10));
        v.push(ev(EventKind::AdjustTime, 0, 500));
        v.push(ev(EventKind::MethodExit, EMPTY_ID, 20));
        assert_eq!(batch_figures(&v), None);
        let v = vec![
            ev(EventKind::RootEntry, LOOP_ID, 0),
            ev(EventKind::MethodExit, EMPTY_ID, 20),
        ];
        assert_eq!(batch_figures(&v), None);
        let v = vec![
            ev(EventKind::RootEntry, LOOP_ID, 0),
            ev(EventKind::MethodEntry, EMPTY_ID, 30),
            ev(EventKind::MethodExit, EMPTY_ID, 20),
        ];
        assert_eq!(batch_figures(&v), None);
        assert_eq!(batch_figures(&[]), None);
    }

    #[test]
    fn drained_events_split_into_batches() {
        let mut v = vec![ev(EventKind::ThreadStart, 0, 1)];
        for b in 0..3u64 {
            let t = 1000 * b;
            v.push(ev(EventKind::RootEntry, LOOP_ID, t));
            for k in 0..4u64 {
                v.push(ev(EventKind::MethodEntry, EMPTY_ID, t + 10 + 20 * k));
                v.push(ev(EventKind::MethodExit, EMPTY_ID, t + 15 + 20 * k));
            }
            v.push(ev(EventKind::RootExit, LOOP_ID, t + 100));
        }
        let batches: Vec<&[Event]> = split_batches(&v).collect();
        assert_eq!(batches.len(), 3);
        for b in batches {
            assert_eq!(batch_figures(b), Some((5.0, 15.0)));
        }
    }

    #[test]
    fn the_typical_batch_is_the_median() {
        assert_eq!(typical(&[]), None);
        let f = [
            (10.0, 5.0),
            (50.0, 9.0),
            (11.0, 6.0),
            (12.0, 100.0),
            (9.0, 7.0),
        ];
        assert_eq!(typical(&f), Some((11.0, 7.0)));
    }

    fn w(pair: f64, spread: f64) -> Window {
        Window {
            inner: pair / 2.0,
            outer: pair / 2.0,
            spread,
        }
    }

    #[test]
    fn a_window_is_its_median_batch_with_its_spread() {
        assert_eq!(Window::of(&[(10.0, 10.0); 3]), None);
        let mut batches = vec![(10.0, 10.0); WINDOW];
        batches[0] = (1.0, 1.0);
        batches[1] = (90.0, 90.0);
        let win = Window::of(&batches).unwrap();
        assert_eq!((win.inner, win.outer, win.spread), (10.0, 10.0, 0.0));
        let wide: Vec<(f64, f64)> = (0..WINDOW).map(|i| (i as f64, 0.0)).collect();
        let win = Window::of(&wide).unwrap();
        assert!(win.spread > 0.9 && win.spread < 1.1, "{win:?}");
    }

    #[test]
    fn the_fastest_window_wins_and_of_close_ones_the_steadiest() {
        assert_eq!(best(&[]), None);
        // Disturbed windows are slower; the odd fast batch is inside a
        // window's median already.
        let ws = [w(60.0, 0.1), w(42.0, 0.05), w(50.0, 0.01), w(42.5, 0.01)];
        assert_eq!(best(&ws), Some(ws[3]));
        let ws = [w(60.0, 0.1), w(42.0, 0.05), w(50.0, 0.01)];
        assert_eq!(best(&ws), Some(ws[1]));
    }

    #[test]
    fn calibration_goes_on_while_the_windows_still_get_faster() {
        let falling: Vec<Window> = (0..10).map(|i| w(60.0 - i as f64, 0.01)).collect();
        assert!(!settled(&falling));
        assert!(!settled(&falling[..3]));
        let mut flat = falling.clone();
        flat.extend([w(52.0, 0.01), w(51.5, 0.01)]);
        assert!(settled(&flat));
    }
}
