//! JVM opcodes (JVMS §6.5): the ones sprig names, the length of every
//! fixed-size instruction, and the families analysis and instrumentation
//! ask about.

pub const ICONST_0: u8 = 0x03;
pub const BIPUSH: u8 = 0x10;
pub const SIPUSH: u8 = 0x11;
pub const LDC: u8 = 0x12;
pub const LDC_W: u8 = 0x13;
pub const ILOAD: u8 = 0x15;
pub const LLOAD: u8 = 0x16;
pub const FLOAD: u8 = 0x17;
pub const DLOAD: u8 = 0x18;
pub const ALOAD: u8 = 0x19;
pub const ALOAD_0: u8 = 0x2a;
pub const ISTORE: u8 = 0x36;
pub const LSTORE: u8 = 0x37;
pub const FSTORE: u8 = 0x38;
pub const DSTORE: u8 = 0x39;
pub const ASTORE: u8 = 0x3a;
pub const DUP: u8 = 0x59;
pub const DUP_X1: u8 = 0x5a;
pub const SWAP: u8 = 0x5f;
pub const IINC: u8 = 0x84;
pub const IFEQ: u8 = 0x99;
pub const IF_ACMPNE: u8 = 0xa6;
pub const GOTO: u8 = 0xa7;
pub const JSR: u8 = 0xa8;
pub const RET: u8 = 0xa9;
pub const TABLESWITCH: u8 = 0xaa;
pub const LOOKUPSWITCH: u8 = 0xab;
pub const IRETURN: u8 = 0xac;
pub const RETURN: u8 = 0xb1;
pub const INVOKEVIRTUAL: u8 = 0xb6;
pub const INVOKESPECIAL: u8 = 0xb7;
pub const INVOKESTATIC: u8 = 0xb8;
pub const INVOKEINTERFACE: u8 = 0xb9;
pub const INVOKEDYNAMIC: u8 = 0xba;
pub const NEW: u8 = 0xbb;
pub const NEWARRAY: u8 = 0xbc;
pub const ANEWARRAY: u8 = 0xbd;
pub const ARRAYLENGTH: u8 = 0xbe;
pub const CHECKCAST: u8 = 0xc0;
pub const ATHROW: u8 = 0xbf;
pub const WIDE: u8 = 0xc4;
pub const MULTIANEWARRAY: u8 = 0xc5;
pub const IFNULL: u8 = 0xc6;
pub const IFNONNULL: u8 = 0xc7;
pub const GOTO_W: u8 = 0xc8;
pub const JSR_W: u8 = 0xc9;

/// Length of each fixed-size instruction including its opcode; 0 for the
/// variable-length ones (switches, `wide`) and for undefined opcodes.
const LENGTH: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut op = 0;
    while op < 256 {
        t[op] = match op as u8 {
            0x00..=0x0f => 1, // nop, aconst_null, xconst_n
            BIPUSH => 2,
            SIPUSH => 3,
            LDC => 2,
            LDC_W | 0x14 => 3,    // ldc_w, ldc2_w
            ILOAD..=ALOAD => 2,   // xload
            0x1a..=0x35 => 1,     // xload_n, xaload
            ISTORE..=ASTORE => 2, // xstore
            0x3b..=0x83 => 1,     // xstore_n, xastore, stack, arithmetic
            IINC => 3,
            0x85..=0x98 => 1, // conversions, comparisons
            IFEQ..=JSR => 3,  // if*, goto, jsr
            RET => 2,
            IRETURN..=RETURN => 1,    // returns
            0xb2..=INVOKESTATIC => 3, // field access, invokevirtual/special/static
            INVOKEINTERFACE | INVOKEDYNAMIC => 5,
            NEW => 3,
            0xbc => 2,          // newarray
            0xbd => 3,          // anewarray
            0xbe | ATHROW => 1, // arraylength, athrow
            0xc0 | 0xc1 => 3,   // checkcast, instanceof
            0xc2 | 0xc3 => 1,   // monitorenter/exit
            0xc5 => 4,          // multianewarray
            IFNULL | IFNONNULL => 3,
            GOTO_W | JSR_W => 5,
            _ => 0,
        };
        op += 1;
    }
    t
};

