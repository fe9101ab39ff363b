//! `sprig`: parse the command line, dispatch to one module per command,
//! print errors as one line with a hint.

#![deny(unsafe_code)]

mod output;
mod overlap;
mod profile;
mod sample;
mod session;
#[allow(unsafe_code)]
mod signals;
mod threads;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sprig_callgraph::report::escape::escape;

/// sprig: an exact, low-overhead call-subgraph profiler for HotSpot JVMs.
///
/// sprig attaches to a running JVM (no special flags needed), injects
/// entry/exit probes into a root method and everything it calls (trivial
/// leaves such as getters excepted, unless `--keep-trivial`), counts
/// every call exactly in its calling context, times every root call
/// exactly, takes the time inside from samples of where each thread is in
/// its event stream (or, with `--timing exact`, times every call and
/// subtracts the probes' calibrated cost), and shows the calling context
/// tree. When it stops, every class is put back and the JVM runs at full
/// speed again.
#[derive(Parser, Debug)]
#[command(name = "sprig", version, propagate_version = true)]
#[command(after_help = "Examples:
  sprig list
  sprig sample 4242 --duration 10
  sprig threads 4242
  sprig profile 4242 --root 'com.acme.Service::handle' --duration 30
  sprig profile 4242 --root 'com.acme.Service::*' --format json -o run.json
  sprig profile 4242 --root 'com.acme.Service::handle' -o before.sprig
  sprig report before.sprig --merged --back-trace 'com.acme.Dao::query'
  sprig diff before.sprig after.sprig
  sprig run --root 'com.acme.Main::main' -- java -cp app.jar com.acme.Main
  sprig rewrite app.jar -o app-instrumented.jar --methods 'com.acme.**::*'")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the HotSpot JVMs you may attach to (like `jps -l`).
    List,
    /// Attach to a running JVM, profile a root method's call subgraph, detach.
    ///
    /// Profiling starts once the root is instrumented (stderr shows
    /// `sprig: profiling ...`) and stops on Ctrl-C, SIGTERM or after
    /// --duration; sprig then restores every class, detaches, and prints the
    /// calling context tree. If sprig itself is killed, the agent notices
    /// the closed connection and restores the JVM by itself.
    Profile(profile::ProfileArgs),
    /// Sample every Java thread's stack to find where the time goes and which root to profile.
    ///
    /// Attaches, has the agent take the stack of every live Java thread
    /// every --interval (JVMTI GetAllStackTraces), builds a partial calling
    /// context tree (a node per calling context seen), and detaches on
    /// Ctrl-C, SIGTERM or after --duration. No class is redefined.
    ///
    /// Views: the CPU view (the default) counts the threads on the CPU,
    /// each sample weighing the CPU time its thread used; the wall view
    /// (`--clock wall`) counts every thread whatever it does, so a thread
    /// blocked on a lock, waiting or sleeping shows where it waits. The
    /// report lists the hot methods by self samples (the method was the
    /// leaf) and total samples (anywhere on the stack), the tree merged
    /// over threads (`--threads`: one per thread; `--fold-jdk`: JDK frames
    /// folded), `--back-trace` callers, and the suggested roots.
    ///
    /// Bias: JVMTI takes stacks at safepoints, so a sample lands at the
    /// next safepoint poll (a method return, a loop back-edge) rather than
    /// where the thread was; a long counted loop the JIT compiled without
    /// polls gets its time charged to where it next polls. Shares of whole
    /// methods are right; lines inside them are not what this measures.
    ///
    /// From a suggestion to a profile: each suggested root comes with a
    /// ready-to-paste `sprig profile PID --root 'pkg.Class::method'` and
    /// the overhead predicted for it with `--edges` (an estimate: the
    /// calls per CPU second the call-edge bursts measured below the root,
    /// each a probe pair; "unknown" without them). Run it with `--duration`
    /// to get exact call counts and times for that root's call subgraph.
    #[command(after_help = "Examples:
  sprig sample 4242 --duration 10
  sprig sample 4242 --duration 30 --clock wall --threads
  sprig sample 4242 --duration 10 --format flamegraph -o cpu.html
  sprig sample 4242 --duration 10 --format json -o a.json
  sprig diff --overlap a.json b.json")]
    Sample(sample::SampleArgs),
    /// Show every Java thread's state, stack and locks, and any deadlock.
    ///
    /// Attaches, has the agent take two snapshots 50 ms apart of every
    /// live Java thread (JVMTI: states and stacks with line numbers; the
    /// JVM's own ThreadMXBean, called inside it: the monitors each thread
    /// holds and the frame that entered each, the lock it waits for and
    /// its owner; LockSupport.getBlocker: the java.util.concurrent lock a
    /// parked thread waits for and the thread that holds it), and
    /// detaches. No class is redefined.
    ///
    /// A deadlock is a cycle of threads each blocked on a monitor or
    /// parked on a java.util.concurrent lock (ReentrantLock, the write
    /// lock of a ReentrantReadWriteLock, ...) the next one holds, seen in
    /// both snapshots: what ThreadMXBean.findDeadlockedThreads finds,
    /// without JMX in the target. The report shows each deadlock with its
    /// threads' stacks and locks first, then every thread.
    ///
    /// Exit status: 0 when no deadlock is found, 2 when one is, 1 on an
    /// error.
    #[command(after_help = "Examples:
  sprig threads 4242
  sprig threads 4242 --format json -o threads.json")]
    Threads(threads::ThreadsArgs),
    /// Start a JVM with the sprig agent loaded from its first instruction.
    ///
    /// For JVMs that cannot be attached to later (-XX:+DisableAttachMechanism,
    /// dynamic agent loading disabled). Everything after `--` is the java
    /// command line; the agent option is added right after the java binary.
    /// The report goes to stderr (the application keeps stdout), or to
    /// `-o FILE`.
    Run(profile::RunArgs),
    /// Write instrumented copies of classes to see what sprig injects.
    ///
    /// Input is a .class file, a directory of classes, or a jar (a jar comes
    /// out as a jar). Useful to check, with `java -Xverify:all`, a class that
    /// failed to redefine.
    Rewrite(sprig::rewrite::RewriteArgs),
    /// Measure what sprig's probes cost inside a running JVM, then detach.
    ///
    /// `profile --timing exact` runs the same calibration at every attach
    /// and subtracts the result from every call: t_I (inner) from the
    /// called method's own time, t_O (outer) from its caller's. Sampled
    /// timing (the default) neither calibrates nor subtracts. The figures
    /// depend on the JVM, the clock and the machine; this shows them
    /// without profiling.
    Calibrate(profile::CalibrateArgs),
    /// Re-render a snapshot saved with `sprig profile ... -o run.sprig`.
    Report(output::ReportArgs),
    /// Compare two snapshots node by node (calls and time, a -> b), or any two profiles' overlap (--overlap).
    Diff(output::DiffArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List => sprig::list::run(&mut std::io::stdout().lock()).map(|_| ExitCode::SUCCESS),
        Command::Profile(args) => profile::profile(args),
        Command::Sample(args) => sample::sample(args),
        Command::Threads(args) => threads::threads(args),
        Command::Run(args) => profile::run(args),
        Command::Calibrate(args) => profile::calibrate(args),
        Command::Rewrite(args) => sprig::rewrite::run(&args).map(|_| ExitCode::SUCCESS),
        Command::Report(args) => output::report(&args).map(|_| ExitCode::SUCCESS),
        Command::Diff(args) if args.native && !args.overlap => {
            Err(anyhow::anyhow!("--native compares with --overlap only"))
        }
        Command::Diff(args) if args.overlap => output::write_to(args.output.as_deref(), |out| {
            overlap::run(&args.a, &args.b, args.native, out)
        })
        .map(|_| ExitCode::SUCCESS),
        Command::Diff(args) => output::diff(&args).map(|_| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        // `sprig report run.sprig | head`: the reader has what it wanted
        // (as `sprig list` does); the session, if any, has already ended.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_line(&e));
            if let Some(hint) = hint(&e) {
                eprintln!("sprig: hint: {hint}");
            }
            ExitCode::from(1)
        }
    }
}

