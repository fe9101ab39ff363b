//! Probe injection.
//!
//! Works on raw class-file bytes with its own small reader and writer; no
//! class-file object model (and none of ristretto_classfile's serializer) is
//! involved, so every byte outside the replaced `Code` attributes and the
//! appended constant-pool entries stays exactly as it was.
//!
//! For each target method:
//! - `entry(id)` runs once per invocation, `exit(id)` before every return
//!   instruction, and a catch-all handler (catch type 0, appended last in
//!   the exception table) calls `exit(id)` and rethrows.
//! - The id is pushed with `iconst`/`bipush`/`sipush` when it fits, else with
//!   `ldc`/`ldc_w` of a `CONSTANT_Integer` holding the id's bit pattern.
//!
//! Constructors: the entry probe goes right after the `invokespecial <init>`
//! that initializes `this` (the `super(...)`/`this(...)` call; a flow
//! analysis over branches, switches, `jsr` and exception edges finds it,
//! one per path when different paths call different constructors), and the
//! catch-all covers only the code where `this` is initialized (one
//! exception-table range per run of such instructions). An exception thrown
//! while the arguments of `super(...)` are computed, or inside the super
//! constructor, therefore records neither entry nor exit: every recorded
//! entry gets exactly one exit. This keeps the handler frame trivial (no
//! `uninitializedThis`, no flagThisUninit), so it verifies on every class
//! version and every HotSpot release, JDK 25's flexible constructor bodies
//! included; the cost is that the super constructor call shows up as a
//! sibling of this constructor in the calling context tree, not a child.
//! A StackMapTable frame with `uninitializedThis` where the flow analysis
//! says `this` is initialized makes the method skipped, never mis-rewritten.
//!
//! The catch-all covers the exit probes before returns too, so an exit
//! probe that throws (say, StackOverflowError on the call) is retried once
//! by the handler; a probe that records and then throws would be counted
//! twice. Probes must not throw.
//!
//! Far branches: a 16-bit branch that no longer reaches after insertion
//! becomes `goto_w`/`jsr_w`, or for a conditional `if<!cond> +8; goto_w L`
//! (which makes the next instruction a branch target). When the method has
//! stack map frames and that next instruction has none, the conditional
//! instead jumps to a trampoline `goto_w L` placed after the nearest
//! unconditional instruction between it and L; the trampoline's frame is a
//! copy of L's, and the method's frames are then all written as full
//! frames. A trampoline out of reach, or no unconditional instruction in
//! between, skips the method (`Unsupported`).
//!
//! Attributes inside `Code` that sprig does not know (for example javac's
//! CharacterRangeTable) are copied unchanged; the JVM ignores them.

mod bytes;
pub(crate) mod classfile;
mod code;
mod ctor;
mod debug;
mod frames;
mod insns;
mod layout;
mod pool;
mod redirect;

use std::collections::HashMap;

use self::bytes::{modified_utf8, put_u16};
use self::classfile::{ClassFile, Span};
use self::code::{AllocJob, MethodJob, id_push};
use self::insns::Scratch;
use self::layout::Plan;
use self::pool::Pool;
pub use self::redirect::redirect_static;
use crate::vocab::access::{ACC_ABSTRACT, ACC_NATIVE, ACC_STATIC};
use crate::{
    Allocs, Error, GuardSite, Guards, Instrumented, MethodOutcome, ProbeSet, SkipReason, Target,
};

/// Whether `class`'s constant pool holds a `float` or `double` NaN.
///
/// HotSpot's class redefinition merges the old constant pool with the new
/// one entry by entry and compares these constants by value, so a NaN never
/// matches and is appended again by every redefinition. Redefining such a
/// class from the bytes the JVM gives back (which hold every copy) doubles
/// the copies each time: a caller that redefines a class repeatedly should
/// start from the class's first bytes instead.
pub fn has_nan_constants(class: &[u8]) -> Result<bool, Error> {
    let cf = ClassFile::parse(class)?;
    Ok(cf.cp.iter().any(|slot| {
        let at = slot.pos as usize;
        match slot.tag {
            4 => class
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .is_some_and(|b: [u8; 4]| f32::from_bits(u32::from_be_bytes(b)).is_nan()),
            6 => class
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .is_some_and(|b: [u8; 8]| f64::from_bits(u64::from_be_bytes(b)).is_nan()),
            _ => false,
        }
    }))
}

/// Instruments `targets` of `class`. See the module docs.
pub fn instrument(
    class: &[u8],
    targets: &[Target],
    probes: &[ProbeSet],
) -> Result<Instrumented, Error> {
    instrument_guarded(class, targets, probes, None)
}

/// [`instrument`], plus a check before each call `guards` names in each
/// target: [`Check::Receiver`](crate::Check::Receiver) before a virtual or
/// interface call, `guard(receiver, site)` on a copy of the receiver, the
/// stack as it was when the call runs (one argument is moved with
/// `swap`/`dup_x1`, more are parked in new locals);
/// [`Check::Reach`](crate::Check::Reach) before any call, `reach(site)`. A
/// guard that names no call instruction, or a receiver check before a
/// static or special call, skips its method (`Unsupported`).
pub fn instrument_guarded(
    class: &[u8],
    targets: &[Target],
    probes: &[ProbeSet],
    guards: Option<&Guards<'_>>,
) -> Result<Instrumented, Error> {
    instrument_full(class, targets, probes, guards, None)
}

