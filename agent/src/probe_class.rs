//! The probe class `sprig.rt.Probe`: compiled by build.rs, embedded here,
//! defined once per JVM in the bootstrap loader (so every class can call
//! it), its natives bound on every attach, and its two flags written.

use crate::error::AgentError;
use crate::ffi::{
    FieldId, Global, Jni, Local, ProbeNatives, alloc_length_native, alloc_native, copy_native,
    probe_natives, reflected_native, site_native, slots, table_native, virtual_native,
};
use sprig_rewriter::ProbeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Internal name of the probe class.
pub const CLASS: &str = "sprig/rt/Probe";
/// Probe pair used in root methods.
pub const ROOT_ENTER: &str = "rootEnter";
pub const ROOT_EXIT: &str = "rootExit";
/// Probe pair used in every other instrumented method.
pub const ENTER: &str = "enter";
pub const EXIT: &str = "exit";
/// Receiver probe on `Method.invoke`/`Constructor.newInstance`, and its
/// (empty) exit.
pub const REFLECT_ENTER: &str = "reflect";
pub const REFLECT_EXIT: &str = "reflectExit";
/// Receiver check before a watched virtual or interface call.
pub const SITE: &str = "site";
/// Reach check before a watched static or special call.
pub const REACH: &str = "reach";
/// Allocation probes (`--alloc`): after a `new`, and after an array
/// allocation.
pub const ALLOC: &str = "alloc";
pub const ALLOC_ARRAY: &str = "allocArray";
/// Allocation probe after a one-dimension array allocation, passed the
/// length and never the array.
pub const ALLOC_ARRAY_LENGTH: &str = "allocArrayLength";

/// The JNI-only class (Java 17 class file), used on JDK 17–21.
static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Probe.class"));
/// The class with the FFM fast path (JDK 22 class file), used on JDK 22+;
/// empty when the build found no javac 22 or later.
static BYTES_FFM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ffm/sprig/rt/Probe.class"));
/// Setting this in the target's environment keeps the JNI-only class on
/// JDK 22+ (for comparisons).
const JNI_ONLY_ENV: &str = "SPRIG_AGENT_JNI_PROBES";
/// Setting this in the target's environment makes the agent say on stderr
/// which probe path it bound, its calibration windows, each redefinition
/// batch, and at the end of a session the watched call sites and the
/// calls into the agent they made, and the instrumented methods that never
/// ran.
const DEBUG_ENV: &str = "SPRIG_AGENT_DEBUG";

/// Whether the agent prints its debugging lines ([`DEBUG_ENV`]).
pub fn debug_on() -> bool {
    std::env::var_os(DEBUG_ENV).is_some()
}

struct ProbeClass {
    class: Global,
    active: FieldId,
    on: FieldId,
    /// `Probe.LIVE`, a Java copy of the active-id bitmap that the probes of
    /// a probe class an older sprig defined in this JVM read before calling
    /// the agent (kept up to date for them); the class this sprig defines
    /// has none, its probes leave that check to the agent.
    live: Option<Global>,
    /// The `int[]` behind `Probe.INSIDE` (open root contexts per thread-id
    /// slot), cleared when a session starts.
    inside: Option<Global>,
    /// `Probe.virtualRoots`: root calls on virtual threads, not profiled
    /// (absent in a probe class an older sprig defined in this JVM).
    virtual_roots: Option<FieldId>,
    /// `Probe.RECEIVERS` (receiver classes per watched call site, allocated
    /// by the first profiling session that checks receivers), absent in a probe class
    /// an older sprig defined.
    receivers: Option<FieldId>,
    /// `Probe.REFLECTED` (the reflective targets handed over this session,
    /// a fresh array per session), absent in a probe class an older sprig
    /// defined.
    reflected: Option<FieldId>,
    /// `Probe.COUNTS` (entries counted per thread-id slot in the call-edge
    /// bursts' counting windows, allocated the first time a session
    /// counts), absent in a probe class an older sprig defined.
    counts: Option<FieldId>,
    /// `Probe.BURST_CALLS` is there: the probe class runs a calibration
    /// burst when `nRootExit` asks for one (an older one does not).
    bursts: bool,
    /// `Probe.allocJava` (whether the Java path records allocations, as
    /// one-slot `Alloc` events, or pauses them: the measurement knob
    /// `exact-alloc-duty`), absent in a probe class an older sprig defined.
    alloc_java: Option<FieldId>,
    /// `Probe.COPIES` (where each `clone()` site's copies are recorded, by
    /// class: a fresh array per `--alloc` session), absent in a probe
    /// class an older sprig defined.
    copies: Option<FieldId>,
}

