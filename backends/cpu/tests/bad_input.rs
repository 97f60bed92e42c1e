//! Bad input: every misuse yields a `CpuError` that names what was expected
//! and what was got, never a panic or a hang (all waits are bounded), and a
//! failing rank never corrupts another rank.

mod common;

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError, CpuTensor};
use common::*;
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion};
use eredu_runtime::backend::{
    BroadcastBackend, EvenGatherBackend, PointToPointBackend, SubmissionBackend,
    SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, CommunicationRouteId};

/// Asserts that `error`'s message contains every fragment.
#[track_caller]
fn names(error: &CpuError, fragments: &[&str]) {
    let message = error.to_string();
    for fragment in fragments {
        assert!(
            message.contains(fragment),
            "{message:?} does not mention {fragment:?}"
        );
    }
}

/// The submission-time error of `result` (a submission that must be refused).
#[track_caller]
fn refused<T: std::fmt::Debug>(result: Result<T, CpuError>) -> CpuError {
    match result {
        Err(error @ CpuError::InvalidArgument { .. }) => error,
        other => panic!("expected a refused submission, got {other:?}"),
    }
}

fn peer_counts(send: &[usize], receive: &[usize]) -> CommunicationPeerCounts {
    CommunicationPeerCounts::new(send.to_vec(), receive.to_vec(), send.len()).unwrap()
}

/// A sum of a fresh group on `device` (checks the device still works).
fn fresh_sum_works(device: &CpuDevice, n: usize) {
    let results = on_ranks(device, n, |rank, group, executor| {
        read(&settle(
            CpuBackend::all_reduce_sum(ranked(device, rank, &[2]), &group, &executor).unwrap(),
        ))
    });
    let expected: Vec<f32> = (0..2).map(|i| (0..n).map(|r| value(r, i)).sum()).collect();
    assert_eq!(results, vec![expected; n]);
}

// ---------------------------------------------------------------- disagreeing members

#[test]
fn a_shape_mismatch_in_all_reduce_sum_fails_every_member_and_names_the_member() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 3, |rank, group, executor| {
        let shape: &[i32] = if rank == 2 { &[3] } else { &[2] };
        let sub =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        let output = sub.output.clone();
        let error = failure(sub.completion);
        // The output never becomes a value.
        assert!(output.read_materialised().is_none());
        assert!(output.values().is_err());
        error
    });
    for error in &errors {
        assert!(
            matches!(
                error,
                CpuError::MemberMismatch {
                    operation: "all_reduce_sum",
                    ..
                }
            ),
            "{error:?}"
        );
        names(
            error,
            &[
                "all_reduce_sum",
                "members disagree",
                "submitted shape",
                "[3]",
                "[2]",
            ],
        );
    }
    // The same group (every member departed) and a fresh group both still work.
    fresh_sum_works(&device, 3);
}

#[test]
fn every_member_names_the_odd_member_out_and_quotes_real_shapes() {
    let device = CpuDevice::new();
    let errors = on_ranks(&device, 3, |rank, group, executor| {
        let shape: &[i32] = if rank == 2 { &[3] } else { &[2] };
        let sub =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        failure(sub.completion)
    });
    for (rank, error) in errors.iter().enumerate() {
        assert!(
            matches!(error, CpuError::MemberMismatch { member: 2, .. }),
            "rank {rank}: {error}"
        );
        // Member 0 submitted [2]; no message may claim it submitted [3].
        assert!(
            !error.to_string().contains("member 0 submitted [3]"),
            "rank {rank}: {error}"
        );
    }
}

#[test]
fn a_shape_mismatch_in_a_sum_wave_fails_only_that_collective() {
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let shape: &[i32] = if rank == 1 { &[1] } else { &[2] };
        let bad =
            CpuBackend::all_reduce_sum(ranked(&device, rank, shape), &group, &executor).unwrap();
        let good =
            CpuBackend::all_reduce_sum(ranked(&device, rank, &[2]), &group, &executor).unwrap();
        let error = failure(bad.completion);
        (error, read(&settle(good)))
    });
    for (error, good) in results {
        assert!(
            matches!(error, CpuError::MemberMismatch { .. }),
            "{error:?}"
        );
        assert_eq!(good, [1000.0, 1002.0]);
    }
}

