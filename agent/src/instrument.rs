//! Instrumentation and restore: the class file load hook, root matching
//! over loaded classes, RetransformClasses batches, and the restore on
//! detach.
//!
//! Classes are changed only through RetransformClasses and the class file
//! load hook: to instrument, the hook returns rewritten bytes; to restore,
//! the class is retransformed while the hook returns nothing, which gives
//! back exactly the class as it was (and composes with other agents). The
//! same hook instruments matching classes that load later.
//!
//! What the hook instruments in a class: with revelation on (the default),
//! the methods `reveal` planned for it (roots with the root probes, the rest
//! with the plain ones); with `--roots-only`, the methods the root patterns
//! name. Every retransformation installs a class's whole plan, so the
//! counters replace a class's record rather than add to it.

use crate::ffi::{ClassFile, Event, Global, Jni, Jvmti, JvmtiError, Local, MethodId};
use crate::frames;
use crate::ledger::{self, ClassRecord, Counters, originals};
use crate::methods::announce_method;
use crate::probe_class::{self, PLAIN_PROBES, ROOT_PROBES, probe_sets};
use crate::reveal;
use crate::suggest;
use sprig_reveal::{left_out_line, probe_entries_of, probes_call};
use sprig_rewriter::Target;
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::vocab::names::{binary_name, descriptor_class, internal_name};
use sprig_wire::Message;
use std::collections::{HashMap, HashSet};

/// A session starts: the class file load hook goes on, and from now on
/// instruments the classes the ledger's patterns match.
pub fn begin_session(jvmti: &Jvmti) -> Result<(), JvmtiError> {
    jvmti.set_event(Event::ClassFileLoadHook, true)
}

/// The hook could not hand its bytes to the VM.
pub fn report_hook_failure(name: Option<&str>, e: JvmtiError) {
    ledger::report_hook_failure(name, e)
}

fn dotted(internal: &str) -> String {
    binary_name(internal)
}

/// Whether a class is never instrumented whatever the patterns say.
fn excluded(internal: &str) -> bool {
    internal.starts_with("sprig/")
}

/// The class file load hook (any thread; during a retransformation, the
/// thread that called RetransformClasses). Returns new bytes to install.
pub fn on_class_file(jni: Jni<'_>, input: &ClassFile<'_>) -> Option<Vec<u8>> {
    let name = input.name?;
    if excluded(name) {
        return None;
    }
    // `--locks`: the JDK's park and sleep methods, while its source runs.
    if let Some(bytes) = crate::wait_classes::class_file(name, input.bytes) {
        return bytes;
    }
    // A class with NaN constants is redefined from its first bytes, never
    // from what the JVM gives back (see `originals`): instrumented from
    // them, and put back to them.
    let first = if input.redefining {
        originals::first_bytes(name, input.loader, input.bytes)
    } else {
        None
    };
    let Some(first) = first else {
        return instrumented_bytes(jni, input, name);
    };
    let (given, at_first) = (
        originals::pool_count(input.bytes),
        originals::pool_count(&first),
    );
    let changed = first[..] != input.bytes[..];
    if probe_class::debug_on() && changed {
        eprintln!(
            "sprig agent: {name} redefined from its first bytes (NaN constants): \
             constant pool {given} entries as the JVM gave it back, {at_first} in the first bytes"
        );
    }
    if originals::note_growth(name, given, at_first) {
        crate::outbox::send(Message::Warning(format!(
            "{}: HotSpot copies this class's NaN constants again at every redefinition \
             (constant pool {given} entries, {at_first} when sprig first redefined it), and each \
             redefinition of it takes longer; later sessions in this JVM leave it \
             uninstrumented",
            dotted(name)
        )));
    }
    let from_first = ClassFile {
        bytes: &first,
        ..*input
    };
    instrumented_bytes(jni, &from_first, name).or_else(|| changed.then(|| first.to_vec()))
}

