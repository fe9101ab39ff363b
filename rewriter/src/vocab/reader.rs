//! The one bounds-checked, big-endian reader of class-file bytes.

use crate::Error;

/// A cursor over a byte slice. Every read checks bounds and, when the input
/// ends early, fails with an [`Error::Malformed`] naming what was being
/// read and where.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// A reader starting at byte `pos` of `buf` (past the end is allowed:
    /// every read then fails).
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        let s = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or_else(|| {
                Error::Malformed(format!(
                    "truncated at byte {} reading {what} ({n} bytes needed, {} left)",
                    self.pos,
                    self.remaining()
                ))
            })?;
        self.pos += n;
        Ok(s)
    }

    pub fn skip(&mut self, n: usize, what: &str) -> Result<(), Error> {
        self.bytes(n, what).map(|_| ())
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.bytes(1, what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16, Error> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self, what: &str) -> Result<i32, Error> {
        Ok(self.u32(what)? as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_reports_truncation() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16("a").unwrap(), 0x0102);
        let err = r.u16("b").unwrap_err().to_string();
        assert!(
            err.contains("truncated at byte 2 reading b (2 bytes needed, 1 left)"),
            "{err}"
        );
        assert_eq!(r.pos(), 2, "a failed read does not move");
        assert_eq!(r.u8("c").unwrap(), 3);
        assert!(r.u8("d").is_err());
        assert_eq!(r.remaining(), 0);
        assert!(Reader::at(&[0; 4], usize::MAX).bytes(2, "e").is_err());
        assert_eq!(Reader::new(&[0xff, 0xff, 0xff, 0xfe]).i32("f").unwrap(), -2);
    }
}
