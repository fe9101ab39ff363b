//! Reader for HotSpot's PerfData memory (`/tmp/hsperfdata_<user>/<pid>`):
//! the string constants sprig shows or needs (main class, version, VM name,
//! VM arguments). Reading the file sends the JVM nothing.
//!
//! Layout: a 32-byte prologue (magic `CA FE C0 C0` in big-endian byte order,
//! byte order flag, versions, accessible flag, used size, overflow, time
//! stamp, offset of the first entry, number of entries), then entries of a
//! 20-byte header (entry length, name offset, vector length, type, flags,
//! units, variability, data offset) followed by the NUL-terminated name and
//! the data. Strings are `B` (byte) vectors padded with NULs.

use std::collections::HashMap;

const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
const PROLOGUE_LEN: usize = 32;
const ENTRY_HEADER_LEN: usize = 20;

/// Why a buffer is not PerfData sprig can read.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PerfDataError {
    #[error("not a PerfData file (bad magic)")]
    BadMagic,
    #[error("PerfData file is truncated")]
    Truncated,
    #[error("PerfData entry {index} is malformed")]
    BadEntry { index: u32 },
}

/// The string entries of one PerfData buffer, by name.
#[derive(Debug, Default, Clone)]
pub struct PerfStrings {
    strings: HashMap<String, String>,
}

impl PerfStrings {
    /// The string entry `name`, if the JVM published it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.strings.get(name).map(String::as_str)
    }

    /// Parses every string (`B` vector) entry of `buf`; other entries are
    /// skipped. Never panics on bad input.
    pub fn parse(buf: &[u8]) -> Result<PerfStrings, PerfDataError> {
        if buf.len() < PROLOGUE_LEN {
            return Err(PerfDataError::Truncated);
        }
        if buf[0..4] != MAGIC {
            return Err(PerfDataError::BadMagic);
        }
        let little = match buf[4] {
            0 => false,
            1 => true,
            _ => return Err(PerfDataError::BadMagic),
        };
        let rd = Reader { buf, little };
        let used = rd.u32_at(8).ok_or(PerfDataError::Truncated)? as usize;
        // `used` bounds the live part; a file shorter than that is truncated
        // (or still being written), so parse only what is there.
        let end = used.min(buf.len());
        let first = rd.u32_at(24).ok_or(PerfDataError::Truncated)? as usize;
        let count = rd.u32_at(28).ok_or(PerfDataError::Truncated)?;

        let mut strings = HashMap::new();
        let mut off = first;
        for index in 0..count {
            if off.checked_add(ENTRY_HEADER_LEN).is_none_or(|e| e > end) {
                return Err(PerfDataError::Truncated);
            }
            let bad = PerfDataError::BadEntry { index };
            let entry_len = rd.u32_at(off).ok_or(PerfDataError::Truncated)? as usize;
            let name_off = rd.u32_at(off + 4).ok_or(PerfDataError::Truncated)? as usize;
            let vector_len = rd.u32_at(off + 8).ok_or(PerfDataError::Truncated)? as usize;
            let data_type = buf[off + 12];
            let data_off = rd.u32_at(off + 16).ok_or(PerfDataError::Truncated)? as usize;
            let entry_end = off.checked_add(entry_len).ok_or(bad.clone())?;
            if entry_len < ENTRY_HEADER_LEN || entry_end > end {
                return Err(bad);
            }
            let entry = &buf[off..entry_end];
            let name = c_str(entry.get(name_off..).ok_or(bad.clone())?).ok_or(bad.clone())?;
            if data_type == b'B' && vector_len > 0 {
                let data = entry
                    .get(data_off..data_off.saturating_add(vector_len))
                    .ok_or(bad.clone())?;
                let value = match data.iter().position(|&b| b == 0) {
                    Some(n) => &data[..n],
                    None => data,
                };
                strings.insert(
                    String::from_utf8_lossy(name).into_owned(),
                    String::from_utf8_lossy(value).into_owned(),
                );
            }
            off = entry_end;
        }
        Ok(PerfStrings { strings })
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    little: bool,
}

