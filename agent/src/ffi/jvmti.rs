//! Safe wrappers over the JVMTI function table (jvmti-bindings' raw `sys`
//! table). Every call checks for a missing slot and maps the error code.

use super::jni::{FieldOwner, Global, JavaVm, Jni, Local, MethodId};
use jvmti_bindings::jvm_call;
use jvmti_bindings::sys::jni::{jclass, jint, jlong, jmethodID, jobject};
use jvmti_bindings::sys::jvmti::{
    self as sys, jvmtiCapabilities, jvmtiEnv, jvmtiEventCallbacks, jvmtiThreadInfo,
};
use std::ffi::{CStr, CString, c_char, c_void};

/// JVMTI version asked of GetEnv.
const JVMTI_VERSION_1_2: jint = 0x3001_0200;
/// JVMTI version asked of GetEnv for virtual threads (JDK 21's).
pub(super) const JVMTI_VERSION_21: jint = 0x3015_0000;
/// GetEnv's success.
const JNI_OK: jint = 0;

/// A JVMTI error code, shown as `JVMTI_ERROR_NAME (n)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{} ({})", error_name(self.0), self.0)]
pub struct JvmtiError(pub i32);

impl JvmtiError {
    pub const NOT_AVAILABLE: JvmtiError = JvmtiError(98);
    pub const NULL_POINTER: JvmtiError = JvmtiError(100);
    pub const ILLEGAL_ARGUMENT: JvmtiError = JvmtiError(103);
}

/// The name of a JVMTI error code (`JVMTI_ERROR_...`).
pub fn error_name(code: i32) -> &'static str {
    match code {
        0 => "JVMTI_ERROR_NONE",
        10 => "JVMTI_ERROR_INVALID_THREAD",
        11 => "JVMTI_ERROR_INVALID_THREAD_GROUP",
        12 => "JVMTI_ERROR_INVALID_PRIORITY",
        13 => "JVMTI_ERROR_THREAD_NOT_SUSPENDED",
        14 => "JVMTI_ERROR_THREAD_SUSPENDED",
        15 => "JVMTI_ERROR_THREAD_NOT_ALIVE",
        20 => "JVMTI_ERROR_INVALID_OBJECT",
        21 => "JVMTI_ERROR_INVALID_CLASS",
        22 => "JVMTI_ERROR_CLASS_NOT_PREPARED",
        23 => "JVMTI_ERROR_INVALID_METHODID",
        24 => "JVMTI_ERROR_INVALID_LOCATION",
        25 => "JVMTI_ERROR_INVALID_FIELDID",
        26 => "JVMTI_ERROR_INVALID_MODULE",
        31 => "JVMTI_ERROR_NO_MORE_FRAMES",
        32 => "JVMTI_ERROR_OPAQUE_FRAME",
        34 => "JVMTI_ERROR_TYPE_MISMATCH",
        35 => "JVMTI_ERROR_INVALID_SLOT",
        40 => "JVMTI_ERROR_DUPLICATE",
        41 => "JVMTI_ERROR_NOT_FOUND",
        50 => "JVMTI_ERROR_INVALID_MONITOR",
        51 => "JVMTI_ERROR_NOT_MONITOR_OWNER",
        52 => "JVMTI_ERROR_INTERRUPT",
        60 => "JVMTI_ERROR_INVALID_CLASS_FORMAT",
        61 => "JVMTI_ERROR_CIRCULAR_CLASS_DEFINITION",
        62 => "JVMTI_ERROR_FAILS_VERIFICATION",
        63 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_ADDED",
        64 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_SCHEMA_CHANGED",
        65 => "JVMTI_ERROR_INVALID_TYPESTATE",
        66 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_HIERARCHY_CHANGED",
        67 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_DELETED",
        68 => "JVMTI_ERROR_UNSUPPORTED_VERSION",
        69 => "JVMTI_ERROR_NAMES_DONT_MATCH",
        70 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_MODIFIERS_CHANGED",
        71 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_METHOD_MODIFIERS_CHANGED",
        72 => "JVMTI_ERROR_UNSUPPORTED_REDEFINITION_CLASS_ATTRIBUTE_CHANGED",
        73 => "JVMTI_ERROR_UNSUPPORTED_OPERATION",
        79 => "JVMTI_ERROR_UNMODIFIABLE_CLASS",
        80 => "JVMTI_ERROR_UNMODIFIABLE_MODULE",
        98 => "JVMTI_ERROR_NOT_AVAILABLE",
        99 => "JVMTI_ERROR_MUST_POSSESS_CAPABILITY",
        100 => "JVMTI_ERROR_NULL_POINTER",
        101 => "JVMTI_ERROR_ABSENT_INFORMATION",
        102 => "JVMTI_ERROR_INVALID_EVENT_TYPE",
        103 => "JVMTI_ERROR_ILLEGAL_ARGUMENT",
        104 => "JVMTI_ERROR_NATIVE_METHOD",
        106 => "JVMTI_ERROR_CLASS_LOADER_UNSUPPORTED",
        110 => "JVMTI_ERROR_OUT_OF_MEMORY",
        111 => "JVMTI_ERROR_ACCESS_DENIED",
        112 => "JVMTI_ERROR_WRONG_PHASE",
        113 => "JVMTI_ERROR_INTERNAL",
        115 => "JVMTI_ERROR_UNATTACHED_THREAD",
        116 => "JVMTI_ERROR_INVALID_ENVIRONMENT",
        _ => "JVMTI_ERROR_UNKNOWN",
    }
}

