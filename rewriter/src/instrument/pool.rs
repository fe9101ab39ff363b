//! Constant-pool additions. New entries are appended after the existing ones
//! (never renumbering anything); an identical existing entry is reused.

use std::collections::HashMap;

use super::bytes::{put_u16, put_u32};
use super::classfile::ClassFile;
use crate::SkipReason;
use crate::vocab::reader::Reader;
use crate::vocab::tag;

pub(crate) struct Pool<'c, 'a> {
    cf: &'c ClassFile<'a>,
    /// Encoded bytes of the appended entries.
    pub(crate) appended: Vec<u8>,
    /// Entries looked up or appended so far: (tag, key, index). Utf8 ones
    /// live in `utf8_added`.
    added: Vec<(u8, u32, u16)>,
    utf8_added: Vec<(Vec<u8>, u16)>,
    next: u32,
    ints: Option<HashMap<u32, u16>>,
}

/// Where `Pool` stood before a method was rewritten, to undo its additions
/// when the method is skipped.
#[derive(Clone, Copy)]
pub(crate) struct Mark {
    appended: usize,
    pub(crate) next: u32,
}

fn pool_full() -> SkipReason {
    SkipReason::Unsupported("constant pool is full".into())
}

impl<'c, 'a> Pool<'c, 'a> {
    pub(crate) fn new(cf: &'c ClassFile<'a>) -> Self {
        Pool {
            cf,
            appended: Vec::new(),
            added: Vec::new(),
            utf8_added: Vec::new(),
            next: cf.cp.len() as u32,
            ints: None,
        }
    }

    /// The new constant_pool_count.
    pub(crate) fn count(&self) -> u16 {
        self.next as u16
    }

    pub(crate) fn mark(&self) -> Mark {
        Mark {
            appended: self.appended.len(),
            next: self.next,
        }
    }

    pub(crate) fn rollback(&mut self, m: Mark) {
        self.appended.truncate(m.appended);
        self.next = m.next;
        self.added.retain(|e| u32::from(e.2) < m.next);
        self.utf8_added.retain(|e| u32::from(e.1) < m.next);
        if let Some(ints) = &mut self.ints {
            ints.retain(|_, idx| u32::from(*idx) < m.next);
        }
    }

    fn alloc(&mut self) -> Result<u16, SkipReason> {
        if self.next >= 0xffff {
            return Err(pool_full());
        }
        let i = self.next as u16;
        self.next += 1;
        Ok(i)
    }

    pub(crate) fn utf8(&mut self, s: &[u8]) -> Result<u16, SkipReason> {
        if let Some((_, i)) = self.utf8_added.iter().find(|(b, _)| b == s) {
            return Ok(*i);
        }
        for (i, slot) in self.cf.cp.iter().enumerate() {
            if slot.tag == tag::UTF8 && self.cf.utf8(i as u16).is_ok_and(|b| b == s) {
                self.utf8_added.push((s.to_vec(), i as u16));
                return Ok(i as u16);
            }
        }
        let len = u16::try_from(s.len())
            .map_err(|_| SkipReason::Unsupported("name longer than 65,535 bytes".into()))?;
        let i = self.alloc()?;
        self.appended.push(tag::UTF8);
        put_u16(&mut self.appended, len);
        self.appended.extend_from_slice(s);
        self.utf8_added.push((s.to_vec(), i));
        Ok(i)
    }

    fn pair(&mut self, tag: u8, a: u16, b: u16) -> Result<u16, SkipReason> {
        let key = (u32::from(a) << 16) | u32::from(b);
        if let Some(&(_, _, i)) = self.added.iter().find(|&&(t, k, _)| t == tag && k == key) {
            return Ok(i);
        }
        for (i, slot) in self.cf.cp.iter().enumerate() {
            if slot.tag == tag {
                let mut r = Reader::at(self.cf.bytes, slot.pos as usize);
                let x = r.u16("").unwrap_or(0);
                let y = if tag == tag::CLASS {
                    0
                } else {
                    r.u16("").unwrap_or(0)
                };
                if (u32::from(x) << 16 | u32::from(y)) == key {
                    self.added.push((tag, key, i as u16));
                    return Ok(i as u16);
                }
            }
        }
        let i = self.alloc()?;
        self.appended.push(tag);
        put_u16(&mut self.appended, a);
        if tag != tag::CLASS {
            put_u16(&mut self.appended, b);
        }
        self.added.push((tag, key, i));
        Ok(i)
    }

    pub(crate) fn class(&mut self, name: &[u8]) -> Result<u16, SkipReason> {
        let n = self.utf8(name)?;
        self.pair(tag::CLASS, n, 0)
    }

    /// A `CONSTANT_Methodref` to `class.name:desc`.
    pub(crate) fn methodref(
        &mut self,
        class: &[u8],
        name: &[u8],
        desc: &[u8],
    ) -> Result<u16, SkipReason> {
        let c = self.class(class)?;
        let n = self.utf8(name)?;
        let d = self.utf8(desc)?;
        let nat = self.pair(tag::NAME_AND_TYPE, n, d)?;
        self.pair(tag::METHODREF, c, nat)
    }

    /// A `CONSTANT_Integer` holding the bit pattern `v`.
    pub(crate) fn integer(&mut self, v: u32) -> Result<u16, SkipReason> {
        if self.ints.is_none() {
            let mut m = HashMap::new();
            for (i, slot) in self.cf.cp.iter().enumerate() {
                if slot.tag == tag::INTEGER
                    && let Ok(x) = Reader::at(self.cf.bytes, slot.pos as usize).u32("")
                {
                    m.entry(x).or_insert(i as u16);
                }
            }
            self.ints = Some(m);
        }
        if let Some(&i) = self.ints.as_ref().and_then(|m| m.get(&v)) {
            return Ok(i);
        }
        let i = self.alloc()?;
        self.appended.push(tag::INTEGER);
        put_u32(&mut self.appended, v);
        if let Some(m) = &mut self.ints {
            m.insert(v, i);
        }
        Ok(i)
    }
}
