//! StackMapTable relocation: frames keep their kind and types, get new
//! offset deltas (compact forms become extended ones when the delta no
//! longer fits), `Uninitialized(offset)` types follow their `new`
//! instruction, and a frame for the appended catch-all handler is added.

use super::bytes::put_u16;
use super::insns::{Scratch, index_of, unsupported};
use crate::SkipReason;
use crate::vocab::reader::Reader;

const SAME_LOCALS_1_EXTENDED: u8 = 247;
const SAME_EXTENDED: u8 = 251;
const FULL: u8 = 255;
const ITEM_UNINITIALIZED_THIS: u8 = 6;
const ITEM_OBJECT: u8 = 7;
const ITEM_UNINITIALIZED: u8 = 8;

/// What relocation needs to know about the original frames.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    /// Original offset of each frame, ascending.
    pub(crate) offsets: Vec<u32>,
    /// Offsets of frames that mention `uninitializedThis`.
    pub(crate) uninit_this: Vec<u32>,
}

/// Frame type byte → (offset delta, number of types that follow when the
/// frame is not a full frame). Reads an explicit delta when there is one.
fn header(r: &mut Reader<'_>, ft: u8) -> Result<(u16, usize), SkipReason> {
    Ok(match ft {
        0..=63 => (u16::from(ft), 0),
        64..=127 => (u16::from(ft - 64), 1),
        SAME_LOCALS_1_EXTENDED => (r.u16("frame offset delta")?, 1),
        248..=251 => (r.u16("frame offset delta")?, 0),
        252..=254 => (r.u16("frame offset delta")?, usize::from(ft - 251)),
        FULL => (r.u16("frame offset delta")?, 0),
        _ => return Err(unsupported(format!("reserved stack map frame type {ft}"))),
    })
}

/// Reads (and, with `out`, copies) `n` verification types; `Uninitialized`
/// offsets are moved to the new place of their instruction.
fn types(
    r: &mut Reader<'_>,
    n: usize,
    s: Option<&Scratch>,
    out: &mut Option<&mut Vec<u8>>,
    this: &mut bool,
) -> Result<(), SkipReason> {
    for _ in 0..n {
        let tag = r.u8("verification type")?;
        if let Some(o) = out.as_deref_mut() {
            o.push(tag);
        }
        match tag {
            0..=5 => {}
            ITEM_UNINITIALIZED_THIS => *this = true,
            ITEM_OBJECT => {
                let c = r.u16("object type")?;
                if let Some(o) = out.as_deref_mut() {
                    put_u16(o, c);
                }
            }
            ITEM_UNINITIALIZED => {
                let off = r.u16("uninitialized offset")?;
                if let (Some(o), Some(s)) = (out.as_deref_mut(), s) {
                    let i = index_of(&s.insns, u32::from(off)).ok_or_else(|| {
                        unsupported(format!("Uninitialized({off}) is not an instruction start"))
                    })?;
                    put_u16(o, s.at[i as usize] as u16);
                }
            }
            _ => return Err(unsupported(format!("bad verification type tag {tag}"))),
        }
    }
    Ok(())
}

