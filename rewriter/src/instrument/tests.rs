//! Unit tests of relocation on hand-built class files, with exact expected
//! bytes: switch padding, stack map frames, `Uninitialized` offsets, debug
//! tables, type annotations, branch widening, constructors, constant pool.

use super::bytes::put_u16;
use super::classfile::ClassFile;
use super::code::CodeAttr;
use super::insns::{Scratch, decode};
use crate::{Error, ProbeSet, SkipReason, Target, instrument};

/// A minimal class-file builder.
#[derive(Default)]
pub(crate) struct Cb {
    cp: Vec<Vec<u8>>,
}

impl Cb {
    fn add(&mut self, e: Vec<u8>) -> u16 {
        if let Some(i) = self.cp.iter().position(|x| *x == e) {
            return i as u16 + 1;
        }
        self.cp.push(e);
        self.cp.len() as u16
    }
    pub(crate) fn utf8(&mut self, s: &str) -> u16 {
        let mut e = vec![1];
        put_u16(&mut e, s.len() as u16);
        e.extend_from_slice(s.as_bytes());
        self.add(e)
    }
    pub(crate) fn class(&mut self, s: &str) -> u16 {
        let n = self.utf8(s);
        let mut e = vec![7];
        put_u16(&mut e, n);
        self.add(e)
    }
    pub(crate) fn methodref(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.memberref(10, c, n, d)
    }
    fn memberref(&mut self, tag: u8, c: &str, n: &str, d: &str) -> u16 {
        let c = self.class(c);
        let (n, d) = (self.utf8(n), self.utf8(d));
        let mut nat = vec![12];
        put_u16(&mut nat, n);
        put_u16(&mut nat, d);
        let nat = self.add(nat);
        let mut e = vec![tag];
        put_u16(&mut e, c);
        put_u16(&mut e, nat);
        self.add(e)
    }
    pub(crate) fn fieldref(&mut self, c: &str, n: &str, d: &str) -> u16 {
        self.memberref(9, c, n, d)
    }
    pub(crate) fn integer(&mut self, v: u32) -> u16 {
        let mut e = vec![3];
        e.extend_from_slice(&v.to_be_bytes());
        self.add(e)
    }
    /// A Code attribute.
    pub(crate) fn code(
        &mut self,
        max_stack: u16,
        max_locals: u16,
        code: &[u8],
        exc: &[[u16; 4]],
        attrs: &[(&str, Vec<u8>)],
    ) -> Vec<u8> {
        let name = self.utf8("Code");
        let mut b = Vec::new();
        put_u16(&mut b, max_stack);
        put_u16(&mut b, max_locals);
        b.extend_from_slice(&(code.len() as u32).to_be_bytes());
        b.extend_from_slice(code);
        put_u16(&mut b, exc.len() as u16);
        for e in exc {
            for v in e {
                put_u16(&mut b, *v);
            }
        }
        put_u16(&mut b, attrs.len() as u16);
        for (n, body) in attrs {
            let n = self.utf8(n);
            put_u16(&mut b, n);
            b.extend_from_slice(&(body.len() as u32).to_be_bytes());
            b.extend_from_slice(body);
        }
        let mut a = Vec::new();
        put_u16(&mut a, name);
        a.extend_from_slice(&(b.len() as u32).to_be_bytes());
        a.extend_from_slice(&b);
        a
    }
    /// A class `T extends java/lang/Object` with the given methods
    /// (access, name, descriptor, Code attribute or none).
    pub(crate) fn build(
        &mut self,
        major: u16,
        methods: &[(u16, &str, &str, Option<Vec<u8>>)],
    ) -> Vec<u8> {
        self.build_named("T", major, methods)
    }
    pub(crate) fn build_named(
        &mut self,
        name: &str,
        major: u16,
        methods: &[(u16, &str, &str, Option<Vec<u8>>)],
    ) -> Vec<u8> {
        let this = self.class(name);
        let sup = self.class("java/lang/Object");
        let ms: Vec<(u16, u16, u16, Option<Vec<u8>>)> = methods
            .iter()
            .map(|(a, n, d, c)| (*a, self.utf8(n), self.utf8(d), c.clone()))
            .collect();
        let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0];
        put_u16(&mut b, major);
        put_u16(&mut b, self.cp.len() as u16 + 1);
        for e in &self.cp {
            b.extend_from_slice(e);
        }
        put_u16(&mut b, 0x21);
        put_u16(&mut b, this);
        put_u16(&mut b, sup);
        put_u16(&mut b, 0);
        put_u16(&mut b, 0);
        put_u16(&mut b, ms.len() as u16);
        for (a, n, d, c) in ms {
            put_u16(&mut b, a);
            put_u16(&mut b, n);
            put_u16(&mut b, d);
            put_u16(&mut b, u16::from(c.is_some()));
            if let Some(c) = c {
                b.extend_from_slice(&c);
            }
        }
        put_u16(&mut b, 0);
        b
    }
}

fn probes() -> Vec<ProbeSet> {
    vec![ProbeSet {
        class: "P".into(),
        entry: "in".into(),
        exit: "out".into(),
        entry_receiver: false,
    }]
}

fn target(name: &str, desc: &str, id: u32) -> Target {
    Target {
        name: name.into(),
        descriptor: desc.into(),
        id,
        probes: 0,
    }
}

/// Instruments one method and returns (class bytes, that method's new Code attribute bytes).
fn inst(class: &[u8], name: &str, desc: &str, id: u32) -> (Vec<u8>, Vec<u8>) {
    let r = instrument(class, &[target(name, desc, id)], &probes()).unwrap();
    assert_eq!(r.methods[0].result, Ok(()), "{name}{desc}");
    let cf = ClassFile::parse(&r.bytes).unwrap();
    let m = cf
        .methods
        .iter()
        .find(|m| {
            cf.utf8(m.name).unwrap() == name.as_bytes()
                && cf.utf8(m.descriptor).unwrap() == desc.as_bytes()
        })
        .unwrap();
    let span = m.code.unwrap();
    let code = r.bytes[span.start..span.end].to_vec();
    (r.bytes, code)
}