pub(super) fn check(e: sys::jvmtiError) -> Result<(), JvmtiError> {
    match e.raw() {
        0 => Ok(()),
        code => Err(JvmtiError(code)),
    }
}

/// Calls a slot of the JVMTI function table; `Err(NOT_AVAILABLE)` when the
/// slot is empty. Must be used inside an `unsafe` block whose SAFETY comment
/// covers the arguments.
macro_rules! jvmti_call {
    ($env:expr, $f:ident $(, $a:expr)* $(,)?) => {{
        let env: *mut jvmtiEnv = $env;
        match (*(*env).functions).$f {
            Some(f) => check(f(env $(, $a)*)),
            None => Err(JvmtiError::NOT_AVAILABLE),
        }
    }};
}
pub(super) use jvmti_call;

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

/// One thread's stack as [`Jvmti::all_stack_traces`] saw it.
#[derive(Clone, Debug)]
pub struct ThreadStack {
    pub name: String,
    /// The `java.lang.Thread` object's identity hash.
    pub hash: i32,
    /// The method of each frame, innermost first.
    pub frames: Vec<MethodId>,
}

/// One thread in [`Jvmti::stack_samples`].
#[derive(Debug)]
pub struct StackSampled<'a> {
    /// The thread, a local reference of the sampling thread.
    pub thread: Local<'a>,
    /// JVMTI thread state bits (`JVMTI_THREAD_STATE_*`).
    pub state: u32,
    /// The method of each frame, innermost first.
    pub frames: Vec<MethodId>,
}

/// JVMTI thread state bits sprig reads.
pub mod thread_state {
    pub const RUNNABLE: u32 = 0x0004;
    pub const SLEEPING: u32 = 0x0040;
    pub const IN_OBJECT_WAIT: u32 = 0x0100;
    pub const PARKED: u32 = 0x0200;
    pub const BLOCKED_ON_MONITOR_ENTER: u32 = 0x0400;
    pub const IN_NATIVE: u32 = 0x40_0000;
}

/// One JVMTI environment. The agent keeps exactly one for the life of the
/// library and reuses it across attaches.
#[derive(Clone, Copy, Debug)]
pub struct Jvmti {
    env: *mut jvmtiEnv,
}

// SAFETY: a jvmtiEnv pointer stays valid until DisposeEnvironment (never
// called by this agent) and JVMTI functions may be called from any thread;
// functions that need an attached thread are only called from threads that
// hold a JNIEnv (the wrappers that need one take a `Jni`).
unsafe impl Send for Jvmti {}
// SAFETY: see `Send`; the environment has no Rust-side mutable state.
unsafe impl Sync for Jvmti {}

/// A JVMTI-allocated C string, deallocated on drop.
struct JvmtiStr<'e> {
    jvmti: &'e Jvmti,
    ptr: *mut c_char,
}

impl JvmtiStr<'_> {
    fn decode(&self) -> String {
        if self.ptr.is_null() {
            return String::new();
        }
        // SAFETY: JVMTI returned a NUL-terminated modified-UTF-8 string that
        // stays allocated until this guard deallocates it.
        let c = unsafe { CStr::from_ptr(self.ptr) };
        jvmti_bindings::mutf8::decode_cstr(c).unwrap_or_else(|_| c.to_string_lossy().into_owned())
    }
}