/// Length of a fixed-size instruction including its opcode, or `None` for
/// the variable-length ones (switches, `wide`) and for undefined opcodes.
pub fn fixed_length(op: u8) -> Option<usize> {
    match LENGTH[op as usize] {
        0 => None,
        n => Some(n as usize),
    }
}

/// Length of a `wide` instruction modifying `op`, or `None` when `wide`
/// cannot modify it.
pub fn wide_length(op: u8) -> Option<usize> {
    match op {
        IINC => Some(6),
        ILOAD..=ALOAD | ISTORE..=ASTORE | RET => Some(4),
        _ => None,
    }
}

/// Padding bytes after a `tableswitch`/`lookupswitch` opcode at `pc`, up to
/// the next multiple of four.
pub fn switch_padding(pc: usize) -> usize {
    3 - (pc % 4)
}

/// The five invoke instructions.
pub fn is_invoke(op: u8) -> bool {
    (INVOKEVIRTUAL..=INVOKEDYNAMIC).contains(&op)
}

/// Branches with a 16-bit offset: the conditionals, `goto` and `jsr`.
pub fn is_branch16(op: u8) -> bool {
    matches!(op, IFEQ..=JSR | IFNULL | IFNONNULL)
}

/// Conditional branches (16-bit offset).
pub fn is_conditional(op: u8) -> bool {
    matches!(op, IFEQ..=IF_ACMPNE | IFNULL | IFNONNULL)
}

/// The opposite condition of a conditional branch (`ifeq` ↔ `ifne`,
/// `ifnull` ↔ `ifnonnull`, ...).
pub fn negate(op: u8) -> u8 {
    match op {
        IFEQ..=IF_ACMPNE => IFEQ + ((op - IFEQ) ^ 1),
        IFNULL => IFNONNULL,
        _ => IFNULL,
    }
}

/// `ireturn` ... `return`.
pub fn is_return(op: u8) -> bool {
    matches!(op, IRETURN..=RETURN)
}

/// Whether control never falls through the instruction `op` (`wide_ret`:
/// the instruction is a `wide ret`).
pub fn ends_flow(op: u8, wide_ret: bool) -> bool {
    matches!(
        op,
        GOTO | GOTO_W | TABLESWITCH | LOOKUPSWITCH | ATHROW | RET | IRETURN..=RETURN
    ) || (op == WIDE && wide_ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_each_family() {
        assert_eq!(fixed_length(0x00), Some(1));
        assert_eq!(fixed_length(BIPUSH), Some(2));
        assert_eq!(fixed_length(0x14), Some(3));
        assert_eq!(fixed_length(INVOKEINTERFACE), Some(5));
        assert_eq!(fixed_length(0xc5), Some(4));
        assert_eq!(fixed_length(TABLESWITCH), None);
        assert_eq!(fixed_length(WIDE), None);
        assert_eq!(fixed_length(0xca), None);
        assert_eq!(fixed_length(0xff), None);
        assert_eq!(wide_length(IINC), Some(6));
        assert_eq!(wide_length(ALOAD), Some(4));
        assert_eq!(wide_length(NEW), None);
    }

    #[test]
    fn conditionals_negate_in_pairs() {
        for op in (IFEQ..=IF_ACMPNE).chain([IFNULL, IFNONNULL]) {
            assert!(is_conditional(op) && is_branch16(op));
            assert_ne!(negate(op), op);
            assert_eq!(negate(negate(op)), op);
        }
        assert!(is_branch16(GOTO) && !is_conditional(GOTO));
        assert!(ends_flow(RETURN, false) && ends_flow(WIDE, true) && !ends_flow(WIDE, false));
        assert!(!ends_flow(IFEQ, false));
    }
}
