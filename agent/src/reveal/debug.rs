//! The debug lines (`SPRIG_AGENT_DEBUG` in the target's environment) and
//! the counters only they read.

use super::sites::MAX_RECEIVERS;
use super::sites::MAX_REPEATS;
use super::state::WatchedSite;
use super::state::edge_name;
use super::state::state;
use sprig_rewriter::Check;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries of a method with dormant probes inside a root context that the
/// probes' JNI path let pass unrecorded (not revealed: refused once, or no
/// session), since the last [`take_site_calls`]: for the debug lines.
pub(super) static DORMANT_PASSED: AtomicU64 = AtomicU64::new(0);

/// `nSite` calls since the last [`take_site_calls`], by what they returned
/// (`probe::SITE_SEEN`, `SITE_DONE`, `SITE_AGAIN`): for the debug lines.
pub(super) static SITE_CALLS: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

/// The `nSite` calls counted so far, by result, and the dormant entries
/// let pass; the counts start again.
pub(super) fn take_site_calls() -> ([u64; 3], u64) {
    (
        SITE_CALLS.each_ref().map(|n| n.swap(0, Ordering::Relaxed)),
        DORMANT_PASSED.swap(0, Ordering::Relaxed),
    )
}

/// Counts an `nSite` call that returned `result` (for the debug lines).
pub fn count_site_call(result: i32) {
    if let Some(n) = SITE_CALLS.get(result as usize) {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// JVM events whose handling `probe::charged_out` took out of a root
/// context's time, and their nanoseconds, since the debug lines last
/// read them.
static CHARGED_OUT: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// Counts a JVM event handled on a thread inside a root context and the
/// `ns` it took, charged to the profiler (for the debug lines).
pub fn count_charged_out(ns: u64) {
    CHARGED_OUT[0].fetch_add(1, Ordering::Relaxed);
    CHARGED_OUT[1].fetch_add(ns, Ordering::Relaxed);
}

/// Counts an entry of a dormant method that the probe let pass (for the
/// debug lines).
pub fn count_dormant_passed() {
    DORMANT_PASSED.fetch_add(1, Ordering::Relaxed);
}

/// Debugging Scheme B's precision (`SPRIG_AGENT_DEBUG` in the target's
/// environment): every instrumented method the session never saw called,
/// on the target's stderr, with the chain of edges that revealed it.
pub(super) fn debug_uncalled() {
    let guard = state();
    let Some(st) = guard.as_ref() else {
        return;
    };
    let mut lines = Vec::new();
    for (&id, &(rid, _)) in &st.by_probe {
        if crate::methods::was_called(id) || st.held.contains_key(&id) {
            continue;
        }
        let Some(key) = st.revealer.method(rid) else {
            continue;
        };
        let chain = st
            .revealer
            .explain(key)
            .unwrap_or_default()
            .iter()
            .map(|(k, e)| format!("{} {}::{}", edge_name(*e), k.class, k.name))
            .collect::<Vec<_>>()
            .join(" > ");
        lines.push(format!(
            "sprig agent: uncalled {}::{}{} ({}): {chain}",
            key.class,
            key.name,
            key.descriptor,
            st.revealer.revealed_by(key).map_or("?", edge_name)
        ));
    }
    lines.sort();
    let saturated: Vec<&WatchedSite> = st
        .site_info
        .iter()
        .filter(|w| w.check == Check::Receiver && w.saturated)
        .collect();
    let by_classes = saturated
        .iter()
        .filter(|w| w.classes.len() > MAX_RECEIVERS)
        .count();
    eprintln!(
        "sprig agent: receiver checks that saw too many receivers: {} ({by_classes} past {} classes, {} past {} repeats, the rest unknown classes); {} calls left to their entries",
        saturated.len(),
        MAX_RECEIVERS,
        saturated
            .iter()
            .filter(|w| w.classes.len() <= MAX_RECEIVERS && w.repeats > MAX_REPEATS)
            .count(),
        MAX_REPEATS,
        st.by_entries.len()
    );
    let receiver_checks = st
        .site_info
        .iter()
        .filter(|w| w.check == Check::Receiver)
        .count();
    let ([seen, done, again], dormant) = take_site_calls();
    let (reflect_hits, reflect_lookups) = super::seen::take_counts();
    eprintln!(
        "sprig agent: reflective calls: {reflect_lookups} named through JVMTI, \
         {reflect_hits} of a target handed over before"
    );
    let [loads, load_ns] = CHARGED_OUT.each_ref().map(|n| n.swap(0, Ordering::Relaxed));
    eprintln!(
        "sprig agent: class loads and links inside root contexts: {loads}, \
         {} us charged out",
        load_ns / 1000
    );
    eprintln!(
        "sprig agent: watched call sites: {receiver_checks} receiver checks, {} reach checks; \
         {} calls into the agent (seen {seen}, done {done}, again {again}); \
         {dormant} dormant entries passed on the JNI path",
        st.site_info.len() - receiver_checks,
        seen + done + again
    );
    eprintln!(
        "sprig agent: {} instrumented methods never called",
        lines.len()
    );
    for l in lines {
        eprintln!("{l}");
    }
}
