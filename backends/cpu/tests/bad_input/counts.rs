//! Counts, axes and roots that do not fit: refused at submission when the
//! member alone can tell, otherwise a failure on every member naming the
//! one whose counts disagree.

use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome};
use eredu_runtime::backend::{
    BroadcastBackend, EvenGatherBackend, SumReductionBackend, UnevenGatherBackend,
    VariableAllToAllBackend,
};

use crate::common::*;
use crate::{fresh_sum_works, names, peer_counts, refused};

#[test]
fn counts_whose_length_is_not_the_group_size_are_refused() {
    let device = CpuDevice::new();
    let group = device.group(2).unwrap().remove(0);
    let executor = device.executor();
    let error = refused(CpuBackend::all_gather_uneven(
        ranked(&device, 0, &[2, 2]),
        &[2, 1, 1],
        0,
        &group,
        &executor,
    ));
    names(
        &error,
        &["all_gather_uneven", "one count per member (2)", "3 counts"],
    );

    let error = refused(CpuBackend::variable_all_to_all(
        ranked(&device, 0, &[3]),
        &peer_counts(&[1, 1, 1], &[1, 1, 1]),
        0,
        &group,
        &executor,
    ));
    names(
        &error,
        &[
            "variable_all_to_all",
            "expected counts for 2 peers",
            "got counts for 3 peers",
        ],
    );
    // Nothing was queued: the device is unaffected.
    assert_eq!(device.ledger().pending_work, 0);
    drop(group);
    fresh_sum_works(&device, 2);
}

#[test]
fn an_uneven_count_that_differs_from_the_own_extent_is_refused() {
    let device = CpuDevice::new();
    let group = device.group(2).unwrap().remove(1);
    let executor = device.executor();
    let error = refused(CpuBackend::all_gather_uneven(
        ranked(&device, 1, &[2, 3]),
        &[2, 1],
        0,
        &group,
        &executor,
    ));
    names(
        &error,
        &["member 1's count 1", "extent along axis 0", "got extent 2"],
    );
    // Middle axis too.
    let error = refused(CpuBackend::all_gather_uneven(
        ranked(&device, 1, &[2, 3, 1]),
        &[3, 0],
        1,
        &group,
        &executor,
    ));
    names(&error, &["member 1's count 0", "axis 1", "got extent 3"]);
}

#[test]
fn disagreeing_uneven_counts_fail_every_member_naming_the_member() {
    // Rank 0 claims member 1 holds 1 row; member 1 really holds 2. Whichever
    // rank arrives last, every member fails, and the message names member 1.
    for late in [0, 1] {
        let device = CpuDevice::new();
        let results = on_ranks(&device, 2, |rank, group, executor| {
            let counts: &[usize] = if rank == 0 { &[1, 1] } else { &[1, 2] };
            let input = ranked(&device, rank, &[counts[rank] as i32, 2]);
            if rank == late {
                std::thread::sleep(Duration::from_millis(20));
            }
            let sub = CpuBackend::all_gather_uneven(input, counts, 0, &group, &executor).unwrap();
            sub.completion
                .wait_bounded(policy(Duration::from_secs(5), NATIVE))
        });
        assert!(
            results.iter().all(Result::is_err),
            "late {late}: {results:?}"
        );
        let error = results[0].clone().unwrap_err();
        assert!(
            matches!(error, CpuError::MemberMismatch { member: 1, .. }),
            "{error:?}"
        );
        names(
            &error,
            &[
                "all_gather_uneven",
                "member 1 submitted axis and counts [0, 1, 2], member 0 submitted [0, 1, 1]",
            ],
        );
    }
}

#[test]
fn members_naming_different_gather_axes_fail_or_get_their_own_layout() {
    for late in [0, 1] {
        let device = CpuDevice::new();
        let results = on_ranks(&device, 2, |rank, group, executor| {
            if rank == late {
                std::thread::sleep(Duration::from_millis(20));
            }
            let input = ranked(&device, rank, &[2, 2]);
            let sub = CpuBackend::all_gather_even(input, rank, &group, &executor).unwrap();
            let output = sub.output.clone();
            match sub
                .completion
                .wait_bounded(policy(Duration::from_secs(5), NATIVE))
            {
                Ok(BoundedCompletionOutcome::Completed) => Some(read(&output)),
                _ => None,
            }
        });
        // Rank 0 gathers on axis 0, rank 1 on axis 1 (when they succeed at all).
        let axis0 = [0.0, 1.0, 2.0, 3.0, 1000.0, 1001.0, 1002.0, 1003.0];
        let axis1 = [0.0, 1.0, 1000.0, 1001.0, 2.0, 3.0, 1002.0, 1003.0];
        for (rank, expected) in [axis0, axis1].iter().enumerate() {
            if let Some(values) = &results[rank] {
                assert_eq!(values, expected, "late {late}: rank {rank}");
            }
        }
    }
}

