//! The stack sampler on JDK 17 and 25: a session whose `Start` asks for
//! stacks and names no root samples every Java thread (loaded with `jcmd
//! <pid> JVMTI.agent_load`), with their states, and changes no class.

mod common;

use common::*;
use sprig_tests::Jdk;
use sprig_wire::Message;
use sprig_wire::control::{SampledState, StackOptions, StackSample};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// What a sampling session sent, checked in the order it came.
#[derive(Default)]
struct Sampled {
    /// Frame id -> (class, method).
    methods: HashMap<u32, (String, String)>,
    /// Java thread id -> name.
    threads: HashMap<u64, String>,
    /// Every round: (cost_ns, samples).
    rounds: Vec<(u64, Vec<StackSample>)>,
}

impl Sampled {
    /// Takes one message; a sample whose frame id or thread no earlier
    /// message named fails the test.
    fn take(&mut self, jdk: &Jdk, m: &Message) {
        match m {
            Message::FrameMethod {
                id, class, name, ..
            } => {
                self.methods.insert(*id, (class.clone(), name.clone()));
            }
            Message::SampledThread { java_id, name } => {
                self.threads.insert(*java_id, name.clone());
            }
            Message::StackSamples {
                cost_ns, samples, ..
            } => {
                for s in samples {
                    assert!(
                        self.threads.contains_key(&s.thread),
                        "JDK {}: a sample of thread {} before its SampledThread",
                        jdk.major,
                        s.thread
                    );
                    for f in &s.frames {
                        assert!(
                            self.methods.contains_key(f),
                            "JDK {}: frame id {f} used before its FrameMethod",
                            jdk.major
                        );
                    }
                }
                self.rounds.push((*cost_ns, samples.clone()));
            }
            _ => {}
        }
    }

    /// The samples of the thread named `name`.
    fn of(&self, name: &str) -> Vec<&StackSample> {
        let ids: HashSet<u64> = self
            .threads
            .iter()
            .filter(|(_, n)| n.as_str() == name)
            .map(|(id, _)| *id)
            .collect();
        self.rounds
            .iter()
            .flat_map(|(_, s)| s)
            .filter(|s| ids.contains(&s.thread))
            .collect()
    }

    fn method(&self, id: u32) -> (&str, &str) {
        let (c, m) = &self.methods[&id];
        (c, m)
    }

    fn median_cost(&self) -> u64 {
        self.cost_quantile(0.5)
    }

    /// The `q` quantile of the rounds' cost, leaving out the first five
    /// (they name most frames and threads).
    fn cost_quantile(&self, q: f64) -> u64 {
        let mut c: Vec<u64> = self.rounds.iter().skip(5).map(|(c, _)| *c).collect();
        c.sort_unstable();
        let at = ((c.len() as f64 - 1.0) * q).round() as usize;
        c.get(at).copied().unwrap_or(0)
    }
}

/// Reads messages until `rounds` rounds of samples came (or 20 s passed).
fn sample_rounds(cli: &mut FakeCli, jdk: &Jdk, rounds: usize) -> Sampled {
    let mut got = Sampled::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.rounds.len() < rounds {
        assert!(
            Instant::now() < deadline,
            "JDK {}: {} rounds of stack samples within 20 s, {rounds} wanted; messages: {:#?}",
            jdk.major,
            got.rounds.len(),
            cli.msgs
        );
        let before = cli.msgs.len();
        cli.wait_msg("a sampler message", Duration::from_secs(20), |m| {
            matches!(
                m,
                Message::StackSamples { .. }
                    | Message::FrameMethod { .. }
                    | Message::SampledThread { .. }
                    | Message::Detached(_)
            )
        });
        for m in &cli.msgs[before..] {
            assert!(
                !matches!(m, Message::Detached(_) | Message::Error(_)),
                "JDK {}: the session ended: {:#?}",
                jdk.major,
                cli.msgs
            );
            got.take(jdk, m);
        }
    }
    got
}

