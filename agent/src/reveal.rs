//! The revelation driver: feeds callgraph's [`Revealer`] with the loaded
//! classes, the class loads and the first calls, and applies the batches it
//! hands back (Scheme B lazy, Scheme A eager; see DESIGN.md).
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
//! with a bound; `STATE` and instrument's plan lock are never held together
//! nor across a JVMTI call that can run the hook. The hook only takes
//! `STATE` and the plan lock, one at a time.

use crate::ffi::{Event, Global, Jni, Jvmti, Local};
use crate::ledger;
use crate::methods::{announce_method, dormant_method};
use crate::probe_class::{PLAIN_PROBES, REFLECT_PROBES, ROOT_PROBES};
use sprig_callgraph::pattern::MethodPattern;
use sprig_callgraph::reveal::{
    ClassFilter, EdgeKind, MethodId as RevealId, MethodKey, RevealConfig, Revealed, Revealer,
    Scheme, has_code, is_virtual,
};
use sprig_rewriter::{CallSite, Check, ClassInfo, GuardSite, MethodInfo, Target};
use sprig_wire::control::RevealStats;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const ACC_NATIVE: u16 = 0x0100;
const ACC_ABSTRACT: u16 = 0x0400;
/// Longest a thread waits for another thread's redefinition batch; past it
/// the batch goes to the control thread.
const REDEFINE_WAIT: Duration = Duration::from_secs(2);
/// Eager scheme: at most this many capture-and-scan rounds at start.
const EAGER_ROUNDS: usize = 64;

/// Revelation is on for the current session.
static ON: AtomicBool = AtomicBool::new(false);
static REVEAL_NS: AtomicU64 = AtomicU64::new(0);
static HIDDEN_SKIPPED: AtomicU64 = AtomicU64::new(0);
/// ClassPrepare is on for this session: classes not prepared at the attach
/// join the mirror when linked, and the revelation steps stop polling them.
static WATCHING_LINKS: AtomicBool = AtomicBool::new(false);

/// Site ids handed out so far, over every session in this JVM (the next
/// session clears `Probe.RECEIVERS` below it).
static SITES_HANDED: AtomicU32 = AtomicU32::new(0);
/// Receiver classes a watched call site may see before it is watched no
/// more: what it dispatches to is then left to dormant probes (revealed as
/// entered), or without them revealed by class hierarchy analysis.
const MAX_RECEIVERS: usize = 8;
/// Times a watched site may hand the agent a class it has seen already
/// (more classes take turns there than `Probe.RECEIVERS` remembers, two)
/// before it is watched no more, as past `MAX_RECEIVERS`: each such call
/// costs a JNI call and a class signature. On javac most sites watched no
/// more got there this way (a visitor's `accept` sees its tree classes in
/// turn); 1,024 repeats instead of 64 left 47 such sites of 64 on its
/// `Gen::genClass` root, for eight times the calls into the agent.
const MAX_REPEATS: u32 = 64;

/// Call sites of one class's methods by (name, descriptor).
type Sites = HashMap<(String, String), Vec<CallSite>>;

/// The methods of one class holding probes, by (name, descriptor): probe
/// id and whether the probes are the root pair.
type Probed = HashMap<(String, String), (u32, bool)>;

/// One method the hook instruments in a class.
#[derive(Clone, Debug)]
struct Planned {
    name: String,
    descriptor: String,
    id: u32,
    root: bool,
    /// `Method.invoke`/`Constructor.newInstance`: the receiver probe that
    /// hands the reflected method to the agent.
    reflect: bool,
}

/// What sprig instruments to see the targets of reflective calls.
const REFLECTION_WATCH: [(&str, &str, &str); 2] = [
    (
        "java/lang/reflect/Method",
        "invoke",
        "(Ljava/lang/Object;[Ljava/lang/Object;)Ljava/lang/Object;",
    ),
    (
        "java/lang/reflect/Constructor",
        "newInstance",
        "([Ljava/lang/Object;)Ljava/lang/Object;",
    ),
];

struct State {
    revealer: Revealer,
    /// Probe id → (revealer id, whether the first call is checked).
    by_probe: HashMap<u32, (RevealId, bool)>,
    /// Classes (internal names) → the methods the hook instruments.
    plan: HashMap<String, Vec<Planned>>,
    /// Call sites of classes whose bytes went through the hook.
    sites: HashMap<String, Sites>,
    /// Classes to retransform from the control thread.
    deferred: BTreeSet<String>,
    /// Classes loaded before the attach but not prepared yet (JVMTI cannot
    /// list their methods), by name: they join the mirror when the JVM
    /// links them (`on_class_prepare`, before any of their code runs), and
    /// failing that at the next revelation step.
    unprepared: HashMap<String, Vec<Global>>,
    /// Eager scheme: scans wait for class bytes a redefinition captures.
    scan_pending: bool,
    /// Times each class was put back for want of a class reference.
    retries: HashMap<String, u32>,
    /// `Method.invoke` and `Constructor.newInstance` are (being) watched:
    /// a reflective call site was revealed.
    watching_reflection: bool,
    /// Targets of reflective calls already revealed.
    reflected: std::collections::HashSet<MethodKey>,
    /// Per class, every method the hook last gave probes, active or
    /// dormant: (name, descriptor) → (probe id, root probes).
    installed: HashMap<String, Probed>,
    /// Methods activated in classes that already held their (dormant)
    /// probes: revelations that cost no redefinition.
    activated_in_place: u64,
    /// The method behind each dormant probe id (internal class name), for
    /// a dormant method that runs inside a root context ([`entered`]).
    dormant_keys: HashMap<u32, MethodKey>,
    /// Redefined classes get dormant probes in their other methods.
    dormant: bool,
    /// Dormant probes ahead ([`prefetch`]) are still to be given: the
    /// session started before any root's class was loaded.
    ahead_pending: bool,
    /// Whether this session gives dormant probes ahead (lazy scheme with
    /// dormant probes, not turned off by the environment).
    ahead: bool,
    /// Methods revelation reached in a class that already holds their
    /// dormant probes, left dormant until a root context enters one
    /// ([`entered`] switches it on then): probe id to (class, name,
    /// descriptor, the edge that reached it). Class hierarchy analysis
    /// reaches every override a call could take; only those that run get
    /// switched on.
    held: HashMap<u32, (String, String, String, EdgeKind)>,
    /// `--skip-trivial`: the byte bound, 0 when every method is profiled.
    skip_trivial: u32,
    /// Per class that went through the hook: its trivial methods, and
    /// those of them revelation reached (left out, never instrumented).
    trivial: HashMap<String, Trivial>,
    /// `--virtual-calls receiver`: virtual and interface calls of
    /// instrumented methods are revealed by the receivers they see
    /// (`Probe.site` before each, `dispatched_call`), not by class
    /// hierarchy analysis at the caller's first call.
    receivers: bool,
    /// Watched call sites' ids by (class, method, descriptor, offset).
    site_ids: HashMap<(String, String, String, u32), u32>,
    /// Per site id: the call and what it has seen.
    site_info: Vec<WatchedSite>,
    /// Virtual calls (owner, name, descriptor) of watched sites that saw
    /// too many receivers: what they dispatch to holds probes, dormant
    /// until entered inside a root context, in the classes loaded at the
    /// time and in those loaded later that override the method.
    by_entries: HashSet<(String, String, String)>,
}

