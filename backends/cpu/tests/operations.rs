//! Every communication operation of the CPU backend on 1, 2 and 4 ranks, with
//! exact expected values (SUM-1/2, GAT-1/2, A2A-1, P2P-1/3, BRD-1, BAR-1, AGR-1/2).
//!
//! Inputs are `value(rank, index)`, so every result is exactly representable
//! and the expected values can be written down element by element.

mod common;

use std::sync::{mpsc, Barrier, Mutex};
use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError, CpuTensor, WireMessage};
use common::*;
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Completion};
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, CommunicationRouteId};

const SIZES: [usize; 3] = [1, 2, 4];

/// Row-major concatenation, along one axis, of per-rank blocks of
/// `outer × extents[r] × inner` elements, block `r` holding `value(r, ·)`.
fn concatenated(outer: usize, inner: usize, extents: &[usize]) -> Vec<f32> {
    let mut out = Vec::new();
    for o in 0..outer {
        for (rank, &extent) in extents.iter().enumerate() {
            let run = extent * inner;
            out.extend((o * run..(o + 1) * run).map(|i| value(rank, i)));
        }
    }
    out
}

fn dims(extents: &[usize]) -> Vec<i32> {
    extents.iter().map(|&e| e as i32).collect()
}

// ---------------------------------------------------------------- all_reduce_sum

#[test]
fn all_reduce_sum_is_the_elementwise_sum_over_members() {
    for n in SIZES {
        let device = CpuDevice::new();
        let results = on_ranks(&device, n, |rank, group, executor| {
            let input = ranked(&device, rank, &[2, 3]);
            let sum = settle(CpuBackend::all_reduce_sum(input, &group, &executor).unwrap());
            (sum.dims().to_vec(), read(&sum))
        });
        let expected: Vec<f32> = (0..6).map(|i| (0..n).map(|r| value(r, i)).sum()).collect();
        for (rank, (shape, values)) in results.into_iter().enumerate() {
            assert_eq!(shape, [2, 3], "{n} ranks, rank {rank}");
            assert_eq!(values, expected, "{n} ranks, rank {rank}");
        }
    }
}

#[test]
fn all_reduce_sum_literal_values() {
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let input = ranked(&device, rank, &[3]);
        read(&settle(
            CpuBackend::all_reduce_sum(input, &group, &executor).unwrap(),
        ))
    });
    assert_eq!(results, vec![vec![1000.0, 1002.0, 1004.0]; 2]);
    // A singleton group is the identity.
    let results = on_ranks(&device, 1, |_, group, executor| {
        let input = tensor(&device, &[-1.5, 0.0, 7.25], &[3]);
        read(&settle(
            CpuBackend::all_reduce_sum(input, &group, &executor).unwrap(),
        ))
    });
    assert_eq!(results, vec![vec![-1.5, 0.0, 7.25]]);
}

#[test]
fn a_wave_of_reductions_submitted_before_any_wait_completes_in_any_wait_order() {
    const WAVE: usize = 5;
    for n in [2, 4] {
        let device = CpuDevice::new();
        let results = on_ranks(&device, n, |rank, group, executor| {
            let mut wave: Vec<_> = (0..WAVE)
                .map(|k| {
                    let values: Vec<f32> =
                        (0..3).map(|i| value(rank, i) + 100.0 * k as f32).collect();
                    let input = tensor(&device, &values, &[3]);
                    Some(CpuBackend::all_reduce_sum(input, &group, &executor).unwrap())
                })
                .collect();
            // Rank r waits in an order of its own: rotated by r, reversed on odd ranks.
            let mut order: Vec<usize> = (0..WAVE).map(|k| (k + rank) % WAVE).collect();
            if rank % 2 == 1 {
                order.reverse();
            }
            let mut outputs = vec![Vec::new(); WAVE];
            for k in order {
                outputs[k] = read(&settle(wave[k].take().unwrap()));
            }
            outputs
        });
        for (rank, outputs) in results.into_iter().enumerate() {
            for (k, output) in outputs.into_iter().enumerate() {
                let expected: Vec<f32> = (0..3)
                    .map(|i| (0..n).map(|r| value(r, i)).sum::<f32>() + (n * 100 * k) as f32)
                    .collect();
                assert_eq!(output, expected, "{n} ranks, rank {rank}, wave item {k}");
            }
        }
    }
}

