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
pub const QUARANTINE: CompletionCancellationMode = CompletionCancellationMode::QuarantineUntilComplete;

/// Polls `condition` for up to two seconds.
pub fn eventually(condition: impl Fn() -> bool) -> bool {
    for _ in 0..2000 {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    condition()
}

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
