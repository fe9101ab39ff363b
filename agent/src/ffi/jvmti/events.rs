//! The JVMTI events the agent uses (`Event`), the callback table's
//! registration and the switch of each event.

use super::{Jvmti, JvmtiError, check, jvmti_call};
use jvmti_bindings::sys::jni::{jint, jobject};
use jvmti_bindings::sys::jvmti::{self as sys, jvmtiEnv, jvmtiEventCallbacks};

/// JVMTI events the agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    VmInit,
    VmDeath,
    ClassFileLoadHook,
    ClassPrepare,
    MonitorContendedEnter,
    MonitorContendedEntered,
    MonitorWait,
    MonitorWaited,
    GarbageCollectionStart,
    GarbageCollectionFinish,
    /// Posted at nothing sprig does; enabled because HotSpot's
    /// AsyncGetCallTrace answers only while some environment has it on.
    ClassLoad,
    /// Posted at nothing sprig does; while it is on, C2 records which
    /// inlined method each instruction belongs to (as
    /// `-XX:+DebugNonSafepoints` does) in the code it compiles.
    CompiledMethodLoad,
    /// A thread starts (posted on the new thread before its run method).
    ThreadStart,
    /// A thread ends (posted on the ending thread after its run method).
    ThreadEnd,
    /// An allocation sampled by the JVM's heap sampler
    /// (SetHeapSamplingInterval), on the allocating thread.
    SampledObjectAlloc,
    /// A tagged object was freed (posted during or after a collection,
    /// on whatever thread the VM chooses: no JNI, no lock).
    ObjectFree,
}

impl Event {
    fn raw(self) -> sys::jvmtiEvent {
        match self {
            Event::VmInit => sys::JVMTI_EVENT_VM_INIT,
            Event::VmDeath => sys::JVMTI_EVENT_VM_DEATH,
            Event::ClassFileLoadHook => sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK,
            Event::ClassPrepare => sys::JVMTI_EVENT_CLASS_PREPARE,
            Event::MonitorContendedEnter => sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
            Event::MonitorContendedEntered => sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
            Event::MonitorWait => sys::JVMTI_EVENT_MONITOR_WAIT,
            Event::MonitorWaited => sys::JVMTI_EVENT_MONITOR_WAITED,
            Event::GarbageCollectionStart => sys::JVMTI_EVENT_GARBAGE_COLLECTION_START,
            Event::GarbageCollectionFinish => sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
            Event::ClassLoad => sys::JVMTI_EVENT_CLASS_LOAD,
            Event::CompiledMethodLoad => sys::JVMTI_EVENT_COMPILED_METHOD_LOAD,
            Event::ThreadStart => sys::JVMTI_EVENT_THREAD_START,
            Event::ThreadEnd => sys::JVMTI_EVENT_THREAD_END,
            Event::SampledObjectAlloc => sys::JVMTI_EVENT_SAMPLED_OBJECT_ALLOC,
            Event::ObjectFree => sys::JVMTI_EVENT_OBJECT_FREE,
        }
    }
}

impl Jvmti {
    /// Installs the event callback table.
    pub(in crate::ffi) fn set_event_callbacks(
        &self,
        cb: &jvmtiEventCallbacks,
    ) -> Result<(), JvmtiError> {
        let size = std::mem::size_of::<jvmtiEventCallbacks>() as jint;
        // SAFETY: `cb` is a fully initialised callbacks table of `size`
        // bytes; JVMTI copies it.
        unsafe { jvmti_call!(self.env, SetEventCallbacks, cb, size) }
    }

    /// Enables or disables an event for all threads.
    pub fn set_event(&self, event: Event, enabled: bool) -> Result<(), JvmtiError> {
        let mode = if enabled {
            sys::JVMTI_ENABLE
        } else {
            sys::JVMTI_DISABLE
        };
        let no_thread: jobject = std::ptr::null_mut();
        // SAFETY: SetEventNotificationMode takes (mode, event, thread, ...);
        // a null thread means all threads and no varargs are needed.
        unsafe {
            jvmti_call!(
                self.env,
                SetEventNotificationMode,
                mode,
                event.raw(),
                no_thread
            )
        }
    }
}
