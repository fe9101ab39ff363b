//! Allocation sites of the session (`--alloc`) and what each one's
//! objects weigh.
//!
//! The rewriter puts a probe after every allocation instruction of the
//! methods it instruments (`sprig_rewriter::Allocs`); each instruction gets
//! a site id here when its method is rewritten, announced to the CLI with
//! an `AllocSite` message before the class is installed, so before any
//! record carries it. Ids are per session, from 1, one per (method id,
//! bytecode offset): a class rewritten again reuses its sites' ids.
//!
//! What an allocation weighs is what JVMTI `GetObjectSize` says of the
//! object, so compact object headers (JDK 25
//! `-XX:+UseCompactObjectHeaders`), compressed class pointers and the
//! object alignment are whatever the JVM uses:
//! - after a `new`, the object is not initialised yet and the probe gets
//!   only its class: the site learns the instance size once, from an
//!   instance JNI `AllocObject` makes (no constructor runs) and
//!   `GetObjectSize`;
//! - after an array allocation of one dimension the probe gets only its
//!   length, never the array (passed to a native, a local array would
//!   escape and C2 could no longer scalar-replace it): it weighs
//!   `(base + length * scale)` rounded up to the object alignment, with
//!   the layout of its element type fitted to `GetObjectSize`
//!   ([`weigh_length`]);
//! - after a `multianewarray` of two dimensions or more the probe gets the
//!   array: its size is read, and its inner arrays are walked level by
//!   level ([`AllocLevel`]). Such an array escapes into the native call;
//!   its counts and bytes stay exact. A probe class an older sprig defined
//!   in this JVM passes every array this way;
//! - after a copy whose class the code does not fix (an instance's
//!   `Object.clone()`, a `super.clone()` naming `java/lang/Object`; a
//!   reference array's `clone()`, a generic `T[]` naming `Object[]`) the
//!   probe gets the copy, weighed by `GetObjectSize` on the agent's path:
//!   it is of the class the site names or of a subclass (an array of a
//!   subtype), and a copy of another class is recorded at a site of its
//!   own for that class ([`copy_site`]), announced when first seen.
//!
//! Under sampled timing the probe class records most allocations itself,
//! with no JNI call (`ffi/slots.rs`): once a `new` site's instance size is
//! learned the agent writes it where the Java probe reads it, and a
//! one-dimension array weighs `(base + length * scale)` rounded up to the
//! object alignment, with the base, scale and alignment of its element
//! type (the site's word names the type) fitted once per process to
//! `GetObjectSize` of arrays of every length from 0 to [`LAYOUT_LENGTHS`]
//! ([`fit_layout`]). A copy's class is what the Java probe checks: the
//! agent answers a site's first copy of a class with the site that class's
//! copies are recorded at, having written what they weigh (an instance's
//! size, or the array's element type) where the Java probe reads it, and
//! the probe keeps the last two classes of each site (`Probe.COPIES`) and
//! records their copies itself. Only a site's first allocation, an
//! element type's first, a copy site's first of each class (and any copy
//! of a third class in turn), and a `multianewarray` go through JNI; so
//! does every allocation under exact timing. (H2's B-tree pages are
//! copied by `Page.clone()`, a `super.clone()` of two classes, about 14
//! times a statement; BENCHMARKS.md has what their JNI calls cost.)

use crate::ffi::{Jni, Jvmti, Local, slots};
use crate::outbox;
use crate::sync::lock;
use sprig_wire::Message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Site ids run below this; a site past it gets no id (`NO_SITE`), and its
/// probe records nothing.
pub const SITE_CAP: u32 = slots::ALLOC_SITES as u32;
/// The id of a site the table has no room for.
pub const NO_SITE: u32 = u32::MAX;

/// Whether this session records allocations.
static ON: AtomicBool = AtomicBool::new(false);

/// Test-only (`SPRIG_AGENT_FAULT=alloc-jni-learns-only`): the native
/// path records only the allocations the Java path could not have
/// recorded (a site's or an array type's first, a `multianewarray`), so a
/// test sees every allocation the Java path leaves to JNI go missing.
static JNI_LEARNS_ONLY: AtomicBool = AtomicBool::new(false);