/// Call sites `Probe.RECEIVERS` has room for: site ids run below this.
pub const SITE_SLOTS: u32 = 1 << 16;
// The probe kinds: which pair of the class's probes a method gets.

/// Index of the root probe pair in [`probe_sets`].
pub const ROOT_PROBES: usize = 0;
/// Index of the plain probe pair (revealed methods).
pub const PLAIN_PROBES: usize = 1;
/// The receiver probe on `Method.invoke`/`Constructor.newInstance`.
pub const REFLECT_PROBES: usize = 2;

/// The probe pairs handed to the rewriter.
pub fn probe_sets() -> &'static [ProbeSet] {
    static SETS: OnceLock<Vec<ProbeSet>> = OnceLock::new();
    SETS.get_or_init(|| {
        let set = |entry: &str, exit: &str| ProbeSet {
            class: CLASS.to_string(),
            entry: entry.to_string(),
            exit: exit.to_string(),
            entry_receiver: false,
        };
        let mut v = vec![
            set(ROOT_ENTER, ROOT_EXIT),
            set(ENTER, EXIT),
            ProbeSet {
                entry_receiver: true,
                ..set(REFLECT_ENTER, REFLECT_EXIT)
            },
        ];
        debug_assert_eq!(v.len(), REFLECT_PROBES + 1);
        v.shrink_to_fit();
        v
    })
}

/// Words of `Probe.LIVE` in a probe class an older sprig defined: the
/// active-id bitmap of `methods`, one bit per tracked id.
pub const LIVE_WORDS: usize = 1 << 14;

/// `Probe.nSite` is bound to this library (this attach).
static SITES_BOUND: AtomicBool = AtomicBool::new(false);
/// `Probe.nAlloc` is bound to this library (this attach).
static ALLOCS_BOUND: AtomicBool = AtomicBool::new(false);
/// `Probe.nAllocLength` is bound to this library (this attach).
static ALLOC_LENGTHS_BOUND: AtomicBool = AtomicBool::new(false);
/// `Probe.nCopy` is bound to this library (this attach).
static COPIES_BOUND: AtomicBool = AtomicBool::new(false);
/// `clone()` sites `Probe.COPIES` has room for: site ids run below this.
const COPY_SLOTS: i32 = 1 << 16;
/// `Probe.nReflected` is bound to this library (this attach).
static REFLECTED_BOUND: AtomicBool = AtomicBool::new(false);
/// Slots of a session's `Probe.REFLECTED` (a power of two): two per
/// identity hash in the lower half, 16 per thread-id slot in the upper.
const REFLECTED_SLOTS: i32 = 1 << 11;

static PROBE: OnceLock<ProbeClass> = OnceLock::new();
/// Serialises every write of the two fields, so the last writer always
/// writes the latest value.
static WRITE: Mutex<()> = Mutex::new(());
/// Serialises writes of `Probe.LIVE` words.
static LIVE_WRITE: Mutex<()> = Mutex::new(());
/// Type of `Probe.INSIDE`.
const INSIDE_SIG: &std::ffi::CStr = c"[I";

/// The `int[]` of `Probe.INSIDE`.
fn inside_array<'a>(jni: Jni<'a>, class: Local<'_>) -> Option<Local<'a>> {
    let field = jni.find_static_field(class, "INSIDE", INSIDE_SIG)?;
    jni.static_object(&class, field)
}

/// Whether to define the JDK 22+ class in this JVM.
fn wants_ffm() -> bool {
    if BYTES_FFM.is_empty() || std::env::var_os(JNI_ONLY_ENV).is_some() {
        return false;
    }
    vm_major().is_some_and(|v| v >= 22)
}

/// The target's Java feature version (17, 25, ...), when the agent can
/// read it.
pub fn vm_major() -> Option<u32> {
    let agent = crate::env::get()?;
    // A VM property: JVMTI does not see `java.specification.version`.
    let version = agent
        .jvmti
        .system_property("java.vm.specification.version")
        .ok()?;
    version.split('.').next()?.parse::<u32>().ok()
}

