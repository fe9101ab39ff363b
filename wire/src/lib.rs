//! The only path between the sprig agent (inside the JVM) and the sprig CLI.
//!
//! - [`ring`]: a shared-memory region of per-thread segments that probes fill
//!   with [`Event`]s and the CLI drains, with no lock or CAS per event.
//! - [`control`] + [`codec`] + [`session`]: length-prefixed bincode messages over a
//!   Unix-domain socket in a private session directory.
//! - [`clock`]: the raw clocks probes read and how to convert their ticks.

//!
//! `unsafe` is denied but in the four modules that talk to the kernel or
//! to shared memory (`clock`: `rdtsc` and `clock_gettime`; `memfd`;
//! `ring::raw`: the mapped region; `session::sys`: socket credentials,
//! descriptor passing and `unlinkat`), each block with a `// SAFETY:` line.

#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod clock;
pub mod codec;
pub mod control;
pub mod event;
#[allow(unsafe_code)]
pub mod memfd;
pub mod record;
pub mod ring;
pub mod session;

pub use control::{
    AgentOptions, ClockKind, Message, PROTOCOL_VERSION, SampledState, Silence, StackOptions,
    StackSample, WindowOptions,
};
pub use event::{Event, EventKind};
pub use record::{
    AllocRecord, Record, RecordSlots, Records, SampledAlloc, Wait, WaitKind, wait_row, wait_row_id,
};