/// [`on_class_file`] once the bytes to start from are chosen.
fn instrumented_bytes(_jni: Jni<'_>, input: &ClassFile<'_>, name: &str) -> Option<Vec<u8>> {
    let class = dotted(name);
    let (patterns, n_patterns, silenced) = ledger::with(|p| {
        if !p.instrumenting || p.denied.contains(name) {
            return None;
        }
        if p.edge_classes.contains(name) {
            return Some((Vec::new(), usize::MAX, false));
        }
        let matching: Vec<(usize, MethodPattern)> = p
            .patterns
            .iter()
            .enumerate()
            .filter(|(_, pat)| pat.matches_class(&class))
            .map(|(i, pat)| (i, pat.clone()))
            .collect();
        let silenced = input.redefining && p.silenced.contains(name);
        Some((matching, p.patterns.len(), silenced))
    })??;
    if silenced && patterns.is_empty() {
        // Put back for a silent window: its original bytes.
        return None;
    }
    if !input.redefining {
        warn_left_out_at_load(name, input.bytes, &patterns);
    }
    if n_patterns == usize::MAX {
        let (targets, owner) = edge_targets(name, input, &class)?;
        return install(name, input, &targets, &owner, None, 0);
    }
    let (targets, owner, guards) = if reveal::enabled() {
        revealed_targets(name, input, &class, &patterns)
    } else {
        let (t, o) = root_targets(name, input, &class, &patterns)?;
        (t, o, None)
    };
    let (targets, owner, guards) = without_probe_path(name, targets, owner, guards);
    // A root's class in a silent window keeps its root methods' probes
    // only (they time the silent root calls).
    let (targets, owner, guards) = if silenced {
        roots_of(targets, owner, guards)
    } else {
        (targets, owner, guards)
    };
    if targets.is_empty() {
        return None;
    }
    install(name, input, &targets, &owner, guards.as_deref(), n_patterns)
}

/// The root methods of a class's plan (those a root pattern owns).
fn roots_of(
    targets: Vec<Target>,
    owner: Vec<usize>,
    guards: Option<Vec<Vec<sprig_rewriter::GuardSite>>>,
) -> Plan3 {
    let keep: Vec<bool> = owner.iter().map(|o| *o != usize::MAX).collect();
    let t = targets
        .into_iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(x, _)| x)
        .collect();
    let o = owner
        .into_iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(x, _)| x)
        .collect();
    let g = guards.map(|g| {
        g.into_iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(x, _)| x)
            .collect()
    });
    (t, o, g)
}

/// Drops the methods sprig's probes call ([`probes_call`]) from a class's
/// plan, whichever way they got there (a root, revelation, dormant probes):
/// probes in them would call themselves without end.
fn without_probe_path(
    name: &str,
    targets: Vec<Target>,
    owner: Vec<usize>,
    guards: Option<Vec<Vec<sprig_rewriter::GuardSite>>>,
) -> Plan3 {
    if probe_entries_of(name).next().is_none() {
        return (targets, owner, guards);
    }
    let keep: Vec<bool> = targets
        .iter()
        .map(|t| !probes_call(name, &t.name, &t.descriptor))
        .collect();
    fn pick<T>(v: Vec<T>, keep: &[bool]) -> Vec<T> {
        v.into_iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(x, _)| x)
            .collect()
    }
    let guards = guards.map(|g| pick(g, &keep));
    (pick(targets, &keep), pick(owner, &keep), guards)
}

/// The methods with code of a class (internal name) that a root pattern
/// names and the probes call, as dotted `Class.method` names.
fn left_out_of(
    class: &str,
    pattern: &MethodPattern,
    methods: &[(String, String, i32)],
) -> Vec<String> {
    methods
        .iter()
        .filter(|(_, _, mods)| mods & i32::from(NO_CODE) == 0)
        .filter(|(n, d, _)| pattern.matches_method(n, d) && probes_call(class, n, d))
        .map(|(n, _, _)| format!("{}.{n}", dotted(class)))
        .collect()
}

