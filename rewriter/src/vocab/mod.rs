//! The class-file vocabulary every part of sprig shares: opcodes, access
//! flags, constant-pool tags, name conversions and one bounds-checked byte
//! reader. Defined here once; nothing else in the workspace spells these
//! numbers.

pub mod access;
pub mod names;
pub mod opcode;
pub mod reader;
pub mod tag;
