//! The ledger of what each class holds: per session, the classes whose
//! probes are live (and for which root patterns), those rewritten by a
//! retransformation not yet finished, and those that failed; the
//! RetransformClasses batches that change them, with their counters; and,
//! for the life of the JVM, the first bytes of classes that cannot be
//! redefined from what the JVM gives back ([`originals`]).

pub mod originals;

use crate::ffi::JvmtiError;
use crate::outbox;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::Message;
use sprig_wire::control::ClassFailure;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

/// Methods instrumented in one class, per root pattern.
#[derive(Clone, Debug, Default)]
pub struct ClassRecord {
    pub methods: u32,
    pub per_pattern: Vec<u32>,
}

/// Counters for `AgentStats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub methods: u64,
    pub classes: u64,
    pub failed: u64,
    pub batches: u64,
    pub redefinition_ns: u64,
}

pub struct Ledger {
    pub patterns: Vec<MethodPattern>,
    /// The hook instruments only while this is set.
    pub instrumenting: bool,
    /// Classes (internal names) whose probes are live.
    pub committed: HashMap<String, ClassRecord>,
    /// Classes the hook rewrote during a retransformation not yet finished.
    pub pending: HashMap<String, ClassRecord>,
    /// Classes that failed: they stay original for the rest of the session.
    pub denied: HashSet<String>,
    /// The start has said which roots are live: a root that goes live in a
    /// later batch is announced by that batch.
    pub roots_reported: bool,
    /// Root patterns (indices) whose methods the probes call were named
    /// to the user already (`instrument`): one line per pattern.
    pub left_out_warned: HashSet<usize>,
    pub counters: Counters,
    /// Classes (internal names) whose every method gets a dormant probe
    /// for the call-edge bursts (`sprig sample --edges`).
    pub edge_classes: HashSet<String>,
    /// Windows timing's original-bytes silence: classes (internal names)
    /// put back for the silent window that runs, but their root methods'
    /// probes ([`crate::instrument::silence`]).
    pub silenced: HashSet<String>,
}

impl Ledger {
    /// Root methods with live probes, per root pattern.
    pub fn live_per_pattern(&self) -> Vec<u32> {
        let mut per = vec![0u32; self.patterns.len()];
        for rec in self.committed.values() {
            for (a, b) in per.iter_mut().zip(&rec.per_pattern) {
                *a += b;
            }
        }
        per
    }

    /// A class that is loading now holds `rec`'s probes once defined. The
    /// methods count once per name, however many class loaders define it
    /// (probe ids are per name): the name's record is replaced, as a
    /// retransformation replaces it.
    pub fn commit_loaded(&mut self, name: &str, rec: ClassRecord) {
        self.counters.methods += u64::from(rec.methods);
        match self.committed.insert(name.to_string(), rec) {
            Some(old) => self.counters.methods -= u64::from(old.methods),
            None => self.counters.classes += 1,
        }
    }
}

static LEDGER: Mutex<Option<Ledger>> = Mutex::new(None);

/// The ledger of the current session (`None` between sessions).
pub fn lock() -> MutexGuard<'static, Option<Ledger>> {
    crate::sync::lock(&LEDGER)
}

/// Runs `f` on the current session's ledger.
pub fn with<R>(f: impl FnOnce(&mut Ledger) -> R) -> Option<R> {
    lock().as_mut().map(f)
}

/// A session arms its patterns: from now on the hook instruments matching
/// classes.
pub fn begin_session(patterns: Vec<MethodPattern>) {
    *lock() = Some(Ledger {
        patterns,
        instrumenting: true,
        committed: HashMap::new(),
        pending: HashMap::new(),
        denied: HashSet::new(),
        roots_reported: false,
        left_out_warned: HashSet::new(),
        counters: Counters::default(),
        edge_classes: HashSet::new(),
        silenced: HashSet::new(),
    });
}

/// The session is over: its ledger dropped. Returns its final counters.
pub fn end_session() -> Counters {
    lock().take().map(|p| p.counters).unwrap_or_default()
}

/// Current counters (zero when no session).
pub fn counters() -> Counters {
    with(|p| p.counters).unwrap_or_default()
}

fn dotted(internal: &str) -> String {
    internal.replace('/', ".")
}

pub fn report_failure(p: Option<&mut Ledger>, internal: &str, jvmti_error: String, reason: String) {
    if let Some(p) = p {
        p.denied.insert(internal.to_string());
        p.counters.failed += 1;
    }
    outbox::send(Message::ClassFailed(ClassFailure {
        class: dotted(internal),
        jvmti_error,
        reason,
    }));
}

/// The hook could not hand its bytes to the VM.
pub fn report_hook_failure(name: Option<&str>, e: JvmtiError) {
    let name = name.unwrap_or("<unnamed>");
    let mut guard = lock();
    if let Some(p) = guard.as_mut() {
        p.pending.remove(name);
        p.committed.remove(name);
    }
    report_failure(
        guard.as_mut(),
        name,
        e.to_string(),
        "JVMTI Allocate failed in the class file load hook".into(),
    );
}

/// The Java feature version of a JVM whose next class redefinition is
/// its first since sprig attached, when HotSpot throws away all compiled
/// code at that one (0: none pending). HotSpot records which compiled code
/// depends on which class only once an agent that may redefine classes is
/// present (unless `AlwaysRecordEvolDependencies`, on by default on JDK 25,
/// makes it do so from the start), so its first redefinition after a
/// dynamic attach cannot tell and flushes everything: JDK 17 logs `Marked
/// all nmethods for deopt` there, JDK 25 `Marked dependent nmethods for
/// deopt`.
static WHOLE_DEOPT_PENDING: AtomicU32 = AtomicU32::new(0);

