use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::model::{sequence_strategy, Header, Mode, Op, Timeout, Work};

#[test]
fn bytes_that_are_no_input_are_rejected_cleanly() {
    for target in Target::ALL {
        assert_eq!(decode(target, &[]), Err(Rejection::Empty));
        assert_eq!(decode(target, &[3, 0, 0]), Err(Rejection::Version(3)));
        assert_eq!(decode(target, &[0]), Err(Rejection::Version(0)));
        if target != Target::Sequence {
            assert_eq!(decode(target, &[2, 0, 0]), Err(Rejection::Version(2)));
        }
    }
    assert_eq!(
        decode(Target::Sequence, &[2, 0, 0]),
        Err(Rejection::Truncated("kind mask"))
    );
    assert_eq!(
        decode(Target::Sequence, &[2]),
        Err(Rejection::Truncated("world size"))
    );
    assert_eq!(
        decode(Target::Sequence, &[1, 0, 0]),
        Err(Rejection::Truncated("kind mask"))
    );
    assert_eq!(
        decode(Target::Sequence, &[1, 0, 0, 0, 0]),
        Err(Rejection::Truncated("flags"))
    );
    assert!(describe(Target::Report, &[9]).starts_with("rejected: format version 9"));
}

/// Format 1 is frozen: these bytes decode to these inputs forever.
#[test]
fn format_1_is_frozen() {
    // Every kind; settle; Agree (votes 0b01) on lane 0, Release 0, Wait 0,
    // WaitBounded 0 for 1 + 0x0102 µs under quarantine, a truncated Retain.
    let bytes = [
        1, 0, 0, 0, 0, 1, 6, 1, 0, 0, 8, 0, 11, 0, 12, 0, 5, 2, 1, 1, 17,
    ];
    let Ok(Input::Sequence(program)) = decode(Target::Sequence, &bytes) else {
        panic!("no program");
    };
    assert_eq!(
        program,
        Program {
            format: 1,
            ranks: 2,
            enabled: Kinds::ALL_V1,
            settle: true,
            ops: Sequence(vec![
                Op::Submit {
                    work: Work::Agree {
                        votes: [true, false]
                    },
                    lane: 0,
                    fault: false
                },
                Op::Release { sub: 0 },
                Op::Wait { sub: 0 },
                Op::WaitBounded {
                    sub: 0,
                    timeout: Timeout::Exact(Duration::from_micros(0x0102 + 1)),
                    mode: Mode::Quarantine
                },
            ])
        }
    );
    // A swarm of Release (8) and Wait (11): selector 1 is Wait.
    let swarm = [1, 0, 9, 0, 0, 0, 1, 3, 0, 7];
    let Ok(Input::Sequence(program)) = decode(Target::Sequence, &swarm) else {
        panic!("no program");
    };
    assert_eq!(format!("{:?}", program.enabled), "Kinds(Release | Wait)");
    assert_eq!(
        program.ops.0,
        vec![Op::Wait { sub: 3 }, Op::Release { sub: 7 }]
    );
    let Ok(Input::Deadlines(case)) = decode(Target::Deadlines, &[1, 0, 3, 1, 1, 20, 1, 3]) else {
        panic!("no deadline case");
    };
    assert_eq!(
        case,
        DeadlineCase {
            work: Work::Operation(3),
            timeout: Timeout::Unbounded,
            mode: Mode::Quarantine,
            release: ReleaseAt::During,
            delay: 20,
            fault: true,
            poll_first: false,
            drop_outputs_first: false,
        }
    );
    let Ok(Input::Report(input)) = decode(Target::Report, &[1, 1, 2, 0, b'{', b'}', b'[']) else {
        panic!("no report input");
    };
    assert_eq!(input.parser, Parser::Diff);
    assert_eq!(input.texts, vec!["{}".to_owned(), "[".to_owned()]);
    let Ok(Input::Boundary(case)) = decode(
        Target::Boundary,
        &[1, 1, 7, 7, 1, 0, 0, 1, 0, 1, 0, 2, 120, 124],
    ) else {
        panic!("no boundary case");
    };
    assert_eq!(case.route, 7);
    assert!(case.sender_first);
    assert_eq!(case.sender.schema, "a");
    assert_eq!(case.sender.roles[0].name, "a");
    assert_eq!(case.sender.roles[0].dtype, 1);
    assert_eq!(case.sender.roles[0].declared, vec![2]);
    assert_eq!(case.sender.roles[0].values, vec![0.0, 1.0]);
    assert_eq!(case.receiver, case.sender);
}