/// A class loading during the session that a root pattern names methods
/// of which the probes call: says so once per pattern.
fn warn_left_out_at_load(name: &str, bytes: &[u8], patterns: &[(usize, MethodPattern)]) {
    if patterns.is_empty() || probe_entries_of(name).next().is_none() {
        return;
    }
    let Ok(info) = sprig_rewriter::class_info(bytes) else {
        return;
    };
    let methods: Vec<(String, String, i32)> = info
        .methods
        .iter()
        .map(|m| (m.name.clone(), m.descriptor.clone(), i32::from(m.access)))
        .collect();
    for (i, p) in patterns {
        let mut left = left_out_of(name, p, &methods);
        if left.is_empty() {
            continue;
        }
        // Before the start has said its line for the pattern (naming the
        // classes loaded then), a class that loads says nothing.
        let first = ledger::with(|l| l.roots_reported && l.left_out_warned.insert(*i));
        if !first.unwrap_or(false) {
            continue;
        }
        left.sort();
        left.dedup();
        crate::outbox::send(Message::Warning(left_out_line(p.as_str(), &left, false)));
    }
}

/// The methods the revealer planned for the class, each with the root
/// pattern it counts for (`usize::MAX`: not a root).
fn revealed_targets(
    name: &str,
    input: &ClassFile<'_>,
    class: &str,
    patterns: &[(usize, MethodPattern)],
) -> Plan3 {
    let (planned, guards) = reveal::targets(name, input.bytes, input.redefining);
    let _ = class;
    let mut targets = Vec::with_capacity(planned.len());
    let mut owner = Vec::with_capacity(planned.len());
    for (t, root) in planned {
        let pi = if root {
            patterns
                .iter()
                .find(|(_, p)| p.matches_method(&t.name, &t.descriptor))
                .map_or(usize::MAX, |(i, _)| *i)
        } else {
            usize::MAX
        };
        targets.push(t);
        owner.push(pi);
    }
    (targets, owner, guards)
}

/// The methods to instrument in a class, the root pattern each counts for,
/// and (when call sites are watched) each one's receiver checks.
type Plan3 = (
    Vec<Target>,
    Vec<usize>,
    Option<Vec<Vec<sprig_rewriter::GuardSite>>>,
);

/// Roots-only sessions: the methods the root patterns name.
fn root_targets(
    name: &str,
    input: &ClassFile<'_>,
    class: &str,
    patterns: &[(usize, MethodPattern)],
) -> Option<(Vec<Target>, Vec<usize>)> {
    if patterns.is_empty() {
        return None;
    }
    let info = match sprig_rewriter::class_info(input.bytes) {
        Ok(info) => info,
        Err(e) => {
            let mut guard = ledger::lock();
            ledger::report_failure(guard.as_mut(), name, String::new(), e.to_string());
            return None;
        }
    };
    let mut targets = Vec::new();
    let mut owner = Vec::new();
    for m in &info.methods {
        if m.access & NO_CODE != 0 {
            continue;
        }
        if probes_call(name, &m.name, &m.descriptor) {
            continue;
        }
        let Some((pi, _)) = patterns
            .iter()
            .find(|(_, p)| p.matches_method(&m.name, &m.descriptor))
        else {
            continue;
        };
        let id = announce_method(class, &m.name, &m.descriptor);
        targets.push(Target {
            name: m.name.clone(),
            descriptor: m.descriptor.clone(),
            id,
            probes: ROOT_PROBES,
        });
        owner.push(*pi);
    }
    Some((targets, owner))
}

/// A class of the call-edge bursts (`sprig sample --edges`): every method
/// with code gets the plain probes, dormant (its id is never made active,
/// so outside a burst a probe stops at its Java check), except those the
/// probes call.
fn edge_targets(
    name: &str,
    input: &ClassFile<'_>,
    class: &str,
) -> Option<(Vec<Target>, Vec<usize>)> {
    let info = match sprig_rewriter::class_info(input.bytes) {
        Ok(info) => info,
        Err(e) => {
            let mut guard = ledger::lock();
            ledger::report_failure(guard.as_mut(), name, String::new(), e.to_string());
            return None;
        }
    };
    let mut targets = Vec::new();
    for m in &info.methods {
        if m.access & NO_CODE != 0 || probes_call(name, &m.name, &m.descriptor) {
            continue;
        }
        let (id, _) = crate::methods::id_for(class, &m.name, &m.descriptor);
        targets.push(Target {
            name: m.name.clone(),
            descriptor: m.descriptor.clone(),
            id,
            probes: PLAIN_PROBES,
        });
    }
    let owner = vec![usize::MAX; targets.len()];
    (!targets.is_empty()).then_some((targets, owner))
}

