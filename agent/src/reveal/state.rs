//! Revelation's state: one lock over the revealer and what the agent
//! keeps beside it (the plan per class, call sites, watched sites, dormant
//! and held methods), and the session's flags and counters.

use crate::ffi::Global;
use sprig_reveal::{EdgeKind, MethodId as RevealId, MethodKey, Revealer};
use sprig_rewriter::{CallSite, Check};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Longest a thread waits for another thread's redefinition batch; past it
/// the batch goes to the control thread.
pub(super) const REDEFINE_WAIT: Duration = Duration::from_secs(2);
/// Eager scheme: at most this many capture-and-scan rounds at start.
pub(super) const EAGER_ROUNDS: usize = 64;

/// Revelation is on for the current session.
pub(super) static ON: AtomicBool = AtomicBool::new(false);
pub(super) static REVEAL_NS: AtomicU64 = AtomicU64::new(0);
pub(super) static HIDDEN_SKIPPED: AtomicU64 = AtomicU64::new(0);
/// ClassPrepare is on for this session: classes not prepared at the attach
/// join the mirror when linked, and the revelation steps stop polling them.
pub(super) static WATCHING_LINKS: AtomicBool = AtomicBool::new(false);

/// Call sites of one class's methods by (name, descriptor).
pub(super) type Sites = HashMap<(String, String), Vec<CallSite>>;

/// The methods of one class holding probes, by (name, descriptor): probe
/// id and whether the probes are the root pair.
pub(super) type Probed = HashMap<(String, String), (u32, bool)>;

/// One method the hook instruments in a class.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) name: String,
    pub(super) descriptor: String,
    pub(super) id: u32,
    pub(super) root: bool,
    /// `Method.invoke`/`Constructor.newInstance`: the receiver probe that
    /// hands the reflected method to the agent.
    pub(super) reflect: bool,
}

pub(super) struct State {
    pub(super) revealer: Revealer,
    /// Probe id → (revealer id, whether the first call is checked).
    pub(super) by_probe: HashMap<u32, (RevealId, bool)>,
    /// Classes (internal names) → the methods the hook instruments.
    pub(super) plan: HashMap<String, Vec<Planned>>,
    /// Call sites of classes whose bytes went through the hook.
    pub(super) sites: HashMap<String, Sites>,
    /// Classes to retransform from the control thread.
    pub(super) deferred: BTreeSet<String>,
    /// Classes loaded before the attach but not prepared yet (JVMTI cannot
    /// list their methods), by name: they join the mirror when the JVM
    /// links them (`on_class_prepare`, before any of their code runs), and
    /// failing that at the next revelation step.
    pub(super) unprepared: HashMap<String, Vec<Global>>,
    /// Eager scheme: scans wait for class bytes a redefinition captures.
    pub(super) scan_pending: bool,
    /// Times each class was put back for want of a class reference.
    pub(super) retries: HashMap<String, u32>,
    /// `Method.invoke` and `Constructor.newInstance` are (being) watched:
    /// a reflective call site was revealed.
    pub(super) watching_reflection: bool,
    /// Targets of reflective calls already revealed.
    pub(super) reflected: std::collections::HashSet<MethodKey>,
    /// Per class, every method the hook last gave probes, active or
    /// dormant: (name, descriptor) → (probe id, root probes).
    pub(super) installed: HashMap<String, Probed>,
    /// Methods activated in classes that already held their (dormant)
    /// probes: revelations that cost no redefinition.
    pub(super) activated_in_place: u64,
    /// The method behind each dormant probe id (internal class name), for
    /// a dormant method that runs inside a root context ([`entered`]).
    pub(super) dormant_keys: HashMap<u32, MethodKey>,
    /// Redefined classes get dormant probes in their other methods.
    pub(super) dormant: bool,
    /// Dormant probes ahead ([`prefetch`]) are still to be given: the
    /// session started before any root's class was loaded.
    pub(super) ahead_pending: bool,
    /// Whether this session gives dormant probes ahead (lazy scheme with
    /// dormant probes, not turned off by the environment).
    pub(super) ahead: bool,
    /// Methods revelation reached in a class that already holds their
    /// dormant probes, left dormant until a root context enters one
    /// ([`entered`] switches it on then): probe id to (class, name,
    /// descriptor, the edge that reached it). Class hierarchy analysis
    /// reaches every override a call could take; only those that run get
    /// switched on.
    pub(super) held: HashMap<u32, (String, String, String, EdgeKind)>,
    /// `--skip-trivial`: the byte bound, 0 when every method is profiled.
    pub(super) skip_trivial: u32,
    /// Per class that went through the hook: its trivial methods, and
    /// those of them revelation reached (left out, never instrumented).
    pub(super) trivial: HashMap<String, Trivial>,
    /// `--virtual-calls receiver`: virtual and interface calls of
    /// instrumented methods are revealed by the receivers they see
    /// (`Probe.site` before each, `dispatched_call`), not by class
    /// hierarchy analysis at the caller's first call.
    pub(super) receivers: bool,
    /// Watched call sites' ids by (class, method, descriptor, offset).
    pub(super) site_ids: HashMap<(String, String, String, u32), u32>,
    /// Per site id: the call and what it has seen.
    pub(super) site_info: Vec<WatchedSite>,
    /// Virtual calls (owner, name, descriptor) of watched sites that saw
    /// too many receivers: what they dispatch to holds probes, dormant
    /// until entered inside a root context, in the classes loaded at the
    /// time and in those loaded later that override the method.
    pub(super) by_entries: HashSet<(String, String, String)>,
}

