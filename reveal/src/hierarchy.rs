//! A mirror of the loaded classes: supertypes, subtypes and declared methods,
//! with the method resolution and selection rules revelation needs.
//!
//! Classes are keyed by internal name (`com/acme/Foo`). When several class
//! loaders define the same name, the first definition's members are kept and
//! the loader ids of the others are only recorded: revelation then treats all
//! copies as one class (every copy gets the same methods instrumented, under
//! the same method ids). Applications that load *different* classes under one
//! name (rare outside application servers) get the union of their call
//! graphs resolved against the first definition.

use std::collections::{HashMap, HashSet, VecDeque};

use sprig_rewriter::vocab::access::{
    ACC_ABSTRACT, ACC_FINAL, ACC_INTERFACE, ACC_NATIVE, ACC_PRIVATE, ACC_STATIC,
};
use sprig_rewriter::{ClassInfo, MethodInfo};

use crate::model::MethodKey;

/// One loaded class as the mirror keeps it.
#[derive(Clone, Debug)]
pub struct LoadedClass {
    pub name: String,
    pub super_name: Option<String>,
    pub interfaces: Vec<String>,
    pub access: u16,
    /// Declared methods in declaration order.
    pub methods: Vec<MethodInfo>,
    /// Every class loader id that defined this name, in load order.
    pub loaders: Vec<u64>,
    /// Method name → indices into `methods` (its overloads).
    by_name: HashMap<String, Vec<usize>>,
}

impl LoadedClass {
    fn new(info: ClassInfo, loader: u64) -> LoadedClass {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, m) in info.methods.iter().enumerate() {
            by_name.entry(m.name.clone()).or_default().push(i);
        }
        LoadedClass {
            name: info.name,
            super_name: info.super_name,
            interfaces: info.interfaces,
            access: info.access,
            methods: info.methods,
            loaders: vec![loader],
            by_name,
        }
    }

    pub fn is_interface(&self) -> bool {
        self.access & ACC_INTERFACE != 0
    }

    /// The declared method `name` + `descriptor`, if any.
    pub fn method(&self, name: &str, descriptor: &str) -> Option<&MethodInfo> {
        self.by_name
            .get(name)?
            .iter()
            .map(|&i| &self.methods[i])
            .find(|m| m.descriptor == descriptor)
    }

    /// The direct supertypes: the superclass first, then the interfaces.
    pub fn direct_supertypes(&self) -> impl Iterator<Item = &str> {
        self.super_name
            .as_deref()
            .into_iter()
            .chain(self.interfaces.iter().map(String::as_str))
    }
}

/// Whether a method has bytecode (so it can be instrumented and scanned).
pub fn has_code(m: &MethodInfo) -> bool {
    m.access & (ACC_ABSTRACT | ACC_NATIVE) == 0 && m.code_length > 0
}

/// Whether a method takes part in virtual dispatch (can override or be
/// overridden): an instance method that is neither private nor a constructor.
pub fn is_virtual(m: &MethodInfo) -> bool {
    m.access & (ACC_STATIC | ACC_PRIVATE) == 0 && !m.name.starts_with('<')
}

/// The class-hierarchy mirror.
#[derive(Clone, Debug, Default)]
pub struct Hierarchy {
    classes: HashMap<String, LoadedClass>,
    /// Direct subtypes (subclasses, implementors, subinterfaces) by the name
    /// of the supertype, which need not be loaded itself.
    subtypes: HashMap<String, Vec<String>>,
}

impl Hierarchy {
    pub fn new() -> Hierarchy {
        Hierarchy::default()
    }

    /// Adds a loaded class. Returns `true` when the name is new; a repeated
    /// name (the same class again, or another loader's class of that name)
    /// only records the loader id and keeps the first definition.
    pub fn add_class(&mut self, info: ClassInfo, loader_id: u64) -> bool {
        if let Some(existing) = self.classes.get_mut(&info.name) {
            if !existing.loaders.contains(&loader_id) {
                existing.loaders.push(loader_id);
            }
            return false;
        }
        let class = LoadedClass::new(info, loader_id);
        for sup in class.direct_supertypes() {
            self.subtypes
                .entry(sup.to_string())
                .or_default()
                .push(class.name.clone());
        }
        self.classes.insert(class.name.clone(), class);
        true
    }

    pub fn get(&self, name: &str) -> Option<&LoadedClass> {
        self.classes.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.classes.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Every loaded class, in no particular order.
    pub fn classes(&self) -> impl Iterator<Item = &LoadedClass> {
        self.classes.values()
    }

    /// The declared method, if its class is loaded and declares it.
    pub fn declared(&self, class: &str, name: &str, descriptor: &str) -> Option<&MethodInfo> {
        self.classes.get(class)?.method(name, descriptor)
    }

    /// `class` and all its supertypes, transitively, breadth first (`class`
    /// first). Names of supertypes that are not loaded are included but not
    /// walked through.
    pub fn supertypes(&self, class: &str) -> Vec<String> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out = Vec::new();
        let mut queue: VecDeque<&str> = VecDeque::from([class]);
        while let Some(c) = queue.pop_front() {
            if !seen.insert(c) {
                continue;
            }
            out.push(c.to_string());
            if let Some(loaded) = self.classes.get(c) {
                queue.extend(loaded.direct_supertypes());
            }
        }
        out
    }

