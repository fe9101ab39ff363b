//! Walks a method's bytecode instruction by instruction, with exact byte
//! offsets, rejecting unknown opcodes and instructions that run past the end.

use crate::Error;
use crate::vocab::opcode::{
    LOOKUPSWITCH, TABLESWITCH, WIDE, fixed_length, switch_padding, wide_length,
};

/// One decoded instruction: its byte offset, opcode and operand bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Insn<'a> {
    pub(crate) offset: u32,
    pub(crate) opcode: u8,
    pub(crate) operands: &'a [u8],
}

impl Insn<'_> {
    /// The first two operand bytes as a big-endian u16 (constant-pool index
    /// of ldc_w, invoke*, ...). Callers only use it on opcodes that have them.
    pub(crate) fn u2(&self) -> u16 {
        match self.operands {
            [a, b, ..] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from(*a),
            [] => 0,
        }
    }
}

fn read_i32(code: &[u8], at: usize, pc: usize) -> Result<i32, Error> {
    code.get(at..at + 4)
        .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| {
            Error::Malformed(format!(
                "switch at code offset {pc} runs past the end of the code"
            ))
        })
}

/// Length of the instruction at `pc`.
fn length_at(code: &[u8], pc: usize) -> Result<usize, Error> {
    let op = code[pc];
    if let Some(len) = fixed_length(op) {
        return Ok(len);
    }
    match op {
        TABLESWITCH | LOOKUPSWITCH => {
            let pad = switch_padding(pc);
            let base = pc + 1 + pad;
            let table = if op == TABLESWITCH {
                let low = i64::from(read_i32(code, base + 4, pc)?);
                let high = i64::from(read_i32(code, base + 8, pc)?);
                if high < low {
                    return Err(Error::Malformed(format!(
                        "tableswitch at code offset {pc} has high {high} < low {low}"
                    )));
                }
                12 + (high - low + 1) * 4
            } else {
                let pairs = i64::from(read_i32(code, base + 4, pc)?);
                if pairs < 0 {
                    return Err(Error::Malformed(format!(
                        "lookupswitch at code offset {pc} has {pairs} pairs"
                    )));
                }
                8 + pairs * 8
            };
            // Bounded by the 32-bit code length check in `walk`.
            let total = 1 + pad as i64 + table;
            usize::try_from(total)
                .map_err(|_| Error::Malformed(format!("switch at code offset {pc} is too large")))
        }
        WIDE => match code.get(pc + 1) {
            Some(&other) => wide_length(other).ok_or_else(|| {
                Error::Malformed(format!(
                    "wide at code offset {pc} modifies opcode 0x{other:02x}"
                ))
            }),
            None => Err(Error::Malformed(format!(
                "wide at code offset {pc} at the end of the code"
            ))),
        },
        _ => Err(Error::Malformed(format!(
            "undefined opcode 0x{op:02x} at code offset {pc}"
        ))),
    }
}

/// Calls `f` for each instruction of `code` in order.
pub(crate) fn walk<'a>(
    code: &'a [u8],
    mut f: impl FnMut(Insn<'a>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut pc = 0usize;
    while pc < code.len() {
        let len = length_at(code, pc)?;
        let end = pc.checked_add(len).filter(|&e| e <= code.len()).ok_or_else(|| {
            Error::Malformed(format!(
                "instruction 0x{:02x} at code offset {pc} runs past the end of the code ({} bytes)",
                code[pc],
                code.len()
            ))
        })?;
        let offset =
            u32::try_from(pc).map_err(|_| Error::Malformed("code longer than 4 GiB".into()))?;
        f(Insn {
            offset,
            opcode: code[pc],
            operands: &code[pc + 1..end],
        })?;
        pc = end;
    }
    Ok(())
}
