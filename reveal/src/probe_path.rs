//! The JDK code sprig's own probes run: never instrumented, whatever the
//! roots, `--include`, `--roots-only` or the scheme say.
//!
//! A probe in a method the probes themselves call calls itself without
//! end: `--root 'java.lang.Thread::*'` made every root probe call
//! `Thread.isVirtual` (JDK 22+) or `Thread.getId` (JDK 17), whose own root
//! probe opened a root context again, until the thread died of a
//! `StackOverflowError`; a plain probe in `Thread.getId` would recurse in
//! every profiled call. [`PROBES_CALL`] names that code once; the agent
//! leaves it out of every class it rewrites, and the revealer never plans
//! it.

use std::sync::OnceLock;

use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::names::binary_name;

/// What sprig's probes call, in the root pattern grammar (`class::method`,
/// binary names). Derived from:
///
/// - the call sites of the probe classes (`agent/java/sprig/rt/Probe.java`
///   for JDK 17-21, `agent/java22/sprig/rt/Probe.java` for JDK 22+, and
///   `Calibration.java`) outside their static initialisers, which run once,
///   when the agent defines the class and before it instruments anything.
///   The agent's tests parse those class files with the rewriter's analysis
///   and fail when a call site is missing here;
/// - what those JDK methods run in turn on JDK 17 and 25, read in the JDK
///   sources and checked on real JVMs with every loaded method as a root
///   (`--root '**::*' --roots-only`) and with the JDK revealed
///   (`--include 'java.**'`): `Thread.getId` returns `tid` (JDK 17) or
///   calls `threadId`, which returns it (JDK 19+); `isVirtual` is an
///   `instanceof`; `Unsafe`'s address accessors are Java wrappers of its
///   natives; the JDK 22+ probes' FFM downcalls go through method handles
///   and lambda forms (`java.lang.invoke`) and the linker's bindings
///   (`jdk.internal.foreign`, `java.lang.foreign`), whose classes change
///   from one JDK to the next: whole packages are left out;
/// - the agent's native code calls `Thread.getId` through JNI when a
///   thread enters its first root context.
///
/// Natives are listed too (they have no bytecode to instrument, but the
/// list is then exactly what the probes call).
pub const PROBES_CALL: &[&str] = &[
    // Every probe: the thread's slot (`getId` on JDK 17-21, `threadId` on
    // 22+; `getId` calls `threadId` on JDK 19+).
    "java.lang.Thread::currentThread",
    "java.lang.Thread::getId",
    "java.lang.Thread::threadId",
    // Root probes: virtual threads are counted, not profiled.
    "java.lang.Thread::isVirtual",
    "java.lang.Class::isInstance",
    // Receiver checks and the reflection watch.
    "java.lang.Object::getClass",
    "java.lang.System::identityHashCode",
    // The allocation probes' copies of arrays (`Probe.copyBytes`; native).
    "java.lang.reflect.Array::getLength",
    // Sampled timing's Java path (`jdk.internal.misc.Unsafe`), and what
    // its wrappers call.
    "jdk.internal.misc.**::*",
    // JDK 22+: the probes' FFM critical downcalls.
    "java.lang.invoke.**::*",
    "java.lang.foreign.**::*",
    "jdk.internal.foreign.**::*",
    // JDK 25's downcall checks its symbol (`SharedUtils.checkSymbol`).
    "java.util.Objects::requireNonNull",
];

fn parsed() -> &'static [MethodPattern] {
    static PARSED: OnceLock<Vec<MethodPattern>> = OnceLock::new();
    PARSED.get_or_init(|| {
        PROBES_CALL
            .iter()
            .map(|t| MethodPattern::parse(t).expect("built-in method pattern parses"))
            .collect()
    })
}

/// Whether sprig's probes call the method (class as an internal name):
/// such a method never gets probes.
pub fn probes_call(class: &str, name: &str, descriptor: &str) -> bool {
    let dotted = binary_name(class);
    parsed()
        .iter()
        .any(|p| p.matches_class(&dotted) && p.matches_method(name, descriptor))
}

/// The entries of [`PROBES_CALL`] whose class part names the class
/// (internal name), with their parsed patterns.
pub fn probe_entries_of(
    class: &str,
) -> impl Iterator<Item = (&'static str, &'static MethodPattern)> {
    let dotted = binary_name(class);
    PROBES_CALL
        .iter()
        .zip(parsed())
        .filter(move |(_, p)| p.matches_class(&dotted))
        .map(|(t, p)| (*t, p))
}

/// The one line that says which methods were left out of a root pattern
/// (dotted `Class.method` names, sorted) and why; `none_left` when the
/// pattern names nothing else (the session is refused).
pub fn left_out_line(pattern: &str, methods: &[String], none_left: bool) -> String {
    let n = methods.len();
    let (shown, more) = if n > 6 {
        (&methods[..5], format!(" and {} more", n - 5))
    } else {
        (methods, String::new())
    };
    let list = format!("{}{more}", shown.join(", "));
    let why = "probes in it would call themselves without end";
    if none_left {
        format!(
            "root {pattern} names only code sprig's own probes run ({list}): {why}; \
             choose another root"
        )
    } else {
        format!(
            "root {pattern}: {n} method{} left out ({list}), code sprig's own probes run: {why}",
            if n == 1 { "" } else { "s" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_path_is_matched_by_method_and_by_package() {
        assert!(probes_call("java/lang/Thread", "getId", "()J"));
        assert!(probes_call("java/lang/Thread", "isVirtual", "()Z"));
        assert!(!probes_call("java/lang/Thread", "run", "()V"));
        assert!(!probes_call("java/lang/Thread", "sleep", "(J)V"));
        assert!(probes_call("jdk/internal/misc/Unsafe", "getLong", "(J)J"));
        assert!(probes_call(
            "java/lang/invoke/Invokers$Holder",
            "invokeExact_MT",
            "()V"
        ));
        assert!(probes_call(
            "jdk/internal/foreign/abi/SharedUtils",
            "x",
            "()V"
        ));
        assert!(!probes_call("java/lang/String", "hashCode", "()I"));
        assert!(!probes_call("com/acme/Thread", "getId", "()J"));
        let thread: Vec<&str> = probe_entries_of("java/lang/Thread").map(|e| e.0).collect();
        assert_eq!(thread.len(), 4, "{thread:?}");
        assert_eq!(probe_entries_of("java/util/List").count(), 0);
    }

    #[test]
    fn the_left_out_line_is_one_line_naming_the_methods() {
        let m = vec![
            "java.lang.Thread.getId".to_string(),
            "java.lang.Thread.isVirtual".into(),
        ];
        let l = left_out_line("java.lang.Thread::*", &m, false);
        assert_eq!(
            l,
            "root java.lang.Thread::*: 2 methods left out (java.lang.Thread.getId, \
             java.lang.Thread.isVirtual), code sprig's own probes run: probes in it would call \
             themselves without end"
        );
        let one = left_out_line("java.lang.Thread::isVirtual", &m[1..], true);
        assert!(
            one.starts_with(
                "root java.lang.Thread::isVirtual names only code sprig's own probes run"
            ),
            "{one}"
        );
        let many: Vec<String> = (0..9).map(|i| format!("a.B.m{i}")).collect();
        let l = left_out_line("a.B::*", &many, false);
        assert!(l.contains("a.B.m4 and 4 more"), "{l}");
        assert!(!l.contains('\n'));
    }
}