// ---------------------------------------------------------------- counts

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

// ---------------------------------------------------------------- groups and routes

#[test]
fn join_group_refuses_a_member_that_declares_another_size() {
    let device = CpuDevice::new();
    let first = device.join_group("tp", 2, 0).unwrap();
    let error = refused(device.join_group("tp", 3, 1));
    names(
        &error,
        &[
            "join_group",
            "group \"tp\" of 2 members",
            "a member that declares 3 members",
        ],
    );
    let error = refused(device.join_group("tp", 2, 2));
    names(&error, &["a member index below 2", "member 2"]);
    let error = refused(device.join_group("tp", 2, 0));
    names(&error, &["member 0 to join once", "a second join"]);
    let error = refused(device.join_group("empty", 0, 0));
    names(&error, &["at least one member", "a group of 0 members"]);
    // The correctly sized member can still join and the group works.
    let second = device.join_group("tp", 2, 1).unwrap();
    assert_eq!((first.size(), second.size(), second.member()), (2, 2, 1));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = [first, second]
            .into_iter()
            .enumerate()
            .map(|(rank, group)| {
                let device = device.clone();
                scope.spawn(move || {
                    let executor = device.executor();
                    let input = ranked(&device, rank, &[1]);
                    read(&settle(
                        CpuBackend::all_reduce_sum(input, &group, &executor).unwrap(),
                    ))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(results, vec![vec![1000.0]; 2]);
}

#[test]
fn a_rank_that_is_not_an_endpoint_cannot_open_the_route() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(5);
    let error = refused(device.route(id, 0, 1, 2));
    names(
        &error,
        &[
            "route",
            "rank 0 (source) or 1 (destination) of route 5",
            "got rank 2",
        ],
    );
    let error = refused(device.route(id, 3, 3, 3));
    names(
        &error,
        &[
            "distinct source and destination ranks",
            "source 3 and destination 3",
        ],
    );
}

#[test]
fn disagreeing_route_endpoints_are_refused() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(11);
    let source = device.route(id, 0, 1, 0).unwrap();
    let error = refused(device.route(id, 1, 0, 1));
    names(
        &error,
        &[
            "route 11 from rank 0 to rank 1",
            "a rank declaring it from 1 to 0",
        ],
    );
    let error = refused(device.route(id, 0, 2, 2));
    names(&error, &["route 11 from rank 0 to rank 1", "from 0 to 2"]);
    // The agreeing endpoint still opens.
    assert!(!device.route(id, 0, 1, 1).unwrap().is_source());
    drop(source);
}

// ---------------------------------------------------------------- point to point

const SCHEMA: &str = "commcheck.bad_input";

fn nan(device: &CpuDevice, shape: &[i32]) -> CpuTensor {
    let len: usize = shape.iter().map(|&d| d as usize).product();
    tensor(device, &vec![f32::NAN; len], shape)
}

/// Rank 0 sends `sent` (framed with `sent_roles`); rank 1 receives into
/// placeholders of `shapes` framed with `expected_roles`. Returns the
/// receiver's completion and outputs, after the sender completed.
fn transfer(
    device: &CpuDevice,
    id: CommunicationRouteId,
    sent_roles: &[(&str, &[usize])],
    expected_roles: &[(&str, &[usize])],
    shapes: &[&[i32]],
) -> (
    commcheck_cpu::CpuCompletion,
    Vec<CpuTensor>,
    commcheck_cpu::CpuRoute,
) {
    let source = device.route(id, 0, 1, 0).unwrap();
    let destination = device.route(id, 0, 1, 1).unwrap();
    let sent: Vec<_> = sent_roles
        .iter()
        .enumerate()
        .map(|(k, (_, shape))| {
            ranked(
                device,
                k,
                &shape.iter().map(|&d| d as i32).collect::<Vec<_>>(),
            )
        })
        .collect();
    let send = CpuBackend::send_receive(
        framed(SCHEMA, id, sent_roles, sent),
        &source,
        &device.executor(),
    )
    .unwrap();
    let placeholders = shapes.iter().map(|shape| nan(device, shape)).collect();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, expected_roles, placeholders),
        &destination,
        &device.executor(),
    )
    .unwrap();
    settle(send);
    (receive.completion, receive.output, destination)
}