impl Drop for JvmtiStr<'_> {
    fn drop(&mut self) {
        self.jvmti.deallocate(self.ptr.cast());
    }
}

impl Jvmti {
    /// The raw environment, for `vthreads`.
    pub(super) fn raw(&self) -> *mut jvmtiEnv {
        self.env
    }

    /// # Safety
    /// `env` must be a live JVMTI environment pointer.
    pub(super) unsafe fn from_raw(env: *mut jvmtiEnv) -> Jvmti {
        Jvmti { env }
    }

    /// The raw environment, for the other wrappers of `ffi`.
    pub(super) fn raw_env(&self) -> *mut jvmtiEnv {
        self.env
    }

    pub(super) fn deallocate(&self, mem: *mut u8) {
        if mem.is_null() {
            return;
        }
        // SAFETY: `mem` was allocated by this JVMTI environment (returned by
        // a JVMTI function) and is released exactly once.
        let _ = unsafe { jvmti_call!(self.env, Deallocate, mem) };
    }

    /// Copies `bytes` into JVMTI-allocated memory (what the class file load
    /// hook must return).
    pub(super) fn allocate_copy(&self, bytes: &[u8]) -> Result<(*mut u8, jint), JvmtiError> {
        let len = jint::try_from(bytes.len()).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        let mut mem: *mut u8 = std::ptr::null_mut();
        // SAFETY: `mem` is a valid out pointer; Allocate writes a block of
        // `len` bytes into it or fails.
        unsafe { jvmti_call!(self.env, Allocate, len as i64, &mut mem)? };
        if mem.is_null() {
            return Err(JvmtiError::NULL_POINTER);
        }
        // SAFETY: `mem` points to `len` freshly allocated bytes that do not
        // overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem, bytes.len()) };
        Ok((mem, len))
    }

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

    /// The mean bytes between two sampled allocations (JVMTI
    /// SetHeapSamplingInterval; 0 samples every allocation).
    pub fn set_heap_sampling_interval(&self, bytes: i32) -> Result<(), JvmtiError> {
        // SAFETY: a plain value argument.
        unsafe { jvmti_call!(self.env, SetHeapSamplingInterval, bytes) }
    }

    /// Tags `object` with `tag` (JVMTI SetTag; 0 removes a tag).
    pub fn set_tag(&self, object: Local<'_>, tag: i64) -> Result<(), JvmtiError> {
        // SAFETY: `object` is a live local reference of the calling thread
        // (its `Local` borrows the callback's frame); `tag` is a value.
        unsafe { jvmti_call!(self.env, SetTag, object.raw(), tag) }
    }

    /// The capabilities this environment could add now (JVMTI
    /// GetPotentialCapabilities).
    pub fn potential_capabilities(&self) -> Result<Capabilities, JvmtiError> {
        let mut raw = jvmtiCapabilities::default();
        // SAFETY: `raw` is a valid out struct.
        unsafe { jvmti_call!(self.env, GetPotentialCapabilities, &mut raw)? };
        Ok(Capabilities::from_raw(&raw))
    }