/// Defines the class if this JVM does not have it yet (a previous attach
/// defined it otherwise) and binds its natives to this library. Returns
/// whether it defined the class now: no sprig session ran in this JVM
/// before. The natives are `P`'s.
pub fn ensure<P: ProbeNatives>(jni: Jni<'_>) -> Result<bool, AgentError> {
    let _guard = crate::sync::lock(&WRITE);
    jni.with_local_frame(16, |jni| {
        let (class, ffm, fresh) = match jni.find_class(CLASS)? {
            // GetStaticFieldID initialises the class (done long ago).
            Some(c) if jni.find_static_field(c, "INSIDE", INSIDE_SIG).is_none() => {
                return Err(AgentError::OldProbeClass);
            }
            Some(c) => (c, jni.find_static_field(c, "FAST", c"Z").is_some(), false),
            None => {
                let ffm = wants_ffm();
                let bytes = if ffm { BYTES_FFM } else { BYTES };
                (jni.define_bootstrap_class(CLASS, bytes)?, ffm, true)
            }
        };
        // Before the class initialises: its initialiser asks for the
        // address of the fast probes.
        jni.register_natives(class, &probe_natives::<P>(ffm))?;
        // Absent from a probe class an older sprig defined: no Java path.
        let table_bound = jni.register_natives(class, &[table_native()]).is_ok();
        if fresh && table_bound {
            open_unsafe(jni, class);
        }
        // Absent from a probe class an older sprig defined: the session
        // then reveals virtual calls by class hierarchy only.
        SITES_BOUND.store(
            jni.register_natives(class, &[site_native::<P>()]).is_ok(),
            Ordering::Release,
        );
        // Absent from a probe class an older sprig defined: no
        // allocation probes.
        ALLOCS_BOUND.store(
            jni.register_natives(class, &[alloc_native::<P>()]).is_ok(),
            Ordering::Release,
        );
        // Absent from a probe class an older sprig defined: its array
        // probe gets the array (`allocArray`).
        ALLOC_LENGTHS_BOUND.store(
            jni.register_natives(class, &[alloc_length_native::<P>()])
                .is_ok(),
            Ordering::Release,
        );
        // Absent from a probe class an older sprig defined: every copy
        // goes to `nAlloc`.
        COPIES_BOUND.store(
            jni.register_natives(class, &[copy_native::<P>()]).is_ok(),
            Ordering::Release,
        );
        // Absent from a probe class an older sprig defined: it counts root
        // calls on virtual threads as skipped.
        let _ = jni.register_natives(class, &[virtual_native::<P>()]);
        // Absent from a probe class an older sprig defined: every
        // reflective call then goes to `nReflect`.
        REFLECTED_BOUND.store(
            jni.register_natives(class, &[reflected_native::<P>()])
                .is_ok(),
            Ordering::Release,
        );
        if PROBE.get().is_none() {
            let allowed = if ffm && fresh {
                allow_native_access(jni)
            } else {
                None
            };
            // GetStaticFieldID initialises the class.
            let fields = jni
                .static_int_field(class, "active")
                .and_then(|active| Ok((active, jni.static_int_field(class, "on")?)));
            if let Some((module, field)) = allowed {
                jni.set_boolean_field(module, field, false);
            }
            let (active, on) = fields?;
            let live = jni
                .find_static_field(class, "LIVE", c"[J")
                .and_then(|f| jni.static_object(&class, f))
                .and_then(|a| jni.new_global(a).ok());
            let inside = inside_array(jni, class).and_then(|a| jni.new_global(a).ok());
            let virtual_roots = jni.find_static_field(class, "virtualRoots", c"J");
            let receivers = jni.find_static_field(class, "RECEIVERS", c"[Ljava/lang/Object;");
            let reflected = jni.find_static_field(class, "REFLECTED", c"[Ljava/lang/Object;");
            let counts = jni.find_static_field(class, "COUNTS", c"[J");
            let bursts = jni.find_static_field(class, "BURST_CALLS", c"I").is_some();
            let alloc_java = jni.find_static_field(class, "allocJava", c"I");
            let copies = jni.find_static_field(class, "COPIES", c"[Ljava/lang/Object;");
            let class = jni.new_global(class)?;
            let _ = PROBE.set(ProbeClass {
                class,
                active,
                on,
                live,
                inside,
                virtual_roots,
                receivers,
                reflected,
                counts,
                bursts,
                alloc_java,
                copies,
            });
        }
        let fast = ffm
            && jni
                .find_static_field(class, "FAST", c"Z")
                .is_some_and(|f| jni.static_boolean(&class, f));
        // The class's table is this library's (a class an older sprig or
        // another copy of the agent defined may hold another, or none).
        let java = table_bound
            && slots::table().is_some_and(|t| {
                jni.find_static_field(class, "TABLE", c"J")
                    .is_some_and(|f| jni.static_long(&class, f) as u64 == t as u64)
            });
        JAVA_PATH.store(java, Ordering::Release);
        if debug_on() {
            eprintln!(
                "sprig agent: probe path: {}{}",
                if fast {
                    "FFM critical downcalls, JNI for slow paths"
                } else {
                    "JNI"
                },
                if java {
                    "; Java stores under sampled timing"
                } else {
                    ""
                }
            );
        }
        Ok(fresh)
    })
}