/// Walks every frame; with `out`, writes the relocated frames.
fn walk(
    body: &[u8],
    s: Option<&Scratch>,
    mut out: Option<&mut Vec<u8>>,
    f: &mut Frames,
) -> Result<Option<u32>, SkipReason> {
    let mut r = Reader::new(body);
    let n = r.u16("number of frames")?;
    let mut old: Option<u32> = None;
    let mut prev_new: Option<u32> = None;
    for _ in 0..n {
        let ft = r.u8("frame type")?;
        let (delta, ntypes) = header(&mut r, ft)?;
        let off = match old {
            None => u32::from(delta),
            Some(p) => p.saturating_add(u32::from(delta) + 1),
        };
        old = Some(off);
        if let (Some(o), Some(s)) = (out.as_deref_mut(), s) {
            let i = index_of(&s.insns, off).ok_or_else(|| {
                unsupported(format!(
                    "stack map frame at {off} is not an instruction start"
                ))
            })?;
            let new = s.pre[i as usize];
            let nd = match prev_new {
                None => new,
                Some(p) => new - p - 1,
            };
            prev_new = Some(new);
            match ft {
                0..=63 if nd <= 63 => o.push(nd as u8),
                0..=63 => {
                    o.push(SAME_EXTENDED);
                    put_u16(o, nd as u16);
                }
                64..=127 if nd <= 63 => o.push(64 + nd as u8),
                64..=127 => {
                    o.push(SAME_LOCALS_1_EXTENDED);
                    put_u16(o, nd as u16);
                }
                _ => {
                    o.push(ft);
                    put_u16(o, nd as u16);
                }
            }
        }
        let mut this = false;
        if ft == FULL {
            for what in ["locals", "stack"] {
                let k = r.u16(what)?;
                if let Some(o) = out.as_deref_mut() {
                    put_u16(o, k);
                }
                types(&mut r, usize::from(k), s, &mut out, &mut this)?;
            }
        } else {
            types(&mut r, ntypes, s, &mut out, &mut this)?;
        }
        if out.is_none() {
            f.offsets.push(off);
            if this {
                f.uninit_this.push(off);
            }
        }
    }
    if r.remaining() != 0 {
        return Err(unsupported("StackMapTable has trailing bytes"));
    }
    Ok(prev_new)
}

pub(crate) fn parse(body: &[u8]) -> Result<Frames, SkipReason> {
    let mut f = Frames::default();
    walk(body, None, None, &mut f)?;
    Ok(f)
}

/// Writes the relocated StackMapTable body plus the catch-all handler's
/// frame at `handler`.
pub(crate) fn emit(
    body: &[u8],
    f: &Frames,
    s: &Scratch,
    handler: u32,
    throwable: u16,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let n = u16::try_from(f.offsets.len() + 1).map_err(|_| unsupported("StackMapTable is full"))?;
    put_u16(out, n);
    let mut scratch = Frames::default();
    let last = walk(body, Some(s), Some(out), &mut scratch)?;
    handler_frame(handler, last, throwable, out);
    Ok(())
}

/// The catch-all handler's frame: no locals (every local is Top, so every
/// frame in the covered range is assignable to it) and `[Throwable]` on the
/// stack.
pub(crate) fn handler_frame(handler: u32, prev: Option<u32>, throwable: u16, out: &mut Vec<u8>) {
    let delta = match prev {
        None => handler,
        Some(p) => handler - p - 1,
    };
    out.push(FULL);
    put_u16(out, delta as u16);
    put_u16(out, 0);
    put_u16(out, 1);
    out.push(ITEM_OBJECT);
    put_u16(out, throwable);
}

/// Size in bytes of [`handler_frame`]'s output.
pub(crate) const HANDLER_FRAME_LEN: u32 = 10;

/// One verification type: tag and, for Object/Uninitialized, its operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VType(pub(crate) u8, pub(crate) u16);

/// A frame with its locals and stack spelled out.
#[derive(Clone, Debug)]
pub(crate) struct Full {
    /// Original offset.
    pub(crate) off: u32,
    pub(crate) locals: Vec<VType>,
    pub(crate) stack: Vec<VType>,
}

fn read_vt(r: &mut Reader<'_>) -> Result<VType, SkipReason> {
    let tag = r.u8("verification type")?;
    match tag {
        0..=6 => Ok(VType(tag, 0)),
        ITEM_OBJECT | ITEM_UNINITIALIZED => Ok(VType(tag, r.u16("verification type operand")?)),
        _ => Err(unsupported(format!("bad verification type tag {tag}"))),
    }
}

