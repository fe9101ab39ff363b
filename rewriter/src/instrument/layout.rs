//! The new layout of one `Code` attribute: where each original instruction
//! lands once the probes are inserted (`layout`), the instructions written
//! there with every branch moved (`emit`), and the exception table moved
//! with them. 16-bit branches that no longer reach are widened to
//! `goto_w`/`jsr_w`, or for a conditional `if<cond> L` to
//! `if<!cond> +8; goto_w L`, until a fixed point.

use super::bytes::{put_u16, put_u32};
use super::insns::{Insn, Scratch, index_of, unsupported};
use crate::SkipReason;
use crate::vocab::opcode::*;

/// What is inserted where, for one method.
pub(crate) struct Plan<'p> {
    /// Bytes pushing the id (iconst/bipush/sipush/ldc/ldc_w).
    pub(crate) id_push: &'p [u8],
    /// Bytes pushing the entry probe's argument: the id, or `aload_0`.
    pub(crate) entry_push: &'p [u8],
    pub(crate) entry_ref: u16,
    pub(crate) exit_ref: u16,
    /// Constructors get their entry probe after the `super(...)`/`this(...)`
    /// call(s) in `entry_after`; other methods at the start.
    pub(crate) constructor: bool,
    /// Sorted indices of the instructions after which the entry probe goes.
    pub(crate) entry_after: Vec<u32>,
    /// Receiver checks: (index of the virtual or interface call, the code
    /// placed before it), sorted by index.
    pub(crate) guards: Vec<(u32, Vec<u8>)>,
    /// Allocation probes: (index of the allocation instruction, the code
    /// placed right after it), sorted by index.
    pub(crate) after: Vec<(u32, Vec<u8>)>,
}

impl Plan<'_> {
    pub(super) fn probe_len(&self) -> u32 {
        self.id_push.len() as u32 + 3
    }
    fn entry_len(&self) -> u32 {
        self.entry_push.len() as u32 + 3
    }
    pub(super) fn prologue_len(&self) -> u32 {
        if self.constructor {
            0
        } else {
            self.entry_len()
        }
    }
    /// The receiver check placed before instruction `i`, if any.
    fn guard(&self, i: usize) -> Option<&[u8]> {
        self.guards
            .binary_search_by_key(&(i as u32), |g| g.0)
            .ok()
            .map(|k| self.guards[k].1.as_slice())
    }
    /// The allocation probe placed after instruction `i`, if any.
    fn after(&self, i: usize) -> Option<&[u8]> {
        self.after
            .binary_search_by_key(&(i as u32), |g| g.0)
            .ok()
            .map(|k| self.after[k].1.as_slice())
    }
    fn entry_after(&self, i: usize) -> bool {
        self.constructor && self.entry_after.binary_search(&(i as u32)).is_ok()
    }
    fn emit_exit(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.id_push);
        out.push(INVOKESTATIC);
        put_u16(out, self.exit_ref);
    }
    fn emit_entry(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.entry_push);
        out.push(INVOKESTATIC);
        put_u16(out, self.entry_ref);
    }
}

/// Size of instruction `i` placed at new offset `at`.
fn new_size(ins: &Insn, wide: bool, at: u32) -> u32 {
    match ins.op {
        TABLESWITCH | LOOKUPSWITCH => {
            let old_pad = 3 - (ins.off % 4);
            let new_pad = 3 - (at % 4);
            ins.len - old_pad + new_pad
        }
        GOTO | JSR if wide => 5,
        op if wide && is_branch16(op) => 8,
        _ => ins.len,
    }
}

/// Instructions after which control never falls through.
pub(crate) fn is_unconditional(code: &[u8], ins: &Insn) -> bool {
    ends_flow(ins.op, code.get(ins.off as usize + 1) == Some(&RET))
}