/// The share of `samples` for which `pred` holds.
fn share(samples: &[&StackSample], pred: impl Fn(&StackSample) -> bool) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.iter().filter(|s| pred(s)).count() as f64 / samples.len() as f64
}

/// The live threads' names as the fixture sees them.
fn live_threads(jvm: &mut sprig_tests::Proc) -> String {
    jvm.send("threads");
    jvm.wait_for("threads", Duration::from_secs(10), |l| {
        l.starts_with("threads: ")
    })
}

/// A sample-only session: the spinning thread is Running with `hot` on
/// top of `outer`, the blocked one Blocked, the sleeping one Sleeping;
/// every frame id and thread is named before a sample uses it; no class
/// is redefined; after Detach the sampler thread is gone and the JVM runs
/// on. The next session in the same JVM cuts stacks at `max_depth`; the
/// one after it ends with its CLI, sampler thread included.
#[test]
fn a_sample_only_session_sees_every_thread_in_its_state() {
    for jdk in sprig_tests::test_jdks("a_sample_only_session_sees_every_thread_in_its_state") {
        let classes = fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Stacks");
        wait_ready(&mut jvm);

        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let original = cli.digest("fixture.Stacks");
        assert!(
            original.0 > 0,
            "JDK {}: fixture.Stacks not loaded",
            jdk.major
        );
        cli.start_sampling(StackOptions {
            interval_us: 10_000,
            max_depth: 64,
            source: sprig_wire::control::StackSource::Jvmti,
        });
        let got = sample_rounds(&mut cli, &jdk, 30);

        let spinner = got.of("stacks-spinner");
        assert!(
            spinner.len() >= 25,
            "JDK {}: {} samples of the spinner in 30 rounds",
            jdk.major,
            spinner.len()
        );
        let hot_on_outer = share(&spinner, |s| {
            s.state == SampledState::Running
                && s.frames.len() >= 2
                && got.method(s.frames[0]) == ("fixture.Stacks", "hot")
                && got.method(s.frames[1]) == ("fixture.Stacks", "outer")
                && !s.truncated
        });
        assert!(
            hot_on_outer >= 0.9,
            "JDK {}: the spinner Running in hot under outer in {:.0}% of its samples: {:?}",
            jdk.major,
            hot_on_outer * 100.0,
            spinner
                .iter()
                .take(5)
                .map(|s| (
                    s.state,
                    s.frames.iter().map(|f| got.method(*f)).collect::<Vec<_>>()
                ))
                .collect::<Vec<_>>()
        );
        let running_cpu: Vec<u64> = spinner
            .iter()
            .map(|s| s.cpu_ns)
            .filter(|c| *c != u64::MAX)
            .collect();
        assert!(
            running_cpu.iter().any(|c| *c > 1_000_000),
            "JDK {}: no spinner sample with over 1 ms of CPU since the previous one: {running_cpu:?}",
            jdk.major
        );
        for (name, state) in [
            ("stacks-blocked", SampledState::Blocked),
            ("stacks-sleeper", SampledState::Sleeping),
            ("stacks-holder", SampledState::Sleeping),
        ] {
            let samples = got.of(name);
            let s = share(&samples, |s| s.state == state);
            assert!(
                samples.len() >= 25 && s >= 0.9,
                "JDK {}: {name} {state:?} in {:.0}% of {} samples: {:?}",
                jdk.major,
                s * 100.0,
                samples.len(),
                samples.iter().take(3).collect::<Vec<_>>()
            );
        }
        let waiting_cpu = got.of("stacks-sleeper");
        assert!(
            waiting_cpu
                .iter()
                .all(|s| s.cpu_ns == u64::MAX || s.cpu_ns < 1_000_000),
            "JDK {}: the sleeper used CPU: {:?}",
            jdk.major,
            waiting_cpu.iter().map(|s| s.cpu_ns).collect::<Vec<_>>()
        );
        assert!(
            got.threads.values().all(|n| !n.starts_with("sprig-")),
            "JDK {}: sprig's own threads were sampled: {:?}",
            jdk.major,
            got.threads
        );
        println!(
            "JDK {}: {} threads a round, median cost of a round {} ns",
            jdk.major,
            got.rounds.last().map_or(0, |(_, s)| s.len()),
            got.median_cost()
        );
        let during = live_threads(&mut jvm);
        assert!(
            during.contains("sprig-stacks"),
            "JDK {}: no sampler thread while sampling: {during}",
            jdk.major
        );

        let stats = cli.detach();
        assert_eq!(
            (stats.instrumented_classes, stats.redefinition_batches),
            (0, 0),
            "JDK {}: a sample-only session redefined classes: {stats:?}",
            jdk.major
        );
        let after = live_threads(&mut jvm);
        assert!(
            !after.contains("sprig-stacks"),
            "JDK {}: the sampler thread outlived the session: {after}",
            jdk.major
        );

        // The next session in the same JVM: stacks cut at one frame.
        let mut next = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &next.options());
        next.accept(jvm.pid());
        assert_eq!(
            next.digest("fixture.Stacks"),
            original,
            "JDK {}: fixture.Stacks changed by a sample-only session",
            jdk.major
        );
        next.start_sampling(StackOptions {
            interval_us: 10_000,
            max_depth: 1,
            source: sprig_wire::control::StackSource::Jvmti,
        });
        let cut = sample_rounds(&mut next, &jdk, 5);
        let spinner = cut.of("stacks-spinner");
        assert!(
            !spinner.is_empty() && spinner.iter().all(|s| s.frames.len() == 1 && s.truncated),
            "JDK {}: spinner stacks not cut at one frame: {spinner:?}",
            jdk.major
        );
        next.detach();
        let after = live_threads(&mut jvm);
        assert!(
            !after.contains("sprig-stacks"),
            "JDK {}: {after}",
            jdk.major
        );

        // A CLI that dies: the same teardown stops the sampler.
        let mut gone = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &gone.options());
        gone.accept(jvm.pid());
        gone.start_sampling(StackOptions {
            interval_us: 10_000,
            max_depth: 64,
            source: sprig_wire::control::StackSource::Jvmti,
        });
        sample_rounds(&mut gone, &jdk, 3);
        drop(gone);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = live_threads(&mut jvm);
            if !now.contains("sprig-stacks") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "JDK {}: the sampler outlived its CLI by 10 s: {now}",
                jdk.major
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        jvm.send("quit");
        assert!(
            jvm.wait_exit(Duration::from_secs(20))
                .is_some_and(|s| s.success()),
            "JDK {}: the JVM did not exit cleanly:\n{}",
            jdk.major,
            jvm.transcript()
        );
    }
}

