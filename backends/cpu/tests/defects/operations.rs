//! Scenarios of the operation defects: sums (SUM-1, SUM-2), gathers (GAT-1,
//! GAT-2), the all-to-all (A2A-1), point-to-point transfers (P2P-1 to
//! P2P-3), broadcast (BRD-1, BRD-2), the barrier (BAR-1) and failure
//! agreement (AGR-1, AGR-2).

use std::sync::{mpsc, Mutex};

use commcheck_cpu::{
    CpuBackend, CpuDevice, CpuError, CpuTensor, Element, WireMessage, PARALLEL_FROM, SUM_BLOCK,
};
use eredu_core::BoundedCompletionOutcome;
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SubmissionBackend, SumReductionBackend, UnevenGatherBackend,
    VariableAllToAllBackend,
};
use eredu_runtime::{CommunicationPeerCounts, CommunicationRouteId};

use crate::common::*;
use crate::support::*;

pub(crate) fn sum_skips_last_member(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_reduce_sum(ranked(d, rank, &[2]), &group, &e).unwrap())
    });
    results != vec![Some(vec![1000.0, 1002.0]); 2]
}

/// A sum on a group of one, then a plain submission on the same lane,
/// waited for: the lane runs its work in order, so once the later work is
/// done a launched sum is terminal. Deterministic: the sum is only watched
/// through an observer (which launches nothing) and the later work completes
/// on both devices, so no wait needs a time bound; the defect's sum, never
/// launched, is still pending.
pub(crate) fn lazy_launch(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let sum = CpuBackend::all_reduce_sum(tensor(d, &[1.0], &[1]), &group, &e).unwrap();
    let observer = sum.completion.observer();
    let later = CpuBackend::submit(&e, []).unwrap();
    assert_eq!(finish(later), COMPLETED);
    let launched = observer.is_terminal();
    let _ = output(sum);
    !launched
}

pub(crate) fn gather_reversed(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_gather_even(ranked(d, rank, &[1]), 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1000.0]); 2]
}

pub(crate) fn sum_tail_block_untouched(d: &CpuDevice) -> bool {
    // Past the parallel split, with a last partial block.
    let len = PARALLEL_FROM + SUM_BLOCK + 5;
    let results = on_ranks(d, 2, |rank, group, e| {
        let input = tensor(d, &vec![rank as f32 + 1.0; len], &[len as i32]);
        output(CpuBackend::all_reduce_sum(input, &group, &e).unwrap())
    });
    results != vec![Some(vec![3.0; len]); 2]
}

pub(crate) fn sum_bf16_as_f16(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |_, group, e| {
        let input = d.typed_tensor(Element::Bf16, &[1.0, 2.0], &[2]).unwrap();
        output(CpuBackend::all_reduce_sum(input, &group, &e).unwrap())
    });
    results != vec![Some(vec![2.0, 4.0]); 2]
}

pub(crate) fn gather_middle_axis_swapped(d: &CpuDevice) -> bool {
    // Shape [2, 1, 3] on axis 1: outer 2, inner 3.
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::all_gather_even(ranked(d, rank, &[2, 1, 3]), 1, &group, &e).unwrap())
    });
    let rows = |o: usize| (0..2).flat_map(move |r| (0..3).map(move |i| value(r, o * 3 + i)));
    results != vec![Some((0..2).flat_map(rows).collect()); 2]
}

pub(crate) fn gather_by_arrival(d: &CpuDevice) -> bool {
    // Member 1 submits first, member 0 once member 1's submission returned.
    let (submitted, wait_submitted) = mpsc::channel::<()>();
    let wait_submitted = Mutex::new(wait_submitted);
    let results = on_ranks(d, 2, |rank, group, e| {
        if rank == 0 {
            let _ = wait_submitted.lock().unwrap().recv_timeout(BOUND);
        }
        let submission = CpuBackend::all_gather_even(ranked(d, rank, &[1]), 0, &group, &e).unwrap();
        if rank == 1 {
            let _ = submitted.send(());
        }
        output(submission)
    });
    results != vec![Some(vec![value(0, 0), value(1, 0)]); 2]
}

