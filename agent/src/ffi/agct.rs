//! The raw parts of the CPU-time timer source (`sources::cpu_timer`):
//! HotSpot's `AsyncGetCallTrace` found with dlsym, the SIGPROF handler
//! that calls it into a lock-free fixed pool of sample slots, the
//! per-thread CPU-time timers that send the signal, and the checks of who
//! holds SIGPROF and the process's profiling timer.
//!
//! The handler is async-signal-safe: it reads atomics, calls the VM's
//! `GetEnv` (a read of the thread's current VM thread) and
//! `AsyncGetCallTrace` (written to run in a signal handler), reads
//! CLOCK_MONOTONIC, and claims a slot with a compare-and-swap. No
//! allocation, no lock, no JVMTI call; a full pool counts a drop. It
//! cannot panic: no indexing, no arithmetic that can overflow-check, no
//! unwrap.
//!
//! Under windows timing the handler takes only samples of threads inside
//! a silent root call ([`SilentFilter`]): it reads the interrupted thread's
//! silent word (a field of the probe state the thread's `ffi::tls` word
//! points at: the session's tag in the high half, a counter odd while a
//! silent root context is open and bumped at each open and close) before
//! and after the walk, and keeps the sample only when both reads are the
//! same open context of this session. Any other signal counts in
//! [`OUTSIDE`] and costs no walk. A kept sample carries the probe state's
//! sample key beside the JNIEnv: a virtual thread's Java id while the
//! thread is a carrier running that virtual thread (its tls word points at
//! the virtual thread's state), 0 on a platform thread's own state, so
//! that the drain credits the sample to the virtual thread and not to its
//! carrier.
//!
//! Once installed, the handler stays installed for the life of the process
//! (the library is pinned, see `pin_library`): a signal still pending when
//! a session ends finds it inert (`ACTIVE` false), never SIGPROF's default
//! action, which would end the JVM.

use super::jni::{JavaVm, Jni, MethodId};
use jvmti_bindings::sys::jni::{JavaVM, jint};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The signal the timers send.
pub const SIGNAL: c_int = libc::SIGPROF;

/// `ASGCT_CallFrame`: a BCI (or a negative line for native frames) and the
/// method.
#[repr(C)]
#[derive(Clone, Copy)]
struct CallFrame {
    lineno: jint,
    method_id: *mut c_void,
}

/// `ASGCT_CallTrace`.
#[repr(C)]
struct CallTrace {
    env_id: *mut c_void,
    num_frames: jint,
    frames: *mut CallFrame,
}

type AgctFn = unsafe extern "C" fn(*mut CallTrace, jint, *mut c_void);
type GetEnvFn = unsafe extern "system" fn(*mut JavaVM, *mut *mut c_void, jint) -> jint;

const JNI_VERSION_1_6: jint = 0x0001_0006;

const FREE: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;

/// One sample slot: written by one handler between its claim (FREE ->
/// WRITING) and its release (-> READY), read by the drain between READY
/// and FREE.
struct Slot {
    state: AtomicU8,
    env: UnsafeCell<usize>,
    key: UnsafeCell<u64>,
    num_frames: UnsafeCell<jint>,
    cost_ns: UnsafeCell<u64>,
    frames: UnsafeCell<Box<[CallFrame]>>,
}

/// The pool the handler writes into.
struct Pool {
    slots: Box<[Slot]>,
    /// Frames AsyncGetCallTrace is asked for (the depth kept plus one).
    depth: jint,
    /// Where the next claim starts looking.
    next: AtomicUsize,
}

// SAFETY: a slot's cells are touched only by the one party the state
// protocol gives it to: the handler that won the FREE -> WRITING exchange
// until its Release store of READY, then the drain (after its Acquire load
// of READY) until its Release store of FREE.
unsafe impl Sync for Pool {}

