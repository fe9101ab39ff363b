//! The probe class `sprig.rt.Probe`: compiled by build.rs, embedded here,
//! defined once per JVM in the bootstrap loader (so every class can call
//! it), its natives bound on every attach, and its two flags written.

use crate::error::AgentError;
use crate::ffi::{FieldId, Global, Jni, probe_natives};
use std::sync::{Mutex, OnceLock};

/// Internal name of the probe class.
pub const CLASS: &str = "sprig/rt/Probe";
/// Probe pair used in root methods.
pub const ROOT_ENTER: &str = "rootEnter";
pub const ROOT_EXIT: &str = "rootExit";
/// Probe pair used in every other instrumented method.
pub const ENTER: &str = "enter";
pub const EXIT: &str = "exit";

static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/sprig/rt/Probe.class"));

struct ProbeClass {
    class: Global,
    active: FieldId,
    on: FieldId,
}

static PROBE: OnceLock<ProbeClass> = OnceLock::new();
/// Serialises every write of the two fields, so the last writer always
/// writes the latest value.
static WRITE: Mutex<()> = Mutex::new(());

/// Defines the class if this JVM does not have it yet (a previous attach
/// defined it otherwise) and binds its natives to this library.
pub fn ensure(jni: Jni<'_>) -> Result<(), AgentError> {
    let _guard = WRITE.lock().unwrap_or_else(|p| p.into_inner());
    jni.with_local_frame(16, |jni| {
        let class = match jni.find_class(CLASS)? {
            Some(c) => c,
            None => jni.define_bootstrap_class(CLASS, BYTES)?,
        };
        jni.register_natives(class, &probe_natives())?;
        if PROBE.get().is_none() {
            let active = jni.static_int_field(class, "active")?;
            let on = jni.static_int_field(class, "on")?;
            let class = jni.new_global(class)?;
            let _ = PROBE.set(ProbeClass { class, active, on });
        }
        Ok(())
    })
}

/// Writes `Probe.on` (root probes call into the agent only while it is 1).
pub fn set_on(jni: Jni<'_>, on: bool) {
    if let Some(p) = PROBE.get() {
        let _guard = WRITE.lock().unwrap_or_else(|p| p.into_inner());
        jni.set_static_int(&p.class, p.on, i32::from(on));
    }
}

/// Writes `Probe.active` with the value `current()` returns under the
/// write lock, so concurrent 0↔1 transitions cannot leave a stale value.
pub fn publish_active(jni: Jni<'_>, current: impl FnOnce() -> i32) {
    if let Some(p) = PROBE.get() {
        let _guard = WRITE.lock().unwrap_or_else(|p| p.into_inner());
        jni.set_static_int(&p.class, p.active, current().max(0));
    }
}