/// One call site watched for its receivers.
pub(super) struct WatchedSite {
    pub(super) caller: MethodKey,
    pub(super) call: CallSite,
    /// Receiver classes seen (internal names).
    pub(super) classes: HashSet<String>,
    /// Calls with a class seen before.
    pub(super) repeats: u32,
    /// Threads revealing what this site reaches right now.
    pub(super) pending: u32,
    /// Revealed by class hierarchy analysis: watched no more.
    pub(super) saturated: bool,
    /// Its check ([`Revealer::site_check`] when the site was first
    /// instrumented): a reach check (`Probe.reach`) or a receiver check
    /// (`Probe.site`).
    pub(super) check: Check,
}

/// The trivial methods of one class (`--skip-trivial`), by (name,
/// descriptor).
pub(super) struct Trivial {
    pub(super) methods: HashSet<(String, String)>,
    pub(super) reached: HashSet<(String, String)>,
}

impl Trivial {
    /// The class's trivial methods at `bound`, read from its bytes.
    pub(super) fn of(bytes: &[u8], bound: u32) -> Trivial {
        Trivial {
            methods: sprig_rewriter::trivial_methods(bytes, bound)
                .unwrap_or_default()
                .into_iter()
                .collect(),
            reached: HashSet::new(),
        }
    }

    /// Whether a planned method is left out: trivial, and not a root (roots
    /// are always profiled). Marks it reached when it is.
    pub(super) fn leaves_out(&mut self, name: &str, descriptor: &str, root: bool) -> bool {
        let key = (name.to_string(), descriptor.to_string());
        let out = !root && self.methods.contains(&key);
        if out {
            self.reached.insert(key);
        }
        out
    }
}

pub(super) static STATE: Mutex<Option<State>> = Mutex::new(None);
pub(super) fn state() -> MutexGuard<'static, Option<State>> {
    crate::sync::lock(&STATE)
}

/// Whether revelation runs in this session.
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Acquire)
}

/// Time spent revealing (scans, planning) in this session.
pub fn reveal_ns() -> u64 {
    REVEAL_NS.load(Ordering::Relaxed)
}

pub(super) fn edge_name(k: EdgeKind) -> &'static str {
    match k {
        EdgeKind::Root => "root",
        EdgeKind::Static => "static",
        EdgeKind::Special => "special",
        EdgeKind::Virtual => "virtual",
        EdgeKind::Interface => "interface",
        EdgeKind::Dynamic => "dynamic",
        EdgeKind::MethodHandle => "method-handle",
        EdgeKind::Reflective => "reflective",
        EdgeKind::Callback => "callback",
        EdgeKind::Entered => "entered",
    }
}