// ---------------------------------------------------------------- gathers

#[test]
fn all_gather_even_concatenates_in_member_order_on_axis_zero() {
    for n in SIZES {
        let device = CpuDevice::new();
        let results = on_ranks(&device, n, |rank, group, executor| {
            let input = ranked(&device, rank, &[2, 3]);
            let out = settle(CpuBackend::all_gather_even(input, 0, &group, &executor).unwrap());
            (out.dims().to_vec(), read(&out))
        });
        for (rank, (shape, values)) in results.into_iter().enumerate() {
            assert_eq!(shape, [2 * n as i32, 3], "{n} ranks, rank {rank}");
            assert_eq!(
                values,
                concatenated(1, 6, &vec![1; n]),
                "{n} ranks, rank {rank}"
            );
        }
    }
}

#[test]
fn all_gather_even_concatenates_in_member_order_on_a_middle_axis() {
    for n in SIZES {
        let device = CpuDevice::new();
        let results = on_ranks(&device, n, |rank, group, executor| {
            let input = ranked(&device, rank, &[2, 2, 3]);
            let out = settle(CpuBackend::all_gather_even(input, 1, &group, &executor).unwrap());
            (out.dims().to_vec(), read(&out))
        });
        for (rank, (shape, values)) in results.into_iter().enumerate() {
            assert_eq!(shape, [2, 2 * n as i32, 3], "{n} ranks, rank {rank}");
            assert_eq!(
                values,
                concatenated(2, 3, &vec![2; n]),
                "{n} ranks, rank {rank}"
            );
        }
    }
}

#[test]
fn all_gather_even_middle_axis_literal_values() {
    let device = CpuDevice::new();
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let input = ranked(&device, rank, &[2, 1, 2]);
        read(&settle(
            CpuBackend::all_gather_even(input, 1, &group, &executor).unwrap(),
        ))
    });
    let expected = vec![0.0, 1.0, 1000.0, 1001.0, 2.0, 3.0, 1002.0, 1003.0];
    assert_eq!(results, vec![expected.clone(), expected]);
}

#[test]
fn all_gather_uneven_takes_counts_as_extents_along_the_axis() {
    let cases: [&[usize]; 4] = [&[3], &[0, 2], &[2, 0], &[1, 3, 0, 2]];
    for counts in cases {
        let n = counts.len();
        let total: usize = counts.iter().sum();
        for axis in [0, 1] {
            let device = CpuDevice::new();
            let results = on_ranks(&device, n, |rank, group, executor| {
                let shape = if axis == 0 {
                    vec![counts[rank] as i32, 2]
                } else {
                    vec![2, counts[rank] as i32, 2]
                };
                let input = ranked(&device, rank, &shape);
                let out = settle(
                    CpuBackend::all_gather_uneven(input, counts, axis, &group, &executor).unwrap(),
                );
                (out.dims().to_vec(), read(&out))
            });
            let (shape, expected) = if axis == 0 {
                (dims(&[total, 2]), concatenated(1, 2, counts))
            } else {
                (dims(&[2, total, 2]), concatenated(2, 2, counts))
            };
            for (rank, result) in results.into_iter().enumerate() {
                assert_eq!(
                    result,
                    (shape.clone(), expected.clone()),
                    "counts {counts:?} axis {axis} rank {rank}"
                );
            }
        }
    }
}

#[test]
fn all_gather_uneven_literal_values() {
    let device = CpuDevice::new();
    let counts = [1, 0, 2];
    let results = on_ranks(&device, 3, |rank, group, executor| {
        let input = ranked(&device, rank, &[counts[rank] as i32]);
        let out =
            settle(CpuBackend::all_gather_uneven(input, &counts, 0, &group, &executor).unwrap());
        (out.dims().to_vec(), read(&out))
    });
    for result in results {
        assert_eq!(result, (vec![3], vec![0.0, 2000.0, 2001.0]));
    }
}

// ---------------------------------------------------------------- all-to-all

/// Expected output of rank `me` of a variable all-to-all along an axis viewed
/// as `outer × extent × inner`, where `send[p][q]` is what p sends to q.
fn all_to_all_expected(send: &[Vec<usize>], me: usize, outer: usize, inner: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for o in 0..outer {
        for (peer, row) in send.iter().enumerate() {
            let extent: usize = row.iter().sum();
            let offset: usize = row[..me].iter().sum();
            for e in offset..offset + row[me] {
                out.extend((0..inner).map(|k| value(peer, (o * extent + e) * inner + k)));
            }
        }
    }
    out
}

