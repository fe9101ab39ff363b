//! The revelation driver: feeds sprig-reveal's [`Revealer`] with the loaded
//! classes, the class loads and the first calls, and applies the batches it
//! hands back (Scheme B lazy, Scheme A eager; see ARCHITECTURE.md and
//! docs/revelation.md).
//!
//! # Where the facts come from
//!
//! - Classes loaded before the attach: cheap JVMTI facts only (signature,
//!   superclass, interfaces, modifiers, declared methods), no class bytes.
//!   Their methods count as "having calls" (the bytes are not at hand), so
//!   their first call is always checked. JVMTI lists no methods of a class
//!   that is loaded but not linked yet (the verifier loads classes it only
//!   checks assignments against): such a class joins the mirror from the
//!   ClassPrepare event, on the thread linking it, before any of its code
//!   can run, and gets what revelation reaches in it instrumented there.
//! - Class bytes: the class file load hook sees them when a class loads and
//!   every time sprig retransforms one; the call sites of every method of a
//!   class with instrumented methods are cached then. A method can only run
//!   instrumented after its class went through the hook, so its call sites
//!   are known at its first call.
//!
//! # First calls
//!
//! The probing thread does the work itself, as JFluid does: under the
//! revealer lock it scans the method's call sites and records the new
//! instrumentation plan (announcing new ids), then it retransforms the named
//! classes in one batch. The probe records the time as `AdjustTime`, so the
//! thread is not charged for it.
//!
//! # Dormant probes
//!
//! When the hook rewrites a class for its revealed methods (lazy scheme),
//! it gives every other method with code (`<clinit>` excepted) the plain
//! probes too, with ids that stay inactive: such a probe returns before
//! recording anything (`methods::is_active`). A later batch whose methods
//! all hold probes already (same probe kind) only activates their ids and
//! announces them: no redefinition. On javac this cut the redefinition
//! batches about six-fold (BENCHMARKS.md). Soundness of the revelation
//! means a dormant method is not called inside a root context, except on
//! the paths revelation misses by design (see callgraph's reveal docs) or
//! a call racing its own revelation on another thread; if such a call is
//! still running when its id activates, its exit arrives without an
//! entry, which the CCT builder tolerates. `--no-dormant` turns this off.
//!
//! # Locks
//!
//! `REDEFINE` (one batch at a time) is taken before anything else and only
//! with a bound; `STATE` and the ledger's lock are never held together
//! nor across a JVMTI call that can run the hook. The hook only takes
//! `STATE` and the ledger's lock, one at a time.
//!
//! # Files
//!
//! From the bottom up: `state` (the one lock and what it guards), `plan`
//! (recording a step's batches), `mirror` (JVMTI's facts of loaded
//! classes), `batches` (redefinitions, deferred work), `prefetch` (dormant
//! probes ahead), `sites` (watched call sites), `calls` (what running code
//! reports), `hook` (what the class file load hook instruments), `debug`;
//! this file holds the session's configuration, start, tick and end.

mod batches;
mod calls;
mod debug;
mod hook;
mod mirror;
mod plan;
mod prefetch;
mod seen;
mod sites;
mod state;

pub use self::batches::{is_untouched, quiesce, release, untouched};
pub use self::calls::{
    entered, first_call, on_class_prepare, reflective_call, reflective_target_seen,
};
pub use self::debug::{count_charged_out, count_dormant_passed, count_site_call};
pub use self::hook::targets;
pub use self::sites::{dispatched_call, sites_handed};
pub use self::state::{enabled, reveal_ns};

