//! Scenarios of the submission defects (SUB-1 to SUB-4): forks, evaluation
//! at submission, ordering gates and refused submissions.

use commcheck_cpu::{CpuBackend, CpuDevice};
use eredu_core::BoundedCompletion;
use eredu_runtime::backend::{CommunicationBackend, SubmissionBackend, SumReductionBackend};

use crate::common::*;
use crate::support::*;

pub(crate) fn fork_shares_lane(d: &CpuDevice) -> bool {
    let e = d.executor();
    let lanes = CpuBackend::fork_executors(&e, 2).unwrap();
    assert_eq!(lanes.len(), 2);
    let hold = lanes[0].hold();
    let c = CpuBackend::submit(&lanes[1], []).unwrap();
    let outcome = c.wait_bounded(policy(SHORT, NATIVE));
    drop(hold);
    outcome != COMPLETED
}

pub(crate) fn submit_skips_evaluation(d: &CpuDevice) -> bool {
    // A collective's output is the one value that is not materialised yet.
    let producer = d.executor();
    let lane = d.executor();
    let group = single(d);
    let hold = producer.hold();
    let sum = CpuBackend::all_reduce_sum(tensor(d, &[3.0], &[1]), &group, &producer).unwrap();
    let c = CpuBackend::submit(&lane, [&sum.output]).unwrap();
    let (outcome, materialised) = release_after(hold, || {
        (
            c.wait_bounded(policy(BOUND, NATIVE)),
            sum.output.read_materialised(),
        )
    });
    let _ = finish(sum.completion);
    !(outcome == COMPLETED && materialised == Some(vec![3.0]))
}

pub(crate) fn order_after_ignored(d: &CpuDevice) -> bool {
    let (producer_lane, consumer_lane) = (d.executor(), d.executor());
    let hold = producer_lane.hold();
    let producer = CpuBackend::submit(&producer_lane, []).unwrap();
    CpuBackend::order_after(&producer, &consumer_lane).unwrap();
    let consumer = CpuBackend::submit(&consumer_lane, []).unwrap();
    let early = consumer.observer().wait_terminal(SHORT);
    drop(hold);
    let _ = (finish(producer), finish(consumer));
    early
}

pub(crate) fn submit_error_leaves_work(d: &CpuDevice) -> bool {
    let e = d.executor();
    let hold = e.hold();
    e.fail_next_submission();
    let t = tensor(d, &[1.0], &[1]);
    let refused = CpuBackend::submit_local_dependencies([&t], &e);
    let pending = d.ledger().pending_work;
    drop(hold);
    eventually_within(BOUND, || d.ledger().pending_work == 0);
    refused.is_ok() || pending > 0
}
