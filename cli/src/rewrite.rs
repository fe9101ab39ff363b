//! `sprig rewrite`: instruments a class file, a directory of classes or a jar
//! offline, so users can see what sprig injects and check a class that fails
//! to redefine.
//!
//! Every class whose methods match `--methods` gets entry/exit probes with
//! sequential ids; everything else is written out unchanged (jar entries are
//! copied raw, in their original order). Skipped methods are listed with the
//! reason, and the last line is the summary
//! `instrumented N methods in M classes, skipped K methods`.

use std::fs;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sprig_callgraph::report::escape::escape;
use sprig_rewriter::vocab::access::{ACC_ABSTRACT, ACC_NATIVE};
use sprig_rewriter::{ProbeSet, Target};

use crate::pattern::{self, MethodPattern};

#[derive(clap::Args, Debug, Clone)]
pub struct RewriteArgs {
    /// A .class file, a directory of classes, or a jar.
    pub input: PathBuf,
    /// Where to write the result: a file for a class or a jar, a directory for a directory.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Methods to instrument, comma-separated: `pkg.Class::method`,
    /// `pkg.Class::method(desc)ret`, `pkg.Class::*`, `com.acme.**::*`.
    /// Default: every method that has code.
    #[arg(long, value_name = "PATTERN[,PATTERN...]")]
    pub methods: Option<String>,
    /// Class holding the probe methods (internal or dotted name).
    #[arg(long, default_value = "sprig/rt/Probe")]
    pub probe_class: String,
    /// Entry probe: `static void NAME(int id)`.
    #[arg(long, default_value = "enter")]
    pub probe_entry: String,
    /// Exit probe: `static void NAME(int id)`.
    #[arg(long, default_value = "exit")]
    pub probe_exit: String,
    /// Id of the first instrumented method; the rest follow sequentially.
    #[arg(long, default_value_t = 0)]
    pub first_id: u32,
    /// Also write `id<TAB>class<TAB>method<TAB>descriptor` lines for every instrumented method.
    #[arg(long, value_name = "FILE")]
    pub id_map: Option<PathBuf>,
}

/// Counts behind the summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub methods: usize,
    pub classes: usize,
    pub skipped: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "instrumented {} methods in {} classes, skipped {} methods",
            self.methods, self.classes, self.skipped
        )
    }
}

/// Runs the command, printing to stdout.
pub fn run(args: &RewriteArgs) -> anyhow::Result<()> {
    let stdout = io::stdout();
    run_to(args, &mut stdout.lock()).map(|_| ())
}

/// Runs the command, printing the skip list and summary to `out`.
pub fn run_to(args: &RewriteArgs, out: &mut dyn Write) -> anyhow::Result<Summary> {
    let patterns = match &args.methods {
        Some(text) => pattern::parse_list(text)?,
        None => Vec::new(),
    };
    let probes = ProbeSet {
        class: args.probe_class.replace('.', "/"),
        entry: args.probe_entry.clone(),
        exit: args.probe_exit.clone(),
        entry_receiver: false,
    };
    let mut rw = Rewriter {
        patterns,
        probes,
        next_id: args.first_id,
        summary: Summary::default(),
        ids: Vec::new(),
        out,
    };
    let input = &args.input;
    let meta =
        fs::metadata(input).with_context(|| format!("cannot read input {}", input.display()))?;
    if same_file(input, &args.output) {
        bail!(
            "output {} is the input; write to another path",
            args.output.display()
        );
    }
    if meta.is_dir() {
        rw.directory(input, &args.output)?;
    } else {
        let bytes = fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
        if bytes.starts_with(&[0xCA, 0xFE, 0xBA, 0xBE]) {
            let output = if args.output.is_dir() {
                args.output.join(input.file_name().unwrap_or_default())
            } else {
                args.output.clone()
            };
            // Given alone, a class that cannot be read is the command's
            // failure (in a directory or a jar it is reported and copied).
            sprig_rewriter::class_info(&bytes)
                .with_context(|| format!("cannot read class {}", input.display()))?;
            let label = input.display().to_string();
            let new = rw.class(&label, &bytes)?;
            write_file(&output, &new)?;
        } else if bytes.starts_with(b"PK") {
            rw.jar(input, &args.output)?;
        } else {
            bail!(
                "{} is neither a class file (no CAFEBABE), a jar, nor a directory",
                input.display()
            );
        }
    }
    if let Some(path) = &args.id_map {
        let mut text = String::new();
        for (id, class, name, desc) in &rw.ids {
            text.push_str(&format!("{id}\t{class}\t{name}\t{desc}\n"));
        }
        write_file(path, text.as_bytes())?;
    }
    let summary = rw.summary;
    writeln!(rw.out, "{summary}")?;
    Ok(summary)
}