/// For measurements (`SPRIG_AGENT_FAULT=alloc-jni-only`): the agent tells
/// the Java probes nothing of the sites, so every allocation goes through
/// JNI, as before the Java path (the cost of the two side by side).
static JNI_ONLY: AtomicBool = AtomicBool::new(false);

/// For measurements (`SPRIG_AGENT_FAULT=exact-alloc-duty`): the agent's
/// path records nothing while set (with `Probe.allocJava`, the Java
/// path's), in the off turns.
static PAUSED: AtomicBool = AtomicBool::new(false);

/// Per site id: 0 while unknown; else `kind | dims << 8 | size << 16`
/// (`kind` 1 for an object, 2 for an array; `size` the instance size of
/// an object site once learned, 0 before; for an array site the element
/// type's code instead, [`element_code`]).
static SITES: OnceLock<Box<[AtomicU64]>> = OnceLock::new();

struct Table {
    ids: HashMap<(u32, u32), u32>,
    /// A copy site's (method, offset, class descriptor).
    copies: HashMap<u32, (u32, u32, String)>,
    /// The site of each (copy site, class of a copy) whose class is not
    /// the one the site names.
    copy_classes: HashMap<(u32, String), u32>,
    next: u32,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

const KIND_OBJECT: u64 = 1;
const KIND_ARRAY: u64 = 2;
/// A copy (`Object.clone()` of an instance, `clone()` of a reference
/// array): the probe gets the copy.
const KIND_COPY: u64 = 3;

fn sites() -> &'static [AtomicU64] {
    SITES.get_or_init(|| (0..SITE_CAP).map(|_| AtomicU64::new(0)).collect())
}

/// Starts a session; `on`: it records allocations.
pub fn begin_session(on: bool) {
    let mut t = lock(&TABLE);
    if on {
        for s in sites() {
            s.store(0, Ordering::Relaxed);
        }
        slots::clear_alloc_sites(SITE_CAP);
    }
    *t = Some(Table {
        ids: HashMap::new(),
        copies: HashMap::new(),
        copy_classes: HashMap::new(),
        next: 1,
    });
    JNI_LEARNS_ONLY.store(
        on && crate::error::fault_named("alloc-jni-learns-only"),
        Ordering::Relaxed,
    );
    JNI_ONLY.store(
        on && crate::error::fault_named("alloc-jni-only"),
        Ordering::Relaxed,
    );
    ON.store(on, Ordering::Release);
}

/// Whether the native path records only what the Java path could not
/// (see [`JNI_LEARNS_ONLY`]).
pub fn jni_learns_only() -> bool {
    JNI_LEARNS_ONLY.load(Ordering::Relaxed)
}

/// Ends the session: no more sites are handed out.
pub fn end_session() {
    ON.store(false, Ordering::Release);
    PAUSED.store(false, Ordering::Relaxed);
    *lock(&TABLE) = None;
}

/// Whether this session records allocations.
pub fn on() -> bool {
    ON.load(Ordering::Acquire)
}

/// Whether an allocation is recorded now: the session records them and
/// they are not paused ([`PAUSED`]).
pub fn recording() -> bool {
    on() && !PAUSED.load(Ordering::Relaxed)
}

/// Pauses the recording of allocations, or resumes it, on both paths;
/// false when the probe class cannot pause its own (then nothing is
/// paused).
pub fn set_paused(jni: crate::ffi::Jni<'_>, paused: bool) -> bool {
    if !crate::probe_class::set_alloc_pause(jni, paused) {
        return false;
    }
    PAUSED.store(paused, Ordering::Relaxed);
    true
}

