//! Codec: property round trips over every message shape, and hostile
//! input (oversized, truncated, trailing, garbage) giving errors.

use proptest::prelude::*;
use sprig_wire::codec::{self, CodecError, MAX_FRAME};
use sprig_wire::control::{
    AgentStats, ClassFailure, ClockKind, DumpedFrame, DumpedLock, DumpedThread, JvmInfo, LockKind,
    Message, PROTOCOL_VERSION, RevealStats, SampledState, Scheme, SessionOptions, StackOptions,
    StackSample, ThreadDump, ThreadsOptions,
};

fn clock() -> impl Strategy<Value = ClockKind> {
    prop_oneof![
        Just(ClockKind::Tsc),
        Just(ClockKind::Monotonic),
        Just(ClockKind::ThreadCpu)
    ]
}

fn text() -> impl Strategy<Value = String> {
    // Unicode, empty, and the odd long one.
    prop_oneof![".{0,40}", "[a-zA-Z0-9.$/;()\\[]{0,300}"]
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(text(), 0..6)
}

fn jvm() -> impl Strategy<Value = JvmInfo> {
    (any::<u32>(), text(), text(), text()).prop_map(|(pid, version, vm_name, vendor)| JvmInfo {
        pid,
        version,
        vm_name,
        vendor,
    })
}

fn stats() -> impl Strategy<Value = AgentStats> {
    prop::array::uniform9(any::<u64>()).prop_map(|a| AgentStats {
        instrumented_methods: a[0],
        instrumented_classes: a[1],
        called_methods: a[2],
        lost_events: a[3],
        redefinition_batches: a[4],
        redefinition_ns: a[5],
        reveal_ns: a[6],
        failed_classes: a[7],
        threads: a[8],
        reveal: (a[0] % 2 == 1).then(|| RevealStats {
            revealed_by: vec![("virtual".into(), a[1]), ("root".into(), a[2])],
            scanned: a[3],
            reachable: a[4],
            reachable_unloaded: a[5],
            classes_mirrored: a[6],
            unmodifiable_skipped: a[7],
            reflective_sites: a[8],
            dormant: a[2],
            activated_in_place: a[3],
            trivial_skipped: a[4],
        }),
    })
}

