//! The functions the VM calls: the probe natives, the class file load hook
//! and the VMInit/VMDeath/ClassPrepare events. Each is a trampoline: it
//! converts its raw arguments into the safe wrappers and forwards them,
//! inside `catch_unwind`, to the handler the agent names with a type
//! ([`ProbeNatives`], [`VmEvents`]); no panic or error reaches the VM.
//! The handlers live above this module, which calls nothing of the agent.

use super::jni::{Jni, Local, NativeMethod};
use super::jvmti::{Jvmti, JvmtiError};
use jvmti_bindings::sys::jni::{JNIEnv, jboolean, jclass, jint, jlong, jobject, jthread};
use jvmti_bindings::sys::jvmti::{jvmtiEnv, jvmtiEventCallbacks};
use std::ffi::{CStr, c_char, c_uchar};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What the natives of `sprig.rt.Probe` do: the probe runtime implements
/// it, and [`probe_natives`] binds its functions.
pub trait ProbeNatives: 'static {
    /// `nSite`'s answer when nothing was done (also after a panic).
    const SITE_AGAIN: i32;
    /// A fast probe's answer that sends the Java side to the JNI native
    /// (also after a panic).
    const FAST_SLOW: i32;
    fn enter(id: u32, jni: Jni<'_>);
    fn exit(id: u32, jni: Jni<'_>);
    /// Whether it opened a root context on this thread.
    fn root_enter(id: u32, jni: Jni<'_>) -> bool;
    fn root_exit(id: u32, jni: Jni<'_>) -> i32;
    /// Whether the target of the reflective call is handed over in the
    /// current session (now or before).
    fn reflect(jni: Jni<'_>, method: Local<'_>) -> bool;
    fn site(jni: Jni<'_>, site: u32, receiver: Option<Local<'_>>) -> i32;
    /// An allocation at `site`: of class `object` after a `new`, the
    /// array `object` after an array allocation.
    fn alloc(jni: Jni<'_>, object: Local<'_>, site: u32);
    /// As [`ProbeNatives::alloc`] for the probe after a `clone()` (or a
    /// `multianewarray`); returns the site the Java path may record
    /// further copies of the same class at (`Probe.COPIES`), -1 for none.
    fn copy(jni: Jni<'_>, object: Local<'_>, site: u32) -> i32;
    /// An allocation at `site` of a one-dimension array of `length`
    /// elements (the probe passes the length, never the array).
    fn alloc_length(jni: Jni<'_>, length: u32, site: u32);
    fn fast_enter(id: u32) -> i32;
    fn fast_exit(id: u32) -> i32;
    fn fast_root_enter(id: u32) -> i32;
    fn fast_root_exit(id: u32) -> i32;
    /// Before a root probe on a virtual thread: whether its root calls are
    /// profiled (its own probe state is in place).
    fn enter_virtual(jni: Jni<'_>) -> bool;
}

/// What the agent does at the JVMTI events it enables; [`install`] binds
/// them.
pub trait VmEvents: 'static {
    /// The class file load hook: new bytes to install, if any.
    fn class_file(jni: Jni<'_>, input: &ClassFile<'_>) -> Option<Vec<u8>>;
    /// The hook's new bytes could not be handed to the VM.
    fn class_file_failed(name: Option<&str>, e: JvmtiError);
    fn class_prepare(jvmti: &Jvmti, jni: Jni<'_>, class: Local<'_>);
    fn vm_init(jni: Jni<'_>);
    /// The VM is dying; `jni` is the calling thread's environment (none
    /// when the VM passed none).
    fn vm_death(jni: Option<Jni<'_>>);
    /// A monitor event on the calling thread, on `object`'s monitor.
    fn monitor(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, event: MonitorEvent);
    /// A garbage collection pause starts (`true`) or ends (`false`). Runs
    /// inside the pause: no JNI and almost no JVMTI may be called.
    fn gc(start: bool);
    /// A platform thread starts (`true`) or ends (`false`); runs on that
    /// thread. At a start, `java` is the environment, the thread's JNI
    /// and the new thread (`None` when the VM passed none).
    fn thread(start: bool, java: Option<(&Jvmti, Jni<'_>, Local<'_>)>);
    /// The JVM's heap sampler sampled an allocation of `object`, `size`
    /// bytes of class `class`, on the allocating thread.
    fn sampled_alloc(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, class: Local<'_>, size: u64);
    /// An object tagged `tag` was freed. Runs where the VM posts it
    /// (during or after a collection): no JNI, no JVMTI, no lock.
    fn object_free(tag: u64);
}

/// Which monitor event the VM posted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorEvent {
    /// The thread waits to enter a monitor another thread owns.
    ContendedEnter,
    /// It entered it after waiting.
    ContendedEntered,
    /// It is about to wait in `Object.wait`.
    Wait,
    /// Its `Object.wait` ended.
    Waited,
}

/// Runs `f`, swallowing a panic (the VM must never see one).
#[inline(always)]
fn guard(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

extern "system" fn n_enter<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass, id: jint) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        P::enter(id as u32, jni)
    });
}

extern "system" fn n_exit<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass, id: jint) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        P::exit(id as u32, jni)
    });
}