static AGCT: AtomicUsize = AtomicUsize::new(0);
static GET_ENV: AtomicUsize = AtomicUsize::new(0);
static VM: AtomicPtr<JavaVM> = AtomicPtr::new(std::ptr::null_mut());
static POOL: AtomicPtr<Pool> = AtomicPtr::new(std::ptr::null_mut());
/// Whether the handler records; false makes it inert.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Handlers running now.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Measurement knob (the agent's test hook `timer-no-walk`): the handler
/// counts the signal and returns, with no filter read and no walk.
static NO_WALK: AtomicBool = AtomicBool::new(false);

/// The share of the signals the handler keeps, out of 2^32 (2^32: all):
/// a thread's CPU-clock timer fires only at a scheduler tick that finds
/// it running, so the source fires it at every such tick and keeps each
/// signal with the chance of one interval's worth of ticks.
static KEEP: AtomicU64 = AtomicU64::new(1 << 32);
/// The state of the handler's coin (a counter, hashed at each toss).
static COIN: AtomicU64 = AtomicU64::new(0);

/// Windows timing's filter (`NO_FILTER`: none, every sample is kept):
/// the offset of the silent word in the probe state, that of the sample
/// key, and the session's tag.
static FILTER_OFFSET: AtomicUsize = AtomicUsize::new(NO_FILTER);
static FILTER_KEY_OFFSET: AtomicUsize = AtomicUsize::new(NO_FILTER);
static FILTER_TAG: AtomicU64 = AtomicU64::new(0);
const NO_FILTER: usize = usize::MAX;

/// What the handler counted since the source started.
/// Signals the coin kept (the others are in [`PASSED`]).
pub static SIGNALS: AtomicU64 = AtomicU64::new(0);
/// Signals the coin passed over: no walk, no loss.
pub static PASSED: AtomicU64 = AtomicU64::new(0);
/// Signals on a thread that is not a Java thread (no JNIEnv).
pub static NOT_JAVA: AtomicU64 = AtomicU64::new(0);
/// Signals with no free slot.
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Signals dropped by windows timing's filter: the thread was not inside
/// a silent root call of this session (or its context closed or opened
/// during the walk).
pub static OUTSIDE: AtomicU64 = AtomicU64::new(0);
/// The handler's time (ns of its thread's CPU clock, entry to exit) in the signals
/// that left no sample (not a Java thread, no frame, filtered out, the
/// pool full); a kept sample's time travels in its slot.
pub static UNKEPT_NS: AtomicU64 = AtomicU64::new(0);
/// AsyncGetCallTrace's answers of no frame or an error, by -code (0 no
/// Java frame, 1 no class load, 2 GC active, ... 10 at a safepoint).
pub static FAILED: [AtomicU64; 11] = [const { AtomicU64::new(0) }; 11];

/// Windows timing: which samples the handler keeps. The probe state `T`
/// (the values the `ffi::tls` word points at) holds an `AtomicU64` at
/// `offset`, the thread's silent word: `tag` in its high half while the
/// thread's silent root contexts belong to this session, and a counter in
/// its low half, odd while one is open, bumped at every open and close;
/// and an `AtomicU64` at `key_offset`, the sample key each kept sample
/// carries (a virtual thread's Java id, 0 for a platform thread).
#[derive(Clone, Copy, Debug)]
pub struct SilentFilter {
    offset: usize,
    key_offset: usize,
    tag: u32,
}

impl SilentFilter {
    /// The filter for values of `T` with their silent word at `offset`
    /// and their sample key at `key_offset`; `None` when the tls word
    /// serves another type, or an offset does not hold an aligned
    /// `AtomicU64` inside `T`, or the tls word is not a thread-pointer word
    /// here (not x86-64 Linux: it always reads 0).
    pub fn for_state<T: 'static>(
        offset: usize,
        key_offset: usize,
        tag: u32,
    ) -> Option<SilentFilter> {
        if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            return None;
        }
        let holds = |at: usize| {
            at.checked_add(std::mem::size_of::<AtomicU64>())
                .is_some_and(|end| end <= std::mem::size_of::<T>())
                && at.is_multiple_of(std::mem::align_of::<AtomicU64>())
        };
        (super::tls::owned_by::<T>()
            && holds(offset)
            && holds(key_offset)
            && std::mem::align_of::<T>() >= std::mem::align_of::<AtomicU64>())
        .then_some(SilentFilter {
            offset,
            key_offset,
            tag,
        })
    }

    /// Whether `word` says: inside a silent root context of this session.
    pub fn inside(tag: u32, word: u64) -> bool {
        (word >> 32) as u32 == tag && word & 1 == 1
    }
}

