//! Redirecting static calls: every `CONSTANT_Methodref` to one static
//! method is pointed at a method of the same name and descriptor in
//! another class. Only the Methodrefs' class index changes (and one class
//! entry is appended): the code, its length and its stack map frames stay
//! as they were, so every call of the method in the class, and every
//! method handle constant naming it, goes to the other class.

use super::bytes::{modified_utf8, put_u16};
use super::classfile::ClassFile;
use super::pool::Pool;
use crate::Error;
use crate::vocab::tag;

/// Points the class's Methodrefs to `owner.name:descriptor` (internal
/// names) at `to.name:descriptor`. `None` when the class names no such
/// Methodref: nothing to change.
pub fn redirect_static(
    class: &[u8],
    owner: &str,
    name: &str,
    descriptor: &str,
    to: &str,
) -> Result<Option<Vec<u8>>, Error> {
    let cf = ClassFile::parse(class)?;
    let (owner, name, descriptor) = (
        modified_utf8(owner),
        modified_utf8(name),
        modified_utf8(descriptor),
    );
    let mut hits = Vec::new();
    for (i, slot) in cf.cp.iter().enumerate() {
        if slot.tag != tag::METHODREF {
            continue;
        }
        let (c, nat) = cf.pair(i as u16, tag::METHODREF)?;
        if cf.class_name(c)? != owner.as_slice() {
            continue;
        }
        let (n, d) = cf.pair(nat, tag::NAME_AND_TYPE)?;
        if cf.utf8(n)? == name.as_slice() && cf.utf8(d)? == descriptor.as_slice() {
            hits.push(slot.pos as usize);
        }
    }
    if hits.is_empty() {
        return Ok(None);
    }
    let mut pool = Pool::new(&cf);
    let to = pool
        .class(&modified_utf8(to))
        .map_err(|e| Error::Unsupported(format!("{e:?}")))?;
    let mut out = Vec::with_capacity(class.len() + pool.appended.len());
    out.extend_from_slice(&class[..8]);
    put_u16(&mut out, pool.count());
    let body = out.len();
    out.extend_from_slice(&class[10..cf.cp_end]);
    for pos in hits {
        // The Methodref's class index: the first operand after its tag.
        let at = body + pos - 10;
        out[at..at + 2].copy_from_slice(&to.to_be_bytes());
    }
    out.extend_from_slice(&pool.appended);
    out.extend_from_slice(&class[cf.cp_end..]);
    Ok(Some(out))
}