/// Up to this Java version the first redefinition after a dynamic attach
/// throws away all compiled code (checked on 11, 17 and Temurin 21.0.8,
/// which logs `Marked all nmethods for deopt` once; JDK 25 records the
/// dependencies from the start). Newer versions are left unannounced.
const WHOLE_DEOPT_UP_TO: u32 = 21;

/// Called when an attach defined the probe class: no sprig session ran in
/// this JVM before, so none redefined a class in it.
pub fn expect_whole_deoptimization(major: Option<u32>) {
    if let Some(v) = major.filter(|v| *v <= WHOLE_DEOPT_UP_TO) {
        WHOLE_DEOPT_PENDING.store(v, Ordering::Release);
    }
}

/// After a redefinition that changed a class: says once that HotSpot threw
/// away all compiled code at it, when it was the JVM's first.
fn announce_whole_deoptimization() {
    let v = WHOLE_DEOPT_PENDING.swap(0, Ordering::AcqRel);
    if v != 0 {
        outbox::send(Message::Warning(format!(
            "first class redefinition in this JVM since an attach: HotSpot on JDK {v} threw \
             away all its compiled code, so the first seconds run slower than usual while \
             the JIT compiles it again (--reset-after SECS leaves them out of the report; \
             later sessions in this JVM do not pay this)"
        )));
    }
}

/// Retransforms `batch`; when `instrumenting`, commits what the hook
/// rewrote. On a batch failure retries one class at a time; a class that
/// fails is reported and stays as it was.
pub fn retransform_batch<C>(
    batch: &[(C, String)],
    instrumenting: bool,
    retransform: impl Fn(&[&C]) -> Result<(), JvmtiError>,
) {
    if batch.is_empty() {
        return;
    }
    let classes: Vec<&C> = batch.iter().map(|(c, _)| c).collect();
    let t0 = Instant::now();
    let result = retransform(&classes);
    let mut elapsed = t0.elapsed().as_nanos() as u64;
    let mut failures = Vec::new();
    let mut batches = 1;
    if result.is_err() {
        for (c, name) in batch {
            let t = Instant::now();
            let r = retransform(&[c]);
            elapsed += t.elapsed().as_nanos() as u64;
            batches += 1;
            if let Err(e) = r {
                failures.push((name.clone(), e));
            }
        }
    }
    if failures.len() < batch.len() {
        announce_whole_deoptimization();
    }
    let mut guard = lock();
    let Some(plan) = guard.as_mut() else {
        return;
    };
    plan.counters.batches += batches;
    plan.counters.redefinition_ns += elapsed;
    let failed: HashSet<&str> = failures.iter().map(|(n, _)| n.as_str()).collect();
    let live_before = plan.live_per_pattern();
    if instrumenting {
        for (_, name) in batch {
            let Some(rec) = plan.pending.remove(name) else {
                continue;
            };
            if failed.contains(name.as_str()) {
                continue;
            }
            // The class now holds exactly this record's probes.
            plan.counters.methods += u64::from(rec.methods);
            match plan.committed.insert(name.clone(), rec) {
                Some(old) => plan.counters.methods -= u64::from(old.methods),
                None => plan.counters.classes += 1,
            }
        }
    }
    // A root whose first batch was put off (another thread's batch ran past
    // the wait bound at the start) is live only now: say so, or the CLI
    // would wait for it.
    let now_live: Vec<(String, u32)> = plan
        .live_per_pattern()
        .into_iter()
        .enumerate()
        .filter(|_| plan.roots_reported)
        .filter(|&(i, n)| n > 0 && live_before.get(i).copied().unwrap_or(0) == 0)
        .filter_map(|(i, n)| Some((plan.patterns.get(i)?.to_string(), n)))
        .collect();
    for (pattern, methods) in now_live {
        outbox::send(Message::RootInstrumented { pattern, methods });
    }
    for (name, e) in failures {
        let reason = if instrumenting {
            "RetransformClasses refused the instrumented class; it stays original"
        } else {
            "RetransformClasses could not restore the class; its probes stay silent"
        };
        report_failure(Some(plan), &name, e.to_string(), reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        Ledger {
            patterns: Vec::new(),
            instrumenting: true,
            committed: HashMap::new(),
            pending: HashMap::new(),
            denied: HashSet::new(),
            roots_reported: false,
            left_out_warned: HashSet::new(),
            counters: Counters::default(),
            edge_classes: HashSet::new(),
            silenced: HashSet::new(),
        }
    }

    fn record(methods: u32) -> ClassRecord {
        ClassRecord {
            methods,
            per_pattern: vec![methods],
        }
    }

    #[test]
    fn a_name_loaded_by_many_loaders_counts_its_methods_once() {
        let mut l = ledger();
        for _ in 0..300 {
            l.commit_loaded("gen/script/Script", record(3));
        }
        l.commit_loaded("gen/script/Script$S0", record(2));
        assert_eq!((l.counters.methods, l.counters.classes), (5, 2));
        // A later loader's class with more methods planned replaces the
        // name's record.
        l.commit_loaded("gen/script/Script", record(4));
        assert_eq!((l.counters.methods, l.counters.classes), (6, 2));
        assert_eq!(l.committed["gen/script/Script"].methods, 4);
    }
}
