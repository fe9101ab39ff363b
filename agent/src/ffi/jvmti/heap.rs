//! The heap: the sampling interval of sampled allocations, object tags,
//! an object's identity hash and size.

use super::{Jvmti, JvmtiError, check, jvmti_call};
use crate::ffi::jni::Local;
use jvmti_bindings::sys::jni::{jint, jlong};
use jvmti_bindings::sys::jvmti::jvmtiEnv;

impl Jvmti {
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
}
