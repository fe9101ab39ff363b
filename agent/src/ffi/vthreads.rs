//! Virtual threads (JDK 21+): a virtual thread's probe state follows it
//! from carrier to carrier.
//!
//! The probes reach their thread's state through one thread-local word of
//! the OS thread (`tls`). A virtual thread that opened a root context owns
//! a state of its own, kept in its JVMTI thread-local storage; HotSpot's
//! extension events `VirtualThreadMount` and `VirtualThreadUnmount` point
//! the carrier's word at that state when the virtual thread mounts and
//! empty it when it unmounts (the carrier's own state is then found again
//! through `try_with`), and `VirtualThreadEnd` drops it. So a carrier that
//! runs several virtual threads in turn writes each one's events with that
//! one's state, and nothing on a platform thread's probe path changes.
//!
//! All of it lives in a JVMTI environment of its own (version 21), with
//! `can_support_virtual_threads`, made once and kept for the life of the
//! process: turning the events off while a carrier's word points at a
//! virtual thread's state would leave that word pointing at it for the
//! next virtual thread the carrier runs.

use super::jni::{JavaVm, Jni};
use super::jvmti::{JVMTI_VERSION_21, Jvmti, JvmtiError, check, jvmti_call};
use super::tls;
use jvmti_bindings::sys::jni::{JNIEnv, jint, jthread};
use jvmti_bindings::sys::jvmti::{
    self as sys, jvmtiCapabilities, jvmtiEnv, jvmtiEventCallbacks, jvmtiExtensionEvent,
    jvmtiExtensionEventInfo,
};
use std::ffi::{CStr, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

/// The environment, once virtual threads are followed (`None` inside
/// when this JVM cannot: no virtual threads, or the events are missing).
static ENV: OnceLock<Option<Jvmti>> = OnceLock::new();

/// What the events call on a state [`adopt`] made (the functions of the
/// `tls` slot's type).
static HOOKS: OnceLock<Hooks> = OnceLock::new();

struct Hooks {
    drop: fn(usize),
    mounted: fn(usize),
    unmounted: fn(usize),
}

/// A virtual thread's state, told when its thread mounts and unmounts.
pub trait VirtualState: 'static {
    /// The thread mounted on a carrier (whose probes now use this state).
    fn mounted(&self);
    /// The thread is about to unmount from its carrier.
    fn unmounted(&self);
}

const MOUNT: &CStr = c"com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT: &CStr = c"com.sun.hotspot.events.VirtualThreadUnmount";

/// Follows virtual threads from now on, if this JVM has them; whether it
/// does. Made once: later calls answer what the first found. Why it
/// cannot, when it cannot: the second value (for a warning), only on the
/// first call.
pub fn follow(vm: &JavaVm) -> (bool, Option<String>) {
    let mut why = None;
    let env = ENV.get_or_init(|| match make(vm) {
        Ok(env) => env,
        Err(e) => {
            why = Some(e);
            None
        }
    });
    (env.is_some(), why)
}