#[test]
fn variable_all_to_all_routes_each_slice_to_its_peer() {
    let cases: Vec<Vec<Vec<usize>>> = vec![
        vec![vec![3]],
        vec![vec![1, 2], vec![3, 1]],
        // Member 1 sends and receives nothing.
        vec![vec![2, 0], vec![0, 0]],
        // Member 3 sends and receives nothing; zero counts elsewhere too.
        vec![
            vec![1, 0, 2, 0],
            vec![0, 2, 1, 0],
            vec![3, 1, 0, 0],
            vec![0, 0, 0, 0],
        ],
    ];
    for send in &cases {
        let n = send.len();
        for axis in [0, 1] {
            let device = CpuDevice::new();
            let results = on_ranks(&device, n, |rank, group, executor| {
                let receive: Vec<usize> = send.iter().map(|row| row[rank]).collect();
                let extent: usize = send[rank].iter().sum();
                let counts = CommunicationPeerCounts::new(send[rank].clone(), receive, n).unwrap();
                let shape = if axis == 0 {
                    dims(&[extent, 3])
                } else {
                    dims(&[2, extent, 3])
                };
                let input = ranked(&device, rank, &shape);
                let out = settle(
                    CpuBackend::variable_all_to_all(input, &counts, axis, &group, &executor)
                        .unwrap(),
                );
                (out.dims().to_vec(), read(&out))
            });
            for (rank, (shape, values)) in results.into_iter().enumerate() {
                let received: usize = send.iter().map(|row| row[rank]).sum();
                let (outer, expected_shape) = if axis == 0 {
                    (1, dims(&[received, 3]))
                } else {
                    (2, dims(&[2, received, 3]))
                };
                assert_eq!(
                    shape, expected_shape,
                    "send {send:?} axis {axis} rank {rank}"
                );
                assert_eq!(
                    values,
                    all_to_all_expected(send, rank, outer, 3),
                    "send {send:?} axis {axis} rank {rank}"
                );
            }
        }
    }
}

#[test]
fn variable_all_to_all_literal_values() {
    // Rank 0 holds [0, 1, 2] and sends [1, 2]; rank 1 holds [1000..1004) and sends [3, 1].
    let device = CpuDevice::new();
    let send = [[1usize, 2], [3, 1]];
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let receive = vec![send[0][rank], send[1][rank]];
        let counts = CommunicationPeerCounts::new(send[rank].to_vec(), receive, 2).unwrap();
        let input = ranked(&device, rank, &[send[rank].iter().sum::<usize>() as i32]);
        read(&settle(
            CpuBackend::variable_all_to_all(input, &counts, 0, &group, &executor).unwrap(),
        ))
    });
    assert_eq!(results[0], [0.0, 1000.0, 1001.0, 1002.0]);
    assert_eq!(results[1], [1.0, 2.0, 1003.0]);
}

#[test]
fn an_all_zero_member_still_takes_part_in_the_all_to_all() {
    // Member 1 has nothing to send or receive, yet it must not complete before
    // its peer joined (A2A-1: every member still takes part).
    let device = CpuDevice::new();
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        let (send, receive) = if rank == 0 {
            (vec![2, 0], vec![2, 0])
        } else {
            (vec![0, 0], vec![0, 0])
        };
        let counts = CommunicationPeerCounts::new(send.clone(), receive, 2).unwrap();
        let input = ranked(&device, rank, &[send.iter().sum::<usize>() as i32, 2]);
        if rank == 0 {
            wait_go.lock().unwrap().recv().unwrap();
            let out = settle(
                CpuBackend::variable_all_to_all(input, &counts, 0, &group, &executor).unwrap(),
            );
            (true, out.dims().to_vec(), read(&out))
        } else {
            let sub =
                CpuBackend::variable_all_to_all(input, &counts, 0, &group, &executor).unwrap();
            std::thread::sleep(Duration::from_millis(30));
            let pending = !sub.completion.is_complete().unwrap();
            go.send(()).unwrap();
            let out = settle(sub);
            (pending, out.dims().to_vec(), read(&out))
        }
    });
    assert_eq!(results[0], (true, vec![2, 2], vec![0.0, 1.0, 2.0, 3.0]));
    assert_eq!(
        results[1],
        (true, vec![0, 2], vec![]),
        "the idle member completed without its peer"
    );
}