impl Reader<'_> {
    fn u32_at(&self, off: usize) -> Option<u32> {
        let bytes: [u8; 4] = self.buf.get(off..off.checked_add(4)?)?.try_into().ok()?;
        Some(if self.little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        })
    }
}

/// The bytes before the first NUL; None when there is no NUL.
fn c_str(bytes: &[u8]) -> Option<&[u8]> {
    bytes.iter().position(|&b| b == 0).map(|n| &bytes[..n])
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a little-endian PerfData buffer holding the given entries
    /// (name, type, data) the way HotSpot lays them out.
    pub(crate) fn buffer(entries: &[(&str, u8, Vec<u8>)]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, ty, data) in entries {
            let name_off = ENTRY_HEADER_LEN;
            let data_off = (name_off + name.len() + 1).next_multiple_of(8);
            let len = (data_off + data.len()).next_multiple_of(8);
            let mut e = vec![0u8; len];
            e[0..4].copy_from_slice(&(len as u32).to_le_bytes());
            e[4..8].copy_from_slice(&(name_off as u32).to_le_bytes());
            let vlen = if *ty == b'B' { data.len() as u32 } else { 0 };
            e[8..12].copy_from_slice(&vlen.to_le_bytes());
            e[12] = *ty;
            e[16..20].copy_from_slice(&(data_off as u32).to_le_bytes());
            e[name_off..name_off + name.len()].copy_from_slice(name.as_bytes());
            e[data_off..data_off + data.len()].copy_from_slice(data);
            body.extend_from_slice(&e);
        }
        let mut buf = vec![0u8; PROLOGUE_LEN];
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4] = 1;
        buf[5] = 2;
        buf[7] = 1;
        let used = (PROLOGUE_LEN + body.len()) as u32;
        buf[8..12].copy_from_slice(&used.to_le_bytes());
        buf[24..28].copy_from_slice(&(PROLOGUE_LEN as u32).to_le_bytes());
        buf[28..32].copy_from_slice(&(entries.len() as u32).to_le_bytes());
        buf.extend_from_slice(&body);
        buf
    }

    pub(crate) fn padded(s: &str, len: usize) -> Vec<u8> {
        let mut v = s.as_bytes().to_vec();
        v.resize(len, 0);
        v
    }

    #[test]
    fn reads_strings_and_skips_scalars() {
        let buf = buffer(&[
            (
                "sun.os.hrt.frequency",
                b'J',
                1_000_000_000u64.to_le_bytes().to_vec(),
            ),
            ("sun.rt.javaCommand", b'B', padded("Sleeper a b", 64)),
            ("java.property.java.version", b'B', padded("17.0.15", 16)),
        ]);
        let p = PerfStrings::parse(&buf).unwrap();
        assert_eq!(p.get("sun.rt.javaCommand"), Some("Sleeper a b"));
        assert_eq!(p.get("java.property.java.version"), Some("17.0.15"));
        assert_eq!(p.get("sun.os.hrt.frequency"), None);
    }

    #[test]
    fn rejects_bad_magic_and_truncation() {
        let mut buf = buffer(&[("a", b'B', padded("x", 8))]);
        assert!(PerfStrings::parse(&buf[..10]).is_err());
        assert_eq!(
            PerfStrings::parse(&buf[..PROLOGUE_LEN + 4]).unwrap_err(),
            PerfDataError::Truncated
        );
        buf[0] = 0;
        assert_eq!(
            PerfStrings::parse(&buf).unwrap_err(),
            PerfDataError::BadMagic
        );
    }

    #[test]
    fn never_panics_on_corrupt_entries() {
        let good = buffer(&[
            ("sun.rt.javaCommand", b'B', padded("Main", 16)),
            ("java.property.java.home", b'B', padded("/jdk", 16)),
        ]);
        // Flip every byte of the entries to a few hostile values: any result
        // is fine as long as parsing returns.
        for i in PROLOGUE_LEN..good.len() {
            for v in [0u8, 0x7f, 0xff] {
                let mut b = good.clone();
                b[i] = v;
                let _ = PerfStrings::parse(&b);
            }
        }
    }
}