/// One call site watched for its receivers.
struct WatchedSite {
    caller: MethodKey,
    call: CallSite,
    /// Receiver classes seen (internal names).
    classes: HashSet<String>,
    /// Calls with a class seen before.
    repeats: u32,
    /// Threads revealing what this site reaches right now.
    pending: u32,
    /// Revealed by class hierarchy analysis: watched no more.
    saturated: bool,
    /// Its check ([`Revealer::site_check`] when the site was first
    /// instrumented): a reach check (`Probe.reach`) or a receiver check
    /// (`Probe.site`).
    check: Check,
}

/// The trivial methods of one class (`--skip-trivial`), by (name,
/// descriptor).
struct Trivial {
    methods: HashSet<(String, String)>,
    reached: HashSet<(String, String)>,
}

impl Trivial {
    /// The class's trivial methods at `bound`, read from its bytes.
    fn of(bytes: &[u8], bound: u32) -> Trivial {
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
    fn leaves_out(&mut self, name: &str, descriptor: &str, root: bool) -> bool {
        let key = (name.to_string(), descriptor.to_string());
        let out = !root && self.methods.contains(&key);
        if out {
            self.reached.insert(key);
        }
        out
    }
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
static REDEFINE: Mutex<()> = Mutex::new(());
/// Class references of loaded, instrumentable classes by internal name.
static CLASSES: Mutex<Option<HashMap<String, Vec<Global>>>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    crate::sync::lock(&STATE)
}

fn classes() -> MutexGuard<'static, Option<HashMap<String, Vec<Global>>>> {
    crate::sync::lock(&CLASSES)
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

/// Builds the revealer of a session. Errors name the bad filter pattern.
pub fn configure(
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
        .map(|n| n.replace('/', "."))
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
    *classes() = Some(HashMap::new());
    REVEAL_NS.store(0, Ordering::Relaxed);
    HIDDEN_SKIPPED.store(0, Ordering::Relaxed);
    WATCHING_LINKS.store(false, Ordering::Relaxed);
    ON.store(true, Ordering::Release);
    Ok(())
}

fn internal_name(signature: &str) -> Option<&str> {
    signature.strip_prefix('L')?.strip_suffix(';')
}

fn signature_name(jvmti: &Jvmti, c: Local<'_>) -> Option<String> {
    let sig = jvmti.class_signature(c).ok()?;
    internal_name(&sig).map(str::to_string)
}

/// A loaded class's facts from JVMTI (no bytes).
fn class_facts(jvmti: &Jvmti, jni: Jni<'_>, c: Local<'_>, name: &str) -> Option<ClassInfo> {
    let super_name = jni.superclass(c).and_then(|s| {
        let n = signature_name(jvmti, s);
        jni.delete_local(s);
        n
    });
    let mut interfaces = Vec::new();
    for i in jvmti.implemented_interfaces(&jni, c).ok()? {
        if let Some(n) = signature_name(jvmti, i) {
            interfaces.push(n);
        }
        jni.delete_local(i);
    }
    let access = jvmti.class_modifiers(c).ok()? as u16;
    let methods = jvmti
        .class_methods(c)
        .ok()?
        .into_iter()
        .filter_map(|m| {
            let (name, descriptor) = jvmti.method_name(m).ok()?;
            let access = jvmti.method_modifiers(m).ok()? as u16;
            let code = access & (ACC_NATIVE | ACC_ABSTRACT) == 0;
            Some(MethodInfo {
                name,
                descriptor,
                access,
                code_length: u32::from(code),
                has_calls: code,
            })
        })
        .collect();
    Some(ClassInfo {
        name: name.to_string(),
        super_name,
        interfaces,
        access,
        major_version: 0,
        methods,
    })
}

/// Session start: mirrors every loaded class, arms the roots and applies
/// the first batch (lazy: the roots; eager: the whole reachable graph,
/// capturing class bytes round by round). Returns the number of methods
/// each root pattern matched.
pub fn start(jvmti: &Jvmti, jni: Jni<'_>, roots: &[MethodPattern]) -> Vec<usize> {
    let t0 = Instant::now();
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
                match class_facts(jvmti, jni, c, &name) {
                    Some(info) => {
                        st.revealer.on_class_loaded(info, 0, Vec::new);
                    }
                    None => {
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
        if let Some(map) = cache.as_mut() {
            for (name, g) in refs {
                map.entry(name).or_default().push(g);
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
    hits
}

/// Set in the target's environment, the lazy scheme gives dormant probes
/// only as it goes (the behaviour before [`prefetch`]; for measurements).
const NO_PREFETCH_ENV: &str = "SPRIG_AGENT_NO_PREFETCH";

/// At most this many classes get dormant probes ahead of revelation; past
/// it the rest is left to revelation as it goes, so that a very large
/// reachable graph does not pause the JVM for long at the start.
const PREFETCH_CLASSES_MAX: usize = 2000;

/// At most this many classes in one redefinition of [`prefetch`], so that
/// no single pause of the JVM grows with the reachable graph.
const PREFETCH_BATCH_MAX: usize = 256;

/// Lazy scheme with dormant probes, at session start: gives dormant probes,
/// round by round, to every class holding a method the roots can reach by
/// their call sites (every override for a virtual call, as the eager
/// scheme finds them), so that revelation later switches methods on in
/// place instead of redefining one class per link of the call chain (javac
/// `Gen::genClass`: 10 redefinition batches instead of 108). Each round
/// redefines the classes it found, which captures their call sites for the
/// next. Nothing is switched on here: the probes record only what
/// revelation reaches or what runs inside a root context.
fn prefetch(jvmti: &Jvmti, jni: Jni<'_>) {
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
                    if !st.plan.contains_key(&k.class) && given < PREFETCH_CLASSES_MAX {
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

/// Applies pending work now: batches deferred by class loads, then in the
/// eager scheme the scans that waited for class bytes, round by round
/// (each redefinition captures the bytes the next round scans). Bounded.
fn settle(jvmti: &Jvmti, jni: Jni<'_>) -> bool {
    let mut worked = false;
    for round in 0..EAGER_ROUNDS {
        let t = Instant::now();
        let names = {
            let mut guard = state();
            let Some(st) = guard.as_mut() else {
                return worked;
            };
            let mut names: Vec<String> = if round == 0 {
                let mut v = mirror_prepared(jvmti, jni, st);
                v.extend(std::mem::take(&mut st.deferred));
                v
            } else {
                Vec::new()
            };
            if st.scan_pending && st.revealer.scheme() == Scheme::Eager {
                let State {
                    revealer, sites, ..
                } = &mut *st;
                let revealed = revealer.reveal_all(|k| lookup(sites, k));
                st.scan_pending = !revealed.classes.is_empty();
                names.extend(apply(st, revealed));
            }
            names.sort();
            names.dedup();
            names
        };
        REVEAL_NS.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if names.is_empty() {
            break;
        }
        worked = true;
        redefine(jvmti, Some(jni), names);
        // The redefinition captured class bytes: eager scans may go on.
        if let Some(st) = state().as_mut()
            && st.revealer.scheme() == Scheme::Eager
        {
            st.scan_pending = true;
        }
    }
    worked
}

/// Whether [`settle`] has anything to do.
fn unsettled() -> bool {
    state()
        .as_ref()
        .is_some_and(|st| !st.deferred.is_empty() || st.scan_pending || polls_unprepared(st))
}

fn lookup(sites: &HashMap<String, Sites>, k: &MethodKey) -> Option<Vec<CallSite>> {
    sites
        .get(&k.class)?
        .get(&(k.name.clone(), k.descriptor.clone()))
        .cloned()
}

/// Runs one revelation step under the state lock and records its plan.
/// Returns the classes to retransform.
fn plan_step(step: impl FnOnce(&mut Revealer, &HashMap<String, Sites>) -> Revealed) -> Vec<String> {
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return Vec::new();
    };
    let revealed = step(&mut st.revealer, &st.sites);
    apply(st, revealed)
}

/// Records a batch in the plan (announcing new method ids) and returns its
/// class names.
fn apply(st: &mut State, revealed: Revealed) -> Vec<String> {
    let mut names = Vec::with_capacity(revealed.classes.len());
    if !revealed.reflective_sites.is_empty() && !st.watching_reflection {
        // The subgraph calls through reflection: watch the two entry points
        // (they are JDK classes, outside every filter).
        st.watching_reflection = true;
        for (class, name, descriptor) in REFLECTION_WATCH {
            let id = announce_method(&class.replace('/', "."), name, descriptor);
            st.plan.insert(
                class.to_string(),
                vec![Planned {
                    name: name.to_string(),
                    descriptor: descriptor.to_string(),
                    id,
                    root: false,
                    reflect: true,
                }],
            );
            names.push(class.to_string());
        }
    }
    for batch in revealed.classes {
        let dotted = batch.class.replace('/', ".");
        // Every method of the batch already holds its probes (dormant
        // until now): activating them is all it takes.
        // Trivial methods left out count as held: they never get probes.
        let left_out: Vec<bool> = match st.trivial.get_mut(&batch.class) {
            Some(t) => batch
                .methods
                .iter()
                .map(|m| t.leaves_out(&m.name, &m.descriptor, m.is_root))
                .collect(),
            None => vec![false; batch.methods.len()],
        };
        let in_place = st.installed.get(&batch.class).is_some_and(|have| {
            batch.methods.iter().zip(&left_out).all(|(m, &out)| {
                out || have
                    .get(&(m.name.clone(), m.descriptor.clone()))
                    .is_some_and(|&(_, root)| root == m.is_root)
            })
        });
        // With dormant probes ahead and class hierarchy analysis, what
        // revelation reaches in a class holding its dormant probes stays
        // dormant until it runs inside a root context.
        let hold = in_place && st.ahead && !st.receivers;
        let planned = batch
            .methods
            .iter()
            .zip(&left_out)
            .map(|(m, &out)| {
                let dormant = dormant_method(&dotted, &m.name, &m.descriptor)
                    .filter(|id| !crate::methods::is_active(*id));
                // What a root context entered, or reflection is about to
                // call, is switched on now.
                let edge = st
                    .revealer
                    .method(m.id)
                    .and_then(|k| st.revealer.revealed_by(k));
                let held_edge = edge.filter(|e| {
                    !matches!(e, EdgeKind::Root | EdgeKind::Entered | EdgeKind::Reflective)
                });
                let id = match (dormant, held_edge) {
                    (Some(id), _) if st.held.contains_key(&id) => id,
                    (Some(id), Some(edge)) if hold && m.added && !m.is_root && !out => {
                        st.held.insert(
                            id,
                            (dotted.clone(), m.name.clone(), m.descriptor.clone(), edge),
                        );
                        id
                    }
                    _ => announce_method(&dotted, &m.name, &m.descriptor),
                };
                st.by_probe.insert(id, (m.id, m.needs_first_call_check));
                Planned {
                    name: m.name.clone(),
                    descriptor: m.descriptor.clone(),
                    id,
                    root: m.is_root,
                    reflect: false,
                }
            })
            .collect();
        st.plan.insert(batch.class.clone(), planned);
        if in_place {
            st.activated_in_place += batch
                .methods
                .iter()
                .zip(&left_out)
                .filter(|(m, out)| m.added && !**out && !hold)
                .count() as u64;
        } else {
            names.push(batch.class);
        }
    }
    names
}

thread_local! {
    /// This thread holds `REDEFINE` (a redefinition can link a class, and
    /// linking posts ClassPrepare on the same thread).
    static REDEFINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Clears `REDEFINING` when the batch ends, however it ends.
struct Redefining;

impl Drop for Redefining {
    fn drop(&mut self) {
        let _ = REDEFINING.try_with(|r| r.set(false));
    }
}

/// Retransforms `names` in one batch (bounded wait for another thread's
/// batch; past the bound the control thread does it). With `jni`, classes
/// not seen yet are looked up among the loaded classes. Called again from
/// inside this thread's own batch (a ClassPrepare posted while the JVM
/// links a class of it), the classes go to the control thread.
fn redefine(jvmti: &Jvmti, jni: Option<Jni<'_>>, names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    let (Some(_serial), _) = lock_batches() else {
        defer(names);
        return;
    };
    let _ = REDEFINING.try_with(|r| r.set(true));
    let _redefining = Redefining;
    if !enabled() {
        return; // the session is ending: the restore owns the classes now
    }
    let missing: Vec<&String> = {
        let cache = classes();
        let Some(map) = cache.as_ref() else {
            return;
        };
        names.iter().filter(|n| !map.contains_key(*n)).collect()
    };
    if !missing.is_empty() {
        match jni {
            Some(jni) => find_classes(jvmti, jni, &missing),
            None => {
                defer(names.clone());
                return;
            }
        }
    }
    let cache = classes();
    let Some(map) = cache.as_ref() else {
        return;
    };
    let mut batch: Vec<(&Global, String)> = Vec::new();
    let mut later = Vec::new();
    for n in &names {
        match map.get(n) {
            Some(refs) => batch.extend(refs.iter().map(|g| (g, n.clone()))),
            // Loading right now: defined soon, redone from the control thread.
            None => later.push(n.clone()),
        }
    }
    let t0 = Instant::now();
    ledger::retransform_batch(&batch, true, |cs| {
        let refs: Vec<&Global> = cs.iter().map(|g| **g).collect();
        jvmti.retransform_globals(&refs)
    });
    if crate::probe_class::debug_on() && !batch.is_empty() {
        // When each batch ran (late ones deoptimise code in the windows
        // a benchmark times) and what it took.
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let start = *START.get_or_init(|| t0);
        eprintln!(
            "sprig agent: batch at +{} ms: {} classes in {:.1} ms ({})",
            t0.duration_since(start).as_millis(),
            batch.len(),
            t0.elapsed().as_secs_f64() * 1e3,
            batch[0].1
        );
    }
    drop(cache);
    defer(later);
}

/// Adds the loaded classes named in `missing` to the reference cache.
fn find_classes(jvmti: &Jvmti, jni: Jni<'_>, missing: &[&String]) {
    let want: BTreeSet<&str> = missing.iter().map(|s| s.as_str()).collect();
    jni.with_local_frame(64, |jni| {
        let loaded = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut found = Vec::new();
        for &c in &loaded {
            if let Some(name) = signature_name(jvmti, c)
                && want.contains(name.as_str())
                && jvmti.is_modifiable(c).unwrap_or(false)
                && let Ok(g) = jni.new_global(c)
            {
                found.push((name, g));
            }
        }
        let mut cache = classes();
        if let Some(map) = cache.as_mut() {
            for (name, g) in found {
                map.entry(name).or_default().push(g);
            }
        }
    });
}

/// Classes named by a batch but never defined (a load that failed) are
/// retried this many times (control-thread ticks), then dropped.
const MAX_RETRIES: u32 = 50;

fn defer(names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    if let Some(st) = state().as_mut() {
        for n in names {
            let tries = st.retries.entry(n.clone()).or_insert(0);
            *tries += 1;
            if *tries <= MAX_RETRIES {
                st.deferred.insert(n);
            }
        }
    }
}

/// Whether this session checks receivers at call sites.
pub fn receivers_on() -> bool {
    state().as_ref().is_some_and(|st| st.receivers)
}

/// Site ids handed out so far in this JVM (`Probe.RECEIVERS` is cleared below
/// this at the start of a session).
pub fn sites_handed() -> u32 {
    SITES_HANDED.load(Ordering::Acquire)
}

/// The id of a watched call site and its check, handed out the first time
/// with `check`; `None` when `Probe.RECEIVERS` is full (the site is then
/// revealed at its caller's first call, by class hierarchy analysis). A
/// site keeps its first check: the Java side keeps the site's state.
fn site_id(
    st: &mut State,
    class: &str,
    method: &(String, String),
    call: &CallSite,
    check: Check,
) -> Option<(u32, Check)> {
    let key = (
        class.to_string(),
        method.0.clone(),
        method.1.clone(),
        call.offset,
    );
    if let Some(&id) = st.site_ids.get(&key) {
        return Some((id, st.site_info[id as usize].check));
    }
    let id = u32::try_from(st.site_info.len()).ok()?;
    if id >= crate::probe_class::SITE_SLOTS {
        return None;
    }
    st.site_info.push(WatchedSite {
        caller: MethodKey::new(class, &method.0, &method.1),
        call: call.clone(),
        classes: HashSet::new(),
        repeats: 0,
        pending: 0,
        saturated: false,
        check,
    });
    st.site_ids.insert(key, id);
    SITES_HANDED.fetch_max(id + 1, Ordering::AcqRel);
    Some((id, check))
}

/// The checks of the targets the hook instruments in `name`: per target,
/// each watchable call's offset, site id and check.
fn guards_of(st: &mut State, name: &str, targets: &[(Target, bool)]) -> Vec<Vec<GuardSite>> {
    let mut out = Vec::with_capacity(targets.len());
    for (t, _) in targets {
        let mut g = Vec::new();
        let method = (t.name.clone(), t.descriptor.clone());
        let calls: Vec<(CallSite, Check)> = if t.probes == REFLECT_PROBES {
            Vec::new()
        } else {
            st.sites
                .get(name)
                .and_then(|s| s.get(&method))
                .map(|v| {
                    v.iter()
                        .filter_map(|c| Some((c.clone(), st.revealer.site_check(c)?)))
                        .collect()
                })
                .unwrap_or_default()
        };
        for (c, check) in calls {
            if let Some((site, check)) = site_id(st, name, &method, &c, check) {
                g.push(GuardSite {
                    offset: c.offset,
                    site,
                    check,
                });
            }
        }
        out.push(g);
    }
    out
}

/// `Probe.site`, inside a root context: a receiver of class `receiver` is
/// about to be called at watched site `site`. Instruments the method the
/// class selects, on this thread, before the call runs. A site that has
/// seen more than `MAX_RECEIVERS` classes, or a class the mirror does not
/// know, is watched no more: with dormant probes, every class it can
/// dispatch to gets them (and a class loaded later that overrides the
/// method, as it loads), and a method of theirs is revealed when a root
/// context first enters it (`entered`); without, class hierarchy analysis
/// reveals all it can dispatch to. `Probe.reach`
/// (no receiver): a static or special site runs for the first time, and
/// its target is instrumented. Returns whether any work was done or waited
/// for, and whether the site is watched no more.
pub fn dispatched_call(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    site: u32,
    receiver: Option<Local<'_>>,
) -> (bool, bool) {
    let t0 = Instant::now();
    // No class for a reach check; arrays and primitive classes have no
    // internal name here (their calls go to java.lang.Object's methods,
    // outside every filter).
    let class = receiver.and_then(|r| signature_name(jvmti, r));
    // Another thread revealing what this site reaches: wait until its
    // classes are redefined, so this call does not run ahead of its probes.
    let waited = await_site(site);
    let (names, done) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return (waited, false);
        };
        let Some(w) = st.site_info.get_mut(site as usize) else {
            return (waited, true);
        };
        if w.saturated {
            return (waited, true);
        }
        let reach = w.check == Check::Reach;
        let Some(class) = class.or_else(|| reach.then(String::new)) else {
            return (waited, false);
        };
        let new = reach || w.classes.insert(class.clone());
        if !new {
            w.repeats += 1;
        }
        let saturate = reach || w.classes.len() > MAX_RECEIVERS || w.repeats > MAX_REPEATS;
        if !new && !saturate {
            // Seen before (the Java side remembers two classes per site):
            // its method is instrumented (a revelation still under way at
            // this site was waited for above).
            return (waited, false);
        }
        w.pending += 1;
        let (caller, call) = (w.caller.clone(), w.call.clone());
        let hidden = class.contains("$$Lambda") || class.contains("/0x");
        // A caller revelation has not reached (a dormant method running
        // inside a root context, on a path revelation misses): what it
        // calls is revealed all the same, as a root context runs it.
        let caller = st.revealer.id_of(&caller);
        let selected = if saturate || hidden {
            None
        } else {
            st.revealer
                .hierarchy()
                .select(&class, &call.name, &call.descriptor)
        };
        let mut names = mirror_prepared(jvmti, jni, st);
        let dispatched = selected.is_some();
        let revealed = match selected {
            Some(k) => Some(st.revealer.on_dispatched_call(caller, &k)),
            // A lambda's class forwards to its implementation method, which
            // the invokedynamic that created it revealed.
            None if hidden && !saturate => None,
            // A site with too many receiver classes (or a class the
            // mirror does not know): class hierarchy analysis would
            // instrument every method the call can dispatch to. With
            // dormant probes, the classes of those methods get probes
            // instead, and each method is revealed when a root context
            // first enters it (`entered`): only those called.
            None if !reach && st.dormant && st.revealer.instrumentable(&call.owner) => {
                st.site_info[site as usize].saturated = true;
                names.extend(dormant_alongside(st, &call));
                st.by_entries.insert((
                    call.owner.clone(),
                    call.name.clone(),
                    call.descriptor.clone(),
                ));
                None
            }
            None => {
                st.site_info[site as usize].saturated = true;
                Some(st.revealer.on_call_site(caller, &call))
            }
        };
        if let Some(r) = revealed {
            names.extend(apply(st, r));
        }
        if dispatched
            && st.revealer.instrumentable(&call.owner)
            && names.iter().any(|n| !st.installed.contains_key(n))
        {
            // This site's first redefinition: the classes of the other
            // methods it can dispatch to come along with dormant probes only,
            // so a receiver of theirs later switches its method on without
            // a redefinition of its own (what class hierarchy analysis
            // redefines, without instrumenting it). Not for a call of
            // `toString`, `hashCode` or `equals` on a JDK type: those can
            // dispatch to nearly every loaded class.
            names.extend(dormant_alongside(st, &call));
        }
        names.sort();
        names.dedup();
        let done = st.site_info[site as usize].saturated;
        (names, done)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let worked = !names.is_empty();
    redefine(jvmti, Some(jni), names);
    let batches = await_batches();
    if let Some(w) = state()
        .as_mut()
        .and_then(|st| st.site_info.get_mut(site as usize))
    {
        w.pending = w.pending.saturating_sub(1);
    }
    (worked || waited || batches, done)
}

/// The loaded, instrumentable classes holding no probes yet among those a
/// virtual call `call` can dispatch to: planned with no method, so the hook
/// gives them dormant probes only (lazy scheme with dormant probes).
fn dormant_alongside(st: &mut State, call: &CallSite) -> Vec<String> {
    if !st.dormant {
        return Vec::new();
    }
    let mut out = Vec::new();
    let targets =
        st.revealer
            .hierarchy()
            .virtual_targets(&call.owner, &call.name, &call.descriptor);
    for k in targets {
        if st.revealer.instrumentable(&k.class)
            && !st.installed.contains_key(&k.class)
            && !st.plan.contains_key(&k.class)
        {
            st.plan.insert(k.class.clone(), Vec::new());
            out.push(k.class);
        }
    }
    out
}

/// The classes holding no probes yet whose methods a call left to its
/// entries ([`State::by_entries`]) can now dispatch to through class
/// `name`, which has just joined the mirror: `name` itself when it
/// declares such a method, or the class it inherits one from (rare: a
/// superclass that does not implement the call's interface itself).
fn reached_by_entries(st: &State, name: &str) -> Vec<String> {
    if st.by_entries.is_empty() {
        return Vec::new();
    }
    let h = st.revealer.hierarchy();
    let mut out: Vec<String> = st
        .by_entries
        .iter()
        .filter(|(owner, _, _)| h.is_subtype(name, owner))
        .filter_map(|(_, m, d)| h.select(name, m, d))
        .filter(|k| {
            h.declared(&k.class, &k.name, &k.descriptor)
                .is_some_and(|m| is_virtual(m) && has_code(m))
                && st.revealer.instrumentable(&k.class)
                && !st.plan.contains_key(&k.class)
                && !st.installed.contains_key(&k.class)
        })
        .map(|k| k.class)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Waits (bounded, `REDEFINE_WAIT`) while other threads reveal what watched
/// site `site` reaches; true when it had to wait.
fn await_site(site: u32) -> bool {
    let deadline = Instant::now() + REDEFINE_WAIT;
    let mut waited = false;
    loop {
        let busy = state()
            .as_ref()
            .and_then(|st| st.site_info.get(site as usize))
            .is_some_and(|w| w.pending > 0);
        if !busy || Instant::now() >= deadline {
            return waited;
        }
        waited = true;
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// `Method.invoke` or `Constructor.newInstance` is about to call `method`
/// on a thread inside a root context: reveal the target (and what
/// dispatches to it) and instrument it now, before it runs. Returns
/// whether anything was done (the first time per target).
pub fn reflective_call(jvmti: &Jvmti, jni: Jni<'_>, method: Local<'_>) -> bool {
    let t0 = Instant::now();
    let Some(mid) = jni.reflected_method(method) else {
        return false;
    };
    let key = jni.with_local_frame(8, |jni| {
        let class = jvmti.method_declaring_class(&jni, mid).ok()?;
        let class = signature_name(jvmti, class)?;
        let (name, descriptor) = jvmti.method_name(mid).ok()?;
        Some(MethodKey::new(&class, &name, &descriptor))
    });
    let Some(key) = key else {
        return false;
    };
    reveal_one(jvmti, jni, t0, |st| {
        st.reflected
            .insert(key.clone())
            .then(|| st.revealer.on_reflective_call(None, &key))
    })
}

/// One revelation step on the probing thread: `step` asks the revealer
/// (`None`: nothing to do), the batch is planned and redefined, the time
/// since `t0` counted as revealing. Returns whether `step` did anything.
fn reveal_one(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    t0: Instant,
    step: impl FnOnce(&mut State) -> Option<Revealed>,
) -> bool {
    let (names, did) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return false;
        };
        // Mirrored first, so the step sees the classes linked since.
        let mut names = mirror_prepared(jvmti, jni, st);
        let revealed = step(st);
        let did = revealed.is_some();
        if let Some(r) = revealed {
            names.extend(apply(st, r));
        }
        names.sort();
        names.dedup();
        (names, did)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    did
}

/// The first entry of probe id `id` (called by the probe, on the probing
/// thread, with its recursion guard set). Scans the method's call sites and
/// instruments what they reach. Returns whether any work was done.
pub fn first_call(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    let scanned = scan_first_call(jvmti, jni, id);
    // Work class loads left for later (and eager scans) is done now too, so
    // what this call goes on to run is instrumented.
    let settled = unsettled() && settle(jvmti, jni);
    // A batch another thread took before us (the control thread's tick,
    // a class being linked) may instrument what this call runs next: let
    // it finish first.
    let waited = await_batches();
    scanned || settled || waited
}

/// Waits (bounded) until no other thread is redefining; true when it had
/// to wait. Returns at once on the thread that holds the batch lock.
fn await_batches() -> bool {
    lock_batches().1
}

/// The batch lock `REDEFINE`, waited for up to `REDEFINE_WAIT`, and whether
/// another thread's batch had to be waited for. `None` past the bound, and
/// at once on the thread that holds the lock already (a ClassPrepare posted
/// inside its own batch).
fn lock_batches() -> (Option<MutexGuard<'static, ()>>, bool) {
    if REDEFINING.try_with(|r| r.get()).unwrap_or(true) {
        return (None, false);
    }
    let deadline = Instant::now() + REDEFINE_WAIT;
    let mut waited = false;
    loop {
        match crate::sync::try_lock(&REDEFINE) {
            Some(g) => return (Some(g), waited),
            None if Instant::now() < deadline => {
                waited = true;
                std::thread::sleep(Duration::from_micros(200));
            }
            None => return (None, waited),
        }
    }
}

fn scan_first_call(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    let t0 = Instant::now();
    let names = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return false;
        };
        let Some(&(rid, true)) = st.by_probe.get(&id) else {
            return false;
        };
        let Some(key) = st.revealer.method(rid).cloned() else {
            return false;
        };
        let Some(mut sites) = lookup(&st.sites, &key) else {
            // The class never went through the hook (it failed): nothing to scan.
            return false;
        };
        if st.receivers {
            // Watched sites are revealed by the receivers they see.
            sites.retain(|c| {
                !st.site_ids.contains_key(&(
                    key.class.clone(),
                    key.name.clone(),
                    key.descriptor.clone(),
                    c.offset,
                ))
            });
        }
        st.by_probe.insert(id, (rid, false));
        let mut names = mirror_prepared(jvmti, jni, st);
        if let Ok(revealed) = st.revealer.on_first_call(rid, &sites) {
            names.extend(apply(st, revealed));
        }
        names.sort();
        names.dedup();
        names
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    true
}

/// Whether the revelation steps must look for newly prepared classes
/// themselves (ClassPrepare could not be enabled).
fn polls_unprepared(st: &State) -> bool {
    !st.unprepared.is_empty() && !WATCHING_LINKS.load(Ordering::Acquire)
}

/// Adds the classes of `unprepared` that are prepared by now to the mirror,
/// when ClassPrepare does not. Returns the classes to retransform.
fn mirror_prepared(jvmti: &Jvmti, jni: Jni<'_>, st: &mut State) -> Vec<String> {
    if !polls_unprepared(st) {
        return Vec::new();
    }
    mirror_prepared_of(jvmti, jni, st, None)
}

/// Adds the classes of `unprepared` named `only` (all when `None`) that
/// are prepared by now to the mirror. Returns the classes to retransform.
fn mirror_prepared_of(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    st: &mut State,
    only: Option<&str>,
) -> Vec<String> {
    let mut names = Vec::new();
    let todo: Vec<(String, Vec<Global>)> = match only {
        Some(n) => st.unprepared.remove_entry(n).into_iter().collect(),
        None => st.unprepared.drain().collect(),
    };
    let mut done = Vec::new();
    for (name, globals) in todo {
        let mut still = Vec::new();
        for g in globals {
            let info = jni.with_local_frame(32, |jni| class_facts(jvmti, jni, g.as_local(), &name));
            match info {
                Some(info) => {
                    let outcome = st.revealer.on_class_loaded(info, 0, Vec::new);
                    // Already defined: what it plans needs a redefinition.
                    names.extend(apply(st, own_batch(&name, outcome.methods)));
                    names.extend(apply(st, outcome.redefine));
                    done.push(g);
                }
                None => still.push(g),
            }
        }
        if !still.is_empty() {
            st.unprepared.insert(name, still);
        }
    }
    for g in done {
        jni.delete_global(g);
    }
    names
}

/// ClassPrepare: a class loaded before the attach but not linked then is
/// linked now, before any of its code runs. Mirror it and instrument what
/// revelation reaches in it (an override of a method the subgraph calls)
/// at once, on this thread: waiting for the next revelation step would let
/// its first calls go unseen.
pub fn on_class_prepare(jvmti: &Jvmti, jni: Jni<'_>, class: Local<'_>) {
    if !enabled() {
        return;
    }
    if state().as_ref().is_none_or(|st| st.unprepared.is_empty()) {
        return;
    }
    let Some(name) = signature_name(jvmti, class) else {
        return;
    };
    let t0 = Instant::now();
    let (names, eager) = {
        let mut guard = state();
        let Some(st) = guard.as_mut() else {
            return;
        };
        if !st.unprepared.contains_key(&name) {
            return;
        }
        let mut names = mirror_prepared_of(jvmti, jni, st, Some(&name));
        names.sort();
        names.dedup();
        // Eager: the call sites of what is instrumented in it come with the
        // bytes the redefinition captures, and the scans wait for them.
        let eager = st.revealer.scheme() == Scheme::Eager && !names.is_empty();
        if eager {
            st.scan_pending = true;
        }
        (names, eager)
    };
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    redefine(jvmti, Some(jni), names);
    if eager {
        settle(jvmti, jni);
    }
}

/// A batch of one class's planned methods (nothing when empty).
fn own_batch(name: &str, methods: Vec<sprig_callgraph::reveal::Instrument>) -> Revealed {
    let classes = if methods.is_empty() {
        Vec::new()
    } else {
        vec![sprig_callgraph::reveal::ClassBatch {
            class: name.to_string(),
            loaders: Vec::new(),
            methods,
        }]
    };
    Revealed {
        classes,
        reflective_sites: Vec::new(),
    }
}

/// The class file load hook in a revealing session: the methods of `name`
/// to instrument in `bytes` (with the probe pair of each), caching the call
/// sites of the class. At load the class joins the mirror first; batches it
/// causes for other classes go to the control thread.
pub fn targets(name: &str, bytes: &[u8], redefining: bool) -> HookPlan {
    let t0 = Instant::now();
    let mut guard = state();
    let Some(st) = guard.as_mut() else {
        return (Vec::new(), None);
    };
    // The class as parsed at load, kept for the dormant probes below.
    let mut parsed: Option<ClassInfo> = None;
    if !redefining {
        let Ok(info) = sprig_rewriter::class_info(bytes) else {
            return (Vec::new(), None);
        };
        if st.dormant {
            parsed = Some(info.clone());
        }
        let outcome = st.revealer.on_class_loaded(info, 0, || {
            sprig_rewriter::callees_all(bytes).unwrap_or_default()
        });
        apply(st, own_batch(name, outcome.methods));
        let others = apply(st, outcome.redefine);
        st.deferred.extend(others);
        if outcome.scan_pending {
            // Scanned (and redefined) by the next `settle`.
            st.scan_pending = true;
        }
    }
    if !redefining {
        // Dormant probes only, for a call left to the entries it makes: in
        // this class as it loads, in a loaded superclass from the control
        // thread.
        for class in reached_by_entries(st, name) {
            st.plan.insert(class.clone(), Vec::new());
            if class != name {
                st.deferred.insert(class);
            }
        }
    }
    let Some(planned) = st.plan.get(name) else {
        REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        return (Vec::new(), None);
    };
    let mut out: Vec<(Target, bool)> = planned
        .iter()
        .map(|p| {
            (
                Target {
                    name: p.name.clone(),
                    descriptor: p.descriptor.clone(),
                    id: p.id,
                    probes: if p.reflect {
                        REFLECT_PROBES
                    } else if p.root {
                        ROOT_PROBES
                    } else {
                        PLAIN_PROBES
                    },
                },
                p.root,
            )
        })
        .collect();
    // `--skip-trivial`: trivial methods other than roots get no probes
    // (learnt from the class's bytes the first time they pass here).
    if st.skip_trivial > 0 {
        let bound = st.skip_trivial;
        let t = st
            .trivial
            .entry(name.to_string())
            .or_insert_with(|| Trivial::of(bytes, bound));
        // Reflection's watch points are JDK methods, never trivial ones.
        out.retain(|(target, root)| {
            target.probes == REFLECT_PROBES
                || !t.leaves_out(&target.name, &target.descriptor, *root)
        });
    }
    // The class's other methods get dormant probes, so revealing them
    // later needs no redefinition (reflection's watch points excepted).
    let mut have: Probed = out
        .iter()
        .map(|(t, root)| ((t.name.clone(), t.descriptor.clone()), (t.id, *root)))
        .collect();
    if st.dormant
        && !planned.iter().any(|p| p.reflect)
        && let Some(info) = parsed.or_else(|| sprig_rewriter::class_info(bytes).ok())
    {
        let dotted = name.replace('/', ".");
        let trivial_here = st.trivial.get(name);
        for m in info.methods {
            let has_code = m.access & (ACC_NATIVE | ACC_ABSTRACT) == 0 && m.code_length > 0;
            let key = (m.name, m.descriptor);
            let trivial = trivial_here.is_some_and(|t| t.methods.contains(&key));
            if !has_code || key.0 == "<clinit>" || trivial || have.contains_key(&key) {
                continue;
            }
            if let Some(id) = dormant_method(&dotted, &key.0, &key.1) {
                st.dormant_keys
                    .entry(id)
                    .or_insert_with(|| MethodKey::new(name, &key.0, &key.1));
                out.push((
                    Target {
                        name: key.0.clone(),
                        descriptor: key.1.clone(),
                        id,
                        probes: PLAIN_PROBES,
                    },
                    false,
                ));
                have.insert(key, (id, false));
            }
        }
    }
    st.installed.insert(name.to_string(), have);
    if !st.sites.contains_key(name)
        && let Ok(all) = sprig_rewriter::callees_all(bytes)
    {
        let table: Sites = all.into_iter().map(|(n, d, s)| ((n, d), s)).collect();
        st.sites.insert(name.to_string(), table);
    }
    let guards = st.receivers.then(|| guards_of(st, name, &out));
    REVEAL_NS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    (out, guards)
}

/// What the hook instruments in a class: the targets (with whether each is
/// a root) and, when call sites are watched, each target's receiver checks.
pub type HookPlan = (Vec<(Target, bool)>, Option<Vec<Vec<GuardSite>>>);

/// A method holding dormant probes was entered inside a root context (on
/// this thread, in its probe): it belongs to the subgraph, since the root
/// is running it, though no rule reached it (a JDK callback through a type
/// the callback rule leaves out, or a path only the receivers would see).
/// Marks it reached and activates its probes before the entry is recorded
/// (its class already holds them: no redefinition, as a rule), so this
/// call and every later one are recorded, and its first call reveals its
/// callees. Returns whether `id` is active now.
pub fn entered(jvmti: &Jvmti, jni: Jni<'_>, id: u32) -> bool {
    // Switched on under the lock: a second thread entering it at once
    // waits, then finds it active.
    let switched = state().as_mut().is_some_and(|st| {
        st.held
            .remove(&id)
            .map(|(class, name, descriptor, _)| {
                announce_method(&class, &name, &descriptor);
                st.activated_in_place += 1;
            })
            .is_some()
    });
    if switched {
        return true;
    }
    reveal_one(jvmti, jni, Instant::now(), |st| {
        let key = st.dormant_keys.get(&id)?.clone();
        Some(st.revealer.on_entered(&key))
    });
    crate::methods::is_active(id)
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

fn edge_name(k: EdgeKind) -> &'static str {
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

/// Stops revelation before the restore: no batch starts after this, and
/// the returned guard keeps a batch already running from finishing after
/// the restore (hold it across the restore).
pub fn quiesce() -> MutexGuard<'static, ()> {
    ON.store(false, Ordering::Release);
    crate::sync::lock(&REDEFINE)
}

/// Session end (after the restore): class references released, the
/// revealer dropped.
pub fn end(jni: Jni<'_>) {
    ON.store(false, Ordering::Release);
    if crate::probe_class::debug_on() {
        debug_uncalled();
    }
    if let Some(map) = classes().take() {
        for g in map.into_values().flatten() {
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

/// Entries of a method with dormant probes inside a root context that the
/// probes' JNI path let pass unrecorded (not revealed: refused once, or no
/// session), since the last [`take_site_calls`]: for the debug lines.
static DORMANT_PASSED: AtomicU64 = AtomicU64::new(0);

/// `nSite` calls since the last [`take_site_calls`], by what they returned
/// (`probe::SITE_SEEN`, `SITE_DONE`, `SITE_AGAIN`): for the debug lines.
static SITE_CALLS: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

/// The `nSite` calls counted so far, by result, and the dormant entries
/// let pass; the counts start again.
fn take_site_calls() -> ([u64; 3], u64) {
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

/// Counts an entry of a dormant method that the probe let pass (for the
/// debug lines).
pub fn count_dormant_passed() {
    DORMANT_PASSED.fetch_add(1, Ordering::Relaxed);
}

/// Debugging Scheme B's precision (`SPRIG_AGENT_DEBUG` in the target's
/// environment): every instrumented method the session never saw called,
/// on the target's stderr, with the chain of edges that revealed it.
fn debug_uncalled() {
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
