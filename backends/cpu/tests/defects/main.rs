//! Every planted `Defect` really misbehaves the way its description says, and
//! the same scenario passes on a correct device.
//!
//! One scenario per defect returns whether the misbehaviour was observed. The
//! table runs every scenario against `CpuDevice::with_defect(d)` (must
//! misbehave) and `CpuDevice::new()` (must not). Every scenario is bounded in
//! time: work a defect makes hang is observed as "still pending after N ms"
//! and then cancelled or released.
//!
//! The scenarios are grouped by SPEC family: [`retention`] (RET),
//! [`completion`] (EXC), [`cancellation`] (CAN), [`submission`] (SUB) and
//! [`operations`] (the operations' invariants); [`support`] holds what they
//! share. The table and the tests that check it are here.

mod cancellation;
#[path = "../common/mod.rs"]
mod common;
mod completion;
mod operations;
mod retention;
mod submission;
mod support;

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuCompletion, CpuDevice, Defect, Phase};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion, Submission};
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend, SumReductionBackend};

use crate::common::*;

use cancellation::*;
use completion::*;
use operations::*;
use retention::*;
use submission::*;
use support::*;

/// One scenario per defect, in `Defect::ALL` (SPEC) order.
const SCENARIOS: &[(Defect, Scenario)] = &[
    (Defect::LocalWorkDropsInputs, local_work_drops_inputs),
    (Defect::ExecutorNotRetained, executor_not_retained),
    (Defect::CollectiveDropsResources, collective_drops_resources),
    (Defect::LargeInputNotRetained, large_input_not_retained),
    (
        Defect::LargeHalfInputNotRetained,
        large_half_input_not_retained,
    ),
    (
        Defect::RendezvousInputNotRetained,
        rendezvous_input_not_retained,
    ),
    (Defect::DropReleasesPending, drop_releases_pending),
    (Defect::OutputNotRetained, output_not_retained),
    (Defect::RetainDropsEarly, retain_drops_early),
    (Defect::LeakRetained, leak_retained),
    (Defect::LocalDepsFenceGroup, local_deps_fence_group),
    (Defect::BlockingIsComplete, blocking_is_complete),
    (Defect::EarlyCompletion, early_completion),
    (Defect::BroadcastRootEarly, broadcast_root_early),
    (Defect::NonMonotonicCompletion, non_monotonic_completion),
    (Defect::WaitForDevice, wait_for_device),
    (Defect::StaleCompletionQuery, stale_completion_query),
    (Defect::NonStickyError, non_sticky_error),
    (Defect::SubmissionClearsError, submission_clears_error),
    (Defect::ErrorReleases, error_releases),
    (Defect::ReleasableEarly, releasable_early),
    (
        Defect::ReleasableRunsDestructors,
        releasable_runs_destructors,
    ),
    (
        Defect::ReleasableAfterDeadline,
        releasable_after_quarantine_deadline,
    ),
    (Defect::ReleasableNeverTrue, releasable_never_true),
    (Defect::EmptyLocalDepsHang, empty_local_deps_hang),
    (Defect::CompletedAtDeadline, completed_at_deadline),
    (Defect::EarlyDeadline, early_deadline),
    (Defect::WrongCancellationMode, wrong_cancellation_mode),
    (Defect::NativeCancelErrors, native_cancel_errors),
    (Defect::RendezvousCancelErrors, rendezvous_cancel_errors),
    (Defect::NativeCancelNoTeardown, native_cancel_no_teardown),
    (Defect::QuarantineDropsLive, quarantine_drops_live),
    (Defect::ErrorDropsLive, error_drops_live),
    (Defect::DeadlineOverflow, deadline_overflow),
    (Defect::FailedIsCompleted, failed_is_completed),
    (Defect::ForkSharesLane, fork_shares_lane),
    (Defect::SubmitSkipsEvaluation, submit_skips_evaluation),
    (Defect::OrderAfterIgnored, order_after_ignored),
    (Defect::SubmitErrorLeavesWork, submit_error_leaves_work),
    (Defect::SumSkipsLastMember, sum_skips_last_member),
    (Defect::LazyLaunch, lazy_launch),
    (Defect::SumTailBlockUntouched, sum_tail_block_untouched),
    (Defect::SumBf16AsF16, sum_bf16_as_f16),
    (Defect::GatherReversed, gather_reversed),
    (Defect::GatherMiddleAxisSwapped, gather_middle_axis_swapped),
    (Defect::GatherByArrival, gather_by_arrival),
    (Defect::UnevenCountsAsElements, uneven_counts_as_elements),
    (Defect::AllToAllZeroSkips, all_to_all_zero_skips),
    (Defect::PointToPointReversed, point_to_point_reversed),
    (Defect::SkipHeaderCheck, skip_header_check),
    (
        Defect::RendezvousSkipsHeaderCheck,
        rendezvous_skips_header_check,
    ),
    (Defect::SeparateHeaderMessage, separate_header_message),
    (Defect::RendezvousSeparateHeader, rendezvous_separate_header),
    (Defect::BroadcastSums, broadcast_sums),
    (Defect::BroadcastRootWraps, broadcast_root_wraps),
    (Defect::BarrierEarly, barrier_early),
    (Defect::AgreementLocal, agreement_local),
    (Defect::AgreementBlocks, agreement_blocks),
];

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// Runs every scenario (in parallel, each on its own device) and returns the
/// defects for which the observation differs from `misbehaves`.
fn mismatches(device: impl Fn(Defect) -> CpuDevice + Sync, misbehaves: bool) -> Vec<String> {
    std::thread::scope(|scope| {
        let runs: Vec<_> = SCENARIOS
            .iter()
            .map(|&(defect, scenario)| {
                let device = device(defect);
                let run = scope.spawn(move || catch_unwind(AssertUnwindSafe(|| scenario(&device))));
                (defect, run)
            })
            .collect();
        runs.into_iter()
            .filter_map(|(defect, run)| {
                let what = defect.description();
                match run.join().expect("scenario thread") {
                    Ok(observed) if observed == misbehaves => None,
                    Ok(true) => Some(format!("{defect}: misbehaved on a correct device ({what})")),
                    Ok(false) => Some(format!("{defect}: misbehaviour not observed ({what})")),
                    Err(panic) => Some(format!(
                        "{defect}: scenario panicked: {}",
                        panic_message(&*panic)
                    )),
                }
            })
            .collect()
    })
}