/// Computes `s.pre`/`s.at`, widening branches until every 16-bit branch
/// reaches. Returns the end of the relocated original code.
///
/// With `frames` (the original frame offsets, when the method needs stack
/// map frames), a far conditional branch whose next instruction has no
/// frame is not widened (that would need a new frame there) but sent
/// through a trampoline: `goto_w L` placed after the nearest unconditional
/// instruction between the branch and L, whose frame is a copy of L's.
pub(crate) fn layout(
    s: &mut Scratch,
    plan: &Plan<'_>,
    code: &[u8],
    frames: Option<&[u32]>,
) -> Result<u32, SkipReason> {
    let n = s.insns.len();
    s.pre.clear();
    s.pre.resize(n, 0);
    s.at.clear();
    s.at.resize(n, 0);
    s.wide.clear();
    s.wide.resize(n, false);
    s.tramps.clear();
    s.tramp_at.clear();
    let probe = plan.probe_len();
    loop {
        let mut pos = plan.prologue_len();
        s.tramp_at.clear();
        let mut k = 0;
        for (i, ins) in s.insns.iter().enumerate() {
            s.pre[i] = pos;
            if is_return(ins.op) {
                pos += probe;
            }
            if let Some(g) = plan.guard(i) {
                pos += g.len() as u32;
            }
            s.at[i] = pos;
            pos += new_size(ins, s.wide[i], pos);
            if let Some(a) = plan.after(i) {
                pos += a.len() as u32;
            }
            if plan.entry_after(i) {
                pos += plan.entry_len();
            }
            while k < s.tramps.len() && s.tramps[k].0 as usize == i {
                s.tramp_at.push(pos);
                pos += 5;
                k += 1;
            }
        }
        let mut changed = false;
        for i in 0..n {
            let ins = s.insns[i];
            if !is_branch16(ins.op) || s.wide[i] {
                continue;
            }
            let t = s.targets[ins.t0 as usize] as usize;
            let tramp = s.tramps.iter().position(|&(_, c)| c as usize == i);
            let dest = match tramp {
                Some(k) => s.tramp_at[k],
                None => s.pre[t],
            };
            let d = i64::from(dest) - i64::from(s.at[i]);
            if d >= i64::from(i16::MIN) && d <= i64::from(i16::MAX) {
                continue;
            }
            let conditional = ins.op != GOTO && ins.op != JSR;
            let next_has_frame = |f: &[u32]| {
                s.insns
                    .get(i + 1)
                    .is_some_and(|x| f.binary_search(&x.off).is_ok())
            };
            match frames {
                Some(f) if conditional && !next_has_frame(f) => {
                    if tramp.is_some() {
                        return Err(unsupported(
                            "a trampoline for a far conditional branch is out of reach",
                        ));
                    }
                    let found = if t < i {
                        (t..i).rev().find(|&j| is_unconditional(code, &s.insns[j]))
                    } else {
                        (i + 1..t).find(|&j| is_unconditional(code, &s.insns[j]))
                    };
                    let u = found.ok_or_else(|| {
                        unsupported("no place for a trampoline near a far conditional branch")
                    })?;
                    let at = s.tramps.partition_point(|&x| x < (u as u32, i as u32));
                    s.tramps.insert(at, (u as u32, i as u32));
                    // `tramp_at` is stale now: lay out again before
                    // looking at any other trampoline.
                    changed = true;
                    break;
                }
                _ => s.wide[i] = true,
            }
            changed = true;
        }
        if !changed {
            return Ok(pos);
        }
    }
}

/// Conditional branches widened into `if<!cond> +8; goto_w`: the
/// instruction after each one becomes a branch target.
pub(crate) fn widened_conditionals(s: &Scratch) -> impl Iterator<Item = usize> + '_ {
    s.insns
        .iter()
        .enumerate()
        .filter(|(i, ins)| s.wide[*i] && ins.op != GOTO && ins.op != JSR)
        .map(|(i, _)| i)
}

