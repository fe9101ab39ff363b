//! Big-endian writing of class-file bytes and modified UTF-8 (reading is
//! [`Reader`](crate::vocab::reader::Reader)'s).

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
