//! Real workloads, bare and under sprig in the same JVM, in JFluid's columns.
//!
//! Per workload one JVM (bench.Driver) is started and warmed up; then, per
//! repeat: K bare iterations, and for each root and scheme (each repeat
//! starting one scheme further along): attach, K profiled iterations,
//! detach, K iterations after detach. Every iteration is timed inside the JVM around the call of Work.iteration(). With `--settle
//! N`, profiling goes on for N more iterations and one more window of K
//! before the detach (the settled overhead); sprig's results are reset
//! (SIGUSR1) just before that window, so the profile columns (calls, root
//! and charged times, charged/bare, share) then describe the settled
//! window, against a bare window timed after as many bare iterations.
//!
//! One file per role: `defs` (the workloads and their rows), `driver` (the
//! workload's JVM and its timed iterations), `plateau` (`--plateau`),
//! `sample` (one profiled window's figures), `run` (a workload's run and
//! its JSON rows), `table` (the table printed from them).

mod defs;
mod driver;
mod plateau;
mod run;
mod sample;
mod table;

pub use defs::{NAMES, OPT_IN_ROWS, RootDef, SKIPPED, WorkloadDef, define};
pub(crate) use driver::{iterate, iterate_stamped};
pub use driver::{start_jvm, start_jvm_with_env};
pub use run::run;
pub use table::print_table;
