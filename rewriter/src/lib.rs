//! Class-file analysis and probe injection for sprig. Bytes in, bytes out.
//!
//! - [`instrument`] injects `entry(id)` at method start, `exit(id)` before every
//!   return, and a catch-all handler that calls `exit(id)` and rethrows.
//! - [`redirect_static`] points a class's calls of one static method at a
//!   method of the same name and descriptor in another class.
//! - [`class_info`] and [`callees`] tell revelation what a class declares and
//!   what a method calls.
//! - [`pattern`] parses and matches the method patterns users write
//!   (`pkg.Class::method`), for roots and for `sprig rewrite --methods`.
//! - [`vocab`] is the class-file vocabulary of the whole workspace: opcodes,
//!   access flags, constant-pool tags, name conversions and the byte reader.
//!
//! Every byte that instrumentation does not mean to change is left as it was:
//! constant-pool entries are appended and only the `Code` attributes of the
//! instrumented methods are replaced.

#![forbid(unsafe_code)]

mod analyze;
mod error;
mod instrument;
pub mod pattern;
pub mod vocab;

pub use analyze::{
    TRIVIAL_BYTES_DEFAULT, TRIVIAL_BYTES_MAX, callees, callees_all, class_info, trivial_methods,
};
pub use error::Error;
pub use instrument::{
    has_nan_constants, instrument, instrument_full, instrument_guarded, redirect_static,
};

/// Where the injected calls go. Each probe is `static void name(int id)`
/// (descriptor `(I)V`) in `class`, except an entry probe with
/// `entry_receiver`, which is `static void name(Object receiver)`
/// (`(Ljava/lang/Object;)V`) and gets `this` (instance methods, not
/// constructors) or a static method's first argument, which must be a
/// reference: sprig watches `Method.invoke` this way, and hands
/// `LockSupport.park(Object)`'s blocker to `--locks`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSet {
    /// Internal name of the probe class, e.g. `sprig/rt/Probe`.
    pub class: String,
    /// Name of the entry probe method.
    pub entry: String,
    /// Name of the exit probe method (normal and exceptional exits).
    pub exit: String,
    /// The entry probe takes the receiver instead of the id.
    pub entry_receiver: bool,
}

/// Receiver checks for [`instrument_guarded`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guards<'a> {
    /// Internal name of the class holding the guard method.
    pub class: &'a str,
    /// Name of the receiver check, `static void name(Object receiver, int
    /// site)` (`(Ljava/lang/Object;I)V`), called before the virtual and
    /// interface calls marked [`Check::Receiver`].
    pub method: &'a str,
    /// Name of the reach check, `static void name(int site)`, called
    /// before the calls marked [`Check::Reach`].
    pub reach: &'a str,
    /// Per target, in the order of the targets: the checked calls.
    pub sites: &'a [Vec<GuardSite>],
}

/// One checked call of [`Guards`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardSite {
    /// Byte offset of an invoke instruction other than `invokedynamic` in
    /// the original code.
    pub offset: u32,
    /// Site id passed to the check.
    pub site: u32,
    /// Which check runs before the call.
    pub check: Check,
}

/// The check before a call ([`GuardSite`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// `method(receiver, site)` on a copy of the receiver: virtual and
    /// interface calls only.
    Receiver,
    /// `reach(site)`: any call; the stack is left alone.
    Reach,
}