// The JVM's one session: `sprig.rt.Session`, shared by every copy of the
// agent in this JVM (each copy's own statics are not).

/// Internal name of the class that holds the JVM's one session.
const SESSION_CLASS: &str = "sprig/rt/Session";
static SESSION_BYTES: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Session.class"));

/// The sprig that runs (or asks for) a session: its process id and its
/// user id (`u32::MAX` when unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub uid: u32,
}

impl Owner {
    /// `Session.owner`'s value for this owner (never 0: a pid is not).
    fn word(self) -> i64 {
        ((u64::from(self.uid) << 32) | u64::from(self.pid)) as i64
    }

    fn from_word(w: i64) -> Owner {
        let w = w as u64;
        Owner {
            pid: w as u32,
            uid: (w >> 32) as u32,
        }
    }

    /// `sprig pid 1234, user alice`.
    pub fn describe(self) -> String {
        let user = match self.uid {
            u32::MAX => "unknown".to_string(),
            uid => user_name(uid),
        };
        format!("sprig pid {}, user {user}", self.pid)
    }
}

/// The name of `uid` in this JVM's /etc/passwd, or `uid N`.
fn user_name(uid: u32) -> String {
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                let mut f = l.split(':');
                let name = f.next()?;
                let id = f.nth(1)?.parse::<u32>().ok()?;
                (id == uid && !name.is_empty()).then(|| name.to_string())
            })
        })
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// This JVM's `Session` class, defined now when no agent did yet.
fn session_class<'a>(jni: Jni<'a>) -> Result<Local<'a>, AgentError> {
    if let Some(c) = jni.find_class(SESSION_CLASS)? {
        return Ok(c);
    }
    match jni.define_bootstrap_class(SESSION_CLASS, SESSION_BYTES) {
        Ok(c) => Ok(c),
        // Another copy of the agent defined it meanwhile.
        Err(e) => jni.find_class(SESSION_CLASS)?.ok_or(AgentError::Jni(e)),
    }
}

/// Runs `f` on `Session.owner`'s current value under the class's monitor;
/// `f` returns the value to write, if any.
fn with_owner<R>(jni: Jni<'_>, f: impl FnOnce(i64) -> (Option<i64>, R)) -> Result<R, AgentError> {
    jni.with_local_frame(8, |jni| {
        let class = session_class(jni)?;
        let field = jni
            .find_static_field(class, "owner", c"J")
            .ok_or(AgentError::Jni(crate::ffi::JniError::Code {
                call: "GetStaticFieldID(Session.owner)",
                code: -1,
            }))?;
        jni.with_monitor(class, || {
            let (write, out) = f(jni.static_long(&class, field));
            if let Some(w) = write {
                jni.set_static_long(&class, field, w);
            }
            out
        })
        .ok_or(AgentError::Jni(crate::ffi::JniError::Code {
            call: "MonitorEnter(Session)",
            code: -1,
        }))
    })
}

/// Claims this JVM's one session for `me`, whichever copy of the agent
/// asks: `Busy` naming the sprig whose session runs. Taken before the
/// probe class's natives are bound to this copy.
pub fn claim_jvm(jni: Jni<'_>, me: Owner) -> Result<(), AgentError> {
    let held = with_owner(jni, |now| match now {
        0 => (Some(me.word()), None),
        other => (None, Some(Owner::from_word(other))),
    })?;
    match held {
        None => Ok(()),
        Some(owner) => Err(AgentError::Busy {
            owner: owner.describe(),
        }),
    }
}

