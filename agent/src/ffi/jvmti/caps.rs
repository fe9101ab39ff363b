//! The JVMTI capabilities sprig takes (`Capabilities`, named flags) and the
//! calls that add them, give them back and list those still to be had.

use super::{Jvmti, JvmtiError, check, jvmti_call};
use jvmti_bindings::sys::jvmti::{jvmtiCapabilities, jvmtiEnv};

/// The JVMTI capabilities sprig takes, as named flags (a subset of
/// `jvmtiCapabilities`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub retransform_classes: bool,
    pub redefine_classes: bool,
    pub get_bytecodes: bool,
    pub get_constant_pool: bool,
    pub all_class_hook_events: bool,
    /// GetThreadCpuTime of any thread.
    pub thread_cpu_time: bool,
    /// GetLineNumberTable.
    pub line_numbers: bool,
    /// The monitor events (contended enter and entered, wait and waited).
    pub monitor_events: bool,
    /// GarbageCollectionStart and GarbageCollectionFinish.
    pub gc_events: bool,
    /// GetObjectMonitorUsage (a contended monitor's owner).
    pub monitor_info: bool,
    /// CompiledMethodLoad events.
    pub compiled_method_load: bool,
    /// SampledObjectAlloc events (one environment at a time holds it).
    pub sampled_object_alloc: bool,
    /// SetTag and GetTag (`--alloc=live`).
    pub tag_objects: bool,
    /// ObjectFree events of tagged objects.
    pub object_free_events: bool,
}

impl Capabilities {
    pub const NONE: Capabilities = Capabilities {
        retransform_classes: false,
        redefine_classes: false,
        get_bytecodes: false,
        get_constant_pool: false,
        all_class_hook_events: false,
        thread_cpu_time: false,
        line_numbers: false,
        monitor_events: false,
        gc_events: false,
        monitor_info: false,
        compiled_method_load: false,
        sampled_object_alloc: false,
        tag_objects: false,
        object_free_events: false,
    };

    /// What rewriting classes needs: retransform, redefine, bytecodes,
    /// constant pool and all class hook events. Never the sampled
    /// allocation capability (only one environment may hold it).
    pub const CLASS_REWRITING: Capabilities = Capabilities {
        retransform_classes: true,
        redefine_classes: true,
        get_bytecodes: true,
        get_constant_pool: true,
        all_class_hook_events: true,
        thread_cpu_time: false,
        line_numbers: false,
        monitor_events: false,
        gc_events: false,
        monitor_info: false,
        compiled_method_load: false,
        sampled_object_alloc: false,
        tag_objects: false,
        object_free_events: false,
    };

    pub fn is_empty(self) -> bool {
        self == Capabilities::NONE
    }

    /// Whether every capability of `self` is in `other`.
    pub fn within(self, other: Capabilities) -> bool {
        (!self.retransform_classes || other.retransform_classes)
            && (!self.redefine_classes || other.redefine_classes)
            && (!self.get_bytecodes || other.get_bytecodes)
            && (!self.get_constant_pool || other.get_constant_pool)
            && (!self.all_class_hook_events || other.all_class_hook_events)
            && (!self.thread_cpu_time || other.thread_cpu_time)
            && (!self.line_numbers || other.line_numbers)
            && (!self.monitor_events || other.monitor_events)
            && (!self.gc_events || other.gc_events)
            && (!self.monitor_info || other.monitor_info)
            && (!self.compiled_method_load || other.compiled_method_load)
            && (!self.sampled_object_alloc || other.sampled_object_alloc)
            && (!self.tag_objects || other.tag_objects)
            && (!self.object_free_events || other.object_free_events)
    }

