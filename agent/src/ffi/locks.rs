//! The JVMTI and JNI calls of the thread snapshot (`sources::threads`):
//! stacks with each frame's location, line number tables, and Java
//! methods called through JNI by descriptor ([`JavaMethod`]: the
//! arguments checked against the descriptor at every call, the receiver
//! against the method's class), strings and object arrays. Every
//! reference these return is a local reference of the calling thread
//! (which must be attached); every JVMTI buffer is deallocated here.

use super::jni::{Jni, JniError, Local, MethodId};
use super::jvmti::{Jvmti, JvmtiError, check, jvmti_call};
use jvmti_bindings::jni_call;
use jvmti_bindings::sys::jni::{jint, jmethodID, jvalue};
use jvmti_bindings::sys::jvmti::{self as sys, jvmtiEnv};
use std::ffi::{CStr, CString};

/// One thread of [`Jvmti::stacks_at`].
#[derive(Debug)]
pub struct ThreadFrames<'a> {
    /// The thread, a local reference of the calling thread.
    pub thread: Local<'a>,
    /// JVMTI thread state bits.
    pub state: u32,
    /// Each frame's method and bytecode index (-1 in a native method),
    /// innermost first.
    pub frames: Vec<(MethodId, i64)>,
}

impl Jvmti {
    /// Every live thread's state and up to `max_frames` frames with their
    /// locations (one JVMTI GetAllStackTraces, at one safepoint).
    pub fn stacks_at<'a>(
        &self,
        _jni: &Jni<'a>,
        max_frames: i32,
    ) -> Result<Vec<ThreadFrames<'a>>, JvmtiError> {
        let mut out = Vec::new();
        self.each_stack(max_frames, |thread, state, frames| {
            out.push(ThreadFrames {
                // SAFETY: a local reference JVMTI created for the calling
                // thread, which holds `_jni`.
                thread: unsafe { Local::from_raw(thread) },
                state,
                frames: frames
                    .iter()
                    .map(|f| (MethodId(f.method), f.location))
                    .collect(),
            });
        })?;
        Ok(out)
    }

    /// A method's line number table: (first bytecode index, line), in the
    /// table's order (JVMTI GetLineNumberTable; needs
    /// `Capabilities::line_numbers`).
    pub fn line_numbers(&self, m: MethodId) -> Result<Vec<(i64, i32)>, JvmtiError> {
        let mut count: jint = 0;
        let mut table: *mut sys::jvmtiLineNumberEntry = std::ptr::null_mut();
        let env: *mut jvmtiEnv = self.raw_env();
        // SAFETY: `m` is a method id from a stack the caller took (its
        // class is loaded while the snapshot runs); valid out pointers.
        unsafe { jvmti_call!(env, GetLineNumberTable, m.0, &mut count, &mut table)? };
        if table.is_null() {
            return Ok(Vec::new());
        }
        let out = (0..count.max(0) as usize)
            .map(|i| {
                // SAFETY: JVMTI returned `count` entries.
                let e = unsafe { *table.add(i) };
                (e.start_location, e.line_number)
            })
            .collect();
        self.deallocate(table.cast());
        Ok(out)
    }
}

/// A type in a method descriptor, as far as [`JavaMethod`] calls them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Boolean,
    Int,
    Long,
    Reference,
}

