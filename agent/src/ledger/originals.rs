//! The first bytes of classes whose constant pool holds a `float` or
//! `double` NaN, to redefine them from.
//!
//! HotSpot's class redefinition merges the class's old constant pool with
//! the new one and compares these constants by value, so a NaN never finds
//! itself and is appended again by every redefinition. The bytes a
//! retransformation hands to the class file load hook are rebuilt from the
//! merged pool, with every copy, so each redefinition from them doubles the
//! copies: JDK 25's javac `JavacParser` went from 3,708 entries to 19,251
//! in eight sessions, and a redefinition batch holding it from 0.5 s to
//! 22 s, the JVM stopped throughout. From its first bytes the class gains
//! fewer copies per redefinition, but HotSpot still appends more at each
//! one (a class with two NaN constants: 113, 125, 149, 197, 293, ...
//! entries, session after session). Once the pool the JVM gives back has
//! grown by half over the first bytes' (and by at least
//! [`GROWTH_ALLOWED_MIN`] entries), the class is frozen: later sessions in
//! this JVM leave it alone (not instrumented, a warning says so), so it
//! stops growing. Kept per class and defining loader for the life of the
//! JVM (sessions come and go), within bounds.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// A class is frozen once its pool has grown past the first bytes' by half
/// of their count and by at least this many entries.
pub const GROWTH_ALLOWED_MIN: u32 = 512;

/// Internal names of the classes later sessions leave alone.
static FROZEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Notes the pool count the JVM gave back for `name` against its first
/// bytes'; true when this freezes the class (the caller warns).
pub fn note_growth(name: &str, given: u16, first: u16) -> bool {
    let (given, first) = (u32::from(given), u32::from(first));
    if given <= first + (first / 2).max(GROWTH_ALLOWED_MIN) {
        return false;
    }
    crate::sync::lock(&FROZEN).insert(name.to_string())
}

/// The frozen classes (internal names), to leave out of a session.
pub fn frozen() -> Vec<String> {
    crate::sync::lock(&FROZEN).iter().cloned().collect()
}

/// At most this many classes are kept...
const MAX_CLASSES: usize = 1024;
/// ... and this many bytes of them; past either, a class is redefined from
/// what the JVM gives back, as any other.
const MAX_BYTES: usize = 64 << 20;

#[derive(Default)]
struct Kept {
    classes: HashMap<(String, i32), Arc<[u8]>>,
    bytes: usize,
}

static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

/// The bytes a retransformation of `name` (defined by the loader whose
/// identity hash is `loader`) should start from instead of `given`: the
/// class's first bytes when its constant pool holds a NaN (kept now if this
/// is the first time), else `None`.
pub fn first_bytes(name: &str, loader: Option<i32>, given: &[u8]) -> Option<Arc<[u8]>> {
    let loader = loader?;
    let mut guard = crate::sync::lock(&KEPT);
    let kept = guard.get_or_insert_with(Kept::default);
    let key = (name.to_string(), loader);
    if let Some(first) = kept.classes.get(&key) {
        return Some(first.clone());
    }
    if !sprig_rewriter::has_nan_constants(given).unwrap_or(false)
        || kept.classes.len() >= MAX_CLASSES
        || kept.bytes + given.len() > MAX_BYTES
    {
        return None;
    }
    let first: Arc<[u8]> = Arc::from(given);
    kept.bytes += given.len();
    kept.classes.insert(key, first.clone());
    Some(first)
}

/// The constant pool count of a class file (0 when too short to say).
pub fn pool_count(class: &[u8]) -> u16 {
    class
        .get(8..10)
        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A class file with one constant (`tag`, `value`) and nothing else.
    fn class(tag: u8, value: &[u8]) -> Vec<u8> {
        let mut b = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52];
        let slots: u16 = if tag == 6 { 3 } else { 2 };
        b.extend_from_slice(&slots.to_be_bytes());
        b.push(tag);
        b.extend_from_slice(value);
        // access, this, super, interfaces, fields, methods, attributes
        b.extend_from_slice(&[0, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn only_classes_with_nan_constants_are_kept_and_the_first_bytes_win() {
        let nan = class(4, &f32::NAN.to_bits().to_be_bytes());
        let grown = class(6, &f64::NAN.to_bits().to_be_bytes());
        let plain = class(4, &1.5f32.to_bits().to_be_bytes());
        assert_eq!(pool_count(&nan), 2);
        assert_eq!(pool_count(&grown), 3);
        assert!(first_bytes("t/Plain", Some(1), &plain).is_none());
        assert!(
            first_bytes("t/Nan", None, &nan).is_none(),
            "no loader, no key"
        );
        assert_eq!(
            first_bytes("t/Nan", Some(1), &nan).as_deref(),
            Some(&nan[..])
        );
        // Later bytes of the same class and loader give the first back.
        assert_eq!(
            first_bytes("t/Nan", Some(1), &grown).as_deref(),
            Some(&nan[..])
        );
        // Another loader's class of the same name is its own.
        assert_eq!(
            first_bytes("t/Nan", Some(2), &grown).as_deref(),
            Some(&grown[..])
        );
    }

    #[test]
    fn a_class_freezes_once_its_pool_grew_by_half_and_the_minimum() {
        assert!(!note_growth("t/Small", 90 + 512, 90));
        assert!(note_growth("t/Small", 90 + 513, 90));
        assert!(!note_growth("t/Small", 5000, 90), "frozen once");
        assert!(!note_growth("t/Big", 3694 + 1847, 3694));
        assert!(note_growth("t/Big", 3694 + 1848, 3694));
        assert!(frozen().contains(&"t/Small".to_string()));
        assert!(frozen().contains(&"t/Big".to_string()));
    }
}
