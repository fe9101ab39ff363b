//! The sprig JVMTI agent, loaded into the target JVM with `-agentpath`
//! (startup mode) or by the attach mechanism (dynamic attach). This file
//! holds only the exported entry points; see the modules for the rest:
//!
//! - `ffi`: the FFI boundary (raw JVMTI/JNI pointers, safe wrappers,
//!   the callbacks the VM calls).
//! - `session`: connect to the CLI, control loop, detach.
//! - `probe`: the probe runtime (hot path); `probe_class`: the embedded
//!   `sprig.rt.Probe` class; `threads`: thread registry; `methods`: method
//!   ids and first calls.
//! - `instrument`: class file load hook, RetransformClasses, restore.
//! - `reveal`: drives callgraph's revealer (Scheme B/A): class mirror,
//!   first-call revelation, redefinition batches.

#![deny(unsafe_op_in_unsafe_fn)]

mod calibrate;
mod env;
mod error;
mod ffi;
mod instrument;
mod ledger;
mod methods;
mod outbox;
mod probe;
mod probe_class;
mod reveal;
mod session;
mod suggest;
mod sync;
mod threads;

use std::ffi::{c_char, c_void};

/// # Safety
/// Called by the VM with its JavaVM pointer and option string.
///
/// Startup mode: `-agentpath:libsprig_agent.so=dir=...,token=...,cli=...`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnLoad(
    vm: *mut c_void,
    options: *const c_char,
    _reserved: *mut c_void,
) -> i32 {
    error::run_entry("OnLoad", || {
        // SAFETY: the VM passes its JavaVM pointer and a NUL-terminated
        // option string (or null), both valid for this call.
        let (vm, options) = unsafe { (ffi::JavaVm::from_raw(vm), ffi::options_str(options)) };
        session::on_load(vm.ok_or(error::AgentError::NoVm)?, options.as_deref())
    })
}

/// # Safety
/// Called by the VM with its JavaVM pointer and option string.
///
/// Dynamic attach (also called again when the library is loaded again).
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnAttach(
    vm: *mut c_void,
    options: *const c_char,
    _reserved: *mut c_void,
) -> i32 {
    error::run_entry("OnAttach", || {
        // SAFETY: as in Agent_OnLoad.
        let (vm, options) = unsafe { (ffi::JavaVm::from_raw(vm), ffi::options_str(options)) };
        session::on_attach(vm.ok_or(error::AgentError::NoVm)?, options.as_deref())
    })
}

/// # Safety
/// Called by the VM at exit.
///
/// The VM unloads the agent at exit; the VMDeath handler already ended the
/// session.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnUnload(_vm: *mut c_void) {
    let _ = error::run_entry("OnUnload", || Ok(()));
}
