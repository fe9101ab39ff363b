//! How a revealer is set up: the scheme it follows and the class filters.

use crate::filter::{ClassFilter, FilterError};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    #[default]
    Lazy,
    Eager,
}

/// How a [`Revealer`](crate::Revealer) filters and which scheme it follows.
#[derive(Clone, Debug, Default)]
pub struct RevealConfig {
    pub scheme: Scheme,
    /// Classes to instrument even though a default JDK exclusion names them.
    pub include: Vec<ClassFilter>,
    /// Classes never to instrument (wins over everything).
    pub exclude: Vec<ClassFilter>,
    /// The JDK callback rule leaves live classes alone: the agent gives
    /// every method of a class it redefines probes, dormant where no rule
    /// reached the method, and a dormant method that runs inside a root
    /// context is revealed there ([`Revealer::on_entered`](crate::Revealer::on_entered)). A live class
    /// is one with a reachable constructor or instance method, so it is
    /// redefined, and what the JDK calls back of it is caught where it
    /// runs instead of instrumented in advance. Classes that are not live
    /// but implement a callback interface (rule 4) are marked as before:
    /// nothing else redefines them. Set by the agent for Scheme B with
    /// dormant probes.
    pub live_callbacks_where_they_run: bool,
}

impl RevealConfig {
    /// A configuration from pattern texts (`com.sun.tools.javac.**`).
    pub fn with_patterns(
        scheme: Scheme,
        include: &[&str],
        exclude: &[&str],
    ) -> Result<RevealConfig, FilterError> {
        let parse = |v: &[&str]| -> Result<Vec<ClassFilter>, FilterError> {
            v.iter().map(|t| ClassFilter::parse(t)).collect()
        };
        Ok(RevealConfig {
            scheme,
            include: parse(include)?,
            exclude: parse(exclude)?,
            live_callbacks_where_they_run: false,
        })
    }
}
