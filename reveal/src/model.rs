//! The types every part of revelation shares: a method's key, the dense id
//! the probes carry, and the kind of edge that reached a method. The class
//! mirror ([`crate::hierarchy`]) and the revealer both build on them.

use std::fmt;

use sprig_rewriter::CallKind;

/// A method: internal class name, method name, descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodKey {
    pub class: String,
    pub name: String,
    pub descriptor: String,
}

impl MethodKey {
    pub fn new(class: &str, name: &str, descriptor: &str) -> MethodKey {
        MethodKey {
            class: class.to_string(),
            name: name.to_string(),
            descriptor: descriptor.to_string(),
        }
    }
}

impl fmt::Display for MethodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.class, self.name, self.descriptor)
    }
}

/// Dense id of an instrumented method, the value passed to the probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

/// Why a method became reachable: the kind of the edge that first reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Named by a root pattern.
    Root,
    Static,
    Special,
    Virtual,
    Interface,
    Dynamic,
    MethodHandle,
    /// Reported by the agent as the target of a reflective call.
    Reflective,
    /// An override in a live user class of a method of a filtered supertype
    /// (the JDK callback rule).
    Callback,
    /// Ran inside a root context with dormant probes: a method no rule
    /// reached, called on a path revelation does not see (JDK code calling
    /// back through a type the callback rule leaves out, say), revealed as
    /// it runs ([`Revealer::on_entered`](crate::Revealer::on_entered)).
    Entered,
}

impl From<CallKind> for EdgeKind {
    fn from(kind: CallKind) -> EdgeKind {
        match kind {
            CallKind::Static => EdgeKind::Static,
            CallKind::Special => EdgeKind::Special,
            CallKind::Virtual => EdgeKind::Virtual,
            CallKind::Interface => EdgeKind::Interface,
            CallKind::Dynamic => EdgeKind::Dynamic,
            CallKind::MethodHandle => EdgeKind::MethodHandle,
        }
    }
}