/// Gives the loaded classes named (binary names) dormant probes in every
/// method for the call-edge bursts, in one RetransformClasses batch (one
/// class at a time if it fails); classes that load later get them from
/// the hook. Returns the classes and methods that hold them now.
pub fn instrument_edges(jvmti: &Jvmti, jni: Jni<'_>, classes: &[String]) -> (u32, u32) {
    let wanted: HashSet<String> = classes
        .iter()
        .map(|c| internal_name(c))
        .filter(|c| !excluded(c))
        .collect();
    if ledger::with(|p| p.edge_classes.extend(wanted.iter().cloned())).is_none() {
        return (0, 0);
    }
    jni.with_local_frame(64, |jni| {
        let loaded = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut batch: Vec<(Local<'_>, String)> = Vec::new();
        for &c in &loaded {
            let Ok(sig) = jvmti.class_signature(c) else {
                continue;
            };
            let Some(internal) = descriptor_class(&sig) else {
                continue;
            };
            if wanted.contains(internal) && jvmti.is_modifiable(c).unwrap_or(false) {
                batch.push((c, internal.to_string()));
            }
        }
        ledger::retransform_batch(&batch, true, |cs| retransform_locals(jvmti, cs));
    });
    ledger::with(|p| {
        let mut classes = 0u32;
        let mut methods = 0u32;
        for (name, rec) in &p.committed {
            if p.edge_classes.contains(name) {
                classes += 1;
                methods = methods.saturating_add(rec.methods);
            }
        }
        (classes, methods)
    })
    .unwrap_or((0, 0))
}

/// Rewrites the class with `targets` and records what was instrumented.
fn install(
    name: &str,
    input: &ClassFile<'_>,
    targets: &[Target],
    owner: &[usize],
    guards: Option<&[Vec<sprig_rewriter::GuardSite>]>,
    n_patterns: usize,
) -> Option<Vec<u8>> {
    let guards = guards.map(|sites| sprig_rewriter::Guards {
        class: probe_class::CLASS,
        method: probe_class::SITE,
        reach: probe_class::REACH,
        sites,
    });
    let mut site = |s: &sprig_rewriter::AllocSite| crate::allocs::register(s);
    let mut allocs = sprig_rewriter::Allocs {
        class: probe_class::CLASS,
        object: probe_class::ALLOC,
        array: probe_class::ALLOC_ARRAY,
        array_length: probe_class::alloc_lengths_available()
            .then_some(probe_class::ALLOC_ARRAY_LENGTH),
        site: &mut site,
    };
    let result = sprig_rewriter::instrument_full(
        input.bytes,
        targets,
        probe_sets(),
        guards.as_ref(),
        crate::allocs::on().then_some(&mut allocs),
    );
    let mut guard = ledger::lock();
    let plan = guard.as_mut()?;
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            ledger::report_failure(Some(plan), name, String::new(), e.to_string());
            return None;
        }
    };
    let mut rec = ClassRecord {
        methods: 0,
        per_pattern: vec![0; n_patterns],
    };
    for (outcome, pi) in out.methods.iter().zip(owner) {
        if outcome.result.is_ok() {
            frames::note_probed(name, &outcome.name, &outcome.descriptor);
            rec.methods += 1;
            if let Some(n) = rec.per_pattern.get_mut(*pi) {
                *n += 1;
            }
        }
    }
    if rec.methods == 0 {
        return None;
    }
    if input.redefining {
        // Every retransformation installs the class's whole plan.
        plan.pending.insert(name.to_string(), rec);
    } else {
        // A class loading now: its probes are live once it is defined.
        let live: Vec<(String, u32)> = rec
            .per_pattern
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (plan.patterns[i].to_string(), *n))
            .collect();
        plan.commit_loaded(name, rec);
        drop(guard);
        for (pattern, methods) in live {
            crate::outbox::send(Message::RootInstrumented { pattern, methods });
        }
    }
    // `--locks` where `Thread.sleep(long)` is native: its calls go to
    // the wait probes' stand-in.
    Some(crate::wait_classes::redirect_sleep(out.bytes))
}

