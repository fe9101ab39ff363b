//! Revelation on a probing thread: first calls and the waits for another
//! thread's, dormant methods entered inside a root context, the
//! `reflect` and `site` natives, and profiler work charged out of the
//! frames (`revealing`, `charged_out`) as `AdjustTime`.

use super::state::ThreadState;
use super::thread::with_state;
use crate::ffi::Jni;
use crate::methods;
use crate::reveal;
use sprig_wire::{Event, EventKind};

/// A method with dormant probes entered inside a root context: revealed
/// and activated on this thread before its entry is recorded (the time
/// goes out as `AdjustTime`, like a first call's), so every call of it
/// inside a root context is recorded: a thread inside it now entered it
/// while it was dormant only outside any root context, and records none of
/// that frame. Returns whether the entry is to be recorded; an id it could
/// not activate is not tried again in this session (an id past the
/// bitmap is never dormant).
#[cold]
#[inline(never)]
pub(super) fn enter_dormant(s: &ThreadState, id: u32, jni: Jni<'_>) -> bool {
    if !reveal::enabled() || methods::dormant_entry_refused(id) {
        reveal::count_dormant_passed();
        return false;
    }
    let Some(agent) = crate::env::get() else {
        return false;
    };
    // Two threads may enter it at once: the second finds it revealed.
    let active = revealing(s, Charge::OpenFrames, || {
        (true, reveal::entered(&agent.jvmti, jni, id))
    });
    if !active {
        methods::refuse_dormant_entry(id);
    }
    // The session may have ended while it revealed: nothing to record then.
    active && s.current()
}

/// `Probe.nReflect` and `Probe.nReflected`: `Method.invoke` or
/// `Constructor.newInstance` is about to run `method`. Inside a root
/// context the agent reveals (and instruments) the target on this thread
/// before the call proceeds, and the time goes out as `AdjustTime`,
/// charged to the frames open now. Returns whether the target is handed
/// over in the current session (now or before): the probe class then
/// remembers the object and sends its later calls here no more.
pub fn reflect(jni: Jni<'_>, method: crate::ffi::Local<'_>) -> bool {
    with_state(|s| {
        if s.depth() == 0 || s.busy.get() || !s.current() || !reveal::enabled() {
            return false;
        }
        let Some(mid) = jni.reflected_method(method) else {
            return false;
        };
        // A target handed over before costs nothing more (no JVMTI, no
        // clock, no lock).
        if reveal::reflective_target_seen(mid) {
            return true;
        }
        let Some(agent) = crate::env::get() else {
            return false;
        };
        revealing(s, Charge::OpenFrames, || {
            match reveal::reflective_call(&agent.jvmti, jni, mid) {
                Some(did) => (did, true),
                None => (false, false),
            }
        })
    })
    .unwrap_or(false)
}

/// Which frames the time of profiler work on a probing thread is taken
/// out of (wire `ADJUST_OPEN_FRAMES`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Charge {
    /// The frames open after the event the probe records next: the probe
    /// read that event's timestamp before the work (a first call's entry).
    NextEvent,
    /// The frames open now: the work ran before the probe read any
    /// timestamp (a reflective call, a watched call site, a dormant method
    /// switched on before its entry is stamped) or outside any probe (the
    /// class file load hook).
    OpenFrames,
}

impl Charge {
    fn adjust(self, spent: u64) -> Event {
        let e = Event::new(EventKind::AdjustTime, 0, spent);
        match self {
            Charge::NextEvent => e,
            Charge::OpenFrames => e.with_aux(sprig_wire::event::ADJUST_OPEN_FRAMES),
        }
    }
}

/// Runs revelation work `f` on this thread with the recursion guard set
/// (Java code it runs here records nothing), and records the time it took
/// as `AdjustTime` (charged as `charge` says) when `f` says it did (or
/// waited for) anything, so that no frame is charged for it.
pub(super) fn revealing<R>(s: &ThreadState, charge: Charge, f: impl FnOnce() -> (bool, R)) -> R {
    s.busy.set(true);
    // The Java probes of code run here record nothing either.
    s.close_slot();
    let t0 = s.now();
    let (worked, out) = f();
    let spent = s.now().saturating_sub(t0);
    s.busy.set(false);
    s.reopen_slot();
    // The session may have ended (and the next begun) while `f` ran: the
    // thread's producer belongs to the old ring then.
    if worked && spent > 0 && s.current() {
        s.push(charge.adjust(spent));
    }
    out
}

