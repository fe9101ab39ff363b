//! Decoding and rewriting of one `Code` attribute.
//!
//! The original instructions are kept in order; probe code is inserted
//! before every return (`exit(id)`), at the method start (`entry(id)`), or —
//! in constructors — right after the `super(...)`/`this(...)` call, and a
//! catch-all handler is appended after the original code. Every offset in
//! the attribute (branches, switches, exception table, stack map frames,
//! debug tables, type annotations) is moved to the new layout, which
//! `layout.rs` computes.

use super::bytes::{put_u16, put_u32};
use super::classfile::ClassFile;
use super::frames;
use super::insns::{Scratch, decode, index_of, unsupported};
use super::layout::{Plan, emit, emit_exception_table, layout, widened_conditionals};
use super::pool::Pool;
use crate::SkipReason;
use crate::vocab::access::ACC_STATIC;
use crate::vocab::opcode::*;
use crate::vocab::reader::Reader;

/// The parts of a `Code` attribute.
pub(crate) struct CodeAttr<'a> {
    pub(crate) name: u16,
    pub(crate) max_stack: u16,
    pub(crate) max_locals: u16,
    pub(crate) code: &'a [u8],
    pub(crate) exceptions: &'a [u8],
    /// (name index, body) of each nested attribute.
    pub(crate) attrs: Vec<(u16, &'a [u8])>,
}

impl<'a> CodeAttr<'a> {
    /// Parses a whole `Code` attribute, header included.
    pub(crate) fn parse(attr: &'a [u8]) -> Result<Self, SkipReason> {
        let mut r = Reader::new(attr);
        let name = r.u16("Code name")?;
        let _len = r.u32("Code length")?;
        let max_stack = r.u16("max_stack")?;
        let max_locals = r.u16("max_locals")?;
        let code_len = r.u32("code_length")? as usize;
        if code_len == 0 || code_len > 65535 {
            return Err(unsupported(format!("code_length {code_len} out of range")));
        }
        let code = r.bytes(code_len, "code")?;
        let ne = r.u16("exception table length")? as usize;
        let exceptions = r.bytes(8 * ne, "exception table")?;
        let na = r.u16("Code attributes count")? as usize;
        let mut attrs = Vec::with_capacity(na);
        for _ in 0..na {
            let n = r.u16("attribute name")?;
            let l = r.u32("attribute length")? as usize;
            attrs.push((n, r.bytes(l, "attribute")?));
        }
        if r.remaining() != 0 {
            return Err(unsupported(
                "Code attribute length does not match its contents",
            ));
        }
        Ok(CodeAttr {
            name,
            max_stack,
            max_locals,
            code,
            exceptions,
            attrs,
        })
    }
}

/// Everything `rewrite` needs besides the code itself.
pub(crate) struct MethodJob<'p, 'a> {
    pub(crate) plan: Plan<'p>,
    pub(crate) access: u16,
    pub(crate) descriptor: &'p [u8],
    /// Checks asked for (offset of the call in the original code, site id,
    /// which check), and the Methodrefs of the receiver check and the reach
    /// check.
    pub(crate) guard_sites: &'p [crate::GuardSite],
    pub(crate) guard_refs: (u16, u16),
    /// Allocation probes, when asked for.
    pub(crate) alloc: Option<AllocJob<'a>>,
}

/// The allocation probes of one method: the Methodrefs of the object,
/// array and array length probes (the last 0 when there is none), the site
/// ids' source and the method's id.
pub(crate) struct AllocJob<'p> {
    pub(crate) refs: (u16, u16, u16),
    pub(crate) site: &'p mut dyn FnMut(&crate::AllocSite) -> u32,
    pub(crate) method: u32,
}

/// JVMS `newarray` type codes as field descriptors.
fn newarray_descriptor(atype: u8) -> Option<&'static str> {
    Some(match atype {
        4 => "[Z",
        5 => "[C",
        6 => "[F",
        7 => "[D",
        8 => "[B",
        9 => "[S",
        10 => "[I",
        11 => "[J",
        _ => return None,
    })
}

