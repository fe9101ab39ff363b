/// Why a class could not be analysed or instrumented at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("malformed class file: {0}")]
    Malformed(String),
    #[error("unsupported class file: {0}")]
    Unsupported(String),
    /// The request itself is inconsistent, e.g. a target names a probe set
    /// that was not given.
    #[error("invalid target: {0}")]
    InvalidTarget(String),
}
