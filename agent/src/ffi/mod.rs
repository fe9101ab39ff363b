//! The FFI boundary: the only module (with the exported entry points in
//! `lib.rs`) that touches raw JVMTI/JNI pointers. Everything else in the
//! agent uses the safe wrappers re-exported here.

mod callbacks;
mod cpu;
mod jni;
mod jvmti;
pub mod slots;
mod tls;

pub use callbacks::{
    ClassFile, ProbeNatives, VmEvents, install, probe_natives, reflected_native, site_native,
    table_native,
};
pub use cpu::{Affinity, gettid};
pub use jni::{FieldId, Global, JavaVm, Jni, JniError, Local, MethodId};
pub use jvmti::{Event, Jvmti, JvmtiError, ThreadStack};
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