/// The cost of one sampling round with about 10 and about 200 threads
/// (printed; the rounds must sample every thread).
#[test]
fn the_cost_of_a_round_with_10_and_200_threads() {
    for jdk in sprig_tests::test_jdks("the_cost_of_a_round_with_10_and_200_threads") {
        let classes = fixture_classes(&jdk);
        let mut costs = BTreeMap::new();
        for idle in [4usize, 194] {
            let idle_arg = idle.to_string();
            let mut jvm =
                spawn_java_args(&jdk, classes.path(), &[], "fixture.Stacks", &[&idle_arg]);
            wait_ready(&mut jvm);
            let mut cli = FakeCli::new();
            jcmd_load(&jdk, jvm.pid(), &cli.options());
            cli.accept(jvm.pid());
            cli.start_sampling(StackOptions {
                interval_us: 20_000,
                max_depth: 128,
                source: sprig_wire::control::StackSource::Jvmti,
            });
            let got = sample_rounds(&mut cli, &jdk, 60);
            let threads = got.rounds.last().map_or(0, |(_, s)| s.len());
            assert!(
                threads > idle,
                "JDK {}: {threads} threads in a round, over {idle} idle ones expected",
                jdk.major
            );
            costs.insert(
                threads,
                (
                    got.cost_quantile(0.1),
                    got.median_cost(),
                    got.cost_quantile(0.9),
                ),
            );
            cli.detach();
            jvm.send("quit");
            let _ = jvm.wait_exit(Duration::from_secs(20));
        }
        for (threads, (p10, p50, p90)) in &costs {
            println!(
                "JDK {}: {threads} threads, cost of a round: median {:.1} us (p10 {:.1}, p90 {:.1})",
                jdk.major,
                *p50 as f64 / 1000.0,
                *p10 as f64 / 1000.0,
                *p90 as f64 / 1000.0
            );
        }
    }
}