/// The interrupted thread's silent word, or the sample key, at `offset`
/// of its probe state (`None`: its tls word points at no probe state).
fn silent_word(offset: usize) -> Option<u64> {
    let p = super::tls::pointed();
    if p == 0 {
        return None;
    }
    // SAFETY: a non-zero tls word points at a live probe state of the type
    // `SilentFilter::for_state` checked owns the word (it is emptied before
    // that value is dropped, and a virtual thread's state is unpointed
    // before it is freed, both on this thread, which this handler
    // interrupted); `offset` (the silent word's or the sample key's, both
    // checked by `for_state`) holds an aligned AtomicU64 inside that type.
    // An atomic load is async-signal-safe.
    let w = unsafe { &*((p as *const u8).wrapping_add(offset) as *const AtomicU64) };
    Some(w.load(Ordering::Relaxed))
}

/// `AsyncGetCallTrace`'s address in the loaded libjvm, if it exports it.
pub fn find_agct() -> Option<usize> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only
    // looks the symbol up in the loaded objects.
    let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"AsyncGetCallTrace".as_ptr()) };
    if !f.is_null() {
        return Some(f as usize);
    }
    // SAFETY: RTLD_NOLOAD never loads a library; it returns the handle of
    // libjvm only when it is loaded already (the reference it takes is
    // kept: libjvm is never unloaded).
    let h = unsafe { libc::dlopen(c"libjvm.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    // SAFETY: `h` is a live handle; the name is NUL-terminated.
    let f = unsafe { libc::dlsym(h, c"AsyncGetCallTrace".as_ptr()) };
    (!f.is_null()).then_some(f as usize)
}

/// Who holds SIGPROF now.
#[derive(Debug, PartialEq, Eq)]
pub enum Holder {
    /// Its default action or ignored: free.
    Free,
    /// sprig's handler (a previous session's, inert).
    Sprig,
    /// Another handler.
    Other,
}

/// SIGPROF's current disposition (read with a null new action).
pub fn signal_holder() -> Holder {
    // SAFETY: an all-zero sigaction is a valid out value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only reads the disposition into `old`.
    if unsafe { libc::sigaction(SIGNAL, std::ptr::null(), &mut old) } != 0 {
        return Holder::Other;
    }
    let h = old.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        Holder::Free
    } else if h == on_signal as *const () as usize {
        Holder::Sprig
    } else {
        Holder::Other
    }
}

/// Whether the process's profiling timer (`setitimer(ITIMER_PROF)`) runs:
/// another profiler's.
pub fn process_timer_running() -> bool {
    // SAFETY: an all-zero itimerval is a valid out value.
    let mut it: libc::itimerval = unsafe { std::mem::zeroed() };
    // SAFETY: `it` is a valid out pointer.
    if unsafe { libc::getitimer(libc::ITIMER_PROF, &mut it) } != 0 {
        return false;
    }
    it.it_value.tv_sec != 0
        || it.it_value.tv_usec != 0
        || it.it_interval.tv_sec != 0
        || it.it_interval.tv_usec != 0
}

/// Test-only (the agent's fault hook `foreign-sigprof`): installs a
/// SIGPROF handler that is not sprig's, standing for another profiler's.
pub fn install_foreign_handler() -> bool {
    install(foreign_handler as *const () as usize)
}