/// Returns 1 when it opened a root context on this thread (the Java side
/// counts it in `Probe.INSIDE`), 0 otherwise (a panic included).
extern "system" fn n_root_enter<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass, id: jint) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        jint::from(P::root_enter(id as u32, jni))
    }))
    .unwrap_or(0)
}

/// Returns 1 when it closed this thread's root context, 3 when the thread
/// runs a calibration burst first (the probe class then calls again), 0
/// otherwise (a panic included).
extern "system" fn n_root_exit<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass, id: jint) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        jint::from(P::root_exit(id as u32, jni))
    }))
    .unwrap_or(0)
}

extern "system" fn n_reflect<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass, method: jobject) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `method` is a local reference valid for this call.
        let (jni, method) = unsafe { (Jni::from_raw(env), Local::from_raw(method)) };
        P::reflect(jni, method);
    });
}

/// `Probe.nReflected`: returns 1 when the target is handed over in the
/// current session (the Java side then remembers the object), 0 otherwise
/// (a panic included).
extern "system" fn n_reflected<P: ProbeNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    method: jobject,
) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `method` is a local reference valid for this call.
        let (jni, method) = unsafe { (Jni::from_raw(env), Local::from_raw(method)) };
        jint::from(P::reflect(jni, method))
    }))
    .unwrap_or(0)
}

/// `Probe.nReflected`, bound on its own: a probe class an older sprig
/// defined in this JVM does not declare it.
pub fn reflected_native<P: ProbeNatives>() -> NativeMethod {
    type ReflectedNative = extern "system" fn(*mut JNIEnv, jclass, jobject) -> jint;
    NativeMethod {
        name: c"nReflected",
        signature: c"(Ljava/lang/Object;)I",
        fn_ptr: (n_reflected::<P> as ReflectedNative) as *mut std::ffi::c_void,
    }
}

/// `Probe.nVirtual`: 1 when the virtual thread's root calls are profiled,
/// 0 otherwise (a panic included).
extern "system" fn n_virtual<P: ProbeNatives>(env: *mut JNIEnv, _cls: jclass) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        jint::from(P::enter_virtual(jni))
    }))
    .unwrap_or(0)
}

/// `Probe.nVirtual`, bound on its own: a probe class an older sprig
/// defined in this JVM does not declare it.
pub fn virtual_native<P: ProbeNatives>() -> NativeMethod {
    type VirtualNative = extern "system" fn(*mut JNIEnv, jclass) -> jint;
    NativeMethod {
        name: c"nVirtual",
        signature: c"()I",
        fn_ptr: (n_virtual::<P> as VirtualNative) as *mut std::ffi::c_void,
    }
}