/// The class index of an array type whose `clone()` the Methodref `idx`
/// calls (`[I.clone()Ljava/lang/Object;`), `None` for any other method.
fn array_clone(cf: &ClassFile<'_>, idx: u16) -> Result<Option<u16>, SkipReason> {
    if cf.member_name(idx)? != b"clone" || cf.member_descriptor(idx)? != b"()Ljava/lang/Object;" {
        return Ok(None);
    }
    let (class, _) = cf.pair(idx, crate::vocab::tag::METHODREF)?;
    Ok(cf.class_name(class)?.starts_with(b"[").then_some(class))
}

/// Whether the `invokespecial` of Methodref `idx` is an instance's
/// `Object.clone()`: `java/lang/Object.clone()Ljava/lang/Object;`, what a
/// `super.clone()` compiles to in a class whose superclass is `Object`.
/// A `super.clone()` that names another superclass calls that class's
/// `clone()` (or one it inherits): not counted here.
fn object_clone(cf: &ClassFile<'_>, idx: u16) -> Result<bool, SkipReason> {
    if cf.cp.get(idx as usize).map(|s| s.tag) != Some(crate::vocab::tag::METHODREF)
        || cf.member_name(idx)? != b"clone"
        || cf.member_descriptor(idx)? != b"()Ljava/lang/Object;"
    {
        return Ok(false);
    }
    let (class, _) = cf.pair(idx, crate::vocab::tag::METHODREF)?;
    Ok(cf.class_name(class)? == b"java/lang/Object")
}

/// The allocation probes of a method's code: one (instruction index,
/// code) per allocation instruction (an array's `clone()` and an
/// instance's `Object.clone()` among them), sorted.
fn alloc_probes(
    code: &[u8],
    cf: &ClassFile<'_>,
    s: &Scratch,
    a: &mut AllocJob<'_>,
    pool: &mut Pool<'_, '_>,
) -> Result<Vec<(u32, Vec<u8>)>, SkipReason> {
    let mut out = Vec::new();
    for (i, ins) in s.insns.iter().enumerate() {
        let at = ins.off as usize;
        let cp = || u16::from_be_bytes([code[at + 1], code[at + 2]]);
        let name = |idx: u16| -> Result<String, SkipReason> {
            Ok(String::from_utf8_lossy(cf.class_name(idx)?).into_owned())
        };
        // `cast`: the array class a `clone()`'s Object is cast to before
        // `arraylength`; `clone`: the copy of an instance, passed as it is.
        let (descriptor, dims, object, cast, clone) = match ins.op {
            NEW if cf.major >= 49 => (format!("L{};", name(cp())?), 0u8, true, None, false),
            NEWARRAY => match newarray_descriptor(code[at + 1]) {
                Some(d) => (d.to_string(), 1, false, None, false),
                None => return Err(unsupported("newarray with a bad type code")),
            },
            ANEWARRAY => {
                let n = name(cp())?;
                let d = if n.starts_with('[') {
                    format!("[{n}")
                } else {
                    format!("[L{n};")
                };
                (d, 1, false, None, false)
            }
            MULTIANEWARRAY => (name(cp())?, code[at + 3], false, None, false),
            // An array's `clone()` allocates an array of the same type
            // and length (one dimension: the copy is shallow). A copy of
            // a reference array has the class of the array copied, which
            // can be an array of a subtype of what the code names (a
            // generic `T[]` is `Object[]` here): passed as it is, for the
            // agent to name.
            INVOKEVIRTUAL => match array_clone(cf, cp())? {
                Some(class) => {
                    let n = name(class)?;
                    if n.starts_with("[L") || n.starts_with("[[") {
                        (n, 0, false, None, true)
                    } else {
                        (n, 1, false, Some(class), false)
                    }
                }
                None => continue,
            },
            // `super.clone()` reaching `Object.clone()` copies `this`: of
            // this class or of a subclass that inherits the method (the
            // agent names the class it finds).
            INVOKESPECIAL if object_clone(cf, cp())? => {
                (format!("L{};", name(cf.this_class)?), 0, false, None, true)
            }
            _ => continue,
        };
        let site = (a.site)(&crate::AllocSite {
            method: a.method,
            offset: ins.off,
            descriptor,
            dims,
            clone,
        });
        let mut push = [0u8; 3];
        let n = id_push(site, pool, &mut push)?;
        let mut c = Vec::with_capacity(10);
        let by_length = !object && dims == 1 && a.refs.2 != 0;
        if object {
            let idx = cp();
            match u8::try_from(idx) {
                Ok(b) => c.extend_from_slice(&[LDC, b]),
                Err(_) => {
                    c.push(LDC_W);
                    put_u16(&mut c, idx);
                }
            }
        } else {
            c.push(DUP);
            if by_length {
                if let Some(class) = cast {
                    // `clone()` leaves an Object: the verifier needs the
                    // array type before `arraylength`.
                    c.push(CHECKCAST);
                    put_u16(&mut c, class);
                }
                c.push(ARRAYLENGTH);
            }
        }
        c.extend_from_slice(&push[..n]);
        c.push(INVOKESTATIC);
        put_u16(
            &mut c,
            match (object, by_length) {
                (true, _) => a.refs.0,
                (false, true) => a.refs.2,
                (false, false) => a.refs.1,
            },
        );
        out.push((i as u32, c));
    }
    Ok(out)
}