extern "C" fn foreign_handler(_sig: c_int, _info: *mut libc::siginfo_t, _uc: *mut c_void) {}

fn install(handler: usize) -> bool {
    // SAFETY: an all-zero sigaction is valid; the fields are set below.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is a valid sigset; `act` a valid action whose
    // handler has the SA_SIGINFO signature; a null old action is allowed.
    unsafe {
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(SIGNAL, &act, std::ptr::null_mut()) == 0
    }
}

/// A measurement knob (`SPRIG_AGENT_FAULT=timer-no-walk`, set by the
/// source before it arms): the handler returns before its walk.
pub fn set_no_walk(on: bool) {
    NO_WALK.store(on, Ordering::SeqCst);
}

/// The handler keeps each signal with chance `share` (clamped to 0..=1;
/// set by the source before it arms), its coin seeded with `seed`.
pub fn set_keep(share: f64, seed: u64) {
    let share = if share.is_nan() {
        1.0
    } else {
        share.clamp(0.0, 1.0)
    };
    KEEP.store((share * (1u64 << 32) as f64) as u64, Ordering::SeqCst);
    COIN.store(seed, Ordering::SeqCst);
}

/// Whether the handler keeps this signal (async-signal-safe: one atomic
/// add and arithmetic).
fn keep() -> bool {
    let keep = KEEP.load(Ordering::Relaxed);
    if keep >= 1 << 32 {
        return true;
    }
    let mut z = COIN
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 32) < keep
}

/// The kernel's scheduler tick (the resolution of the coarse monotonic
/// clock, one jiffy), `None` when the kernel does not say: a thread's
/// CPU-clock timer expires only at a tick that finds the thread running.
pub fn scheduler_tick() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes the resolution to a valid out pointer.
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } != 0 {
        return None;
    }
    let d = Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.max(0) as u32);
    (Duration::from_micros(100)..=Duration::from_millis(100))
        .contains(&d)
        .then_some(d)
}