// ---------------------------------------------------------------- send_receive

const SCHEMA: &str = "commcheck.operations";
const ROLES: [(&str, &[usize]); 2] = [("hidden", &[2, 3]), ("mask", &[4])];

fn bundle(device: &CpuDevice, rank: usize, round: usize) -> Vec<CpuTensor> {
    vec![
        ranked(device, 10 * rank + 2 * round, &[2, 3]),
        ranked(device, 10 * rank + 2 * round + 1, &[4]),
    ]
}

fn bundle_values(rank: usize, round: usize) -> Vec<Vec<f32>> {
    vec![
        (0..6).map(|i| value(10 * rank + 2 * round, i)).collect(),
        (0..4)
            .map(|i| value(10 * rank + 2 * round + 1, i))
            .collect(),
    ]
}

fn placeholders(device: &CpuDevice) -> Vec<CpuTensor> {
    vec![
        tensor(device, &[f32::NAN; 6], &[2, 3]),
        tensor(device, &[f32::INFINITY; 4], &[4]),
    ]
}

fn headers(route: CommunicationRouteId, device: &CpuDevice) -> Vec<Vec<u8>> {
    framed(SCHEMA, route, &ROLES, placeholders(device))
        .iter()
        .map(|v| v.header().to_vec())
        .collect()
}

#[test]
fn send_receive_delivers_the_exact_ordered_bundle_in_one_message_per_send() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(7);
    let opened = Barrier::new(2);
    let results = on_ranks(&device, 2, |rank, _, executor| {
        let route = device.route(id, 0, 1, rank).unwrap();
        assert_eq!(route.is_source(), rank == 0);
        assert_eq!(route.id(), id);
        opened.wait();
        let mut rounds = Vec::new();
        for round in 0..2 {
            let tensors = if rank == 0 {
                bundle(&device, 0, round)
            } else {
                placeholders(&device)
            };
            let values = framed(SCHEMA, id, &ROLES, tensors);
            let out = settle(CpuBackend::send_receive(values, &route, &executor).unwrap());
            let shapes: Vec<Vec<i32>> = out.iter().map(|t| t.dims().to_vec()).collect();
            assert_eq!(shapes, [vec![2, 3], vec![4]], "rank {rank} round {round}");
            rounds.push(out.iter().map(read).collect::<Vec<_>>());
        }
        (rounds, route.wire_log())
    });
    for (rank, (rounds, _)) in results.iter().enumerate() {
        for (round, values) in rounds.iter().enumerate() {
            // The sender's output is what it sent; the receiver's is what arrived.
            assert_eq!(
                values,
                &bundle_values(0, round),
                "rank {rank} round {round}"
            );
        }
    }
    let message = WireMessage {
        headers: headers(id, &device),
        payload_bytes: 4 * (6 + 4),
    };
    for (rank, (_, wire)) in results.iter().enumerate() {
        assert_eq!(
            wire,
            &vec![message.clone(), message.clone()],
            "wire log seen from rank {rank}"
        );
    }
    // The header bytes are exactly `frame_values`' headers, not a synthesized tag.
    assert!(message.headers[0].starts_with(b"EREDUBND"));
    assert_ne!(message.headers[0], message.headers[1]);
}

#[test]
fn send_receive_around_a_ring_of_four_ranks() {
    let n = 4;
    let device = CpuDevice::new();
    let opened = Barrier::new(n);
    let results = on_ranks(&device, n, |rank, _, executor| {
        let next = (rank + 1) % n;
        let prev = (rank + n - 1) % n;
        let out_id = CommunicationRouteId::new(100 + rank as u64);
        let in_id = CommunicationRouteId::new(100 + prev as u64);
        let outgoing = device.route(out_id, rank, next, rank).unwrap();
        let incoming = device.route(in_id, prev, rank, rank).unwrap();
        opened.wait();
        let sent = CpuBackend::send_receive(
            framed(SCHEMA, out_id, &ROLES, bundle(&device, rank, 0)),
            &outgoing,
            &executor,
        )
        .unwrap();
        let received = CpuBackend::send_receive(
            framed(SCHEMA, in_id, &ROLES, placeholders(&device)),
            &incoming,
            &executor,
        )
        .unwrap();
        let sent: Vec<_> = settle(sent).iter().map(read).collect();
        let received: Vec<_> = settle(received).iter().map(read).collect();
        (sent, received, outgoing.wire_log())
    });
    for (rank, (sent, received, wire)) in results.into_iter().enumerate() {
        let prev = (rank + n - 1) % n;
        assert_eq!(sent, bundle_values(rank, 0), "rank {rank} sent");
        assert_eq!(received, bundle_values(prev, 0), "rank {rank} received");
        let id = CommunicationRouteId::new(100 + rank as u64);
        assert_eq!(
            wire,
            vec![WireMessage {
                headers: headers(id, &device),
                payload_bytes: 40
            }],
            "wire log of route {rank}"
        );
    }
}