    /// Whether `sub` is `sup` or one of its loaded descendants.
    pub fn is_subtype(&self, sub: &str, sup: &str) -> bool {
        self.supertypes(sub).iter().any(|s| s == sup)
    }

    /// All loaded subtypes of `class` (subclasses, implementors and
    /// subinterfaces), transitively, breadth first, without `class` itself.
    pub fn subtypes(&self, class: &str) -> Vec<&str> {
        let mut seen: HashSet<&str> = HashSet::new();
        let mut out = Vec::new();
        let mut queue: VecDeque<&str> = self
            .subtypes
            .get(class)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        while let Some(c) = queue.pop_front() {
            if !seen.insert(c) {
                continue;
            }
            out.push(c);
            if let Some(next) = self.subtypes.get(c) {
                queue.extend(next.iter().map(String::as_str));
            }
        }
        out
    }

    /// Resolves `name descriptor` referenced through `class` the way the JVM
    /// resolves a method reference: the first declaration along the
    /// superclass chain, else a default (non-abstract) method of a
    /// superinterface (the nearest one breadth first, standing in for the
    /// maximally specific one), else an abstract interface declaration.
    /// `None` when nothing loaded declares it.
    pub fn resolve(&self, class: &str, name: &str, descriptor: &str) -> Option<MethodKey> {
        self.lookup(class, name, descriptor, false)
    }

    /// Selects the method an instance of `class` runs for a virtual or
    /// interface call of `name descriptor`: like [`Hierarchy::resolve`] but
    /// static and private declarations neither override nor get selected.
    pub fn select(&self, class: &str, name: &str, descriptor: &str) -> Option<MethodKey> {
        self.lookup(class, name, descriptor, true)
    }

    fn lookup(
        &self,
        class: &str,
        name: &str,
        descriptor: &str,
        instance_only: bool,
    ) -> Option<MethodKey> {
        let fits = |c: &str, m: &MethodInfo| !instance_only || c == class || is_virtual(m);
        let mut chain = Vec::new();
        let mut cur = Some(class);
        while let Some(c) = cur {
            let Some(loaded) = self.classes.get(c) else {
                break;
            };
            if let Some(m) = loaded.method(name, descriptor)
                && fits(c, m)
            {
                return Some(MethodKey::new(c, name, descriptor));
            }
            chain.push(loaded);
            cur = loaded.super_name.as_deref();
        }
        let mut abstract_hit = None;
        let mut seen: HashSet<&str> = HashSet::new();
        let mut queue: VecDeque<&str> = chain
            .iter()
            .flat_map(|c| c.interfaces.iter().map(String::as_str))
            .collect();
        while let Some(i) = queue.pop_front() {
            if !seen.insert(i) {
                continue;
            }
            let Some(iface) = self.classes.get(i) else {
                continue;
            };
            if let Some(m) = iface.method(name, descriptor)
                && is_virtual(m)
            {
                if m.access & ACC_ABSTRACT == 0 {
                    return Some(MethodKey::new(i, name, descriptor));
                }
                abstract_hit.get_or_insert_with(|| MethodKey::new(i, name, descriptor));
            }
            queue.extend(iface.interfaces.iter().map(String::as_str));
        }
        abstract_hit
    }

    /// Every method a virtual or interface call `owner.name descriptor` can
    /// run among the loaded classes: the declaration it resolves to plus the
    /// selected method of every loaded subtype of `owner` (so overrides, and
    /// also implementations inherited from a superclass that does not itself
    /// implement `owner`). Methods without code (abstract, native) are left
    /// out. A private, static or final resolved declaration has no overrides.
    pub fn virtual_targets(&self, owner: &str, name: &str, descriptor: &str) -> Vec<MethodKey> {
        let mut out: Vec<MethodKey> = Vec::new();
        let mut seen: HashSet<MethodKey> = HashSet::new();
        let mut push = |k: MethodKey, out: &mut Vec<MethodKey>| {
            if self
                .declared(&k.class, &k.name, &k.descriptor)
                .is_some_and(has_code)
                && seen.insert(k.clone())
            {
                out.push(k);
            }
        };
        if let Some(decl) = self.resolve(owner, name, descriptor) {
            let closed = self
                .declared(&decl.class, name, descriptor)
                .is_some_and(|m| !is_virtual(m) || m.access & ACC_FINAL != 0);
            push(decl, &mut out);
            if closed {
                return out;
            }
        }
        for sub in self.subtypes(owner) {
            if let Some(k) = self.select(sub, name, descriptor) {
                push(k, &mut out);
            }
        }
        out
    }
}