use self::batches::Loaded;
use self::batches::classes;
use self::batches::redefine;
use self::batches::settle;
use self::batches::unsettled;
use self::batches::warn_left;
use self::debug::debug_uncalled;
use self::mirror::class_facts;
use self::mirror::mirror_prepared_of;
use self::mirror::signature_name;
use self::plan::plan_step;
use self::prefetch::NO_PREFETCH_ENV;
use self::prefetch::prefetch;
use self::state::HIDDEN_SKIPPED;
use self::state::ON;
use self::state::REVEAL_NS;
use self::state::State;
use self::state::WATCHING_LINKS;
use self::state::edge_name;
use self::state::state;
use crate::ffi::{Event, Jni, Jvmti};
use crate::ledger;
use sprig_reveal::{ClassFilter, RevealConfig, Revealer, Scheme};
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::names::binary_name;
use sprig_wire::control::RevealStats;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// A session starts: builds its revealer. Errors name the bad filter
/// pattern.
pub fn begin_session(
    scheme: sprig_wire::control::Scheme,
    include: &[String],
    exclude: &[String],
    dormant: bool,
    skip_trivial: u32,
    receivers: bool,
) -> Result<(), String> {
    let parse = |v: &[String]| -> Result<Vec<ClassFilter>, String> {
        v.iter()
            .map(|t| ClassFilter::parse(t).map_err(|e| e.to_string()))
            .collect()
    };
    let scheme = match scheme {
        sprig_wire::control::Scheme::Lazy => Scheme::Lazy,
        sprig_wire::control::Scheme::Eager => Scheme::Eager,
    };
    // Eager instruments everything reachable at once: dormant probes
    // would save it no redefinition, only cost calls outside the root.
    let dormant = dormant && scheme == Scheme::Lazy;
    // Classes whose constant pool grows at every redefinition (see
    // `originals`) stay out.
    let mut exclude = parse(exclude)?;
    let frozen: Vec<String> = ledger::originals::frozen()
        .iter()
        .map(|n| binary_name(n))
        .collect();
    for name in &frozen {
        if let Ok(f) = ClassFilter::exact(name) {
            exclude.push(f);
        }
    }
    if !frozen.is_empty() {
        crate::outbox::send(sprig_wire::control::Message::Warning(format!(
            "left uninstrumented in this JVM, because HotSpot copies their NaN constants again \
             at every redefinition and an earlier session saw their constant pool grow: {}",
            frozen.join(", ")
        )));
    }
    let config = RevealConfig {
        scheme,
        include: parse(include)?,
        exclude,
        // Callbacks of live classes are caught by their dormant probes.
        live_callbacks_where_they_run: dormant,
    };
    *state() = Some(State {
        revealer: Revealer::new(config),
        by_probe: HashMap::new(),
        plan: HashMap::new(),
        sites: HashMap::new(),
        deferred: BTreeSet::new(),
        unprepared: HashMap::new(),
        scan_pending: false,
        retries: HashMap::new(),
        watching_reflection: false,
        reflected: std::collections::HashSet::new(),
        installed: HashMap::new(),
        activated_in_place: 0,
        dormant_keys: HashMap::new(),
        dormant,
        ahead_pending: false,
        ahead: false,
        held: HashMap::new(),
        skip_trivial,
        trivial: HashMap::new(),
        receivers: receivers && scheme == Scheme::Lazy,
        site_ids: HashMap::new(),
        site_info: Vec::new(),
        by_entries: HashSet::new(),
    });
    *classes() = Some(Loaded::default());
    REVEAL_NS.store(0, Ordering::Relaxed);
    HIDDEN_SKIPPED.store(0, Ordering::Relaxed);
    WATCHING_LINKS.store(false, Ordering::Relaxed);
    seen::clear();
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Session start: mirrors every loaded class, arms the roots and applies
/// the first batch (lazy: the roots; eager: the whole reachable graph,
/// capturing class bytes round by round). Returns the number of methods
/// each root pattern matched.
pub fn start(jvmti: &Jvmti, jni: Jni<'_>, roots: &[MethodPattern]) -> Vec<usize> {
    let t0 = Instant::now();
    if let Some(l) = classes().as_mut() {
        l.roots = roots.to_vec();
    }
    jni.with_local_frame(64, |jni| {
        let loaded = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return;
        };
        let mut refs = Vec::new();
        for &c in &loaded {
            jni.with_local_frame(32, |jni| {
                let Some(name) = signature_name(jvmti, c) else {
                    return;
                };
                if !jvmti.is_modifiable(c).unwrap_or(false) {
                    HIDDEN_SKIPPED.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                // Another loader's class of a name mirrored already: the
                // mirror keeps the first one's facts.
                let mirrored = st.revealer.hierarchy().contains(&name);
                match (!mirrored).then(|| class_facts(jvmti, jni, c, &name)) {
                    None => {}
                    Some(Some(info)) => {
                        st.revealer.on_class_loaded(info, 0, Vec::new);
                    }
                    Some(None) => {
                        if let Ok(g) = jni.new_global(c) {
                            st.unprepared.entry(name.clone()).or_default().push(g);
                        }
                    }
                }
                if st.revealer.instrumentable(&name)
                    && let Ok(g) = jni.new_global(c)
                {
                    refs.push((name, g));
                }
            });
        }
        let watch_links = !st.unprepared.is_empty();
        drop(guard);
        if watch_links {
            match jvmti.set_event(Event::ClassPrepare, true) {
                Ok(()) => WATCHING_LINKS.store(true, Ordering::Release),
                // The revelation steps poll them instead, a little late.
                Err(e) => {
                    crate::outbox::send(sprig_wire::control::Message::Warning(format!(
                        "revelation: cannot watch class linking ({e}): overrides in \
                         classes loaded before the attach but linked later may miss \
                         their first calls"
                    )));
                }
            }
        }
        let mut cache = classes();
        match cache.as_mut() {
            Some(loaded) => {
                for (name, g) in refs {
                    loaded.add(name, g);
                }
            }
            None => {
                for (_, g) in refs {
                    jni.delete_global(g);
                }
            }
        }
    });
    let hits = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return vec![0; roots.len()];
        };
        for r in roots {
            st.revealer.add_root(r.clone());
        }
        let included = st.revealer.probe_path_included();
        if !included.is_empty() {
            crate::outbox::send(sprig_wire::control::Message::Warning(format!(
                "--include: the JDK code sprig's own probes call stays uninstrumented ({}): \
                 probes in it would call themselves without end",
                included.join(", ")
            )));
        }
        st.revealer.roots().map(|(_, n)| n).collect::<Vec<_>>()
    };
    let eager = state()
        .as_ref()
        .is_some_and(|s| s.revealer.scheme() == Scheme::Eager);
    // Classes linked between the listing above and the event's start.
    let swept = match state().as_mut() {
        Some(st) => mirror_prepared_of(jvmti, jni, st, None),
        None => Vec::new(),
    };
    let mut first = plan_step(|rv, _| rv.take_redefinitions());
    first.extend(swept);
    first.sort();
    first.dedup();
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), first);
    // Dormant probes ahead: now, or, without a root instrumented yet (none
    // of their classes is loaded), from the control thread once one is.
    let ahead_now = !eager
        && std::env::var_os(NO_PREFETCH_ENV).is_none()
        && state().as_mut().is_some_and(|st| {
            st.ahead = st.dormant;
            let any = st.revealer.instrumented().next().is_some();
            st.ahead_pending = st.ahead && !any;
            st.ahead && any
        });
    if ahead_now {
        prefetch(jvmti, jni);
    }
    if eager {
        if let Some(st) = state().as_mut() {
            st.scan_pending = true;
        }
        settle(jvmti, jni);
    }
    warn_left();
    hits
}

