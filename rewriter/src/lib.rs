//! Class-file analysis and probe injection. Bytes in, bytes out.