#[test]
fn all_to_all_send_counts_must_sum_to_the_extent() {
    let device = CpuDevice::new();
    let group = device.group(2).unwrap().remove(0);
    let executor = device.executor();
    let error = refused(CpuBackend::variable_all_to_all(
        ranked(&device, 0, &[3, 2]),
        &peer_counts(&[1, 1], &[1, 1]),
        0,
        &group,
        &executor,
    ));
    names(
        &error,
        &[
            "send counts summing to the input's extent 3 along axis 0",
            "send counts [1, 1] summing to 2",
        ],
    );
}

#[test]
fn all_to_all_send_and_receive_disagreement_fails_every_member_naming_the_sender() {
    // Rank 0 sends 2 to rank 1, which expects only 1.
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let (send, receive): (&[usize], &[usize]) = if rank == 0 {
            (&[1, 2], &[1, 1])
        } else {
            (&[1, 1], &[1, 1])
        };
        let input = ranked(&device, rank, &[send.iter().sum::<usize>() as i32]);
        let sub = CpuBackend::variable_all_to_all(
            input,
            &peer_counts(send, receive),
            0,
            &group,
            &executor,
        )
        .unwrap();
        sub.completion
            .wait_bounded(policy(Duration::from_secs(5), NATIVE))
    });
    assert!(results.iter().all(Result::is_err), "{results:?}");
    for error in results.into_iter().filter_map(Result::err) {
        assert!(
            matches!(error, CpuError::MemberMismatch { member: 0, .. }),
            "{error:?}"
        );
        names(
            &error,
            &[
                "variable_all_to_all",
                "member 0 sends 2 to member 1, which expects 1",
            ],
        );
    }
    fresh_sum_works(&device, 2);
}

#[test]
fn a_broadcast_root_out_of_range_is_refused_at_submission() {
    let device = CpuDevice::new();
    for n in [1, 2] {
        let group = device.group(n).unwrap().remove(0);
        let executor = device.executor();
        for root in [n, n + 7] {
            let error = refused(CpuBackend::broadcast(
                ranked(&device, 0, &[2]),
                root,
                &group,
                &executor,
            ));
            names(
                &error,
                &[
                    "broadcast",
                    &format!("below the group size {n}"),
                    &format!("got root {root}"),
                ],
            );
        }
    }
    assert_eq!(device.ledger().pending_work, 0);
}

#[test]
fn broadcast_members_naming_different_roots_all_fail() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 2, |rank, group, executor| {
        let sub =
            CpuBackend::broadcast(ranked(&device, rank, &[2]), rank, &group, &executor).unwrap();
        failure(sub.completion)
    });
    for error in errors {
        assert!(
            matches!(
                error,
                CpuError::MemberMismatch {
                    operation: "broadcast",
                    ..
                }
            ),
            "{error:?}"
        );
        names(
            &error,
            &["member 1 submitted root [1], member 0 submitted [0]"],
        );
    }
}

#[test]
fn an_axis_out_of_range_is_refused_at_submission() {
    let device = CpuDevice::new();
    let group = device.group(1).unwrap().remove(0);
    let executor = device.executor();
    let input = || ranked(&device, 0, &[2, 3]);
    let expected = ["an axis below the input's rank 2", "got axis 2"];
    let error = refused(CpuBackend::all_gather_even(input(), 2, &group, &executor));
    names(&error, &["all_gather_even", expected[0], expected[1]]);
    let error = refused(CpuBackend::all_gather_uneven(
        input(),
        &[2],
        2,
        &group,
        &executor,
    ));
    names(&error, &["all_gather_uneven", expected[0], expected[1]]);
    let counts = peer_counts(&[2], &[2]);
    let error = refused(CpuBackend::variable_all_to_all(
        input(),
        &counts,
        2,
        &group,
        &executor,
    ));
    names(&error, &["variable_all_to_all", expected[0], expected[1]]);
    let error = refused(CpuBackend::all_gather_even(
        input(),
        usize::MAX,
        &group,
        &executor,
    ));
    names(&error, &[&format!("got axis {}", usize::MAX)]);
    // Nothing was queued and the group's sequence is intact.
    assert_eq!(device.ledger().pending_work, 0);
    let sum = settle(CpuBackend::all_reduce_sum(input(), &group, &executor).unwrap());
    assert_eq!(read(&sum), (0..6).map(|i| value(0, i)).collect::<Vec<_>>());
}
