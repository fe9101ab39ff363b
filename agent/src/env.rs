//! The agent's single JVMTI environment, created on the first load and
//! reused by every later attach (so 20 attach/detach cycles do not grow the
//! VM's list of environments).

use crate::error::AgentError;
use crate::ffi::{self, Event, JavaVm, Jvmti};
use std::sync::{Mutex, OnceLock};

/// The VM and the environment, for the life of the library.
#[derive(Debug)]
pub struct Agent {
    pub vm: JavaVm,
    pub jvmti: Jvmti,
}

static AGENT: OnceLock<Agent> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// The agent, creating the environment (capabilities, callbacks bound to
/// `E`, VMDeath) on the first call.
pub fn init<E: ffi::VmEvents>(vm: JavaVm) -> Result<&'static Agent, AgentError> {
    if let Some(a) = AGENT.get() {
        return Ok(a);
    }
    let _guard = crate::sync::lock(&INIT);
    if let Some(a) = AGENT.get() {
        return Ok(a);
    }
    let jvmti = vm.new_jvmti().map_err(AgentError::NoJvmti)?;
    // Held for the life of the environment, which every later attach
    // reuses: the class file load hook is bound to it, and the classes a
    // session rewrote are put back through it.
    jvmti
        .add_capabilities(ffi::Capabilities::CLASS_REWRITING)
        .map_err(AgentError::jvmti("AddCapabilities"))?;
    ffi::install::<E>(&jvmti).map_err(AgentError::jvmti("SetEventCallbacks"))?;
    jvmti
        .set_event(Event::VmDeath, true)
        .map_err(AgentError::jvmti("SetEventNotificationMode(VMDeath)"))?;
    Ok(AGENT.get_or_init(|| Agent { vm, jvmti }))
}

/// The agent once [`init`] succeeded.
pub fn get() -> Option<&'static Agent> {
    AGENT.get()
}
