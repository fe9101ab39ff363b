//! Offsets in the debug and type-annotation attributes of `Code`:
//! LineNumberTable, LocalVariableTable, LocalVariableTypeTable and
//! Runtime(In)VisibleTypeAnnotations.

use super::bytes::put_u16;
use super::insns::{Scratch, map_debug, unsupported};
use crate::SkipReason;
use crate::vocab::reader::Reader;

/// Deepest annotation nesting accepted (hostile input must not exhaust the stack).
const MAX_DEPTH: u32 = 64;

pub(crate) fn line_numbers(
    body: &[u8],
    s: &Scratch,
    end: u32,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let mut r = Reader::new(body);
    let n = r.u16("LineNumberTable length")?;
    put_u16(out, n);
    for _ in 0..n {
        let pc = r.u16("line start_pc")?;
        let line = r.u16("line number")?;
        put_u16(out, map_debug(s, u32::from(pc), end) as u16);
        put_u16(out, line);
    }
    trailing(&r)
}

fn trailing(r: &Reader<'_>) -> Result<(), SkipReason> {
    if r.remaining() != 0 {
        return Err(unsupported("attribute in Code has trailing bytes"));
    }
    Ok(())
}

/// One (start_pc, length) range.
fn range(r: &mut Reader<'_>, s: &Scratch, end: u32, out: &mut Vec<u8>) -> Result<(), SkipReason> {
    let start = u32::from(r.u16("start_pc")?);
    let len = u32::from(r.u16("length")?);
    let ns = map_debug(s, start, end);
    let ne = if start + len == 0 {
        0
    } else {
        map_debug(s, start + len, end).max(ns)
    };
    put_u16(out, ns as u16);
    put_u16(out, (ne - ns) as u16);
    Ok(())
}

pub(crate) fn local_vars(
    body: &[u8],
    s: &Scratch,
    end: u32,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let mut r = Reader::new(body);
    let n = r.u16("local variable table length")?;
    put_u16(out, n);
    for _ in 0..n {
        range(&mut r, s, end, out)?;
        out.extend_from_slice(r.bytes(6, "local variable entry")?);
    }
    trailing(&r)
}

pub(crate) fn type_annotations(
    body: &[u8],
    s: &Scratch,
    end: u32,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let mut r = Reader::new(body);
    let n = r.u16("type annotations count")?;
    put_u16(out, n);
    for _ in 0..n {
        let target = r.u8("type annotation target")?;
        out.push(target);
        match target {
            // localvar_target, resource_variable
            0x40 | 0x41 => {
                let k = r.u16("localvar_target length")?;
                put_u16(out, k);
                for _ in 0..k {
                    range(&mut r, s, end, out)?;
                    out.extend_from_slice(r.bytes(2, "localvar_target index")?);
                }
            }
            // catch_target: exception table index; ours is appended last
            0x42 => out.extend_from_slice(r.bytes(2, "catch_target")?),
            // offset_target; type_argument_target
            0x43..=0x4B => {
                let off = u32::from(r.u16("offset_target")?);
                let i = s.insns.partition_point(|x| x.off < off);
                put_u16(out, s.at.get(i).copied().unwrap_or(end) as u16);
                if target >= 0x47 {
                    out.push(r.u8("type_argument_index")?);
                }
            }
            _ => {
                return Err(unsupported(format!(
                    "type annotation target {target:#x} inside Code"
                )));
            }
        }
        let plen = r.u8("type_path length")?;
        out.push(plen);
        out.extend_from_slice(r.bytes(2 * usize::from(plen), "type_path")?);
        let start = r.pos();
        annotation(&mut r, 0)?;
        out.extend_from_slice(&body[start..r.pos()]);
    }
    trailing(&r)
}

fn annotation(r: &mut Reader<'_>, depth: u32) -> Result<(), SkipReason> {
    if depth > MAX_DEPTH {
        return Err(unsupported("annotation nested too deeply"));
    }
    r.skip(2, "annotation type")?;
    let pairs = r.u16("annotation pairs")?;
    for _ in 0..pairs {
        r.skip(2, "element name")?;
        element_value(r, depth + 1)?;
    }
    Ok(())
}

fn element_value(r: &mut Reader<'_>, depth: u32) -> Result<(), SkipReason> {
    if depth > MAX_DEPTH {
        return Err(unsupported("annotation nested too deeply"));
    }
    match r.u8("element_value tag")? {
        b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' | b's' | b'c' => {
            r.skip(2, "element_value")?
        }
        b'e' => r.skip(4, "enum element_value")?,
        b'@' => annotation(r, depth + 1)?,
        b'[' => {
            let n = r.u16("array element_value")?;
            for _ in 0..n {
                element_value(r, depth + 1)?;
            }
        }
        t => return Err(unsupported(format!("bad element_value tag {t}"))),
    }
    Ok(())
}
