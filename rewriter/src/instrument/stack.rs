//! The operand stack's shape at each return instruction, for gated exit
//! probes (`ProbeSet::gate`): a gated exit branches over the probe call to
//! the return, which then needs a stack map frame of its own, and sprig
//! writes that frame only where it knows the whole stack: nothing below
//! the return value.
//!
//! Verified code (class files with stack map frames) has a frame at every
//! branch target and after every instruction that ends the flow, so the
//! code from one frame to the next is straight-line: one forward pass,
//! starting again from each frame's stack, follows every instruction's
//! effect on the number of stack entries. Long and double values are one
//! entry of category 2, as in the frames; the category decides what the
//! `pop2` and `dup2` families do. An instruction the pass does not follow
//! (`jsr`, `ret`, a member it cannot read) leaves the stack unknown until
//! the next frame, and a return with an unknown stack keeps its exit
//! unconditional.

use super::classfile::ClassFile;
use super::frames::Full;
use super::insns::Insn;
use crate::vocab::opcode::*;

/// Verification type tags of the two category-2 types.
const ITEM_DOUBLE: u8 = 3;
const ITEM_LONG: u8 = 4;

/// For each instruction: `true` at a return whose operand stack holds
/// its value alone (`ireturn`..`areturn`) or nothing (`return`).
/// `frames` are the method's frames in full form, at their original
/// offsets (empty when it has none: straight-line code).
pub(crate) fn lone_value_returns(
    code: &[u8],
    insns: &[Insn],
    frames: &[Full],
    cf: &ClassFile<'_>,
) -> Vec<bool> {
    let mut out = vec![false; insns.len()];
    let mut st: Option<Vec<u8>> = Some(Vec::new());
    let mut fi = 0;
    for (j, ins) in insns.iter().enumerate() {
        while fi < frames.len() && frames[fi].off < ins.off {
            fi += 1;
        }
        if fi < frames.len() && frames[fi].off == ins.off {
            st = Some(frames[fi].stack.iter().map(|v| category(v.0)).collect());
            fi += 1;
        }
        if is_return(ins.op) {
            let want = usize::from(ins.op != RETURN);
            out[j] = st.as_ref().is_some_and(|v| v.len() == want);
        }
        st = st.and_then(|mut v| step(&mut v, code, ins, cf).map(|()| v));
        if ends_flow(ins.op, false) {
            st = None;
        }
    }
    out
}

fn category(tag: u8) -> u8 {
    if tag == ITEM_LONG || tag == ITEM_DOUBLE {
        2
    } else {
        1
    }
}

/// Entries of category 2 a field or return descriptor's type takes: 0 for
/// `V`, 2 for `J`/`D`, 1 otherwise.
fn type_category(t: &[u8]) -> Option<u8> {
    match t.first()? {
        b'V' => Some(0),
        b'J' | b'D' => Some(2),
        _ => Some(1),
    }
}

fn pop(v: &mut Vec<u8>, n: usize) -> Option<()> {
    let k = v.len().checked_sub(n)?;
    v.truncate(k);
    Some(())
}

fn push(v: &mut Vec<u8>, cat: u8) {
    if cat != 0 {
        v.push(cat);
    }
}

/// The top `n` entries, each of category 1, popped (for `dup`, `swap`).
fn pop1s(v: &mut Vec<u8>, n: usize) -> Option<Vec<u8>> {
    let k = v.len().checked_sub(n)?;
    let top = v.split_off(k);
    top.iter().all(|&c| c == 1).then_some(top)
}

/// Pops enough entries for two slots: one of category 2 or two of
/// category 1; returns them (bottom first).
fn pop_two_slots(v: &mut Vec<u8>) -> Option<Vec<u8>> {
    match *v.last()? {
        2 => Some(vec![v.pop()?]),
        _ => {
            let k = v.len().checked_sub(2)?;
            let top = v.split_off(k);
            (top[0] == 1).then_some(top)
        }
    }
}