/// Whether `e` comes from writing into a pipe whose reader has gone.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The line `sprig: error: ...` printed for `e`.
fn error_line(e: &anyhow::Error) -> String {
    format!("sprig: error: {}", escape(&one_line(e)))
}

/// The error and its causes on one line.
fn one_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    s
}

/// A suggestion for errors whose message does not already say what to do
/// (the attach and discovery errors carry their own advice).
fn hint(e: &anyhow::Error) -> Option<&'static str> {
    let text = one_line(e);
    if text.contains("(return code 5)") {
        // The agent's Agent_OnAttach refuses a second concurrent session.
        Some(
            "another sprig session is profiling this JVM: stop it first (or wait for it to detach)",
        )
    } else if text.contains("ermission denied") && !text.contains("run sprig") {
        Some("run sprig as the user that owns the JVM, or as root")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_broken_pipe_is_quiet() {
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&pipe));
        assert!(is_broken_pipe(&pipe.context("cannot write the report")));
        let full = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!is_broken_pipe(&full));
    }

    #[test]
    fn errors_are_one_line_with_control_characters_escaped() {
        // Errors quote class names, paths and the JVM's own text.
        let e = anyhow::anyhow!("class a.B\u{1b}[2J\nis bad").context("cannot rewrite x\u{9b}");
        assert_eq!(
            error_line(&e),
            "sprig: error: cannot rewrite x\\u{9b}: class a.B\\x1b[2J\\nis bad"
        );
    }
}