struct Rewriter<'o> {
    patterns: Vec<MethodPattern>,
    probes: ProbeSet,
    next_id: u32,
    summary: Summary,
    /// (id, dotted class name, method name, descriptor) of instrumented methods.
    ids: Vec<(u32, String, String, String)>,
    out: &'o mut dyn Write,
}

impl Rewriter<'_> {
    fn selected(&self, class: &str, name: &str, desc: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(class, name, desc))
    }

    /// Instruments the selected methods of one class; returns the bytes to
    /// write (the input itself when nothing was instrumented). `label` names
    /// the class file in messages.
    fn class(&mut self, label: &str, bytes: &[u8]) -> anyhow::Result<Vec<u8>> {
        let info = match sprig_rewriter::class_info(bytes) {
            Ok(info) => info,
            Err(e) => {
                writeln!(
                    self.out,
                    "{}",
                    escape(&format!("skipped class {label}: {e}; copied unchanged"))
                )?;
                return Ok(bytes.to_vec());
            }
        };
        let dotted = info.name.replace('/', ".");
        let if_class =
            self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches_class(&dotted));
        if !if_class {
            return Ok(bytes.to_vec());
        }
        let mut targets = Vec::new();
        for m in &info.methods {
            if m.access & (ACC_NATIVE | ACC_ABSTRACT) != 0
                || !self.selected(&dotted, &m.name, &m.descriptor)
            {
                continue;
            }
            targets.push(Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: self.next_id,
                probes: 0,
            });
            self.next_id = self
                .next_id
                .checked_add(1)
                .context("method ids ran past u32::MAX")?;
        }
        if targets.is_empty() {
            return Ok(bytes.to_vec());
        }
        let done =
            match sprig_rewriter::instrument(bytes, &targets, std::slice::from_ref(&self.probes)) {
                Ok(done) => done,
                Err(e) => {
                    for t in &targets {
                        let line = format!(
                            "skipped {dotted}::{}{}: class not instrumented: {e}",
                            t.name, t.descriptor
                        );
                        writeln!(self.out, "{}", escape(&line))?;
                    }
                    self.summary.skipped += targets.len();
                    return Ok(bytes.to_vec());
                }
            };
        let mut count = 0;
        for (outcome, target) in done.methods.iter().zip(&targets) {
            match &outcome.result {
                Ok(()) => {
                    count += 1;
                    self.ids.push((
                        target.id,
                        dotted.clone(),
                        target.name.clone(),
                        target.descriptor.clone(),
                    ));
                }
                Err(reason) => {
                    let line = format!(
                        "skipped {dotted}::{}{}: {reason}",
                        outcome.name, outcome.descriptor
                    );
                    writeln!(self.out, "{}", escape(&line))?;
                    self.summary.skipped += 1;
                }
            }
        }
        self.summary.methods += count;
        if count > 0 {
            self.summary.classes += 1;
        }
        Ok(done.bytes)
    }

    fn directory(&mut self, input: &Path, output: &Path) -> anyhow::Result<()> {
        let mut files = Vec::new();
        collect_files(input, &mut files)?;
        files.sort();
        for path in files {
            let rel = path.strip_prefix(input).unwrap_or(&path);
            let dest = output.join(rel);
            let bytes =
                fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let new = if path.extension().is_some_and(|e| e == "class") {
                self.class(&rel.display().to_string(), &bytes)?
            } else {
                bytes
            };
            write_file(&dest, &new)?;
        }
        Ok(())
    }

    fn jar(&mut self, input: &Path, output: &Path) -> anyhow::Result<()> {
        let file =
            fs::File::open(input).with_context(|| format!("cannot open {}", input.display()))?;
        let mut archive = zip::ZipArchive::new(io::BufReader::new(file))
            .with_context(|| format!("{} is not a readable jar", input.display()))?;
        let tmp = sibling_tmp(output);
        let result = self.jar_entries(&mut archive, &tmp);
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(e.context(format!("while rewriting {}", input.display())));
        }
        fs::rename(&tmp, output).with_context(|| format!("cannot write {}", output.display()))
    }

    fn jar_entries<R: Read + Seek>(
        &mut self,
        archive: &mut zip::ZipArchive<R>,
        tmp: &Path,
    ) -> anyhow::Result<()> {
        if let Some(parent) = tmp.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let file =
            fs::File::create(tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        let mut writer = zip::ZipWriter::new(io::BufWriter::new(file));
        writer.set_raw_comment(archive.comment().to_vec().into_boxed_slice());
        for i in 0..archive.len() {
            let (name, is_class) = {
                let entry = archive
                    .by_index_raw(i)
                    .with_context(|| format!("cannot read jar entry {i}"))?;
                let name = entry.name().to_string();
                let is_class = entry.is_file() && name.ends_with(".class");
                (name, is_class)
            };
            if is_class {
                let mut entry = archive
                    .by_index(i)
                    .with_context(|| format!("cannot read {name}"))?;
                let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
                entry
                    .read_to_end(&mut bytes)
                    .with_context(|| format!("cannot read {name}"))?;
                let method = entry.compression();
                let mtime = entry.last_modified();
                let mode = entry.unix_mode();
                drop(entry);
                let new = self.class(&name, &bytes)?;
                if new != bytes {
                    let mut options = zip::write::SimpleFileOptions::default().compression_method(
                        if method == zip::CompressionMethod::Stored {
                            zip::CompressionMethod::Stored
                        } else {
                            zip::CompressionMethod::Deflated
                        },
                    );
                    if let Some(t) = mtime {
                        options = options.last_modified_time(t);
                    }
                    if let Some(m) = mode {
                        options = options.unix_permissions(m);
                    }
                    writer
                        .start_file(name.as_str(), options)
                        .with_context(|| format!("cannot write {name}"))?;
                    writer
                        .write_all(&new)
                        .with_context(|| format!("cannot write {name}"))?;
                    continue;
                }
            }
            let entry = archive
                .by_index_raw(i)
                .with_context(|| format!("cannot read {name}"))?;
            writer
                .raw_copy_file(entry)
                .with_context(|| format!("cannot copy {name}"))?;
        }
        writer.finish().context("cannot finish the jar")?.flush()?;
        Ok(())
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot stat {}", path.display()))?;
        if kind.is_dir() {
            collect_files(&path, out)?;
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn sibling_tmp(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.sprig-tmp"))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A temp dir removed on drop.
    struct Tmp(PathBuf);
    impl Tmp {
        fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("sprig-rewrite-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Tmp(dir)
        }
    }
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    const SOURCE: &str = "package p;
public class A {
    public A() {}
    int f(int x) { return x + 1; }
    native void n();
    static void s() { new A().f(2); }
}
abstract class B {
    abstract void m();
    void c() { m(); }
}
";

    /// Compiles SOURCE into `tmp/classes`; returns that dir.
    fn compile(tmp: &Tmp) -> PathBuf {
        let src = tmp.0.join("src/p/A.java");
        fs::create_dir_all(src.parent().unwrap()).unwrap();
        fs::write(&src, SOURCE).unwrap();
        let classes = tmp.0.join("classes");
        let status = Command::new("javac")
            .arg("-d")
            .arg(&classes)
            .arg(&src)
            .status()
            .expect("javac");
        assert!(status.success());
        classes
    }

    fn args(input: &Path, output: &Path) -> RewriteArgs {
        RewriteArgs {
            input: input.to_path_buf(),
            output: output.to_path_buf(),
            methods: None,
            probe_class: "sprig/rt/Probe".into(),
            probe_entry: "enter".into(),
            probe_exit: "exit".into(),
            first_id: 0,
            id_map: None,
        }
    }

    fn run_text(a: &RewriteArgs) -> (anyhow::Result<Summary>, String) {
        let mut out = Vec::new();
        let r = run_to(a, &mut out);
        (r, String::from_utf8(out).unwrap())
    }

    fn jar_entries(path: &Path) -> Vec<(String, Vec<u8>)> {
        let mut z = zip::ZipArchive::new(fs::File::open(path).unwrap()).unwrap();
        (0..z.len())
            .map(|i| {
                let mut e = z.by_index(i).unwrap();
                let mut b = Vec::new();
                e.read_to_end(&mut b).unwrap();
                (e.name().to_string(), b)
            })
            .collect()
    }

    fn make_jar(classes: &Path, jar: &Path) {
        let mut w = zip::ZipWriter::new(fs::File::create(jar).unwrap());
        let deflated = zip::write::SimpleFileOptions::default();
        let stored = deflated.compression_method(zip::CompressionMethod::Stored);
        w.start_file("META-INF/MANIFEST.MF", deflated).unwrap();
        w.write_all(b"Manifest-Version: 1.0\r\n\r\n").unwrap();
        w.add_directory("p/", deflated).unwrap();
        w.start_file("p/B.class", deflated).unwrap();
        w.write_all(&fs::read(classes.join("p/B.class")).unwrap())
            .unwrap();
        w.start_file("res.txt", stored).unwrap();
        w.write_all(b"not a class").unwrap();
        w.start_file("p/A.class", stored).unwrap();
        w.write_all(&fs::read(classes.join("p/A.class")).unwrap())
            .unwrap();
        w.set_comment("kept");
        w.finish().unwrap();
    }

    #[test]
    fn class_file_all_methods_with_code() {
        let tmp = Tmp::new("class");
        let classes = compile(&tmp);
        let input = classes.join("p/A.class");
        let output = tmp.0.join("out/A.class");
        let mut a = args(&input, &output);
        a.id_map = Some(tmp.0.join("ids.tsv"));
        a.first_id = 70_000;
        let (r, text) = run_text(&a);
        let summary = r.unwrap();
        assert_eq!(
            summary,
            Summary {
                methods: 3,
                classes: 1,
                skipped: 0
            },
            "{text}"
        );
        assert_eq!(
            text.lines().last(),
            Some("instrumented 3 methods in 1 classes, skipped 0 methods")
        );
        let new = fs::read(&output).unwrap();
        assert_ne!(new, fs::read(&input).unwrap());
        let info = sprig_rewriter::class_info(&new).unwrap();
        assert_eq!(info.methods.len(), 4);
        let ids = fs::read_to_string(tmp.0.join("ids.tsv")).unwrap();
        assert_eq!(
            ids,
            "70000\tp.A\t<init>\t()V\n70001\tp.A\tf\t(I)I\n70002\tp.A\ts\t()V\n"
        );
    }

    #[test]
    fn pattern_selects_methods_and_unselected_classes_stay_identical() {
        let tmp = Tmp::new("pattern");
        let classes = compile(&tmp);
        let out = tmp.0.join("out");
        let mut a = args(&classes, &out);
        a.methods = Some("p.A::f(I)I,p.*::c".into());
        let (r, text) = run_text(&a);
        assert_eq!(
            r.unwrap(),
            Summary {
                methods: 2,
                classes: 2,
                skipped: 0
            },
            "{text}"
        );
        a.methods = Some("q.**::*".into());
        let (r, _) = run_text(&a);
        assert_eq!(r.unwrap(), Summary::default());
        for name in ["p/A.class", "p/B.class"] {
            assert_eq!(
                fs::read(out.join(name)).unwrap(),
                fs::read(classes.join(name)).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn jar_keeps_order_and_non_class_entries() {
        let tmp = Tmp::new("jar");
        let classes = compile(&tmp);
        let jar = tmp.0.join("in.jar");
        make_jar(&classes, &jar);
        let out = tmp.0.join("out.jar");
        let (r, text) = run_text(&args(&jar, &out));
        assert_eq!(
            r.unwrap(),
            Summary {
                methods: 5,
                classes: 2,
                skipped: 0
            },
            "{text}"
        );
        let before = jar_entries(&jar);
        let after = jar_entries(&out);
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&before), names(&after));
        for ((name, old), (_, new)) in before.iter().zip(&after) {
            assert_eq!(name.ends_with(".class"), old != new, "{name}");
        }
        let z = zip::ZipArchive::new(fs::File::open(&out).unwrap()).unwrap();
        assert_eq!(z.comment(), b"kept");

        // Nothing selected: every entry is copied as it was.
        let mut a = args(&jar, &out);
        a.methods = Some("nothing.Here::x".into());
        let (r, _) = run_text(&a);
        assert_eq!(r.unwrap(), Summary::default());
        assert_eq!(jar_entries(&out), before);
    }

    #[test]
    fn errors_are_one_clear_line() {
        let tmp = Tmp::new("errors");
        let classes = compile(&tmp);
        let mut a = args(&classes, &tmp.0.join("out"));
        a.methods = Some("p.A".into());
        let err = format!("{:#}", run_text(&a).0.unwrap_err());
        assert!(err.contains("no `::`"), "{err}");
        let err = format!(
            "{:#}",
            run_text(&args(&tmp.0.join("missing"), &tmp.0.join("o")))
                .0
                .unwrap_err()
        );
        assert!(
            err.contains("cannot read input") && err.contains("missing"),
            "{err}"
        );
        let junk = tmp.0.join("junk.bin");
        fs::write(&junk, b"hello").unwrap();
        let err = format!(
            "{:#}",
            run_text(&args(&junk, &tmp.0.join("o"))).0.unwrap_err()
        );
        assert!(err.contains("neither a class file"), "{err}");
        let input = classes.join("p/A.class");
        let err = format!("{:#}", run_text(&args(&input, &input)).0.unwrap_err());
        assert!(err.contains("is the input"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn a_single_broken_class_is_an_error() {
        let tmp = Tmp::new("broken-one");
        let bad = tmp.0.join("Bad.class");
        fs::write(&bad, [0xCA, 0xFE, 0xBA, 0xBE, 0, 0]).unwrap();
        let out = tmp.0.join("Out.class");
        let (r, text) = run_text(&args(&bad, &out));
        let err = format!("{:#}", r.expect_err("a broken class given alone fails"));
        assert!(
            err.starts_with(&format!("cannot read class {}: ", bad.display())),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
        assert_eq!(text, "", "nothing on stdout");
        assert!(!out.exists());
    }

    #[test]
    fn broken_class_is_reported_and_copied() {
        let tmp = Tmp::new("broken");
        let classes = compile(&tmp);
        let bad = classes.join("p/Bad.class");
        fs::write(&bad, [0xCA, 0xFE, 0xBA, 0xBE, 0, 0]).unwrap();
        let out = tmp.0.join("out");
        let (r, text) = run_text(&args(&classes, &out));
        assert_eq!(
            r.unwrap(),
            Summary {
                methods: 5,
                classes: 2,
                skipped: 0
            },
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("skipped class p/Bad.class: ") && l.contains("truncated")),
            "{text}"
        );
        assert_eq!(
            fs::read(out.join("p/Bad.class")).unwrap(),
            fs::read(&bad).unwrap()
        );
    }
}