/// The implicit frame at method start: `this` (uninitialized in
/// constructors) and the parameters.
fn initial_locals(
    cf: &ClassFile<'_>,
    job: &MethodJob<'_, '_>,
    pool: &mut Pool<'_, '_>,
) -> Result<Vec<frames::VType>, SkipReason> {
    use frames::VType;
    let mut v = Vec::new();
    if job.access & ACC_STATIC == 0 {
        v.push(if job.plan.constructor {
            VType(6, 0)
        } else {
            VType(7, cf.this_class)
        });
    }
    let params = param_types(job.descriptor).ok_or_else(|| unsupported("bad method descriptor"))?;
    for ty in params {
        v.push(match ty {
            [b'B' | b'C' | b'I' | b'S' | b'Z'] => VType(1, 0),
            [b'F'] => VType(2, 0),
            [b'J'] => VType(4, 0),
            [b'D'] => VType(3, 0),
            [b'L', name @ .., b';'] => VType(7, pool.class(name)?),
            _ => VType(7, pool.class(ty)?),
        });
    }
    Ok(v)
}

/// Rewrites one `Code` attribute (header included) with probes.
pub(crate) fn rewrite(
    attr: &[u8],
    cf: &ClassFile<'_>,
    job: &mut MethodJob<'_, '_>,
    pool: &mut Pool<'_, '_>,
    s: &mut Scratch,
) -> Result<Vec<u8>, SkipReason> {
    let ca = CodeAttr::parse(attr)?;
    let code_len = ca.code.len() as u32;
    decode(ca.code, s)?;
    let mut max_locals = ca.max_locals;
    job.plan.guards.clear();
    for g in job.guard_sites {
        let off = g.offset;
        let i = index_of(&s.insns, off)
            .ok_or_else(|| unsupported(format!("guarded call at {off} is not an instruction")))?;
        let op = s.insns[i as usize].op;
        let mut site_push = [0u8; 3];
        let n = id_push(g.site, pool, &mut site_push)?;
        let code = match (op, g.check) {
            (INVOKEVIRTUAL | INVOKEINTERFACE, crate::Check::Receiver) => {
                let at = off as usize;
                let cp = u16::from_be_bytes([ca.code[at + 1], ca.code[at + 2]]);
                let desc = cf.member_descriptor(cp)?;
                let (code, locals) =
                    guard_code(desc, &site_push[..n], job.guard_refs.0, ca.max_locals)?;
                max_locals = max_locals.max(locals);
                code
            }
            (
                INVOKEVIRTUAL | INVOKEINTERFACE | INVOKESTATIC | INVOKESPECIAL,
                crate::Check::Reach,
            ) => {
                let mut code = site_push[..n].to_vec();
                code.push(INVOKESTATIC);
                put_u16(&mut code, job.guard_refs.1);
                code
            }
            (INVOKESTATIC | INVOKESPECIAL, crate::Check::Receiver) => {
                return Err(unsupported(format!(
                    "receiver check before the static or special call at {off}"
                )));
            }
            _ => {
                return Err(unsupported(format!(
                    "guarded call at {off} is opcode {op}, not an invoke instruction"
                )));
            }
        };
        job.plan.guards.push((i, code));
    }
    job.plan.guards.sort_by_key(|g| g.0);
    job.plan.guards.dedup_by_key(|g| g.0);
    job.plan.after = match job.alloc.as_mut() {
        Some(a) => alloc_probes(ca.code, cf, s, a, pool)?,
        None => Vec::new(),
    };
    let ctor = if job.plan.constructor {
        let f = super::ctor::constructor_flow(ca.code, ca.exceptions, s, cf)?;
        job.plan.entry_after = f.calls.clone();
        Some(f)
    } else {
        None
    };
    let plan = &job.plan;

    let mut smt = None;
    for (k, &(name, body)) in ca.attrs.iter().enumerate() {
        if cf.utf8(name)? == b"StackMapTable" {
            if smt.is_some() {
                return Err(unsupported("two StackMapTable attributes"));
            }
            smt = Some((k, frames::parse(body)?));
        }
    }
    let frames_required = smt.is_some() || cf.major >= 51;

    let frame_offs: Option<&[u32]> = if frames_required {
        Some(
            smt.as_ref()
                .map(|(_, f)| f.offsets.as_slice())
                .unwrap_or(&[]),
        )
    } else {
        None
    };
    let end = layout(s, plan, ca.code, frame_offs)?;
    let expanded = if s.tramps.is_empty() {
        None
    } else {
        let Some((k, _)) = &smt else {
            return Err(unsupported(
                "far branch in a method without a StackMapTable",
            ));
        };
        let initial = initial_locals(cf, job, pool)?;
        Some(frames::expand(ca.attrs[*k].1, initial)?)
    };
    let handler_len = plan.probe_len() + 1;
    let total = end as usize + handler_len as usize;
    if total > 65535 {
        return Err(SkipReason::TooLarge(total));
    }
    if frames_required {
        let offs: &[u32] = smt
            .as_ref()
            .map(|(_, f)| f.offsets.as_slice())
            .unwrap_or(&[]);
        for i in widened_conditionals(s) {
            let next = s.insns.get(i + 1).map(|x| x.off);
            if next.is_none_or(|o| offs.binary_search(&o).is_err()) {
                return Err(unsupported(
                    "a conditional branch out of 16-bit range after insertion would need a new stack map frame",
                ));
            }
        }
        if let (Some(c), Some((_, f))) = (&ctor, &smt) {
            for &o in &f.uninit_this {
                if index_of(&s.insns, o).is_some_and(|i| c.init[i as usize]) {
                    return Err(unsupported(
                        "a frame has uninitialized this where the flow says it is initialized",
                    ));
                }
            }
        }
    }
    // Ranges the catch-all covers: everything after the entry probe, or in
    // constructors every run of instructions where this is initialized.
    let mut cover: Vec<(u32, u32)> = Vec::new();
    match &ctor {
        None => cover.push((plan.prologue_len(), end)),
        Some(c) => {
            let mut i = 0;
            while i < c.init.len() {
                if c.init[i] {
                    let a = i;
                    while i < c.init.len() && c.init[i] {
                        i += 1;
                    }
                    cover.push((s.pre[a], s.pre.get(i).copied().unwrap_or(end)));
                } else {
                    i += 1;
                }
            }
        }
    }
    // The probes push one int; a receiver check at most a copy of the
    // receiver and the site id above what the call itself had.
    // An allocation probe pushes the class (or a copy of the array, or its
    // length) and the site id above what the allocation left.
    let extra = if plan.guards.is_empty() && plan.after.is_empty() {
        1
    } else {
        2
    };
    let max_stack = ca
        .max_stack
        .checked_add(extra)
        .ok_or_else(|| unsupported("max_stack overflow"))?
        .max(2);

    let mut out = Vec::with_capacity(attr.len() + 64 + (total - code_len as usize));
    put_u16(&mut out, ca.name);
    put_u32(&mut out, 0); // length, patched below
    put_u16(&mut out, max_stack);
    put_u16(&mut out, max_locals);
    put_u32(&mut out, total as u32);
    emit(ca.code, s, plan, &mut out);
    if out.len() != 14 + end as usize {
        return Err(unsupported("internal error: code layout mismatch"));
    }
    out.extend_from_slice(plan.id_push);
    out.push(INVOKESTATIC);
    put_u16(&mut out, plan.exit_ref);
    out.push(ATHROW);
    let ne = ca.exceptions.len() / 8 + cover.len();
    put_u16(
        &mut out,
        u16::try_from(ne).map_err(|_| unsupported("exception table full"))?,
    );
    emit_exception_table(ca.exceptions, code_len, s, end, &mut out)?;
    for &(a, b) in &cover {
        put_u16(&mut out, a as u16);
        put_u16(&mut out, b as u16);
        put_u16(&mut out, end as u16);
        put_u16(&mut out, 0);
    }

    let throwable = if frames_required {
        pool.class(b"java/lang/Throwable")?
    } else {
        0
    };
    let new_smt_name = if frames_required && smt.is_none() {
        Some(pool.utf8(b"StackMapTable")?)
    } else {
        None
    };
    let nattrs = ca.attrs.len() + usize::from(new_smt_name.is_some());
    put_u16(&mut out, nattrs as u16);
    for (k, &(name, body)) in ca.attrs.iter().enumerate() {
        put_u16(&mut out, name);
        let len_pos = out.len();
        put_u32(&mut out, 0);
        let body_start = out.len();
        match &smt {
            Some((sk, f)) if *sk == k => match &expanded {
                Some(full) => frames::emit_expanded(full, s, end, throwable, &mut out)?,
                None => frames::emit(body, f, s, end, throwable, &mut out)?,
            },
            _ => match cf.utf8(name)? {
                b"LineNumberTable" => super::debug::line_numbers(body, s, end, &mut out)?,
                b"LocalVariableTable" | b"LocalVariableTypeTable" => {
                    super::debug::local_vars(body, s, end, &mut out)?
                }
                b"RuntimeVisibleTypeAnnotations" | b"RuntimeInvisibleTypeAnnotations" => {
                    super::debug::type_annotations(body, s, end, &mut out)?
                }
                _ => out.extend_from_slice(body),
            },
        }
        let blen = (out.len() - body_start) as u32;
        out[len_pos..len_pos + 4].copy_from_slice(&blen.to_be_bytes());
    }
    if let Some(name) = new_smt_name {
        put_u16(&mut out, name);
        put_u32(&mut out, 2 + frames::HANDLER_FRAME_LEN);
        put_u16(&mut out, 1);
        frames::handler_frame(end, None, throwable, &mut out);
    }
    let alen = (out.len() - 6) as u32;
    out[2..6].copy_from_slice(&alen.to_be_bytes());
    Ok(out)
}

