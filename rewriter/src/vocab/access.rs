//! Access and property flags of classes and methods (JVMS §4.1, §4.6), under
//! the specification's names.

pub const ACC_PUBLIC: u16 = 0x0001;
pub const ACC_PRIVATE: u16 = 0x0002;
pub const ACC_PROTECTED: u16 = 0x0004;
pub const ACC_STATIC: u16 = 0x0008;
pub const ACC_FINAL: u16 = 0x0010;
pub const ACC_SYNCHRONIZED: u16 = 0x0020;
pub const ACC_NATIVE: u16 = 0x0100;
/// On a class: an interface.
pub const ACC_INTERFACE: u16 = 0x0200;
pub const ACC_ABSTRACT: u16 = 0x0400;

/// Flags of a method without bytecode.
pub const NO_CODE: u16 = ACC_NATIVE | ACC_ABSTRACT;