/// Parameter entries and the return's category of a method descriptor.
fn method_shape(d: &[u8]) -> Option<(usize, u8)> {
    let params = super::code::param_types(d)?;
    let close = d.iter().position(|&c| c == b')')?;
    Some((params.len(), type_category(&d[close + 1..])?))
}

fn u16_at(code: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*code.get(at)?, *code.get(at + 1)?]))
}

/// Applies one instruction's effect to the stack; `None` when the pass
/// cannot follow it.
fn step(v: &mut Vec<u8>, code: &[u8], ins: &Insn, cf: &ClassFile<'_>) -> Option<()> {
    let op = ins.op;
    let at = ins.off as usize;
    match op {
        0x00 => {}                                                 // nop
        0x01..=0x08 | 0x0b..=0x0d | BIPUSH | SIPUSH => push(v, 1), // aconst_null, iconst, fconst
        0x09 | 0x0a | 0x0e | 0x0f => push(v, 2),                   // lconst, dconst
        LDC | LDC_W => push(v, 1),
        0x14 => push(v, 2), // ldc2_w
        ILOAD | FLOAD | ALOAD => push(v, 1),
        LLOAD | DLOAD => push(v, 2),
        0x1a..=0x1d | 0x22..=0x25 | 0x2a..=0x2d => push(v, 1), // iload_n, fload_n, aload_n
        0x1e..=0x21 | 0x26..=0x29 => push(v, 2),               // lload_n, dload_n
        0x2e | 0x30 | 0x32..=0x35 => {
            // iaload, faload, aaload, baload, caload, saload
            pop(v, 2)?;
            push(v, 1);
        }
        0x2f | 0x31 => {
            // laload, daload
            pop(v, 2)?;
            push(v, 2);
        }
        ISTORE..=ASTORE | 0x3b..=0x4e => pop(v, 1)?, // xstore, xstore_n
        0x4f..=0x56 => pop(v, 3)?,                   // xastore
        0x57 => {
            // pop
            pop1s(v, 1)?;
        }
        0x58 => {
            // pop2
            pop_two_slots(v)?;
        }
        DUP => {
            let a = pop1s(v, 1)?;
            v.extend_from_slice(&a);
            v.extend_from_slice(&a);
        }
        DUP_X1 => {
            let t = pop1s(v, 2)?;
            v.extend_from_slice(&[t[1], t[0], t[1]]);
        }
        0x5b => {
            // dup_x2: v1 of category 1 over two slots
            let v1 = pop1s(v, 1)?;
            let below = pop_two_slots(v)?;
            v.extend_from_slice(&v1);
            v.extend_from_slice(&below);
            v.extend_from_slice(&v1);
        }
        0x5c => {
            // dup2
            let top = pop_two_slots(v)?;
            v.extend_from_slice(&top);
            v.extend_from_slice(&top);
        }
        0x5d => {
            // dup2_x1: two slots over one category-1 entry
            let top = pop_two_slots(v)?;
            let below = pop1s(v, 1)?;
            v.extend_from_slice(&top);
            v.extend_from_slice(&below);
            v.extend_from_slice(&top);
        }
        0x5e => {
            // dup2_x2: two slots over two slots
            let top = pop_two_slots(v)?;
            let below = pop_two_slots(v)?;
            v.extend_from_slice(&top);
            v.extend_from_slice(&below);
            v.extend_from_slice(&top);
        }
        SWAP => {
            let t = pop1s(v, 2)?;
            v.extend_from_slice(&[t[1], t[0]]);
        }
        0x60..=0x73 => {
            // add, sub, mul, div, rem: i, l, f, d in turn
            pop(v, 2)?;
            push(v, if (op - 0x60) % 2 == 1 { 2 } else { 1 });
        }
        0x74..=0x77 => {
            // neg
            pop(v, 1)?;
            push(v, if (op - 0x74) % 2 == 1 { 2 } else { 1 });
        }
        0x78..=0x83 => {
            // shifts and bitwise: int forms even, long forms odd
            pop(v, 2)?;
            push(v, if (op - 0x78) % 2 == 1 { 2 } else { 1 });
        }
        IINC => {}
        0x85..=0x93 => {
            // conversions
            pop(v, 1)?;
            push(
                v,
                if matches!(op, 0x85 | 0x87 | 0x8a | 0x8c | 0x8d | 0x8f) {
                    2
                } else {
                    1
                },
            );
        }
        0x94..=0x98 => {
            // lcmp, fcmpl, fcmpg, dcmpl, dcmpg
            pop(v, 2)?;
            push(v, 1);
        }
        0x99..=0x9e | IFNULL | IFNONNULL => pop(v, 1)?, // if<cond>
        0x9f..=IF_ACMPNE => pop(v, 2)?,                 // if_icmp<cond>, if_acmp<cond>
        GOTO | GOTO_W => {}
        TABLESWITCH | LOOKUPSWITCH => pop(v, 1)?,
        IRETURN..=0xb0 => pop(v, 1)?,
        RETURN => {}
        0xb2..=0xb5 => {
            // getstatic, putstatic, getfield, putfield
            let d = cf.ref_descriptor(u16_at(code, at + 1)?).ok()?;
            let c = type_category(d)?;
            match op {
                0xb2 => push(v, c),
                0xb3 => pop(v, 1)?,
                0xb4 => {
                    pop(v, 1)?;
                    push(v, c);
                }
                _ => pop(v, 2)?,
            }
        }
        INVOKEVIRTUAL..=INVOKEDYNAMIC => {
            let d = cf.ref_descriptor(u16_at(code, at + 1)?).ok()?;
            let (n, ret) = method_shape(d)?;
            let receiver = usize::from(op != INVOKESTATIC && op != INVOKEDYNAMIC);
            pop(v, n + receiver)?;
            push(v, ret);
        }
        NEW => push(v, 1),
        0xbc | 0xbd | 0xbe | 0xc0 | 0xc1 => {
            // newarray, anewarray, arraylength, checkcast, instanceof
            pop(v, 1)?;
            push(v, 1);
        }
        ATHROW => pop(v, 1)?,
        0xc2 | 0xc3 => pop(v, 1)?, // monitorenter, monitorexit
        0xc5 => {
            // multianewarray
            let dims = *code.get(at + 3)?;
            pop(v, usize::from(dims))?;
            push(v, 1);
        }
        WIDE => match *code.get(at + 1)? {
            ILOAD | FLOAD | ALOAD => push(v, 1),
            LLOAD | DLOAD => push(v, 2),
            ISTORE..=ASTORE => pop(v, 1)?,
            IINC => {}
            _ => return None,
        },
        _ => return None, // jsr, ret, jsr_w, undefined
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dup_family_follows_categories() {
        // dup2 of a long copies one entry; of two ints, two.
        let mut v = vec![1, 2];
        assert_eq!(pop_two_slots(&mut v), Some(vec![2]));
        assert_eq!(v, vec![1]);
        let mut v = vec![1, 1, 1];
        assert_eq!(pop_two_slots(&mut v), Some(vec![1, 1]));
        assert_eq!(v, vec![1]);
        // Two slots cannot be half of a long.
        let mut v = vec![2, 1];
        assert_eq!(pop_two_slots(&mut v), None);
        assert_eq!(pop1s(&mut vec![2], 1), None);
    }

    #[test]
    fn descriptors_give_entries_and_categories() {
        assert_eq!(method_shape(b"(IJLjava/lang/String;[D)V"), Some((4, 0)));
        assert_eq!(method_shape(b"()J"), Some((0, 2)));
        assert_eq!(method_shape(b"(D)Ljava/lang/Object;"), Some((1, 1)));
        assert_eq!(type_category(b"D"), Some(2));
        assert_eq!(type_category(b"[J"), Some(1));
    }
}