/// The id of a site the rewriter found (announced the first time, queued).
pub fn register(site: &sprig_rewriter::AllocSite) -> u32 {
    let mut guard = lock(&TABLE);
    let Some(t) = guard.as_mut() else {
        return NO_SITE;
    };
    if let Some(&id) = t.ids.get(&(site.method, site.offset)) {
        return id;
    }
    if t.next >= SITE_CAP {
        return NO_SITE;
    }
    let id = t.next;
    t.next += 1;
    t.ids.insert((site.method, site.offset), id);
    let word = if site.clone {
        t.copies
            .insert(id, (site.method, site.offset, site.descriptor.clone()));
        KIND_COPY
    } else if site.dims == 0 {
        KIND_OBJECT
    } else {
        KIND_ARRAY | u64::from(site.dims) << 8 | u64::from(element_code(&site.descriptor)) << 16
    };
    sites()[id as usize].store(word, Ordering::Release);
    if site.dims == 1 && !site.clone && !JNI_ONLY.load(Ordering::Relaxed) {
        slots::set_alloc_site(id, slots::array_site(element_code(&site.descriptor)));
    }
    drop(guard);
    // Queued, not sent: this runs in the class file load hook, on a thread
    // loading or redefining a class, which never waits on the socket (the
    // profile names sites at report time, so a site announced after its
    // first records is named all the same).
    outbox::post(Message::AllocSite {
        id,
        method: site.method,
        bci: site.offset,
        descriptor: site.descriptor.clone(),
        dims: site.dims,
    });
    id
}

/// The site a copy of class `descriptor` made at copy site `site` is
/// recorded at: `site` itself when the site names that class, else one
/// of its own for the class (same method and offset), announced the first
/// time (queued: the probe's thread never waits on the socket); `None`
/// when the table has no room or the session ended.
fn copy_site(site: u32, descriptor: &str) -> Option<u32> {
    let mut guard = lock(&TABLE);
    let t = guard.as_mut()?;
    let (method, bci, named) = t.copies.get(&site)?;
    if named == descriptor {
        return Some(site);
    }
    let (method, bci) = (*method, *bci);
    if let Some(&id) = t.copy_classes.get(&(site, descriptor.to_owned())) {
        return Some(id);
    }
    if t.next >= SITE_CAP {
        return None;
    }
    let id = t.next;
    t.next += 1;
    t.copy_classes.insert((site, descriptor.to_owned()), id);
    sites()[id as usize].store(KIND_COPY, Ordering::Release);
    drop(guard);
    outbox::post(Message::AllocSite {
        id,
        method,
        bci,
        descriptor: descriptor.to_owned(),
        dims: 0,
    });
    Some(id)
}

/// Lets the Java path weigh the copies recorded at copy site `at`, of
/// class `descriptor` (`Probe.copyBytes`), which it cannot yet: an
/// instance's size (`bytes`, the same for every instance of a class) or,
/// for an array class, its element type, whose layout is learned first if
/// it is not yet.
fn teach_copy(jni: Jni<'_>, jvmti: &Jvmti, at: u32, descriptor: &str, bytes: u64) {
    if !descriptor.starts_with('[') {
        if let Ok(b) = i32::try_from(bytes)
            && b > 0
        {
            slots::set_alloc_site(at, b);
        }
        return;
    }
    let k = element_code(descriptor);
    if slots::array_layout(usize::from(k)) == 0
        && let Some(l) = learn_layout(jni, jvmti, k)
    {
        slots::set_array_layout(usize::from(k), l);
    }
    if slots::array_layout(usize::from(k)) != 0 {
        slots::set_alloc_site(at, slots::array_site(k));
    }
}

/// Where the Java path records the next copies of the class a copy at
/// site `site` was recorded at `at` for (`Probe.nCopy`): `at`, when
/// `site` is a copy site and the Java path can weigh what `at` records.
pub fn java_copy_site(site: u32, at: u32) -> Option<u32> {
    let word = sites().get(site as usize)?.load(Ordering::Acquire);
    (word & 0xff == KIND_COPY && !JNI_ONLY.load(Ordering::Relaxed) && slots::alloc_site(at) != 0)
        .then_some(at)
}