/// The argument kinds and return kind of `sig`; `None` for a descriptor
/// with any other type (or malformed).
fn parse_descriptor(sig: &str) -> Option<(Vec<Kind>, Kind)> {
    let rest = sig.strip_prefix('(')?;
    let (params, ret) = rest.split_once(')')?;
    fn one(s: &str) -> Option<(Kind, &str)> {
        let mut dims = 0;
        let mut rest = s;
        while let Some(r) = rest.strip_prefix('[') {
            dims += 1;
            rest = r;
        }
        let (kind, rest) = match rest.chars().next()? {
            'Z' => (Kind::Boolean, &rest[1..]),
            'I' => (Kind::Int, &rest[1..]),
            'J' => (Kind::Long, &rest[1..]),
            'L' => {
                let end = rest.find(';')?;
                if end < 2 {
                    return None;
                }
                (Kind::Reference, &rest[end + 1..])
            }
            'B' | 'C' | 'S' | 'F' | 'D' if dims > 0 => (Kind::Reference, &rest[1..]),
            _ => return None,
        };
        Some((if dims > 0 { Kind::Reference } else { kind }, rest))
    }
    let mut args = Vec::new();
    let mut p = params;
    while !p.is_empty() {
        let (k, rest) = one(p)?;
        args.push(k);
        p = rest;
    }
    let (r, rest) = one(ret)?;
    rest.is_empty().then_some((args, r))
}

/// What a [`JavaMethod`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ret {
    Int,
    Long,
    Reference,
}

/// An argument of a [`JavaMethod`] call.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'r> {
    Boolean(bool),
    /// A live reference (or null).
    Reference(Option<Local<'r>>),
}

/// What a [`JavaMethod`] call returned.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    Int(i32),
    Long(i64),
    /// A local reference of the calling thread, or `None` for null.
    Reference(Option<Local<'a>>),
}

/// A Java method found by name and descriptor, with the class it was
/// found in; called through [`Jni::call`].
#[derive(Clone, Copy, Debug)]
pub struct JavaMethod<'c> {
    class: Local<'c>,
    mid: jmethodID,
    is_static: bool,
    args: [Option<Kind>; 4],
    ret: Ret,
}

