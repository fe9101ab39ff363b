//! The names of methods as the agent reports them.

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

    /// `pkg.Class.method(desc)`, the form used in the text report.
    pub fn display(&self) -> String {
        format!("{}.{}{}", self.class, self.name, self.descriptor)
    }

    /// `pkg.Class::method`, the frame form used in collapsed stacks.
    pub fn frame(&self) -> String {
        format!("{}::{}", self.class, self.name)
    }
}