    /// Installs the event callback table.
    pub(super) fn set_event_callbacks(&self, cb: &jvmtiEventCallbacks) -> Result<(), JvmtiError> {
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

    /// A VM system property (`java.vm.version`, ...).
    pub fn system_property(&self, name: &str) -> Result<String, JvmtiError> {
        let key = CString::new(name).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        let mut value: *mut c_char = std::ptr::null_mut();
        // SAFETY: `key` is NUL-terminated; `value` is a valid out pointer
        // that receives a JVMTI-allocated string.
        unsafe { jvmti_call!(self.env, GetSystemProperty, key.as_ptr(), &mut value)? };
        Ok(JvmtiStr {
            jvmti: self,
            ptr: value,
        }
        .decode())
    }

    /// Every loaded class, as local references in `jni`'s current frame.
    pub fn loaded_classes<'a>(&self, _jni: &Jni<'a>) -> Result<Vec<Local<'a>>, JvmtiError> {
        let mut count: jint = 0;
        let mut classes: *mut jclass = std::ptr::null_mut();
        // SAFETY: valid out pointers; the calling thread is attached (it
        // holds `_jni`), so the returned local references belong to it.
        unsafe { jvmti_call!(self.env, GetLoadedClasses, &mut count, &mut classes)? };
        let mut out = Vec::with_capacity(count.max(0) as usize);
        if !classes.is_null() {
            for i in 0..count.max(0) as usize {
                // SAFETY: JVMTI returned an array of `count` class references.
                let c = unsafe { *classes.add(i) };
                // SAFETY: `c` is a local reference owned by this thread.
                out.push(unsafe { Local::from_raw(c) });
            }
        }
        self.deallocate(classes.cast());
        Ok(out)
    }

    /// The JVM signature of a class (`Lpkg/Name;`, `[I`, `I`).
    pub fn class_signature(&self, class: Local<'_>) -> Result<String, JvmtiError> {
        let mut sig: *mut c_char = std::ptr::null_mut();
        // SAFETY: `class` is a live class reference; a null generic pointer
        // asks for no generic signature.
        unsafe {
            jvmti_call!(
                self.env,
                GetClassSignature,
                class.raw(),
                &mut sig,
                std::ptr::null_mut()
            )?
        };
        Ok(JvmtiStr {
            jvmti: self,
            ptr: sig,
        }
        .decode())
    }

    /// Whether RetransformClasses may change the class (false for hidden
    /// and VM-anonymous classes, arrays and primitives).
    pub fn is_modifiable(&self, class: Local<'_>) -> Result<bool, JvmtiError> {
        let mut b: u8 = 0;
        // SAFETY: `class` is a live class reference; `b` a valid out pointer.
        unsafe { jvmti_call!(self.env, IsModifiableClass, class.raw(), &mut b)? };
        Ok(b != 0)
    }

    /// The methods a class declares.
    pub fn class_methods(&self, class: Local<'_>) -> Result<Vec<MethodId>, JvmtiError> {
        let mut count: jint = 0;
        let mut methods: *mut jmethodID = std::ptr::null_mut();
        // SAFETY: `class` is a live class reference; valid out pointers.
        unsafe {
            jvmti_call!(
                self.env,
                GetClassMethods,
                class.raw(),
                &mut count,
                &mut methods
            )?
        };
        let mut out = Vec::with_capacity(count.max(0) as usize);
        if !methods.is_null() {
            for i in 0..count.max(0) as usize {
                // SAFETY: JVMTI returned an array of `count` method ids.
                out.push(MethodId(unsafe { *methods.add(i) }));
            }
        }
        self.deallocate(methods.cast());
        Ok(out)
    }

    /// A method's name and descriptor.
    pub fn method_name(&self, m: MethodId) -> Result<(String, String), JvmtiError> {
        let mut name: *mut c_char = std::ptr::null_mut();
        let mut sig: *mut c_char = std::ptr::null_mut();
        // SAFETY: `m` came from GetClassMethods of a class the caller still
        // references; valid out pointers, null generic pointer.
        unsafe {
            jvmti_call!(
                self.env,
                GetMethodName,
                m.0,
                &mut name,
                &mut sig,
                std::ptr::null_mut()
            )?
        };
        let name = JvmtiStr {
            jvmti: self,
            ptr: name,
        };
        let sig = JvmtiStr {
            jvmti: self,
            ptr: sig,
        };
        Ok((name.decode(), sig.decode()))
    }

    /// A method's access flags.
    pub fn method_modifiers(&self, m: MethodId) -> Result<i32, JvmtiError> {
        let mut mods: jint = 0;
        // SAFETY: `m` is a live method id; valid out pointer.
        unsafe { jvmti_call!(self.env, GetMethodModifiers, m.0, &mut mods)? };
        Ok(mods)
    }

    /// The bytecodes of a method as the VM currently holds them.
    pub fn bytecodes(&self, m: MethodId) -> Result<Vec<u8>, JvmtiError> {
        let mut len: jint = 0;
        let mut code: *mut u8 = std::ptr::null_mut();
        // SAFETY: `m` is a live method id; valid out pointers.
        unsafe { jvmti_call!(self.env, GetBytecodes, m.0, &mut len, &mut code)? };
        let out = if code.is_null() || len <= 0 {
            Vec::new()
        } else {
            // SAFETY: JVMTI returned `len` bytes at `code`.
            unsafe { std::slice::from_raw_parts(code, len as usize) }.to_vec()
        };
        self.deallocate(code);
        Ok(out)
    }

    /// Retransforms `classes` in one call (the class file load hook runs for
    /// each of them on this thread).
    pub fn retransform(&self, classes: &[Local<'_>]) -> Result<(), JvmtiError> {
        if classes.is_empty() {
            return Ok(());
        }
        let raw: Vec<jclass> = classes.iter().map(|c| c.raw()).collect();
        let n = jint::try_from(raw.len()).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        // SAFETY: `raw` holds `n` live class references of this thread.
        unsafe { jvmti_call!(self.env, RetransformClasses, n, raw.as_ptr()) }
    }

    /// Retransforms classes held by global references (any attached thread).
    pub fn retransform_globals(&self, classes: &[&Global]) -> Result<(), JvmtiError> {
        if classes.is_empty() {
            return Ok(());
        }
        let raw: Vec<jclass> = classes.iter().map(|c| c.class_raw()).collect();
        let n = jint::try_from(raw.len()).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        // SAFETY: `raw` holds `n` live global class references.
        unsafe { jvmti_call!(self.env, RetransformClasses, n, raw.as_ptr()) }
    }

    /// The interfaces a class declares directly, as local references.
    pub fn implemented_interfaces<'a>(
        &self,
        _jni: &Jni<'a>,
        class: Local<'_>,
    ) -> Result<Vec<Local<'a>>, JvmtiError> {
        let mut count: jint = 0;
        let mut ifaces: *mut jclass = std::ptr::null_mut();
        // SAFETY: `class` is a live class reference; valid out pointers; the
        // thread is attached (holds `_jni`), so the references are its own.
        unsafe {
            jvmti_call!(
                self.env,
                GetImplementedInterfaces,
                class.raw(),
                &mut count,
                &mut ifaces
            )?
        };
        let mut out = Vec::with_capacity(count.max(0) as usize);
        if !ifaces.is_null() {
            for i in 0..count.max(0) as usize {
                // SAFETY: JVMTI returned an array of `count` references, each
                // a local reference of this thread.
                out.push(unsafe { Local::from_raw(*ifaces.add(i)) });
            }
        }
        self.deallocate(ifaces.cast());
        Ok(out)
    }

    /// The class declaring `m`, as a local reference of this thread.
    pub fn method_declaring_class<'a>(
        &self,
        _jni: &Jni<'a>,
        m: MethodId,
    ) -> Result<Local<'a>, JvmtiError> {
        let mut class: jclass = std::ptr::null_mut();
        // SAFETY: `m` is a method id of a loaded class (from JNI
        // FromReflectedMethod of a live object); valid out pointer; the
        // thread is attached (holds `_jni`), so the reference is its own.
        unsafe { jvmti_call!(self.env, GetMethodDeclaringClass, m.0, &mut class)? };
        if class.is_null() {
            return Err(JvmtiError(23));
        }
        // SAFETY: a local reference JVMTI created for this thread.
        Ok(unsafe { Local::from_raw(class) })
    }

    /// The identity hash of a class's defining loader, 0 for the boot
    /// loader.
    pub fn class_loader_hash(&self, jni: &Jni<'_>, class: Local<'_>) -> Result<i32, JvmtiError> {
        let mut loader: jobject = std::ptr::null_mut();
        // SAFETY: `class` is a live class reference; valid out pointer. The
        // loader comes back as a local reference of this thread (or null
        // for the boot loader).
        unsafe { jvmti_call!(self.env, GetClassLoader, class.raw(), &mut loader)? };
        if loader.is_null() {
            return Ok(0);
        }
        // SAFETY: a local reference JVMTI created for this thread.
        let loader = unsafe { Local::from_raw(loader) };
        let hash = self.object_hash(loader);
        jni.delete_local(loader);
        hash
    }

    /// An object's identity hash code (the same for as long as it lives).
    pub fn object_hash(&self, obj: Local<'_>) -> Result<i32, JvmtiError> {
        let mut hash: jint = 0;
        // SAFETY: `obj` is a live reference; valid out pointer.
        unsafe { jvmti_call!(self.env, GetObjectHashCode, obj.raw(), &mut hash)? };
        Ok(hash)
    }

    /// The bytes an object takes in the heap, as the VM counts them
    /// (header, fields or elements, alignment; compact headers included).
    pub fn object_size(&self, obj: Local<'_>) -> Result<u64, JvmtiError> {
        let mut size: jlong = 0;
        // SAFETY: `obj` is a live reference; valid out pointer.
        unsafe { jvmti_call!(self.env, GetObjectSize, obj.raw(), &mut size)? };
        Ok(size.max(0) as u64)
    }

    /// A class's access flags (interface, abstract, public, final, ...).
    pub fn class_modifiers(&self, class: Local<'_>) -> Result<i32, JvmtiError> {
        let mut mods: jint = 0;
        // SAFETY: `class` is a live class reference; valid out pointer.
        unsafe { jvmti_call!(self.env, GetClassModifiers, class.raw(), &mut mods)? };
        Ok(mods)
    }

    /// Whether `m` is an obsolete method version: one a class redefinition
    /// replaced by different bytecodes while a frame still ran it.
    pub fn is_method_obsolete(&self, m: MethodId) -> Result<bool, JvmtiError> {
        let mut b: u8 = 0;
        // SAFETY: `m` is a method id from a stack trace taken by the caller
        // (its class is loaded while a frame runs it); valid out pointer.
        unsafe { jvmti_call!(self.env, IsMethodObsolete, m.0, &mut b)? };
        Ok(b != 0)
    }

    /// Every live thread's name, identity hash and up to `max_frames` of its
    /// frames (the method of each, innermost first): the walk of
    /// [`Jvmti::stack_samples`], each thread named and its reference
    /// deleted.
    pub fn all_stack_traces(
        &self,
        jni: &Jni<'_>,
        max_frames: i32,
    ) -> Result<Vec<ThreadStack>, JvmtiError> {
        let stacks = self.stack_samples(jni, max_frames)?;
        Ok(stacks
            .into_iter()
            .map(|st| {
                let name = self.thread_name(jni, st.thread).unwrap_or_default();
                let hash = self.object_hash(st.thread).unwrap_or(0);
                jni.delete_local(st.thread);
                ThreadStack {
                    name,
                    hash,
                    frames: st.frames,
                }
            })
            .collect())
    }

    /// Every live thread's state bits and up to `max_frames` of its frames
    /// (innermost first), with the thread as a local reference of the
    /// calling thread (the caller deletes it, or pops its local frame).
    /// One JVMTI GetAllStackTraces: the threads are walked at one
    /// safepoint.
    pub fn stack_samples<'a>(
        &self,
        _jni: &Jni<'a>,
        max_frames: i32,
    ) -> Result<Vec<StackSampled<'a>>, JvmtiError> {
        let mut out = Vec::new();
        self.each_stack(max_frames, |thread, state, frames| {
            out.push(StackSampled {
                // SAFETY: a local reference JVMTI created for this thread
                // (the calling thread is attached: it holds `_jni`).
                thread: unsafe { Local::from_raw(thread) },
                state,
                frames: frames.iter().map(|f| MethodId(f.method)).collect(),
            });
        })?;
        Ok(out)
    }

    /// The calling thread's innermost frames, at most `N` (JVMTI
    /// GetStackTrace on the current thread: a walk of its own stack, no
    /// safepoint), innermost first, and how many there were.
    pub fn own_frames<const N: usize>(
        &self,
        _jni: &Jni<'_>,
    ) -> Result<([Option<MethodId>; N], usize), JvmtiError> {
        // A null thread is the current thread, which is attached (it
        // holds `_jni`).
        let (buf, n) = self.stack_trace::<N>(std::ptr::null_mut())?;
        let mut out = [None; N];
        for (o, f) in out.iter_mut().zip(&buf[..n]) {
            *o = (!f.method.is_null()).then_some(MethodId(f.method));
        }
        Ok((out, n))
    }

    /// JVMTI GetStackTrace of `thread` (null: the calling thread), at most
    /// `N` frames, innermost first, and how many there are. `thread` must
    /// be null or a live thread reference of the attached calling thread.
    fn stack_trace<const N: usize>(
        &self,
        thread: jobject,
    ) -> Result<([sys::jvmtiFrameInfo; N], usize), JvmtiError> {
        let mut buf = [sys::jvmtiFrameInfo {
            method: std::ptr::null_mut(),
            location: 0,
        }; N];
        let mut count: jint = 0;
        let max = jint::try_from(N).unwrap_or(jint::MAX);
        // SAFETY: the callers pass null (the attached current thread) or a
        // live thread reference of the calling thread; `buf` holds `max`
        // frames and `count` is a valid out pointer.
        unsafe {
            jvmti_call!(
                self.env,
                GetStackTrace,
                thread,
                0,
                max,
                buf.as_mut_ptr(),
                &mut count
            )?
        };
        Ok((buf, (count.max(0) as usize).min(N)))
    }

    /// The thread that owns `object`'s monitor now, if any (JVMTI
    /// GetObjectMonitorUsage; needs `Capabilities::monitor_info`). HotSpot
    /// answers it in a VM operation: the caller waits for a safepoint,
    /// bounded as every safepoint is. The owner and the waiters come back
    /// as local references of the calling thread, in its current frame:
    /// callers run it inside [`Jni::with_local_frame`].
    pub fn monitor_owner<'a>(
        &self,
        _jni: &Jni<'a>,
        object: Local<'_>,
    ) -> Result<Option<Local<'a>>, JvmtiError> {
        let mut usage = sys::jvmtiMonitorUsage {
            owner: std::ptr::null_mut(),
            entry_count: 0,
            waiter_count: 0,
            waiters: std::ptr::null_mut(),
            notify_waiter_count: 0,
            notify_waiters: std::ptr::null_mut(),
        };
        // SAFETY: `object` is a live reference; `usage` a valid out struct;
        // the thread is attached (holds `_jni`), so the references JVMTI
        // returns are its locals.
        unsafe { jvmti_call!(self.env, GetObjectMonitorUsage, object.raw(), &mut usage)? };
        self.deallocate(usage.waiters.cast());
        self.deallocate(usage.notify_waiters.cast());
        // SAFETY: a local reference JVMTI created for this thread (or null).
        Ok((!usage.owner.is_null()).then(|| unsafe { Local::from_raw(usage.owner) }))
    }

    /// Another thread's innermost frames, at most `N`, innermost first
    /// (JVMTI GetStackTrace: HotSpot walks it in a handshake with that
    /// thread, which a thread in native or blocked code answers at once
    /// and a thread running Java at its next safepoint poll).
    pub fn thread_frames<const N: usize>(
        &self,
        _jni: &Jni<'_>,
        thread: Local<'_>,
    ) -> Result<Vec<MethodId>, JvmtiError> {
        // `thread` is a live thread reference of the attached calling
        // thread.
        let (buf, n) = self.stack_trace::<N>(thread.raw())?;
        Ok(buf[..n]
            .iter()
            .filter(|f| !f.method.is_null())
            .map(|f| MethodId(f.method))
            .collect())
    }

    /// One JVMTI GetAllStackTraces of up to `max_frames` frames a thread:
    /// `each` sees every live thread (a local reference of the calling
    /// thread, which must be attached), its state bits and its frames,
    /// innermost first. The JVMTI buffer is deallocated before it returns.
    pub(super) fn each_stack(
        &self,
        max_frames: i32,
        mut each: impl FnMut(jobject, u32, &[sys::jvmtiFrameInfo]),
    ) -> Result<(), JvmtiError> {
        let mut info: *mut sys::jvmtiStackInfo = std::ptr::null_mut();
        let mut count: jint = 0;
        // SAFETY: valid out pointers; the callers are attached threads
        // (they hold a `Jni`), so the thread references JVMTI returns are
        // their locals.
        unsafe {
            jvmti_call!(
                self.env,
                GetAllStackTraces,
                max_frames.max(0),
                &mut info,
                &mut count
            )?
        };
        if info.is_null() {
            return Ok(());
        }
        for i in 0..count.max(0) as usize {
            // SAFETY: JVMTI returned an array of `count` stack infos, each
            // with `frame_count` frames in the same allocation.
            let si = unsafe { *info.add(i) };
            let frames: &[sys::jvmtiFrameInfo] = if si.frame_buffer.is_null() {
                &[]
            } else {
                // SAFETY: see above; the buffer holds `frame_count` frames
                // and lives until the deallocation below.
                unsafe {
                    std::slice::from_raw_parts(si.frame_buffer, si.frame_count.max(0) as usize)
                }
            };
            each(si.thread, si.state as u32, frames);
        }
        // One allocation holds the infos and their frame buffers.
        self.deallocate(info.cast());
        Ok(())
    }

    /// The CPU time `thread` has used, in ns (JVMTI GetThreadCpuTime; needs
    /// `Capabilities::thread_cpu_time`).
    pub fn thread_cpu_time(&self, thread: Local<'_>) -> Result<u64, JvmtiError> {
        let mut ns: i64 = 0;
        // SAFETY: `thread` is a live thread reference; valid out pointer.
        unsafe { jvmti_call!(self.env, GetThreadCpuTime, thread.raw(), &mut ns)? };
        Ok(ns.max(0) as u64)
    }

    /// Every live platform thread, as local references in `jni`'s current
    /// frame.
    pub fn all_threads<'a>(&self, _jni: &Jni<'a>) -> Result<Vec<Local<'a>>, JvmtiError> {
        let mut count: jint = 0;
        let mut threads: *mut jobject = std::ptr::null_mut();
        // SAFETY: valid out pointers; the calling thread is attached (it
        // holds `_jni`), so the returned local references belong to it.
        unsafe { jvmti_call!(self.env, GetAllThreads, &mut count, &mut threads)? };
        let mut out = Vec::with_capacity(count.max(0) as usize);
        if !threads.is_null() {
            for i in 0..count.max(0) as usize {
                // SAFETY: JVMTI returned an array of `count` thread references.
                let t = unsafe { *threads.add(i) };
                // SAFETY: `t` is a local reference owned by this thread.
                out.push(unsafe { Local::from_raw(t) });
            }
        }
        self.deallocate(threads.cast());
        Ok(out)
    }

    /// A thread's name.
    pub fn thread_name(&self, jni: &Jni<'_>, thread: Local<'_>) -> Result<String, JvmtiError> {
        self.thread_info(jni, thread).map(|(name, _)| name)
    }

    /// A thread's name and whether it is a daemon.
    pub fn thread_info(
        &self,
        jni: &Jni<'_>,
        thread: Local<'_>,
    ) -> Result<(String, bool), JvmtiError> {
        let mut info = jvmtiThreadInfo::default();
        // SAFETY: `thread` is a live thread reference; `info` a valid out
        // struct.
        unsafe { jvmti_call!(self.env, GetThreadInfo, thread.raw(), &mut info)? };
        let name = JvmtiStr {
            jvmti: self,
            ptr: info.name,
        }
        .decode();
        // SAFETY: GetThreadInfo returns these as local references of this
        // thread; nothing else holds them.
        unsafe {
            jni.delete_local(Local::from_raw(info.thread_group));
            jni.delete_local(Local::from_raw(info.context_class_loader));
        }
        Ok((name, info.is_daemon != 0))
    }

    /// Exports package `package` (internal form, `jdk/internal/misc`) of
    /// the boot loader's module that holds it to module `to`, as
    /// `--add-exports` would (JVMTI GetNamedModule, AddModuleExports).
    pub fn export_boot_package(&self, package: &str, to: Local<'_>) -> Result<(), JvmtiError> {
        let pkg = CString::new(package).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        let mut module: jobject = std::ptr::null_mut();
        let boot: jobject = std::ptr::null_mut();
        // SAFETY: a null loader names the boot loader; `pkg` is
        // NUL-terminated; valid out pointer.
        unsafe { jvmti_call!(self.env, GetNamedModule, boot, pkg.as_ptr(), &mut module)? };
        if module.is_null() {
            return Err(JvmtiError::ILLEGAL_ARGUMENT);
        }
        // AddModuleExports takes the package's binary name (dots).
        let dotted =
            CString::new(package.replace('/', ".")).map_err(|_| JvmtiError::ILLEGAL_ARGUMENT)?;
        // SAFETY: `module` is the live module JVMTI just returned (a local
        // reference of this thread), `to` a live module reference; `dotted`
        // is NUL-terminated.
        unsafe {
            jvmti_call!(
                self.env,
                AddModuleExports,
                module,
                dotted.as_ptr(),
                to.raw()
            )
        }
    }

    /// The current thread's name and its `java.lang.Thread` object.
    pub fn current_thread<'a>(&self, jni: &Jni<'a>) -> Result<(String, Local<'a>), JvmtiError> {
        let mut thread: jobject = std::ptr::null_mut();
        // SAFETY: valid out pointer; the thread is attached (holds `jni`).
        unsafe { jvmti_call!(self.env, GetCurrentThread, &mut thread)? };
        // SAFETY: `thread` is a local reference owned by this thread.
        let thread = unsafe { Local::from_raw(thread) };
        Ok((self.thread_name(jni, thread)?, thread))
    }
}

impl JavaVm {
    /// A new JVMTI environment (version 1.2).
    pub fn new_jvmti(&self) -> Result<Jvmti, i32> {
        self.new_jvmti_of(JVMTI_VERSION_1_2)
    }

    /// A new JVMTI environment of `version`.
    pub(super) fn new_jvmti_of(&self, version: jint) -> Result<Jvmti, i32> {
        let mut env: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer; `raw` is the live JavaVM.
        let rc = unsafe { jvm_call!(self.raw, GetEnv, &mut env, version) };
        if rc != JNI_OK || env.is_null() {
            return Err(rc);
        }
        // SAFETY: GetEnv returned a live JVMTI environment.
        Ok(unsafe { Jvmti::from_raw(env.cast()) })
    }
}