impl<'a> Jni<'a> {
    /// The method `name` with descriptor `sig` of `class`, static or not
    /// (access is not checked: a protected or private method is found
    /// too). Descriptors of boolean and reference arguments (at most 4)
    /// and of int, long and reference results only; an error for others
    /// or a missing method (its `NoSuchMethodError` cleared).
    pub fn java_method<'c>(
        &self,
        class: Local<'c>,
        name: &str,
        sig: &CStr,
        is_static: bool,
    ) -> Result<JavaMethod<'c>, JniError> {
        let unsupported = JniError::Call {
            call: "a method descriptor sprig does not call",
            exception: false,
        };
        let Some((kinds, ret)) = parse_descriptor(&sig.to_string_lossy()) else {
            return Err(unsupported);
        };
        let ret = match ret {
            Kind::Int => Ret::Int,
            Kind::Long => Ret::Long,
            Kind::Reference => Ret::Reference,
            Kind::Boolean => return Err(unsupported),
        };
        if kinds.iter().any(|k| matches!(k, Kind::Int | Kind::Long)) {
            return Err(unsupported);
        }
        if kinds.len() > 4 {
            return Err(JniError::Call {
                call: "a method of more than 4 arguments",
                exception: false,
            });
        }
        let mut args = [None; 4];
        for (slot, k) in args.iter_mut().zip(kinds) {
            *slot = Some(k);
        }
        let n = CString::new(name).map_err(|_| JniError::Nul)?;
        // SAFETY: NUL-terminated name and signature; live class reference.
        let mid = unsafe {
            if is_static {
                jni_call!(
                    self.raw_env(),
                    GetStaticMethodID,
                    class.raw(),
                    n.as_ptr(),
                    sig.as_ptr()
                )
            } else {
                jni_call!(
                    self.raw_env(),
                    GetMethodID,
                    class.raw(),
                    n.as_ptr(),
                    sig.as_ptr()
                )
            }
        };
        if mid.is_null() {
            return Err(JniError::Call {
                call: if is_static {
                    "GetStaticMethodID"
                } else {
                    "GetMethodID"
                },
                exception: self.exception_clear(),
            });
        }
        Ok(JavaMethod {
            class,
            mid,
            is_static,
            args,
            ret,
        })
    }

    /// Calls `m` on `receiver` (`None` for a static method) with `args`,
    /// which must match its descriptor; an instance method's receiver must
    /// be an instance of the class it was found in. A Java exception it
    /// throws is cleared and reported as an error.
    pub fn call(
        &self,
        m: &JavaMethod<'_>,
        receiver: Option<Local<'_>>,
        args: &[Arg<'_>],
    ) -> Result<Value<'a>, JniError> {
        let mismatch = |what: &'static str| JniError::Call {
            call: what,
            exception: false,
        };
        let want: Vec<Kind> = m.args.iter().flatten().copied().collect();
        if want.len() != args.len() {
            return Err(mismatch("a call with the wrong number of arguments"));
        }
        let mut raw = [jvalue { j: 0 }; 4];
        for ((slot, a), k) in raw.iter_mut().zip(args).zip(&want) {
            *slot = match (a, k) {
                (Arg::Boolean(b), Kind::Boolean) => jvalue { z: u8::from(*b) },
                (Arg::Reference(r), Kind::Reference) => jvalue {
                    l: r.map_or(std::ptr::null_mut(), |r| r.raw()),
                },
                _ => return Err(mismatch("a call with an argument of the wrong type")),
            };
        }
        let env = self.raw_env();
        let value = match (m.is_static, receiver) {
            (true, None) => {
                // SAFETY: `m` is a static method of `m.class` whose
                // descriptor the arguments in `raw` were just checked
                // against; every reference is live.
                unsafe {
                    match m.ret {
                        Ret::Int => Value::Int(jni_call!(
                            env,
                            CallStaticIntMethodA,
                            m.class.raw(),
                            m.mid,
                            raw.as_ptr()
                        )),
                        Ret::Long => Value::Long(jni_call!(
                            env,
                            CallStaticLongMethodA,
                            m.class.raw(),
                            m.mid,
                            raw.as_ptr()
                        )),
                        Ret::Reference => {
                            let r = jni_call!(
                                env,
                                CallStaticObjectMethodA,
                                m.class.raw(),
                                m.mid,
                                raw.as_ptr()
                            );
                            Value::Reference((!r.is_null()).then(|| Local::from_raw(r)))
                        }
                    }
                }
            }
            (false, Some(obj)) if !obj.raw().is_null() && self.is_instance_of(obj, m.class) => {
                // SAFETY: `obj` is a live instance of the class `m` was
                // found in; the arguments in `raw` were checked against
                // its descriptor.
                unsafe {
                    match m.ret {
                        Ret::Int => Value::Int(jni_call!(
                            env,
                            CallIntMethodA,
                            obj.raw(),
                            m.mid,
                            raw.as_ptr()
                        )),
                        Ret::Long => Value::Long(jni_call!(
                            env,
                            CallLongMethodA,
                            obj.raw(),
                            m.mid,
                            raw.as_ptr()
                        )),
                        Ret::Reference => {
                            let r =
                                jni_call!(env, CallObjectMethodA, obj.raw(), m.mid, raw.as_ptr());
                            Value::Reference((!r.is_null()).then(|| Local::from_raw(r)))
                        }
                    }
                }
            }
            _ => return Err(mismatch("a call on no receiver or one of another class")),
        };
        if self.exception_clear() {
            if let Value::Reference(Some(r)) = value {
                self.delete_local(r);
            }
            return Err(JniError::Call {
                call: "a Java method called through JNI",
                exception: true,
            });
        }
        Ok(value)
    }

    /// Whether `object` is an instance of `class`.
    pub fn is_instance_of(&self, object: Local<'_>, class: Local<'_>) -> bool {
        // SAFETY: both are live references of this thread.
        unsafe { jni_call!(self.raw_env(), IsInstanceOf, object.raw(), class.raw()) != 0 }
    }

    /// The class of `object`.
    pub fn object_class(&self, object: Local<'_>) -> Option<Local<'a>> {
        if object.raw().is_null() {
            return None;
        }
        // SAFETY: `object` is a live non-null reference of this thread.
        let c = unsafe { jni_call!(self.raw_env(), GetObjectClass, object.raw()) };
        if c.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: GetObjectClass returns a local reference of this thread.
        Some(unsafe { Local::from_raw(c) })
    }

    /// The text of a `java.lang.String` (its modified UTF-8, decoded);
    /// `None` for anything else.
    pub fn string(&self, s: Local<'_>) -> Option<String> {
        let class = self.find_class("java/lang/String").ok()??;
        let is_string = !s.raw().is_null() && self.is_instance_of(s, class);
        self.delete_local(class);
        if !is_string {
            return None;
        }
        // SAFETY: `s` is a live `java.lang.String`; a null `isCopy` is
        // allowed.
        let chars = unsafe {
            jni_call!(
                self.raw_env(),
                GetStringUTFChars,
                s.raw(),
                std::ptr::null_mut()
            )
        };
        if chars.is_null() {
            self.exception_clear();
            return None;
        }
        // SAFETY: GetStringUTFChars returned a NUL-terminated buffer that
        // lives until the release below.
        let c = unsafe { CStr::from_ptr(chars) };
        let text = jvmti_bindings::mutf8::decode_cstr(c)
            .unwrap_or_else(|_| c.to_string_lossy().into_owned());
        // SAFETY: releases the buffer GetStringUTFChars returned for `s`.
        unsafe { jni_call!(self.raw_env(), ReleaseStringUTFChars, s.raw(), chars) };
        Some(text)
    }

    /// The length of an object array; 0 for null or anything that is no
    /// object array.
    pub fn object_array_len(&self, array: Local<'_>) -> usize {
        let Some(class) = self.find_class("[Ljava/lang/Object;").ok().flatten() else {
            return 0;
        };
        let ok = !array.raw().is_null() && self.is_instance_of(array, class);
        self.delete_local(class);
        if !ok {
            return 0;
        }
        // SAFETY: `array` is a live object array.
        let n = unsafe { jni_call!(self.raw_env(), GetArrayLength, array.raw()) };
        usize::try_from(n).unwrap_or(0)
    }

    /// Element `i` of an object array whose length
    /// [`Jni::object_array_len`] gave (`None` for null or out of range);
    /// the caller deletes it.
    pub fn object_array_get(&self, array: Local<'_>, i: usize) -> Option<Local<'a>> {
        if i >= self.object_array_len(array) {
            return None;
        }
        let i = jint::try_from(i).ok()?;
        // SAFETY: `array` is a live object array and `i` < its length.
        let e = unsafe { jni_call!(self.raw_env(), GetObjectArrayElement, array.raw(), i) };
        if self.exception_clear() || e.is_null() {
            return None;
        }
        // SAFETY: a local reference of this thread.
        Some(unsafe { Local::from_raw(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::{Kind, parse_descriptor};

    #[test]
    fn descriptors_parse_into_the_kinds_sprig_calls() {
        assert_eq!(
            parse_descriptor("(Ljava/lang/Thread;)Ljava/lang/Object;"),
            Some((vec![Kind::Reference], Kind::Reference))
        );
        assert_eq!(
            parse_descriptor("(ZZ)[Ljava/lang/management/ThreadInfo;"),
            Some((vec![Kind::Boolean, Kind::Boolean], Kind::Reference))
        );
        assert_eq!(parse_descriptor("()J"), Some((vec![], Kind::Long)));
        assert_eq!(
            parse_descriptor("([JI[[B)I"),
            Some((vec![Kind::Reference, Kind::Int, Kind::Reference], Kind::Int))
        );
        for bad in [
            "()V",
            "(D)I",
            "(F)J",
            "Ljava/lang/Object;",
            "()L;",
            "(I",
            "()II",
            "(X)I",
        ] {
            assert_eq!(parse_descriptor(bad), None, "{bad}");
        }
    }
}
