//! Where `this` gets initialized in a constructor. Instrumentation puts
//! the entry probe after each such `super(...)`/`this(...)` call and lets
//! the catch-all cover only code where `this` is initialized.

use super::classfile::ClassFile;
use super::insns::{Scratch, index_of, unsupported};
use crate::SkipReason;
use crate::vocab::opcode::{INVOKESPECIAL, NEW, RET, ends_flow};

/// Where `this` is initialized in a constructor, from a flow analysis
/// over branches, switches, `jsr` and exception edges.
pub(crate) struct CtorFlow {
    /// Indices of the `invokespecial <init>` calls that initialize `this`
    /// (one per path; several when branches call different constructors).
    pub(crate) calls: Vec<u32>,
    /// Per instruction: reachable with `this` already initialized.
    pub(crate) init: Vec<bool>,
}

/// Follows every path of a constructor, tracking whether `this` is
/// initialized and how many `new` objects await their `<init>` call: an
/// `invokespecial <init>` with none pending initializes `this`.
pub(crate) fn constructor_flow(
    code: &[u8],
    exceptions: &[u8],
    s: &Scratch,
    cf: &ClassFile<'_>,
) -> Result<CtorFlow, SkipReason> {
    let n = s.insns.len();
    let mut handlers = Vec::with_capacity(exceptions.len() / 8);
    for e in exceptions.chunks_exact(8) {
        let start = u32::from(u16::from_be_bytes([e[0], e[1]]));
        let end = u32::from(u16::from_be_bytes([e[2], e[3]]));
        let h = u32::from(u16::from_be_bytes([e[4], e[5]]));
        let hi = index_of(&s.insns, h)
            .ok_or_else(|| unsupported(format!("handler at {h} is not an instruction start")))?;
        handlers.push((start, end, hi as usize));
    }
    let mut state: Vec<Option<(bool, u32)>> = vec![None; n];
    let mut work = vec![0usize];
    state[0] = Some((false, 0));
    let mut calls = Vec::new();
    fn merge(
        state: &mut [Option<(bool, u32)>],
        work: &mut Vec<usize>,
        j: usize,
        st: (bool, u32),
    ) -> Result<(), SkipReason> {
        match state[j] {
            None => {
                state[j] = Some(st);
                work.push(j);
                Ok(())
            }
            Some(x) if x == st => Ok(()),
            Some(_) => Err(unsupported(
                "constructor: paths disagree on whether this is initialized",
            )),
        }
    }
    while let Some(i) = work.pop() {
        let Some((init, pending)) = state[i] else {
            continue;
        };
        let ins = s.insns[i];
        for &(st, en, h) in &handlers {
            if ins.off >= st && ins.off < en {
                merge(&mut state, &mut work, h, (init, 0))?;
            }
        }
        let mut out = (init, pending);
        match ins.op {
            NEW => {
                out.1 = pending
                    .checked_add(1)
                    .ok_or_else(|| unsupported("too many new"))?
            }
            INVOKESPECIAL => {
                let p = ins.off as usize;
                let idx = u16::from_be_bytes([code[p + 1], code[p + 2]]);
                if cf.member_name(idx)? == b"<init>" {
                    if pending > 0 {
                        out.1 = pending - 1;
                    } else if !init {
                        out.0 = true;
                        calls.push(i as u32);
                    } else {
                        return Err(unsupported(
                            "constructor: <init> called on an initialized this",
                        ));
                    }
                }
            }
            _ => {}
        }
        for &t in s.targets_of(i) {
            merge(&mut state, &mut work, t as usize, out)?;
        }
        let ends = ends_flow(ins.op, code.get(ins.off as usize + 1) == Some(&RET));
        if !ends && i + 1 < n {
            merge(&mut state, &mut work, i + 1, out)?;
        }
    }
    if calls.is_empty() {
        return Err(unsupported("constructor without a super()/this() call"));
    }
    calls.sort_unstable();
    calls.dedup();
    let init = state.iter().map(|x| matches!(x, Some((true, _)))).collect();
    Ok(CtorFlow { calls, init })
}