/// Returns what `P::site` says (`P::SITE_AGAIN` after a panic).
extern "system" fn n_site<P: ProbeNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    site: jint,
    receiver: jclass,
) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `receiver` is null (a reach check) or a local reference valid for
        // this call.
        let (jni, receiver) = unsafe {
            (
                Jni::from_raw(env),
                (!receiver.is_null()).then(|| Local::from_raw(receiver)),
            )
        };
        P::site(jni, site as u32, receiver)
    }))
    .unwrap_or(P::SITE_AGAIN)
}

/// `Probe.nSite`, bound on its own: a probe class an older sprig defined
/// in this JVM does not declare it.
pub fn site_native<P: ProbeNatives>() -> NativeMethod {
    type SiteNative = extern "system" fn(*mut JNIEnv, jclass, jint, jclass) -> jint;
    NativeMethod {
        name: c"nSite",
        signature: c"(ILjava/lang/Class;)I",
        fn_ptr: (n_site::<P> as SiteNative) as *mut std::ffi::c_void,
    }
}

extern "system" fn n_alloc<P: ProbeNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    object: jobject,
    site: jint,
) {
    guard(|| {
        if object.is_null() {
            return;
        }
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `object` is a non-null local reference valid for this call.
        let (jni, object) = unsafe { (Jni::from_raw(env), Local::from_raw(object)) };
        P::alloc(jni, object, site as u32)
    });
}

/// `Probe.nCopy`: records a copy (or a `multianewarray`'s array) as
/// `nAlloc` does; returns the site the Java path may record further
/// copies of its class at, -1 for none (a panic included).
extern "system" fn n_copy<P: ProbeNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    object: jobject,
    site: jint,
) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        if object.is_null() {
            return -1;
        }
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `object` is a non-null local reference valid for this call.
        let (jni, object) = unsafe { (Jni::from_raw(env), Local::from_raw(object)) };
        P::copy(jni, object, site as u32)
    }))
    .unwrap_or(-1)
}

/// `Probe.nCopy`, bound on its own: a probe class an older sprig defined
/// in this JVM does not declare it (every copy goes to `nAlloc`).
pub fn copy_native<P: ProbeNatives>() -> NativeMethod {
    type CopyNative = extern "system" fn(*mut JNIEnv, jclass, jobject, jint) -> jint;
    NativeMethod {
        name: c"nCopy",
        signature: c"(Ljava/lang/Object;I)I",
        fn_ptr: (n_copy::<P> as CopyNative) as *mut std::ffi::c_void,
    }
}

/// `Probe.nAlloc`, bound on its own: a probe class an older sprig defined
/// in this JVM does not declare it.
pub fn alloc_native<P: ProbeNatives>() -> NativeMethod {
    type AllocNative = extern "system" fn(*mut JNIEnv, jclass, jobject, jint);
    NativeMethod {
        name: c"nAlloc",
        signature: c"(Ljava/lang/Object;I)V",
        fn_ptr: (n_alloc::<P> as AllocNative) as *mut std::ffi::c_void,
    }
}

extern "system" fn n_alloc_length<P: ProbeNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    length: jint,
    site: jint,
) {
    guard(|| {
        // An allocated array's length is never negative.
        let Ok(length) = u32::try_from(length) else {
            return;
        };
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        P::alloc_length(jni, length, site as u32)
    });
}

/// `Probe.nAllocLength`, bound on its own: a probe class an older sprig
/// defined in this JVM does not declare it (its array probe passes the
/// array to `nAlloc`).
pub fn alloc_length_native<P: ProbeNatives>() -> NativeMethod {
    type AllocLengthNative = extern "system" fn(*mut JNIEnv, jclass, jint, jint);
    NativeMethod {
        name: c"nAllocLength",
        signature: c"(II)V",
        fn_ptr: (n_alloc_length::<P> as AllocLengthNative) as *mut std::ffi::c_void,
    }
}

/// `Probe.nTable()`: the address of the slot table of sampled timing's
/// Java probes (`slots`), 0 when it could not be mapped.
extern "system" fn n_table(_env: *mut JNIEnv, _cls: jclass) -> jlong {
    catch_unwind(super::slots::table)
        .ok()
        .flatten()
        .map_or(0, |a| a as jlong)
}