/// The code of one receiver check before a virtual or interface call with
/// descriptor `desc`, whose receiver and arguments are on the stack: it
/// passes a copy of the receiver and the site id (`site_push`) to the
/// guard method (`guard_ref`, `static void (Object, int)`) and leaves the
/// stack as it found it. Returns the code and the locals the method needs
/// (arguments beyond one are parked in new locals from `max_locals` on).
pub(crate) fn guard_code(
    desc: &[u8],
    site_push: &[u8],
    guard_ref: u16,
    max_locals: u16,
) -> Result<(Vec<u8>, u16), SkipReason> {
    let params = param_kinds(desc)?;
    let mut code = Vec::with_capacity(16);
    let call = |code: &mut Vec<u8>| {
        code.extend_from_slice(site_push);
        code.push(INVOKESTATIC);
        put_u16(code, guard_ref);
    };
    match params.as_slice() {
        [] => {
            code.push(DUP);
            call(&mut code);
            Ok((code, max_locals))
        }
        [p] if p.slots() == 1 => {
            // r a -> a r -> r a r -> (check) -> r a
            code.push(SWAP);
            code.push(DUP_X1);
            call(&mut code);
            Ok((code, max_locals))
        }
        _ => {
            let mut slots = Vec::with_capacity(params.len());
            let mut next = u32::from(max_locals);
            for p in &params {
                slots.push(next);
                next += p.slots();
            }
            let locals = u16::try_from(next)
                .map_err(|_| unsupported("no room for the receiver check's locals"))?;
            for (p, &slot) in params.iter().zip(&slots).rev() {
                local_insn(&mut code, p.store(), slot);
            }
            code.push(DUP);
            call(&mut code);
            for (p, &slot) in params.iter().zip(&slots) {
                local_insn(&mut code, p.load(), slot);
            }
            Ok((code, locals))
        }
    }
}

