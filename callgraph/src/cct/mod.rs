//! The calling context tree builder: consumes ring events, keeps one shadow
//! stack per thread and adds up calls and ticks per calling context.
//!
//! No I/O: the caller hands over events (`wire::ring::Consumer::poll` gives
//! them per thread) and control messages, then takes a [`Profile`] with
//! [`CctBuilder::finish`] (or a live copy with [`CctBuilder::snapshot`]).
//!
//! Hot path per event: one match on the kind, one shadow-stack push or pop,
//! one child lookup through a per-node "last hit" cache, falling back to a
//! short sibling list and, for nodes with many children, a hash map.
//!
//! Adjust time is O(1) per event: every thread keeps a running sum of adjust
//! ticks, a frame remembers the sum at entry and takes the difference at
//! exit. Which frames a wait belongs to: a probe reads its timestamp, then
//! may wait for ring space; the ring writes the `AdjustTime` record just
//! before the event whose probe waited (wire `ring/mod.rs`, "Backpressure"). So
//! the wait came after that event's timestamp and is charged to the frames
//! open *after* that event: a waiting entry probe's wait is inside the new
//! frame, a waiting exit probe's wait is outside the frame it closed (but
//! inside its callers). An `AdjustTime` record marked
//! [`ADJUST_OPEN_FRAMES`] (work that ran before its probe read any
//! timestamp, or outside any probe: the class file load hook, revelation
//! before a reflective or watched call) is charged to the frames open when
//! it is read.
//!
//! Stream problems are data, not panics: entries outside a root context,
//! exits without entry, exits that do not match the top frame, frames still
//! open at thread end or at the end of profiling are counted and reported in
//! [`Profile::warnings`]; frames closed artificially are marked
//! [`Node::incomplete`](crate::profile::Node::incomplete).
//!
//! ```
//! use sprig_callgraph::report::Format;
//! use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
//! use sprig_wire::event::{Event, EventKind};
//!
//! let mut b = CctBuilder::new(1_000_000_000); // the ring header's ticks_per_sec
//! b.set_method(1, "com.acme.App", "run", "()V"); // or b.apply_message(&msg)
//! b.set_thread_name(0, 1, "main");
//! // what wire::ring::Consumer::poll hands over, per thread
//! b.process(0, &[Event::new(EventKind::RootEntry, 1, 100)]);
//! b.process(0, &[Event::new(EventKind::RootExit, 1, 350)]);
//! let live = b.snapshot(); // any time, the builder goes on
//! let mut profile = b.finish();
//! profile.stats.duration_ms = 1; // what only the CLI knows
//!
//! let mut out = Vec::new();
//! Format::Collapsed
//!     .renderer()
//!     .render(&profile, &RenderOptions::default(), &mut out)?;
//! assert_eq!(String::from_utf8_lossy(&out), "com.acme.App::run 250\n");
//!
//! let mut file = Vec::new();
//! profile.write_snapshot(&mut file)?;
//! assert_eq!(Profile::read_snapshot(&mut file.as_slice()).unwrap(), profile);
//! # assert_eq!(live.threads, profile.threads);
//! # Ok::<(), std::io::Error>(())
//! ```

//! # Sampled timing
//!
//! With [`CctBuilder::set_timing`]`(`[`Timing::Sampled`]`)` the probes
//! inside a root context write `ts = 0` in their `MethodEntry` and
//! `MethodExit` records (no clock read); `RootEntry`, `RootExit`,
//! `ThreadStart`, `ThreadEnd` and `AdjustTime` keep their meaning. Calls,
//! shape, incomplete calls and stream problems come out exactly as in
//! exact mode; inner nodes have no measured ticks. Time comes from
//! [`PositionSample`]s, the positions a thread beside the consumer reads with
//! `sprig_wire::ring::Region::positions`, each credited to the frame open
//! at its position once [`CctBuilder::process_run`] brings the thread's
//! stream there. Root calls keep their timestamps: each root node gets a
//! latency histogram of its complete calls, in both modes.
//!
//! ```
//! use sprig_callgraph::{CctBuilder, PositionSample, Timing};
//! use sprig_wire::event::{Event, EventKind};
//! use sprig_wire::ring::{Run, StreamPosition};
//!
//! let mut b = CctBuilder::new(1_000_000_000);
//! b.set_timing(Timing::Sampled);
//! // A position sample read thread 0 when it had published 2 events of the
//! // segment with claim number 7: the ring's StreamPosition, stamped with
//! // the reading's time and its weight (ticks since the previous reading).
//! let pos = StreamPosition { thread: 0, claim: 7, committed: 2, cpu: None };
//! b.add_samples(&[PositionSample::at(pos, 150, 100)]);
//! // What Consumer::poll_runs hands over: the root is timed, A is not.
//! let run = Run { thread: 0, claim: 7, start: 0 };
//! b.process_run(run, &[
//!     Event::new(EventKind::RootEntry, 1, 100),
//!     Event::new(EventKind::MethodEntry, 2, 0),
//!     Event::new(EventKind::MethodExit, 2, 0),
//!     Event::new(EventKind::RootExit, 1, 400),
//! ]);
//! let p = b.finish();
//! let tree = &p.threads[0].tree;
//! let times = p.times(tree);
//! assert_eq!((tree.nodes[1].calls, times[1].self_ns, times[1].self_samples), (1, 100, 1));
//! assert_eq!(p.latency_ns(&tree.nodes[0]).unwrap().max_ns, 300);
//! ```

pub mod diff;
pub mod snapshot;

mod arena;
mod builder;
mod burst;
mod credit;
mod issues;
mod live;
mod thread;
mod windows;

pub use builder::{CALIBRATION_SPREAD, CctBuilder, clock_name};
pub use credit::PositionSample;
pub use issues::StreamIssues;
pub use live::LiveTable;

#[cfg(test)]
mod sampled_tests;
#[cfg(test)]
mod tests;

const _: () = {
    const fn send<T: Send + Sync>() {}
    send::<CctBuilder>();
    send::<crate::profile::Profile>();
};