/// Stack options out of range are refused in one line before anything
/// starts; the sampler runs beside the probes of a root, and the root's
/// class is put back at the end.
#[test]
fn bad_options_are_refused_and_the_sampler_runs_beside_the_probes() {
    for jdk in
        sprig_tests::test_jdks("bad_options_are_refused_and_the_sampler_runs_beside_the_probes")
    {
        let classes = fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Stacks");
        wait_ready(&mut jvm);

        let mut bad = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &bad.options());
        bad.accept(jvm.pid());
        bad.start_sampling(StackOptions {
            interval_us: 0,
            max_depth: 64,
            source: sprig_wire::control::StackSource::Jvmti,
        });
        bad.wait_msg("Detached", Duration::from_secs(20), |m| {
            matches!(m, Message::Detached(_))
        });
        assert!(
            bad.msgs.iter().any(|m| matches!(
                m,
                Message::Error(e) if e.contains("interval") && !e.contains('\n')
            )),
            "JDK {}: no one-line error for interval 0: {:#?}",
            jdk.major,
            bad.msgs
        );
        drop(bad);

        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let original = cli.digest("fixture.Stacks");
        cli.start_with_stacks(
            &["fixture.Stacks::work"],
            StackOptions {
                interval_us: 10_000,
                max_depth: 64,
                source: sprig_wire::control::StackSource::Jvmti,
            },
        );
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        let got = sample_rounds(&mut cli, &jdk, 10);
        assert!(
            !got.of("stacks-spinner").is_empty(),
            "JDK {}: no sample of the spinner beside the probes",
            jdk.major
        );
        let stats = cli.detach();
        assert!(
            stats.instrumented_classes >= 1,
            "JDK {}: the root's class was not instrumented: {stats:?}",
            jdk.major
        );
        let after = live_threads(&mut jvm);
        assert!(
            !after.contains("sprig-stacks"),
            "JDK {}: {after}",
            jdk.major
        );

        let mut next = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &next.options());
        next.accept(jvm.pid());
        assert_eq!(
            next.digest("fixture.Stacks"),
            original,
            "JDK {}: fixture.Stacks not restored",
            jdk.major
        );
        next.detach();
        jvm.send("quit");
        let _ = jvm.wait_exit(Duration::from_secs(20));
    }
}