/// `op slot`, widened past slot 255.
fn local_insn(code: &mut Vec<u8>, op: u8, slot: u32) {
    if slot <= 255 {
        code.push(op);
        code.push(slot as u8);
    } else {
        code.push(WIDE);
        code.push(op);
        put_u16(code, slot as u16);
    }
}

/// A parameter's kind of local: int-like, long, float, double, reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Int,
    Long,
    Float,
    Double,
    Ref,
}

impl Kind {
    fn slots(self) -> u32 {
        match self {
            Kind::Long | Kind::Double => 2,
            _ => 1,
        }
    }
    fn store(self) -> u8 {
        match self {
            Kind::Int => ISTORE,
            Kind::Long => LSTORE,
            Kind::Float => FSTORE,
            Kind::Double => DSTORE,
            Kind::Ref => ASTORE,
        }
    }
    fn load(self) -> u8 {
        match self {
            Kind::Int => ILOAD,
            Kind::Long => LLOAD,
            Kind::Float => FLOAD,
            Kind::Double => DLOAD,
            Kind::Ref => ALOAD,
        }
    }
}

/// The parameter types of a method descriptor, each as written (`I`,
/// `[J`, `Ljava/lang/String;`); `None` when it is malformed.
pub(crate) fn param_types(d: &[u8]) -> Option<Vec<&[u8]>> {
    if d.first() != Some(&b'(') {
        return None;
    }
    let mut v = Vec::new();
    let mut i = 1;
    while *d.get(i)? != b')' {
        let start = i;
        while d.get(i) == Some(&b'[') {
            i += 1;
        }
        match d.get(i)? {
            b'L' => i += d[i..].iter().position(|&c| c == b';')? + 1,
            b'B' | b'C' | b'I' | b'S' | b'Z' | b'F' | b'J' | b'D' => i += 1,
            _ => return None,
        }
        v.push(&d[start..i]);
    }
    Some(v)
}