#[test]
fn every_planted_defect_misbehaves_as_described() {
    let failures = mismatches(CpuDevice::with_defect, true);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn every_scenario_passes_on_a_correct_device() {
    // A correct device in the personality the defect lives on, if any.
    let failures = mismatches(
        |defect| {
            CpuDevice::new()
                .with_personality(defect.personality().unwrap_or_default())
                .expect("a fresh device takes a personality")
        },
        false,
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_scenario_table_covers_every_defect_exactly_once() {
    let table: Vec<Defect> = SCENARIOS.iter().map(|&(defect, _)| defect).collect();
    let unique: BTreeSet<Defect> = table.iter().copied().collect();
    assert_eq!(unique.len(), table.len(), "a defect has two scenarios");
    let all: BTreeSet<Defect> = Defect::ALL.iter().copied().collect();
    let missing: Vec<_> = all.difference(&unique).collect();
    assert!(
        missing.is_empty(),
        "defects without a scenario: {missing:?}"
    );
    assert_eq!(table, Defect::ALL, "the table is not in Defect::ALL order");
    for defect in Defect::ALL {
        assert!(
            !defect.description().is_empty() && defect.invariant().contains('-'),
            "{defect}"
        );
    }
}

#[test]
fn native_cancel_releases_everything_before_returning() {
    let d = CpuDevice::new();
    let e = d.executor();
    let mut late = 0;
    for _ in 0..200 {
        let hold = e.hold();
        let t = tensor(&d, &[1.0], &[1]);
        let id = t.storage_id();
        let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
        drop(t);
        let observer = sub.completion.observer();
        assert!(eventually(|| observer.observe().phase == Phase::Running));
        let outcome = sub
            .completion
            .wait_bounded(policy(Duration::from_millis(1), NATIVE));
        assert_eq!(
            outcome,
            Ok(BoundedCompletionOutcome::DeadlineExceeded {
                cancellation: NATIVE
            })
        );
        if d.storage_live(id) || d.ledger().pending_work != 0 {
            late += 1;
        }
        drop(hold);
        assert!(eventually(|| d.ledger().pending_work == 0));
    }
    assert_eq!(
        late, 0,
        "teardown reported finished while resources were still held"
    );
}

/// The NativeCancel half of `ReleasableAfterDeadline`: a clone probed from
/// another thread during the teardown. Whether the probe runs inside that
/// window is up to the scheduler, so it is a rate, run by the nightly job
/// (`cargo test -p commcheck-cpu --test defects -- --ignored rate`): a
/// correct device never shows it, the defective one at least once in 20.
/// The QuarantineUntilComplete half is deterministic, and is the defect's
/// scenario in the table.
#[test]
#[ignore = "a rate over scheduler-dependent tries: the nightly job runs it"]
fn releasable_during_native_teardown_rate() {
    const TRIES: usize = 20;
    let rate = |device: &CpuDevice| {
        (0..TRIES)
            .filter(|_| releasable_during_native_teardown(device))
            .count()
    };
    let correct = rate(&CpuDevice::new());
    let defective = rate(&CpuDevice::with_defect(Defect::ReleasableAfterDeadline));
    println!(
        "releasable during a NativeCancel teardown: {defective} of {TRIES} tries with the defect, {correct} of \
         {TRIES} on a correct device"
    );
    assert_eq!(correct, 0, "a correct device reported live work releasable");
    assert!(defective > 0, "no try caught the defect's window");
}

#[test]
fn deferred_launch_happens_once_from_whichever_clone_is_observed() {
    let d = CpuDevice::with_defect(Defect::LazyLaunch);
    let e = d.executor();
    let group = single(&d);
    let Submission { output, completion } =
        CpuBackend::all_reduce_sum(tensor(&d, &[2.0], &[1]), &group, &e).unwrap();
    let clone = completion.clone();
    // The launch slot survives dropping the handle it was created with.
    drop(completion);
    assert!(!clone.observer().wait_terminal(Duration::from_millis(20)));
    assert_eq!(finish(clone.clone()), COMPLETED);
    assert_eq!(output.read_materialised(), Some(vec![2.0]));
    assert!(clone.is_complete().unwrap());
}

/// `resources_releasable()` of a completion and of its observer, which must agree.
fn both_releasable(completion: &CpuCompletion, expected: bool) -> (bool, bool) {
    let observer = completion.observer();
    if expected {
        // `false` is allowed under contention, so a `true` is waited for.
        (
            eventually_within(SHORT, || completion.resources_releasable()),
            eventually_within(SHORT, || observer.resources_releasable()),
        )
    } else {
        (
            completion.resources_releasable(),
            observer.resources_releasable(),
        )
    }
}

#[test]
fn observers_answer_resources_releasable_like_their_completion() {
    let devices = [
        None,
        Some(Defect::ReleasableNeverTrue),
        Some(Defect::ReleasableEarly),
        Some(Defect::ReleasableAfterDeadline),
        Some(Defect::ReleasableRunsDestructors),
    ];
    for defect in devices {
        let d = defect.map_or_else(CpuDevice::new, CpuDevice::with_defect);
        let e = d.executor();
        // Live work whose error was published (the ReleasableEarly case).
        let hold = e.hold();
        e.inject_fault();
        let c = CpuBackend::submit(&e, []).unwrap();
        assert!(eventually(|| c.observer().observe().error.is_some()));
        let early = defect == Some(Defect::ReleasableEarly);
        assert_eq!(both_releasable(&c, early), (early, early), "{defect:?}");
        drop(hold);
        let _ = finish(c);
        // Live work after another handle's deadline (the ReleasableAfterDeadline case).
        let hold = e.hold();
        let c = CpuBackend::submit(&e, []).unwrap();
        let probe = c.clone();
        let outcome = c.wait_bounded(policy(Duration::from_millis(5), QUARANTINE));
        assert!(outcome.is_ok(), "{outcome:?}");
        let late = defect == Some(Defect::ReleasableAfterDeadline);
        assert_eq!(both_releasable(&probe, late), (late, late), "{defect:?}");
        drop(hold);
        assert!(probe.observer().wait_terminal(BOUND));
        // Completed work (the ReleasableNeverTrue case).
        let c = CpuBackend::submit(&e, []).unwrap();
        c.wait().unwrap();
        let done = defect != Some(Defect::ReleasableNeverTrue);
        assert_eq!(both_releasable(&c, done), (done, done), "{defect:?}");
    }
}

#[test]
fn only_the_completion_runs_the_destructors_kept_by_the_defect() {
    let d = CpuDevice::with_defect(Defect::ReleasableRunsDestructors);
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&e, &c, flag).unwrap();
    drop(hold);
    c.wait().unwrap();
    let observer = c.observer();
    assert!(eventually(|| observer.resources_releasable()));
    assert!(
        !dropped.load(Ordering::SeqCst),
        "an observer's answer ran the kept destructors"
    );
    assert!(eventually(|| c.resources_releasable()));
    assert!(dropped.load(Ordering::SeqCst));
}
