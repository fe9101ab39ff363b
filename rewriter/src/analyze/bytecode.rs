//! Walks a method's bytecode instruction by instruction, with exact byte
//! offsets, rejecting unknown opcodes and instructions that run past the end.

use crate::Error;

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

pub(crate) const LDC: u8 = 0x12;
pub(crate) const LDC_W: u8 = 0x13;
pub(crate) const INVOKEVIRTUAL: u8 = 0xb6;
pub(crate) const INVOKESPECIAL: u8 = 0xb7;
pub(crate) const INVOKESTATIC: u8 = 0xb8;
pub(crate) const INVOKEINTERFACE: u8 = 0xb9;
pub(crate) const INVOKEDYNAMIC: u8 = 0xba;
const TABLESWITCH: u8 = 0xaa;
const LOOKUPSWITCH: u8 = 0xab;
pub(crate) const WIDE: u8 = 0xc4;
const IINC: u8 = 0x84;

/// Length of a fixed-size instruction including its opcode, or `None` for
/// the variable-length ones (switches, wide) and for undefined opcodes.
fn fixed_length(op: u8) -> Option<usize> {
    Some(match op {
        0x00..=0x0f => 1,
        0x10 => 2,        // bipush
        0x11 => 3,        // sipush
        0x12 => 2,        // ldc
        0x13 | 0x14 => 3, // ldc_w, ldc2_w
        0x15..=0x19 => 2, // xload
        0x1a..=0x35 => 1, // xload_n, xaload
        0x36..=0x3a => 2, // xstore
        0x3b..=0x83 => 1, // xstore_n, xastore, stack, arithmetic
        IINC => 3,
        0x85..=0x98 => 1, // conversions, comparisons
        0x99..=0xa8 => 3, // if*, goto, jsr
        0xa9 => 2,        // ret
        0xac..=0xb1 => 1, // returns
        0xb2..=0xb8 => 3, // field access, invokevirtual/special/static
        0xb9 | 0xba => 5, // invokeinterface, invokedynamic
        0xbb => 3,        // new
        0xbc => 2,        // newarray
        0xbd => 3,        // anewarray
        0xbe | 0xbf => 1, // arraylength, athrow
        0xc0 | 0xc1 => 3, // checkcast, instanceof
        0xc2 | 0xc3 => 1, // monitorenter/exit
        0xc5 => 4,        // multianewarray
        0xc6 | 0xc7 => 3, // ifnull, ifnonnull
        0xc8 | 0xc9 => 5, // goto_w, jsr_w
        _ => return None,
    })
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
            let pad = 3 - (pc % 4);
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
            Some(&IINC) => Ok(6),
            Some(0x15..=0x19 | 0x36..=0x3a | 0xa9) => Ok(4),
            Some(other) => Err(Error::Malformed(format!(
                "wide at code offset {pc} modifies opcode 0x{other:02x}"
            ))),
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

/// Whether the opcode is one of the five invoke instructions.
pub(crate) fn is_invoke(op: u8) -> bool {
    (INVOKEVIRTUAL..=INVOKEDYNAMIC).contains(&op)
}
