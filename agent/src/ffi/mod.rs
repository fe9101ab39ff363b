//! The FFI boundary: the only module (with the exported entry points in
//! `lib.rs`) that touches raw JVMTI/JNI pointers. Everything else in the
//! agent uses the safe wrappers re-exported here.

pub mod agct;
mod callbacks;
mod cpu;
mod jni;
mod jvmti;
mod locks;
pub mod slots;
mod tls;
pub mod vthreads;

pub use callbacks::{
    ClassFile, MonitorEvent, ProbeNatives, VmEvents, WaitNatives, alloc_length_native,
    alloc_native, copy_native, install, probe_natives, reflected_native, site_native, table_native,
    virtual_native, wait_natives,
};
pub use cpu::{Affinity, gettid};
pub use jni::{FieldId, Global, JavaVm, Jni, JniError, Local, MethodId};
pub use jvmti::{Capabilities, Event, Jvmti, JvmtiError, ThreadStack, thread_state};
pub use locks::{Arg, JavaMethod, Value};
pub use tls::{forget_state, with_state};

/// The agent option string the VM passed (`None` when absent).
///
/// # Safety
/// `options` must be null or a NUL-terminated string valid for the call.
pub unsafe fn options_str(options: *const std::ffi::c_char) -> Option<String> {
    if options.is_null() {
        return None;
    }
    // SAFETY: guaranteed by the caller.
    let c = unsafe { std::ffi::CStr::from_ptr(options) };
    Some(c.to_string_lossy().into_owned())
}

/// Keeps this library mapped until the process exits, whatever the VM does
/// with it: HotSpot unloads an agent library whose `Agent_OnAttach` returns
/// an error, while the JVMTI callbacks, the probe class's natives and its
/// FFM fast-path addresses that an earlier or the failing attach bound may
/// still point into it (a VMDeath into unmapped code is a crash at the
/// JVM's exit). The entry points call this before anything registers.
/// False when the library could not be found or pinned.
pub fn pin_library() -> bool {
    // An address inside this library: this function's.
    let here = pin_library as *const () as *const std::ffi::c_void;
    // SAFETY: an all-zero `Dl_info` is a valid value (null pointers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `here` is an address of this library, `info` a valid out
    // pointer that dladdr fills with pointers owned by the loader.
    if unsafe { libc::dladdr(here, &mut info) } == 0 || info.dli_fname.is_null() {
        return false;
    }
    // SAFETY: `dli_fname` is the NUL-terminated path the loader keeps for
    // the loaded library; RTLD_NOLOAD only takes one more reference on that
    // library (never loads another), and RTLD_NODELETE makes every later
    // dlclose leave it mapped. The handle is kept on purpose.
    let handle = unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
        )
    };
    !handle.is_null()
}
