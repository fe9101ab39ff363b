//! Threads and their stacks: every thread's stack at one safepoint, one
//! thread's own or another's frames, a monitor's owner, a thread's CPU
//! time, name and daemon flag.

use super::{Jvmti, JvmtiError, JvmtiStr, check, jvmti_call};
use crate::ffi::jni::{Jni, Local, MethodId};
use jvmti_bindings::sys::jni::{jint, jobject};
use jvmti_bindings::sys::jvmti::{self as sys, jvmtiEnv, jvmtiThreadInfo};

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

impl Jvmti {
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
    pub(in crate::ffi) fn each_stack(
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