/// Gives the JVM's session back, if `me` holds it.
pub fn release_jvm(jni: Jni<'_>, me: Owner) {
    let _ = with_owner(jni, |now| ((now == me.word()).then_some(0), ()));
}

/// The sprig whose session runs in this JVM, if any.
pub fn jvm_owner(jni: Jni<'_>) -> Option<Owner> {
    with_owner(jni, |now| (None, (now != 0).then(|| Owner::from_word(now))))
        .ok()
        .flatten()
}

/// The probe class's Java path of sampled timing is linked to this
/// library's slot table (`ffi::slots`).
static JAVA_PATH: AtomicBool = AtomicBool::new(false);

/// Whether the probes can record in Java under sampled timing.
pub fn java_path() -> bool {
    JAVA_PATH.load(Ordering::Acquire)
}

/// Exports `jdk.internal.misc` to the probe class's module (the boot
/// loader's unnamed module) before the class initialises, so that its
/// Java path can use `jdk.internal.misc.Unsafe` with no command-line flag
/// and no warning (`sun.misc.Unsafe`'s memory methods warn on JDK 23 and
/// later). Without it the class initialises with no Java path.
fn open_unsafe(jni: Jni<'_>, class: Local<'_>) {
    let Some(agent) = crate::env::get() else {
        return;
    };
    let Some(module) = jni.module_of(class) else {
        return;
    };
    if let Err(e) = agent.jvmti.export_boot_package("jdk/internal/misc", module)
        && debug_on()
    {
        eprintln!("sprig agent: jdk.internal.misc not exported to the probe class: {e}");
    }
}

/// The probe class's initialiser links its fast path with
/// `Linker.downcallHandle`, a restricted method: on JDK 22+ its first call
/// from the class path prints a warning on the target's stderr unless
/// native access is enabled for unnamed modules. The initialiser is the
/// agent's own code, not the application's: enable native access for
/// unnamed modules (the private `Module.ALL_UNNAMED_MODULE.
/// enableNativeAccess`, reachable through JNI) just around it. Returns the
/// module and field to put back to false afterwards; `None` when it was
/// already enabled, when the command line denies native access (then the
/// class falls back to JNI only), or when this JDK keeps the flag elsewhere
/// (then the warning may appear).
fn allow_native_access<'a>(jni: Jni<'a>) -> Option<(Local<'a>, FieldId)> {
    let denied = crate::env::get().is_some_and(|a| {
        a.jvmti
            .system_property("jdk.module.illegal.native.access")
            .is_ok_and(|v| v == "deny")
    });
    if denied {
        return None;
    }
    let module_class = jni.find_class("java/lang/Module").ok()??;
    let all = jni.find_static_field(module_class, "ALL_UNNAMED_MODULE", c"Ljava/lang/Module;")?;
    let module = jni.static_object(&module_class, all)?;
    let flag = jni.find_field(module_class, "enableNativeAccess", c"Z")?;
    if jni.boolean_field(module, flag) {
        return None;
    }
    jni.set_boolean_field(module, flag, true);
    Some((module, flag))
}

/// Copies word `word` of the active-id bitmap (`methods`) into
/// `Probe.LIVE`, reading it under the lock so the last writer writes the
/// latest value. Any thread the JVM knows (hooks, probes, the agent's).
pub fn publish_live_word(word: usize, current: impl FnOnce() -> u64) {
    let Some(p) = PROBE.get() else {
        return;
    };
    let Some(live) = &p.live else {
        return;
    };
    let Some(agent) = crate::env::get() else {
        return;
    };
    let Some(jni) = agent.vm.current_jni() else {
        return;
    };
    let _guard = crate::sync::lock(&LIVE_WRITE);
    let Ok(index) = i32::try_from(word) else {
        return;
    };
    jni.set_long_array_region(live.as_local(), index, &[current() as i64]);
}

