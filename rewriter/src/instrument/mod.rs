//! Probe injection. Owned by the instrumentation work (issue 2).
use crate::{Error, Instrumented, ProbeSet, Target};

/// Instruments `targets` of `class`. See the crate docs.
pub fn instrument(_class: &[u8], _targets: &[Target], _probes: &[ProbeSet]) -> Result<Instrumented, Error> {
    Err(Error::Unsupported("instrument not implemented yet".into()))
}
