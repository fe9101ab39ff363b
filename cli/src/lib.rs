//! The `sprig` library: everything the `sprig` binary does, testable without
//! it.

#![deny(unsafe_code)]

pub mod attach;
pub mod beneath;
pub mod jvm;
pub mod list;
pub mod pattern;
pub mod rewrite;
pub mod stale;
#[allow(unsafe_code)]
pub(crate) mod sys;

pub use sys::{clock_ticks_per_second, terminal_columns};
