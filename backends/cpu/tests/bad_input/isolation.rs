//! A failing or refused collective leaves the device and its groups
//! usable: fresh groups still work, and refused or cancelled submissions
//! never desynchronise a group's members.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome};
use eredu_runtime::backend::{
    BroadcastBackend, EvenGatherBackend, SubmissionBackend, SumReductionBackend,
};

use crate::common::*;
use crate::{fresh_sum_works, names, refused};

#[test]
fn a_failed_collective_does_not_corrupt_a_fresh_group_on_the_same_device() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 2, |rank, group, executor| {
        if rank == 1 {
            executor.inject_fault();
        }
        let sub =
            CpuBackend::all_reduce_sum(ranked(&device, rank, &[2]), &group, &executor).unwrap();
        failure(sub.completion)
    });
    assert!(
        matches!(errors[1], CpuError::InjectedFault { .. }),
        "{:?}",
        errors[1]
    );
    assert!(
        matches!(errors[0], CpuError::PeerFailed { member: 1, .. }),
        "{:?}",
        errors[0]
    );
    names(&errors[0], &["member 1 failed", "injected fault"]);
    fresh_sum_works(&device, 2);
    fresh_sum_works(&device, 4);
    assert!(eventually(|| device.ledger().pending_work == 0));
}

#[test]
fn a_refused_collective_submission_does_not_desynchronise_the_group() {
    // Rank 0's first submission is refused; then both ranks sum. The
    // refusal queued nothing, so both must meet in the same collective.
    let device = CpuDevice::new();
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        if rank == 0 {
            let error = refused(CpuBackend::broadcast(
                ranked(&device, 0, &[2]),
                9,
                &group,
                &executor,
            ));
            names(&error, &["root 9"]);
            go.send(()).unwrap();
        } else {
            wait_go.lock().unwrap().recv().unwrap();
        }
        let sum =
            CpuBackend::all_reduce_sum(ranked(&device, rank, &[2]), &group, &executor).unwrap();
        sum.wait_bounded(policy(Duration::from_secs(2), NATIVE))
            .map(|outcome| format!("{outcome:?}"))
    });
    for result in results {
        assert!(
            result.as_deref().is_ok_and(|s| s.starts_with("Completed")),
            "{result:?}"
        );
    }
}

#[test]
fn a_collective_refused_by_the_executor_does_not_desynchronise_the_group() {
    let device = CpuDevice::new();
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        if rank == 0 {
            executor.fail_next_submission();
            let refused = CpuBackend::all_reduce_sum(ranked(&device, 0, &[2]), &group, &executor);
            assert!(
                matches!(refused, Err(CpuError::InjectedFault { .. })),
                "{refused:?}"
            );
            go.send(()).unwrap();
        } else {
            wait_go.lock().unwrap().recv().unwrap();
        }
        let sum =
            CpuBackend::all_reduce_sum(ranked(&device, rank, &[2]), &group, &executor).unwrap();
        sum.completion
            .wait_bounded(policy(Duration::from_secs(1), NATIVE))
            .map(|outcome| outcome == BoundedCompletionOutcome::Completed)
    });
    assert_eq!(results, vec![Ok(true), Ok(true)]);
}

#[test]
fn a_collective_cancelled_before_its_body_ran_fails_its_peers() {
    for queued in [false, true] {
        let device = CpuDevice::new();
        let results = on_ranks(&device, 2, |rank, group, executor| {
            let input = ranked(&device, rank, &[2]);
            if rank == 0 {
                let hold = executor.hold();
                // Started and held, or queued behind held local work.
                let ahead = queued.then(|| CpuBackend::submit(&executor, []).unwrap());
                let sum = CpuBackend::all_reduce_sum(input, &group, &executor).unwrap();
                let outcome = sum
                    .completion
                    .wait_bounded(policy(Duration::from_millis(20), NATIVE));
                drop((hold, ahead));
                format!("{outcome:?}")
            } else {
                std::thread::sleep(Duration::from_millis(50));
                let sum = CpuBackend::all_reduce_sum(input, &group, &executor).unwrap();
                format!(
                    "{:?}",
                    sum.completion
                        .wait_bounded(policy(Duration::from_secs(1), NATIVE))
                )
            }
        });
        assert!(
            results[0].contains("NativeCancel"),
            "queued {queued}: {results:?}"
        );
        assert!(
            results[1].starts_with("Err(PeerFailed"),
            "queued {queued}: {results:?}"
        );
    }
}

#[test]
fn members_running_different_collectives_fail() {
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let input = ranked(&device, rank, &[2]);
        let sub = if rank == 0 {
            CpuBackend::all_reduce_sum(input, &group, &executor).unwrap()
        } else {
            CpuBackend::all_gather_even(input, 0, &group, &executor).unwrap()
        };
        sub.completion
            .wait_bounded(policy(Duration::from_secs(2), NATIVE))
    });
    assert!(results.iter().all(Result::is_err), "{results:?}");
}
