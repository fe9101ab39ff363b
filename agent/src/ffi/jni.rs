//! Safe wrappers over the JNI function table and the invocation interface.

use jvmti_bindings::sys::jni::{
    JNIEnv, JNINativeMethod, JavaVM, JavaVMAttachArgs, jfieldID, jint, jmethodID, jobject, jvalue,
};
use jvmti_bindings::{jni_call, jvm_call};
use std::ffi::{CStr, CString, c_void};
use std::marker::PhantomData;

const JNI_OK: jint = 0;
const JNI_VERSION_1_8: jint = 0x0001_0008;

/// A JNI failure.
#[derive(Debug, thiserror::Error)]
pub enum JniError {
    #[error("{call} failed{}", if *.exception { " with a pending Java exception" } else { "" })]
    Call { call: &'static str, exception: bool },
    #[error("{call} returned {code}")]
    Code { call: &'static str, code: i32 },
    #[error("name contains a NUL byte")]
    Nul,
}

/// A local reference, valid in the JNI frame it was created in.
#[derive(Clone, Copy, Debug)]
pub struct Local<'a> {
    raw: jobject,
    _frame: PhantomData<&'a ()>,
}

impl Local<'_> {
    /// # Safety
    /// `raw` must be null or a local reference of the current thread.
    pub(super) unsafe fn from_raw(raw: jobject) -> Self {
        Local {
            raw,
            _frame: PhantomData,
        }
    }

    pub(super) fn raw(&self) -> jobject {
        self.raw
    }
}

/// A global reference, usable from every thread: the probe class (never
/// deleted) and the classes revelation may redefine (deleted at detach).
#[derive(Debug)]
pub struct Global {
    raw: jobject,
}

impl Global {
    /// The reference as a class argument for JNI/JVMTI calls on any
    /// attached thread (valid while `self` is not deleted).
    pub fn as_local(&self) -> Local<'_> {
        // SAFETY: a live global reference may be passed wherever a local
        // reference is expected; the borrow keeps it from being deleted
        // while the wrapper exists.
        unsafe { Local::from_raw(self.raw) }
    }
}

// SAFETY: JNI global references are valid in every thread until deleted.
unsafe impl Send for Global {}
// SAFETY: see `Send`; a global reference is an immutable handle.
unsafe impl Sync for Global {}

/// Something a static field can be read from or written to.
pub trait FieldOwner {
    fn class_raw(&self) -> jobject;
}

impl FieldOwner for Global {
    fn class_raw(&self) -> jobject {
        self.raw
    }
}

impl FieldOwner for Local<'_> {
    fn class_raw(&self) -> jobject {
        self.raw
    }
}

/// A static field id.
#[derive(Clone, Copy, Debug)]
pub struct FieldId(jfieldID);

// SAFETY: field ids are VM-global handles valid while the class is loaded;
// the probe class lives in the bootstrap loader and is never unloaded.
unsafe impl Send for FieldId {}
// SAFETY: see `Send`.
unsafe impl Sync for FieldId {}

/// One native method to bind.
pub struct NativeMethod {
    pub name: &'static CStr,
    pub signature: &'static CStr,
    pub(super) fn_ptr: *mut c_void,
}

/// The JNI environment of the current thread.
#[derive(Clone, Copy, Debug)]
pub struct Jni<'a> {
    env: *mut JNIEnv,
    _thread: PhantomData<&'a ()>,
}