/// Index of `name` in a class's constant pool (searching the output).
fn cp_index(class: &[u8], f: impl Fn(&ClassFile<'_>, u16) -> bool) -> u16 {
    let cf = ClassFile::parse(class).unwrap();
    (1..cf.cp.len() as u16)
        .find(|&i| f(&cf, i))
        .expect("constant pool entry")
}

fn methodref_index(class: &[u8], name: &str) -> u16 {
    cp_index(class, |cf, i| {
        cf.cp[i as usize].tag == 10 && cf.member_name(i).is_ok_and(|n| n == name.as_bytes())
    })
}

fn class_index(class: &[u8], name: &str) -> u16 {
    cp_index(class, |cf, i| {
        cf.cp[i as usize].tag == 7 && cf.class_name(i).is_ok_and(|n| n == name.as_bytes())
    })
}

fn attr<'a>(cf_bytes: &[u8], ca: &CodeAttr<'a>, name: &str) -> &'a [u8] {
    let cf = ClassFile::parse(cf_bytes).unwrap();
    ca.attrs
        .iter()
        .find(|(n, _)| cf.utf8(*n).unwrap() == name.as_bytes())
        .map(|(_, b)| *b)
        .unwrap()
}

fn be16(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

#[test]
fn switches_are_repadded_at_every_alignment() {
    let mut alignments = [false; 4];
    for (id, prologue) in [(1u32, 4u32), (100, 5), (1000, 6)] {
        for k in 0..4usize {
            for op in [0xaau8, 0xab] {
                let mut c = vec![0u8; k];
                c.push(0x1a); // iload_0
                let pc = c.len();
                c.push(op);
                c.resize(c.len() + 3 - pc % 4, 0);
                let body = if op == 0xaa { 12 + 8 } else { 8 + 16 };
                let end = (c.len() + body) as i32;
                let (t0, t1, td) = (end - pc as i32, end + 2 - pc as i32, end + 4 - pc as i32);
                c.extend_from_slice(&td.to_be_bytes());
                if op == 0xaa {
                    for v in [0, 1, t0, t1] {
                        c.extend_from_slice(&v.to_be_bytes());
                    }
                } else {
                    for v in [2, 5, t0, 1000, t1] {
                        c.extend_from_slice(&v.to_be_bytes());
                    }
                }
                c.extend_from_slice(&[0x03, 0xac, 0x04, 0xac, 0x05, 0xac]);
                let mut cb = Cb::default();
                let code = cb.code(1, 1, &c, &[], &[]);
                let class = cb.build(49, &[(8, "s", "(I)I", Some(code))]);
                let (_, attr_bytes) = inst(&class, "s", "(I)I", id);
                let ca = CodeAttr::parse(&attr_bytes).unwrap();
                let mut s = Scratch::default();
                decode(ca.code, &mut s).unwrap();
                let sw = s.insns.iter().find(|i| i.op == op).unwrap();
                assert_eq!(sw.off, prologue + k as u32 + 1);
                alignments[(sw.off % 4) as usize] = true;
                let p = sw.off as usize;
                let pad = 3 - p % 4;
                assert!(
                    ca.code[p + 1..p + 1 + pad].iter().all(|&b| b == 0),
                    "padding bytes must be zero"
                );
                let rd = |at: usize| i32::from_be_bytes(ca.code[at..at + 4].try_into().unwrap());
                let base = p + 1 + pad;
                let targets: Vec<i32> = if op == 0xaa {
                    assert_eq!((rd(base + 4), rd(base + 8)), (0, 1));
                    vec![rd(base), rd(base + 12), rd(base + 16)]
                } else {
                    assert_eq!((rd(base + 4), rd(base + 8), rd(base + 16)), (2, 5, 1000));
                    vec![rd(base), rd(base + 12), rd(base + 20)]
                };
                // default → iconst_2, first → iconst_0, second → iconst_1
                let ops: Vec<u8> = targets
                    .iter()
                    .map(|t| ca.code[(p as i32 + t) as usize])
                    .collect();
                assert_eq!(ops, vec![0x05, 0x03, 0x04], "id {id} k {k} op {op:#x}");
            }
        }
    }
    assert_eq!(
        alignments, [true; 4],
        "all four switch alignments exercised"
    );
}

#[test]
fn frames_get_new_deltas_and_a_handler_frame() {
    let mut c = vec![0x1a, 0x99, 0x00, 61];
    c.extend_from_slice(&[0u8; 56]);
    c.extend_from_slice(&[0x03, 0xac, 0x04, 0xac]);
    let mut cb = Cb::default();
    let code = cb.code(1, 1, &c, &[], &[("StackMapTable", vec![0, 1, 62])]);
    let class = cb.build(51, &[(8, "f", "(I)I", Some(code))]);
    let (out, a) = inst(&class, "f", "(I)I", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    let (entry, exit) = (
        be16(methodref_index(&out, "in")),
        be16(methodref_index(&out, "out")),
    );
    let mut want = vec![0x04, 0xb8, entry[0], entry[1], 0x1a, 0x99, 0x00, 65];
    want.extend_from_slice(&[0u8; 56]);
    want.extend_from_slice(&[0x03, 0x04, 0xb8, exit[0], exit[1], 0xac]);
    want.extend_from_slice(&[0x04, 0x04, 0xb8, exit[0], exit[1], 0xac]);
    want.extend_from_slice(&[0x04, 0xb8, exit[0], exit[1], 0xbf]);
    assert_eq!(ca.code, want.as_slice());
    assert_eq!((ca.max_stack, ca.max_locals), (2, 1));
    assert_eq!(ca.exceptions, &[0, 4, 0, 76, 0, 76, 0, 0]);
    let t = be16(class_index(&out, "java/lang/Throwable"));
    let smt = attr(&out, &ca, "StackMapTable");
    assert_eq!(
        smt,
        &[0, 2, 251, 0, 70, 255, 0, 5, 0, 0, 0, 1, 7, t[0], t[1]]
    );
}

#[test]
fn uninitialized_debug_tables_and_type_annotations_move() {
    let mut cb = Cb::default();
    let cls = cb.class("C");
    let init = be16(cb.methodref("C", "<init>", "(I)V"));
    let c = [
        0xbb, 0, cls as u8, // 0 new C
        0x59,      // 3 dup
        0x1a,      // 4 iload_0
        0x99, 0, 7,    // 5 ifeq 12
        0x04, // 8 iconst_1
        0xa7, 0, 4,    // 9 goto 13
        0x05, // 12 iconst_2
        0xb7, init[0], init[1], // 13 invokespecial
        0xb0,    // 16 areturn
    ];
    let smt = vec![
        0, 2, 255, 0, 12, 0, 1, 1, 0, 2, 8, 0, 0, 8, 0, 0, 255, 0, 0, 0, 1, 1, 0, 3, 8, 0, 0, 8, 0,
        0, 1,
    ];
    let name = be16(cb.utf8("b"));
    let desc = be16(cb.utf8("Z"));
    let ann = be16(cb.utf8("LA;"));
    let lnt = vec![0, 3, 0, 0, 0, 10, 0, 13, 0, 11, 0, 16, 0, 12];
    let lvt = vec![0, 1, 0, 0, 0, 17, name[0], name[1], desc[0], desc[1], 0, 0];
    let lvtt = vec![0, 1, 0, 4, 0, 13, name[0], name[1], desc[0], desc[1], 0, 0];
    let rvta = vec![
        0, 2, //
        0x44, 0, 0, 0, ann[0], ann[1], 0, 0, // new at offset 0
        0x40, 0, 1, 0, 4, 0, 13, 0, 0, 1, 0, 0, ann[0], ann[1], 0,
        0, // local var (4, 13) with a one-step type path
    ];
    let code = cb.code(
        3,
        1,
        &c,
        &[],
        &[
            ("StackMapTable", smt),
            ("LineNumberTable", lnt),
            ("LocalVariableTable", lvt),
            ("LocalVariableTypeTable", lvtt),
            ("RuntimeVisibleTypeAnnotations", rvta),
        ],
    );
    let class = cb.build(51, &[(8, "m", "(Z)Ljava/lang/Object;", Some(code))]);
    let (out, a) = inst(&class, "m", "(Z)Ljava/lang/Object;", 70_000);
    let ca = CodeAttr::parse(&a).unwrap();
    let int = cp_index(&out, |cf, i| {
        cf.cp[i as usize].tag == 3
            && cf.bytes[cf.cp[i as usize].pos as usize..][..4] == 70_000u32.to_be_bytes()
    });
    assert!(int <= 255);
    let push = [0x12, int as u8];
    assert_eq!(&ca.code[..2], &push);
    assert_eq!(ca.code.len(), 33);
    assert_eq!(&ca.code[5..8], &[0xbb, 0, cls as u8]);
    assert_eq!(&ca.code[10..13], &[0x99, 0, 7]); // 10 → 17
    assert_eq!(&ca.code[14..17], &[0xa7, 0, 4]); // 14 → 18
    assert_eq!(ca.code[17], 0x05);
    assert_eq!(ca.code[18], 0xb7);
    assert_eq!(&ca.code[21..23], &push);
    assert_eq!(ca.code[26], 0xb0);
    assert_eq!(ca.max_stack, 4);
    let t = be16(class_index(&out, "java/lang/Throwable"));
    assert_eq!(
        attr(&out, &ca, "StackMapTable"),
        &[
            0, 3, 255, 0, 17, 0, 1, 1, 0, 2, 8, 0, 5, 8, 0, 5, 255, 0, 0, 0, 1, 1, 0, 3, 8, 0, 5,
            8, 0, 5, 1, 255, 0, 8, 0, 0, 0, 1, 7, t[0], t[1]
        ]
    );
    assert_eq!(
        attr(&out, &ca, "LineNumberTable"),
        &[0, 3, 0, 0, 0, 10, 0, 18, 0, 11, 0, 21, 0, 12]
    );
    assert_eq!(
        &attr(&out, &ca, "LocalVariableTable")[..6],
        &[0, 1, 0, 0, 0, 27]
    );
    assert_eq!(
        &attr(&out, &ca, "LocalVariableTypeTable")[..6],
        &[0, 1, 0, 9, 0, 18]
    );
    let rv = attr(&out, &ca, "RuntimeVisibleTypeAnnotations");
    assert_eq!(&rv[..4], &[0, 2, 0x44, 0]);
    assert_eq!(rv[4], 5);
    assert_eq!(&rv[10..17], &[0x40, 0, 1, 0, 9, 0, 18]);
    assert_eq!(&ca.exceptions, &[0, 5, 0, 27, 0, 27, 0, 0]);
}

#[test]
fn far_branches_are_widened_in_old_class_files() {
    let n = 32761usize;
    // 0 nop; 1 iload_0; 2 ifne 7; 5 iconst_0; 6 ireturn; 7.. nops; iload_0; ifeq 1; iconst_1; ireturn
    let mut c = vec![0x00, 0x1a, 0x9a, 0, 5, 0x03, 0xac];
    c.resize(7 + n, 0);
    c.push(0x1a);
    let back = -((8 + n - 1) as i32) as i16;
    c.push(0x99);
    c.extend_from_slice(&back.to_be_bytes());
    c.extend_from_slice(&[0x04, 0xac]);
    // 0 iload_0; 1 ifne 6; 4 iconst_0; 5 ireturn; 6.. nops; goto/jsr 0
    let n2 = 32762usize;
    let far = |op: u8| {
        let mut g = vec![0x1a, 0x9a, 0, 5, 0x03, 0xac];
        g.resize(6 + n2, 0);
        g.push(op);
        g.extend_from_slice(&(-((6 + n2) as i32) as i16).to_be_bytes());
        g
    };
    let mut cb = Cb::default();
    let f = cb.code(1, 1, &c, &[], &[]);
    let g = cb.code(1, 1, &far(0xa7), &[], &[]);
    let j = cb.code(1, 1, &far(0xa8), &[], &[]);
    let class = cb.build(
        49,
        &[
            (8, "f", "(I)I", Some(f)),
            (8, "g", "(I)I", Some(g)),
            (8, "j", "(I)I", Some(j)),
        ],
    );
    let (_, a) = inst(&class, "f", "(I)I", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    let at = 4 + 4 + 8 + n; // prologue 4, exit probe 4 before the first ireturn
    assert_eq!(ca.code[at - 1], 0x1a);
    let mut want = vec![0x9a, 0, 8, 0xc8];
    want.extend_from_slice(&(5 - (at as i32 + 3)).to_be_bytes());
    assert_eq!(
        &ca.code[at..at + 8],
        want.as_slice(),
        "ifeq → ifne +8; goto_w"
    );
    assert_eq!(
        &ca.code[6..9],
        &[0x9a, 0, 9],
        "the short forward branch stays short"
    );
    for (name, op) in [("g", 0xc8u8), ("j", 0xc9)] {
        let (_, a) = inst(&class, name, "(I)I", 1);
        let ca = CodeAttr::parse(&a).unwrap();
        let at = 4 + 10 + n2;
        let mut want = vec![op];
        want.extend_from_slice(&(4 - at as i32).to_be_bytes());
        assert_eq!(&ca.code[at..at + 5], want.as_slice());
        assert_eq!(ca.code.len(), at + 5 + 5);
    }
}

fn trampoline_class(code: &[u8]) -> Vec<u8> {
    let mut cb = Cb::default();
    // same frames at 1 (delta 1) and 7 (delta 5)
    let smt = vec![0, 2, 1, 5];
    let f = cb.code(1, 1, code, &[], &[("StackMapTable", smt)]);
    cb.build(51, &[(8, "f", "(I)I", Some(f))])
}

/// Mutations of the frames and code around a trampoline: errors or
/// skips, never a panic.
#[test]
fn hostile_bytes_around_trampolines() {
    let n = 32761usize;
    let mut c = vec![0x00, 0x1a, 0x9a, 0, 5, 0x03, 0xac];
    c.resize(7 + n, 0);
    c.extend_from_slice(&[0x1a, 0x99]);
    c.extend_from_slice(&(-((8 + n - 1) as i32) as i16).to_be_bytes());
    c.extend_from_slice(&[0x04, 0xac]);
    let class = trampoline_class(&c);
    let targets = [target("f", "(I)I", 1)];
    assert_eq!(
        instrument(&class, &targets, &probes())
            .unwrap()
            .instrumented_count(),
        1
    );
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..3000 {
        let mut m = class.clone();
        for _ in 0..1 + rng(&mut seed) % 3 {
            let span = 160u64;
            let off = (rng(&mut seed) % span) as usize;
            let at = if rng(&mut seed).is_multiple_of(2) {
                off
            } else {
                m.len() - 1 - off
            };
            m[at] = rng(&mut seed) as u8;
        }
        let _ = instrument(&m, &targets, &probes());
    }
}

/// A far backward conditional whose next instruction has no frame goes
/// through a trampoline after the nearest unconditional instruction; all
/// frames are rewritten as full frames and the trampoline gets a copy of
/// its target's frame.
#[test]
fn far_conditional_without_frame_goes_through_a_trampoline() {
    let n = 32761usize;
    // 0 nop; 1 iload_0; 2 ifne 7; 5 iconst_0; 6 ireturn; 7.. nops; iload_0; ifeq 1; iconst_1; ireturn
    let mut c = vec![0x00, 0x1a, 0x9a, 0, 5, 0x03, 0xac];
    c.resize(7 + n, 0);
    c.push(0x1a);
    c.push(0x99);
    c.extend_from_slice(&(-((8 + n - 1) as i32) as i16).to_be_bytes());
    c.extend_from_slice(&[0x04, 0xac]);
    let class = trampoline_class(&c);
    let (out, a) = inst(&class, "f", "(I)I", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    // prologue 4; exit probe 4 before the ireturn at 6 → ireturn at 14;
    // trampoline at 15 (goto_w to L = 5); nops from 20.
    assert_eq!(ca.code[14], 0xac);
    let mut tramp = vec![0xc8];
    tramp.extend_from_slice(&(5 - 15i32).to_be_bytes());
    assert_eq!(&ca.code[15..20], tramp.as_slice());
    let ifeq = 20 + n + 1;
    assert_eq!(ca.code[ifeq - 1], 0x1a);
    assert_eq!(ca.code[ifeq], 0x99, "the conditional stays a short ifeq");
    assert_eq!(
        i32::from(i16::from_be_bytes([ca.code[ifeq + 1], ca.code[ifeq + 2]])),
        15 - ifeq as i32
    );
    let t = be16(class_index(&out, "java/lang/Throwable"));
    let end = (ifeq + 3 + 1 + 4 + 1) as u16; // iconst_1, exit probe, ireturn
    assert_eq!(ca.code.len(), end as usize + 5);
    let h = be16(end - 20 - 1);
    // full frames: L at 5 (locals [int]), trampoline at 15 (copy of L's), 20, handler
    let want = vec![
        0, 4, 255, 0, 5, 0, 1, 1, 0, 0, 255, 0, 9, 0, 1, 1, 0, 0, 255, 0, 4, 0, 1, 1, 0, 0, 255,
        h[0], h[1], 0, 0, 0, 1, 7, t[0], t[1],
    ];
    assert_eq!(attr(&out, &ca, "StackMapTable"), want.as_slice());
}

#[test]
fn constructors_enter_after_the_super_call() {
    let mut cb = Cb::default();
    let sup = be16(cb.methodref("java/lang/Object", "<init>", "()V"));
    let obj = cb.class("java/lang/Object");
    let sup1 = be16(cb.methodref("S", "<init>", "(Ljava/lang/Object;)V"));
    let plain = cb.code(1, 1, &[0x2a, 0xb7, sup[0], sup[1], 0xb1], &[], &[]);
    // aload_0; new Object; dup; invokespecial Object.<init>; invokespecial S.<init>(Object); return
    let nested = cb.code(
        3,
        1,
        &[
            0x2a, 0xbb, 0, obj as u8, 0x59, 0xb7, sup[0], sup[1], 0xb7, sup1[0], sup1[1], 0xb1,
        ],
        &[],
        &[],
    );
    let class = cb.build(
        51,
        &[
            (1, "<init>", "()V", Some(plain)),
            (1, "<init>", "(I)V", Some(nested)),
        ],
    );
    let (out, a) = inst(&class, "<init>", "()V", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    let (entry, exit) = (
        be16(methodref_index(&out, "in")),
        be16(methodref_index(&out, "out")),
    );
    assert_eq!(
        ca.code,
        &[
            0x2a, 0xb7, sup[0], sup[1], 0x04, 0xb8, entry[0], entry[1], 0x04, 0xb8, exit[0],
            exit[1], 0xb1, 0x04, 0xb8, exit[0], exit[1], 0xbf
        ]
    );
    assert_eq!(
        ca.exceptions,
        &[0, 8, 0, 13, 0, 13, 0, 0],
        "catch-all covers only code after super()"
    );
    let (_, a) = inst(&class, "<init>", "(I)V", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    assert_eq!(
        &ca.code[8..15],
        &[0xb7, sup1[0], sup1[1], 0x04, 0xb8, entry[0], entry[1]]
    );
    // Object's own constructor has no super call: the entry goes first.
    let mut cb = Cb::default();
    let code = cb.code(0, 1, &[0xb1], &[], &[]);
    let object = cb.build_named("java/lang/Object", 51, &[(1, "<init>", "()V", Some(code))]);
    let (_, a) = inst(&object, "<init>", "()V", 1);
    assert_eq!(CodeAttr::parse(&a).unwrap().code[0], 0x04);
    // A constructor without a super call is skipped, not broken.
    let mut cb = Cb::default();
    let code = cb.code(0, 1, &[0xb1], &[], &[]);
    let bad = cb.build(51, &[(1, "<init>", "()V", Some(code))]);
    let r = instrument(&bad, &[target("<init>", "()V", 1)], &probes()).unwrap();
    assert!(matches!(
        r.methods[0].result,
        Err(SkipReason::Unsupported(_))
    ));
}

#[test]
fn ids_are_pushed_without_truncation() {
    let mut cb = Cb::default();
    for k in 0..300 {
        cb.utf8(&format!("filler{k}"));
    }
    let existing = cb.integer(0x1234_5678);
    let code = cb.code(0, 0, &[0xb1], &[], &[]);
    let class = cb.build(51, &[(8, "v", "()V", Some(code))]);
    let first = |id: u32| {
        let (out, a) = inst(&class, "v", "()V", id);
        (out, CodeAttr::parse(&a).unwrap().code[..3].to_vec())
    };
    assert_eq!(first(0xFFFF_FFFF).1[0], 0x02, "iconst_m1");
    assert_eq!(first(5).1[0], 0x08, "iconst_5");
    assert_eq!(first(6).1[..2], [0x10, 6], "bipush");
    assert_eq!(first(0xFFFF_FF80).1[..2], [0x10, 0x80], "bipush -128");
    assert_eq!(first(32767).1, [0x11, 0x7f, 0xff], "sipush");
    assert_eq!(first(0xFFFF_8000).1, [0x11, 0x80, 0x00], "sipush -32768");
    let (_, c) = first(0x1234_5678);
    assert_eq!(
        c,
        [0x13, (existing >> 8) as u8, existing as u8],
        "existing Integer reused with ldc_w"
    );
    for id in [32768u32, 70_000, 0x8000_0000, 0x7FFF_FFFF] {
        let (out, c) = first(id);
        assert_eq!(c[0], 0x13, "ldc_w for {id}");
        let idx = u16::from_be_bytes([c[1], c[2]]);
        let cf = ClassFile::parse(&out).unwrap();
        let slot = cf.cp[idx as usize];
        assert_eq!(slot.tag, 3);
        assert_eq!(
            &out[slot.pos as usize..slot.pos as usize + 4],
            &id.to_be_bytes()
        );
    }
}

#[test]
fn untouched_bytes_stay_identical() {
    let mut cb = Cb::default();
    let a = cb.code(1, 1, &[0x1a, 0xac], &[], &[]);
    let b = cb.code(
        1,
        1,
        &[0x1a, 0x04, 0x60, 0xac],
        &[],
        &[("LineNumberTable", vec![0, 1, 0, 0, 0, 7])],
    );
    let class = cb.build(
        52,
        &[
            (8, "a", "(I)I", Some(a)),
            (8, "b", "(I)I", Some(b.clone())),
            (0x108, "n", "()V", None),
            (0x401, "x", "()V", None),
        ],
    );
    let none = instrument(&class, &[], &probes()).unwrap();
    assert_eq!(none.bytes, class);
    let skipped = instrument(
        &class,
        &[
            target("n", "()V", 1),
            target("x", "()V", 2),
            target("q", "()V", 3),
        ],
        &probes(),
    )
    .unwrap();
    assert_eq!(skipped.bytes, class);
    let reasons: Vec<_> = skipped.methods.iter().map(|m| m.result.clone()).collect();
    assert_eq!(
        reasons,
        vec![
            Err(SkipReason::Native),
            Err(SkipReason::Abstract),
            Err(SkipReason::NotFound)
        ]
    );
    let (out, _) = inst(&class, "a", "(I)I", 9);
    let cin = ClassFile::parse(&class).unwrap();
    let cout = ClassFile::parse(&out).unwrap();
    assert_eq!(&out[..8], &class[..8]);
    assert_eq!(
        &out[10..cin.cp_end],
        &class[10..cin.cp_end],
        "existing pool entries keep their bytes and indices"
    );
    let (sa, sb) = (cin.methods[0].code.unwrap(), cin.methods[1].code.unwrap());
    let (ta, tb) = (cout.methods[0].code.unwrap(), cout.methods[1].code.unwrap());
    assert_eq!(
        &out[tb.start..tb.end],
        &class[sb.start..sb.end],
        "method b's Code is untouched"
    );
    assert_eq!(&out[cout.cp_end..ta.start], &class[cin.cp_end..sa.start]);
    assert_eq!(&out[ta.end..], &class[sa.end..]);
    let twice = instrument(
        &class,
        &[target("a", "(I)I", 1), target("a", "(I)I", 2)],
        &probes(),
    )
    .unwrap();
    assert!(twice.methods[1].result.is_err());
    assert!(matches!(
        instrument(
            &class,
            &[Target {
                probes: 1,
                ..target("a", "(I)I", 1)
            }],
            &probes()
        ),
        Err(Error::InvalidTarget(_))
    ));
}

#[test]
fn too_large_methods_are_skipped() {
    let mut c = vec![0u8; 65_530];
    c.push(0xb1);
    let mut cb = Cb::default();
    let code = cb.code(0, 0, &c, &[], &[]);
    let class = cb.build(51, &[(8, "v", "()V", Some(code))]);
    let r = instrument(&class, &[target("v", "()V", 1)], &probes()).unwrap();
    assert_eq!(
        r.methods[0].result,
        Err(SkipReason::TooLarge(65_531 + 4 + 4 + 5))
    );
    assert_eq!(r.bytes, class);
}

/// Deterministic xorshift for mutation tests.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn hostile_bytes_give_errors_not_panics() {
    let mut cb = Cb::default();
    let init = be16(cb.methodref("java/lang/Object", "<init>", "()V"));
    // iload_0; tableswitch {0: 24, 1: 26, default: 28}; iconst_0; ireturn; iconst_1; ireturn; iconst_2; ireturn
    let c = [
        0x1a, 0xaa, 0, 0, 0, 0, 0, 27, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 23, 0, 0, 0, 25, 0x03,
        0xac, 0x04, 0xac, 0x05, 0xac,
    ];
    let smt = vec![0, 3, 24, 1, 1];
    let f = cb.code(
        1,
        1,
        &c,
        &[[0, 1, 28, 0]],
        &[
            ("StackMapTable", smt),
            ("LineNumberTable", vec![0, 1, 0, 0, 0, 1]),
        ],
    );
    let k = cb.code(1, 1, &[0x2a, 0xb7, init[0], init[1], 0xb1], &[], &[]);
    let class = cb.build(
        51,
        &[(8, "f", "(I)I", Some(f)), (1, "<init>", "()V", Some(k))],
    );
    let targets = [target("f", "(I)I", 70_000), target("<init>", "()V", 2)];
    let r = instrument(&class, &targets, &probes()).unwrap();
    assert_eq!(r.instrumented_count(), 2, "{:?}", r.methods);
    for len in 0..class.len() {
        assert!(
            instrument(&class[..len], &targets, &probes()).is_err(),
            "truncated at {len}"
        );
    }
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..20_000 {
        let mut m = class.clone();
        for _ in 0..1 + rng(&mut seed) % 4 {
            let at = (rng(&mut seed) % m.len() as u64) as usize;
            m[at] = rng(&mut seed) as u8;
        }
        let _ = instrument(&m, &targets, &probes());
    }
}

/// A version-49 class (no StackMapTable; verified by HotSpot's inference
/// verifier) with `jsr`/`ret`, a far backward conditional that must be
/// widened, and an exception leaving an instrumented method, run on real
/// JVMs under `-Xverify:all` before and after instrumentation.
#[test]
fn old_class_with_jsr_ret_and_widening_runs_on_the_jvm() {
    use std::process::Command;
    let mut cb = Cb::default();
    let out = be16(cb.fieldref("java/lang/System", "out", "Ljava/io/PrintStream;"));
    let println = be16(cb.methodref("java/io/PrintStream", "println", "(I)V"));
    let f = be16(cb.methodref("Old", "f", "(I)I"));
    let g = be16(cb.methodref("Old", "g", "(I)I"));
    let show = be16(cb.methodref("Old", "show", "(I)V"));
    let ise = be16(cb.class("java/lang/IllegalStateException"));
    let ise_init = be16(cb.methodref("java/lang/IllegalStateException", "<init>", "()V"));
    let call = |m: [u8; 2]| [0xb8, m[0], m[1]];
    let mut main = vec![0x06];
    main.extend(call(f));
    main.extend(call(show));
    main.push(0x02);
    main.extend(call(f));
    main.extend(call(show));
    main.push(0x03);
    main.extend(call(g));
    main.extend(call(show));
    main.push(0x04);
    main.extend(call(g));
    main.extend(call(show));
    main.push(0xb1);
    main.extend([0x57, 0x02]);
    main.extend(call(show));
    main.push(0xb1);
    let main = cb.code(1, 1, &main, &[[21, 28, 29, 0]], &[]);
    let show = cb.code(
        2,
        1,
        &[
            0xb2, out[0], out[1], 0x1a, 0xb6, println[0], println[1], 0xb1,
        ],
        &[],
        &[],
    );
    // f(x): jsr S; return x != 0 ? x : 0 where S increments x
    let f = cb.code(
        1,
        2,
        &[
            0xa8, 0, 11, 0x1a, 0x9a, 0, 5, 0x03, 0xac, 0x1a, 0xac, 0x4c, 0x84, 0, 1, 0xa9, 1,
        ],
        &[],
        &[],
    );
    let n = 32_743usize;
    let mut gc = vec![
        0x03,
        0x3c,
        0x84,
        1,
        1,
        0x1a,
        0x99,
        0,
        11,
        0xbb,
        ise[0],
        ise[1],
        0x59,
        0xb7,
        ise_init[0],
        ise_init[1],
        0xbf,
    ];
    gc.extend([0x1b, 0x10, 100, 0xa0, 0, 5, 0x03, 0xac]);
    gc.resize(gc.len() + n, 0);
    gc.extend([0x1b, 0x05, 0xa1]);
    gc.extend((-((25 + n) as i32) as i16).to_be_bytes());
    gc.extend([0x1b, 0xac]);
    let g = cb.code(2, 2, &gc, &[], &[]);
    let class = cb.build_named(
        "Old",
        49,
        &[
            (9, "main", "([Ljava/lang/String;)V", Some(main)),
            (8, "show", "(I)V", Some(show)),
            (8, "f", "(I)I", Some(f)),
            (8, "g", "(I)I", Some(g)),
        ],
    );
    let ps = [ProbeSet {
        class: "sprig/test/Probe".into(),
        entry: "entry".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }];
    let targets = [
        target("main", "([Ljava/lang/String;)V", 70_000),
        target("show", "(I)V", 0xFFFF_FFFF),
        target("f", "(I)I", 2),
        target("g", "(I)I", 300),
    ];
    let r = instrument(&class, &targets, &ps).unwrap();
    assert_eq!(r.instrumented_count(), 4, "{:?}", r.methods);
    let (_, ga) = inst(&class, "g", "(I)I", 300);
    assert!(
        CodeAttr::parse(&ga).unwrap().code.contains(&0xc8),
        "g's far branch is widened to goto_w"
    );

    let dir = std::env::temp_dir().join(format!("sprig-inst-old-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (orig, inst_dir, probe) = (dir.join("orig"), dir.join("inst"), dir.join("probe"));
    for d in [&orig, &inst_dir, &probe] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(orig.join("Old.class"), &class).unwrap();
    std::fs::write(inst_dir.join("Old.class"), &r.bytes).unwrap();
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/java/probe/sprig/test/Probe.java"
    );
    let o = Command::new("timeout")
        .args(["120", "javac", "--release", "8", "-d"])
        .arg(&probe)
        .arg(src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut javas = vec!["java".to_string()];
    let jdk25 = "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java";
    if std::path::Path::new(jdk25).exists() {
        javas.push(jdk25.into());
    } else {
        println!("JDK 25 not installed: JDK 17 only");
    }
    for java in &javas {
        let runit = |cp: String| {
            let o = Command::new("timeout")
                .args([
                    "120",
                    java,
                    "-Xverify:all",
                    "-Xshare:off",
                    "-cp",
                    &cp,
                    "Old",
                ])
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{java}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let plain = runit(orig.display().to_string());
        assert_eq!(plain, "4\n0\n2\n-1\n");
        let probed = runit(format!("{}:{}", inst_dir.display(), probe.display()));
        assert_eq!(
            probed,
            "4\n0\n2\n-1\nPROBE 2 2 2\nPROBE 300 2 2\nPROBE 70000 1 1\nPROBE 4294967295 4 4\n",
            "{java}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// On javac output: instrumenting one method changes nothing but the pool
/// count, the appended entries and that method's Code attribute.
#[test]
fn one_method_changes_only_its_code_on_javac_classes() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("sprig-inst-one-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let java = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/java");
    let o = Command::new("timeout")
        .args(["120", "javac", "-g", "-d"])
        .arg(&dir)
        .arg(format!("{java}/loader/VerifyLoader.java"))
        .arg(format!("{java}/probe/sprig/test/Probe.java"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut checked = 0;
    for rel in ["VerifyLoader.class", "sprig/test/Probe.class"] {
        let class = std::fs::read(dir.join(rel)).unwrap();
        let cin = ClassFile::parse(&class).unwrap();
        assert_eq!(instrument(&class, &[], &probes()).unwrap().bytes, class);
        for (i, m) in cin.methods.iter().enumerate() {
            let Some(span) = m.code else { continue };
            let name = String::from_utf8(cin.utf8(m.name).unwrap().to_vec()).unwrap();
            let desc = String::from_utf8(cin.utf8(m.descriptor).unwrap().to_vec()).unwrap();
            let r = instrument(&class, &[target(&name, &desc, 1 << 20)], &probes()).unwrap();
            assert_eq!(r.methods[0].result, Ok(()), "{name}{desc}");
            let out = &r.bytes;
            let cout = ClassFile::parse(out).unwrap();
            let grow = cout.cp_end - cin.cp_end;
            let new = cout.methods[i].code.unwrap();
            assert_eq!(&out[..8], &class[..8]);
            assert_eq!(&out[10..cin.cp_end], &class[10..cin.cp_end]);
            assert_eq!(
                &out[cin.cp_end + grow..new.start],
                &class[cin.cp_end..span.start],
                "{name}: bytes before its Code"
            );
            assert_eq!(
                &out[new.end..],
                &class[span.end..],
                "{name}: bytes after its Code"
            );
            for (j, other) in cin.methods.iter().enumerate() {
                if let (Some(a), Some(b), true) = (other.code, cout.methods[j].code, j != i) {
                    assert_eq!(&out[b.start..b.end], &class[a.start..a.end]);
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 6, "{checked}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A constructor that calls `super()` on one path and `this()` on another
/// (as Groovy emits): an entry probe after each call, and catch-all ranges
/// only where `this` is initialized. Checked byte for byte and on the JVM.
#[test]
fn constructors_with_a_chaining_call_per_path() {
    use std::process::Command;
    let mut cb = Cb::default();
    let obj = be16(cb.methodref("java/lang/Object", "<init>", "()V"));
    let this0 = be16(cb.methodref("Multi", "<init>", "()V"));
    let this1 = be16(cb.methodref("Multi", "<init>", "(I)V"));
    let cls = be16(cb.class("Multi"));
    let two = cb.code(
        1,
        2,
        &[
            0x1b, 0x99, 0, 10, 0x2a, 0xb7, obj[0], obj[1], 0xa7, 0, 7, 0x2a, 0xb7, this0[0],
            this0[1], 0xb1,
        ],
        &[],
        &[],
    );
    let one = cb.code(1, 1, &[0x2a, 0xb7, obj[0], obj[1], 0xb1], &[], &[]);
    let mut main = Vec::new();
    for v in [0x03u8, 0x04] {
        main.extend([
            0xbb, cls[0], cls[1], 0x59, v, 0xb7, this1[0], this1[1], 0x57,
        ]);
    }
    main.push(0xb1);
    let main = cb.code(3, 1, &main, &[], &[]);
    let class = cb.build_named(
        "Multi",
        49,
        &[
            (1, "<init>", "(I)V", Some(two)),
            (1, "<init>", "()V", Some(one)),
            (9, "main", "([Ljava/lang/String;)V", Some(main)),
        ],
    );
    let (out, a) = inst(&class, "<init>", "(I)V", 1);
    let ca = CodeAttr::parse(&a).unwrap();
    let entry = be16(methodref_index(&out, "in"));
    let exit = be16(methodref_index(&out, "out"));
    let want = [
        0x1b, 0x99, 0, 14, 0x2a, 0xb7, obj[0], obj[1], 0x04, 0xb8, entry[0], entry[1], 0xa7, 0, 11,
        0x2a, 0xb7, this0[0], this0[1], 0x04, 0xb8, entry[0], entry[1], 0x04, 0xb8, exit[0],
        exit[1], 0xb1, 0x04, 0xb8, exit[0], exit[1], 0xbf,
    ];
    assert_eq!(ca.code, want.as_slice());
    assert_eq!(
        ca.exceptions,
        &[0, 12, 0, 15, 0, 28, 0, 0, 0, 23, 0, 28, 0, 28, 0, 0]
    );

    let ps = [ProbeSet {
        class: "sprig/test/Probe".into(),
        entry: "entry".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }];
    let targets = [
        target("<init>", "(I)V", 7),
        target("<init>", "()V", 8),
        target("main", "([Ljava/lang/String;)V", 9),
    ];
    let r = instrument(&class, &targets, &ps).unwrap();
    assert_eq!(r.instrumented_count(), 3, "{:?}", r.methods);
    let dir = std::env::temp_dir().join(format!("sprig-inst-multi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("Multi.class"), &r.bytes).unwrap();
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/java/probe/sprig/test/Probe.java"
    );
    let o = Command::new("timeout")
        .args(["120", "javac", "--release", "8", "-d"])
        .arg(&dir)
        .arg(src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_runs_verified(&dir, "Multi", "PROBE 7 2 2\nPROBE 8 1 1\nPROBE 9 1 1\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several far conditionals sharing one trampoline site.
#[test]
fn several_trampolines_at_one_place() {
    for (gap1, gap2, expect) in [
        (32755usize, 1usize, 2),
        (32753, 4, 2),
        (32750, 2, 0),
        (32700, 40, 0),
    ] {
        // 0 nop; 1 iload_0 (L); 2 ifne 7; 5 iconst_0; 6 ireturn; 7.. nops;
        // iload_0; ifeq L; nops; iload_0; ifgt L; iconst_1; ireturn
        let mut c = vec![0x00, 0x1a, 0x9a, 0, 5, 0x03, 0xac];
        c.resize(7 + gap1, 0);
        for op in [0x99u8, 0x9d] {
            c.push(0x1a);
            let here = c.len() as i32;
            c.push(op);
            c.extend_from_slice(&((1 - here) as i16).to_be_bytes());
            if op == 0x99 {
                c.resize(c.len() + gap2, 0);
            }
        }
        c.extend_from_slice(&[0x04, 0xac]);
        let class = trampoline_class(&c);
        let (_, a) = inst(&class, "f", "(I)I", 1);
        let ca = CodeAttr::parse(&a).unwrap();
        let mut s = Scratch::default();
        decode(ca.code, &mut s).unwrap();
        let (mut seen, mut tramps) = (0, 0);
        for ins in &s.insns {
            if ins.op == 0x99 || ins.op == 0x9d {
                let p = ins.off as usize;
                let t = p as i64 + i64::from(i16::from_be_bytes([ca.code[p + 1], ca.code[p + 2]]));
                let dest = if ca.code[t as usize] == 0xc8 {
                    tramps += 1;
                    let o = i32::from_be_bytes(
                        ca.code[t as usize + 1..t as usize + 5].try_into().unwrap(),
                    );
                    t + i64::from(o)
                } else {
                    t
                };
                assert_eq!(dest, 5, "reaches L directly or through a trampoline");
                seen += 1;
            }
        }
        assert_eq!(seen, 2);
        assert_eq!(tramps, expect, "gaps {gap1} {gap2}");
    }
}

/// A receiver entry probe (`aload_0`, `(Ljava/lang/Object;)V`) on an
/// instance method verifies and runs, and on a static method whose first
/// parameter is a reference gets that argument (`LockSupport.park(Object)`
/// hands its blocker this way); a static method whose first parameter is
/// a primitive, or that has none, is refused.
#[test]
fn receiver_entry_probe_verifies_and_runs() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("sprig-inst-recv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Recv.java"),
        "public class Recv { int v;\n\
         int work(int x) { if (x > 3) { return x * 2; } v += x; return v; }\n\
         public static void main(String[] a) { Recv r = new Recv(); int s = 0;\n\
         for (int i = 0; i < 10; i++) { s += r.work(i); } System.out.println(\"sum \" + s); }\n\
         static int sq(int x) { return x * x; } }\n",
    )
    .unwrap();
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/java/probe/sprig/test/Probe.java"
    );
    let o = Command::new("timeout")
        .args(["120", "javac", "--release", "8", "-d"])
        .arg(&dir)
        .arg(dir.join("Recv.java"))
        .arg(src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let class = std::fs::read(dir.join("Recv.class")).unwrap();
    let ps = [ProbeSet {
        class: "sprig/test/Probe".into(),
        entry: "receiver".into(),
        exit: "exit".into(),
        entry_receiver: true,
    }];
    let r = instrument(
        &class,
        &[
            target("work", "(I)I", 5),
            target("main", "([Ljava/lang/String;)V", 6),
            target("sq", "(I)I", 7),
        ],
        &ps,
    )
    .unwrap();
    assert_eq!(r.methods[0].result, Ok(()));
    assert_eq!(r.methods[1].result, Ok(()));
    assert!(
        matches!(r.methods[2].result, Err(SkipReason::Unsupported(_))),
        "{:?}",
        r.methods[2]
    );
    std::fs::write(dir.join("Recv.class"), &r.bytes).unwrap();
    // main's entry probe got its (non-null) argument array.
    assert_runs_verified(
        &dir,
        "Recv",
        "sum 88\nPROBE 5 0 10\nPROBE 6 0 1\nPROBE 4294967294 11 0\n",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `redirect_static`: the calls of `Thread.sleep(long)`, direct and
/// through a method reference, go to another class's `sleep(long)`; the
/// class verifies and runs; a class without such a call is left alone.
#[test]
fn static_calls_are_redirected() {
    use std::process::Command;
    let dir = std::env::temp_dir().join(format!("sprig-redirect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sprig/test")).unwrap();
    std::fs::write(
        dir.join("Nap.java"),
        "public class Nap { interface S { void s(long m) throws InterruptedException; }\n\
         public static void main(String[] a) throws Exception { Thread.sleep(1);\n\
         S s = Thread::sleep; s.s(2); Thread.sleep(3, 0); System.out.println(\"done\"); } }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sprig/test/Sleeper.java"),
        "package sprig.test; public final class Sleeper {\n\
         public static void sleep(long ms) throws InterruptedException {\n\
         System.out.println(\"SLEPT \" + ms); Thread.sleep(ms); } }\n",
    )
    .unwrap();
    let o = Command::new("timeout")
        .args(["120", "javac", "--release", "8", "-d"])
        .arg(&dir)
        .arg(dir.join("Nap.java"))
        .arg(dir.join("sprig/test/Sleeper.java"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let class = std::fs::read(dir.join("Nap.class")).unwrap();
    let out = crate::redirect_static(
        &class,
        "java/lang/Thread",
        "sleep",
        "(J)V",
        "sprig/test/Sleeper",
    )
    .unwrap()
    .expect("Nap calls Thread.sleep(long)");
    std::fs::write(dir.join("Nap.class"), &out).unwrap();
    // sleep(long, int) is another method: not redirected.
    assert_runs_verified(&dir, "Nap", "SLEPT 1\nSLEPT 2\ndone\n");
    let sleeper = std::fs::read(dir.join("sprig/test/Sleeper.class")).unwrap();
    assert_eq!(
        crate::redirect_static(&sleeper, "java/lang/Thread", "wait", "(J)V", "x/Y").unwrap(),
        None
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `main` from `dir` under `-Xverify:all` on JDK 17 and, where
/// installed, Temurin 25, and checks it succeeds and prints `want`.
fn assert_runs_verified(dir: &std::path::Path, main: &str, want: &str) {
    use std::process::Command;
    for java in ["java", "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java"] {
        if java.starts_with('/') && !std::path::Path::new(java).exists() {
            println!("skipping {java}: not installed");
            continue;
        }
        let o = Command::new("timeout")
            .args(["120", java, "-Xverify:all", "-Xshare:off", "-cp"])
            .arg(dir)
            .arg(main)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{java}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{java}");
    }
}

#[test]
fn nan_constants_are_found_in_float_and_double_slots() {
    let with = |entries: &[Vec<u8>]| {
        let mut cb = Cb::default();
        for e in entries {
            cb.cp.push(e.clone());
            if e[0] == 6 || e[0] == 5 {
                // the unusable second slot of a long or double
                cb.cp.push(Vec::new());
            }
        }
        crate::has_nan_constants(&cb.build(52, &[])).unwrap()
    };
    let float = |v: f32| [vec![4], v.to_bits().to_be_bytes().to_vec()].concat();
    let double = |v: f64| [vec![6], v.to_bits().to_be_bytes().to_vec()].concat();
    let int = |v: u32| [vec![3], v.to_be_bytes().to_vec()].concat();
    let long = |v: u64| [vec![5], v.to_be_bytes().to_vec()].concat();
    assert!(!with(&[]));
    assert!(!with(&[float(1.5), double(-0.0), float(f32::INFINITY)]));
    assert!(with(&[float(1.5), float(f32::NAN)]));
    assert!(with(&[double(2.0), double(f64::NAN), float(3.0)]));
    // Another NaN bit pattern is a NaN too.
    assert!(with(&[float(f32::from_bits(0x7f80_0001))]));
    // The same bits in an int or a long are not.
    assert!(!with(&[
        int(f32::NAN.to_bits()),
        long(f64::NAN.to_bits()),
        float(0.0)
    ]));
    assert!(crate::has_nan_constants(b"not a class").is_err());
}