/// Call-edge bursts (`EdgeProbes`, `sprig sample --edges`) in a
/// sample-only session on `fixtures.Edges` (whose `a` calls `b` three
/// times and `c` once): the class gets dormant probes (its bytes change),
/// the bursts sample `a -> b` and `a -> c` 3:1 (within 5 points, see
/// `tests/tests/e2e/sample_edges_e2e.rs` for the bound), each burst at most
/// its budget; after Detach the class holds its original bytes again, no
/// `sprig-edges` thread is left, and the JVM runs on. A second
/// `EdgeProbes` in the session is refused with a warning.
#[test]
fn edge_bursts_sample_known_call_shares_and_put_the_class_back() {
    for jdk in sprig_tests::test_jdks("edge_bursts_sample_known_call_shares_and_put_the_class_back")
    {
        let classes = sprig_tests::fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixtures.Edges");
        wait_ready(&mut jvm);

        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let original = cli.digest("fixtures.Edges");
        assert!(
            original.0 > 0,
            "JDK {}: fixtures.Edges not loaded",
            jdk.major
        );
        cli.start_sampling(StackOptions {
            interval_us: 20_000,
            max_depth: 64,
            source: sprig_wire::control::StackSource::Jvmti,
        });
        let budget = 32u32;
        cli.send(&Message::EdgeProbes {
            classes: vec!["fixtures.Edges".into()],
            interval_us: 10_000,
            budget,
        });
        let probed = cli.wait_msg("EdgeProbed", Duration::from_secs(20), |m| {
            matches!(m, Message::EdgeProbed { .. })
        });
        let Message::EdgeProbed {
            classes: n,
            methods,
        } = probed
        else {
            unreachable!()
        };
        assert!(
            n == 1 && methods >= 5,
            "JDK {}: {n} classes, {methods} methods probed",
            jdk.major
        );
        assert_ne!(
            cli.digest("fixtures.Edges"),
            original,
            "JDK {}: fixtures.Edges holds no probes",
            jdk.major
        );
        cli.send(&Message::EdgeProbes {
            classes: vec!["fixtures.Edges".into()],
            interval_us: 10_000,
            budget,
        });
        cli.wait_msg(
            "the refusal",
            Duration::from_secs(10),
            |m| matches!(m, Message::Warning(w) if w.contains("call-edge bursts not started")),
        );
        let mut edges: BTreeMap<(String, String), u64> = BTreeMap::new();
        let (mut bursts, mut samples) = (0u64, 0u64);
        let deadline = Instant::now() + Duration::from_secs(30);
        while edges.get(&("a".into(), "b".into())).copied().unwrap_or(0)
            + edges.get(&("a".into(), "c".into())).copied().unwrap_or(0)
            < 400
        {
            assert!(
                Instant::now() < deadline,
                "JDK {}: too few edges in 30 s: {edges:?}",
                jdk.major
            );
            let m = cli.wait_msg("EdgeSamples", Duration::from_secs(10), |m| {
                matches!(m, Message::EdgeSamples(_))
            });
            let Message::EdgeSamples(s) = m else {
                unreachable!()
            };
            assert!(
                s.samples <= u64::from(s.bursts + 1) * u64::from(budget),
                "JDK {}: {} samples in {} bursts of {budget}",
                jdk.major,
                s.samples,
                s.bursts
            );
            bursts += u64::from(s.bursts);
            samples += s.samples;
            for e in &s.edges {
                if e.caller.class == "fixtures.Edges" && e.callee.class == "fixtures.Edges" {
                    *edges
                        .entry((e.caller.name.clone(), e.callee.name.clone()))
                        .or_default() += u64::from(e.samples);
                }
            }
        }
        let ab = edges[&("a".to_string(), "b".to_string())];
        let ac = edges[&("a".to_string(), "c".to_string())];
        let share = ab as f64 / (ab + ac) as f64;
        println!(
            "JDK {}: {bursts} bursts, {samples} samples, a->b {ab}, a->c {ac} ({share:.3}); {edges:?}",
            jdk.major
        );
        assert!(
            (share - 0.75).abs() <= 0.05,
            "JDK {}: a -> b {ab}, a -> c {ac}: {share:.3}, not 0.75 within 5 points",
            jdk.major
        );
        assert!(
            live_threads(&mut jvm).contains("sprig-edges"),
            "JDK {}: no sprig-edges thread while bursting",
            jdk.major
        );

        cli.detach();
        let after = live_threads(&mut jvm);
        assert!(
            !after.contains("sprig-edges"),
            "JDK {}: the bursts' thread outlived the session: {after}",
            jdk.major
        );
        let mut next = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &next.options());
        next.accept(jvm.pid());
        assert_eq!(
            next.digest("fixtures.Edges"),
            original,
            "JDK {}: fixtures.Edges not put back",
            jdk.major
        );
        drop(next);
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        assert_no_verify_error(&jvm);
    }
}

