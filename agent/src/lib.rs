//! The sprig JVMTI agent, loaded into the target JVM with `-agentpath`
//! (startup mode) or by the attach mechanism (dynamic attach). This file
//! holds only the exported entry points; see the modules for the rest:
//!
//! From the top floor down (a module imports only modules below it):
//!
//! - `session`: connect to the CLI, control loop, detach; the one list of
//!   each module's `begin_session`/`end_session`.
//! - `sources`: what observes the JVM in a session, one lifecycle each
//!   (check, start, stop, the capabilities and events it needs): the
//!   probes, the stack sampler.
//! - `calibrate`: the probe calibration.
//! - `probe`: the probe runtime (hot path), the natives of the probe class.
//! - `instrument`: class file load hook, root matching, restore.
//! - `reveal`: drives sprig-reveal's revealer (Scheme B/A): class mirror,
//!   first-call revelation, redefinition batches.
//! - `ledger`: what each class holds (first bytes, probes), the
//!   RetransformClasses batches and their counters.
//! - `frames`: the frames running at the attach, and those left on an
//!   old method version at the detach.
//! - `methods`: method ids and first calls; `threads`: thread registry;
//!   `probe_class`: the embedded `sprig.rt.Probe` class and its probe
//!   kinds; `suggest`: near matches of a root pattern.
//! - `outbox`: the one way to the CLI; `env`: the JVMTI environment;
//!   `error`; `sync`: the lock helper.
//! - `ffi`: the FFI boundary (raw JVMTI/JNI pointers, safe wrappers, the
//!   trampolines the VM calls); it imports nothing of the agent.
//!
//! `unsafe` lives in `ffi` and in the three entry points below, and
//! nowhere else.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod allocs;
mod calibrate;
mod env;
mod error;
// Raw JVMTI/JNI pointers, the trampolines the VM calls, the TLS slot.
#[allow(unsafe_code)]
mod ffi;
mod frames;
mod instrument;
mod ledger;
mod methods;
mod outbox;
mod probe;
mod probe_class;
mod reveal;
mod session;
mod sources;
mod suggest;
mod sync;
mod threads;
mod wait_classes;

use std::ffi::{c_char, c_void};

/// Pins the library before anything is registered with the VM (see
/// `ffi::pin_library`): an attach that fails later then leaves nothing
/// the VM calls pointing into unmapped code.
fn pin() -> Result<(), error::AgentError> {
    if ffi::pin_library() {
        Ok(())
    } else {
        Err(error::AgentError::Pin)
    }
}

/// # Safety
/// Called by the VM with its JavaVM pointer and option string.
///
/// Startup mode: `-agentpath:libsprig_agent.so=dir=...,token=...,cli=...`.
// Exported entry point: unsafe by the JVMTI contract.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnLoad(
    vm: *mut c_void,
    options: *const c_char,
    _reserved: *mut c_void,
) -> i32 {
    error::run_entry("OnLoad", || {
        pin()?;
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
// Exported entry point: unsafe by the JVMTI contract.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnAttach(
    vm: *mut c_void,
    options: *const c_char,
    _reserved: *mut c_void,
) -> i32 {
    error::run_entry("OnAttach", || {
        pin()?;
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
// Exported entry point: unsafe by the JVMTI contract.
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnUnload(_vm: *mut c_void) {
    let _ = error::run_entry("OnUnload", || Ok(()));
}