/// `Ok(None)`: the JVM has no virtual threads (not an error).
fn make(vm: &JavaVm) -> Result<Option<Jvmti>, String> {
    // Older JVMs refuse version 21: they have no virtual threads.
    let Ok(jvmti) = vm.new_jvmti_of(JVMTI_VERSION_21) else {
        return Ok(None);
    };
    let env = jvmti.raw();
    let mut potential = jvmtiCapabilities::default();
    // SAFETY: valid out struct.
    unsafe { jvmti_call!(env, GetPotentialCapabilities, &mut potential) }
        .map_err(|e| format!("GetPotentialCapabilities: {e}"))?;
    if !potential.can_support_virtual_threads() {
        return Ok(None);
    }
    let mut caps = jvmtiCapabilities::default();
    caps.set_can_support_virtual_threads(true);
    // SAFETY: valid capabilities struct for the call.
    unsafe { jvmti_call!(env, AddCapabilities, &caps) }
        .map_err(|e| format!("can_support_virtual_threads: {e}"))?;
    let (mount, unmount) = extension_events(&jvmti)?;
    let mut cb = jvmtiEventCallbacks::default();
    cb.VirtualThreadEnd = Some(ended);
    let size = std::mem::size_of::<jvmtiEventCallbacks>() as jint;
    // SAFETY: a fully initialised table of `size` bytes; JVMTI copies it.
    unsafe { jvmti_call!(env, SetEventCallbacks, &cb, size) }
        .map_err(|e| format!("SetEventCallbacks: {e}"))?;
    type Ext = unsafe extern "C" fn(*mut jvmtiEnv, *mut JNIEnv, jthread);
    // SAFETY: HotSpot calls these two extension events with (jvmtiEnv*,
    // JNIEnv*, jthread) (`JvmtiExport::post_vthread_mount`); the C type of
    // the callback is variadic, and on x86-64 a function of fixed
    // arguments called through it receives them in the same registers.
    let (m, u) = unsafe {
        (
            std::mem::transmute::<Ext, jvmtiExtensionEvent>(mounted as Ext),
            std::mem::transmute::<Ext, jvmtiExtensionEvent>(unmounted as Ext),
        )
    };
    // SAFETY: indices from GetExtensionEvents, callbacks of this library
    // (pinned for the life of the process).
    unsafe {
        jvmti_call!(env, SetExtensionEventCallback, mount, Some(m))
            .and_then(|()| jvmti_call!(env, SetExtensionEventCallback, unmount, Some(u)))
    }
    .map_err(|e| format!("the mount events: {e}"))?;
    let no_thread: jthread = std::ptr::null_mut();
    // An extension event posts only once enabled as well (HotSpot ands the
    // callback's bit with the enabled one).
    for index in [mount, unmount] {
        // SAFETY: (mode, event, thread = all); no varargs; an extension
        // event is enabled by its index.
        unsafe {
            jvmti_call!(
                env,
                SetEventNotificationMode,
                sys::JVMTI_ENABLE,
                index as sys::jvmtiEvent,
                no_thread
            )
        }
        .map_err(|e| format!("the mount events: {e}"))?;
    }
    // SAFETY: (mode, event, thread = all); no varargs.
    unsafe {
        jvmti_call!(
            env,
            SetEventNotificationMode,
            sys::JVMTI_ENABLE,
            sys::JVMTI_EVENT_VIRTUAL_THREAD_END,
            no_thread
        )
    }
    .map_err(|e| format!("VirtualThreadEnd: {e}"))?;
    Ok(Some(jvmti))
}

/// The indices of the mount and unmount extension events.
fn extension_events(jvmti: &Jvmti) -> Result<(jint, jint), String> {
    let env = jvmti.raw();
    let mut count: jint = 0;
    let mut infos: *mut jvmtiExtensionEventInfo = std::ptr::null_mut();
    // SAFETY: valid out pointers.
    unsafe { jvmti_call!(env, GetExtensionEvents, &mut count, &mut infos) }
        .map_err(|e| format!("GetExtensionEvents: {e}"))?;
    let (mut mount, mut unmount) = (None, None);
    let n = if infos.is_null() {
        0
    } else {
        count.max(0) as usize
    };
    for i in 0..n {
        // SAFETY: JVMTI returned `count` infos at `infos`.
        let info = unsafe { &*infos.add(i) };
        if !info.id.is_null() {
            // SAFETY: a NUL-terminated string JVMTI allocated.
            let id = unsafe { CStr::from_ptr(info.id) };
            if id == MOUNT {
                mount = Some(info.extension_event_index);
            } else if id == UNMOUNT {
                unmount = Some(info.extension_event_index);
            }
        }
        for j in 0..info.param_count.max(0) as usize {
            if !info.params.is_null() {
                // SAFETY: `param_count` params at `params`, each name
                // JVMTI-allocated.
                jvmti.deallocate(unsafe { (*info.params.add(j)).name }.cast());
            }
        }
        jvmti.deallocate(info.params.cast());
        jvmti.deallocate(info.id.cast());
        jvmti.deallocate(info.short_description.cast());
    }
    jvmti.deallocate(infos.cast());
    match (mount, unmount) {
        (Some(m), Some(u)) => Ok((m, u)),
        _ => Err("this JVM has no VirtualThreadMount/VirtualThreadUnmount events".into()),
    }
}

