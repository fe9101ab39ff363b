//! The instructions of one `Code` attribute, decoded with their branch
//! targets, and the scratch space the new layout is computed in: the level
//! below relocation (`code`), stack map frames (`frames`), debug tables
//! (`debug`) and the constructor flow analysis (`ctor`).

use crate::vocab::opcode::{
    GOTO_W, JSR_W, LOOKUPSWITCH, TABLESWITCH, WIDE, fixed_length, is_branch16, switch_padding,
    wide_length,
};
use crate::vocab::reader::Reader;
use crate::{Error, SkipReason};

pub(crate) fn unsupported(msg: impl Into<String>) -> SkipReason {
    SkipReason::Unsupported(msg.into())
}

impl From<Error> for SkipReason {
    fn from(e: Error) -> Self {
        SkipReason::Unsupported(e.to_string())
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Insn {
    pub(crate) off: u32,
    pub(crate) len: u32,
    pub(crate) op: u8,
    /// Branch/switch targets: `targets[t0..t0 + tn]` (instruction indices;
    /// for switches the default first).
    pub(crate) t0: u32,
    pub(crate) tn: u32,
}

/// Instruction list plus the new layout, reused across methods.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) insns: Vec<Insn>,
    pub(crate) targets: Vec<u32>,
    /// New offset of the probe code inserted before instruction i (equal to
    /// `at[i]` when nothing is inserted there). Branches to i land here.
    pub(crate) pre: Vec<u32>,
    /// New offset of instruction i itself.
    pub(crate) at: Vec<u32>,
    pub(crate) wide: Vec<bool>,
    /// Far conditional branches sent through a trampoline: (u, i) sorted,
    /// meaning `goto_w` for instruction i's target sits right after the
    /// unconditional instruction u.
    pub(crate) tramps: Vec<(u32, u32)>,
    /// New offset of each trampoline, parallel to `tramps`.
    pub(crate) tramp_at: Vec<u32>,
}

impl Scratch {
    /// Target instruction indices of instruction `i` (switch default first).
    pub(crate) fn targets_of(&self, i: usize) -> &[u32] {
        let ins = &self.insns[i];
        &self.targets[ins.t0 as usize..(ins.t0 + ins.tn) as usize]
    }
}

/// Decodes `code` into `s.insns` with resolved targets.
pub(crate) fn decode(code: &[u8], s: &mut Scratch) -> Result<(), SkipReason> {
    s.insns.clear();
    s.targets.clear();
    let n = code.len();
    let mut pc = 0usize;
    while pc < n {
        let op = code[pc];
        let t0 = s.targets.len() as u32;
        let len = match op {
            TABLESWITCH | LOOKUPSWITCH => {
                let pad = switch_padding(pc);
                let mut r = Reader::at(code, pc + 1 + pad);
                let default = r.i32("switch default")?;
                s.targets.push(rel(pc, default));
                if op == TABLESWITCH {
                    let low = r.i32("tableswitch low")?;
                    let high = r.i32("tableswitch high")?;
                    if low > high {
                        return Err(unsupported(format!("tableswitch at {pc} has low > high")));
                    }
                    let count = (i64::from(high) - i64::from(low) + 1) as usize;
                    if count > n {
                        return Err(unsupported(format!(
                            "tableswitch at {pc} runs past the code"
                        )));
                    }
                    for _ in 0..count {
                        let o = r.i32("tableswitch offset")?;
                        s.targets.push(rel(pc, o));
                    }
                } else {
                    let npairs = r.i32("lookupswitch npairs")?;
                    if npairs < 0 || npairs as usize > n {
                        return Err(unsupported(format!("lookupswitch at {pc} has bad npairs")));
                    }
                    for _ in 0..npairs {
                        r.skip(4, "lookupswitch match")?;
                        let o = r.i32("lookupswitch offset")?;
                        s.targets.push(rel(pc, o));
                    }
                }
                r.pos() - pc
            }
            WIDE => match code.get(pc + 1).and_then(|&op| wide_length(op)) {
                Some(l) => l,
                None => return Err(unsupported(format!("bad wide instruction at {pc}"))),
            },
            _ => {
                let Some(l) = fixed_length(op) else {
                    return Err(unsupported(format!("undefined opcode {op} at {pc}")));
                };
                if l + pc > n {
                    return Err(unsupported(format!(
                        "instruction at {pc} runs past the code"
                    )));
                }
                if is_branch16(op) {
                    let o = i16::from_be_bytes([code[pc + 1], code[pc + 2]]);
                    s.targets.push(rel(pc, i32::from(o)));
                } else if op == GOTO_W || op == JSR_W {
                    let o = i32::from_be_bytes([
                        code[pc + 1],
                        code[pc + 2],
                        code[pc + 3],
                        code[pc + 4],
                    ]);
                    s.targets.push(rel(pc, o));
                }
                l
            }
        };
        if pc + len > n {
            return Err(unsupported(format!(
                "instruction at {pc} runs past the code"
            )));
        }
        let tn = s.targets.len() as u32 - t0;
        s.insns.push(Insn {
            off: pc as u32,
            len: len as u32,
            op,
            t0,
            tn,
        });
        pc += len;
    }
    // Resolve target offsets to instruction indices.
    for t in s.targets.iter_mut() {
        *t = index_of(&s.insns, *t)
            .ok_or_else(|| unsupported(format!("branch to {t}, not an instruction start")))?;
    }
    Ok(())
}

/// Absolute target of a relative branch, or u32::MAX when out of range.
fn rel(pc: usize, o: i32) -> u32 {
    let t = pc as i64 + i64::from(o);
    if (0..=u32::MAX as i64 - 1).contains(&t) {
        t as u32
    } else {
        u32::MAX
    }
}

/// Index of the instruction starting exactly at `off`.
pub(crate) fn index_of(insns: &[Insn], off: u32) -> Option<u32> {
    insns
        .binary_search_by_key(&off, |i| i.off)
        .ok()
        .map(|i| i as u32)
}

/// Maps an original offset to its new place, for debug tables: offset 0
/// stays 0 (so parameters and the first line cover the entry probe), other
/// offsets go to the probe code before the instruction there (or the next
/// instruction, for offsets that are not instruction starts), and offsets
/// at or past the end go to the end of the relocated code.
pub(crate) fn map_debug(s: &Scratch, off: u32, end: u32) -> u32 {
    if off == 0 {
        return 0;
    }
    let i = s.insns.partition_point(|x| x.off < off);
    s.pre.get(i).copied().unwrap_or(end)
}