/// Windows timing with `Silence::Original` (`--windows-silence original`):
/// the root's callees, in a class of their own, hold their probes in the
/// counting windows (revealed and instrumented) and their original bytes
/// in the silent windows; they are instrumented again when the next
/// counting window opens, and the detach leaves every class as it was.
/// The agent's digest of the callees' class is polled while the root runs
/// through a counting window (1.5 s), a silent one (1.5 s) and the next
/// counting one.
#[test]
fn original_silence_puts_the_callees_back_in_silent_windows() {
    use sprig_wire::control::{Silence, StackSource, WindowOptions};
    for jdk in sprig_tests::test_jdks("original_silence_puts_the_callees_back_in_silent_windows") {
        let classes = fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Silence");
        wait_ready(&mut jvm);
        // Both classes loaded and compiled before the session.
        jvm.send("run 300");
        jvm.wait_for("done", Duration::from_secs(60), |l| l.starts_with("done"));

        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let inner = cli.digest("fixture.SilenceInner");
        let root = cli.digest("fixture.Silence");
        assert!(
            inner.0 > 0 && root.0 > 0,
            "JDK {}: fixture not loaded",
            jdk.major
        );
        cli.start_windows(
            &["fixture.Silence::root"],
            StackOptions {
                interval_us: 10_000,
                max_depth: 64,
                source: StackSource::Jvmti,
            },
            WindowOptions {
                counting_ms: 1500,
                silent_ms: 1500,
                counting_calls: 0,
                silence: Silence::Original,
                settle_ms: 0,
            },
        );
        jvm.send("run 5000");
        // (ms since the start, callees' digest, root class's digest)
        let started = Instant::now();
        let mut seen = Vec::new();
        while started.elapsed() < Duration::from_millis(4800) {
            let t = started.elapsed().as_millis();
            seen.push((
                t,
                cli.digest("fixture.SilenceInner"),
                cli.digest("fixture.Silence"),
            ));
            std::thread::sleep(Duration::from_millis(50));
        }
        let first_instrumented = seen.iter().position(|(_, d, _)| *d != inner);
        let back = first_instrumented.and_then(|i| {
            seen[i..]
                .iter()
                .position(|(_, d, _)| *d == inner)
                .map(|j| i + j)
        });
        let again = back.and_then(|i| seen[i..].iter().position(|(_, d, _)| *d != inner));
        let timeline: Vec<(u128, bool, bool)> = seen
            .iter()
            .map(|(t, d, r)| (*t, *d != inner, *r != root))
            .collect();
        eprintln!(
            "JDK {}: (ms, callees instrumented, root class instrumented) {timeline:?}",
            jdk.major
        );
        assert!(
            first_instrumented.is_some() && back.is_some() && again.is_some(),
            "JDK {}: the callees' class was not instrumented, then original, then instrumented \
             again: (ms, callees instrumented, root class instrumented) {timeline:?}",
            jdk.major
        );
        // The root keeps its probes through the silent window.
        let b = back.unwrap();
        assert!(
            seen[b].2 != root,
            "JDK {}: the root's class lost its probes in the silent window: {timeline:?}",
            jdk.major
        );
        jvm.wait_for("done", Duration::from_secs(60), |l| l.starts_with("done"));
        cli.detach();
        drop(cli);
        let mut next = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &next.options());
        next.accept(jvm.pid());
        assert_eq!(
            (
                next.digest("fixture.SilenceInner"),
                next.digest("fixture.Silence")
            ),
            (inner, root),
            "JDK {}: the detach left a class changed",
            jdk.major
        );
        assert_no_verify_error(&jvm);
        drop(next);
        jvm.send("quit");
        jvm.wait_exit(Duration::from_secs(30));
    }
}
