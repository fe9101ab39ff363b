//! The class and method queries (loaded classes, signatures, methods,
//! bytecodes, modifiers, interfaces, loaders), retransformation and the
//! boot modules' exports.

use super::{Jvmti, JvmtiError, JvmtiStr, check, jvmti_call};
use crate::ffi::jni::{FieldOwner, Global, Jni, Local, MethodId};
use jvmti_bindings::sys::jni::{jclass, jint, jmethodID, jobject};
use jvmti_bindings::sys::jvmti::jvmtiEnv;
use std::ffi::{CString, c_char};

impl Jvmti {
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
}