pub(crate) fn uneven_counts_as_elements(d: &CpuDevice) -> bool {
    let counts = [2, 1];
    let results = on_ranks(d, 2, |rank, group, e| {
        let input = ranked(d, rank, &[counts[rank] as i32, 2]);
        output(CpuBackend::all_gather_uneven(input, &counts, 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1.0, 2.0, 3.0, 1000.0, 1001.0]); 2]
}

pub(crate) fn all_to_all_zero_skips(d: &CpuDevice) -> bool {
    // Member 1 sends and receives nothing; member 0 joins late.
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(d, 2, |rank, group, e| {
        let (send, receive) = if rank == 0 {
            (vec![1, 0], vec![1, 0])
        } else {
            (vec![0, 0], vec![0, 0])
        };
        let counts = CommunicationPeerCounts::new(send.clone(), receive, 2).unwrap();
        let input = ranked(d, rank, &[send.iter().sum::<usize>() as i32]);
        if rank == 0 {
            let _ = wait_go.lock().unwrap().recv_timeout(BOUND);
        }
        let sub = CpuBackend::variable_all_to_all(input, &counts, 0, &group, &e).unwrap();
        let early = rank == 1 && sub.completion.observer().wait_terminal(SHORT);
        if rank == 1 {
            go.send(()).unwrap();
        }
        let _ = finish(sub.completion);
        early
    });
    results[1]
}

const SCHEMA: &str = "commcheck.defects";

/// What a transfer observed: the receive outcome, the received values, the wire log.
type Transfer = (
    Result<BoundedCompletionOutcome, CpuError>,
    Vec<Option<Vec<f32>>>,
    Vec<WireMessage>,
);

/// Sends `values` (framed with `sent`) from rank 0 to rank 1, which expects
/// roles `expected`; returns the receive outcome, its values and the wire log.
fn transfer(
    d: &CpuDevice,
    sent: &[(&str, &[usize])],
    expected: &[(&str, &[usize])],
    values: Vec<CpuTensor>,
) -> Transfer {
    let id = CommunicationRouteId::new(1);
    let source = d.route(id, 0, 1, 0).unwrap();
    let destination = d.route(id, 0, 1, 1).unwrap();
    let placeholders = values
        .iter()
        .map(|v| {
            tensor(
                d,
                &vec![f32::NAN; v.dims().iter().product::<i32>() as usize],
                v.dims(),
            )
        })
        .collect();
    let send =
        CpuBackend::send_receive(framed(SCHEMA, id, sent, values), &source, &d.executor()).unwrap();
    let receive = CpuBackend::send_receive(
        framed(SCHEMA, id, expected, placeholders),
        &destination,
        &d.executor(),
    )
    .unwrap();
    let _ = finish(send.completion);
    let outcome = finish(receive.completion);
    let received = receive
        .output
        .iter()
        .map(CpuTensor::read_materialised)
        .collect();
    (outcome, received, source.wire_log())
}

const TWO: [(&str, &[usize]); 2] = [("first", &[2]), ("second", &[2])];

pub(crate) fn point_to_point_reversed(d: &CpuDevice) -> bool {
    let (outcome, received, _) =
        transfer(d, &TWO, &TWO, vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])]);
    outcome != COMPLETED || received != [Some(vec![0.0, 1.0]), Some(vec![1000.0, 1001.0])]
}

pub(crate) fn skip_header_check(d: &CpuDevice) -> bool {
    let other: [(&str, &[usize]); 2] = [("first", &[2]), ("other", &[2])];
    let (outcome, _, _) = transfer(
        d,
        &TWO,
        &other,
        vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])],
    );
    outcome.is_ok()
}