/// The parameter kinds of a method descriptor.
pub(crate) fn param_kinds(desc: &[u8]) -> Result<Vec<Kind>, SkipReason> {
    let params =
        param_types(desc).ok_or_else(|| unsupported("bad method descriptor at a guarded call"))?;
    Ok(params
        .into_iter()
        .map(|ty| match ty {
            [b'J'] => Kind::Long,
            [b'F'] => Kind::Float,
            [b'D'] => Kind::Double,
            [b'L' | b'[', ..] => Kind::Ref,
            _ => Kind::Int,
        })
        .collect())
}

/// Bytecode pushing `id` (as the int with the same bit pattern); returns its length.
pub(crate) fn id_push(
    id: u32,
    pool: &mut Pool<'_, '_>,
    out: &mut [u8; 3],
) -> Result<usize, SkipReason> {
    let v = id as i32;
    Ok(match v {
        -1..=5 => {
            out[0] = (i32::from(ICONST_0) + v) as u8; // iconst_m1 ... iconst_5
            1
        }
        -128..=127 => {
            out[0] = BIPUSH;
            out[1] = v as i8 as u8;
            2
        }
        -32768..=32767 => {
            out[0] = SIPUSH;
            out[1..3].copy_from_slice(&(v as i16).to_be_bytes());
            3
        }
        _ => {
            let idx = pool.integer(id)?;
            if idx <= 255 {
                out[0] = LDC;
                out[1] = idx as u8;
                2
            } else {
                out[0] = LDC_W;
                out[1..3].copy_from_slice(&idx.to_be_bytes());
                3
            }
        }
    })
}