/// The code of an array's element type in the slot table's layouts, from
/// the array's descriptor (`[I`): 0 for references (`[L...;`, `[[...`),
/// 1 to 8 for boolean, byte, char, short, int, float, long, double (the
/// order `Probe.arrayBytes` tests them in does not matter).
pub fn element_code(descriptor: &str) -> u8 {
    match descriptor.as_bytes().get(1) {
        Some(b'Z') => 1,
        Some(b'B') => 2,
        Some(b'C') => 3,
        Some(b'S') => 4,
        Some(b'I') => 5,
        Some(b'F') => 6,
        Some(b'J') => 7,
        Some(b'D') => 8,
        _ => 0,
    }
}

/// The element sizes an element type's arrays may have (references: 4
/// with compressed oops, 8 without).
fn scales(code: u8) -> &'static [u64] {
    match code {
        1 | 2 => &[1],
        3 | 4 => &[2],
        5 | 6 => &[4],
        7 | 8 => &[8],
        _ => &[4, 8],
    }
}

/// Arrays of lengths `0..LAYOUT_LENGTHS` are weighed to learn a layout:
/// both the JVM's sizes and a fitted layout's repeat with a period of at
/// most the alignment (256 bytes at most, `-XX:ObjectAlignmentInBytes`),
/// so agreeing on 256 consecutive lengths from 0 means agreeing on all.
pub const LAYOUT_LENGTHS: usize = 257;

/// The bytes of an array of `len` elements with `layout` (the formula the
/// probe class's `arrayBytes` computes).
pub fn layout_bytes(layout: u64, len: u64) -> u64 {
    let mask = layout >> 32;
    ((layout & 0xffff) + len * ((layout >> 16) & 0xffff) + mask) & !mask
}

/// The layout (`base | scale << 16 | (alignment - 1) << 32`) that gives
/// `sizes[n]` for an array of `n` elements for every `n`, the smallest
/// alignment and base first; `None` when none of the element sizes
/// `scales` does.
pub fn fit_layout(sizes: &[u64], scales: &[u64]) -> Option<u64> {
    for align in [8u64, 16, 32, 64, 128, 256] {
        for &scale in scales {
            for base in 0..=64u64 {
                let l = base | scale << 16 | (align - 1) << 32;
                if sizes
                    .iter()
                    .enumerate()
                    .all(|(n, &s)| layout_bytes(l, n as u64) == s)
                {
                    return Some(l);
                }
            }
        }
    }
    None
}

/// Learns the layout of arrays of element type `code` from
/// `GetObjectSize` of real arrays of every length below
/// [`LAYOUT_LENGTHS`]; `None` when one cannot be made or weighed, or no
/// layout fits.
fn learn_layout(jni: Jni<'_>, jvmti: &Jvmti, code: u8) -> Option<u64> {
    let sizes = jni.with_local_frame(16, |jni| {
        let mut sizes = Vec::with_capacity(LAYOUT_LENGTHS);
        for n in 0..LAYOUT_LENGTHS as i32 {
            let a = jni.new_array(code, n)?;
            let s = jvmti.object_size(a).ok();
            jni.delete_local(a);
            sizes.push(s?);
        }
        Some(sizes)
    })?;
    fit_layout(&sizes, scales(code))
}

/// Objects of one level of an allocation: `count` objects of `bytes` in
/// all, `level` dimensions into the site's type (0: the object or array
/// the instruction returned; a `multianewarray` of `dims` dimensions also
/// has levels 1 to `dims - 1`, its inner arrays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocLevel {
    pub level: u8,
    pub count: u32,
    pub bytes: u64,
    /// The site it is recorded at when not the probe's: a copy of a
    /// subclass ([`copy_site`]).
    pub site: Option<u32>,
}