#[test]
fn a_header_mismatch_on_receive_is_a_sticky_error_naming_route_and_index() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(42);
    let (completion, outputs, route) = transfer(
        &device,
        id,
        &[("hidden", &[2]), ("mask", &[3])],
        &[("hidden", &[2]), ("gate", &[3])],
        &[&[2], &[3]],
    );
    let observer = completion.observer();
    assert!(
        observer.wait_terminal(Duration::from_secs(5)),
        "receive never finished"
    );
    for _ in 0..3 {
        let error = completion.is_complete().unwrap_err();
        assert!(
            matches!(
                error,
                CpuError::HeaderMismatch {
                    route: 42,
                    index: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        names(
            &error,
            &[
                "route 42",
                "header of value 1 differs",
                "expected",
                "received",
            ],
        );
        assert!(completion.wait().is_err());
    }
    let error = failure(completion);
    assert!(
        matches!(
            error,
            CpuError::HeaderMismatch {
                route: 42,
                index: 1,
                ..
            }
        ),
        "{error:?}"
    );
    for output in outputs {
        assert!(output.read_materialised().is_none());
        assert!(output.values().is_err());
    }
    // One message went over the wire; a later correct bundle on the route still arrives.
    assert_eq!(route.wire_log().len(), 1);
    let roles: [(&str, &[usize]); 1] = [("hidden", &[2])];
    let send = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![ranked(&device, 5, &[2])]),
        &device.route(id, 0, 1, 0).unwrap(),
        &device.executor(),
    )
    .unwrap();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![nan(&device, &[2])]),
        &route,
        &device.executor(),
    )
    .unwrap();
    settle(send);
    assert_eq!(read(&settle(receive)[0]), [5000.0, 5001.0]);
}

#[test]
fn a_header_from_another_route_is_a_mismatch() {
    // The sender frames for route 1 but sends on route 2.
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(2);
    let source = device.route(id, 0, 1, 0).unwrap();
    let destination = device.route(id, 0, 1, 1).unwrap();
    let roles: [(&str, &[usize]); 1] = [("hidden", &[2])];
    let wrong = framed(
        SCHEMA,
        CommunicationRouteId::new(1),
        &roles,
        vec![ranked(&device, 0, &[2])],
    );
    settle(CpuBackend::send_receive(wrong, &source, &device.executor()).unwrap());
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, &roles, vec![nan(&device, &[2])]),
        &destination,
        &device.executor(),
    )
    .unwrap();
    let error = failure(receive.completion);
    assert!(
        matches!(
            error,
            CpuError::HeaderMismatch {
                route: 2,
                index: 0,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_received_shape_that_differs_from_the_placeholder_is_an_error() {
    let device = CpuDevice::new();
    let (completion, _, _) = transfer(
        &device,
        CommunicationRouteId::new(3),
        &[("hidden", &[2, 3])],
        &[("hidden", &[2, 3])],
        &[&[3, 2]],
    );
    let error = failure(completion);
    assert!(
        matches!(error, CpuError::InvalidArgument { .. }),
        "{error:?}"
    );
    names(
        &error,
        &["value 0 of shape [3, 2] on route 3", "got shape [2, 3]"],
    );
}

#[test]
fn a_bundle_of_another_length_is_an_error() {
    let device = CpuDevice::new();
    let (completion, _, _) = transfer(
        &device,
        CommunicationRouteId::new(4),
        &[("hidden", &[2]), ("mask", &[1])],
        &[("hidden", &[2])],
        &[&[2]],
    );
    let error = failure(completion);
    names(&error, &["a bundle of 1 values on route 4", "got 2 values"]);
}

// ---------------------------------------------------------------- isolation

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