/// Runs profiler work `f` that a JVM event runs on the thread it happens
/// on (the class file load hook of a class the thread loads or defines, a
/// class being linked): on a thread inside a root context of this session,
/// its time goes out as `AdjustTime` charged to the frames open now, and
/// the recursion guard is set meanwhile (a redefinition it runs on this
/// thread passes the hook again, inside this charge). Any other thread,
/// or one already revealing (whose time is charged already), just runs `f`.
pub fn charged_out<R>(f: impl FnOnce() -> R) -> R {
    let inside = with_state(|s| {
        (s.depth() > 0 && !s.busy.get() && s.current()).then(|| {
            s.busy.set(true);
            // The Java probes of code run here record nothing either.
            s.close_slot();
            s.now()
        })
    })
    .flatten();
    let Some(t0) = inside else {
        return f();
    };
    let w0 = std::time::Instant::now();
    // Cleared even if `f` unwinds (every FFI boundary catches it).
    struct Unbusy;
    impl Drop for Unbusy {
        fn drop(&mut self) {
            let _ = with_state(|s| {
                s.busy.set(false);
                s.reopen_slot();
            });
        }
    }
    let unbusy = Unbusy;
    let out = f();
    drop(unbusy);
    reveal::count_charged_out(w0.elapsed().as_nanos() as u64);
    let _ = with_state(|s| {
        let spent = s.now().saturating_sub(t0);
        // The session may have ended meanwhile: its ring is gone then.
        if spent > 0 && s.current() {
            s.push(Charge::OpenFrames.adjust(spent));
        }
    });
    out
}

/// `Probe.nSite`: a receiver of class `receiver` is about to be called at
/// watched call site `site` (no class: a static or special site runs for
/// the first time). Inside a root context the agent instruments what the
/// call reaches (on this thread, before the call runs); the time goes out
/// as `AdjustTime` like a first call's. Returns [`SITE_SEEN`],
/// [`SITE_DONE`] or [`SITE_AGAIN`].
pub fn site(jni: Jni<'_>, site: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
    let r = site_on_thread(jni, site, receiver);
    reveal::count_site_call(r);
    r
}

fn site_on_thread(jni: Jni<'_>, site: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
    with_state(|s| {
        if s.depth() == 0 || s.busy.get() || !s.current() || !reveal::enabled() {
            return SITE_AGAIN;
        }
        let Some(agent) = crate::env::get() else {
            return SITE_AGAIN;
        };
        let done = revealing(s, Charge::OpenFrames, || {
            reveal::dispatched_call(&agent.jvmti, jni, site, receiver)
        });
        if done { SITE_DONE } else { SITE_SEEN }
    })
    .unwrap_or(SITE_AGAIN)
}

/// `nSite`: what the receiver's class reaches is instrumented; the Java
/// side remembers the class.
pub const SITE_SEEN: i32 = 0;
/// `nSite`: the site is watched no more.
pub const SITE_DONE: i32 = 1;
/// `nSite`: nothing was done (not inside a root context, the thread busy
/// revealing, no session): ask again next time.
pub const SITE_AGAIN: i32 = 2;

/// Longest a thread waits for another thread revealing the callees of a
/// method it is entering (past it, it goes on; a call may be missed).
pub(super) const FIRST_CALL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// An entry in a root context: the first call of `id` reveals its callees
/// (on this thread); a thread entering while another one reveals them
/// waits, so it never runs a callee whose probes are not in place yet.
/// Returns whether the entry may still be recorded: false when the
/// session ended while the thread revealed or waited (its producer
/// belongs to the ended session's ring, where it writes nothing more).
#[inline]
pub(super) fn check_first_call(s: &ThreadState, id: u32, jni: Jni<'_>) -> bool {
    match methods::claim_first_call(id) {
        methods::FirstCall::Done => true,
        methods::FirstCall::Mine => {
            // Done even if revealing unwinds: no thread may wait for
            // nothing on every entry.
            struct Done(u32);
            impl Drop for Done {
                fn drop(&mut self) {
                    methods::first_call_done(self.0);
                }
            }
            let _done = Done(id);
            reveal_first_call(s, id, jni);
            s.current()
        }
        methods::FirstCall::Pending => {
            await_first_call(s, id);
            s.current()
        }
    }
}

/// Waits (bounded) for the thread revealing the callees of `id`; the time
/// goes out as `AdjustTime`, like the revealing thread's.
#[cold]
#[inline(never)]
pub(super) fn await_first_call(s: &ThreadState, id: u32) {
    let t0 = s.now();
    if !methods::wait_first_call(id, FIRST_CALL_WAIT) {
        // Give up on this one for good rather than wait at every entry.
        methods::first_call_done(id);
    }
    let spent = s.now().saturating_sub(t0);
    // As in `revealing`: nothing through a producer of an ended session.
    if spent > 0 && s.current() {
        s.push(Event::new(EventKind::AdjustTime, 0, spent));
    }
}

/// The first call of `id` (in a root context): reveal its callees on this
/// thread, with the recursion guard set (Java code the redefinition runs
/// on this thread, e.g. class loading for verification, is not recorded),
/// and record the time as `AdjustTime` just before the entry event, so it
/// is charged to no frame.
#[cold]
#[inline(never)]
pub(super) fn reveal_first_call(s: &ThreadState, id: u32, jni: Jni<'_>) {
    if !reveal::enabled() {
        return;
    }
    let Some(agent) = crate::env::get() else {
        return;
    };
    revealing(s, Charge::NextEvent, || {
        (reveal::first_call(&agent.jvmti, jni, id), ())
    });
}