fn session_options() -> impl Strategy<Value = SessionOptions> {
    (
        texts(),
        texts(),
        texts(),
        prop_oneof![Just(Scheme::Lazy), Just(Scheme::Eager)],
        clock(),
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
    )
        .prop_map(
            |(roots, include, exclude, scheme, clock, roots_only, calibrate, wait_bound_ms)| {
                let no_dormant = wait_bound_ms % 2 == 1;
                let skip_trivial = wait_bound_ms.rotate_left(7) % 40;
                SessionOptions {
                    roots,
                    include,
                    exclude,
                    scheme,
                    clock,
                    roots_only,
                    calibrate,
                    wait_bound_ms,
                    no_dormant,
                    skip_trivial,
                    receivers: wait_bound_ms % 3 == 0,
                    recalibrate_ms: wait_bound_ms.rotate_left(13) % 100,
                    timing: if wait_bound_ms % 2 == 0 {
                        sprig_wire::control::Timing::Exact
                    } else {
                        sprig_wire::control::Timing::Sampled
                    },
                    stacks: (wait_bound_ms % 5 == 0).then_some(StackOptions {
                        interval_us: wait_bound_ms,
                        max_depth: wait_bound_ms.rotate_left(3),
                        source: if wait_bound_ms % 2 == 0 {
                            sprig_wire::control::StackSource::Timer
                        } else {
                            sprig_wire::control::StackSource::Jvmti
                        },
                    }),
                    threads: (wait_bound_ms % 7 == 0).then_some(ThreadsOptions {
                        snapshots: wait_bound_ms % 11,
                        gap_ms: wait_bound_ms.rotate_left(5),
                        max_depth: wait_bound_ms.rotate_left(9),
                    }),
                    locks: wait_bound_ms % 7 == 0,
                    alloc: wait_bound_ms % 7 == 0,
                    windows: (wait_bound_ms % 7 == 0).then_some(sprig_wire::WindowOptions {
                        counting_ms: wait_bound_ms,
                        silent_ms: wait_bound_ms.rotate_left(5),
                        counting_calls: wait_bound_ms % 11,
                        silence: if wait_bound_ms % 3 == 0 {
                            sprig_wire::Silence::Original
                        } else {
                            sprig_wire::Silence::Dormant
                        },
                        settle_ms: wait_bound_ms % 13,
                    }),
                    cost_tail_ms: wait_bound_ms.rotate_left(7),
                    alloc_interval: wait_bound_ms.rotate_left(3),
                    alloc_live: wait_bound_ms % 5 == 0,
                }
            },
        )
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (any::<u32>(), any::<[u8; 16]>(), jvm()).prop_map(|(version, token, jvm)| {
            Message::AgentHello {
                version,
                token,
                jvm,
            }
        }),
        (clock(), any::<u64>()).prop_map(|(clock, ticks_per_sec)| Message::Started {
            clock,
            ticks_per_sec
        }),
        (any::<u32>(), text(), text(), text()).prop_map(|(id, class, name, descriptor)| {
            Message::Method {
                id,
                class,
                name,
                descriptor,
            }
        }),
        (text(), any::<u32>())
            .prop_map(|(pattern, methods)| Message::RootInstrumented { pattern, methods }),
        (text(), any::<bool>(), texts()).prop_map(|(pattern, class_loaded, suggestions)| {
            Message::RootNotFound {
                pattern,
                class_loaded,
                suggestions,
            }
        }),
        (any::<u32>(), any::<u64>(), text(), any::<u32>()).prop_map(
            |(index, java_id, name, tid)| Message::Thread {
                index,
                java_id,
                name,
                tid
            }
        ),
        // Finite floats: NaN != NaN would make equality meaningless.
        (
            -1e12f64..1e12,
            prop_oneof![
                Just(0.0f64),
                Just(-0.0),
                any::<f64>().prop_filter("finite", |f| f.is_finite())
            ],
            any::<u32>()
        )
            .prop_map(|(inner_ticks, outer_ticks, samples)| Message::Calibration {
                inner_ticks,
                outer_ticks,
                samples
            }),
        stats().prop_map(Message::Status),
        (text(), text(), text()).prop_map(|(class, jvmti_error, reason)| {
            Message::ClassFailed(ClassFailure {
                class,
                jvmti_error,
                reason,
            })
        }),
        text().prop_map(Message::Warning),
        text().prop_map(Message::Error),
        stats().prop_map(Message::Detached),
        any::<u32>().prop_map(|version| Message::CliHello { version }),
        session_options().prop_map(Message::Start),
        Just(Message::StatusRequest),
        Just(Message::Detach),
        (any::<u32>(), text(), text(), text()).prop_map(|(id, class, name, descriptor)| {
            Message::FrameMethod {
                id,
                class,
                name,
                descriptor,
            }
        }),
        (any::<u64>(), text()).prop_map(|(java_id, name)| Message::SampledThread { java_id, name }),
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::vec(stack_sample(), 0..8)
        )
            .prop_map(|(time_ns, cost_ns, samples)| Message::StackSamples {
                time_ns,
                cost_ns,
                samples
            }),
        thread_dump().prop_map(Message::ThreadDump),
        (any::<u32>(), text()).prop_map(|(id, class)| Message::WaitClass { id, class }),
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            text(),
            any::<u8>()
        )
            .prop_map(|(id, method, bci, descriptor, dims)| Message::AllocSite {
                id,
                method,
                bci,
                descriptor,
                dims
            }),
        (
            prop::collection::vec(text(), 0..4),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(classes, interval_us, budget)| Message::EdgeProbes {
                classes,
                interval_us,
                budget
            }),
        (any::<u32>(), any::<u32>())
            .prop_map(|(classes, methods)| Message::EdgeProbed { classes, methods }),
        edge_samples().prop_map(Message::EdgeSamples),
        (any::<u32>(), text(), text()).prop_map(|(id, thread, context)| Message::WaitOwner {
            id,
            thread,
            context
        }),
        (any::<u32>(), text()).prop_map(|(id, class)| Message::AllocClass { id, class }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(samples, bytes_est)| Message::SampledOutside { samples, bytes_est }),
        (proptest::collection::vec(any::<u64>(), 0..40), any::<u64>())
            .prop_map(|(tags, lost)| Message::LiveFreed { tags, lost }),
        any::<u64>().prop_map(|gc| Message::LiveGc { gc }),
        outside_stacks().prop_map(Message::SampledOutsideStacks),
    ]
}

