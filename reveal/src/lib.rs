//! Call-subgraph revelation: which methods to instrument, and when.
//!
//! Pure logic over a mirror of the loaded classes ([`Hierarchy`]); the agent
//! feeds it class loads and first calls from its JVMTI callbacks (behind its
//! own mutex) and applies the redefinition batches it hands back.
//!
//! # Scheme B (lazy, the default)
//!
//! A method is *reachable* once a root pattern names it or a call site of a
//! reachable method that has run at least once can reach it; it is
//! *instrumented* once it is reachable, its class is loaded and
//! instrumentable ([`Filters`]) and it has bytecode. Call sites reach:
//!
//! - `invokestatic` / `invokespecial`: the declaration found by resolving
//!   upward from the owner ([`Hierarchy::resolve`]);
//! - `invokevirtual` / `invokeinterface`: the resolved declaration plus the
//!   method every loaded subtype of the owner selects
//!   ([`Hierarchy::virtual_targets`]); the call is remembered, so a subtype
//!   loaded later gets its selected method instrumented as it loads;
//! - `invokedynamic` (lambda and method-reference implementation methods) and
//!   method-handle constants: the named method, dispatched virtually when it
//!   is an overridable instance method.
//!
//! Calls whose owner is not loaded yet leave a placeholder node that is
//! resolved when the owner loads.
//!
//! # The JDK callback rule
//!
//! Filtered classes (the JDK by default) are not instrumented and not
//! scanned: their code is traversed for nothing. User code they call back
//! is found as follows:
//!
//! 1. Lambdas and method references handed to the JDK are revealed by the
//!    `invokedynamic` that creates them (edge kind `Dynamic`).
//! 2. A virtual or interface call from the subgraph on a JDK type
//!    (`comparator.compare(a, b)`) reaches the overrides in user classes like
//!    any virtual call.
//! 3. Objects handed to the JDK: a user class is *live* once one of its
//!    constructors or instance methods is reachable (its instances flow
//!    through the subgraph). Once the subgraph has called into filtered code
//!    at all (any call other than `Object.<init>`), every live class gets its
//!    overrides of methods declared by its filtered `java.*` supertypes
//!    marked reachable (edge kind `Callback`): `Comparator.compare`,
//!    `Runnable.run`, `Callable.call`, `Function.apply`,
//!    `Iterable.iterator`, `Comparable.compareTo`,
//!    `Object.equals/hashCode/toString`, … — `finalize` excepted (the
//!    finalizer thread never runs inside the root). Only `java.*` supertypes
//!    count ([`CALLBACK_TYPES`]): the class library is what takes objects
//!    and calls them back, while the other JDK packages are mostly API
//!    interfaces a program implements *and calls itself*
//!    (`javax.lang.model`, `com.sun.source` in javac), which rule 2 already
//!    covers. Counting them too instruments ~700 more never-called javac
//!    methods (6,557 instead of 5,859 for 3,969 called; see
//!    `tests/reveal_javac.rs`). With
//!    [`RevealConfig::live_callbacks_where_they_run`] (the agent's Scheme B
//!    with dormant probes) this rule marks nothing: a live class is
//!    redefined for its reachable methods, its callbacks hold dormant
//!    probes, and those the JDK calls inside a root context are revealed
//!    there ([`Revealer::on_entered`], edge kind `Entered`).
//!
//! 4. Objects created outside the subgraph and handed to the JDK from inside
//!    it (a comparator the caller of the root passes in): classes that
//!    implement a callback interface ([`CALLBACK_INTERFACES`]:
//!    `java.util.function.*`, `Comparator`, `Runnable`, `Callable`,
//!    `EventListener`) get their implementations of those interfaces marked
//!    whether live or not, once the subgraph calls into filtered code (and,
//!    being reachable, these make their class live for rule 3).
//!
//! Missed by design: JDK callbacks through other `java.*` types into objects
//! of a class none of whose constructors or instance methods is reachable in
//! the subgraph (e.g. `toString` of an object created before the root ran,
//! printed from inside it). Naming such methods as extra roots covers them.
//!
//! # What is never instrumented
//!
//! The JDK code sprig's own probes call ([`PROBES_CALL`]: `Thread.getId`,
//! `Unsafe`, the FFM downcall path of JDK 22+, ...) is neither a root nor
//! revealed, whatever the patterns and filters say: probes in it would
//! call themselves without end.
//!
//! # Reflection
//!
//! Call sites of `Method.invoke`, `Constructor.newInstance`,
//! `Class.newInstance` and `MethodHandle.invoke/invokeExact/
//! invokeWithArguments` inside the subgraph are reported in
//! [`Revealed::reflective_sites`]; when the agent learns the actual target
//! it calls [`Revealer::on_reflective_call`].
//!
//! # Scheme A (eager)
//!
//! [`Revealer::reveal_all`] scans every instrumented method transitively at
//! once (the caller supplies call sites per method); classes loaded later go
//! through the same [`Revealer::on_class_loaded`], which scans the new
//! methods of that class at once and reports whether methods of other
//! classes still wait for a `reveal_all`.
//!
//! # Protocol for the agent
//!
//! 1. Feed every class already loaded through [`Revealer::on_class_loaded`]
//!    (any order), then [`Revealer::add_root`] for each root.
//! 2. Lazy: apply [`Revealer::take_redefinitions`]. Eager: apply
//!    [`Revealer::reveal_all`].
//! 3. ClassFileLoadHook: [`Revealer::on_class_loaded`]; instrument the
//!    returned methods in the bytes being loaded; redefine
//!    [`LoadOutcome::redefine`] after the hook returns (from a service
//!    thread); in eager mode call `reveal_all` when `scan_pending`.
//! 4. First call of a method with `needs_first_call_check`:
//!    [`Revealer::on_first_call`] with the method's call sites (rewriter
//!    `callees` on its original bytes); redefine the returned batch.
//!
//! 5. Reflective sites in a batch: when the agent sees the target of such a
//!    call (e.g. by watching `Method.invoke`), [`Revealer::on_reflective_call`].
//!
//! Every batch lists *all* instrumented methods of each class (the agent
//! rewrites the original bytes), with [`Instrument::added`] set on the new
//! ones. Classes in a batch are sorted by name. The mirror counts a class as
//! loaded from its `on_class_loaded` on, so under concurrent loading a batch
//! can name a class whose load hook has returned but which the JVM has not
//! defined yet: the agent redefines it once it is prepared. Hidden classes
//! other than lambda proxies (which are recognised by name and never
//! instrumented) should not be passed in: they cannot be redefined.

#![forbid(unsafe_code)]

mod config;
mod filter;
mod hierarchy;
mod model;
mod outcome;
mod probe_path;
mod revealer;

pub use config::{RevealConfig, Scheme};
pub use filter::{
    CALLBACK_TYPES, ClassFilter, DEFAULT_EXCLUDES, FilterError, Filters, SPRIG_CLASSES,
};
pub use hierarchy::{Hierarchy, LoadedClass, has_code, is_virtual};
pub use model::{EdgeKind, MethodId, MethodKey};
pub use outcome::{
    ClassBatch, Instrument, LoadOutcome, ReflectiveSite, RevealError, RevealStats, Revealed,
};
pub use probe_path::{PROBES_CALL, left_out_line, probe_entries_of, probes_call};
pub use revealer::Revealer;