/// [`instrument_guarded`], plus with `allocs` a probe after every
/// allocation instruction of each target: after `new C`, `ldc C`, the site
/// id and `allocs.object`; after an array allocation of one dimension
/// (`newarray`, `anewarray`, a `multianewarray` of one), `dup`,
/// `arraylength`, the site id and `allocs.array_length`; after a
/// `multianewarray` of more (or any array allocation without
/// `array_length`), `dup`, the site id and `allocs.array`. The probe code
/// goes after the instruction, so a branch to the instruction still runs
/// it, a branch to the next instruction does not, and a `new` that throws
/// records nothing. A `new` in a class file older than version 49 (no
/// `ldc` of a class) gets no probe.
pub fn instrument_full(
    class: &[u8],
    targets: &[Target],
    probes: &[ProbeSet],
    guards: Option<&Guards<'_>>,
    mut allocs: Option<&mut Allocs<'_>>,
) -> Result<Instrumented, Error> {
    if let Some(g) = guards
        && g.sites.len() != targets.len()
    {
        return Err(Error::InvalidTarget(format!(
            "{} guard lists for {} targets",
            g.sites.len(),
            targets.len()
        )));
    }
    if let Some(t) = targets.iter().find(|t| t.probes >= probes.len()) {
        return Err(Error::InvalidTarget(format!(
            "{}{} names probe set {} of {}",
            t.name,
            t.descriptor,
            t.probes,
            probes.len()
        )));
    }
    let cf = ClassFile::parse(class)?;
    let is_object = cf.class_name(cf.this_class)? == b"java/lang/Object";

    let mut by_name: HashMap<(&[u8], &[u8]), usize> = HashMap::with_capacity(cf.methods.len());
    for (i, m) in cf.methods.iter().enumerate() {
        by_name
            .entry((cf.utf8(m.name)?, cf.utf8(m.descriptor)?))
            .or_insert(i);
    }

    let mut pool = Pool::new(&cf);
    let mut scratch = Scratch::default();
    let mut refs: Vec<Option<(u16, u16)>> = vec![None; probes.len()];
    let mut guard_ref: Option<(u16, u16)> = None;
    let mut alloc_ref: Option<(u16, u16, u16)> = None;
    let mut done = vec![false; cf.methods.len()];
    let mut replaced: Vec<(Span, Vec<u8>)> = Vec::new();
    let mut methods = Vec::with_capacity(targets.len());
    for (ti, t) in targets.iter().enumerate() {
        let sites: &[GuardSite] = guards.map(|g| g.sites[ti].as_slice()).unwrap_or(&[]);
        let name = modified_utf8(&t.name);
        let desc = modified_utf8(&t.descriptor);
        let result = match by_name.get(&(name.as_slice(), desc.as_slice())) {
            None => Err(SkipReason::NotFound),
            Some(&mi) => {
                let m = &cf.methods[mi];
                if m.access & ACC_NATIVE != 0 {
                    Err(SkipReason::Native)
                } else if m.access & ACC_ABSTRACT != 0 {
                    Err(SkipReason::Abstract)
                } else if done[mi] {
                    Err(SkipReason::Unsupported("method requested twice".into()))
                } else if let Some(span) = m.code {
                    let mark = pool.mark();
                    let constructor = name == b"<init>" && !is_object;
                    let gref = match (guards, sites.is_empty()) {
                        (Some(g), false) => match guard_ref {
                            Some(r) => Ok(r),
                            None => {
                                let class = modified_utf8(g.class);
                                pool.methodref(
                                    &class,
                                    &modified_utf8(g.method),
                                    b"(Ljava/lang/Object;I)V",
                                )
                                .and_then(|a| {
                                    Ok((
                                        a,
                                        pool.methodref(&class, &modified_utf8(g.reach), b"(I)V")?,
                                    ))
                                })
                            }
                        },
                        _ => Ok((0, 0)),
                    };
                    let aref = match (&allocs, alloc_ref) {
                        (Some(_), Some(r)) => Ok(r),
                        (Some(a), None) => {
                            let class = modified_utf8(a.class);
                            pool.methodref(
                                &class,
                                &modified_utf8(a.object),
                                b"(Ljava/lang/Class;I)V",
                            )
                            .and_then(|o| {
                                let arr = pool.methodref(
                                    &class,
                                    &modified_utf8(a.array),
                                    b"(Ljava/lang/Object;I)V",
                                )?;
                                let len = match a.array_length {
                                    Some(n) => {
                                        pool.methodref(&class, &modified_utf8(n), b"(II)V")?
                                    }
                                    None => 0,
                                };
                                Ok((o, arr, len))
                            })
                        }
                        (None, _) => Ok((0, 0, 0)),
                    };
                    let outcome = gref.and_then(|gref| {
                        if gref.0 != 0 {
                            guard_ref = Some(gref);
                        }
                        let aref = aref?;
                        if aref.0 != 0 {
                            alloc_ref = Some(aref);
                        }
                        let alloc = allocs.as_deref_mut().map(|a| AllocJob {
                            refs: aref,
                            site: &mut *a.site,
                            method: t.id,
                        });
                        instrument_method(
                            &cf,
                            span,
                            t,
                            &probes[t.probes],
                            &mut refs[t.probes],
                            constructor,
                            (m.access, &desc),
                            (sites, gref),
                            alloc,
                            &mut pool,
                            &mut scratch,
                        )
                    });
                    match outcome {
                        Ok(bytes) => {
                            done[mi] = true;
                            replaced.push((span, bytes));
                            Ok(())
                        }
                        Err(e) => {
                            pool.rollback(mark);
                            for r in refs.iter_mut() {
                                if r.is_some_and(|(a, b)| u32::from(a.max(b)) >= mark.next) {
                                    *r = None;
                                }
                            }
                            if guard_ref.is_some_and(|(a, b)| u32::from(a.max(b)) >= mark.next) {
                                guard_ref = None;
                            }
                            if alloc_ref
                                .is_some_and(|(a, b, c)| u32::from(a.max(b).max(c)) >= mark.next)
                            {
                                alloc_ref = None;
                            }
                            Err(e)
                        }
                    }
                } else {
                    Err(SkipReason::Unsupported(
                        "method has no Code attribute".into(),
                    ))
                }
            }
        };
        methods.push(MethodOutcome {
            name: t.name.clone(),
            descriptor: t.descriptor.clone(),
            result,
        });
    }
    if replaced.is_empty() {
        return Ok(Instrumented {
            bytes: class.to_vec(),
            methods,
        });
    }
    replaced.sort_by_key(|(s, _)| s.start);
    let grow: usize = pool.appended.len()
        + replaced
            .iter()
            .map(|(s, b)| b.len().saturating_sub(s.end - s.start))
            .sum::<usize>();
    let mut out = Vec::with_capacity(class.len() + grow);
    out.extend_from_slice(&class[..8]);
    put_u16(&mut out, pool.count());
    out.extend_from_slice(&class[10..cf.cp_end]);
    out.extend_from_slice(&pool.appended);
    let mut pos = cf.cp_end;
    for (span, bytes) in &replaced {
        out.extend_from_slice(&class[pos..span.start]);
        out.extend_from_slice(bytes);
        pos = span.end;
    }
    out.extend_from_slice(&class[pos..]);
    Ok(Instrumented {
        bytes: out,
        methods,
    })
}