/// What [`instrument_loaded`] did, per pattern.
#[derive(Debug, Default)]
pub struct RootReport {
    pub instrumented: Vec<(String, u32)>,
    /// (pattern, whether some loaded class matched its class part, near matches)
    pub not_found: Vec<(String, bool, Vec<String>)>,
    /// Patterns whose methods were found but whose classes all failed to
    /// instrument (each failure was reported with `ClassFailed`).
    pub failed: Vec<String>,
}

/// Instruments the root methods of every loaded class the patterns match:
/// ids announced first, then one RetransformClasses batch (one class at a
/// time if the batch fails, to find the culprit). Patterns that match
/// nothing stay armed for classes loaded later and come back with near
/// matches.
pub fn instrument_loaded(jvmti: &Jvmti, jni: Jni<'_>) -> RootReport {
    let patterns = ledger::with(|p| p.patterns.clone()).unwrap_or_default();
    let revealing = reveal::enabled();
    jni.with_local_frame(64, |jni| {
        let classes = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut names = Vec::with_capacity(classes.len());
        let mut batch: Vec<(Local<'_>, String)> = Vec::new();
        let mut class_methods: Vec<Vec<(String, Vec<String>)>> = vec![Vec::new(); patterns.len()];
        let mut matched = vec![0u32; patterns.len()];
        let mut left_out: Vec<Vec<String>> = vec![Vec::new(); patterns.len()];
        for &c in &classes {
            let Ok(sig) = jvmti.class_signature(c) else {
                continue;
            };
            let Some(internal) = descriptor_class(&sig) else {
                continue; // arrays and primitives
            };
            if excluded(internal) {
                continue;
            }
            let class = dotted(internal);
            let hits: Vec<usize> = (0..patterns.len())
                .filter(|&i| patterns[i].matches_class(&class))
                .collect();
            if !hits.is_empty() && jvmti.is_modifiable(c).unwrap_or(false) {
                let methods = declared_methods(jvmti, c);
                let mut any = false;
                if probe_entries_of(internal).next().is_some() {
                    for &i in &hits {
                        left_out[i].extend(left_out_of(internal, &patterns[i], &methods));
                    }
                }
                // Revealing: the revealer plans the roots (`reveal::start`).
                let own_roots = if revealing { &[][..] } else { &methods[..] };
                for (name, desc, mods) in own_roots {
                    if mods & i32::from(NO_CODE) != 0 || probes_call(internal, name, desc) {
                        continue;
                    }
                    if let Some(&pi) = hits
                        .iter()
                        .find(|&&i| patterns[i].matches_method(name, desc))
                    {
                        announce_method(&class, name, desc);
                        matched[pi] += 1;
                        any = true;
                    }
                }
                for &i in &hits {
                    class_methods[i]
                        .push((class.clone(), methods.iter().map(|m| m.0.clone()).collect()));
                }
                if any {
                    batch.push((c, internal.to_string()));
                }
            }
            names.push(class);
        }
        if revealing {
            let hits = reveal::start(jvmti, jni, &patterns);
            for (m, h) in matched.iter_mut().zip(hits) {
                *m = u32::try_from(h).unwrap_or(u32::MAX);
            }
        } else {
            ledger::retransform_batch(&batch, true, |cs| retransform_locals(jvmti, cs));
        }
        let mut report = RootReport::default();
        let live = ledger::with(|p| {
            p.roots_reported = true;
            // Said below: classes loading from now on say nothing more.
            p.left_out_warned
                .extend((0..left_out.len()).filter(|&i| !left_out[i].is_empty()));
            p.live_per_pattern()
        })
        .unwrap_or_default();
        for (i, pat) in patterns.iter().enumerate() {
            let n = live.get(i).copied().unwrap_or(0);
            let left = &mut left_out[i];
            if !left.is_empty() {
                left.sort();
                left.dedup();
                if n == 0 && matched[i] == 0 {
                    // Nothing else to profile: one line, and the CLI ends
                    // the session.
                    crate::outbox::send(Message::Error(left_out_line(pat.as_str(), left, true)));
                    continue;
                }
                crate::outbox::send(Message::Warning(left_out_line(pat.as_str(), left, false)));
            }
            if n > 0 {
                report.instrumented.push((pat.to_string(), n));
            } else if matched[i] > 0 {
                report.failed.push(pat.to_string());
            } else {
                let s = suggest::suggestions(pat, &class_methods[i], &names, 5);
                report
                    .not_found
                    .push((pat.to_string(), !class_methods[i].is_empty(), s));
            }
        }
        report
    })
}

fn declared_methods(jvmti: &Jvmti, c: Local<'_>) -> Vec<(String, String, i32)> {
    let ids: Vec<MethodId> = jvmti.class_methods(c).unwrap_or_default();
    ids.into_iter()
        .filter_map(|m| {
            let (name, desc) = jvmti.method_name(m).ok()?;
            let mods = jvmti.method_modifiers(m).unwrap_or(0);
            Some((name, desc, mods))
        })
        .collect()
}

fn retransform_locals(jvmti: &Jvmti, classes: &[&Local<'_>]) -> Result<(), JvmtiError> {
    let v: Vec<Local<'_>> = classes.iter().map(|c| **c).collect();
    jvmti.retransform(&v)
}

/// Stops instrumenting and retransforms every instrumented class back to
/// its original bytes. Returns the final counters and the classes the
/// session redefined (internal names).
pub fn restore_all(jvmti: &Jvmti, jni: Jni<'_>) -> (Counters, HashSet<String>) {
    let names: HashSet<String> = ledger::with(|p| {
        p.instrumenting = false;
        p.committed
            .keys()
            .chain(p.pending.keys())
            .cloned()
            .collect()
    })
    .unwrap_or_default();
    let _ = jvmti.set_event(Event::ClassFileLoadHook, false);
    if !names.is_empty() {
        // Classes of those names that revelation left as they were (other
        // loaders' copies) are not retransformed again.
        let untouched = reveal::untouched(jvmti, jni);
        jni.with_local_frame(64, |jni| {
            let batch = loaded_named(jvmti, jni, &names, &untouched);
            ledger::retransform_batch(&batch, false, |cs| retransform_locals(jvmti, cs));
        });
        reveal::release(jni, untouched);
    }
    (ledger::end_session(), names)
}

/// The loaded classes (local references of the caller's frame) whose
/// internal names are in `names`, with those names, less the copies
/// revelation left as they were (`untouched`, other loaders' copies).
fn loaded_named<'a>(
    jvmti: &Jvmti,
    jni: Jni<'a>,
    names: &HashSet<String>,
    untouched: &HashMap<i32, Vec<Global>>,
) -> Vec<(Local<'a>, String)> {
    let classes = jvmti.loaded_classes(&jni).unwrap_or_default();
    let mut batch = Vec::new();
    for &c in &classes {
        let Ok(sig) = jvmti.class_signature(c) else {
            continue;
        };
        if let Some(internal) = descriptor_class(&sig)
            && names.contains(internal)
            && !reveal::is_untouched(jvmti, jni, untouched, c)
        {
            batch.push((c, internal.to_string()));
        }
    }
    batch
}

/// What one switch of windows timing's original-bytes silence did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Switch {
    /// Classes retransformed.
    pub classes: u32,
    /// Classes that failed to switch (reported; each stays as it was).
    pub failed: u32,
    /// Time in RetransformClasses.
    pub ns: u64,
}

