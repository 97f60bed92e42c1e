//! Helpers shared by the backend's integration tests.
#![allow(dead_code)]

use std::time::Duration;

use commcheck_cpu::{CpuDevice, CpuExecutor, CpuGroup, CpuTensor};
use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};

/// Runs `body` on `n` rank threads sharing one group; returns results in rank order.
pub fn on_ranks<R: Send>(
    device: &CpuDevice,
    n: usize,
    body: impl Fn(usize, CpuGroup, CpuExecutor) -> R + Sync,
) -> Vec<R> {
    let groups = device.group(n).expect("group");
    std::thread::scope(|scope| {
        let handles: Vec<_> = groups
            .into_iter()
            .enumerate()
            .map(|(rank, group)| {
                let body = &body;
                let device = device.clone();
                scope.spawn(move || body(rank, group, device.executor()))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    })
}

pub fn tensor(device: &CpuDevice, values: &[f32], shape: &[i32]) -> CpuTensor {
    device.tensor(values, shape).expect("tensor")
}

pub fn policy(timeout: Duration, mode: CompletionCancellationMode) -> BoundedCompletionWait {
    BoundedCompletionWait::new(timeout, mode).expect("positive timeout")
}

pub const NATIVE: CompletionCancellationMode = CompletionCancellationMode::NativeCancel;
pub const QUARANTINE: CompletionCancellationMode =
    CompletionCancellationMode::QuarantineUntilComplete;

/// Polls `condition` until it holds, for up to a minute: for a state a
/// correct run must reach (every caller asserts `true`), so only a real hang
/// meets the bound, never a loaded machine that is merely slow.
pub fn eventually(condition: impl Fn() -> bool) -> bool {
    eventually_within(PATIENCE, condition)
}

/// How long a wait for a state a correct run must reach is given: long
/// enough that only a hang meets it.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A value whose drop is observable.
pub struct DropFlag(pub std::sync::Arc<std::sync::atomic::AtomicBool>);

impl DropFlag {
    pub fn new() -> (Self, std::sync::Arc<std::sync::atomic::AtomicBool>) {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        (Self(flag.clone()), flag)
    }
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Exactly representable test value of element `index` of rank `rank`'s input.
pub fn value(rank: usize, index: usize) -> f32 {
    (rank * 1000 + index) as f32
}

/// A tensor of `shape` whose flat element `i` is `value(rank, i)`.
pub fn ranked(device: &CpuDevice, rank: usize, shape: &[i32]) -> CpuTensor {
    let len: usize = shape.iter().map(|&d| d as usize).product();
    let values: Vec<f32> = (0..len).map(|i| value(rank, i)).collect();
    tensor(device, &values, shape)
}

/// The materialised values of `tensor` (panics when it is not materialised, or
/// when their number is not the product of its dims).
pub fn read(tensor: &CpuTensor) -> Vec<f32> {
    let values = tensor.read_materialised().expect("materialised output");
    let elements: i64 = tensor.dims().iter().map(|&d| i64::from(d)).product();
    assert_eq!(
        values.len() as i64,
        elements,
        "a tensor of dims {:?} holds {} values",
        tensor.dims(),
        values.len()
    );
    values
}

/// Waits (bounded, ten seconds) for a submission that must succeed; returns its output.
pub fn settle<T: std::fmt::Debug>(
    submission: eredu_core::Submission<T, commcheck_cpu::CpuCompletion>,
) -> T {
    match submission.wait_bounded(policy(Duration::from_secs(10), NATIVE)) {
        Ok(eredu_core::BoundedSubmissionOutcome::Completed(output)) => output,
        other => panic!("expected exact completion, got {other:?}"),
    }
}

/// Waits (bounded, five seconds) for a completion that must fail; returns its error.
///
/// It lets the work end on its own before the bounded wait, so an error
/// published early (an injected fault) does not turn into a cancellation.
pub fn failure(completion: commcheck_cpu::CpuCompletion) -> commcheck_cpu::CpuError {
    use eredu_core::BoundedCompletion;
    completion.observer().wait_terminal(Duration::from_secs(5));
    match completion.wait_bounded(policy(Duration::from_secs(5), NATIVE)) {
        Err(error) => error,
        Ok(outcome) => panic!("expected an error, got {outcome:?}"),
    }
}

/// Polls `condition` for up to `limit`.
pub fn eventually_within(limit: Duration, condition: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

/// Frames `tensors` for route `route` under a boundary contract of F32 roles
/// `(name, shape)` in schema `schema`.
pub fn framed(
    schema: &str,
    route: eredu_runtime::CommunicationRouteId,
    roles: &[(&str, &[usize])],
    tensors: Vec<CpuTensor>,
) -> Vec<eredu_runtime::RoleExactBoundaryValue<CpuTensor>> {
    use eredu_runtime::{BoundaryRoleContract, RoleExactBoundaryContract};
    let roles: Vec<_> = roles
        .iter()
        .map(|(name, shape)| {
            BoundaryRoleContract::new(
                *name,
                eredu_core::checkpoint::TensorDtype::F32,
                shape.to_vec(),
            )
            .expect("role")
        })
        .collect();
    RoleExactBoundaryContract::new(schema, roles.clone())
        .expect("contract")
        .frame_values(route, &roles, tensors)
        .expect("framed values")
}
