//! Scenarios of the retention defects (RET-1 to RET-8): what a completion
//! keeps alive, and for how long.

use std::sync::atomic::Ordering;
use std::time::Duration;

use commcheck_cpu::{CpuBackend, CpuDevice, CpuError, Element};
use eredu_core::{BoundedCompletion, Submission};
use eredu_runtime::backend::{
    CommunicationBackend, PointToPointBackend, SubmissionBackend, SumReductionBackend,
};

use crate::common::*;
use crate::support::*;

pub(crate) fn local_work_drops_inputs(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0; 4], &[4]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(t);
    let freed = !d.storage_live(id);
    drop(hold);
    let _ = finish(sub.completion);
    freed
}

pub(crate) fn executor_not_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop(e);
    drop(hold);
    matches!(finish(sub.completion), Err(CpuError::ExecutorGone { .. }))
}

pub(crate) fn collective_drops_resources(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let t = tensor(d, &[1.0, 2.0], &[2]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::all_reduce_sum(t, &group, &e).unwrap();
    drop(group);
    let dropped = !d.storage_live(id) || d.ledger().groups == 0;
    drop(hold);
    let _ = finish(sub.completion);
    dropped
}

/// A small input is retained, a large one (of `PARALLEL_FROM` elements) is
/// not: the misbehaviour is the large input freed while its work is held.
pub(crate) fn large_input_not_retained(d: &CpuDevice) -> bool {
    let large = commcheck_cpu::PARALLEL_FROM;
    sum_retains(d, Element::F32, 4) && !sum_retains(d, Element::F32, large)
}

/// As `large_input_not_retained`, in each element type: only the large
/// 16-bit inputs go.
pub(crate) fn large_half_input_not_retained(d: &CpuDevice) -> bool {
    let large = commcheck_cpu::PARALLEL_FROM;
    sum_retains(d, Element::F16, 4)
        && sum_retains(d, Element::F32, large)
        && !sum_retains(d, Element::F16, large)
        && !sum_retains(d, Element::Bf16, large)
}

/// Whether a sum of one `element` input of `len` elements, held on its
/// lane with the caller's handle gone, keeps the input allocated.
fn sum_retains(d: &CpuDevice, element: Element, len: usize) -> bool {
    let e = d.executor();
    let group = single(d);
    let t = d
        .typed_tensor(element, &vec![1.0; len], &[i32::try_from(len).unwrap()])
        .unwrap();
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::all_reduce_sum(t, &group, &e).unwrap();
    let live = d.storage_live(id);
    drop(hold);
    let _ = finish(sub.completion);
    live
}

/// A rendezvous send (the device takes the defect's `rendezvous`
/// personality) submitted before its receiver posts, so it must wait for
/// it: its input is freed once the caller's handle goes, although the
/// handle was moved into the submission; a correct device keeps it until
/// the send completes. Deterministic: the defective send keeps no strong
/// reference from its submission on, so the caller's drop frees the input
/// there and then, whatever the worker is doing.
pub(crate) fn rendezvous_input_not_retained(d: &CpuDevice) -> bool {
    let n = past_switch();
    let (
        Submission {
            output,
            completion: send,
        },
        storage,
    ) = large_send(d);
    // A sender's output is its input itself: the caller keeps no handle.
    drop(output);
    let freed = !d.storage_live(storage);
    let id = eredu_runtime::CommunicationRouteId::new(1);
    let destination = d.route(id, 0, 1, 1).unwrap();
    let roles: [(&str, &[usize]); 1] = [("large", &[n])];
    let placeholder = tensor(d, &vec![0.0; n], &[i32::try_from(n).unwrap()]);
    let receive = CpuBackend::send_receive(
        framed("defects", id, &roles, vec![placeholder]),
        &destination,
        &d.executor(),
    )
    .unwrap();
    let _ = finish(send);
    let _ = finish(receive.completion);
    freed
}

pub(crate) fn drop_releases_pending(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let hold = e.hold();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    drop((t, sub));
    let freed = !d.storage_live(id);
    drop(hold);
    eventually_within(BOUND, || d.ledger().pending_work == 0);
    freed
}

pub(crate) fn output_not_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let hold = e.hold();
    let Submission { output, completion } =
        CpuBackend::all_reduce_sum(tensor(d, &[1.0], &[1]), &group, &e).unwrap();
    let id = output.storage_id();
    drop(output);
    let freed = !d.storage_live(id);
    drop(hold);
    let _ = finish(completion);
    freed
}

pub(crate) fn retain_drops_early(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    let c = CpuBackend::submit(&e, []).unwrap();
    let (flag, dropped) = DropFlag::new();
    CpuBackend::retain_until_complete(&e, &c, flag).unwrap();
    let early = dropped.load(Ordering::SeqCst);
    drop(hold);
    let _ = finish(c);
    early
}

pub(crate) fn leak_retained(d: &CpuDevice) -> bool {
    let e = d.executor();
    let t = tensor(d, &[1.0], &[1]);
    let id = t.storage_id();
    let sub = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    let observer = sub.completion.observer();
    let _ = finish(sub.completion);
    drop(t);
    // Deterministic: `released` is set only once the worker has handed the
    // retained values back (dropped, or kept by the defect), so the input's
    // fate is settled by then, however slowly the worker ran.
    assert!(eventually(|| observer.observe().released));
    d.storage_live(id)
}

pub(crate) fn local_deps_fence_group(d: &CpuDevice) -> bool {
    let e = d.executor();
    let group = single(d);
    let first = CpuBackend::all_reduce_sum(tensor(d, &[1.0], &[1]), &group, &e).unwrap();
    let _ = finish(first.completion);
    let hold = e.hold();
    let t = tensor(d, &[1.0], &[1]);
    let deps = CpuBackend::submit_local_dependencies([&t], &e).unwrap();
    let _ = deps
        .completion
        .wait_bounded(policy(Duration::from_millis(1), NATIVE));
    drop(hold);
    let second = CpuBackend::all_reduce_sum(tensor(d, &[2.0], &[1]), &group, &e).unwrap();
    output(second) != Some(vec![2.0])
}