/// Arms the handler: `agct` as AsyncGetCallTrace, `vm`'s GetEnv, a pool
/// of `slots` slots of `depth` frames, and sprig's handler on SIGPROF
/// (installed once; a later session finds it in place); with `filter`,
/// only samples of threads inside a silent root call. False when the
/// handler could not be installed (nothing is armed then).
pub fn arm(
    agct: usize,
    vm: JavaVm,
    slots: usize,
    depth: usize,
    filter: Option<SilentFilter>,
) -> bool {
    if !POOL.load(Ordering::SeqCst).is_null() {
        // A previous session's pool was never freed (its handlers did not
        // end in time): it stays, never reused.
        POOL.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
    let pool = Box::new(Pool {
        slots: (0..slots.max(1))
            .map(|_| Slot {
                state: AtomicU8::new(FREE),
                env: UnsafeCell::new(0),
                key: UnsafeCell::new(0),
                num_frames: UnsafeCell::new(0),
                cost_ns: UnsafeCell::new(0),
                frames: UnsafeCell::new(
                    vec![
                        CallFrame {
                            lineno: 0,
                            method_id: std::ptr::null_mut()
                        };
                        depth.max(1)
                    ]
                    .into_boxed_slice(),
                ),
            })
            .collect(),
        depth: jint::try_from(depth.max(1)).unwrap_or(jint::MAX),
        next: AtomicUsize::new(0),
    });
    // SAFETY: `vm.raw` is the live JavaVM; its invocation table is valid
    // for the life of the VM.
    let get_env = unsafe { (**vm.raw).GetEnv } as usize;
    GET_ENV.store(get_env, Ordering::SeqCst);
    VM.store(vm.raw, Ordering::SeqCst);
    AGCT.store(agct, Ordering::SeqCst);
    FILTER_TAG.store(filter.map_or(0, |f| u64::from(f.tag)), Ordering::SeqCst);
    FILTER_KEY_OFFSET.store(filter.map_or(NO_FILTER, |f| f.key_offset), Ordering::SeqCst);
    FILTER_OFFSET.store(filter.map_or(NO_FILTER, |f| f.offset), Ordering::SeqCst);
    for c in [&SIGNALS, &PASSED, &NOT_JAVA, &DROPPED, &OUTSIDE, &UNKEPT_NS] {
        c.store(0, Ordering::Relaxed);
    }
    for c in &FAILED {
        c.store(0, Ordering::Relaxed);
    }
    POOL.store(Box::into_raw(pool), Ordering::SeqCst);
    if signal_holder() != Holder::Sprig && !install(on_signal as *const () as usize) {
        disarm(Duration::ZERO);
        return false;
    }
    ACTIVE.store(true, Ordering::SeqCst);
    true
}

/// Makes the handler inert and waits, at most `bound`, until no handler
/// runs; then frees the pool. A handler still running after the bound
/// keeps the pool (leaked). The handler stays installed.
pub fn disarm(bound: Duration) -> bool {
    ACTIVE.store(false, Ordering::SeqCst);
    let until = Instant::now() + bound;
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let pool = POOL.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if !pool.is_null() {
        // SAFETY: `pool` came from Box::into_raw in `arm`; no handler runs
        // (IN_FLIGHT is 0 with ACTIVE false, and a handler reads the pool
        // only after it counted itself in and saw ACTIVE true), and the
        // pointer was swapped out so nothing else frees it.
        drop(unsafe { Box::from_raw(pool) });
    }
    true
}

/// One sample the handler took: the interrupted thread's JNIEnv, the
/// sample key of its probe state under windows timing (a virtual thread's
/// Java id while the thread ran that virtual thread; 0 otherwise), its
/// frames (leaf first; a method with no jmethodID is a null id, which
/// JVMTI refuses to name), whether the thread was in a native method (its
/// leaf frame is one: AsyncGetCallTrace's line -3), and the handler's
/// time.
pub struct Taken {
    pub env: usize,
    pub key: u64,
    pub frames: Vec<MethodId>,
    pub native: bool,
    pub cost_ns: u64,
}

/// AsyncGetCallTrace's line number of a native method's frame.
const NATIVE_LINE: jint = -3;

/// Takes the samples ready in the pool (their slots freed).
pub fn drain(out: &mut Vec<Taken>) {
    let p = POOL.load(Ordering::SeqCst);
    if p.is_null() {
        return;
    }
    // SAFETY: the pool is freed only by `disarm`, which runs on the thread
    // that stops the source after the drain thread has ended.
    let pool = unsafe { &*p };
    for s in pool.slots.iter() {
        if s.state.load(Ordering::Acquire) != READY {
            continue;
        }
        // SAFETY: READY gives the slot to the drain until it stores FREE.
        let (env, key, n, cost, frames) = unsafe {
            (
                *s.env.get(),
                *s.key.get(),
                *s.num_frames.get(),
                *s.cost_ns.get(),
                &*s.frames.get(),
            )
        };
        let n = usize::try_from(n).unwrap_or(0).min(frames.len());
        out.push(Taken {
            env,
            key,
            frames: frames[..n]
                .iter()
                .map(|f| MethodId(f.method_id.cast()))
                .collect(),
            native: n > 0 && frames.first().is_some_and(|f| f.lineno == NATIVE_LINE),
            cost_ns: cost,
        });
        s.state.store(FREE, Ordering::Release);
    }
}

/// The JNIEnv address of the calling thread (the drain thread's own).
pub fn env_addr(jni: &Jni<'_>) -> usize {
    jni.env_addr()
}

/// The calling thread's CPU clock, in ns: the handler's cost is the CPU
/// time it takes, not the time its thread waited for a core inside it.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime is async-signal-safe; `ts` is a valid out
    // pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The SIGPROF handler.
extern "C" fn on_signal(_sig: c_int, _info: *mut libc::siginfo_t, uc: *mut c_void) {
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    if ACTIVE.load(Ordering::SeqCst) {
        // SAFETY: errno is this thread's; saved and put back so that the
        // interrupted code sees its own.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: see above.
        let saved = unsafe { *errno };
        record(uc);
        // SAFETY: see above.
        unsafe { *errno = saved };
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}

/// The handler's work: one sample of the interrupted thread into a slot;
/// the time of a signal that left none is added to [`UNKEPT_NS`].
fn record(uc: *mut c_void) {
    let t0 = now_ns();
    if !take(uc, t0) {
        UNKEPT_NS.fetch_add(now_ns().wrapping_sub(t0), Ordering::Relaxed);
    }
}

/// One sample of the interrupted thread into a slot: whether one was kept.
fn take(uc: *mut c_void, t0: u64) -> bool {
    if !keep() {
        PASSED.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    SIGNALS.fetch_add(1, Ordering::Relaxed);
    if NO_WALK.load(Ordering::Relaxed) {
        return false;
    }
    let p = POOL.load(Ordering::SeqCst);
    let agct = AGCT.load(Ordering::SeqCst);
    let get_env = GET_ENV.load(Ordering::SeqCst);
    let vm = VM.load(Ordering::SeqCst);
    if p.is_null() || agct == 0 || get_env == 0 || vm.is_null() {
        return false;
    }
    // Windows timing: a thread outside a silent root call costs no walk.
    let offset = FILTER_OFFSET.load(Ordering::Relaxed);
    let tag = FILTER_TAG.load(Ordering::Relaxed) as u32;
    let before = if offset == NO_FILTER {
        None
    } else {
        match silent_word(offset) {
            Some(w) if SilentFilter::inside(tag, w) => Some(w),
            _ => {
                OUTSIDE.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
    };
    // SAFETY: the pool stays allocated while a handler that saw ACTIVE
    // runs (`disarm` waits for IN_FLIGHT to reach 0 before freeing it).
    let pool = unsafe { &*p };
    // SAFETY: `get_env` is the VM's GetEnv, stored by `arm`.
    let get_env: GetEnvFn = unsafe { std::mem::transmute::<usize, GetEnvFn>(get_env) };
    let mut env: *mut c_void = std::ptr::null_mut();
    // SAFETY: GetEnv reads the current thread's VM thread (a thread-local)
    // and writes its JNIEnv to `env`; it takes no lock and allocates
    // nothing, and `vm` is the live JavaVM.
    let rc = unsafe { get_env(vm, &mut env, JNI_VERSION_1_6) };
    if rc != 0 || env.is_null() {
        NOT_JAVA.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    let n = pool.slots.len();
    let start = pool.next.fetch_add(1, Ordering::Relaxed);
    let mut claimed = None;
    for i in 0..n {
        let Some(s) = pool.slots.get(start.wrapping_add(i) % n.max(1)) else {
            continue;
        };
        if s.state
            .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            claimed = Some(s);
            break;
        }
    }
    let Some(slot) = claimed else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return false;
    };
    // SAFETY: the slot is WRITING: this handler owns its cells.
    let frames = unsafe { &mut *slot.frames.get() };
    let mut trace = CallTrace {
        env_id: env,
        num_frames: 0,
        frames: frames.as_mut_ptr(),
    };
    // SAFETY: `agct` is HotSpot's AsyncGetCallTrace; the trace points at
    // `pool.depth` writable frames and `uc` is the ucontext the kernel
    // passed to this handler.
    let agct: AgctFn = unsafe { std::mem::transmute::<usize, AgctFn>(agct) };
    // SAFETY: see above.
    unsafe { agct(&mut trace, pool.depth, uc) };
    if trace.num_frames <= 0 {
        let code = trace.num_frames.unsigned_abs() as usize;
        if let Some(c) = FAILED.get(code) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        slot.state.store(FREE, Ordering::Release);
        return false;
    }
    // The same silent root context after the walk as before it.
    if let Some(w) = before
        && silent_word(offset) != Some(w)
    {
        OUTSIDE.fetch_add(1, Ordering::Relaxed);
        slot.state.store(FREE, Ordering::Release);
        return false;
    }
    // The state whose silent root context this is: a virtual thread's
    // (its Java id) or the platform thread's own (0).
    let key_offset = FILTER_KEY_OFFSET.load(Ordering::Relaxed);
    let key = if before.is_some() && key_offset != NO_FILTER {
        silent_word(key_offset).unwrap_or(0)
    } else {
        0
    };
    // SAFETY: the slot is still WRITING: this handler owns its cells.
    unsafe {
        *slot.env.get() = env as usize;
        *slot.key.get() = key;
        *slot.num_frames.get() = trace.num_frames;
        *slot.cost_ns.get() = now_ns().wrapping_sub(t0);
    }
    slot.state.store(READY, Ordering::Release);
    true
}

/// A per-thread CPU-time timer that sends SIGPROF to its thread.
#[derive(Debug)]
pub struct ThreadTimer(libc::timer_t);

// SAFETY: a timer id is a process-wide handle; any thread may delete it.
unsafe impl Send for ThreadTimer {}

impl ThreadTimer {
    /// A timer on thread `tid`'s CPU clock that fires first after
    /// `first` of its CPU time, then every `interval`; `Err(errno)` when
    /// the thread has gone or the kernel refuses.
    pub fn start(tid: i32, first: Duration, interval: Duration) -> Result<ThreadTimer, i32> {
        // The kernel's CPU clock of one thread: CPUCLOCK_SCHED (2) with
        // CPUCLOCK_PERTHREAD_MASK (4) under the bit-inverted tid.
        let clock: libc::clockid_t = ((!tid) << 3) | 6;
        // SAFETY: an all-zero sigevent is a valid value; fields set below.
        let mut sev: libc::sigevent = unsafe { std::mem::zeroed() };
        sev.sigev_notify = libc::SIGEV_THREAD_ID;
        sev.sigev_signo = SIGNAL;
        sev.sigev_notify_thread_id = tid;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid sigevent and out pointer.
        if unsafe { libc::timer_create(clock, &mut sev, &mut timer) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let ts = |d: Duration| libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        let spec = libc::itimerspec {
            it_interval: ts(interval),
            // A zero value would disarm the timer.
            it_value: ts(first.max(Duration::from_nanos(1))),
        };
        // SAFETY: `timer` was just created; `spec` is valid; a null old
        // value is allowed.
        if unsafe { libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) } != 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            // SAFETY: `timer` is ours and deleted once.
            unsafe { libc::timer_delete(timer) };
            return Err(e);
        }
        Ok(ThreadTimer(timer))
    }
}

impl Drop for ThreadTimer {
    fn drop(&mut self) {
        // SAFETY: the timer is ours and deleted once, here.
        unsafe { libc::timer_delete(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coin keeps the share it is given, all of them at 1 and none
    /// at 0.
    #[test]
    fn the_coin_keeps_its_share() {
        let tosses = 200_000;
        for share in [0.2, 0.5] {
            set_keep(share, 12345);
            let kept = (0..tosses).filter(|_| keep()).count() as f64 / tosses as f64;
            assert!((kept - share).abs() < 0.01, "share {share}: kept {kept}");
        }
        set_keep(1.0, 1);
        assert!((0..1000).all(|_| keep()));
        set_keep(0.0, 1);
        assert!(!(0..1000).any(|_| keep()));
        set_keep(f64::NAN, 1);
        assert!((0..1000).all(|_| keep()));
        set_keep(1.0, 0);
    }

    /// The kernel says its tick (Linux: the coarse clock's resolution).
    #[test]
    fn the_scheduler_tick_is_read() {
        let tick = scheduler_tick().expect("CLOCK_MONOTONIC_COARSE's resolution");
        assert!(tick >= Duration::from_micros(100) && tick <= Duration::from_millis(100));
    }
}
