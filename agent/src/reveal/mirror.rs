//! The class mirror: what JVMTI says of loaded classes (no bytes), and the
//! classes loaded before the attach that join the mirror once linked.

use super::plan::apply;
use super::plan::own_batch;
use super::state::State;
use super::state::WATCHING_LINKS;
use crate::ffi::{Global, Jni, Jvmti, Local};
use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::vocab::names::descriptor_class;
use sprig_rewriter::{ClassInfo, MethodInfo};
use std::sync::atomic::Ordering;

pub(super) fn signature_name(jvmti: &Jvmti, c: Local<'_>) -> Option<String> {
    let sig = jvmti.class_signature(c).ok()?;
    descriptor_class(&sig).map(str::to_string)
}

/// A loaded class's facts from JVMTI (no bytes).
pub(super) fn class_facts(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    c: Local<'_>,
    name: &str,
) -> Option<ClassInfo> {
    let super_name = jni.superclass(c).and_then(|s| {
        let n = signature_name(jvmti, s);
        jni.delete_local(s);
        n
    });
    let mut interfaces = Vec::new();
    for i in jvmti.implemented_interfaces(&jni, c).ok()? {
        if let Some(n) = signature_name(jvmti, i) {
            interfaces.push(n);
        }
        jni.delete_local(i);
    }
    let access = jvmti.class_modifiers(c).ok()? as u16;
    let methods = jvmti
        .class_methods(c)
        .ok()?
        .into_iter()
        .filter_map(|m| {
            let (name, descriptor) = jvmti.method_name(m).ok()?;
            let access = jvmti.method_modifiers(m).ok()? as u16;
            let code = access & NO_CODE == 0;
            Some(MethodInfo {
                name,
                descriptor,
                access,
                code_length: u32::from(code),
                has_calls: code,
            })
        })
        .collect();
    Some(ClassInfo {
        name: name.to_string(),
        super_name,
        interfaces,
        access,
        major_version: 0,
        methods,
    })
}

/// Whether the revelation steps must look for newly prepared classes
/// themselves (ClassPrepare could not be enabled).
pub(super) fn polls_unprepared(st: &State) -> bool {
    !st.unprepared.is_empty() && !WATCHING_LINKS.load(Ordering::Acquire)
}

/// Adds the classes of `unprepared` that are prepared by now to the mirror,
/// when ClassPrepare does not. Returns the classes to retransform.
pub(super) fn mirror_prepared(jvmti: &Jvmti, jni: Jni<'_>, st: &mut State) -> Vec<String> {
    if !polls_unprepared(st) {
        return Vec::new();
    }
    mirror_prepared_of(jvmti, jni, st, None)
}

/// Adds the classes of `unprepared` named `only` (all when `None`) that
/// are prepared by now to the mirror. Returns the classes to retransform.
pub(super) fn mirror_prepared_of(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    st: &mut State,
    only: Option<&str>,
) -> Vec<String> {
    let mut names = Vec::new();
    let todo: Vec<(String, Vec<Global>)> = match only {
        Some(n) => st.unprepared.remove_entry(n).into_iter().collect(),
        None => st.unprepared.drain().collect(),
    };
    let mut done = Vec::new();
    for (name, globals) in todo {
        let mut still = Vec::new();
        for g in globals {
            let info = jni.with_local_frame(32, |jni| class_facts(jvmti, jni, g.as_local(), &name));
            match info {
                Some(info) => {
                    let outcome = st.revealer.on_class_loaded(info, 0, Vec::new);
                    // Already defined: what it plans needs a redefinition.
                    names.extend(apply(st, own_batch(&name, outcome.methods)));
                    names.extend(apply(st, outcome.redefine));
                    done.push(g);
                }
                None => still.push(g),
            }
        }
        if !still.is_empty() {
            st.unprepared.insert(name, still);
        }
    }
    for g in done {
        jni.delete_global(g);
    }
    names
}