#[allow(clippy::too_many_arguments)]
fn instrument_method(
    cf: &ClassFile<'_>,
    span: Span,
    t: &Target,
    probes: &ProbeSet,
    refs: &mut Option<(u16, u16)>,
    constructor: bool,
    (access, descriptor): (u16, &[u8]),
    (guard_sites, guard_refs): (&[GuardSite], (u16, u16)),
    alloc: Option<AllocJob<'_>>,
    pool: &mut Pool<'_, '_>,
    scratch: &mut Scratch,
) -> Result<Vec<u8>, SkipReason> {
    let (entry_ref, exit_ref) = match *refs {
        Some(r) => r,
        None => {
            let class = modified_utf8(&probes.class);
            let entry_descriptor: &[u8] = if probes.entry_receiver {
                b"(Ljava/lang/Object;)V"
            } else {
                b"(I)V"
            };
            let e = pool.methodref(&class, &modified_utf8(&probes.entry), entry_descriptor)?;
            let x = pool.methodref(&class, &modified_utf8(&probes.exit), b"(I)V")?;
            *refs = Some((e, x));
            (e, x)
        }
    };
    // `aload_0` pushes `this`, or a static method's first argument when it
    // is a reference.
    if probes.entry_receiver
        && access & ACC_STATIC != 0
        && !(descriptor.starts_with(b"(L") || descriptor.starts_with(b"(["))
    {
        return Err(SkipReason::Unsupported(
            "a receiver entry probe needs an instance method or a static method whose first \
             parameter is a reference"
                .into(),
        ));
    }
    let mut push = [0u8; 3];
    let push_len = id_push(t.id, pool, &mut push)?;
    const ALOAD_0: u8 = 0x2a;
    let mut job = MethodJob {
        plan: Plan {
            id_push: &push[..push_len],
            entry_push: if probes.entry_receiver {
                &[ALOAD_0]
            } else {
                &push[..push_len]
            },
            entry_ref,
            exit_ref,
            constructor,
            entry_after: Vec::new(),
            guards: Vec::new(),
            after: Vec::new(),
        },
        access,
        descriptor,
        guard_sites,
        guard_refs,
        alloc,
    };
    code::rewrite(&cf.bytes[span.start..span.end], cf, &mut job, pool, scratch)
}

#[cfg(test)]
mod tests;