/// What an allocation at `site` made: each of its levels to `out`.
/// `object` is the class (after a `new`), the array, or the copy (after
/// a `clone()`). Returns whether
/// only JNI could record it: it taught the site or its array type what
/// it weighs, or it is a `multianewarray` (else the Java path records
/// allocations like it).
pub fn weigh(
    jni: Jni<'_>,
    jvmti: &Jvmti,
    site: u32,
    object: Local<'_>,
    out: &mut dyn FnMut(AllocLevel),
) -> bool {
    let Some(cell) = sites().get(site as usize) else {
        return false;
    };
    let word = cell.load(Ordering::Acquire);
    match word & 0xff {
        KIND_OBJECT => {
            let mut size = word >> 16;
            let learned = size == 0;
            if learned {
                size = jni
                    .with_local_frame(4, |jni| {
                        let o = jni.alloc_object(object)?;
                        jvmti.object_size(o).ok()
                    })
                    .unwrap_or(0);
                if size == 0 {
                    return true;
                }
                cell.store(KIND_OBJECT | size << 16, Ordering::Release);
                if let Ok(s) = i32::try_from(size)
                    && !JNI_ONLY.load(Ordering::Relaxed)
                {
                    slots::set_alloc_site(site, s);
                }
            }
            out(AllocLevel {
                level: 0,
                count: 1,
                bytes: size,
                site: None,
            });
            learned
        }
        KIND_ARRAY => {
            let dims = ((word >> 8) & 0xff).max(1) as u8;
            let Ok(size) = jvmti.object_size(object) else {
                return true;
            };
            out(AllocLevel {
                level: 0,
                count: 1,
                bytes: size,
                site: None,
            });
            if dims > 1 {
                jni.with_local_frame(16, |jni| inner_levels(jni, jvmti, object, dims, out));
                return true;
            }
            let k = ((word >> 16) & 0xff) as u8;
            if slots::array_layout(usize::from(k)) != 0 {
                return false;
            }
            if let Some(l) = learn_layout(jni, jvmti, k) {
                slots::set_array_layout(usize::from(k), l);
            }
            true
        }
        KIND_COPY => {
            let Ok(bytes) = jvmti.object_size(object) else {
                return true;
            };
            let class = jni.with_local_frame(4, |jni| {
                let c = jni.object_class(object)?;
                jvmti.class_signature(c).ok()
            });
            let Some((at, descriptor)) = class.and_then(|d| Some((copy_site(site, &d)?, d))) else {
                return true;
            };
            // The Java path records the next copies of this class here
            // once it can weigh them (`Probe.COPIES`, `nCopy`).
            let java = !JNI_ONLY.load(Ordering::Relaxed);
            let taught = java && slots::alloc_site(at) != 0;
            if java && !taught {
                teach_copy(jni, jvmti, at, &descriptor, bytes);
            }
            out(AllocLevel {
                level: 0,
                count: 1,
                bytes,
                site: (at != site).then_some(at),
            });
            !taught
        }
        _ => false,
    }
}

/// What a one-dimension array of `length` elements allocated at `site`
/// weighs, to `out` (level 0, one object): from the layout of its element
/// type, learned first if it is not yet. Returns whether only JNI could
/// record it (it taught the layout, or no layout fits and an array of the
/// same length was made and weighed).
pub fn weigh_length(
    jni: Jni<'_>,
    jvmti: &Jvmti,
    site: u32,
    length: u32,
    out: &mut dyn FnMut(AllocLevel),
) -> bool {
    let Some(cell) = sites().get(site as usize) else {
        return false;
    };
    let word = cell.load(Ordering::Acquire);
    if word & 0xff != KIND_ARRAY {
        return false;
    }
    let k = ((word >> 16) & 0xff) as u8;
    let mut layout = slots::array_layout(usize::from(k));
    let mut jni_only = false;
    if layout == 0 {
        jni_only = true;
        if let Some(l) = learn_layout(jni, jvmti, k) {
            slots::set_array_layout(usize::from(k), l);
            layout = l;
        }
    }
    let bytes = if layout != 0 {
        layout_bytes(layout, u64::from(length))
    } else {
        // No layout fits this JVM's sizes: weigh an array of that length.
        let Ok(n) = i32::try_from(length) else {
            return true;
        };
        let made = jni.with_local_frame(4, |jni| {
            let a = jni.new_array(k, n)?;
            jvmti.object_size(a).ok()
        });
        match made {
            Some(b) => b,
            None => return true,
        }
    };
    out(AllocLevel {
        level: 0,
        count: 1,
        bytes,
        site: None,
    });
    jni_only
}