/// A session starts: every id dormant in `Probe.LIVE` (a probe class an
/// older sprig defined), the receiver classes remembered by the `used`
/// watched sites of earlier sessions forgotten, and a fresh
/// `Probe.REFLECTED` and, with `--alloc` (`allocs`), `Probe.COPIES` and
/// the Java path's allocations recorded (before any root context of the
/// session opens).
pub fn begin_session(jni: Jni<'_>, used: u32, allocs: bool) {
    clear_live(jni);
    clear_sites(jni, used);
    fresh_reflected(jni, true);
    fresh_array(
        jni,
        |p| p.copies,
        allocs && COPIES_BOUND.load(Ordering::Acquire),
        COPY_SLOTS * 2,
    );
    // Test-only (`SPRIG_AGENT_FAULT=alloc-java-unset`): the field left
    // as an older sprig's agent leaves it.
    let record = allocs && !crate::error::fault_named("alloc-java-unset");
    set_alloc_java(jni, if record { ALLOC_JAVA_RECORD } else { 0 });
}

/// The session ends: the receiver classes its `used` watched sites
/// remembered are forgotten, and so are its reflective targets
/// (references that would keep those classes, and their loaders, from
/// unloading).
pub fn end_session(jni: Jni<'_>, used: u32) {
    clear_sites(jni, used);
    fresh_reflected(jni, false);
    fresh_array(jni, |p| p.copies, false, 0);
    set_alloc_java(jni, 0);
}

/// Gives `Probe.REFLECTED` a new empty array (`start`) or null: the
/// targets of reflective calls a session handed over are remembered in
/// Java for that session only. A probe class without the field is left
/// alone; one whose `nReflected` could not be bound to this library gets
/// null (its reflective calls all go to `nReflect`).
fn fresh_reflected(jni: Jni<'_>, start: bool) {
    let array = start && REFLECTED_BOUND.load(Ordering::Acquire);
    fresh_array(jni, |p| p.reflected, array, REFLECTED_SLOTS);
}

/// Gives the static `Object[]` field `field` picks a new empty array of
/// `len` slots (`fresh`) or null; a probe class without the field is left
/// alone.
fn fresh_array(
    jni: Jni<'_>,
    field: impl FnOnce(&ProbeClass) -> Option<FieldId>,
    fresh: bool,
    len: i32,
) {
    let Some((class, f)) = PROBE.get().and_then(|p| Some((&p.class, field(p)?))) else {
        return;
    };
    jni.with_local_frame(4, |jni| {
        match fresh.then(|| jni.new_object_array(len)).flatten() {
            Some(a) => jni.set_static_object(class, f, a),
            None => jni.clear_static_object(class, f),
        }
    });
}

/// Clears `Probe.LIVE` (a new session: every id dormant) and
/// `Probe.INSIDE` (no root context of this session is open yet; counts a
/// session that stopped mid-root left behind only cost native calls).
fn clear_live(jni: Jni<'_>) {
    let Some(p) = PROBE.get() else {
        return;
    };
    if let Some(live) = &p.live {
        let _guard = crate::sync::lock(&LIVE_WRITE);
        let zeros = vec![0i64; LIVE_WORDS];
        jni.set_long_array_region(live.as_local(), 0, &zeros);
    }
    if let Some(inside) = &p.inside {
        jni.set_int_array_region(inside.as_local(), 0, &[0; INSIDE_SLOTS]);
    }
    if let Some(f) = p.virtual_roots {
        jni.set_static_long(&p.class, f, 0);
    }
}

/// Whether the probe class can check receivers at call sites (`Probe.site`,
/// `Probe.reach` and their native are there).
/// Whether the probe class runs calibration bursts (`probe::ROOT_BURST_FIRST`).
pub fn bursts_available() -> bool {
    PROBE.get().is_some_and(|p| p.bursts)
}

/// Whether the probe class has the allocation probes (`Probe.alloc`,
/// `Probe.allocArray` and their native).
pub fn allocs_available() -> bool {
    ALLOCS_BOUND.load(Ordering::Acquire)
}

/// Whether the probe class has `Probe.allocArrayLength` and its native:
/// one-dimension arrays are probed with their length, not the array.
pub fn alloc_lengths_available() -> bool {
    ALLOC_LENGTHS_BOUND.load(Ordering::Acquire)
}

pub fn receivers_available() -> bool {
    SITES_BOUND.load(Ordering::Acquire) && PROBE.get().is_some_and(|p| p.receivers.is_some())
}

