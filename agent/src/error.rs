//! The one error type of the agent's entry points, mapped to a `jint`.

use crate::ffi::{JniError, JvmtiError};
use std::panic::{AssertUnwindSafe, catch_unwind};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum AgentError {
    #[error("no agent options given (expected dir=...,token=...,cli=...)")]
    NoOptions,
    #[error("bad agent options: {0}")]
    Options(#[from] sprig_wire::session::OptionsError),
    #[error("the VM passed no JavaVM pointer")]
    NoVm,
    #[error("cannot get a JVMTI environment (GetEnv returned {0})")]
    NoJvmti(i32),
    #[error("JVMTI {call} failed: {err}")]
    Jvmti { call: &'static str, err: JvmtiError },
    #[error("JNI: {0}")]
    Jni(#[from] JniError),
    #[error("this thread is not attached to the VM")]
    NotAttached,
    #[error(
        "a sprig session is already running in this JVM ({owner}); stop that session or wait \
         for it to end, then try again"
    )]
    Busy {
        /// Which sprig runs it: `sprig pid N, user U`.
        owner: String,
    },
    #[error("cannot start the sprig-control thread: {0}")]
    Thread(std::io::Error),
    #[error("internal error (panic) in the agent")]
    Panic,
    #[error(
        "this JVM holds the probe class of an older sprig (defined by an earlier attach); \
         profile it with that sprig, or restart the JVM"
    )]
    OldProbeClass,
    #[error("cannot keep the agent library loaded (dladdr/dlopen failed)")]
    Pin,
}

impl AgentError {
    /// The code an entry point returns for this error (never 0).
    pub fn code(&self) -> i32 {
        use sprig_wire::control::agent_code as c;
        match self {
            AgentError::NoOptions | AgentError::Options(_) => c::OPTIONS,
            AgentError::NoVm | AgentError::NoJvmti(_) | AgentError::NotAttached => c::NO_VM,
            AgentError::Jvmti { .. } => c::JVMTI,
            AgentError::Jni(_) => c::JNI,
            AgentError::Busy { .. } => c::BUSY,
            AgentError::Thread(_) => c::THREAD,
            AgentError::Panic => c::PANIC,
            AgentError::OldProbeClass => c::OLD_PROBE_CLASS,
            AgentError::Pin => c::PIN,
        }
    }

    pub fn jvmti(call: &'static str) -> impl FnOnce(JvmtiError) -> AgentError {
        move |err| AgentError::Jvmti { call, err }
    }
}

/// Runs an entry point's body: catches panics, prints one line for an
/// error on the target's stderr, and returns the code for the VM.
pub fn run_entry(what: &str, f: impl FnOnce() -> Result<(), AgentError>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("sprig agent ({what}): {e}");
            e.code()
        }
        Err(_) => {
            eprintln!("sprig agent ({what}): {}", AgentError::Panic);
            AgentError::Panic.code()
        }
    }
}

/// Runs one step of a session's end: a panic in it is caught (and said on
/// stderr), `fallback` stands for its result, and the next steps run.
pub fn step<R>(what: &str, fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("sprig agent: {} in {what}", AgentError::Panic);
            fallback
        }
    }
}

/// Test-only fault injection: a comma-separated list in the target's
/// environment. `control` makes the control loop panic once, `teardown`
/// one step of the end of a session (the tests of a session's end).
pub const FAULT_ENV: &str = "SPRIG_AGENT_FAULT";

/// Whether [`FAULT_ENV`] names `point` (hooks that are no panic).
pub fn fault_named(point: &str) -> bool {
    std::env::var_os(FAULT_ENV).is_some_and(|l| l.to_string_lossy().split(',').any(|p| p == point))
}

/// Panics once per JVM at `point` when [`FAULT_ENV`] names it.
pub fn inject_fault(point: &'static str) {
    static FIRED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let Some(list) = std::env::var_os(FAULT_ENV) else {
        return;
    };
    if !list.to_string_lossy().split(',').any(|p| p == point) {
        return;
    }
    let mut fired = crate::sync::lock(&FIRED);
    if fired.contains(&point) {
        return;
    }
    fired.push(point);
    drop(fired);
    panic!("sprig agent: injected fault at {point} ({FAULT_ENV})");
}
