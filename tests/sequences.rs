//! Model-based sequence tests on the CPU reference backend.
//!
//! - random sequences against the correct backend must always match the
//!   reference model (`commcheck::model`);
//! - against planted defects the checker must find a divergence naming the
//!   defect's invariant, and proptest must shrink it to a minimal sequence;
//! - the sequence model's throughput is measured and printed (not asserted).
//!
//! Seeds are fixed and printed; set `COMMCHECK_MODEL_SEED` to explore others.
//! A failure prints the shrunk sequence as a `vec![...]` literal that can be
//! pasted into `replay` below. Run with `-- --nocapture` to see the output.

use std::sync::Arc;
use std::time::{Duration, Instant};

use commcheck::model::{
    check_sequence, check_sequence_on, check_sequence_with, sequence_strategy, Divergence, Header,
    Mode, Op, Options, Sequence, Stats, StdThreads, Timeout, Work,
};
use commcheck::Instruments;
use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Default seed of every randomised test here.
const SEED: u64 = 0x5eed_c0de_2024_0003;

/// Case count of the random test (`COMMCHECK_MODEL_CASES` overrides).
fn cases() -> u32 {
    std::env::var("COMMCHECK_MODEL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

fn seed() -> u64 {
    std::env::var("COMMCHECK_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED)
}

fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&seed.to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

fn runner(cases: u32, seed: u64) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, rng(seed))
}

/// The sequence's outcome; an inconclusive divergence (a wait the kit bounds
/// by time expired on a loaded machine: `Divergence::inconclusive`) checked
/// nothing, and counts as no operation executed.
fn run(harness: CpuHarness, ops: &[Op]) -> Result<Stats, Divergence> {
    match check_sequence(Arc::new(harness), ops) {
        Err(divergence) if divergence.inconclusive() => {
            println!("  inconclusive, not checked: {divergence}");
            Ok(Stats::default())
        }
        other => other,
    }
}

/// Removes operations one at a time while the sequence still fails.
/// proptest tries each deletion once, before it shrinks the operations, so an
/// operation that became removable only after an index shrank stays; this
/// pass takes it out.
fn minimise(mut ops: Vec<Op>, fails: impl Fn(&[Op]) -> bool) -> Vec<Op> {
    let mut index = 0;
    while index < ops.len() {
        let mut shorter = ops.clone();
        shorter.remove(index);
        if fails(&shorter) {
            ops = shorter;
        } else {
            index += 1;
        }
    }
    ops
}

/// Replays a sequence printed by a failure.
fn replay(ops: Vec<Op>) -> Result<Stats, Divergence> {
    run(CpuHarness::new(), &ops)
}

/// A runnable example: a collective quarantined while its peer is late and
/// released later, a held local submission dropped while pending, a plain
/// submission with a retained value, a forked lane ordered after it.
#[test]
fn example_sequence_matches_the_model() {
    let ops = vec![
        Op::Submit {
            work: Work::Operation(0),
            lane: 0,
            fault: false,
        },
        Op::IsComplete { sub: 0 },
        Op::WaitBounded {
            sub: 0,
            timeout: Timeout::Short,
            mode: Mode::Quarantine,
        },
        Op::Submit {
            work: Work::LocalDependencies,
            lane: 0,
            fault: false,
        },
        Op::DropCompletion { sub: 1 },
        Op::Release { sub: 0 },
        Op::Release { sub: 1 },
        Op::Fork { count: 1 },
        Op::Submit {
            work: Work::Submit,
            lane: 1,
            fault: false,
        },
        Op::Retain { sub: 2 },
        Op::OrderAfter { sub: 2, lane: 0 },
        Op::Submit {
            work: Work::Submit,
            lane: 0,
            fault: false,
        },
        Op::Release { sub: 2 },
        Op::Release { sub: 3 },
        Op::Wait { sub: 3 },
        Op::IsComplete { sub: 3 },
    ];
    let stats = replay(ops).unwrap_or_else(|divergence| panic!("{divergence}"));
    assert!(
        stats.executed >= 14,
        "most operations should act: {stats:?}"
    );
    assert_eq!(stats.instruments, Instruments::ALL, "every check ran");
}

/// Random sequences always match the model on the correct backend.
#[test]
fn random_sequences_match_the_model() {
    let seed = seed();
    println!("random_sequences_match_the_model: seed {seed} (COMMCHECK_MODEL_SEED)");
    let mut runner = runner(cases(), seed);
    let total = std::sync::Mutex::new(Stats::default());
    let started = Instant::now();
    let outcome = runner.run(&sequence_strategy(32), |sequence| {
        let one = Instant::now();
        let stats = run(CpuHarness::new(), &sequence)
            .map_err(|divergence| TestCaseError::fail(divergence.to_string()))?;
        if one.elapsed() > Duration::from_secs(1) {
            println!("  slow sequence ({:?}):\n{sequence}", one.elapsed());
        }
        let mut total = total.lock().unwrap_or_else(|p| p.into_inner());
        total.executed += stats.executed;
        total.skipped += stats.skipped;
        total.submissions += stats.submissions;
        Ok(())
    });
    let total = *total.lock().unwrap_or_else(|p| p.into_inner());
    println!(
        "  {} operations executed, {} skipped, {} submissions in {:?}",
        total.executed,
        total.skipped,
        total.submissions,
        started.elapsed()
    );
    if let Err(error) = outcome {
        match error {
            TestError::Fail(reason, sequence) => {
                let minimal = Sequence(minimise(sequence.to_vec(), |ops| {
                    replay(ops.to_vec()).is_err()
                }));
                panic!(
                    "seed {seed}: the correct backend diverged from the model: {reason}\n\
                     shrunk sequence (replay with `replay(...)`):\n{minimal}"
                )
            }
            TestError::Abort(reason) => panic!("seed {seed}: aborted: {reason}"),
        }
    }
    assert!(total.executed > 0);
}

/// The model is the same on any scheduler: driven through
/// [`check_sequence_on`] with plain `std` threads ([`StdThreads`], what the
/// shuttle tests replace with shuttle's), random sequences on the correct
/// backend match it, and a defect's minimal failing sequence diverges on
/// the same ID as in the kit's own world.
#[test]
fn the_model_runs_on_any_scheduler() {
    let seed = seed();
    let strategy = sequence_strategy(24);
    let mut runner = runner(32, seed);
    for _ in 0..32 {
        let sequence = strategy
            .new_tree(&mut runner)
            .expect("a sequence")
            .current();
        if let Err(divergence) = check_sequence_on(
            Arc::new(StdThreads),
            Arc::new(CpuHarness::new()),
            &sequence,
            Options::default(),
        ) {
            panic!(
                "seed {seed}: the correct backend diverged on StdThreads: {divergence}\n{sequence}"
            );
        }
    }
    let defect = Defect::LocalWorkDropsInputs;
    let (sequence, divergence) = shrunk_failure(defect, 1024);
    let on_threads = check_sequence_on(
        Arc::new(StdThreads),
        Arc::new(CpuHarness::with_defect(defect)),
        &sequence,
        MUTANT_OPTIONS,
    )
    .err();
    assert_eq!(
        on_threads.as_ref().map(|d| d.id),
        Some(divergence.id),
        "{defect}: {sequence}\nkit world: {divergence}\nStdThreads: {on_threads:?}"
    );
}

/// Mutant searches let work start after each submission and release, so
/// defects that need a timing window show on every replay (stable shrinking).
const MUTANT_OPTIONS: Options = Options {
    limit: Duration::from_secs(30),
    settle: Duration::from_millis(1),
};

fn run_mutant(defect: Defect, ops: &[Op]) -> Result<Stats, Divergence> {
    check_sequence_with(
        Arc::new(CpuHarness::with_defect(defect)),
        ops,
        MUTANT_OPTIONS,
    )
}

/// Sequences decoded from random bytes with `arbitrary` (the path a fuzz
/// target takes) match the model too.
#[test]
fn fuzzer_bytes_decode_to_sequences_that_match_the_model() {
    let seed = seed();
    let mut generator = runner(1, seed);
    let bytes = proptest::collection::vec(proptest::num::u8::ANY, 0..256);
    let mut operations = 0;
    for _ in 0..cases() / 2 {
        let Ok(tree) = bytes.new_tree(&mut generator) else {
            continue;
        };
        let sequence = Sequence::from_bytes(&tree.current(), 32);
        operations += sequence.len();
        if let Err(divergence) = run(CpuHarness::new(), &sequence) {
            panic!("seed {seed}: {divergence}\nreplay:\n{sequence}");
        }
    }
    println!("fuzzer bytes: {operations} operations decoded and checked (seed {seed})");
    assert!(operations > 0, "no operation was decoded");
}

/// The divergence `ops` gives on `defect`: one replay. The mutant options
/// settle by events (every submission the model says will finish by itself
/// is seen ended before the next observation), so a replay's answer does
/// not depend on the machine's load.
fn diverges(defect: Defect, ops: &[Op]) -> Option<Divergence> {
    run_mutant(defect, ops).err()
}

/// Searches for a divergence on `defect` (one search, `cases` random
/// sequences under the run's seed), lets proptest shrink it, then removes
/// what still can be removed without changing the invariant named; returns
/// the minimal sequence and the divergence it gives.
fn shrunk_failure(defect: Defect, cases: u32) -> (Sequence, Divergence) {
    let seed = seed();
    let mut runner = runner(cases, seed);
    let outcome = runner.run(&sequence_strategy(24), |sequence| {
        run_mutant(defect, &sequence)
            .map(drop)
            .map_err(|divergence| TestCaseError::fail(divergence.to_string()))
    });
    let shrunk = match outcome {
        Err(TestError::Fail(_, sequence)) => sequence,
        Err(TestError::Abort(reason)) => panic!("{defect}: search aborted: {reason}"),
        Ok(()) => panic!("{defect}: no divergence found in {cases} sequences (seed {seed})"),
    };
    let found = diverges(defect, &shrunk).unwrap_or_else(|| {
        panic!(
            "{defect}: the sequence proptest shrank to no longer diverges (seed {seed}):\n{shrunk}"
        )
    });
    let sequence = Sequence(minimise(shrunk.to_vec(), |ops| {
        run_mutant(defect, ops).err().map(|d| d.id) == Some(found.id)
    }));
    let divergence = diverges(defect, &sequence).unwrap_or_else(|| {
        panic!("{defect}: the minimised sequence no longer diverges (seed {seed}):\n{sequence}")
    });
    (sequence, divergence)
}

/// The RET-4 mutant: dropping a pending completion releases its resources.
/// The checker finds it and proptest shrinks it to two operations: a
/// submission, then a drop of its completion, either by the caller (RET-4)
/// or inside `wait_bounded`, which consumes and drops the completion after
/// handing the live work to quarantine (CAN-6: the defect breaks both).
#[test]
fn mutant_drop_releases_pending_shrinks_to_a_minimal_sequence() {
    let defect = Defect::DropReleasesPending;
    let (sequence, divergence) = shrunk_failure(defect, 256);
    println!("{defect}, shrunk:\n{sequence}\n  -> {divergence}");
    assert!(
        matches!(divergence.id, Some("RET-4" | "CAN-6")),
        "{divergence}"
    );
    assert!(
        sequence.len() <= 2,
        "expected two operations, shrunk to:\n{sequence}"
    );
    let dropped = vec![
        Op::Submit {
            work: Work::LocalDependencies,
            lane: 0,
            fault: false,
        },
        Op::DropCompletion { sub: 0 },
    ];
    let divergence = run_mutant(defect, &dropped).expect_err("the drop must diverge");
    println!(
        "{defect}, dropped by the caller:\n{}\n  -> {divergence}",
        Sequence(dropped)
    );
    assert_eq!(divergence.id, Some("RET-4"), "{divergence}");
}

/// The model gaps an independent backend found, each now caught by a short
/// sequence naming its invariant: agreement that resolves to the local
/// status, uneven-gather counts read as element counts, a receiver that
/// skips the header comparison, a broadcast root reporting completion
/// before its own part ran (its late peer may legally join after it
/// completed, so the model calls it blocked by the hold ahead of it, never
/// by its peer), and `resources_releasable` turning true after a timed-out
/// bounded wait (read on a second handle).
#[test]
fn independent_backend_gaps_are_caught() {
    let released = |work| {
        vec![
            Op::Submit {
                work,
                lane: 0,
                fault: false,
            },
            Op::Release { sub: 0 },
            Op::Wait { sub: 0 },
        ]
    };
    let cases = [
        (
            Defect::AgreementLocal,
            "AGR-1",
            released(Work::Agree {
                votes: [true, false],
            }),
        ),
        (
            Defect::UnevenCountsAsElements,
            "GAT-2",
            released(Work::UnevenGather {
                counts: [1, 2],
                width: 1,
            }),
        ),
        (
            Defect::SkipHeaderCheck,
            "P2P-2",
            released(Work::SendReceive {
                values: 0,
                header: Header::Schema,
            }),
        ),
        // A broadcast root may complete before its late peer joins, never
        // before its own part ran: here it is queued behind held local work.
        (
            Defect::BroadcastRootEarly,
            "EXC-2",
            vec![
                Op::Submit {
                    work: Work::LocalDependencies,
                    lane: 0,
                    fault: false,
                },
                Op::Submit {
                    work: Work::Broadcast { root: 0 },
                    lane: 0,
                    fault: false,
                },
                Op::IsComplete { sub: 1 },
            ],
        ),
        (
            Defect::ReleasableAfterDeadline,
            "EXC-8",
            vec![
                Op::Submit {
                    work: Work::Operation(0),
                    lane: 0,
                    fault: false,
                },
                Op::WaitBounded {
                    sub: 0,
                    timeout: Timeout::Short,
                    mode: Mode::Quarantine,
                },
            ],
        ),
    ];
    let mut wrong = Vec::new();
    for (defect, id, ops) in cases {
        assert!(
            run(CpuHarness::new(), &ops).is_ok(),
            "the correct backend diverges on {defect}'s sequence"
        );
        match diverges(defect, &ops) {
            Some(divergence) if divergence.id == Some(id) => {
                println!("{defect}: {divergence}");
            }
            other => wrong.push(format!("{defect}: expected {id}, got {other:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Further mutants the sequence model finds, each with the invariant its
/// divergence must name (timing-window defects are
/// [`timing_window_mutants_are_found_at_a_rate`]'s). (Defects outside the
/// model's reach are proven by the suites: ones that only hang or slow a call
/// down, need an executor drop, empty or lazy submissions, or
/// fail_next_submission; and ones whose every failing replay takes seconds,
/// which shrinking repeats: a leak the final drain proves,
/// `resources_releasable` never turning true (EXC-9). The fuzz targets find
/// those too, see fuzz/README.md.) A random search whose outcome still
/// depends on scheduling (a fresh-clone CI beside other jobs missed
/// `AllToAllZeroSkips` once), so it is the nightly job's, out of the README's
/// test command; every one of these defects is proven on its own ID by the
/// catalogue's precision matrix (`tests/mutants`).
#[test]
#[ignore = "a random search: nightly (.ci/nightly); the precision matrix proves each defect"]
fn mutants_are_found_and_named() {
    let table = [
        (Defect::LocalWorkDropsInputs, "RET-1"),
        (Defect::CollectiveDropsResources, "RET-3"),
        (Defect::OutputNotRetained, "RET-5"),
        (Defect::RetainDropsEarly, "RET-6"),
        (Defect::NonMonotonicCompletion, "EXC-3"),
        (Defect::StaleCompletionQuery, "EXC-5"),
        (Defect::NonStickyError, "EXC-6"),
        (Defect::CompletedAtDeadline, "CAN-1"),
        (Defect::WrongCancellationMode, "CAN-3"),
        (Defect::NativeCancelErrors, "CAN-4"),
        (Defect::QuarantineDropsLive, "CAN-6"),
        (Defect::ErrorDropsLive, "CAN-7"),
        (Defect::DeadlineOverflow, "CAN-8"),
        (Defect::FailedIsCompleted, "CAN-9"),
        (Defect::OrderAfterIgnored, "SUB-3"),
        (Defect::SumSkipsLastMember, "SUM-1"),
        (Defect::GatherReversed, "GAT-1"),
        (Defect::BroadcastSums, "BRD-1"),
        (Defect::BarrierEarly, "BAR-1"),
        (Defect::AgreementLocal, "AGR-1"),
        (Defect::UnevenCountsAsElements, "GAT-2"),
        (Defect::AllToAllZeroSkips, "A2A-1"),
        (Defect::PointToPointReversed, "P2P-1"),
        (Defect::SkipHeaderCheck, "P2P-2"),
        (Defect::SeparateHeaderMessage, "P2P-3"),
        (Defect::BroadcastRootWraps, "BRD-2"),
        (Defect::ReleasableAfterDeadline, "EXC-8"),
    ];
    let mut wrong = Vec::new();
    for (defect, id) in table {
        let started = Instant::now();
        let found = std::panic::catch_unwind(|| shrunk_failure(defect, 1024));
        let (sequence, divergence) = match found {
            Ok(found) => found,
            Err(payload) => {
                let why = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                wrong.push(format!("{defect}: {why}"));
                continue;
            }
        };
        println!(
            "{defect}: {} op(s) after shrinking, {:?}\n{sequence}\n  -> {divergence}",
            sequence.len(),
            started.elapsed()
        );
        // Outputs the caller still holds when it drops the completion are
        // freed at the caller's own drop of them under both RET-4 (the
        // completion's drop released them) and RET-5 (they were never
        // retained): the model names RET-4 for such a sequence, and whether
        // the search lands on one depends on when the work completes (the
        // machine's load). Either name is a violation the evidence shows.
        let also = match defect {
            Defect::OutputNotRetained => Some("RET-4"),
            _ => None,
        };
        if divergence.id != Some(id) && (also.is_none() || divergence.id != also) {
            wrong.push(format!("{defect}: expected {id}, got {divergence}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Defects the model sees only inside a timing window, so no search is
/// sure to find them: an early deadline (CAN-2) shows only while the caller
/// reads the clock before its sub-millisecond timeout would have passed,
/// completion once started (EXC-2) only while released work runs, and the
/// others (CAN-5, EXC-7, EXC-8) only while faulted or cancelled work the
/// model cannot hold is still live at the next observation. Out of the
/// README's test command (their outcome depends on the machine's load):
/// the nightly job runs this and prints each defect's rate over five
/// searches under five seeds; it fails only for a defect never found.
#[test]
#[ignore = "statistical: timing-window defects, found at a rate (nightly: .ci/nightly)"]
fn timing_window_mutants_are_found_at_a_rate() {
    const SEARCHES: u64 = 5;
    let table = [
        (Defect::EarlyCompletion, "EXC-2"),
        (Defect::ErrorReleases, "EXC-7"),
        (Defect::ReleasableEarly, "EXC-8"),
        (Defect::EarlyDeadline, "CAN-2"),
        (Defect::NativeCancelNoTeardown, "CAN-5"),
    ];
    let mut never = Vec::new();
    for (defect, id) in table {
        let found = (0..SEARCHES)
            .filter(|search| {
                let mut runner = runner(256, seed().wrapping_add(*search));
                let outcome = runner.run(&sequence_strategy(24), |sequence| {
                    match run_mutant(defect, &sequence) {
                        Err(divergence) if divergence.id == Some(id) => {
                            Err(TestCaseError::fail(divergence.to_string()))
                        }
                        _ => Ok(()),
                    }
                });
                outcome.is_err()
            })
            .count();
        println!("{defect} ({id}): found in {found} of {SEARCHES} searches of 256 sequences");
        if found == 0 {
            never.push(defect);
        }
    }
    assert!(never.is_empty(), "never found: {never:?}");
}

/// Operations per second of the sequence model against the CPU backend
/// (printed, never asserted: speed is not a verdict).
#[test]
fn sequence_model_throughput() {
    let seed = seed();
    let mut generator = runner(1, seed);
    let strategy = sequence_strategy(48);
    let sequences: Vec<Sequence> = (0..200)
        .filter_map(|_| {
            strategy
                .new_tree(&mut generator)
                .ok()
                .map(|tree| tree.current())
        })
        .collect();
    let started = Instant::now();
    let mut stats = Stats::default();
    for sequence in &sequences {
        let one = replay(sequence.to_vec()).unwrap_or_else(|d| panic!("{d}\n{sequence}"));
        stats.executed += one.executed;
        stats.skipped += one.skipped;
    }
    let elapsed = started.elapsed().max(Duration::from_micros(1));
    let all = stats.executed + stats.skipped;
    println!(
        "sequence model throughput (seed {seed}): {} sequences, {} operations ({} executed, {} skipped) in {elapsed:?}: \
         {:.0} ops/s, {:.0} executed ops/s",
        sequences.len(),
        all,
        stats.executed,
        stats.skipped,
        all as f64 / elapsed.as_secs_f64(),
        stats.executed as f64 / elapsed.as_secs_f64(),
    );
}