#[test]
fn a_bundle_sent_before_the_destination_opened_the_route_is_still_delivered() {
    let device = CpuDevice::new();
    let executor = device.executor();
    let id = CommunicationRouteId::new(9);
    {
        let source = device.route(id, 0, 1, 0).unwrap();
        let values = framed(SCHEMA, id, &ROLES, bundle(&device, 0, 0));
        settle(CpuBackend::send_receive(values, &source, &executor).unwrap());
    }
    let destination = device.route(id, 0, 1, 1).unwrap();
    let values = framed(SCHEMA, id, &ROLES, placeholders(&device));
    let sub = CpuBackend::send_receive(values, &destination, &device.executor()).unwrap();
    let outcome = sub
        .completion
        .wait_bounded(policy(Duration::from_secs(1), NATIVE));
    assert_eq!(
        outcome,
        Ok(BoundedCompletionOutcome::Completed),
        "the bundle never arrived"
    );
    assert_eq!(
        sub.output.iter().map(read).collect::<Vec<_>>(),
        bundle_values(0, 0)
    );
}

// ---------------------------------------------------------------- broadcast

#[test]
fn broadcast_copies_the_roots_input_and_never_leaks_placeholders() {
    for n in SIZES {
        for root in [0, n - 1] {
            let device = CpuDevice::new();
            let results = on_ranks(&device, n, |rank, group, executor| {
                let input = if rank == root {
                    ranked(&device, root, &[2, 3])
                } else {
                    let junk = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
                    tensor(&device, &[junk, junk].concat(), &[2, 3])
                };
                let out = settle(CpuBackend::broadcast(input, root, &group, &executor).unwrap());
                (out.dims().to_vec(), read(&out))
            });
            let expected: Vec<f32> = (0..6).map(|i| value(root, i)).collect();
            for (rank, result) in results.into_iter().enumerate() {
                assert_eq!(
                    result,
                    (vec![2, 3], expected.clone()),
                    "{n} ranks, root {root}, rank {rank}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------- barrier

#[test]
fn barrier_completes_only_after_every_member_entered() {
    for n in SIZES {
        let device = CpuDevice::new();
        let late = n - 1;
        let early_entered = Barrier::new(late.max(1));
        let (checked, wait_checked) = mpsc::channel::<()>();
        let wait_checked = Mutex::new(wait_checked);
        let results = on_ranks(&device, n, |rank, group, executor| {
            if rank == late {
                for _ in 0..late {
                    wait_checked.lock().unwrap().recv().unwrap();
                }
                let barrier = CpuBackend::barrier(&group, &executor).unwrap();
                settle(eredu_core::Submission {
                    output: (),
                    completion: barrier,
                });
                true
            } else {
                let barrier = CpuBackend::barrier(&group, &executor).unwrap();
                early_entered.wait();
                std::thread::sleep(Duration::from_millis(20));
                let pending = !barrier.is_complete().unwrap();
                checked.send(()).unwrap();
                settle(eredu_core::Submission {
                    output: (),
                    completion: barrier,
                });
                pending
            }
        });
        assert!(
            results.iter().all(|&pending| pending),
            "{n} ranks: {results:?}"
        );
    }
}

// ---------------------------------------------------------------- failure agreement

fn agreement(n: usize, statuses: &[bool]) -> Vec<bool> {
    let device = CpuDevice::new();
    on_ranks(&device, n, |rank, group, executor| {
        let sub = CpuBackend::agree_success(statuses[rank], &group, &executor).unwrap();
        CpuBackend::resolve_failure_agreement(settle(sub)).unwrap()
    })
}

#[test]
fn agree_success_is_true_only_when_every_member_succeeded() {
    for n in SIZES {
        assert_eq!(
            agreement(n, &vec![true; n]),
            vec![true; n],
            "{n} ranks, all true"
        );
        for failed in [0, n - 1] {
            let mut statuses = vec![true; n];
            statuses[failed] = false;
            assert_eq!(
                agreement(n, &statuses),
                vec![false; n],
                "{n} ranks, member {failed} false"
            );
        }
    }
    assert_eq!(agreement(4, &[false; 4]), vec![false; 4]);
}

#[test]
fn resolving_an_agreement_before_completion_is_an_error() {
    // One rank: the executor is held.
    let device = CpuDevice::new();
    let group = device.group(1).unwrap().remove(0);
    let executor = device.executor();
    let hold = executor.hold();
    let sub = CpuBackend::agree_success(true, &group, &executor).unwrap();
    let early = CpuBackend::resolve_failure_agreement(sub.output.clone());
    assert!(
        matches!(early, Err(CpuError::NotMaterialised { .. })),
        "{early:?}"
    );
    assert!(early.unwrap_err().to_string().contains("has not completed"));
    hold.release();
    assert_eq!(CpuBackend::resolve_failure_agreement(settle(sub)), Ok(true));

    // Two ranks: a late peer. `agree_success` itself must not block on it (AGR-2).
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(&device, 2, |rank, group, executor| {
        if rank == 1 {
            wait_go.lock().unwrap().recv().unwrap();
            let sub = CpuBackend::agree_success(true, &group, &executor).unwrap();
            return (true, CpuBackend::resolve_failure_agreement(settle(sub)));
        }
        let sub = CpuBackend::agree_success(true, &group, &executor).unwrap();
        let early = CpuBackend::resolve_failure_agreement(sub.output.clone());
        go.send(()).unwrap();
        (
            early.is_err(),
            CpuBackend::resolve_failure_agreement(settle(sub)),
        )
    });
    assert_eq!(results, vec![(true, Ok(true)), (true, Ok(true))]);
}

/// The `rendezvous` personality has no progress thread: a large send whose
/// receiver has posted stands still while nobody calls into the backend,
/// then moves inside calls (here a spinning `wait()`, one chunk per turn)
/// and delivers every value.
#[test]
fn rendezvous_transfers_move_only_inside_calls() {
    use commcheck_cpu::{Personality, Phase, RENDEZVOUS_CHUNK, RENDEZVOUS_FROM};
    let d = CpuDevice::new()
        .with_personality(Personality::Rendezvous)
        .unwrap();
    // Five chunks, past the protocol switch.
    let n = (RENDEZVOUS_FROM / 4).max(4 * RENDEZVOUS_CHUNK / 4) + 1;
    let shape = [i32::try_from(n).unwrap()];
    let id = CommunicationRouteId::new(1);
    let source = d.route(id, 0, 1, 0).unwrap();
    let destination = d.route(id, 0, 1, 1).unwrap();
    let roles: [(&str, &[usize]); 1] = [("large", &[n])];
    let sent: Vec<f32> = (0..n).map(|i| value(0, i)).collect();
    let send = CpuBackend::send_receive(
        framed("progress", id, &roles, vec![tensor(&d, &sent, &shape)]),
        &source,
        &d.executor(),
    )
    .unwrap();
    let receive = CpuBackend::send_receive(
        framed(
            "progress",
            id,
            &roles,
            vec![tensor(&d, &vec![0.0; n], &shape)],
        ),
        &destination,
        &d.executor(),
    )
    .unwrap();
    let (send_seen, receive_seen) = (send.completion.observer(), receive.completion.observer());
    assert!(eventually(|| {
        send_seen.observe().phase == Phase::Running
            && receive_seen.observe().phase == Phase::Running
    }));
    // Nobody calls into the backend: whatever the wait, nothing moves.
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !send_seen.is_terminal() && !receive_seen.is_terminal(),
        "a rendezvous transfer moved while nobody called into the backend: {:?}, {:?}",
        send_seen.observe(),
        receive_seen.observe()
    );
    receive.completion.wait().unwrap();
    send.completion.wait().unwrap();
    assert_eq!(read(&receive.output[0]), sent);
}
