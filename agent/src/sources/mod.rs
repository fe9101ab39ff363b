//! The sources of a session: each thing that observes the JVM (today the
//! entry/exit probes) is a [`Source`] with one lifecycle: `check` (can it
//! run in this JVM), `start`, `stop`, and a declaration of what it needs
//! from the session ([`Needs`]: JVMTI capabilities, JVMTI events, the
//! ring).
//!
//! The session keeps the sources it started in a [`Running`] list and
//! stops every one of them, last started first, on every way a session
//! ends (`session::teardown`). A source's capabilities are added when it
//! starts and given back when the session has stopped it; the events it
//! declares are switched off then. The capabilities every session's class
//! rewriting rests on (`Capabilities::CLASS_REWRITING`) belong to the
//! environment, which holds them for its life (`env`): a source never adds
//! or gives back those.
//!
//! The sources: `probes` (the entry/exit probes of the roots and what they
//! reveal), `stacks` (the JVMTI stack sampler), `cpu_timer` (stacks
//! from a per-thread CPU-time timer's signal, with AsyncGetCallTrace),
//! `locks` (the waits of `--locks`, from JVMTI's monitor events),
//! `sampled_alloc` (the JVM's allocation samples of `--alloc-interval`),
//! `live` (the tagged samples' frees and the collections of
//! `--alloc=live`) and
//! `threads` (the thread snapshots of `sprig threads`, taken as it
//! starts); `duty` is the turn loop of the measurement knobs two of them
//! have. Adding a source is one file
//! here that implements [`Source`], and the lines in `session` that start
//! it when `Start` asks for it.

pub mod cpu_timer;
mod duty;
pub mod edges;
pub mod live;
pub mod locks;
pub mod probes;
pub mod sampled_alloc;
pub mod stacks;
pub mod threads;

use crate::env::Agent;
use crate::error::step;
use crate::ffi::{Capabilities, Event, Jni};
use crate::ledger;

/// What a source needs from the session.
#[derive(Clone, Copy, Debug)]
pub struct Needs {
    /// Capabilities added when the source starts and given back when it
    /// stops (never one only one environment may hold unless the source
    /// cannot run without it).
    pub capabilities: Capabilities,
    /// JVMTI events the source enables while it runs; the session turns
    /// them off when it has stopped the source.
    pub events: &'static [Event],
    /// Whether the source writes into the event ring.
    pub ring: bool,
}

/// What the end of a session tells the sources and what they hand back.
#[derive(Debug, Default)]
pub struct Ending {
    /// The VM is dying: nothing is redefined any more.
    pub vm_death: bool,
    /// The class counters of the session (the probes' restore ends them).
    pub counters: ledger::Counters,
}

/// One thing that observes the JVM during a session.
pub trait Source: Send {
    /// A short name, for messages.
    fn name(&self) -> &'static str;

    /// What the source needs from the session.
    fn needs(&self) -> Needs;

    /// Whether the source can run in this JVM; `Err` says why not in one
    /// line. The default checks that its capabilities are potentially
    /// available.
    fn check(&self, agent: &Agent) -> Result<(), String> {
        let want = self.needs().capabilities;
        if want.is_empty() {
            return Ok(());
        }
        match agent.jvmti.potential_capabilities() {
            Ok(have) if want.within(have) => Ok(()),
            Ok(have) => Err(format!(
                "{}: this JVM cannot grant the JVMTI capabilities it needs ({})",
                self.name(),
                want.missing_from(have).join(", ")
            )),
            Err(e) => Err(format!("{}: GetPotentialCapabilities: {e}", self.name())),
        }
    }

    /// Starts the source (its capabilities are held already). `Err` says
    /// in one line why it could not; the session then ends, and this
    /// source's `stop` runs with the others'.
    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String>;

    /// Stops the source; runs once, on the thread that ends the session.
    fn stop(&mut self, agent: &'static Agent, jni: Jni<'_>, ending: &mut Ending);
}

/// The sources a session started, in the order it started them.
#[derive(Default)]
pub struct Running {
    sources: Vec<Box<dyn Source>>,
}

/// What the stopped sources leave to switch off: their events and the
/// capabilities they took.
#[derive(Debug, Default)]
pub struct Stopped {
    events: Vec<Event>,
    capabilities: Vec<Capabilities>,
}

impl Running {
    pub const fn new() -> Running {
        Running {
            sources: Vec::new(),
        }
    }

    /// Checks `source`, takes its capabilities and starts it. When the
    /// check or the capabilities fail the source is not kept; once it is
    /// starting it is kept, so that [`Running::stop_all`] stops it even
    /// when its start failed or panicked half-way.
    pub fn start(
        &mut self,
        agent: &'static Agent,
        jni: Jni<'_>,
        source: Box<dyn Source>,
    ) -> Result<(), String> {
        source.check(agent)?;
        let caps = source.needs().capabilities;
        agent
            .jvmti
            .add_capabilities(caps)
            .map_err(|e| format!("{}: AddCapabilities: {e}", source.name()))?;
        // Kept before it starts: a start that panics half-way is stopped
        // too, by the teardown the panic leads to.
        self.sources.push(source);
        match self.sources.last_mut() {
            Some(source) => source.start(agent, jni),
            None => Ok(()),
        }
    }

    /// The name of the last source started, if any.
    pub fn last_name(&self) -> Option<&'static str> {
        self.sources.last().map(|s| s.name())
    }

    /// Stops the last source started (one whose start failed, before
    /// another takes its place).
    pub fn stop_last(
        &mut self,
        agent: &'static Agent,
        jni: Jni<'_>,
        ending: &mut Ending,
    ) -> Stopped {
        let mut stopped = Stopped::default();
        self.stop_one(agent, jni, ending, &mut stopped);
        stopped
    }

    /// Stops every source, the last started first; a panic in one is
    /// caught and the others still stop. The list is empty after.
    pub fn stop_all(
        &mut self,
        agent: &'static Agent,
        jni: Jni<'_>,
        ending: &mut Ending,
    ) -> Stopped {
        let mut stopped = Stopped::default();
        while self.stop_one(agent, jni, ending, &mut stopped) {}
        stopped
    }

    /// Stops the last source started, if any (a panic in its `stop` is
    /// caught), and notes its events and capabilities in `stopped`.
    /// Whether there was one.
    fn stop_one(
        &mut self,
        agent: &'static Agent,
        jni: Jni<'_>,
        ending: &mut Ending,
        stopped: &mut Stopped,
    ) -> bool {
        let Some(mut source) = self.sources.pop() else {
            return false;
        };
        let needs = source.needs();
        step(source.name(), (), || source.stop(agent, jni, ending));
        stopped.events.extend_from_slice(needs.events);
        stopped.capabilities.push(needs.capabilities);
        true
    }
}

impl Stopped {
    /// Turns off the stopped sources' events and gives back their
    /// capabilities.
    pub fn release(self, agent: &Agent) {
        for event in self.events {
            let _ = agent.jvmti.set_event(event, false);
        }
        for caps in self.capabilities {
            let _ = agent.jvmti.relinquish_capabilities(caps);
        }
    }
}