/// `Probe.nTable`, bound on its own: a probe class an older sprig defined
/// in this JVM does not declare it.
pub fn table_native() -> NativeMethod {
    type TableNative = extern "system" fn(*mut JNIEnv, jclass) -> jlong;
    NativeMethod {
        name: c"nTable",
        signature: c"()J",
        fn_ptr: (n_table as TableNative) as *mut std::ffi::c_void,
    }
}

type ProbeNative = extern "system" fn(*mut JNIEnv, jclass, jint);

/// The fast probes of the JDK 22+ probe class, called through FFM downcall
/// handles linked with `Linker.Option.critical(false)`: no JNIEnv, no
/// thread-state transition, and the thread stays in Java state (safepoints
/// wait for it), so they never block: they return `P::FAST_SLOW` for
/// everything that needs JNI, JVMTI or a wait, and the Java side then calls
/// the JNI native of the same probe.
type FastProbe = extern "C" fn(jint) -> jint;

extern "C" fn fast_enter<P: ProbeNatives>(id: jint) -> jint {
    fast_guard::<P>(|| P::fast_enter(id as u32))
}

extern "C" fn fast_exit<P: ProbeNatives>(id: jint) -> jint {
    fast_guard::<P>(|| P::fast_exit(id as u32))
}

extern "C" fn fast_root_enter<P: ProbeNatives>(id: jint) -> jint {
    fast_guard::<P>(|| P::fast_root_enter(id as u32))
}

extern "C" fn fast_root_exit<P: ProbeNatives>(id: jint) -> jint {
    fast_guard::<P>(|| P::fast_root_exit(id as u32))
}

/// Runs a fast probe; a panic sends the Java side to the JNI path.
#[inline(always)]
fn fast_guard<P: ProbeNatives>(f: impl FnOnce() -> i32) -> jint {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(P::FAST_SLOW)
}

/// `Probe.fastAddress(which)`: the address of fast probe `which` (enter,
/// exit, rootEnter, rootExit), 0 for any other number.
extern "system" fn n_fast_address<P: ProbeNatives>(
    _env: *mut JNIEnv,
    _cls: jclass,
    which: jint,
) -> jlong {
    let f: Option<FastProbe> = match which {
        0 => Some(fast_enter::<P>),
        1 => Some(fast_exit::<P>),
        2 => Some(fast_root_enter::<P>),
        3 => Some(fast_root_exit::<P>),
        _ => None,
    };
    f.map_or(0, |f| f as usize as jlong)
}

/// The natives of `sprig.rt.Probe`, for RegisterNatives: the four JNI
/// probes, `nReflect`, and with `fast` (the JDK 22+ class) `fastAddress`.
pub fn probe_natives<P: ProbeNatives>(fast: bool) -> Vec<NativeMethod> {
    let m = |name: &'static CStr, f: ProbeNative| NativeMethod {
        name,
        signature: c"(I)V",
        fn_ptr: f as *mut std::ffi::c_void,
    };
    type RootNative = extern "system" fn(*mut JNIEnv, jclass, jint) -> jint;
    let r = |name: &'static CStr, f: RootNative| NativeMethod {
        name,
        signature: c"(I)I",
        fn_ptr: f as *mut std::ffi::c_void,
    };
    let mut v = vec![
        m(c"nEnter", n_enter::<P>),
        m(c"nExit", n_exit::<P>),
        r(c"nRootEnter", n_root_enter::<P>),
        r(c"nRootExit", n_root_exit::<P>),
    ];
    type ReflectNative = extern "system" fn(*mut JNIEnv, jclass, jobject);
    v.push(NativeMethod {
        name: c"nReflect",
        signature: c"(Ljava/lang/Object;)V",
        fn_ptr: (n_reflect::<P> as ReflectNative) as *mut std::ffi::c_void,
    });
    if fast {
        type AddressNative = extern "system" fn(*mut JNIEnv, jclass, jint) -> jlong;
        v.push(NativeMethod {
            name: c"fastAddress",
            signature: c"(I)J",
            fn_ptr: (n_fast_address::<P> as AddressNative) as *mut std::ffi::c_void,
        });
    }
    v
}

