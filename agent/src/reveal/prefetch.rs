//! Dormant probes ahead: at session start (lazy scheme with dormant
//! probes), every class holding a method the roots can reach gets probes
//! that stay dormant until revelation switches them on.

use super::batches::redefine;
use super::plan::lookup;
use super::state::EAGER_ROUNDS;
use super::state::REVEAL_NS;
use super::state::state;
use crate::ffi::{Jni, Jvmti};
use sprig_reveal::MethodKey;
use std::collections::{BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Set in the target's environment, the lazy scheme gives dormant probes
/// only as it goes (the behaviour before [`prefetch`]; for measurements).
pub(super) const NO_PREFETCH_ENV: &str = "SPRIG_AGENT_NO_PREFETCH";

/// At most this many classes get dormant probes ahead of revelation; past
/// it the rest is left to revelation as it goes, so that a very large
/// reachable graph does not pause the JVM for long at the start.
pub(super) const PREFETCH_CLASSES_MAX: usize = 2000;

/// At most this many classes in one redefinition of [`prefetch`], so that
/// no single pause of the JVM grows with the reachable graph.
pub(super) const PREFETCH_BATCH_MAX: usize = 256;

/// Lazy scheme with dormant probes, at session start: gives dormant probes,
/// round by round, to every class holding a method the roots can reach by
/// their call sites (every override for a virtual call, as the eager
/// scheme finds them), so that revelation later switches methods on in
/// place instead of redefining one class per link of the call chain (javac
/// `Gen::genClass`: 10 redefinition batches instead of 108). Each round
/// redefines the classes it found, which captures their call sites for the
/// next. Nothing is switched on here: the probes record only what
/// revelation reaches or what runs inside a root context.
pub(super) fn prefetch(jvmti: &Jvmti, jni: Jni<'_>) {
    let t0 = Instant::now();
    let mut frontier: Vec<MethodKey> = match state().as_ref() {
        Some(st) => st.revealer.instrumented().map(|(_, k)| k.clone()).collect(),
        None => return,
    };
    let mut seen: HashSet<MethodKey> = frontier.iter().cloned().collect();
    let mut given = 0;
    for _ in 0..EAGER_ROUNDS {
        let t = Instant::now();
        let names = {
            let mut guard = state();
            let Some(st) = guard.as_mut() else {
                return;
            };
            let mut waiting = Vec::new();
            let mut classes = BTreeSet::new();
            while let Some(k) = frontier.pop() {
                if !st.installed.contains_key(&k.class) {
                    // A class with a method running since the attach is
                    // left to revelation: redefining it would leave that
                    // frame interpreted for good (see `frames`).
                    if !st.plan.contains_key(&k.class)
                        && given < PREFETCH_CLASSES_MAX
                        && !crate::frames::running_class(&k.class)
                    {
                        given += 1;
                        st.plan.insert(k.class.clone(), Vec::new());
                        classes.insert(k.class.clone());
                    }
                    if classes.contains(&k.class) {
                        waiting.push(k);
                    }
                    continue;
                }
                let Some(sites) = lookup(&st.sites, &k) else {
                    continue;
                };
                for s in sites {
                    // Loaded classes only: one not loaded yet gets its
                    // probes as it loads, from revelation.
                    for target in st.revealer.site_targets(&s) {
                        if st.revealer.instrumentable(&target.class)
                            && st.revealer.hierarchy().contains(&target.class)
                            && seen.insert(target.clone())
                        {
                            frontier.push(target);
                        }
                    }
                }
            }
            frontier = waiting;
            classes.into_iter().collect::<Vec<_>>()
        };
        REVEAL_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if names.is_empty() {
            break;
        }
        // Each batch pauses the JVM for all its classes at once.
        for chunk in names.chunks(PREFETCH_BATCH_MAX) {
            redefine(jvmti, Some(jni), chunk.to_vec());
        }
    }
    if crate::probe_class::debug_on() {
        eprintln!(
            "sprig agent: dormant probes ahead: {} methods reached, {given} classes, {} ms",
            seen.len(),
            t0.elapsed().as_millis()
        );
    }
}
