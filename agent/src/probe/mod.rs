//! The probe runtime: what the natives of `sprig.rt.Probe` do. This is the
//! hot path of the profiler.
//!
//! Per thread (a `thread_local!` of plain cells, const-initialised): the
//! session generation the state belongs to, the root-context depth, a
//! reentrancy guard, the thread index and the ring producer. A state from
//! an older generation (an earlier attach) is reset on the thread's next
//! root entry and ignored by every other probe.
//!
//! Root probes open the root context at depth 0 (`RootEntry`), count as a
//! plain entry when nested; plain probes record only inside a root context.
//! An exit at depth 0 (an old frame finishing after a re-attach) is ignored.
//! The root natives tell the Java side when they open or close a context,
//! and it counts open contexts per thread-id slot (`Probe.INSIDE`): a plain
//! probe on a thread outside every root context then stops in Java even
//! while other threads are inside one (about 2 ns instead of a native call
//! of 11-20 ns on this machine kind, `sprig-bench --only probe`).
//!
//! On JDK 22+ the probe class calls the `fast_*` functions first (FFM
//! critical downcalls: no JNIEnv, no thread-state transition, so they must
//! never block); they handle the common cases and return `FAST_SLOW` for
//! everything that needs JNI, JVMTI or a wait, and the Java side then calls
//! the JNI native, which does the whole probe.
//!
//! Cost on this machine kind: one `rdtsc` is ~8.5 ns, a JNI call to an
//! empty native ~8 ns, a critical downcall ~2.3 ns. Summed, a pair would
//! take ~37 ns on the JNI path and ~22 ns on the FFM path; measured in
//! place they overlap to ~23 ns (JDK 17) and ~20 ns (JDK 25) a pair
//! (`sprig-bench --only probe`, 2026-11-25, 3651a5f). The thread's state is
//! reached through one `%fs`-relative load (`ffi::tls`), not the
//! `__tls_get_addr` call a `thread_local!` costs in a shared library
//! (which took 1.5-2 ns of the JNI pair).
//!
//! Every native path writes a record into the thread's segment one way:
//! `ThreadState::push` (or `try_push`, which never waits) in
//! [`record`], whose doc also says how the Java path writes the same
//! 16-byte record.
//!
//! Files from the ground up (each imports only files named before it):
//! `ring` (the session's ring, generation and switches), `state` (a
//! thread's cells), `record` (writing into the thread's segment),
//! `thread` (the thread-local state, registration, reset, `ThreadEnd`,
//! the private ring), `windows` (windows timing's silent root contexts
//! and the marks the stack sampler reads), `active` (the active-thread count and
//! `Probe.active`), `burst` (calibration bursts), `revelation` (first
//! calls, waits, `reflect`, `site`, charged-out work), `wait` (the waits
//! and garbage collection pauses of `--locks`, written as records), `fast`
//! (the FFM functions), `edges` (the call-edge bursts of `sprig sample
//! --edges`), `natives` (the JNI natives and `Natives`),
//! `session` (begin and end).

mod active;
mod burst;
pub mod edges;
mod fast;
mod natives;
mod record;
mod revelation;
mod ring;
mod session;
mod state;
mod thread;
mod wait;
mod windows;

#[cfg(test)]
mod tests;

pub use active::{counted_root_contexts_open, root_contexts_opened, settle_active};
pub use burst::{has_burst_class, set_burst_class, set_burst_every};
pub use natives::Natives;
pub use revelation::charged_out;
pub use ring::{lost_events, map_ring, retire_ring, ring_is_dead};
pub use session::{begin_session, end_session};
pub use thread::{silent_filter, with_private_ring};
pub use wait::{
    gc_finish, gc_start, sampled_alloc, wait_begin, wait_begin_on, wait_begin_owned, wait_end,
    wait_end_on,
};
pub use windows::{
    begin_tail, inside_before_and_after, marks, set_quota, set_settling, set_silent, tail_closed,
    tail_warmed,
};
