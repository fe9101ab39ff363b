//! The calling context tree builder, the profile model and the reports.
//!
//! - [`cct`]: [`CctBuilder`] turns ring events into per-thread calling
//!   context trees; snapshots and profile diffs live beside it.
//! - [`profile`]: the [`Profile`] model every report reads, with exact times
//!   (adjust-time and calibrated probe cost subtracted).
//! - [`report`]: views (tree, hot spots, back traces) and the text, JSON and
//!   collapsed renderers behind [`report::Render`].

#![forbid(unsafe_code)]
pub mod cct;
pub mod profile;
pub mod report;
pub mod stacks;

pub use cct::diff::{ProfileDiff, diff};
pub use cct::snapshot::SnapshotError;
pub use cct::{CctBuilder, PositionSample, StreamIssues};
pub use profile::{
    Calibration, CostFacts, Latency, LatencySummary, MethodInfo, Node, Profile, SampleCounts,
    Stats, Target, ThreadProfile, Times, Timing, Tree, WindowFacts, sample_bound_ns,
};
pub use report::{Format, Render, RenderOptions};