/// Writes the relocated code (probes included, handler excluded).
pub(crate) fn emit(code: &[u8], s: &Scratch, plan: &Plan<'_>, out: &mut Vec<u8>) {
    if !plan.constructor {
        plan.emit_entry(out);
    }
    for (i, ins) in s.insns.iter().enumerate() {
        if is_return(ins.op) {
            plan.emit_exit(out);
        }
        if let Some(g) = plan.guard(i) {
            out.extend_from_slice(g);
        }
        let at = s.at[i];
        let target = |k: u32| -> i32 {
            (i64::from(s.pre[s.targets[(ins.t0 + k) as usize] as usize]) - i64::from(at)) as i32
        };
        let old = &code[ins.off as usize..(ins.off + ins.len) as usize];
        let tramp = s.tramps.iter().position(|&(_, c)| c as usize == i);
        match ins.op {
            op if is_branch16(op) && tramp.is_some() => {
                let k = tramp.unwrap_or(0);
                out.push(op);
                put_u16(
                    out,
                    (i64::from(s.tramp_at[k]) - i64::from(at)) as i16 as u16,
                );
            }
            op if is_branch16(op) && s.wide[i] => {
                if op == GOTO || op == JSR {
                    out.push(if op == GOTO { GOTO_W } else { JSR_W });
                    put_u32(out, target(0) as u32);
                } else {
                    out.push(negate(op));
                    put_u16(out, 8);
                    out.push(GOTO_W);
                    put_u32(out, (target(0) - 3) as u32);
                }
            }
            op if is_branch16(op) => {
                out.push(op);
                put_u16(out, target(0) as i16 as u16);
            }
            GOTO_W | JSR_W => {
                out.push(ins.op);
                put_u32(out, target(0) as u32);
            }
            TABLESWITCH | LOOKUPSWITCH => {
                out.push(ins.op);
                for _ in 0..(3 - at % 4) {
                    out.push(0);
                }
                let old_pad = 3 - (ins.off % 4) as usize;
                let body = &old[1 + old_pad..];
                put_u32(out, target(0) as u32);
                if ins.op == TABLESWITCH {
                    out.extend_from_slice(&body[4..12]);
                    for k in 1..ins.tn {
                        put_u32(out, target(k) as u32);
                    }
                } else {
                    out.extend_from_slice(&body[4..8]);
                    for k in 1..ins.tn {
                        let m = 8 + 8 * (k as usize - 1);
                        out.extend_from_slice(&body[m..m + 4]);
                        put_u32(out, target(k) as u32);
                    }
                }
            }
            _ => out.extend_from_slice(old),
        }
        if let Some(a) = plan.after(i) {
            out.extend_from_slice(a);
        }
        if plan.entry_after(i) {
            plan.emit_entry(out);
        }
        for (k, &(u, c)) in s.tramps.iter().enumerate() {
            if u as usize == i {
                let dest = s.pre[s.targets_of(c as usize)[0] as usize];
                out.push(GOTO_W);
                put_u32(
                    out,
                    (i64::from(dest) - i64::from(s.tramp_at[k])) as i32 as u32,
                );
            }
        }
    }
}

/// Rewrites the exception table `old` (8-byte entries) into `out`.
pub(crate) fn emit_exception_table(
    old: &[u8],
    code_len: u32,
    s: &Scratch,
    end: u32,
    out: &mut Vec<u8>,
) -> Result<(), SkipReason> {
    let strict = |off: u16, allow_end: bool| -> Result<u32, SkipReason> {
        let off = u32::from(off);
        if allow_end && off == code_len {
            return Ok(end);
        }
        index_of(&s.insns, off)
            .map(|i| s.pre[i as usize])
            .ok_or_else(|| {
                unsupported(format!(
                    "exception table offset {off} is not an instruction start"
                ))
            })
    };
    for e in old.chunks_exact(8) {
        let start = strict(u16::from_be_bytes([e[0], e[1]]), false)?;
        let stop = strict(u16::from_be_bytes([e[2], e[3]]), true)?;
        let handler = strict(u16::from_be_bytes([e[4], e[5]]), false)?;
        put_u16(out, start as u16);
        put_u16(out, stop as u16);
        put_u16(out, handler as u16);
        out.extend_from_slice(&e[6..8]);
    }
    Ok(())
}
