//! What a class declares ([`class_info`]) and what its methods call
//! ([`callees`], [`callees_all`]), for the class-hierarchy mirror and for
//! Scheme B revelation.
//!
//! Analysis reads the class file through a small view of its own (`reader`,
//! on the shared bounds-checked [`Reader`](crate::vocab::reader::Reader))
//! rather than a full object model: it needs exact byte offsets of
//! call instructions, touches only the constant pool, the method table and the
//! bytecode, and runs in the agent on every revealed method.

mod bytecode;
mod reader;

use bytecode::Insn;
use reader::{Entry, Member, RawClass, RawMethod};

use crate::vocab::access::{ACC_SYNCHRONIZED, NO_CODE};
use crate::vocab::opcode::{self, *};
use crate::vocab::tag;
use crate::{CallKind, CallSite, ClassInfo, Error, MethodInfo};

const LAMBDA_METAFACTORY: &str = "java/lang/invoke/LambdaMetafactory";

/// What a class declares: names, supertypes, access flags and, per method,
/// its code length and whether it contains a call.
///
/// `has_calls` is true when the code holds an invoke instruction of any kind
/// (including `invokedynamic`) or loads a method-handle constant, so a method
/// with `has_calls == false` always has no [`callees`].
pub fn class_info(class: &[u8]) -> Result<ClassInfo, Error> {
    let raw = RawClass::parse(class)?;
    let pool = &raw.pool;
    let name = pool.class_name(raw.this_class)?.into_owned();
    let super_name = match raw.super_class {
        0 => None,
        i => Some(pool.class_name(i)?.into_owned()),
    };
    let interfaces = raw
        .interfaces
        .iter()
        .map(|&i| pool.class_name(i).map(|n| n.into_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut methods = Vec::with_capacity(raw.methods.len());
    for m in &raw.methods {
        let (code_length, has_calls) = match m.code {
            Some(code) => {
                let mut calls = false;
                bytecode::walk(code, |insn| {
                    calls =
                        calls || opcode::is_invoke(insn.opcode) || loads_method_handle(&raw, insn);
                    Ok(())
                })?;
                (u32::try_from(code.len()).unwrap_or(u32::MAX), calls)
            }
            None => (0, false),
        };
        methods.push(MethodInfo {
            name: pool.utf8(m.name)?.into_owned(),
            descriptor: pool.utf8(m.descriptor)?.into_owned(),
            access: m.access,
            code_length,
            has_calls,
        });
    }
    Ok(ClassInfo {
        name,
        super_name,
        interfaces,
        access: raw.access,
        major_version: raw.major,
        methods,
    })
}

/// Every call of method `name` + `descriptor`, in code order: the targets of
/// `invokestatic/special/virtual/interface`; for `invokedynamic` the
/// implementation method of a `LambdaMetafactory` bootstrap
/// ([`CallKind::Dynamic`]) or, for other bootstraps, every method-handle
/// argument ([`CallKind::MethodHandle`]); and method-handle constants loaded by
/// `ldc` ([`CallKind::MethodHandle`]). Native and abstract methods have none.
///
/// A method the class does not declare is an [`Error::Unsupported`] naming it.
pub fn callees(class: &[u8], name: &str, descriptor: &str) -> Result<Vec<CallSite>, Error> {
    let raw = RawClass::parse(class)?;
    for m in &raw.methods {
        if raw.pool.utf8(m.name)? == name && raw.pool.utf8(m.descriptor)? == descriptor {
            return method_callees(&raw, m);
        }
    }
    Err(Error::Unsupported(format!(
        "class {} declares no method {name}{descriptor}",
        raw.pool.class_name(raw.this_class)?
    )))
}

/// [`callees`] of every method of the class, in declaration order, from one
/// parse: `(name, descriptor, call sites)`.
pub fn callees_all(class: &[u8]) -> Result<Vec<(String, String, Vec<CallSite>)>, Error> {
    let raw = RawClass::parse(class)?;
    raw.methods
        .iter()
        .map(|m| {
            Ok((
                raw.pool.utf8(m.name)?.into_owned(),
                raw.pool.utf8(m.descriptor)?.into_owned(),
                method_callees(&raw, m)?,
            ))
        })
        .collect()
}

/// The byte bound of [`trivial_methods`] that `sprig profile
/// --skip-trivial` (and `sprig-bench --compare-trivial`) use when given
/// none: getters, setters, constants, empty methods and short forward
/// branches, measured against 35 on javac (2026-11-25, c2703ed; docs/guide.md).
pub const TRIVIAL_BYTES_DEFAULT: u32 = 16;
/// The largest byte bound those options accept.
pub const TRIVIAL_BYTES_MAX: u32 = 255;

/// The methods of the class that are *trivial* at `max_bytes`: at most
/// `max_bytes` bytes of bytecode that run straight through and do nothing
/// that can take long. That is, no call of any kind (no invoke, no
/// method-handle constant), no backward branch, switch or subroutine, no
/// allocation, no `athrow`, no monitor, and the method is not
/// `synchronized`. Getters, setters, constants and empty methods are the
/// usual ones; `(name, descriptor)` in declaration order.
///
/// Such a method runs a handful of instructions and no other method, so a
/// profiler can leave it out and count its time in its caller's self time
/// without hiding anything that calls further.
pub fn trivial_methods(class: &[u8], max_bytes: u32) -> Result<Vec<(String, String)>, Error> {
    let raw = RawClass::parse(class)?;
    let mut out = Vec::new();
    for m in &raw.methods {
        let Some(code) = m.code else { continue };
        if m.access & (NO_CODE | ACC_SYNCHRONIZED) != 0
            || u32::try_from(code.len()).map_or(true, |n| n > max_bytes)
        {
            continue;
        }
        let mut trivial = true;
        bytecode::walk(code, |insn| {
            trivial = trivial && straight_and_cheap(&raw, insn);
            Ok(())
        })?;
        if trivial {
            out.push((
                raw.pool.utf8(m.name)?.into_owned(),
                raw.pool.utf8(m.descriptor)?.into_owned(),
            ));
        }
    }
    Ok(out)
}

/// One instruction of a trivial method: see [`trivial_methods`].
fn straight_and_cheap(raw: &RawClass<'_>, insn: Insn<'_>) -> bool {
    let forward16 = || i16::from_be_bytes([insn.operands[0], insn.operands[1]]) > 0;
    match insn.opcode {
        op if opcode::is_invoke(op) => false,
        LDC | LDC_W => !loads_method_handle(raw, insn),
        // if<cond>, if_icmp<cond>, if_acmp<cond>, goto, ifnull, ifnonnull:
        // only forward.
        IFEQ..=GOTO | IFNULL | IFNONNULL => insn.operands.len() >= 2 && forward16(),
        JSR..=LOOKUPSWITCH | GOTO_W | JSR_W => false,
        // new, newarray, anewarray, athrow, monitorenter/exit, multianewarray
        NEW..=0xbd | ATHROW | 0xc2 | 0xc3 | 0xc5 => false,
        // wide ret
        WIDE => insn.operands.first() != Some(&RET),
        _ => true,
    }
}

fn method_callees(raw: &RawClass<'_>, m: &RawMethod<'_>) -> Result<Vec<CallSite>, Error> {
    let Some(code) = m.code else {
        return Ok(Vec::new());
    };
    if m.access & NO_CODE != 0 {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    bytecode::walk(code, |insn| {
        let kind = match insn.opcode {
            INVOKEVIRTUAL => CallKind::Virtual,
            INVOKESPECIAL => CallKind::Special,
            INVOKESTATIC => CallKind::Static,
            INVOKEINTERFACE => CallKind::Interface,
            INVOKEDYNAMIC => return dynamic_callees(raw, insn, &mut out),
            LDC | LDC_W => {
                if let Entry::MethodHandle(ref_kind, reference) = raw.pool.get(insn.u2())?
                    && let Some(target) = handle_target(raw, ref_kind, reference)?
                {
                    out.push(site(CallKind::MethodHandle, target, insn.offset));
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let (tag, target) = raw.pool.member(insn.u2())?;
        if tag == tag::FIELDREF {
            return Err(Error::Malformed(format!(
                "invoke at code offset {} refers to field {}.{}",
                insn.offset, target.owner, target.name
            )));
        }
        out.push(site(kind, target, insn.offset));
        Ok(())
    })?;
    Ok(out)
}

fn site(kind: CallKind, m: Member, offset: u32) -> CallSite {
    CallSite {
        kind,
        owner: m.owner,
        name: m.name,
        descriptor: m.descriptor,
        offset,
    }
}

fn loads_method_handle(raw: &RawClass<'_>, insn: Insn<'_>) -> bool {
    matches!(insn.opcode, LDC | LDC_W)
        && matches!(raw.pool.get(insn.u2()), Ok(Entry::MethodHandle(..)))
}

/// The method a method handle constant points at; `None` for field handles.
fn handle_target(
    raw: &RawClass<'_>,
    ref_kind: u8,
    reference: u16,
) -> Result<Option<Member>, Error> {
    match ref_kind {
        1..=4 => Ok(None),
        5..=9 => {
            let (tag, member) = raw.pool.member(reference)?;
            if tag == tag::METHODREF || tag == tag::INTERFACE_METHODREF {
                Ok(Some(member))
            } else {
                Err(Error::Malformed(format!(
                    "method handle of kind {ref_kind} refers to field {}.{}",
                    member.owner, member.name
                )))
            }
        }
        _ => Err(Error::Malformed(format!(
            "method handle has reference kind {ref_kind}"
        ))),
    }
}

fn dynamic_callees(
    raw: &RawClass<'_>,
    insn: Insn<'_>,
    out: &mut Vec<CallSite>,
) -> Result<(), Error> {
    let index = insn.u2();
    let Entry::Dynamic(tag::INVOKE_DYNAMIC, bsm) = raw.pool.get(index)? else {
        return Err(Error::Malformed(format!(
            "invokedynamic at code offset {} refers to constant #{index}, not InvokeDynamic",
            insn.offset
        )));
    };
    let bootstrap = raw.bootstraps.get(bsm as usize).ok_or_else(|| {
        Error::Malformed(format!(
            "invokedynamic at code offset {} uses bootstrap method {bsm} but the class has {}",
            insn.offset,
            raw.bootstraps.len()
        ))
    })?;
    let Entry::MethodHandle(kind, reference) = raw.pool.get(bootstrap.method)? else {
        return Err(Error::Malformed(format!(
            "bootstrap method {bsm} is constant #{} which is not a MethodHandle",
            bootstrap.method
        )));
    };
    let factory = handle_target(raw, kind, reference)?;
    let is_lambda = factory.as_ref().is_some_and(|f| {
        f.owner == LAMBDA_METAFACTORY && (f.name == "metafactory" || f.name == "altMetafactory")
    });
    // LambdaMetafactory's arguments: (samMethodType, implMethod, instantiatedMethodType, ...)
    if is_lambda
        && let Some(&arg) = bootstrap.args.get(1)
        && let Entry::MethodHandle(k, r) = raw.pool.get(arg)?
        && let Some(target) = handle_target(raw, k, r)?
    {
        out.push(site(CallKind::Dynamic, target, insn.offset));
        return Ok(());
    }
    for &arg in &bootstrap.args {
        if let Entry::MethodHandle(k, r) = raw.pool.get(arg)?
            && let Some(target) = handle_target(raw, k, r)?
        {
            out.push(site(CallKind::MethodHandle, target, insn.offset));
        }
    }
    Ok(())
}