#[test]
fn deadlines_after_the_wait_keep_the_wait_short() {
    let case = DeadlineCase {
        work: Work::LocalDependencies,
        timeout: Timeout::Unbounded,
        mode: Mode::NativeCancel,
        release: ReleaseAt::After,
        delay: 0,
        fault: false,
        poll_first: true,
        drop_outputs_first: true,
    };
    let Ok(Input::Deadlines(decoded)) = decode(Target::Deadlines, &case.encode()) else {
        panic!("no deadline case");
    };
    assert_eq!(decoded.timeout, Timeout::Exact(Timeout::BLOCKED_LIMIT));
    assert_eq!(decoded.sequence().len(), 5);
}

fn enabled_kinds() -> impl Strategy<Value = Kinds> {
    any::<u32>().prop_map(Kinds::from_mask)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any bytes decode, for every target, without panicking.
    #[test]
    fn any_bytes_decode_or_are_rejected(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        for target in Target::ALL {
            let _ = describe(target, &bytes);
            let mut versioned = bytes.clone();
            versioned.insert(0, FORMAT);
            if let Ok(input) = decode(target, &versioned) {
                // Decoding the re-encoded input is stable (a fixed point).
                let again = decode(target, &input.encode()).expect("re-encoded input decodes");
                prop_assert_eq!(decode(target, &again.encode()).ok(), Some(again));
            }
        }
    }

    /// A program survives encoding: every kind, every normalised work.
    #[test]
    fn programs_round_trip(
        sequence in sequence_strategy(40),
        settle in any::<bool>(),
        ranks in 2usize..=4,
        extra in proptest::collection::vec((0u8..6, any::<u8>(), any::<bool>()), 0..8),
    ) {
        let ops: Vec<Op> = sequence
            .iter()
            .map(|&op| match op {
                Op::Submit { work, lane, fault } => Op::Submit { work: work.normalized(), lane, fault },
                Op::Fork { count } => Op::Fork { count: count % 3 },
                other => other,
            })
            .chain(extra.into_iter().map(|(kind, lane, local)| match kind {
                0 => Op::DropLane { lane },
                1 => Op::EmptyLocal { lane },
                2 => Op::SubmitLazy { lane },
                3 => Op::Refused { local, lane },
                4 => Op::DropQueued { lane },
                _ => Op::OrderedPair { lane },
            }))
            .collect();
        let program = Program { format: FORMAT, ranks, enabled: Kinds::ALL, settle, ops: Sequence(ops) };
        prop_assert_eq!(decode(Target::Sequence, &program.encode()), Ok(Input::Sequence(program)));
    }

    /// Encoding under a swarm keeps exactly the enabled operations.
    #[test]
    fn swarms_keep_their_kinds(sequence in sequence_strategy(20), enabled in enabled_kinds()) {
        let program = Program { format: FORMAT, ranks: 2, enabled, settle: false, ops: sequence };
        let Ok(Input::Sequence(decoded)) = decode(Target::Sequence, &program.encode()) else {
            panic!("no program");
        };
        prop_assert_eq!(decoded.enabled, enabled);
        prop_assert!(decoded.ops.len() <= program.ops.len());
    }

    /// Every deadline from 1 ns to `Duration::MAX` survives encoding.
    #[test]
    fn deadlines_round_trip(secs in any::<u64>(), nanos in 0u32..1_000_000_000, small in 1u64..70_000) {
        for duration in [Duration::new(secs, nanos), Duration::from_nanos(small), Duration::MAX] {
            let case = DeadlineCase {
                work: Work::Operation(2),
                timeout: Timeout::Exact(duration.max(Duration::from_nanos(1))),
                mode: Mode::Quarantine,
                release: ReleaseAt::Before,
                delay: 9,
                fault: false,
                poll_first: false,
                drop_outputs_first: true,
            };
            prop_assert_eq!(decode(Target::Deadlines, &case.encode()), Ok(Input::Deadlines(case)));
        }
    }
}