/// Windows timing's original-bytes silence (`Silence::Original`): with
/// `original`, the session's instrumented classes go back to their
/// original bytes, but the root methods' probes, which stay to time the
/// silent root calls (a root's class keeps those only); without it they
/// are instrumented again with their whole plan. A class that fails to go
/// back is reported once and keeps its probes (dormant in silent root
/// calls); one that fails to be instrumented again is reported as any
/// refused class and stays original. Classes of those names that
/// revelation left as they were (other loaders' copies) are left alone.
pub fn silence(jvmti: &Jvmti, jni: Jni<'_>, original: bool) -> Switch {
    let names: HashSet<String> = ledger::with(|p| {
        if original {
            let names: HashSet<String> = p
                .committed
                .keys()
                .filter(|n| !p.edge_classes.contains(*n))
                .cloned()
                .collect();
            p.silenced.clone_from(&names);
            names
        } else {
            std::mem::take(&mut p.silenced)
        }
    })
    .unwrap_or_default();
    let mut out = Switch::default();
    if names.is_empty() {
        return out;
    }
    let untouched = reveal::untouched(jvmti, jni);
    jni.with_local_frame(64, |jni| {
        let batch = loaded_named(jvmti, jni, &names, &untouched);
        out.classes = u32::try_from(batch.len()).unwrap_or(u32::MAX);
        let t0 = std::time::Instant::now();
        if original {
            let all: Vec<Local<'_>> = batch.iter().map(|(c, _)| *c).collect();
            if jvmti.retransform(&all).is_err() {
                for (c, name) in &batch {
                    if let Err(e) = jvmti.retransform(&[*c]) {
                        out.failed += 1;
                        // It keeps its probes: not put back again.
                        ledger::with(|p| p.silenced.remove(name));
                        crate::outbox::send(Message::Warning(format!(
                            "windows timing: {} could not be put back to its original bytes \
                             for the silent windows (RetransformClasses: {e}); its probes stay, \
                             dormant in silent root calls",
                            dotted(name)
                        )));
                    }
                }
            }
            // The roots-only plans the hook made are not the classes'
            // plans: nothing of them is committed.
            ledger::with(|p| p.pending.retain(|n, _| !names.contains(n)));
        } else {
            let denied_before = ledger::with(|p| p.denied.len()).unwrap_or(0);
            ledger::retransform_batch(&batch, true, |cs| retransform_locals(jvmti, cs));
            let denied_after = ledger::with(|p| p.denied.len()).unwrap_or(0);
            out.failed = u32::try_from(denied_after.saturating_sub(denied_before)).unwrap_or(0);
        }
        out.ns = t0.elapsed().as_nanos() as u64;
    });
    reveal::release(jni, untouched);
    out
}