/// Whether this session checks receivers at call sites.
pub fn receivers_on() -> bool {
    state().as_ref().is_some_and(|st| st.receivers)
}

/// Control thread, every tick: retransforms classes whose batches were
/// deferred (loads that revealed methods of other classes, classes not yet
/// defined, batches past the wait bound).
pub fn service(jvmti: &Jvmti, jni: Jni<'_>) {
    if enabled() && unsettled() {
        settle(jvmti, jni);
    }
    let ahead = state().as_mut().is_some_and(|st| {
        let due = st.ahead_pending && st.revealer.instrumented().next().is_some();
        if due {
            st.ahead_pending = false;
        }
        due
    });
    if ahead {
        prefetch(jvmti, jni);
    }
    warn_left();
}

/// Spares `loops` (see `frames::running_loops`) from the rules that guess
/// what a call may reach.
pub fn spare_loops(loops: Vec<crate::frames::Frame>) {
    if let Some(st) = state().as_mut() {
        st.revealer.spare(
            loops
                .into_iter()
                .map(|f| sprig_reveal::MethodKey::new(&f.class, &f.name, &f.descriptor)),
        );
    }
}

/// A warning naming the spared loops that a guessing rule reached: a call
/// of one inside a root context was not counted (`None` for none).
pub fn spared_warning() -> Option<String> {
    let guard = state();
    let st = guard.as_ref()?;
    let names: Vec<String> = st
        .revealer
        .spared_reached()
        .map(|k| format!("{}::{}", binary_name(&k.class), k.name))
        .collect();
    if names.is_empty() {
        return None;
    }
    let n = names.len();
    Some(format!(
        "{n} thread loop{} running at the attach {} left without probes, though a call inside \
         the roots could reach {} by class hierarchy analysis: {}. Redefining {} would have left \
         {} interpreted for good; a call of {} inside a root context is not counted",
        if n == 1 { "" } else { "s" },
        if n == 1 { "was" } else { "were" },
        if n == 1 { "it" } else { "them" },
        names.join(", "),
        if n == 1 { "its class" } else { "their classes" },
        if n == 1 { "the loop" } else { "the loops" },
        if n == 1 { "it" } else { "one" },
    ))
}