/// The inner arrays of a `multianewarray` of `dims` dimensions, level by
/// level (each level's arrays are the elements of the one above).
fn inner_levels(
    jni: Jni<'_>,
    jvmti: &Jvmti,
    top: Local<'_>,
    dims: u8,
    out: &mut dyn FnMut(AllocLevel),
) {
    // The arrays of the level above, walked depth first per level so that
    // at most one chain of local references is alive at a time.
    for level in 1..dims {
        let mut count = 0u64;
        let mut bytes = 0u64;
        walk(jni, jvmti, top, level, &mut |size| {
            count += 1;
            bytes = bytes.saturating_add(size);
        });
        if count == 0 {
            break;
        }
        let mut left = count;
        while left > 0 {
            let n = left.min(u64::from(sprig_wire::AllocRecord::MAX_COUNT));
            // An even share per record; the last takes the rest.
            let b = if n == left { bytes } else { bytes / left * n };
            bytes -= b;
            out(AllocLevel {
                level,
                count: n as u32,
                bytes: b,
                site: None,
            });
            left -= n;
        }
    }
}

/// Calls `f` with the size of every array `depth` levels below `array`.
fn walk(jni: Jni<'_>, jvmti: &Jvmti, array: Local<'_>, depth: u8, f: &mut dyn FnMut(u64)) {
    let n = jni.array_length(array);
    for i in 0..n {
        let Some(e) = jni.object_array_element(array, i) else {
            continue;
        };
        if depth == 1 {
            if let Ok(s) = jvmti.object_size(e) {
                f(s);
            }
        } else {
            walk(jni, jvmti, e, depth - 1, f);
        }
        jni.delete_local(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes by HotSpot's rule: header and length, the elements from
    /// `base`, the whole rounded up to `align`.
    fn jvm(base: u64, scale: u64, align: u64) -> Vec<u64> {
        (0..LAYOUT_LENGTHS as u64)
            .map(|n| (base + n * scale).next_multiple_of(align))
            .collect()
    }

    #[test]
    fn layouts_fitted_to_the_sizes_give_every_length_its_size() {
        // (base, scale, alignment): compressed class pointers, compact
        // headers (JDK 25), no compressed pointers, 16-byte alignment.
        let cases = [
            (16, 4, 8, 5),
            (16, 1, 8, 2),
            (16, 8, 8, 7),
            (12, 4, 8, 5),
            (12, 2, 8, 3),
            (16, 4, 8, 0),
            (20, 8, 8, 0),
            (24, 8, 8, 7),
            (16, 1, 16, 2),
            (12, 4, 64, 0),
        ];
        for (base, scale, align, code) in cases {
            let sizes = jvm(base, scale, align);
            let l = fit_layout(&sizes, scales(code))
                .unwrap_or_else(|| panic!("no fit for {base} {scale} {align}"));
            for n in [0, 1, 2, 3, 7, 100, 255, 256, 1000, 65_537, 1 << 31] {
                assert_eq!(
                    layout_bytes(l, n),
                    (base + n * scale).next_multiple_of(align),
                    "{base} {scale} {align} length {n}"
                );
            }
        }
        // Sizes no layout of these element sizes gives.
        let mut odd = jvm(16, 4, 8);
        odd[100] += 8;
        assert_eq!(fit_layout(&odd, &[4]), None);
        assert_eq!(fit_layout(&jvm(16, 2, 8), &[4]), None);
    }

    #[test]
    fn array_site_words_name_the_element_type_and_are_negative() {
        let words: Vec<i32> = (0..=8).map(slots::array_site).collect();
        assert_eq!(words, [-1, -2, -3, -4, -5, -6, -7, -8, -9]);
    }

    #[test]
    fn element_codes_follow_the_descriptor() {
        let codes: Vec<u8> = [
            "[Z",
            "[B",
            "[C",
            "[S",
            "[I",
            "[F",
            "[J",
            "[D",
            "[Ljava/lang/String;",
            "[[I",
            "[",
        ]
        .iter()
        .map(|d| element_code(d))
        .collect();
        assert_eq!(codes, [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0]);
    }
}
