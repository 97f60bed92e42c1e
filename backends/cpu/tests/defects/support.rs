//! What every scenario shares: the scenario type, its time bounds and
//! bounded waits for completions and outputs.

use std::sync::mpsc;
use std::time::Duration;

use commcheck_cpu::{CpuCompletion, CpuDevice, CpuError, CpuTensor};
use eredu_core::{BoundedCompletion, BoundedCompletionOutcome, Submission};

use crate::common::*;

/// Returns whether the scenario observed the misbehaviour.
pub(crate) type Scenario = fn(&CpuDevice) -> bool;

/// How long work that must not finish is watched, or how long work that must
/// finish promptly is given.
pub(crate) const SHORT: Duration = Duration::from_millis(500);
/// Bound on every wait for a state a correct run (or the defect under test)
/// must reach, cleanup included: only a real hang meets it.
pub(crate) const BOUND: Duration = PATIENCE;

pub(crate) const COMPLETED: Result<BoundedCompletionOutcome, CpuError> =
    Ok(BoundedCompletionOutcome::Completed);

/// Bounded cleanup wait.
pub(crate) fn finish(completion: CpuCompletion) -> Result<BoundedCompletionOutcome, CpuError> {
    completion.wait_bounded(policy(BOUND, NATIVE))
}

/// Bounded wait for a submission's output values; `None` when it did not complete.
pub(crate) fn output(submission: Submission<CpuTensor, CpuCompletion>) -> Option<Vec<f32>> {
    match submission.completion.wait_bounded(policy(BOUND, NATIVE)) {
        Ok(BoundedCompletionOutcome::Completed) => submission.output.read_materialised(),
        _ => None,
    }
}

pub(crate) fn single(device: &CpuDevice) -> commcheck_cpu::CpuGroup {
    device.group(1).unwrap().remove(0)
}

/// Runs `check` on the completion after a helper thread releases `hold`,
/// either when `check` has returned or after `SHORT`, whichever is first.
pub(crate) fn release_after<R>(hold: commcheck_cpu::Hold, check: impl FnOnce() -> R) -> R {
    let (done, wait_done) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let _ = wait_done.recv_timeout(SHORT);
            drop(hold);
        });
        let result = check();
        let _ = done.send(());
        result
    })
}

/// Elements of one `f32` value past the `rendezvous` personality's protocol
/// switch (a device with a `Rendezvous…` defect has that personality).
pub(crate) fn past_switch() -> usize {
    commcheck_cpu::RENDEZVOUS_FROM / 4 + 1
}

/// A send of one value past the protocol switch on route 1 (member 0 to 1),
/// its receiver not posted (route 1's destination end opens later, if at
/// all); with the input's storage.
pub(crate) fn large_send(
    d: &CpuDevice,
) -> (
    Submission<Vec<CpuTensor>, CpuCompletion>,
    commcheck_cpu::StorageId,
) {
    use eredu_runtime::backend::PointToPointBackend;
    let n = past_switch();
    let id = eredu_runtime::CommunicationRouteId::new(1);
    let source = d.route(id, 0, 1, 0).unwrap();
    let roles: [(&str, &[usize]); 1] = [("large", &[n])];
    let t = tensor(d, &vec![1.0; n], &[i32::try_from(n).unwrap()]);
    let storage = t.storage_id();
    let send = commcheck_cpu::CpuBackend::send_receive(
        framed("defects", id, &roles, vec![t]),
        &source,
        &d.executor(),
    )
    .unwrap();
    (send, storage)
}