/// Revelation counters for the report (`None` when revelation is off).
pub fn stats() -> Option<RevealStats> {
    let guard = state();
    let st = guard.as_ref()?;
    let stats = st.revealer.stats();
    Some(RevealStats {
        // Held methods are reached but not instrumented.
        revealed_by: stats
            .revealed_by
            .iter()
            .map(|(k, n)| {
                let held = st.held.values().filter(|h| h.3 == *k).count();
                (edge_name(*k).to_string(), n.saturating_sub(held) as u64)
            })
            .collect(),
        scanned: stats.scanned as u64,
        reachable: stats.reachable as u64,
        reachable_unloaded: stats.reachable_unloaded as u64,
        classes_mirrored: stats.loaded_classes as u64,
        unmodifiable_skipped: HIDDEN_SKIPPED.load(Ordering::Relaxed),
        reflective_sites: stats.reflective_sites as u64,
        dormant: dormant_count(st),
        activated_in_place: st.activated_in_place,
        trivial_skipped: st.trivial.values().map(|t| t.reached.len() as u64).sum(),
    })
}

/// Methods holding probes that never became active.
fn dormant_count(st: &State) -> u64 {
    st.installed
        .values()
        .flat_map(|m| m.values())
        .filter(|(id, _)| !crate::methods::is_active(*id))
        .count() as u64
}

/// The session ends (after the restore): class references released, the
/// revealer dropped.
pub fn end_session(jni: Jni<'_>) {
    ON.store(false, Ordering::Release);
    if crate::probe_class::debug_on() {
        debug_uncalled();
    }
    seen::clear();
    if let Some(loaded) = classes().take() {
        for g in loaded.into_globals() {
            jni.delete_global(g);
        }
    }
    let st = state().take();
    // The references to classes that were still unprepared.
    for g in st
        .into_iter()
        .flat_map(|st| st.unprepared.into_values().flatten())
    {
        jni.delete_global(g);
    }
}