    /// The JVMTI names of the capabilities of `self` that `have` lacks.
    pub fn missing_from(self, have: Capabilities) -> Vec<&'static str> {
        [
            (
                self.retransform_classes && !have.retransform_classes,
                "can_retransform_classes",
            ),
            (
                self.redefine_classes && !have.redefine_classes,
                "can_redefine_classes",
            ),
            (
                self.get_bytecodes && !have.get_bytecodes,
                "can_get_bytecodes",
            ),
            (
                self.get_constant_pool && !have.get_constant_pool,
                "can_get_constant_pool",
            ),
            (
                self.all_class_hook_events && !have.all_class_hook_events,
                "can_generate_all_class_hook_events",
            ),
            (
                self.thread_cpu_time && !have.thread_cpu_time,
                "can_get_thread_cpu_time",
            ),
            (
                self.line_numbers && !have.line_numbers,
                "can_get_line_numbers",
            ),
            (
                self.monitor_events && !have.monitor_events,
                "can_generate_monitor_events",
            ),
            (
                self.gc_events && !have.gc_events,
                "can_generate_garbage_collection_events",
            ),
            (
                self.monitor_info && !have.monitor_info,
                "can_get_monitor_info",
            ),
            (
                self.compiled_method_load && !have.compiled_method_load,
                "can_generate_compiled_method_load_events",
            ),
            (
                self.sampled_object_alloc && !have.sampled_object_alloc,
                "can_generate_sampled_object_alloc_events",
            ),
            (self.tag_objects && !have.tag_objects, "can_tag_objects"),
            (
                self.object_free_events && !have.object_free_events,
                "can_generate_object_free_events",
            ),
        ]
        .into_iter()
        .filter_map(|(lacking, name)| lacking.then_some(name))
        .collect()
    }

    fn raw(self) -> jvmtiCapabilities {
        let mut caps = jvmtiCapabilities::default();
        caps.set_can_retransform_classes(self.retransform_classes);
        caps.set_can_redefine_classes(self.redefine_classes);
        caps.set_can_get_bytecodes(self.get_bytecodes);
        caps.set_can_get_constant_pool(self.get_constant_pool);
        caps.set_can_generate_all_class_hook_events(self.all_class_hook_events);
        caps.set_can_get_thread_cpu_time(self.thread_cpu_time);
        caps.set_can_get_line_numbers(self.line_numbers);
        caps.set_can_generate_monitor_events(self.monitor_events);
        caps.set_can_generate_garbage_collection_events(self.gc_events);
        caps.set_can_get_monitor_info(self.monitor_info);
        caps.set_can_generate_compiled_method_load_events(self.compiled_method_load);
        caps.set_can_generate_sampled_object_alloc_events(self.sampled_object_alloc);
        caps.set_can_tag_objects(self.tag_objects);
        caps.set_can_generate_object_free_events(self.object_free_events);
        caps
    }

    fn from_raw(raw: &jvmtiCapabilities) -> Capabilities {
        Capabilities {
            retransform_classes: raw.can_retransform_classes(),
            redefine_classes: raw.can_redefine_classes(),
            get_bytecodes: raw.can_get_bytecodes(),
            get_constant_pool: raw.can_get_constant_pool(),
            all_class_hook_events: raw.can_generate_all_class_hook_events(),
            thread_cpu_time: raw.can_get_thread_cpu_time(),
            line_numbers: raw.can_get_line_numbers(),
            monitor_events: raw.can_generate_monitor_events(),
            gc_events: raw.can_generate_garbage_collection_events(),
            monitor_info: raw.can_get_monitor_info(),
            compiled_method_load: raw.can_generate_compiled_method_load_events(),
            sampled_object_alloc: raw.can_generate_sampled_object_alloc_events(),
            tag_objects: raw.can_tag_objects(),
            object_free_events: raw.can_generate_object_free_events(),
        }
    }
}

impl Jvmti {
    /// Adds `caps` to this environment (JVMTI AddCapabilities).
    pub fn add_capabilities(&self, caps: Capabilities) -> Result<(), JvmtiError> {
        if caps.is_empty() {
            return Ok(());
        }
        let raw = caps.raw();
        // SAFETY: `raw` is a valid capabilities struct for the duration of
        // the call.
        unsafe { jvmti_call!(self.env, AddCapabilities, &raw) }
    }

    /// Gives `caps` back (JVMTI RelinquishCapabilities).
    pub fn relinquish_capabilities(&self, caps: Capabilities) -> Result<(), JvmtiError> {
        if caps.is_empty() {
            return Ok(());
        }
        let raw = caps.raw();
        // SAFETY: `raw` is a valid capabilities struct for the duration of
        // the call.
        unsafe { jvmti_call!(self.env, RelinquishCapabilities, &raw) }
    }

    /// The capabilities this environment could add now (JVMTI
    /// GetPotentialCapabilities).
    pub fn potential_capabilities(&self) -> Result<Capabilities, JvmtiError> {
        let mut raw = jvmtiCapabilities::default();
        // SAFETY: `raw` is a valid out struct.
        unsafe { jvmti_call!(self.env, GetPotentialCapabilities, &mut raw)? };
        Ok(Capabilities::from_raw(&raw))
    }
}