impl<'a> Jni<'a> {
    /// # Safety
    /// `env` must be the JNIEnv of the calling thread.
    pub(super) unsafe fn from_raw(env: *mut JNIEnv) -> Jni<'a> {
        Jni {
            env,
            _thread: PhantomData,
        }
    }

    /// The raw environment, for the other wrappers of `ffi`.
    pub(super) fn raw_env(&self) -> *mut JNIEnv {
        self.env
    }

    /// The JNIEnv's address, as an identity of its thread (never
    /// dereferenced by the caller).
    pub fn env_addr(&self) -> usize {
        self.env as usize
    }

    /// Clears a pending exception; returns whether there was one.
    pub fn exception_clear(&self) -> bool {
        // SAFETY: `env` is this thread's JNIEnv.
        let pending = unsafe { jni_call!(self.env, ExceptionCheck) } != 0;
        if pending {
            // SAFETY: as above.
            unsafe { jni_call!(self.env, ExceptionClear) };
        }
        pending
    }

    fn fail(&self, call: &'static str) -> JniError {
        JniError::Call {
            call,
            exception: self.exception_clear(),
        }
    }

    /// Looks a class up by internal name through the caller's loader
    /// (the bootstrap or system loader for native threads); `None` when not
    /// found (the NoClassDefFoundError is cleared).
    pub fn find_class(&self, internal_name: &str) -> Result<Option<Local<'a>>, JniError> {
        let name = CString::new(internal_name).map_err(|_| JniError::Nul)?;
        // SAFETY: `name` is NUL-terminated; `env` is this thread's JNIEnv.
        let c = unsafe { jni_call!(self.env, FindClass, name.as_ptr()) };
        if c.is_null() {
            self.exception_clear();
            return Ok(None);
        }
        // SAFETY: FindClass returns a local reference of this thread.
        Ok(Some(unsafe { Local::from_raw(c) }))
    }

    /// Defines a class in the bootstrap loader.
    pub fn define_bootstrap_class(
        &self,
        internal_name: &str,
        bytes: &[u8],
    ) -> Result<Local<'a>, JniError> {
        let name = CString::new(internal_name).map_err(|_| JniError::Nul)?;
        let len = jint::try_from(bytes.len()).map_err(|_| JniError::Code {
            call: "DefineClass",
            code: -1,
        })?;
        // SAFETY: `name` is NUL-terminated, `bytes` is `len` readable bytes
        // that JNI copies; a null loader means the bootstrap loader.
        let c = unsafe {
            jni_call!(
                self.env,
                DefineClass,
                name.as_ptr(),
                std::ptr::null_mut(),
                bytes.as_ptr().cast(),
                len
            )
        };
        if c.is_null() {
            return Err(self.fail("DefineClass"));
        }
        // SAFETY: DefineClass returns a local reference of this thread.
        Ok(unsafe { Local::from_raw(c) })
    }

    /// Binds native methods of `class`.
    pub fn register_natives(
        &self,
        class: Local<'_>,
        methods: &[NativeMethod],
    ) -> Result<(), JniError> {
        let table: Vec<JNINativeMethod> = methods
            .iter()
            .map(|m| JNINativeMethod {
                name: m.name.as_ptr(),
                signature: m.signature.as_ptr(),
                fnPtr: m.fn_ptr,
            })
            .collect();
        // SAFETY: `table` holds valid NUL-terminated names/signatures and
        // function pointers with the matching JNI signatures (built by
        // `callbacks::probe_natives`); `class` is a live reference.
        let rc = unsafe {
            jni_call!(
                self.env,
                RegisterNatives,
                class.raw(),
                table.as_ptr(),
                table.len() as jint
            )
        };
        if rc != JNI_OK {
            self.exception_clear();
            return Err(JniError::Code {
                call: "RegisterNatives",
                code: rc,
            });
        }
        Ok(())
    }

    /// A global reference to `obj`.
    pub fn new_global(&self, obj: Local<'_>) -> Result<Global, JniError> {
        // SAFETY: `obj` is a live local reference of this thread.
        let g = unsafe { jni_call!(self.env, NewGlobalRef, obj.raw()) };
        if g.is_null() {
            return Err(self.fail("NewGlobalRef"));
        }
        Ok(Global { raw: g })
    }

    /// Deletes a global reference (the class it names may unload again).
    pub fn delete_global(&self, g: Global) {
        if !g.raw.is_null() {
            // SAFETY: `g` is a global reference created by `new_global` and
            // consumed here, so it is deleted exactly once.
            unsafe { jni_call!(self.env, DeleteGlobalRef, g.raw) };
        }
    }

    /// The superclass of a class (`None` for `java.lang.Object`,
    /// interfaces and primitives).
    pub fn superclass(&self, class: Local<'_>) -> Option<Local<'a>> {
        // SAFETY: `class` is a live class reference of this thread.
        let s = unsafe { jni_call!(self.env, GetSuperclass, class.raw()) };
        // SAFETY: GetSuperclass returns null or a new local reference.
        (!s.is_null()).then(|| unsafe { Local::from_raw(s) })
    }

    /// A new instance of `class` with no constructor run (JNI
    /// AllocObject); `None` (the exception cleared) when the class cannot
    /// be instantiated.
    pub fn alloc_object(&self, class: Local<'_>) -> Option<Local<'a>> {
        // SAFETY: `class` is a live class reference of this thread.
        let o = unsafe { jni_call!(self.env, AllocObject, class.raw()) };
        if o.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: AllocObject returned a new local reference.
        Some(unsafe { Local::from_raw(o) })
    }

    /// The length of an array.
    pub fn array_length(&self, array: Local<'_>) -> i32 {
        // SAFETY: the caller passes a live reference to an array.
        unsafe { jni_call!(self.env, GetArrayLength, array.raw()) }
    }

    /// Element `i` of the `Object[]` (or array of arrays) `array`; `None`
    /// for null, or out of bounds (the exception cleared).
    pub fn object_array_element(&self, array: Local<'_>, i: i32) -> Option<Local<'a>> {
        // SAFETY: the caller passes a live reference to an array of
        // references; a bad index raises an exception, cleared below.
        let e = unsafe { jni_call!(self.env, GetObjectArrayElement, array.raw(), i) };
        if e.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: GetObjectArrayElement returned a new local reference.
        Some(unsafe { Local::from_raw(e) })
    }

    /// Whether two references name the same object.
    pub fn is_same_object(&self, a: Local<'_>, b: Local<'_>) -> bool {
        // SAFETY: both are live references of this thread (or global ones).
        unsafe { jni_call!(self.env, IsSameObject, a.raw(), b.raw()) != 0 }
    }

    /// Deletes a local reference early (null is ignored).
    pub fn delete_local(&self, obj: Local<'_>) {
        if !obj.raw.is_null() {
            // SAFETY: `obj` is a local reference of this thread, deleted once.
            unsafe { jni_call!(self.env, DeleteLocalRef, obj.raw()) };
        }
    }

    /// The id of a static `int` field.
    pub fn static_int_field(&self, class: Local<'_>, name: &str) -> Result<FieldId, JniError> {
        let n = CString::new(name).map_err(|_| JniError::Nul)?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let f = unsafe {
            jni_call!(
                self.env,
                GetStaticFieldID,
                class.raw(),
                n.as_ptr(),
                c"I".as_ptr()
            )
        };
        if f.is_null() {
            return Err(self.fail("GetStaticFieldID"));
        }
        Ok(FieldId(f))
    }

    /// The id of a static field `name` of type `sig`, or `None` (the
    /// `NoSuchFieldError` cleared) when the class has no such field.
    pub fn find_static_field(&self, class: Local<'_>, name: &str, sig: &CStr) -> Option<FieldId> {
        let n = CString::new(name).ok()?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let f = unsafe {
            jni_call!(
                self.env,
                GetStaticFieldID,
                class.raw(),
                n.as_ptr(),
                sig.as_ptr()
            )
        };
        if f.is_null() {
            self.exception_clear();
            return None;
        }
        Some(FieldId(f))
    }

    /// The id of an instance field `name` of type `sig`, or `None` (the
    /// error cleared) when the class has no such field.
    pub fn find_field(&self, class: Local<'_>, name: &str, sig: &CStr) -> Option<FieldId> {
        let n = CString::new(name).ok()?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let f = unsafe { jni_call!(self.env, GetFieldID, class.raw(), n.as_ptr(), sig.as_ptr()) };
        if f.is_null() {
            self.exception_clear();
            return None;
        }
        Some(FieldId(f))
    }

    /// Reads a static `boolean` field (`field` must be one of `class`).
    pub fn static_boolean(&self, class: &impl FieldOwner, field: FieldId) -> bool {
        // SAFETY: the caller got `field` as a boolean field of `class`.
        unsafe { jni_call!(self.env, GetStaticBooleanField, class.class_raw(), field.0) != 0 }
    }

    /// Reads a static object field (`field` must be one of `class`).
    pub fn static_object(&self, class: &impl FieldOwner, field: FieldId) -> Option<Local<'a>> {
        // SAFETY: the caller got `field` as an object field of `class`.
        let o = unsafe { jni_call!(self.env, GetStaticObjectField, class.class_raw(), field.0) };
        // SAFETY: GetStaticObjectField returns a local reference or null.
        (!o.is_null()).then(|| unsafe { Local::from_raw(o) })
    }

    /// Reads an instance `boolean` field of `obj`.
    pub fn boolean_field(&self, obj: Local<'_>, field: FieldId) -> bool {
        // SAFETY: the caller got `field` as a boolean field of `obj`'s class.
        unsafe { jni_call!(self.env, GetBooleanField, obj.raw(), field.0) != 0 }
    }

    /// Reads an instance object field of `obj` (`None` for null). No Java
    /// code runs and nothing blocks.
    pub fn object_field(&self, obj: Local<'_>, field: FieldId) -> Option<Local<'a>> {
        // SAFETY: the caller got `field` as an object field of `obj`'s
        // class (or a superclass of it) and `obj` is a live reference.
        let o = unsafe { jni_call!(self.env, GetObjectField, obj.raw(), field.0) };
        // SAFETY: GetObjectField returns a local reference or null.
        (!o.is_null()).then(|| unsafe { Local::from_raw(o) })
    }

    /// Writes an instance `boolean` field of `obj`.
    pub fn set_boolean_field(&self, obj: Local<'_>, field: FieldId, value: bool) {
        // SAFETY: the caller got `field` as a boolean field of `obj`'s class.
        unsafe {
            jni_call!(
                self.env,
                SetBooleanField,
                obj.raw(),
                field.0,
                u8::from(value)
            )
        };
    }

    /// Reads a static `long` field (`field` must be one of `class`).
    pub fn static_long(&self, class: &impl FieldOwner, field: FieldId) -> i64 {
        // SAFETY: the caller got `field` as a long field of `class`.
        unsafe { jni_call!(self.env, GetStaticLongField, class.class_raw(), field.0) }
    }

    /// Writes a static `long` field (`field` must be one of `class`).
    pub fn set_static_long(&self, class: &impl FieldOwner, field: FieldId, value: i64) {
        // SAFETY: the caller got `field` as a long field of `class`.
        unsafe {
            jni_call!(
                self.env,
                SetStaticLongField,
                class.class_raw(),
                field.0,
                value
            )
        };
    }

    /// Writes a static `int` field (volatile fields get volatile semantics).
    pub fn set_static_int(&self, class: &impl FieldOwner, field: FieldId, value: i32) {
        // SAFETY: `field` is an int field id of `class` (both from the probe
        // class, which is never unloaded).
        unsafe {
            jni_call!(
                self.env,
                SetStaticIntField,
                class.class_raw(),
                field.0,
                value
            )
        };
    }

    /// Writes `values` into the `long[]` `array` from index `start`. An
    /// index out of bounds leaves a pending exception, which is cleared:
    /// returns false then.
    pub fn set_long_array_region(&self, array: Local<'_>, start: i32, values: &[i64]) -> bool {
        let Ok(len) = i32::try_from(values.len()) else {
            return false;
        };
        // SAFETY: `array` is a live reference to a long[] (the LIVE field
        // of an older sprig's probe class) and `values` holds `len` elements.
        unsafe {
            jni_call!(
                self.env,
                SetLongArrayRegion,
                array.raw(),
                start,
                len,
                values.as_ptr()
            )
        };
        !self.exception_clear()
    }

    /// Reads the `long[]` `array` from index `start` into `out`; false
    /// (the exception cleared) when out of bounds.
    pub fn long_array_region(&self, array: Local<'_>, start: i32, out: &mut [i64]) -> bool {
        let Ok(len) = i32::try_from(out.len()) else {
            return false;
        };
        // SAFETY: `array` is a live reference to a long[] (the probe
        // class's COUNTS) and `out` has room for `len` elements.
        unsafe {
            jni_call!(
                self.env,
                GetLongArrayRegion,
                array.raw(),
                start,
                len,
                out.as_mut_ptr()
            )
        };
        !self.exception_clear()
    }

    /// Writes `values` into the `int[]` `array` from index `start`; false
    /// (the exception cleared) when out of bounds.
    pub fn set_int_array_region(&self, array: Local<'_>, start: i32, values: &[i32]) -> bool {
        let Ok(len) = i32::try_from(values.len()) else {
            return false;
        };
        // SAFETY: `array` is a live reference to an int[] (the array behind
        // the probe class's INSIDE field) and `values` holds `len` elements.
        unsafe {
            jni_call!(
                self.env,
                SetIntArrayRegion,
                array.raw(),
                start,
                len,
                values.as_ptr()
            )
        };
        !self.exception_clear()
    }

    /// A new `Object[len]` of nulls; `None` (the exception cleared) when it
    /// cannot be allocated.
    pub fn new_object_array(&self, len: i32) -> Option<Local<'a>> {
        let object = self.find_class("java/lang/Object").ok()??;
        // SAFETY: `object` is a live reference to java.lang.Object's class;
        // a null initial element is allowed.
        let a = unsafe {
            jni_call!(
                self.env,
                NewObjectArray,
                len,
                object.raw(),
                std::ptr::null_mut()
            )
        };
        self.delete_local(object);
        if a.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: NewObjectArray returned a local reference.
        Some(unsafe { Local::from_raw(a) })
    }

    /// A new array of `len` elements of the type `allocs` codes as `kind`
    /// (0 `Object`, 1 boolean, 2 byte, 3 char, 4 short, 5 int, 6 float,
    /// 7 long, 8 double); `None` (the exception cleared) when it cannot be
    /// allocated or the code names no type.
    pub fn new_array(&self, kind: u8, len: i32) -> Option<Local<'a>> {
        if kind == 0 {
            return self.new_object_array(len);
        }
        // SAFETY: each is the JNI function that makes a primitive array of
        // `len` elements; a negative length or no memory raises an
        // exception (cleared below) and returns null.
        let a = unsafe {
            match kind {
                1 => jni_call!(self.env, NewBooleanArray, len),
                2 => jni_call!(self.env, NewByteArray, len),
                3 => jni_call!(self.env, NewCharArray, len),
                4 => jni_call!(self.env, NewShortArray, len),
                5 => jni_call!(self.env, NewIntArray, len),
                6 => jni_call!(self.env, NewFloatArray, len),
                7 => jni_call!(self.env, NewLongArray, len),
                8 => jni_call!(self.env, NewDoubleArray, len),
                _ => return None,
            }
        };
        if a.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: the call returned a new local reference.
        Some(unsafe { Local::from_raw(a) })
    }

    /// Writes a static object field of `class`.
    pub fn set_static_object(&self, class: &impl FieldOwner, field: FieldId, value: Local<'_>) {
        // SAFETY: the caller got `field` as a static field of `class` whose
        // type `value` is an instance of (the probe class's RECEIVERS or REFLECTED and an
        // Object[]); both references are live.
        unsafe {
            jni_call!(
                self.env,
                SetStaticObjectField,
                class.class_raw(),
                field.0,
                value.raw()
            )
        };
    }

    /// Sets a static object field of `class` to null.
    pub fn clear_static_object(&self, class: &impl FieldOwner, field: FieldId) {
        // SAFETY: the caller got `field` as a static field of `class` of an
        // object type; null is storable in any such field.
        unsafe {
            jni_call!(
                self.env,
                SetStaticObjectField,
                class.class_raw(),
                field.0,
                std::ptr::null_mut()
            )
        };
    }

    /// Sets elements `0..len` of the `Object[]` `array` to null; false (the
    /// exception cleared) when out of bounds.
    pub fn clear_object_array(&self, array: Local<'_>, len: i32) -> bool {
        for i in 0..len {
            // SAFETY: `array` is a live reference to an Object[] (the array
            // behind the probe class's RECEIVERS field); null is storable in it.
            unsafe {
                jni_call!(
                    self.env,
                    SetObjectArrayElement,
                    array.raw(),
                    i,
                    std::ptr::null_mut()
                )
            };
            if self.exception_clear() {
                return false;
            }
        }
        true
    }

    /// Runs `f` inside a fresh local frame, so the local references it
    /// creates are released at the end.
    pub fn with_local_frame<R>(&self, capacity: usize, f: impl FnOnce(Jni<'_>) -> R) -> R {
        let cap = jint::try_from(capacity.max(16)).unwrap_or(jint::MAX);
        // SAFETY: `env` is this thread's JNIEnv.
        let pushed = unsafe { jni_call!(self.env, PushLocalFrame, cap) } == JNI_OK;
        if !pushed {
            self.exception_clear();
        }
        let out = f(*self);
        if pushed {
            // SAFETY: pops the frame pushed above.
            unsafe { jni_call!(self.env, PopLocalFrame, std::ptr::null_mut()) };
        }
        out
    }

    /// Runs `f` while this thread holds the monitor of `object` (JNI
    /// `MonitorEnter`/`MonitorExit`, the monitor Java's `synchronized`
    /// takes); `None` when the monitor could not be entered. Only short,
    /// non-blocking work belongs in `f`: other threads wait for it.
    pub fn with_monitor<R>(&self, object: Local<'_>, f: impl FnOnce() -> R) -> Option<R> {
        // SAFETY: `object` is a live reference of this thread.
        if unsafe { jni_call!(self.env, MonitorEnter, object.raw()) } != JNI_OK {
            self.exception_clear();
            return None;
        }
        // Exits the monitor on every path out of `f`, a panic included.
        struct Exit(*mut JNIEnv, jobject);
        impl Drop for Exit {
            fn drop(&mut self) {
                // SAFETY: this thread's JNIEnv; this thread entered the
                // monitor of this live object above and exits it once.
                unsafe { jni_call!(self.0, MonitorExit, self.1) };
            }
        }
        let _exit = Exit(self.env, object.raw());
        Some(f())
    }

    /// The module of `class` (JNI `GetModule`).
    pub fn module_of(&self, class: Local<'_>) -> Option<Local<'a>> {
        // SAFETY: `class` is a live class reference of this thread.
        let m = unsafe { jni_call!(self.env, GetModule, class.raw()) };
        if m.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: GetModule returns a local reference of this thread.
        Some(unsafe { Local::from_raw(m) })
    }

    /// The thread id of a `java.lang.Thread`: its `tid` field, what
    /// `threadId()` returns (final, JDK 19+) and what the probe class reads.
    /// Not `getId()`, which a subclass may override to answer anything.
    pub fn thread_id(&self, thread: Local<'_>) -> Option<u64> {
        // `java.lang.Thread` is a boot class, never unloaded: its field id
        // stays valid for the life of the JVM, so it is looked up once (a
        // thread's first root call paid for the class and field lookups).
        static TID: std::sync::OnceLock<FieldId> = std::sync::OnceLock::new();
        let field = match TID.get() {
            Some(f) => *f,
            None => {
                let f = self.thread_id_field()?;
                let _ = TID.set(f);
                f
            }
        };
        Some(self.thread_id_by(thread, field))
    }

    /// The `long tid` field of `java.lang.Thread`, for [`Jni::thread_id_by`]
    /// (a thread that reads many ids looks the field up once).
    pub fn thread_id_field(&self) -> Option<FieldId> {
        let class = self.find_class("java/lang/Thread").ok()??;
        let field = self.find_field(class, "tid", c"J");
        // SAFETY: `class` is a local reference created above.
        unsafe { jni_call!(self.env, DeleteLocalRef, class.raw()) };
        field
    }

    /// A thread's id ([`Jni::thread_id`]) through the field
    /// [`Jni::thread_id_field`] returned.
    pub fn thread_id_by(&self, thread: Local<'_>, tid: FieldId) -> u64 {
        // SAFETY: `thread` is a live `java.lang.Thread` of this thread's
        // frame and `tid` the `long tid` field of `java.lang.Thread`.
        let id = unsafe { jni_call!(self.env, GetLongField, thread.raw(), tid.0) };
        id as u64
    }

    /// The method a `java.lang.reflect.Method` or `Constructor` object
    /// reflects (`None` for anything else or a pending exception).
    pub fn reflected_method(&self, method: Local<'_>) -> Option<MethodId> {
        if method.raw.is_null() {
            return None;
        }
        // SAFETY: `method` is a live local reference of this thread.
        let mid = unsafe { jni_call!(self.env, FromReflectedMethod, method.raw()) };
        if self.exception_clear() || mid.is_null() {
            return None;
        }
        Some(MethodId(mid))
    }

    /// The id of the static method `name` with descriptor `sig` of `class`
    /// (the `NoSuchMethodError` of a missing one is cleared).
    fn static_method_id(
        &self,
        class: Local<'_>,
        name: &str,
        sig: &CStr,
    ) -> Result<jmethodID, JniError> {
        let n = CString::new(name).map_err(|_| JniError::Nul)?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let mid = unsafe {
            jni_call!(
                self.env,
                GetStaticMethodID,
                class.raw(),
                n.as_ptr(),
                sig.as_ptr()
            )
        };
        if mid.is_null() {
            return Err(self.fail("GetStaticMethodID"));
        }
        Ok(mid)
    }

    /// The id of the instance method `name` with descriptor `sig` of
    /// `class` (the `NoSuchMethodError` of a missing one is cleared).
    pub fn method_id(
        &self,
        class: Local<'_>,
        name: &str,
        sig: &CStr,
    ) -> Result<MethodId, JniError> {
        let n = CString::new(name).map_err(|_| JniError::Nul)?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let mid =
            unsafe { jni_call!(self.env, GetMethodID, class.raw(), n.as_ptr(), sig.as_ptr()) };
        if mid.is_null() {
            return Err(self.fail("GetMethodID"));
        }
        Ok(MethodId(mid))
    }

    /// Whether `class` has a static method `name` with descriptor `sig`.
    pub fn has_static_method(&self, class: Local<'_>, name: &str, sig: &CStr) -> bool {
        self.static_method_id(class, name, sig).is_ok()
    }

    /// Calls the static method `name` with descriptor `(I)V` of `class`
    /// with `arg`. A Java exception it throws is cleared and reported as
    /// an error.
    pub fn call_static_void_int(
        &self,
        class: Local<'_>,
        name: &str,
        arg: i32,
    ) -> Result<(), JniError> {
        let mid = self.static_method_id(class, name, c"(I)V")?;
        let args = [jvalue { i: arg }];
        // SAFETY: `mid` is a static `(I)V` method of `class`; `args` holds
        // exactly its one int argument.
        unsafe {
            jni_call!(
                self.env,
                CallStaticVoidMethodA,
                class.raw(),
                mid,
                args.as_ptr()
            )
        };
        if self.exception_clear() {
            return Err(JniError::Call {
                call: "CallStaticVoidMethodA",
                exception: true,
            });
        }
        Ok(())
    }
}

/// A method of a loaded class. Valid while its class is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MethodId(pub(super) jmethodID);

impl MethodId {
    /// The id's value, as an identity (never dereferenced).
    pub fn addr(&self) -> usize {
        self.0 as usize
    }

    /// The id whose [`MethodId::addr`] is `addr` (kept as a number where a
    /// raw pointer cannot go, such as a static shared by threads). The
    /// VM's method ids are never freed: one of an unloaded class makes
    /// JVMTI answer an error, not read freed memory.
    pub fn from_addr(addr: usize) -> MethodId {
        MethodId(addr as jmethodID)
    }
}

/// The Java VM (invocation interface).
#[derive(Clone, Copy, Debug)]
pub struct JavaVm {
    pub(super) raw: *mut JavaVM,
}

// SAFETY: the JavaVM pointer is process-global and valid for the life of
// the VM; its invocation functions may be called from any thread.
unsafe impl Send for JavaVm {}
// SAFETY: see `Send`.
unsafe impl Sync for JavaVm {}

impl JavaVm {
    /// # Safety
    /// `raw` must be the JavaVM pointer the VM passed to an agent entry point.
    pub unsafe fn from_raw(raw: *mut c_void) -> Option<JavaVm> {
        if raw.is_null() {
            None
        } else {
            Some(JavaVm { raw: raw.cast() })
        }
    }

    /// The JNIEnv of the calling thread if it is attached to the VM.
    pub fn current_jni(&self) -> Option<Jni<'_>> {
        let mut env: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer; `raw` is the live JavaVM.
        let rc = unsafe { jvm_call!(self.raw, GetEnv, &mut env, JNI_VERSION_1_8) };
        if rc != JNI_OK || env.is_null() {
            return None;
        }
        // SAFETY: GetEnv returned this thread's JNIEnv.
        Some(unsafe { Jni::from_raw(env.cast()) })
    }

    /// Attaches the calling native thread as a daemon named `name`; the
    /// guard detaches it when dropped.
    pub fn attach_daemon(&self, name: &str) -> Result<AttachedThread, JniError> {
        let cname = CString::new(name).map_err(|_| JniError::Nul)?;
        let mut args = JavaVMAttachArgs {
            version: JNI_VERSION_1_8,
            name: cname.as_ptr().cast_mut(),
            group: std::ptr::null_mut(),
        };
        let mut env: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer and attach arguments that outlive the
        // call (the VM copies the name).
        let rc = unsafe {
            jvm_call!(
                self.raw,
                AttachCurrentThreadAsDaemon,
                &mut env,
                (&mut args as *mut JavaVMAttachArgs).cast()
            )
        };
        if rc != JNI_OK || env.is_null() {
            return Err(JniError::Code {
                call: "AttachCurrentThreadAsDaemon",
                code: rc,
            });
        }
        Ok(AttachedThread {
            vm: *self,
            env: env.cast(),
            _not_send: PhantomData,
        })
    }
}

/// A native thread attached to the VM; detached on drop.
pub struct AttachedThread {
    vm: JavaVm,
    env: *mut JNIEnv,
    _not_send: PhantomData<*mut ()>,
}

impl AttachedThread {
    pub fn jni(&self) -> Jni<'_> {
        // SAFETY: `env` is this (attached) thread's JNIEnv until drop.
        unsafe { Jni::from_raw(self.env) }
    }
}

impl Drop for AttachedThread {
    fn drop(&mut self) {
        // SAFETY: this thread was attached by `attach_daemon` and holds no
        // Java frames at this point.
        unsafe { jvm_call!(self.vm.raw, DetachCurrentThread) };
    }
}
