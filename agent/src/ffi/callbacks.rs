//! The functions the VM calls: the probe natives, the class file load hook
//! and the VMInit/VMDeath events. Each converts its raw arguments into the
//! safe wrappers, runs the agent's handler inside `catch_unwind`, and never
//! lets a panic or an error reach the VM.

use super::jni::{Jni, NativeMethod};
use super::jvmti::{Jvmti, JvmtiError};
use jvmti_bindings::sys::jni::{JNIEnv, jclass, jint, jlong, jobject, jthread};
use jvmti_bindings::sys::jvmti::{jvmtiEnv, jvmtiEventCallbacks};
use std::ffi::{CStr, c_char, c_uchar};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f`, swallowing a panic (the VM must never see one).
#[inline(always)]
fn guard(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

extern "system" fn n_enter(env: *mut JNIEnv, _cls: jclass, id: jint) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        crate::probe::enter(id as u32, jni)
    });
}

extern "system" fn n_exit(env: *mut JNIEnv, _cls: jclass, id: jint) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        crate::probe::exit(id as u32, jni)
    });
}

/// Returns 1 when it opened a root context on this thread (the Java side
/// counts it in `Probe.INSIDE`), 0 otherwise (a panic included).
extern "system" fn n_root_enter(env: *mut JNIEnv, _cls: jclass, id: jint) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        jint::from(crate::probe::root_enter(id as u32, jni))
    }))
    .unwrap_or(0)
}

/// Returns 1 when it closed this thread's root context, 3 when the thread
/// runs a calibration burst first (the probe class then calls again), 0
/// otherwise (a panic included).
extern "system" fn n_root_exit(env: *mut JNIEnv, _cls: jclass, id: jint) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives.
        let jni = unsafe { Jni::from_raw(env) };
        jint::from(crate::probe::root_exit(id as u32, jni))
    }))
    .unwrap_or(0)
}

extern "system" fn n_reflect(env: *mut JNIEnv, _cls: jclass, method: jobject) {
    guard(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `method` is a local reference valid for this call.
        let (jni, method) = unsafe { (Jni::from_raw(env), super::jni::Local::from_raw(method)) };
        crate::probe::reflect(jni, method)
    });
}

/// Returns `probe::SITE_SEEN`, `SITE_DONE` (the agent watches this call
/// site no more) or `SITE_AGAIN` (nothing done, a panic included).
extern "system" fn n_site(env: *mut JNIEnv, _cls: jclass, site: jint, receiver: jclass) -> jint {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the VM passes the calling thread's JNIEnv to natives, and
        // `receiver` is null (a reach check) or a local reference valid for
        // this call.
        let (jni, receiver) = unsafe {
            (
                Jni::from_raw(env),
                (!receiver.is_null()).then(|| super::jni::Local::from_raw(receiver)),
            )
        };
        crate::probe::site(jni, site as u32, receiver)
    }))
    .unwrap_or(crate::probe::SITE_AGAIN)
}

/// `Probe.nSite`, bound on its own: a probe class an older sprig defined
/// in this JVM does not declare it.
pub fn site_native() -> NativeMethod {
    type SiteNative = extern "system" fn(*mut JNIEnv, jclass, jint, jclass) -> jint;
    NativeMethod {
        name: c"nSite",
        signature: c"(ILjava/lang/Class;)I",
        fn_ptr: (n_site as SiteNative) as *mut std::ffi::c_void,
    }
}

type ProbeNative = extern "system" fn(*mut JNIEnv, jclass, jint);

/// The fast probes of the JDK 22+ probe class, called through FFM downcall
/// handles linked with `Linker.Option.critical(false)`: no JNIEnv, no
/// thread-state transition, and the thread stays in Java state (safepoints
/// wait for it), so they never block: they return `probe::FAST_SLOW` for
/// everything that needs JNI, JVMTI or a wait, and the Java side then calls
/// the JNI native of the same probe.
type FastProbe = extern "C" fn(jint) -> jint;

extern "C" fn fast_enter(id: jint) -> jint {
    fast_guard(|| crate::probe::fast_enter(id as u32))
}

extern "C" fn fast_exit(id: jint) -> jint {
    fast_guard(|| crate::probe::fast_exit(id as u32))
}

extern "C" fn fast_root_enter(id: jint) -> jint {
    fast_guard(|| crate::probe::fast_root_enter(id as u32))
}

extern "C" fn fast_root_exit(id: jint) -> jint {
    fast_guard(|| crate::probe::fast_root_exit(id as u32))
}

/// Runs a fast probe; a panic sends the Java side to the JNI path.
#[inline(always)]
fn fast_guard(f: impl FnOnce() -> i32) -> jint {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(crate::probe::FAST_SLOW)
}

/// `Probe.fastAddress(which)`: the address of fast probe `which` (enter,
/// exit, rootEnter, rootExit), 0 for any other number.
extern "system" fn n_fast_address(_env: *mut JNIEnv, _cls: jclass, which: jint) -> jlong {
    let f: Option<FastProbe> = match which {
        0 => Some(fast_enter),
        1 => Some(fast_exit),
        2 => Some(fast_root_enter),
        3 => Some(fast_root_exit),
        _ => None,
    };
    f.map_or(0, |f| f as usize as jlong)
}

/// The natives of `sprig.rt.Probe`, for RegisterNatives: the four JNI
/// probes, `nReflect`, and with `fast` (the JDK 22+ class) `fastAddress`.
pub fn probe_natives(fast: bool) -> Vec<NativeMethod> {
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
        m(c"nEnter", n_enter),
        m(c"nExit", n_exit),
        r(c"nRootEnter", n_root_enter),
        r(c"nRootExit", n_root_exit),
    ];
    type ReflectNative = extern "system" fn(*mut JNIEnv, jclass, jobject);
    v.push(NativeMethod {
        name: c"nReflect",
        signature: c"(Ljava/lang/Object;)V",
        fn_ptr: (n_reflect as ReflectNative) as *mut std::ffi::c_void,
    });
    if fast {
        type AddressNative = extern "system" fn(*mut JNIEnv, jclass, jint) -> jlong;
        v.push(NativeMethod {
            name: c"fastAddress",
            signature: c"(I)J",
            fn_ptr: (n_fast_address as AddressNative) as *mut std::ffi::c_void,
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
extern "system" fn class_file_load_hook(
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
            jvmti
                .object_hash(unsafe { super::jni::Local::from_raw(loader) })
                .ok()
        };
        let input = ClassFile {
            name: name_str,
            redefining: !class_being_redefined.is_null(),
            loader,
            bytes,
        };
        // SAFETY: the VM passes this thread's JNIEnv.
        let jni = unsafe { Jni::from_raw(jni_env) };
        let Some(out) = crate::instrument::on_class_file(jni, &input) else {
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
            Err(e) => crate::instrument::report_hook_failure(input.name, e),
        }
    });
}

/// A class is linked (before any of its code runs): revelation mirrors it
/// now if it was loaded before the attach but not prepared then.
extern "system" fn class_prepare(
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
                super::jni::Local::from_raw(klass),
            )
        };
        crate::reveal::on_class_prepare(&jvmti, jni, class);
    });
}

extern "system" fn vm_init(_jvmti_env: *mut jvmtiEnv, jni_env: *mut JNIEnv, _thread: jthread) {
    guard(|| {
        // SAFETY: the VM passes this thread's JNIEnv.
        let jni = unsafe { Jni::from_raw(jni_env) };
        crate::session::on_vm_init(jni);
    });
}

extern "system" fn vm_death(_jvmti_env: *mut jvmtiEnv, _jni_env: *mut JNIEnv) {
    guard(crate::session::on_vm_death);
}

/// Installs the event callbacks of the agent's single environment.
pub fn install(jvmti: &Jvmti) -> Result<(), JvmtiError> {
    let mut cb = jvmtiEventCallbacks::default();
    cb.VMInit = Some(vm_init);
    cb.VMDeath = Some(vm_death);
    cb.ClassFileLoadHook = Some(class_file_load_hook);
    cb.ClassPrepare = Some(class_prepare);
    jvmti.set_event_callbacks(&cb)
}