/// What the class file load hook sees, in safe form.
pub struct ClassFile<'b> {
    /// Internal name (`pkg/Name`); `None` for classes defined without one.
    pub name: Option<&'b str>,
    /// Whether this is a retransformation (or redefinition) of a loaded class.
    pub redefining: bool,
    /// The identity hash of the class's defining loader (0 for the boot
    /// loader) during a retransformation; `None` for a class load, or when
    /// JVMTI could not say.
    pub loader: Option<i32>,
    pub bytes: &'b [u8],
}

#[allow(clippy::too_many_arguments)]
extern "system" fn class_file_load_hook<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    class_being_redefined: jclass,
    loader: jobject,
    name: *const c_char,
    _protection_domain: jobject,
    class_data_len: jint,
    class_data: *const c_uchar,
    new_class_data_len: *mut jint,
    new_class_data: *mut *mut c_uchar,
) {
    guard(|| {
        if class_data.is_null() || class_data_len <= 0 || new_class_data.is_null() {
            return;
        }
        if new_class_data_len.is_null() {
            return;
        }
        // SAFETY: the VM passes the class name as a NUL-terminated string or
        // null.
        let cname = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
        let name_str = cname.and_then(|c| c.to_str().ok());
        // SAFETY: the VM passes `class_data_len` readable bytes that stay
        // valid for the duration of the callback.
        let bytes = unsafe { std::slice::from_raw_parts(class_data, class_data_len as usize) };
        // SAFETY: the VM passes the environment the hook is registered in.
        let jvmti = unsafe { Jvmti::from_raw(jvmti_env) };
        // Only a retransformation needs the loader (see `originals`): a
        // class load does not pay for the JVMTI call.
        let loader = if class_being_redefined.is_null() {
            None
        } else if loader.is_null() {
            Some(0)
        } else {
            // SAFETY: a live local reference the VM passes for the callback.
            jvmti.object_hash(unsafe { Local::from_raw(loader) }).ok()
        };
        let input = ClassFile {
            name: name_str,
            redefining: !class_being_redefined.is_null(),
            loader,
            bytes,
        };
        // SAFETY: the VM passes this thread's JNIEnv.
        let jni = unsafe { Jni::from_raw(jni_env) };
        let Some(out) = E::class_file(jni, &input) else {
            return;
        };
        match jvmti.allocate_copy(&out) {
            Ok((mem, len)) => {
                // SAFETY: both out pointers were checked non-null above; the
                // VM takes ownership of the JVMTI-allocated block.
                unsafe {
                    *new_class_data_len = len;
                    *new_class_data = mem;
                }
            }
            Err(e) => E::class_file_failed(input.name, e),
        }
    });
}

/// A class is linked (before any of its code runs).
extern "system" fn class_prepare<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    klass: jclass,
) {
    guard(|| {
        if klass.is_null() {
            return;
        }
        // SAFETY: the VM passes the environment the event is enabled in,
        // this thread's JNIEnv, and a local reference to the class valid
        // for the callback.
        let (jvmti, jni, class) = unsafe {
            (
                Jvmti::from_raw(jvmti_env),
                Jni::from_raw(jni_env),
                Local::from_raw(klass),
            )
        };
        E::class_prepare(&jvmti, jni, class);
    });
}

/// ClassLoad: nothing to do; the event is on only because HotSpot's
/// AsyncGetCallTrace answers while some environment has it on.
extern "system" fn class_load(
    _jvmti_env: *mut jvmtiEnv,
    _jni_env: *mut JNIEnv,
    _thread: jthread,
    _klass: jclass,
) {
}

/// CompiledMethodLoad: nothing to do; the event is on only because C2
/// then records the inlining scope of every instruction it emits.
extern "system" fn compiled_method_load(
    _jvmti_env: *mut jvmtiEnv,
    _method: jvmti_bindings::sys::jni::jmethodID,
    _code_size: jint,
    _code_addr: *const std::ffi::c_void,
    _map_length: jint,
    _map: *const jvmti_bindings::sys::jvmti::jvmtiAddrLocationMap,
    _compile_info: *const std::ffi::c_void,
) {
}