/// The current virtual thread's state, made by `make` the first time:
/// kept in its thread-local storage and pointed at by this carrier's word.
/// Called only on a virtual thread (the probe class asks
/// `Thread.isVirtual` first). False when virtual threads are not
/// followed or JVMTI refused; `make`'s value is then dropped.
/// `T` must be the type the `tls` word serves (the probe runtime's state).
pub fn adopt<T: VirtualState>(jni: &Jni<'_>, make: impl FnOnce() -> Box<T>) -> bool {
    let Some(Some(jvmti)) = ENV.get() else {
        return false;
    };
    if !tls::owned_by::<T>() {
        return false;
    }
    // Set only past the check above: always the slot's type's.
    HOOKS.get_or_init(|| Hooks {
        drop: drop_box::<T>,
        mounted: mounted_state::<T>,
        unmounted: unmounted_state::<T>,
    });
    let env = jvmti.raw();
    let _ = jni;
    let mut thread: jthread = std::ptr::null_mut();
    // SAFETY: valid out pointer; this thread is attached (it holds `jni`),
    // so the reference is a local one of the native frame the caller runs.
    if unsafe { jvmti_call!(env, GetCurrentThread, &mut thread) }.is_err() || thread.is_null() {
        return false;
    }
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: `thread` is a live local reference; valid out pointer.
    if unsafe { jvmti_call!(env, GetThreadLocalStorage, thread, &mut p) }.is_err() {
        return false;
    }
    if p.is_null() {
        let fresh = Box::into_raw(make());
        // SAFETY: `thread` is a live local reference; the pointer stays
        // valid until `ended` takes it back.
        if unsafe { jvmti_call!(env, SetThreadLocalStorage, thread, fresh as *const c_void) }
            .is_err()
        {
            // SAFETY: `fresh` came from `Box::into_raw` above and was not
            // handed out.
            drop(unsafe { Box::from_raw(fresh) });
            return false;
        }
        p = fresh.cast();
    }
    tls::point_at(p as usize);
    true
}

fn drop_box<T>(p: usize) {
    // SAFETY: `p` came from `Box::<T>::into_raw` in `adopt` (the only
    // `HOOKS` are those of that `T`) and `ended` takes it out of the
    // thread's storage before calling this, so it is dropped once.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

fn mounted_state<T: VirtualState>(p: usize) {
    // SAFETY: `p` is the current virtual thread's storage, a live `T` from
    // `adopt` (dropped only by `ended`, on this same thread).
    unsafe { &*(p as *const T) }.mounted();
}

fn unmounted_state<T: VirtualState>(p: usize) {
    // SAFETY: as in `mounted_state`.
    unsafe { &*(p as *const T) }.unmounted();
}

/// This thread's storage in `env` (0 when none or on an error).
fn storage(env: *mut jvmtiEnv) -> usize {
    let mut p: *mut c_void = std::ptr::null_mut();
    let no_thread: jthread = std::ptr::null_mut();
    // SAFETY: the current thread (null), a valid out pointer.
    match unsafe { jvmti_call!(env, GetThreadLocalStorage, no_thread, &mut p) } {
        Ok(()) => p as usize,
        Err(_) => 0,
    }
}

/// `VirtualThreadMount`: the carrier's word points at the virtual thread's
/// state (or at nothing: the carrier's own).
unsafe extern "C" fn mounted(env: *mut jvmtiEnv, _jni: *mut JNIEnv, _thread: jthread) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let p = storage(env);
        tls::point_at(p);
        if p != 0
            && let Some(h) = HOOKS.get()
        {
            (h.mounted)(p);
        }
    }));
}

/// `VirtualThreadUnmount`: the carrier's own state again.
unsafe extern "C" fn unmounted(env: *mut jvmtiEnv, _jni: *mut JNIEnv, _thread: jthread) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let p = storage(env);
        if p != 0
            && let Some(h) = HOOKS.get()
        {
            (h.unmounted)(p);
        }
        tls::point_at(0);
    }));
}

/// `VirtualThreadEnd`: the virtual thread's state is dropped (its stream
/// ends).
unsafe extern "system" fn ended(env: *mut jvmtiEnv, _jni: *mut JNIEnv, _thread: jthread) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let p = storage(env);
        if p == 0 {
            return;
        }
        let no_thread: jthread = std::ptr::null_mut();
        // SAFETY: clears the current thread's storage.
        let cleared = unsafe {
            jvmti_call!(
                env,
                SetThreadLocalStorage,
                no_thread,
                std::ptr::null::<c_void>()
            )
        };
        if cleared.is_err() {
            return;
        }
        if tls::pointed() == p {
            tls::point_at(0);
        }
        if let Some(h) = HOOKS.get() {
            (h.drop)(p);
        }
    }));
}
