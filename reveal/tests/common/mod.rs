//! Shared helpers of the revelation tests on real classes: reading the
//! class-load log of a JVM run and dumping the bytes of the loaded classes.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use sprig_rewriter::vocab::names::internal_name;

/// The internal name of the class a `-Xlog:class+load` line reports, hidden
/// classes and lambda proxies left out; `None` for other lines.
pub fn loaded_class(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("[class,load] ")?;
    let name = rest.split(' ').next()?;
    (!name.contains("$$Lambda") && !name.contains("/0x")).then(|| internal_name(name))
}

/// Dumps the bytes of the classes `loads` names (JDK ones from the runtime
/// image) with `tests/java/Dump.java`, run on `classpath` when given, into
/// `dump`; returns them by internal name and drops from `loads` the classes
/// that have no bytes.
pub fn dump_classes(
    src: &Path,
    classpath: Option<&Path>,
    dump: &Path,
    loads: &mut Vec<String>,
) -> HashMap<String, Vec<u8>> {
    let mut java = Command::new("java");
    if let Some(cp) = classpath {
        java.arg("-cp").arg(cp);
    }
    let mut child = java
        .arg(src.join("Dump.java"))
        .arg(dump)
        .stdin(Stdio::piped())
        .spawn()
        .expect("java runs Dump.java");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(loads.join("\n").as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "Dump failed");
    let mut bytes = HashMap::new();
    for name in loads.iter() {
        if let Ok(b) = std::fs::read(dump.join(format!("{name}.class"))) {
            bytes.insert(name.clone(), b);
        }
    }
    loads.retain(|n| bytes.contains_key(n));
    bytes
}