fn outside_stacks() -> impl Strategy<Value = sprig_wire::control::OutsideStacks> {
    use sprig_wire::control::{OutsideStack, OutsideStacks};
    let stack = (
        any::<u32>(),
        prop::collection::vec(any::<u32>(), 0..8),
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(class, frames, truncated, samples, bytes_est)| OutsideStack {
                class,
                frames,
                truncated,
                samples,
                bytes_est,
            },
        );
    (
        prop::collection::vec(stack, 0..4),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(stacks, unkept, unkept_bytes_est)| OutsideStacks {
            stacks,
            unkept,
            unkept_bytes_est,
        })
}

fn edge_samples() -> impl Strategy<Value = sprig_wire::control::EdgeSamples> {
    use sprig_wire::control::{EdgeCount, EdgeMethod, EdgeSamples};
    let method = || {
        (text(), text(), text()).prop_map(|(class, name, descriptor)| EdgeMethod {
            class,
            name,
            descriptor,
        })
    };
    let edge = (method(), method(), any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
        |(caller, callee, samples, intervals, interval_cpu_ns)| EdgeCount {
            caller,
            callee,
            samples,
            intervals,
            interval_cpu_ns,
        },
    );
    (
        any::<u32>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(edge, 0..4),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        (any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |(
                bursts,
                samples,
                effective_ns,
                cost_ns,
                dropped,
                edges,
                intervals,
                interval_cpu_ns,
                path_ns,
                (counted, counted_ns),
            )| {
                EdgeSamples {
                    bursts,
                    samples,
                    effective_ns,
                    cost_ns,
                    dropped,
                    edges,
                    intervals,
                    interval_cpu_ns,
                    path_ns,
                    counted,
                    counted_ns,
                }
            },
        )
}

fn thread_dump() -> impl Strategy<Value = ThreadDump> {
    let frame =
        (text(), text(), text(), any::<i32>()).prop_map(|(class, method, descriptor, line)| {
            DumpedFrame {
                class,
                method,
                descriptor,
                line,
            }
        });
    let thread = (
        (any::<u64>(), text(), any::<bool>(), any::<u32>()),
        prop::collection::vec(frame, 0..6),
        any::<bool>(),
        prop::collection::vec((any::<u32>(), any::<i32>()), 0..4),
        any::<Option<u32>>(),
        any::<Option<u32>>(),
    )
        .prop_map(
            |((java_id, name, daemon, state), frames, truncated, owns, contended, parked_on)| {
                DumpedThread {
                    java_id,
                    name,
                    daemon,
                    state,
                    frames,
                    truncated,
                    owns,
                    contended,
                    parked_on,
                }
            },
        );
    let lock = (
        text(),
        any::<i32>(),
        prop_oneof![
            Just(LockKind::Monitor),
            Just(LockKind::Synchronizer),
            Just(LockKind::Blocker)
        ],
        any::<Option<u64>>(),
    )
        .prop_map(|(class, hash, kind, owner)| DumpedLock {
            class,
            hash,
            kind,
            owner,
        });
    (
        any::<u64>(),
        any::<u64>(),
        prop::collection::vec(thread, 0..4),
        prop::collection::vec(lock, 0..4),
    )
        .prop_map(|(time_ns, took_ns, threads, locks)| ThreadDump {
            time_ns,
            took_ns,
            threads,
            locks,
        })
}

fn stack_sample() -> impl Strategy<Value = StackSample> {
    (
        any::<u64>(),
        prop_oneof![
            Just(SampledState::Running),
            Just(SampledState::Native),
            Just(SampledState::Blocked),
            Just(SampledState::Waiting),
            Just(SampledState::Parked),
            Just(SampledState::Sleeping),
            Just(SampledState::Other),
        ],
        any::<u64>(),
        prop::collection::vec(any::<u32>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(thread, state, cpu_ns, frames, truncated)| StackSample {
            thread,
            state,
            cpu_ns,
            frames,
            truncated,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn round_trip(msg in message()) {
        let frame = codec::encode(&msg).unwrap();
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        prop_assert_eq!(len, frame.len() - 4);
        let back = codec::read_frame(&mut &frame[..]).unwrap();
        prop_assert_eq!(&back, &msg);
        // try_decode agrees, and says "need more" for every proper prefix.
        let (again, used) = codec::try_decode(&frame).unwrap().unwrap();
        prop_assert_eq!(&again, &msg);
        prop_assert_eq!(used, frame.len());
        for cut in [0, 1, 3, 4, frame.len() / 2, frame.len() - 1] {
            if cut < frame.len() {
                prop_assert!(codec::try_decode(&frame[..cut]).unwrap().is_none());
            }
        }
    }

    #[test]
    fn sequences_round_trip(msgs in prop::collection::vec(message(), 0..20)) {
        let mut stream = Vec::new();
        for m in &msgs {
            codec::write_frame(&mut stream, m).unwrap();
        }
        let mut r = &stream[..];
        for m in &msgs {
            prop_assert_eq!(&codec::read_frame(&mut r).unwrap(), m);
        }
        prop_assert!(matches!(codec::read_frame(&mut r), Err(CodecError::Closed)));
    }

    /// Any byte soup inside a well-sized frame: an error or a message,
    /// never a panic, and a decoded message survives a second round trip.
    #[test]
    fn garbage_payload_never_panics(payload in prop::collection::vec(any::<u8>(), 1..200)) {
        let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(&payload);
        if let Ok(m) = codec::read_frame(&mut &frame[..]) {
            let again = codec::encode(&m).unwrap();
            prop_assert!(again.len() <= frame.len());
            prop_assert_eq!(codec::read_frame(&mut &again[..]).unwrap(), m);
        }
    }

    /// Flipping one byte of a valid frame's payload never panics.
    #[test]
    fn corrupted_frames_never_panic(msg in message(), pos in any::<prop::sample::Index>(), x in 1u8..) {
        let mut frame = codec::encode(&msg).unwrap();
        let i = 4 + pos.index(frame.len() - 4);
        frame[i] ^= x;
        let _ = codec::read_frame(&mut &frame[..]);
    }
}

#[test]
fn oversized_length_is_refused_before_allocating() {
    for len in [MAX_FRAME as u32 + 1, u32::MAX] {
        let bytes = len.to_le_bytes();
        match codec::read_frame(&mut &bytes[..]) {
            Err(CodecError::TooLarge { len: l }) => assert_eq!(l, len as usize),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            codec::try_decode(&bytes),
            Err(CodecError::TooLarge { .. })
        ));
    }
}

#[test]
fn oversized_message_is_refused_on_encode() {
    let huge = Message::Warning("x".repeat(MAX_FRAME + 1));
    assert!(matches!(
        codec::encode(&huge),
        Err(CodecError::TooLarge { .. })
    ));
    // Just under the limit is fine.
    let fits = Message::Warning("x".repeat(MAX_FRAME - 16));
    let f = codec::encode(&fits).unwrap();
    assert_eq!(codec::read_frame(&mut &f[..]).unwrap(), fits);
}

#[test]
fn container_length_inside_payload_is_bounded() {
    // A Warning whose string claims 2^60 bytes: bincode's limit must refuse
    // it without trying to allocate.
    let mut payload = codec::encode(&Message::Warning(String::new())).unwrap()[4..].to_vec();
    // Standard config: variant index as varint, then string length varint.
    // Replace the trailing 0 length with a u64 varint marker (253) + 2^60.
    assert_eq!(payload.last(), Some(&0));
    payload.pop();
    payload.push(253);
    payload.extend_from_slice(&(1u64 << 60).to_le_bytes());
    let mut frame = (payload.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&payload);
    assert!(matches!(
        codec::read_frame(&mut &frame[..]),
        Err(CodecError::Malformed(_))
    ));
}

#[test]
fn truncated_frames() {
    let frame = codec::encode(&Message::Warning("hello".into())).unwrap();
    assert!(matches!(
        codec::read_frame(&mut &frame[..0]),
        Err(CodecError::Closed)
    ));
    for cut in 1..frame.len() {
        match codec::read_frame(&mut &frame[..cut]) {
            Err(CodecError::Truncated { got, want }) => {
                assert_eq!(got, cut);
                assert!(want > got);
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

#[test]
fn trailing_bytes_and_empty_frames() {
    let mut frame = codec::encode(&Message::Detach).unwrap();
    frame.push(0);
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_le_bytes());
    assert!(matches!(
        codec::read_frame(&mut &frame[..]),
        Err(CodecError::Trailing { trailing: 1 })
    ));
    let empty = 0u32.to_le_bytes();
    assert!(matches!(
        codec::read_frame(&mut &empty[..]),
        Err(CodecError::Empty)
    ));
}

#[test]
fn unknown_variant_is_malformed() {
    // Variant index 200 does not exist.
    let frame = [1, 0, 0, 0, 200];
    assert!(matches!(
        codec::read_frame(&mut &frame[..]),
        Err(CodecError::Malformed(_))
    ));
}

#[test]
fn hello_carries_the_version() {
    let m = Message::CliHello {
        version: PROTOCOL_VERSION,
    };
    let f = codec::encode(&m).unwrap();
    assert_eq!(codec::read_frame(&mut &f[..]).unwrap(), m);
}
