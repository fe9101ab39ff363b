//! class_info and callees. Owned by the analysis work (issue 2).
use crate::{CallSite, ClassInfo, Error};

/// What a class declares.
pub fn class_info(_class: &[u8]) -> Result<ClassInfo, Error> {
    Err(Error::Unsupported("class_info not implemented yet".into()))
}

/// Every call instruction of one method, in code order.
pub fn callees(_class: &[u8], _name: &str, _descriptor: &str) -> Result<Vec<CallSite>, Error> {
    Err(Error::Unsupported("callees not implemented yet".into()))
}
