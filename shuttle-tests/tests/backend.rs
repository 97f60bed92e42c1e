//! The whole CPU backend under shuttle: the clean backend passes the
//! sequence workload under the random and PCT schedulers (fixed seeds and
//! iteration counts), and the planted lost wake-up is found.
//!
//! Run with `-- --nocapture` to see what each test explored. The budgets
//! fit CI; `COMMCHECK_SHUTTLE_SEQUENCES`, `COMMCHECK_SHUTTLE_ITERATIONS` and
//! `COMMCHECK_SHUTTLE_SEED` deepen or vary the clean runs (nightly).
#![cfg(commcheck_shuttle)]

use std::time::Instant;

use commcheck::model::{Op, Work};
use commcheck_cpu::Defect;
use commcheck_shuttle_tests::explore::{
    explore, explore_expecting_failure, Budget, Explored, Strategy, SEED,
};
use commcheck_shuttle_tests::world::{literal, run_sequence, sequences, Backend};

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
/// returns. Shuttle
/// reports the deadlock; it is blamed on the `wait` (EXC-4, the kit's
/// watchdog's verdict on a hung `wait`). The clean backend passes the same
/// budget.
#[test]
fn pct_finds_the_planted_lost_wakeup() {
    const ITERATIONS: usize = 500;
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

/// The kit's planted defects the workload reaches, and the SPEC ID each
/// breaks: the driver's checks name it, as the kit's sequence model does.
/// (The others need operations the kit's sequences do not make, e.g.
/// `resources_releasable`, or real time, e.g. a blocking `is_complete`.)
const DEFECTS: &[(Defect, &str)] = &[
    (Defect::LocalWorkDropsInputs, "RET-1"),
    (Defect::CollectiveDropsResources, "RET-3"),
    (Defect::DropReleasesPending, "RET-4"),
    (Defect::OutputNotRetained, "RET-5"),
    (Defect::RetainDropsEarly, "RET-6"),
    (Defect::LeakRetained, "RET-7"),
    (Defect::EarlyCompletion, "EXC-2"),
    (Defect::WaitForDevice, "EXC-4"),
    (Defect::StaleCompletionQuery, "EXC-5"),
    (Defect::NonStickyError, "EXC-6"),
    (Defect::ErrorReleases, "EXC-7"),
    (Defect::CompletedAtDeadline, "CAN-1"),
    (Defect::EarlyDeadline, "CAN-2"),
    (Defect::WrongCancellationMode, "CAN-3"),
    (Defect::NativeCancelErrors, "CAN-4"),
    (Defect::NativeCancelNoTeardown, "CAN-5"),
    (Defect::QuarantineDropsLive, "CAN-6"),
    (Defect::SumSkipsLastMember, "SUM-1"),
    (Defect::BroadcastSums, "BRD-1"),
    (Defect::BarrierEarly, "BAR-1"),
];

/// The workload's checks are sharp: each defect above is found, naming its
/// invariant, within a small random budget.
#[test]
fn the_workload_finds_the_kits_planted_defects_by_their_ids() {
    // Searched in order until the defect is found: a defect found early costs
    // little, one found late (EXC-6 needs a fault and a later observation)
    // needs the budget.
    const SEQUENCES: usize = 512;
    const ITERATIONS: usize = 4;
    let started = Instant::now();
    let sequences = sequences(SEED, SEQUENCES, MAX_LEN);
    let mut missed = Vec::new();
    for &(defect, id) in DEFECTS {
        assert_eq!(
            defect.invariant(),
            id,
            "{defect} breaks {}",
            defect.invariant()
        );
        let found = sequences.iter().enumerate().find_map(|(k, ops)| {
            let ops = ops.clone();
            let seed = SEED.wrapping_add(k as u64);
            explore_expecting_failure(Strategy::Random, seed, ITERATIONS, move || {
                run_sequence(&ops, Backend::Defect(defect))
            })
            .err()
            .map(|failure| (k, failure))
        });
        match found {
            Some((_, failure)) if names(&failure.message, id) => {}
            Some((k, failure)) => missed.push(format!("{defect}: sequence {k}: {failure}")),
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