/// FNV-1a digest of the bytecodes of every method of the loaded class(es)
/// named `class` (dotted), methods in (name, descriptor) order. Returns the
/// number of methods digested (0 when the class is not loaded).
pub fn bytecode_digest(jvmti: &Jvmti, jni: Jni<'_>, class: &str) -> (u32, u64) {
    let want = internal_name(class);
    jni.with_local_frame(64, |jni| {
        let classes = jvmti.loaded_classes(&jni).unwrap_or_default();
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        let mut count = 0u32;
        for &c in &classes {
            let Ok(sig) = jvmti.class_signature(c) else {
                continue;
            };
            if descriptor_class(&sig) != Some(want.as_str()) {
                continue;
            }
            let mut methods: Vec<(String, String, Vec<u8>)> = jvmti
                .class_methods(c)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| {
                    let (n, d) = jvmti.method_name(m).ok()?;
                    let code = jvmti.bytecodes(m).unwrap_or_default();
                    Some((n, d, code))
                })
                .collect();
            methods.sort();
            for (n, d, code) in &methods {
                feed(n.as_bytes());
                feed(&[0]);
                feed(d.as_bytes());
                feed(&[0]);
                feed(&(code.len() as u32).to_le_bytes());
                feed(code);
                count += 1;
            }
        }
        (count, hash)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_rewriter::vocab::access::ACC_PRIVATE;
    use std::collections::{BTreeSet, HashMap, VecDeque};

    type Key = (String, String, String);

    /// The JDK methods the probe classes (`classes`, one JDK's set) call
    /// from what the agent and instrumented code call: every method that
    /// is not private, and what those call in the probe classes, but not
    /// the static initialisers (they run once, when the agent defines the
    /// class, before it instruments anything) nor what only they call.
    fn jdk_calls_of(classes: &[&[u8]]) -> BTreeSet<Key> {
        let mut sites: HashMap<Key, Vec<sprig_rewriter::CallSite>> = HashMap::new();
        let mut queue = VecDeque::new();
        for bytes in classes {
            let info = sprig_rewriter::class_info(bytes).expect("the probe class parses");
            for (name, desc, calls) in sprig_rewriter::callees_all(bytes).expect("call sites") {
                let key = (info.name.clone(), name, desc);
                sites.insert(key, calls);
            }
            for m in &info.methods {
                if m.access & ACC_PRIVATE == 0 && m.name != "<clinit>" {
                    queue.push_back((info.name.clone(), m.name.clone(), m.descriptor.clone()));
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut jdk = BTreeSet::new();
        while let Some(k) = queue.pop_front() {
            if !seen.insert(k.clone()) {
                continue;
            }
            for c in sites.get(&k).into_iter().flatten() {
                let callee = (c.owner.clone(), c.name.clone(), c.descriptor.clone());
                if c.owner.starts_with("sprig/") {
                    queue.push_back(callee);
                } else {
                    jdk.insert(callee);
                }
            }
        }
        jdk
    }

    static CALIBRATION: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Calibration.class"));
    static PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/jni/sprig/rt/Probe.class"));
    static PROBE_FFM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ffm/sprig/rt/Probe.class"));

    #[test]
    fn every_jdk_method_the_probe_classes_call_is_never_instrumented() {
        let mut sets = vec![("JDK 17-21", jdk_calls_of(&[PROBE, CALIBRATION]))];
        if PROBE_FFM.is_empty() {
            eprintln!("SKIP the JDK 22+ probe class: not built (no javac 22 or later)");
        } else {
            sets.push(("JDK 22+", jdk_calls_of(&[PROBE_FFM, CALIBRATION])));
        }
        // The agent's native code calls no Java method of the thread: it
        // reads the `tid` field (`ffi::Jni::thread_id`).
        let current = (
            "java/lang/Thread".to_string(),
            "currentThread".to_string(),
            "()Ljava/lang/Thread;".to_string(),
        );
        for (jdks, calls) in &sets {
            // Not vacuous: the probes' own paths are seen.
            assert!(calls.contains(&current), "{jdks}: {calls:?}");
            let missing: Vec<String> = calls
                .iter()
                .filter(|(c, n, d)| !probes_call(c, n, d))
                .map(|(c, n, d)| format!("{c}.{n}{d}"))
                .collect();
            assert!(
                missing.is_empty(),
                "the probe class for {jdks} calls JDK methods sprig_reveal::PROBES_CALL does \
                 not name: {missing:?}"
            );
        }
        // What only the static initialisers call is left out of the check:
        // the JDK 22+ class links its downcalls there.
        if !PROBE_FFM.is_empty() {
            let ffm = &sets[1].1;
            assert!(
                ffm.iter()
                    .any(|(c, n, _)| c == "java/lang/invoke/MethodHandle" && n == "invokeExact"),
                "{ffm:?}"
            );
            assert!(
                !ffm.iter().any(|(c, _, _)| c == "java/lang/foreign/Linker"),
                "{ffm:?}"
            );
        }
    }

    #[test]
    fn names() {
        assert!(excluded("sprig/rt/Probe"));
        assert!(!excluded("sprigx/A"));
        assert_eq!(probe_sets()[ROOT_PROBES].entry, "rootEnter");
        assert_eq!(probe_sets()[crate::probe_class::PLAIN_PROBES].exit, "exit");
    }
}
