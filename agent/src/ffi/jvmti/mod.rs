//! Safe wrappers over the JVMTI function table (jvmti-bindings' raw `sys`
//! table). Every call checks for a missing slot and maps the error code.
//!
//! This file holds the environment itself (`Jvmti`, made by
//! `JavaVm::new_jvmti`), the checked call (`jvmti_call!`), JVMTI's memory
//! (allocation, deallocation, its strings) and the VM's properties; one
//! file per further concern: `error` (`JvmtiError` and the codes' names),
//! `caps` (`Capabilities`, added, given back, listed), `events` (`Event`,
//! the callback table, enabling an event), `classes` (the class and method
//! queries, retransformation, module exports), `threads` (threads, their
//! stacks, their monitors, their CPU time), `heap` (heap sampling, tags,
//! object hashes and sizes).

use super::jni::JavaVm;
use jvmti_bindings::jvm_call;
use jvmti_bindings::sys::jni::jint;
use jvmti_bindings::sys::jvmti::{self as sys, jvmtiEnv};
use std::ffi::{CStr, CString, c_char, c_void};

mod caps;
mod classes;
mod error;
mod events;
mod heap;
mod threads;

pub use caps::Capabilities;
pub use error::JvmtiError;
pub use events::Event;
pub use threads::{ThreadStack, thread_state};

/// JVMTI version asked of GetEnv.
const JVMTI_VERSION_1_2: jint = 0x3001_0200;
/// JVMTI version asked of GetEnv for virtual threads (JDK 21's).
pub(super) const JVMTI_VERSION_21: jint = 0x3015_0000;
/// GetEnv's success.
const JNI_OK: jint = 0;

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
