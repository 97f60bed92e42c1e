//! The whole CPU backend under shuttle, driven by the kit's own sequence
//! model: the clean backend passes under the random and PCT schedulers
//! (fixed seeds and iteration counts), the planted lost wake-up is found,
//! and so is each of the kit's planted defects the sequences reach, by its
//! SPEC ID.
//!
//! Run with `-- --nocapture` to see what each test explored. The budgets
//! fit CI; `COMMCHECK_SHUTTLE_SEQUENCES`, `COMMCHECK_SHUTTLE_ITERATIONS` and
//! `COMMCHECK_SHUTTLE_SEED` deepen or vary the clean runs (nightly).
#![cfg(commcheck_shuttle)]

use std::time::Instant;

use commcheck::model::{sequence_strategy, Op, Sequence, Work};
use commcheck_cpu::Defect;
use commcheck_shuttle_tests::explore::{
    explore, explore_expecting_failure, Budget, Explored, Failure, Strategy, SEED,
};
use commcheck_shuttle_tests::world::{literal, run_sequence, sequences, Backend};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Longest sequence drawn.
const MAX_LEN: usize = 24;

/// CI's clean budget, per scheduler: sequences × executions each.
const CLEAN: Budget = Budget {
    sequences: 256,
    iterations: 300,
    seed: SEED,
};

/// Explores `budget.sequences` sequences of the kit's strategy, each for
/// `budget.iterations` executions under `strategy`; panics with the first
/// failure (the sequence, its SPEC ID, how to replay it).
fn clean(strategy: Strategy) {
    let budget = Budget::from_env(CLEAN);
    let started = Instant::now();
    let mut total = Explored::default();
    for (k, ops) in sequences(budget.seed, budget.sequences, MAX_LEN)
        .into_iter()
        .enumerate()
    {
        let seed = budget.seed.wrapping_add(k as u64);
        let replay = literal(&ops);
        let explored = match explore(strategy, seed, budget.iterations, move || {
            run_sequence(&ops, Backend::Clean)
        }) {
            Ok(explored) => explored,
            Err(failure) => panic!(
                "the clean backend failed under the {strategy} scheduler (seed {seed}): {failure}\nsequence {k}:\n{replay}"
            ),
        };
        total += explored;
    }
    println!(
        "clean backend, {strategy} scheduler, seed {:#x}: {} sequences x {} iterations: {total} in {:.1?}",
        budget.seed,
        budget.sequences,
        budget.iterations,
        started.elapsed()
    );
}

#[test]
fn the_clean_backend_passes_under_the_random_scheduler() {
    clean(Strategy::Random);
}

#[test]
fn the_clean_backend_passes_under_pct() {
    clean(Strategy::Pct { depth: 3 });
}

/// Two plain submissions on one lane, each released and waited for: if the
/// second is pushed while the lane's worker, done with the first, is
/// between the critical section that found its queue empty and the one it
/// goes to sleep in, nothing ever runs it.
fn one_after_another() -> Vec<Op> {
    let submit = Op::Submit {
        work: Work::Submit,
        lane: 0,
        fault: false,
    };
    vec![
        submit,
        Op::Release { sub: 0 },
        Op::Wait { sub: 0 },
        submit,
        Op::Release { sub: 1 },
        Op::Wait { sub: 1 },
    ]
}

/// Whether `message` names `id` as the invariant it violates.
fn names(message: &str, id: &str) -> bool {
    message.starts_with(&format!("{id}:"))
}

