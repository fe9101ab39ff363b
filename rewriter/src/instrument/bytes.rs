//! Bounds-checked big-endian reading and writing of class-file bytes.

use crate::Error;

/// A cursor over a byte slice; every read checks bounds and names what was
/// being read when the input ends early.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn truncated(what: &str) -> Error {
    Error::Malformed(format!("truncated {what}"))
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, Error> {
        let b = *self.buf.get(self.pos).ok_or_else(|| truncated(what))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, Error> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i32(&mut self, what: &str) -> Result<i32, Error> {
        Ok(self.u32(what)? as i32)
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or_else(|| truncated(what))?;
        let s = self.buf.get(self.pos..end).ok_or_else(|| truncated(what))?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn skip(&mut self, n: usize, what: &str) -> Result<(), Error> {
        self.bytes(n, what).map(|_| ())
    }
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Encodes a Rust string as the JVM's modified UTF-8 (NUL as two bytes,
/// supplementary characters as surrogate pairs).
pub(crate) fn modified_utf8(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let c = c as u32;
        match c {
            1..=0x7f => out.push(c as u8),
            0 | 0x80..=0x7ff => {
                out.push(0xc0 | (c >> 6) as u8);
                out.push(0x80 | (c & 0x3f) as u8);
            }
            0x800..=0xffff => push3(&mut out, c),
            _ => {
                let v = c - 0x10000;
                push3(&mut out, 0xd800 | (v >> 10));
                push3(&mut out, 0xdc00 | (v & 0x3ff));
            }
        }
    }
    out
}

fn push3(out: &mut Vec<u8>, c: u32) {
    out.push(0xe0 | (c >> 12) as u8);
    out.push(0x80 | ((c >> 6) & 0x3f) as u8);
    out.push(0x80 | (c & 0x3f) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reports_truncation() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16("a").unwrap(), 0x0102);
        assert!(matches!(r.u16("b"), Err(Error::Malformed(m)) if m.contains('b')));
        assert_eq!(r.u8("c").unwrap(), 3);
        assert!(r.u8("d").is_err());
        assert!(Reader::at(&[0; 4], usize::MAX).bytes(2, "e").is_err());
    }

    #[test]
    fn modified_utf8_encodes_nul_and_supplementary() {
        assert_eq!(modified_utf8("a/B"), b"a/B");
        assert_eq!(modified_utf8("\0"), vec![0xc0, 0x80]);
        assert_eq!(modified_utf8("é"), "é".as_bytes());
        assert_eq!(
            modified_utf8("\u{10400}"),
            vec![0xed, 0xa0, 0x81, 0xed, 0xb0, 0x80]
        );
    }
}