/// Allocation probes for [`instrument_full`]: a call after every `new`,
/// `newarray`, `anewarray` and `multianewarray` of each instrumented
/// method, after each `clone()` of an array, and after each `super.clone()`
/// that names `java/lang/Object` (an instance's copy).
pub struct Allocs<'a> {
    /// Internal name of the class holding the allocation probes.
    pub class: &'a str,
    /// `static void name(Class<?> class, int site)`, called right after a
    /// `new` with the class the `new` names (an `ldc` of the same constant:
    /// the new object is not initialized yet and cannot be passed).
    pub object: &'a str,
    /// `static void name(Object array, int site)`, called right after an
    /// array allocation with the new array: after a `multianewarray` of
    /// two or more dimensions (its inner arrays are weighed from it),
    /// after every array allocation when `array_length` is `None`, and
    /// with the copy after an instance's `Object.clone()` and a reference
    /// array's `clone()`.
    pub array: &'a str,
    /// `static void name(int length, int site)`, called right after an
    /// array allocation of one dimension (`newarray`, `anewarray`, a
    /// `multianewarray` of one) with the array's length (`dup`,
    /// `arraylength`), never the array, so that the probe does not make a
    /// local array escape and C2 can still scalar-replace it.
    pub array_length: Option<&'a str>,
    /// Hands out the site id of each allocation site (called once per site
    /// of each method instrumented, also for a method that is then skipped).
    pub site: &'a mut dyn FnMut(&AllocSite) -> u32,
}

/// One allocation site handed to [`Allocs::site`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocSite {
    /// The method id of the target it is in.
    pub method: u32,
    /// Byte offset of the allocation instruction in the original code.
    pub offset: u32,
    /// The type allocated, as a field descriptor (`Lpkg/C;`, `[I`,
    /// `[[Ljava/lang/String;`).
    pub descriptor: String,
    /// Dimensions a `multianewarray` creates (1 for the other arrays, 0
    /// for `new` and a `clone`).
    pub dims: u8,
    /// A copy whose class the code does not fix: an instance's
    /// `Object.clone()` (a `super.clone()` that names `java/lang/Object`)
    /// or a reference array's `clone()`. The probe gets the copy
    /// (`array`'s probe), of the class `descriptor` names or of a
    /// subclass of it (an array of a subtype).
    pub clone: bool,
}

/// One method to instrument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub name: String,
    pub descriptor: String,
    /// Method id passed to the probes. Any `u32` value; ids above 32,767 are
    /// loaded from the constant pool, never truncated.
    pub id: u32,
    /// Index into the `probes` slice given to [`instrument`].
    pub probes: usize,
}

/// The result of [`instrument`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrumented {
    /// The new class file; byte-identical to the input when nothing was instrumented.
    pub bytes: Vec<u8>,
    /// One outcome per requested target, in request order.
    pub methods: Vec<MethodOutcome>,
}

impl Instrumented {
    /// Number of methods that received probes.
    pub fn instrumented_count(&self) -> usize {
        self.methods.iter().filter(|m| m.result.is_ok()).count()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodOutcome {
    pub name: String,
    pub descriptor: String,
    pub result: Result<(), SkipReason>,
}

/// Why a requested method was left unchanged. The rest of the class is still
/// instrumented.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    #[error("native method")]
    Native,
    #[error("abstract method")]
    Abstract,
    #[error("no such method in class")]
    NotFound,
    #[error("code would grow to {0} bytes, over the 65,535-byte limit")]
    TooLarge(usize),
    #[error("{0}")]
    Unsupported(String),
}

/// What a class declares, for the class-hierarchy mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassInfo {
    /// Internal name, e.g. `com/acme/Service`.
    pub name: String,
    pub super_name: Option<String>,
    pub interfaces: Vec<String>,
    pub access: u16,
    pub major_version: u16,
    pub methods: Vec<MethodInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodInfo {
    pub name: String,
    pub descriptor: String,
    pub access: u16,
    /// Length of the bytecode, 0 for native/abstract methods.
    pub code_length: u32,
    /// Whether the code contains any invoke instruction (leaf methods need
    /// no first-call revelation check).
    pub has_calls: bool,
}

/// How a call site reaches its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    Static,
    Special,
    Virtual,
    Interface,
    /// The implementation method behind an `invokedynamic` (LambdaMetafactory
    /// lambdas and method references).
    Dynamic,
    /// A method handle named in another bootstrap argument.
    MethodHandle,
}

/// One call instruction of a method.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallSite {
    pub kind: CallKind,
    /// Internal name of the declared owner class.
    pub owner: String,
    pub name: String,
    pub descriptor: String,
    /// Byte offset of the call instruction in the original code.
    pub offset: u32,
}