/// The planted lost wake-up (`CpuDevice::with_planted_race`): the second
/// submission is queued while the worker, done with the first, is between
/// the critical section that found its queue empty and the one it goes to
/// sleep in, so the worker never runs it and rank 0's `wait()` never
/// returns. Shuttle reports the deadlock; it is blamed on the `wait`
/// (EXC-4, the kit's watchdog's verdict on a hung `wait`). The clean backend
/// passes the same budget. (The kit's model observes every submission
/// through its instruments after every step: more scheduling points per
/// execution than a bare workload, over which PCT spreads its priority
/// changes, so the budget leaves room: the seed finds it near execution
/// 950.)
#[test]
fn pct_finds_the_planted_lost_wakeup() {
    const ITERATIONS: usize = 3_000;
    let started = Instant::now();
    let clean = explore(Strategy::Pct { depth: 3 }, SEED, ITERATIONS, || {
        run_sequence(&one_after_another(), Backend::Clean)
    });
    if let Err(failure) = clean {
        panic!("the clean backend failed: {failure}");
    }
    let failure =
        match explore_expecting_failure(Strategy::Pct { depth: 3 }, SEED, ITERATIONS, || {
            run_sequence(&one_after_another(), Backend::PlantedRace)
        }) {
            Ok(explored) => panic!("PCT missed the planted race: {explored}"),
            Err(failure) => failure,
        };
    assert!(
        names(&failure.message, "EXC-4") && failure.message.contains("deadlock"),
        "the failure is not a hung wait blamed on EXC-4: {failure}"
    );
    println!(
        "planted lost wake-up, PCT (depth 3), seed {SEED:#x}: found in execution {} of at most {ITERATIONS} ({:.1?}): {}",
        failure.explored.executions,
        started.elapsed(),
        failure.message.lines().next().unwrap_or_default()
    );
}

/// The random workload finds the planted race too: sequences of the kit's
/// strategy, explored in turn under the random scheduler until one fails.
/// Work the worker never runs is blamed on what exposes it: a `wait` or
/// the final drain's (EXC-4), a `wait_bounded(Duration::MAX)` (CAN-8), or,
/// for work nobody waits for (dropped or quarantined), resources never
/// released (RET-7).
#[test]
fn random_sequences_find_the_planted_lost_wakeup() {
    const SEQUENCES: usize = 64;
    const ITERATIONS: usize = 40;
    let started = Instant::now();
    let mut executions = 0;
    for (k, ops) in sequences(SEED, SEQUENCES, MAX_LEN).into_iter().enumerate() {
        let replay = literal(&ops);
        let seed = SEED.wrapping_add(k as u64);
        match explore_expecting_failure(Strategy::Random, seed, ITERATIONS, move || {
            run_sequence(&ops, Backend::PlantedRace)
        }) {
            Ok(explored) => executions += explored.executions,
            Err(failure) => {
                executions += failure.explored.executions;
                assert!(
                    ["EXC-4", "CAN-8", "RET-7"]
                        .iter()
                        .any(|id| names(&failure.message, id)),
                    "the failure names none of EXC-4, CAN-8, RET-7: {failure}\nsequence:\n{replay}"
                );
                println!(
                    "planted lost wake-up, random scheduler, seed {SEED:#x}: found in sequence {k} after {executions} executions in all ({:.1?}): {}",
                    started.elapsed(),
                    failure.message.lines().next().unwrap_or_default()
                );
                return;
            }
        }
    }
    panic!("{SEQUENCES} sequences x {ITERATIONS} executions missed the planted race");
}