pub(crate) fn separate_header_message(d: &CpuDevice) -> bool {
    let values = vec![ranked(d, 0, &[2]), ranked(d, 1, &[2])];
    let headers: Vec<Vec<u8>> = framed(SCHEMA, CommunicationRouteId::new(1), &TWO, values.clone())
        .iter()
        .map(|v| v.header().to_vec())
        .collect();
    let (outcome, _, wire) = transfer(d, &TWO, &TWO, values);
    assert_eq!(outcome, COMPLETED);
    wire != [WireMessage {
        headers,
        payload_bytes: 16,
    }]
}

pub(crate) fn rendezvous_skips_header_check(d: &CpuDevice) -> bool {
    let n = past_switch();
    let sent: [(&str, &[usize]); 1] = [("first", &[n])];
    let other: [(&str, &[usize]); 1] = [("other", &[n])];
    let shape = [i32::try_from(n).unwrap()];
    let (outcome, _, _) = transfer(d, &sent, &other, vec![ranked(d, 0, &shape)]);
    outcome.is_ok()
}

pub(crate) fn rendezvous_separate_header(d: &CpuDevice) -> bool {
    let n = past_switch();
    let roles: [(&str, &[usize]); 1] = [("first", &[n])];
    let values = vec![ranked(d, 0, &[i32::try_from(n).unwrap()])];
    let headers: Vec<Vec<u8>> =
        framed(SCHEMA, CommunicationRouteId::new(1), &roles, values.clone())
            .iter()
            .map(|v| v.header().to_vec())
            .collect();
    let (outcome, _, wire) = transfer(d, &roles, &roles, values);
    assert_eq!(outcome, COMPLETED);
    wire != [WireMessage {
        headers,
        payload_bytes: 4 * n,
    }]
}

pub(crate) fn broadcast_sums(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        output(CpuBackend::broadcast(ranked(d, rank, &[2]), 0, &group, &e).unwrap())
    });
    results != vec![Some(vec![0.0, 1.0]); 2]
}

pub(crate) fn broadcast_root_wraps(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    match CpuBackend::broadcast(tensor(d, &[1.0], &[1]), 1, &group, &e) {
        Ok(sub) => {
            let _ = finish(sub.completion);
            true
        }
        Err(_) => false,
    }
}

pub(crate) fn barrier_early(d: &CpuDevice) -> bool {
    let (go, wait_go) = mpsc::channel::<()>();
    let wait_go = Mutex::new(wait_go);
    let results = on_ranks(d, 2, |rank, group, e| {
        if rank == 1 {
            let _ = wait_go.lock().unwrap().recv_timeout(BOUND);
        }
        let barrier = CpuBackend::barrier(&group, &e).unwrap();
        let early = rank == 0 && barrier.observer().wait_terminal(SHORT);
        if rank == 0 {
            go.send(()).unwrap();
        }
        let _ = finish(barrier);
        early
    });
    results[0]
}

pub(crate) fn agreement_local(d: &CpuDevice) -> bool {
    let results = on_ranks(d, 2, |rank, group, e| {
        let sub = CpuBackend::agree_success(rank == 0, &group, &e).unwrap();
        let _ = finish(sub.completion);
        CpuBackend::resolve_failure_agreement(sub.output)
    });
    results != vec![Ok(false), Ok(false)]
}

pub(crate) fn agreement_blocks(d: &CpuDevice) -> bool {
    // Rank 0 reports when it calls `agree_success` and when the call returned;
    // rank 1 joins only after that (or after SHORT).
    let (report, reports) = mpsc::channel::<()>();
    let reports = Mutex::new(reports);
    let results = on_ranks(d, 2, |rank, group, e| {
        let prompt = rank == 0 || {
            let reports = reports.lock().unwrap();
            reports.recv_timeout(BOUND).is_ok() && reports.recv_timeout(SHORT).is_ok()
        };
        if rank == 0 {
            report.send(()).unwrap();
        }
        let sub = CpuBackend::agree_success(true, &group, &e).unwrap();
        if rank == 0 {
            report.send(()).unwrap();
        }
        let _ = finish(sub.completion);
        prompt
    });
    !results[1]
}