/// Decodes every frame into full form, starting from the method's
/// implicit initial locals.
pub(crate) fn expand(body: &[u8], initial: Vec<VType>) -> Result<Vec<Full>, SkipReason> {
    let mut r = Reader::new(body);
    let n = r.u16("number of frames")?;
    let mut locals = initial;
    let mut prev: Option<u32> = None;
    let mut out = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        let ft = r.u8("frame type")?;
        let (delta, ntypes) = header(&mut r, ft)?;
        let off = prev.map_or(u32::from(delta), |p| p.saturating_add(u32::from(delta) + 1));
        prev = Some(off);
        let mut stack = Vec::new();
        match ft {
            64..=127 | SAME_LOCALS_1_EXTENDED => stack.push(read_vt(&mut r)?),
            248..=250 => {
                let k = usize::from(251 - ft);
                if k > locals.len() {
                    return Err(unsupported("chop frame removes more locals than exist"));
                }
                locals.truncate(locals.len() - k);
            }
            252..=254 => {
                for _ in 0..ntypes {
                    locals.push(read_vt(&mut r)?);
                }
            }
            FULL => {
                let nl = r.u16("locals")?;
                locals = (0..nl).map(|_| read_vt(&mut r)).collect::<Result<_, _>>()?;
                let ns = r.u16("stack")?;
                stack = (0..ns).map(|_| read_vt(&mut r)).collect::<Result<_, _>>()?;
            }
            _ => {}
        }
        out.push(Full {
            off,
            locals: locals.clone(),
            stack,
        });
    }
    if r.remaining() != 0 {
        return Err(unsupported("StackMapTable has trailing bytes"));
    }
    Ok(out)
}

fn write_vts(vts: &[VType], s: &Scratch, out: &mut Vec<u8>) -> Result<(), SkipReason> {
    put_u16(
        out,
        u16::try_from(vts.len()).map_err(|_| unsupported("frame too large"))?,
    );
    for v in vts {
        out.push(v.0);
        match v.0 {
            ITEM_OBJECT => put_u16(out, v.1),
            ITEM_UNINITIALIZED => {
                let i = index_of(&s.insns, u32::from(v.1)).ok_or_else(|| {
                    unsupported(format!(
                        "Uninitialized({}) is not an instruction start",
                        v.1
                    ))
                })?;
                put_u16(out, s.at[i as usize] as u16);
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes a StackMapTable body of full frames: every original frame at its
/// new offset, one per trampoline (a copy of its target's frame), and the
/// catch-all handler's frame.
pub(crate) fn emit_expanded(
    frames: &[Full],
    s: &Scratch,
    handler: u32,
    throwable: u16,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let mut entries: Vec<(u32, &Full)> = Vec::with_capacity(frames.len() + s.tramps.len());
    for f in frames {
        let i = index_of(&s.insns, f.off).ok_or_else(|| {
            unsupported(format!(
                "stack map frame at {} is not an instruction start",
                f.off
            ))
        })?;
        entries.push((s.pre[i as usize], f));
    }
    for (k, &(_, c)) in s.tramps.iter().enumerate() {
        let target = s.insns[s.targets_of(c as usize)[0] as usize].off;
        let f = frames
            .iter()
            .find(|f| f.off == target)
            .ok_or_else(|| unsupported("far branch target without a stack map frame"))?;
        entries.push((s.tramp_at[k], f));
    }
    entries.sort_by_key(|e| e.0);
    put_u16(
        out,
        u16::try_from(entries.len() + 1).map_err(|_| unsupported("StackMapTable is full"))?,
    );
    let mut prev: Option<u32> = None;
    for (off, f) in entries {
        let delta = prev.map_or(off, |p| off - p - 1);
        prev = Some(off);
        out.push(FULL);
        put_u16(out, delta as u16);
        write_vts(&f.locals, s, out)?;
        write_vts(&f.stack, s, out)?;
    }
    handler_frame(handler, prev, throwable, out);
    Ok(())
}