/// Allocates `Probe.RECEIVERS` (two slots per site id) unless a session did
/// already; false when it cannot be.
pub fn ensure_receivers(jni: Jni<'_>) -> bool {
    ensure_array(
        jni,
        |p| p.receivers,
        |jni| jni.new_object_array(2 * SITE_SLOTS as i32),
    )
}

/// Sets the static array field `field` picks of the probe class to what
/// `alloc` makes, unless it holds one already; false when the class has
/// no such field or the array cannot be allocated.
fn ensure_array(
    jni: Jni<'_>,
    field: impl FnOnce(&ProbeClass) -> Option<FieldId>,
    alloc: impl for<'a> FnOnce(Jni<'a>) -> Option<crate::ffi::Local<'a>>,
) -> bool {
    let Some((p, f)) = PROBE.get().and_then(|p| Some((p, field(p)?))) else {
        return false;
    };
    jni.with_local_frame(4, |jni| {
        if jni.static_object(&p.class, f).is_some() {
            return true;
        }
        match alloc(jni) {
            Some(a) => {
                jni.set_static_object(&p.class, f, a);
                true
            }
            None => false,
        }
    })
}

/// Forgets the receiver classes `Probe.RECEIVERS` holds for sites `0..used`
/// (a new session hands the ids out anew; at the end, so that they do not
/// keep those classes from unloading).
fn clear_sites(jni: Jni<'_>, used: u32) {
    let Some(ProbeClass {
        class,
        receivers: Some(f),
        ..
    }) = PROBE.get()
    else {
        return;
    };
    jni.with_local_frame(4, |jni| {
        if let Some(a) = jni.static_object(class, *f) {
            // Two slots per site.
            jni.clear_object_array(a, 2 * used.min(SITE_SLOTS) as i32);
        }
    });
}

/// Root calls the probes skipped this session because they ran on a
/// virtual thread (`Probe.virtualRoots`; 0 with an older probe class).
pub fn virtual_roots(jni: Jni<'_>) -> u64 {
    match PROBE.get() {
        Some(ProbeClass {
            class,
            virtual_roots: Some(f),
            ..
        }) => jni.static_long(class, *f).max(0) as u64,
        _ => 0,
    }
}

/// Slots of `Probe.INSIDE`.
const INSIDE_SLOTS: usize = 1 << 12;

/// Writes `Probe.on` (root probes call into the agent only while it is 1).
pub fn set_on(jni: Jni<'_>, on: bool) {
    if let Some(p) = PROBE.get() {
        let _guard = crate::sync::lock(&WRITE);
        jni.set_static_int(&p.class, p.on, i32::from(on));
    }
}

/// `Probe.allocJava`: the Java path records allocations (one `Alloc`
/// event each, which only this sprig's reader reads: an older sprig's
/// agent using this probe class later never sets the field, so its
/// allocations all come to its natives).
const ALLOC_JAVA_RECORD: i32 = 1;
/// `Probe.allocJava`: the Java path records nothing (the off turns of the
/// measurement knob `exact-alloc-duty`).
const ALLOC_JAVA_PAUSED: i32 = 2;

/// Writes `Probe.allocJava`; false when the probe class has no such field.
fn set_alloc_java(jni: Jni<'_>, value: i32) -> bool {
    match PROBE.get() {
        Some(ProbeClass {
            class,
            alloc_java: Some(f),
            ..
        }) => {
            jni.set_static_int(class, *f, value);
            true
        }
        _ => false,
    }
}

/// Pauses the Java path's allocation recording (`Probe.allocJava`: the
/// measurement knob `exact-alloc-duty`) or resumes it; false when the
/// probe class has no such field.
pub fn set_alloc_pause(jni: Jni<'_>, pause: bool) -> bool {
    set_alloc_java(
        jni,
        if pause {
            ALLOC_JAVA_PAUSED
        } else {
            ALLOC_JAVA_RECORD
        },
    )
}

/// Writes `Probe.active` with the value `current()` returns under the
/// write lock, so concurrent 0↔1 transitions cannot leave a stale value,
/// then tells `written` (still under the lock) what is in the field.
pub fn publish_active(jni: Jni<'_>, current: impl FnOnce() -> i32, written: impl FnOnce(i32)) {
    if let Some(p) = PROBE.get() {
        let _guard = crate::sync::lock(&WRITE);
        let v = current().max(0);
        jni.set_static_int(&p.class, p.active, v);
        written(v);
    }
}

