//! The names of methods as the agent reports them.

use sprig_wire::WaitKind;

/// Name of a method as the agent reported it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MethodInfo {
    /// Binary class name with dots, e.g. `com.acme.Service`.
    pub class: String,
    pub name: String,
    /// JVM descriptor, e.g. `(I)V`.
    pub descriptor: String,
}

impl MethodInfo {
    pub fn new(class: &str, name: &str, descriptor: &str) -> MethodInfo {
        MethodInfo {
            class: class.to_owned(),
            name: name.to_owned(),
            descriptor: descriptor.to_owned(),
        }
    }

    /// The placeholder for an id the method table does not know.
    pub fn unknown(id: u32) -> MethodInfo {
        MethodInfo {
            class: "<unknown>".to_owned(),
            name: format!("method#{id}"),
            descriptor: String::new(),
        }
    }

    /// The row of a wait (`--locks`): no class, the name says it all,
    /// such as `(blocked on pkg.Lock)`.
    pub fn wait_row(kind: WaitKind, monitor: &str) -> MethodInfo {
        MethodInfo {
            class: String::new(),
            name: kind.row(monitor),
            descriptor: String::new(),
        }
    }

    /// `pkg.Class.method(desc)`, the form used in the text report (a
    /// wait's row by its name alone).
    pub fn display(&self) -> String {
        if self.class.is_empty() {
            return self.name.clone();
        }
        format!("{}.{}{}", self.class, self.name, self.descriptor)
    }

    /// `pkg.Class::method`, the frame form used in collapsed stacks (a
    /// wait's row by its name alone).
    pub fn frame(&self) -> String {
        if self.class.is_empty() {
            return self.name.clone();
        }
        format!("{}::{}", self.class, self.name)
    }

    /// The monitor's class of a wait row's name (`(blocked on pkg.Lock)`
    /// gives `pkg.Lock`); `None` for a method or a wait without one.
    pub fn monitor(&self) -> Option<&str> {
        if !self.class.is_empty() {
            return None;
        }
        ["(blocked on ", "(waiting on ", "(parked: "]
            .iter()
            .find_map(|p| self.name.strip_prefix(p)?.strip_suffix(')'))
    }
}
