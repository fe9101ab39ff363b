//! The entry/exit probes as a source: the roots' classes rewritten with
//! probes (and, with revelation on, what they call), every class put back
//! at the end. The probe runtime itself (`probe`), the ring and the
//! calibration are the session's: a calibration-only session runs them
//! without this source.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::error::{inject_fault, step};
use crate::ffi::{Capabilities, Event, Jni};
use crate::frames;
use crate::instrument;
use crate::ledger;
use crate::outbox;
use crate::probe_class;
use crate::reveal;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::Message;

/// The probes of one session's roots.
pub struct Probes {
    /// The root patterns, handed to the ledger at the start.
    patterns: Option<Vec<MethodPattern>>,
    /// The turns' thread of the measurement knob `exact-alloc-duty`.
    duty: Option<super::stacks::Running>,
}

impl Probes {
    /// The class rewriting capabilities are the environment's
    /// (`Capabilities::CLASS_REWRITING`, held for its life): nothing more.
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities::NONE,
        // The class file load hook; class prepare when revelation watches
        // classes linked late.
        events: &[Event::ClassFileLoadHook, Event::ClassPrepare],
        ring: true,
    };

    pub fn new(patterns: Vec<MethodPattern>) -> Probes {
        Probes {
            patterns: Some(patterns),
            duty: None,
        }
    }
}

impl Source for Probes {
    fn name(&self) -> &'static str {
        "probes"
    }

    fn needs(&self) -> Needs {
        Probes::NEEDS
    }

    /// Notes what runs now (before any class is redefined), arms the roots,
    /// turns the class file load hook on and instruments the loaded classes
    /// that match, telling the CLI what each pattern found.
    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String> {
        frames::begin_session(&agent.jvmti, jni);
        reveal::spare_loops(frames::running_loops());
        ledger::begin_session(self.patterns.take().unwrap_or_default());
        instrument::begin_session(&agent.jvmti)
            .map_err(|e| format!("cannot enable the class file load hook: {e}"))?;
        let report = instrument::instrument_loaded(&agent.jvmti, jni);
        for (pattern, methods) in report.instrumented {
            outbox::send(Message::RootInstrumented { pattern, methods });
        }
        for pattern in report.failed {
            outbox::send(Message::Warning(format!(
                "root {pattern}: no matching class could be instrumented (see the class \
                 failures); it stays armed for classes loaded later"
            )));
        }
        for (pattern, class_loaded, suggestions) in report.not_found {
            outbox::send(Message::RootNotFound {
                pattern,
                class_loaded,
                suggestions,
            });
        }
        if crate::allocs::on() && crate::error::fault_named("exact-alloc-duty") {
            // A measurement knob: the exact allocation probes record in
            // even turns only (their cost within one session).
            super::duty::start(agent, "sprig-exact-alloc-duty", &mut self.duty, {
                let mut said = false;
                move |jni, on| {
                    if !crate::allocs::set_paused(jni, !on) && !std::mem::replace(&mut said, true) {
                        eprintln!(
                            "sprig agent: exact-alloc-duty: the probe class an older sprig \
                                 defined cannot pause its allocation probes"
                        );
                    }
                }
            })?;
        }
        Ok(())
    }

    /// The probes are silent already (`probe::end_session`): says how many
    /// roots ran on virtual threads unprofiled, restores every class (under
    /// revelation's quiesce) and names the frames left on old method
    /// versions. Each step runs even when one before it panicked.
    fn stop(&mut self, agent: &'static Agent, jni: Jni<'_>, ending: &mut Ending) {
        step("the exact-alloc-duty knob", (), || {
            if self.duty.is_some() {
                super::stacks::stop_thread(self.duty.take());
                crate::allocs::set_paused(jni, false);
            }
        });
        step("the virtual-thread count", (), || {
            let on_virtual = probe_class::virtual_roots(jni);
            if on_virtual > 0 {
                outbox::send(Message::Warning(format!(
                    "{on_virtual} root call{} ran on virtual threads and {} not profiled: this \
                     JVM's virtual threads cannot be followed from carrier to carrier",
                    if on_virtual == 1 { "" } else { "s" },
                    if on_virtual == 1 { "was" } else { "were" },
                )));
            }
        });
        let vm_death = ending.vm_death;
        let (counters, redefined) = step(
            "the restore",
            (ledger::Counters::default(), Default::default()),
            || {
                let serial = reveal::quiesce();
                let restored = if vm_death {
                    (ledger::counters(), Default::default())
                } else {
                    instrument::restore_all(&agent.jvmti, jni)
                };
                drop(serial);
                restored
            },
        );
        ending.counters = counters;
        step("frames::end_session", (), || {
            inject_fault("teardown");
            // Frames the redefinitions left on old method versions.
            if !redefined.is_empty() {
                let stale = frames::left_on_old_versions(&agent.jvmti, jni, &redefined);
                if let Some(w) = frames::warning(&stale) {
                    outbox::send(Message::Warning(w));
                }
            }
            frames::end_session();
        });
    }
}
