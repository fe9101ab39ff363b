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
//! - after an array allocation the probe gets the array: its size is read
//!   each time (lengths differ), and a `multianewarray`'s inner arrays are
//!   walked level by level ([`AllocLevel`]).

use crate::ffi::{Jni, Jvmti, Local};
use crate::outbox;
use crate::sync::lock;
use sprig_wire::Message;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Site ids run below this; a site past it gets no id (`NO_SITE`), and its
/// probe records nothing.
pub const SITE_CAP: u32 = 1 << 18;
/// The id of a site the table has no room for.
pub const NO_SITE: u32 = u32::MAX;

/// Whether this session records allocations.
static ON: AtomicBool = AtomicBool::new(false);

/// Per site id: 0 while unknown; else `kind | dims << 8 | size << 16`
/// (`kind` 1 for an object, 2 for an array; `size` the instance size of
/// an object site once learned, 0 before).
static SITES: OnceLock<Box<[AtomicU64]>> = OnceLock::new();

struct Table {
    ids: HashMap<(u32, u32), u32>,
    next: u32,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

const KIND_OBJECT: u64 = 1;
const KIND_ARRAY: u64 = 2;

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
    }
    *t = Some(Table {
        ids: HashMap::new(),
        next: 1,
    });
    ON.store(on, Ordering::Release);
}

/// Ends the session: no more sites are handed out.
pub fn end_session() {
    ON.store(false, Ordering::Release);
    *lock(&TABLE) = None;
}

/// Whether this session records allocations.
pub fn on() -> bool {
    ON.load(Ordering::Acquire)
}

/// The id of a site the rewriter found (announced the first time).
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
    let word = if site.dims == 0 {
        KIND_OBJECT
    } else {
        KIND_ARRAY | u64::from(site.dims) << 8
    };
    sites()[id as usize].store(word, Ordering::Release);
    drop(guard);
    outbox::send(Message::AllocSite {
        id,
        method: site.method,
        bci: site.offset,
        descriptor: site.descriptor.clone(),
        dims: site.dims,
    });
    id
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
}

/// What an allocation at `site` made: each of its levels to `out`.
/// `object` is the class (after a `new`) or the array.
pub fn weigh(
    jni: Jni<'_>,
    jvmti: &Jvmti,
    site: u32,
    object: Local<'_>,
    out: &mut dyn FnMut(AllocLevel),
) {
    let Some(cell) = sites().get(site as usize) else {
        return;
    };
    let word = cell.load(Ordering::Acquire);
    match word & 0xff {
        KIND_OBJECT => {
            let mut size = word >> 16;
            if size == 0 {
                size = jni
                    .with_local_frame(4, |jni| {
                        let o = jni.alloc_object(object)?;
                        jvmti.object_size(o).ok()
                    })
                    .unwrap_or(0);
                if size == 0 {
                    return;
                }
                cell.store(KIND_OBJECT | size << 16, Ordering::Release);
            }
            out(AllocLevel {
                level: 0,
                count: 1,
                bytes: size,
            });
        }
        KIND_ARRAY => {
            let dims = ((word >> 8) & 0xff).max(1) as u8;
            let Ok(size) = jvmti.object_size(object) else {
                return;
            };
            out(AllocLevel {
                level: 0,
                count: 1,
                bytes: size,
            });
            if dims > 1 {
                jni.with_local_frame(16, |jni| inner_levels(jni, jvmti, object, dims, out));
            }
        }
        _ => {}
    }
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