extern "system" fn vm_init<E: VmEvents>(
    _jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
) {
    guard(|| {
        // SAFETY: the VM passes this thread's JNIEnv.
        let jni = unsafe { Jni::from_raw(jni_env) };
        E::vm_init(jni);
    });
}

extern "system" fn vm_death<E: VmEvents>(_jvmti_env: *mut jvmtiEnv, jni_env: *mut JNIEnv) {
    guard(|| {
        let jni = (!jni_env.is_null()).then(|| {
            // SAFETY: the VM passes this thread's JNIEnv (checked not null).
            unsafe { Jni::from_raw(jni_env) }
        });
        E::vm_death(jni);
    });
}

/// The monitor events: the calling thread's, on `object`'s monitor.
fn monitor_event<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    object: jobject,
    event: MonitorEvent,
) {
    guard(|| {
        if object.is_null() || jni_env.is_null() {
            return;
        }
        // SAFETY: the VM passes the environment the event is enabled in,
        // this thread's JNIEnv, and a local reference to the object valid
        // for the callback.
        let (jvmti, jni, object) = unsafe {
            (
                Jvmti::from_raw(jvmti_env),
                Jni::from_raw(jni_env),
                Local::from_raw(object),
            )
        };
        E::monitor(&jvmti, jni, object, event);
    });
}

extern "system" fn monitor_contended_enter<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
) {
    monitor_event::<E>(jvmti_env, jni_env, object, MonitorEvent::ContendedEnter);
}

extern "system" fn monitor_contended_entered<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
) {
    monitor_event::<E>(jvmti_env, jni_env, object, MonitorEvent::ContendedEntered);
}

extern "system" fn monitor_wait<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
    _timeout: jlong,
) {
    monitor_event::<E>(jvmti_env, jni_env, object, MonitorEvent::Wait);
}

extern "system" fn monitor_waited<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
    _timed_out: jboolean,
) {
    monitor_event::<E>(jvmti_env, jni_env, object, MonitorEvent::Waited);
}

extern "system" fn gc_start<E: VmEvents>(_jvmti_env: *mut jvmtiEnv) {
    guard(|| E::gc(true));
}

extern "system" fn gc_finish<E: VmEvents>(_jvmti_env: *mut jvmtiEnv) {
    guard(|| E::gc(false));
}

/// ThreadStart, on the new thread.
extern "system" fn thread_start<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    thread: jthread,
) {
    guard(|| {
        if jvmti_env.is_null() || jni_env.is_null() || thread.is_null() {
            E::thread(true, None);
            return;
        }
        // SAFETY: the VM passes the environment the event is enabled in,
        // the new thread's own JNIEnv, and a local reference to its
        // Thread valid for the callback.
        let (jvmti, jni, thread) = unsafe {
            (
                Jvmti::from_raw(jvmti_env),
                Jni::from_raw(jni_env),
                Local::from_raw(thread),
            )
        };
        E::thread(true, Some((&jvmti, jni, thread)));
    });
}

/// ThreadEnd, on the ending thread.
extern "system" fn thread_end<E: VmEvents>(
    _jvmti_env: *mut jvmtiEnv,
    _jni_env: *mut JNIEnv,
    _thread: jthread,
) {
    guard(|| E::thread(false, None));
}

/// SampledObjectAlloc, on the allocating thread.
extern "system" fn sampled_object_alloc<E: VmEvents>(
    jvmti_env: *mut jvmtiEnv,
    jni_env: *mut JNIEnv,
    _thread: jthread,
    object: jobject,
    klass: jclass,
    size: jlong,
) {
    guard(|| {
        if klass.is_null() || jni_env.is_null() || object.is_null() {
            return;
        }
        // SAFETY: the VM passes the environment the event is enabled in,
        // this thread's JNIEnv, and local references to the object and its
        // class valid for the callback.
        let (jvmti, jni, object, class) = unsafe {
            (
                Jvmti::from_raw(jvmti_env),
                Jni::from_raw(jni_env),
                Local::from_raw(object),
                Local::from_raw(klass),
            )
        };
        E::sampled_alloc(&jvmti, jni, object, class, size.max(0) as u64);
    });
}