#[test]
fn headers_are_numbered_in_format_order() {
    assert_eq!(Header::ALL[0], Header::Matching);
    assert_eq!(Header::ALL[6], Header::Count);
    assert_eq!(Kinds::NAMES[8], "Release");
}

#[test]
fn prepare_counts_decoded_and_rejected_inputs() {
    let before = super::decoded(Target::Report);
    drop(super::prepare(Target::Report, &[]));
    drop(super::prepare(Target::Report, &[1, 0, b'x']));
    let after = super::decoded(Target::Report);
    // Other tests may count inputs of their own meanwhile: at least these two.
    assert!(after.inputs >= before.inputs + 2);
    assert!(after.decoded > before.decoded);
    assert!(after.rejected() > before.rejected());
    assert!(after.checking >= before.checking);
    let mut shown = super::DecodedCount {
        inputs: 8,
        decoded: 6,
        checking: std::time::Duration::ZERO,
    };
    assert_eq!(
        shown.to_string(),
        "8 inputs, 6 decoded (75.0 %), 2 rejected"
    );
    shown.checking = std::time::Duration::from_millis(4);
    assert_eq!(
        shown.to_string(),
        "8 inputs, 6 decoded (75.0 %), 2 rejected; checks 500 µs per input (2000 inputs/s)"
    );
}

/// Format 2 is frozen: these bytes decode to these inputs forever.
#[test]
fn format_2_is_frozen() {
    // Three ranks (1 % 3 = 1); every kind; no settle; Fork 1, Submit on lane
    // 1, DropLane 0, EmptyLocal 0, SubmitLazy 1, Refused (local) on lane 0,
    // Release 0, then a truncated Refused.
    let bytes = [
        2, 1, 0, 0, 0, 0, 0, 15, 1, 1, 1, 0, 18, 0, 19, 0, 20, 1, 21, 1, 0, 8, 0, 21, 1,
    ];
    let Ok(Input::Sequence(program)) = decode(Target::Sequence, &bytes) else {
        panic!("no program");
    };
    assert_eq!(
        program,
        Program {
            format: 2,
            ranks: 3,
            enabled: Kinds::ALL,
            settle: false,
            ops: Sequence(vec![
                Op::Fork { count: 1 },
                Op::Submit {
                    work: Work::Submit,
                    lane: 1,
                    fault: false
                },
                Op::DropLane { lane: 0 },
                Op::EmptyLocal { lane: 0 },
                Op::SubmitLazy { lane: 1 },
                Op::Refused {
                    local: true,
                    lane: 0
                },
                Op::Release { sub: 0 },
            ])
        }
    );
    assert_eq!(
        decode(Target::Sequence, &program.encode()),
        Ok(Input::Sequence(program))
    );
}

/// A format-1 input migrated to format 2 keeps its operations, its kinds
/// and its settling, in a two-rank world.
#[test]
fn format_1_migrates_to_format_2() {
    let v1 = [1, 0x00, 0x09, 0, 0, 1, 0, 0, 0, 1, 5, 0];
    let Ok(Input::Sequence(old)) = decode(Target::Sequence, &v1) else {
        panic!("no program");
    };
    let migrated = old.encode();
    assert_eq!(migrated[0], FORMAT);
    let Ok(Input::Sequence(new)) = decode(Target::Sequence, &migrated) else {
        panic!("no program");
    };
    assert_eq!((new.format, new.ranks), (2, 2));
    assert_eq!(new.enabled, old.enabled);
    assert_eq!(new.settle, old.settle);
    assert_eq!(new.ops, old.ops);
    assert!(!new.ops.is_empty());
}