/// The kit's planted defects the sequences reach, and the SPEC ID each
/// breaks: the kit's model names it. (The others need real time, e.g. a
/// blocking `is_complete`, or cases the sequences do not make.)
const DEFECTS: &[(Defect, &str)] = &[
    (Defect::LocalWorkDropsInputs, "RET-1"),
    (Defect::CollectiveDropsResources, "RET-3"),
    (Defect::DropReleasesPending, "RET-4"),
    (Defect::OutputNotRetained, "RET-5"),
    (Defect::RetainDropsEarly, "RET-6"),
    (Defect::LeakRetained, "RET-7"),
    (Defect::EarlyCompletion, "EXC-2"),
    (Defect::NonMonotonicCompletion, "EXC-3"),
    (Defect::WaitForDevice, "EXC-4"),
    (Defect::StaleCompletionQuery, "EXC-5"),
    (Defect::NonStickyError, "EXC-6"),
    (Defect::ErrorReleases, "EXC-7"),
    (Defect::ReleasableEarly, "EXC-8"),
    (Defect::ReleasableAfterDeadline, "EXC-8"),
    (Defect::CompletedAtDeadline, "CAN-1"),
    (Defect::EarlyDeadline, "CAN-2"),
    (Defect::WrongCancellationMode, "CAN-3"),
    (Defect::NativeCancelErrors, "CAN-4"),
    (Defect::NativeCancelNoTeardown, "CAN-5"),
    (Defect::QuarantineDropsLive, "CAN-6"),
    (Defect::ErrorDropsLive, "CAN-7"),
    (Defect::DeadlineOverflow, "CAN-8"),
    (Defect::FailedIsCompleted, "CAN-9"),
    (Defect::OrderAfterIgnored, "SUB-3"),
    (Defect::SumSkipsLastMember, "SUM-1"),
    (Defect::GatherReversed, "GAT-1"),
    (Defect::UnevenCountsAsElements, "GAT-2"),
    (Defect::AllToAllZeroSkips, "A2A-1"),
    (Defect::PointToPointReversed, "P2P-1"),
    (Defect::SkipHeaderCheck, "P2P-2"),
    (Defect::SeparateHeaderMessage, "P2P-3"),
    (Defect::BroadcastSums, "BRD-1"),
    (Defect::BroadcastRootWraps, "BRD-2"),
    (Defect::BarrierEarly, "BAR-1"),
    (Defect::AgreementLocal, "AGR-1"),
];

/// Searches for a failing sequence on `defect` as the kit's own mutant test
/// does
/// (`tests/sequences.rs`): proptest draws sequences from the kit's strategy,
/// each explored for a few executions under the random scheduler (one seed
/// for all, so a sequence always fails the same way), and shrinks the first
/// that fails; the shrunk sequence and its failure.
fn shrunk_failure(defect: Defect) -> Option<(Sequence, Failure)> {
    const SEQUENCES: u32 = 4096;
    const ITERATIONS: usize = 4;
    let backend = Backend::Defect(defect);
    let explore = |ops: &[Op]| {
        let ops = ops.to_vec();
        explore_expecting_failure(Strategy::Random, SEED, ITERATIONS, move || {
            run_sequence(&ops, backend)
        })
        .err()
    };
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&SEED.to_le_bytes());
    }
    let config = Config {
        cases: SEQUENCES,
        failure_persistence: None,
        max_shrink_iters: 512,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let outcome =
        TestRunner::new_with_rng(config, rng).run(&sequence_strategy(MAX_LEN), |sequence| {
            match explore(&sequence) {
                None => Ok(()),
                Some(failure) => Err(TestCaseError::fail(failure.message)),
            }
        });
    match outcome {
        Err(TestError::Fail(_, sequence)) => explore(&sequence).map(|failure| (sequence, failure)),
        _ => None,
    }
}

/// The workload's checks are sharp: each defect above is found, and its
/// failure, shrunk as the kit's own mutant test shrinks it, names the
/// defect's invariant.
#[test]
fn the_workload_finds_the_kits_planted_defects_by_their_ids() {
    let started = Instant::now();
    let mut missed = Vec::new();
    for &(defect, id) in DEFECTS {
        assert_eq!(
            defect.invariant(),
            id,
            "{defect} breaks {}",
            defect.invariant()
        );
        match shrunk_failure(defect) {
            Some((_, failure)) if names(&failure.message, id) => {}
            Some((sequence, failure)) => {
                missed.push(format!("{defect}: {failure}\nshrunk sequence:\n{sequence}"))
            }
            None => missed.push(format!("{defect}: not found")),
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    println!(
        "{} planted defects found by their SPEC IDs in {:.1?}",
        DEFECTS.len(),
        started.elapsed()
    );
}