/// ObjectFree: a tagged object was freed.
extern "system" fn object_free<E: VmEvents>(_jvmti_env: *mut jvmtiEnv, tag: jlong) {
    guard(|| E::object_free(tag as u64));
}

/// Installs the event callbacks of the agent's single environment, bound
/// to `E`.
pub fn install<E: VmEvents>(jvmti: &Jvmti) -> Result<(), JvmtiError> {
    let mut cb = jvmtiEventCallbacks::default();
    cb.VMInit = Some(vm_init::<E>);
    cb.VMDeath = Some(vm_death::<E>);
    cb.ClassFileLoadHook = Some(class_file_load_hook::<E>);
    cb.ClassPrepare = Some(class_prepare::<E>);
    cb.MonitorContendedEnter = Some(monitor_contended_enter::<E>);
    cb.MonitorContendedEntered = Some(monitor_contended_entered::<E>);
    cb.MonitorWait = Some(monitor_wait::<E>);
    cb.MonitorWaited = Some(monitor_waited::<E>);
    cb.GarbageCollectionStart = Some(gc_start::<E>);
    cb.GarbageCollectionFinish = Some(gc_finish::<E>);
    cb.ClassLoad = Some(class_load);
    cb.CompiledMethodLoad = Some(compiled_method_load);
    cb.ThreadStart = Some(thread_start::<E>);
    cb.ThreadEnd = Some(thread_end::<E>);
    cb.SampledObjectAlloc = Some(sampled_object_alloc::<E>);
    cb.ObjectFree = Some(object_free::<E>);
    jvmti.set_event_callbacks(&cb)
}

/// What the natives of `sprig.rt.Waits` (the wait probes `--locks` puts
/// into `LockSupport`'s park methods and `Thread`'s sleep) do; the lock
/// source implements it and [`wait_natives`] binds its functions.
pub trait WaitNatives: 'static {
    /// A wait of `kind` (sprig_wire's `WaitKind` value) begins on the
    /// calling thread, on `blocker` when the park method has one.
    fn begin(jni: Jni<'_>, kind: u32, blocker: Option<Local<'_>>);
    /// The wait of `kind` ended (returned or threw).
    fn end(jni: Jni<'_>, kind: u32);
}

extern "system" fn n_wait_begin<W: WaitNatives>(
    env: *mut JNIEnv,
    _cls: jclass,
    kind: jint,
    blocker: jobject,
) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `blocker` is null or a local reference valid for this call.
        let (jni, blocker) = unsafe {
            (
                Jni::from_raw(env),
                (!blocker.is_null()).then(|| Local::from_raw(blocker)),
            )
        };
        W::begin(jni, kind as u32, blocker)
    });
}

extern "system" fn n_wait_end<W: WaitNatives>(env: *mut JNIEnv, _cls: jclass, kind: jint) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        W::end(jni, kind as u32)
    });
}

/// `Waits.nBegin` and `Waits.nEnd`.
pub fn wait_natives<W: WaitNatives>() -> [NativeMethod; 2] {
    type BeginNative = extern "system" fn(*mut JNIEnv, jclass, jint, jobject);
    type EndNative = extern "system" fn(*mut JNIEnv, jclass, jint);
    [
        NativeMethod {
            name: c"nBegin",
            signature: c"(ILjava/lang/Object;)V",
            fn_ptr: (n_wait_begin::<W> as BeginNative) as *mut std::ffi::c_void,
        },
        NativeMethod {
            name: c"nEnd",
            signature: c"(I)V",
            fn_ptr: (n_wait_end::<W> as EndNative) as *mut std::ffi::c_void,
        },
    ]
}