/// The method ids of `sprig.rt.Probe`'s methods (the frames a probe's
/// native call has above the instrumented method), for the call-edge
/// bursts; empty when the class is not defined.
pub fn probe_methods(jvmti: &crate::ffi::Jvmti) -> Vec<crate::ffi::MethodId> {
    PROBE
        .get()
        .and_then(|p| jvmti.class_methods(p.class.as_local()).ok())
        .unwrap_or_default()
}

/// Opens (`open`) or closes every thread's slot of `Probe.INSIDE` for the
/// call-edge bursts of a session with no root: open, a plain probe whose
/// `Probe.active` check passes calls into the agent on every thread.
/// Only in a session that opens no root context (the slots count them).
pub fn set_inside_all(jni: Jni<'_>, open: bool) {
    if let Some(inside) = PROBE.get().and_then(|p| p.inside.as_ref()) {
        let v = i32::from(open);
        jni.set_int_array_region(inside.as_local(), 0, &[v; INSIDE_SLOTS]);
    }
}

/// Opens only the slot of `Probe.INSIDE` of the thread whose Java id is
/// `java_id` (and of any thread that shares it), closing the others: the
/// call-edge bursts' path calibration, during which only its own thread's
/// plain probes should call into the agent. Same conditions as
/// [`set_inside_all`].
pub fn set_inside_only(jni: Jni<'_>, java_id: u64) {
    if let Some(inside) = PROBE.get().and_then(|p| p.inside.as_ref()) {
        let mut v = [0i32; INSIDE_SLOTS];
        v[(java_id as usize) & (INSIDE_SLOTS - 1)] = 1;
        jni.set_int_array_region(inside.as_local(), 0, &v);
    }
}

/// Writes `Probe.active` for the call-edge bursts of a session with no
/// root context (1: the plain probes look at `Probe.INSIDE`); while a
/// counting window is open it stays -1 (a burst's last sampler lowering
/// it late leaves the window open).
pub fn set_active_for_bursts(jni: Jni<'_>, on: bool) {
    if let Some(p) = PROBE.get() {
        let _guard = crate::sync::lock(&WRITE);
        let v = if COUNTING.load(Ordering::Acquire) {
            -1
        } else {
            i32::from(on)
        };
        jni.set_static_int(&p.class, p.active, v);
    }
}

/// A counting window is open ([`set_counting`]).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Entries `Probe.COUNTS` holds per thread-id slot (a cache line each).
const COUNT_STRIDE: usize = 8;
const COUNT_SLOTS: usize = 1 << 12;

/// Allocates `Probe.COUNTS` unless a session did already; false when the
/// probe class has no such field (an older sprig defined it) or it cannot
/// be allocated.
pub fn ensure_counts(jni: Jni<'_>) -> bool {
    ensure_array(
        jni,
        |p| p.counts,
        |jni| jni.new_array(7, (COUNT_SLOTS * COUNT_STRIDE) as i32),
    )
}

/// Opens (`-1` in `Probe.active`: every entry probe adds one to its
/// thread's slot of `Probe.COUNTS` and calls nothing) or closes (0) the
/// call-edge bursts' counting window. Only in a session that opens no
/// root context, between two bursts.
pub fn set_counting(jni: Jni<'_>, on: bool) {
    if let Some(p) = PROBE.get() {
        let _guard = crate::sync::lock(&WRITE);
        COUNTING.store(on, Ordering::Release);
        jni.set_static_int(&p.class, p.active, if on { -1 } else { 0 });
    }
}

/// The sum of `Probe.COUNTS` (every slot's entries so far, wrapping);
/// `None` when there is no such array. `buf` holds the copy (256 KiB),
/// kept by the caller from one read to the next.
pub fn counted(jni: Jni<'_>, buf: &mut Vec<i64>) -> Option<i64> {
    let Some(ProbeClass {
        class,
        counts: Some(f),
        ..
    }) = PROBE.get()
    else {
        return None;
    };
    jni.with_local_frame(4, |jni| {
        let a = jni.static_object(class, *f)?;
        buf.resize(COUNT_SLOTS * COUNT_STRIDE, 0);
        if !jni.long_array_region(a, 0, buf) {
            return None;
        }
        Some(
            buf.iter()
                .step_by(COUNT_STRIDE)
                .fold(0i64, |s, &x| s.wrapping_add(x)),
        )
    })
}
