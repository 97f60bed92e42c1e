//! The completion handles of a work item: [`CudaCompletion`] (the
//! backend's `Completion`, `CommunicationCompletion` and
//! `BoundedCompletion`) and [`CompletionObserver`], a second look at its
//! state after `wait_bounded` consumed it. They implement exact completion
//! (the EXC invariants) and bounded waits with their dispositions (the CAN
//! invariants): a deadline tears the work down (NativeCancel) or leaves it
//! to the reaper (QuarantineUntilComplete); dropping a handle releases
//! nothing (RET-4).

use super::{Phase, Work};
use crate::defect::Defect;
use crate::error::CudaError;
use eredu_core::{
    BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
    CompletionCancellationMode,
};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exact completion of one CUDA submission (the backend's `Completion` and
/// `CommunicationCompletion`).
///
/// `is_complete` queries the work's event (`cuEventQuery`, never blocking);
/// `wait` sleeps on it (`BLOCKING_SYNC`); `wait_bounded` polls it with
/// backoff until the deadline, then tears the work down (NativeCancel: the
/// cancel word, bounded) or leaves it to the reaper (QuarantineUntilComplete).
/// Errors are sticky. [`Clone`] gives a second handle on the same work.
pub struct CudaCompletion {
    pub(crate) work: Arc<Work>,
    /// Whether this handle reported the error (the `NonStickyError` defect).
    reported_error: Cell<bool>,
}

impl Clone for CudaCompletion {
    /// A second handle on the same work (it starts with this handle's
    /// report history, which matters only under the `NonStickyError` defect).
    fn clone(&self) -> Self {
        Self {
            work: Arc::clone(&self.work),
            reported_error: Cell::new(self.reported_error.get()),
        }
    }
}

impl Drop for CudaCompletion {
    fn drop(&mut self) {
        if self.work.has(Defect::DropReleasesPending) && !self.work.observe().0.is_terminal() {
            self.work.drop_retained();
        }
    }
}

impl std::fmt::Debug for CudaCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (phase, error) = self.work.observe();
        f.debug_struct("CudaCompletion")
            .field("operation", &self.work.operation)
            .field("phase", &phase)
            .field("error", &error)
            .finish()
    }
}

impl CudaCompletion {
    pub(crate) fn new(work: Arc<Work>) -> Self {
        Self {
            work,
            reported_error: Cell::new(false),
        }
    }

    /// Reports `error`, once only under the `NonStickyError` defect.
    fn report(&self, error: CudaError) -> Result<(), CudaError> {
        if self.work.has(Defect::NonStickyError) && self.reported_error.replace(true) {
            return Ok(());
        }
        Err(error)
    }

    /// Name of the operation that produced this completion.
    pub fn operation(&self) -> &'static str {
        self.work.operation
    }

    /// A view of the same work's state (the observer instrument).
    pub fn observer(&self) -> CompletionObserver {
        CompletionObserver {
            work: Arc::clone(&self.work),
        }
    }
}

/// A second look at a completion's state, after the completion itself was
/// consumed by `wait_bounded`.
#[derive(Clone)]
pub struct CompletionObserver {
    work: Arc<Work>,
}

impl std::fmt::Debug for CompletionObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionObserver")
            .field("operation", &self.work.operation)
            .finish_non_exhaustive()
    }
}

impl CompletionObserver {
    /// The work's phase (settling it first, without blocking).
    pub fn phase(&self) -> Phase {
        self.work.settle();
        self.work.observe().0
    }

    /// As the completion's `resources_releasable`.
    pub fn resources_releasable(&self) -> bool {
        releasable(&self.work)
    }
}

fn releasable(work: &Work) -> bool {
    if work.has(Defect::ReleasableNeverTrue) {
        return false;
    }
    work.settle();
    if work.has(Defect::ReleasableEarly) {
        let state = work.lock();
        if state.error.is_some() || state.cancel_requested {
            return true;
        }
    }
    work.try_observe()
        .is_some_and(|(phase, _)| phase.is_terminal())
}

impl Completion for CudaCompletion {
    type Error = CudaError;

    fn is_complete(&self) -> Result<bool, CudaError> {
        if self.work.has(Defect::BlockingIsComplete) {
            if let Some(event) = &self.work.event {
                let deadline = Instant::now() + Duration::from_secs(2);
                let _ = crate::device::poll_until(event, Some(deadline));
            }
        }
        self.work.settle();
        match self.work.observe() {
            (_, Some(error)) => self.report(error).map(|()| true),
            (Phase::Completed, None) => Ok(true),
            _ if self.work.has(Defect::EarlyCompletion) && self.work.has_started() => Ok(true),
            _ => Ok(false),
        }
    }

    fn wait(&self) -> Result<(), CudaError> {
        // An error reports the outcome at once: its work may still be
        // draining, or queued behind other work on its stream.
        if let (_, Some(error)) = self.work.observe() {
            return self.report(error);
        }
        if self.work.has(Defect::WaitForDevice) {
            // Bounded (two seconds, past the kit's one-second block guard),
            // as BlockingIsComplete is: a caller that itself holds a lane
            // would otherwise wait forever, leaving its context behind for
            // every later proof.
            let until = std::time::Instant::now() + Duration::from_secs(2);
            while self.work.registry.unreleased() > 0 && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if let Some(event) = &self.work.event {
            if let Err(error) = event.synchronize() {
                self.work.publish(error);
            }
        }
        self.work.settle();
        // A teardown may be releasing concurrently: wait for terminal.
        let mut state = self.work.lock();
        while !state.phase.is_terminal() && state.error.is_none() {
            state = self
                .work
                .changed
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
        let error = state.error.clone();
        drop(state);
        match error {
            Some(error) => self.report(error),
            None => Ok(()),
        }
    }

    fn resources_releasable(&self) -> bool {
        releasable(&self.work)
    }
}

impl BoundedCompletion for CudaCompletion {
    fn wait_bounded(
        self,
        policy: BoundedCompletionWait,
    ) -> Result<BoundedCompletionOutcome, CudaError> {
        let work = &self.work;
        let mode = policy.cancellation();
        let timeout = if work.has(Defect::EarlyDeadline) {
            (policy.timeout() / 4).max(Duration::from_nanos(1))
        } else {
            policy.timeout()
        };
        // `None`: beyond what `Instant` represents (Duration::MAX): no deadline.
        let deadline = if work.has(Defect::DeadlineOverflow) {
            #[allow(clippy::unchecked_time_subtraction, reason = "the CAN-8 defect")]
            Some(Instant::now() + timeout)
        } else {
            Instant::now().checked_add(timeout)
        };
        let mut pause = Duration::from_micros(1);
        loop {
            let terminal = work.settle();
            let (phase, error) = work.observe();
            if let Some(error) = error {
                if terminal && work.has(Defect::FailedIsCompleted) {
                    return Ok(BoundedCompletionOutcome::Completed);
                }
                if !terminal {
                    if work.has(Defect::ErrorDropsLive) {
                        work.drop_retained();
                        return Err(error);
                    }
                    // Live work with an error: never return by dropping it (CAN-7).
                    dispose(work, mode, "an error while waiting");
                }
                return Err(error);
            }
            if phase == Phase::Completed {
                return Ok(BoundedCompletionOutcome::Completed);
            }
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if now >= deadline => break,
                Some(deadline) => deadline - now,
                None => Duration::MAX,
            };
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_micros(200));
        }
        if work.has(Defect::CompletedAtDeadline) {
            return Ok(BoundedCompletionOutcome::Completed);
        }
        dispose(work, mode, "its NativeCancel deadline");
        let (phase, error) = work.observe();
        if phase == Phase::Completed && error.is_none() {
            // It finished during teardown: it completed exactly.
            return Ok(BoundedCompletionOutcome::Completed);
        }
        if mode == CompletionCancellationMode::NativeCancel && work.has(Defect::NativeCancelErrors)
        {
            return Err(CudaError::Cancelled {
                operation: work.operation,
                reason: "its NativeCancel deadline".into(),
            });
        }
        let reported = match (mode, work.has(Defect::WrongCancellationMode)) {
            (CompletionCancellationMode::NativeCancel, true) => {
                CompletionCancellationMode::QuarantineUntilComplete
            }
            (CompletionCancellationMode::QuarantineUntilComplete, true) => {
                CompletionCancellationMode::NativeCancel
            }
            (mode, false) => mode,
        };
        Ok(BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: reported,
        })
    }
}

fn dispose(work: &Work, mode: CompletionCancellationMode, reason: &str) {
    match mode {
        CompletionCancellationMode::NativeCancel if work.has(Defect::NativeCancelNoTeardown) => {
            work.lock().cancel_requested = true;
            work.set_cancel();
        }
        CompletionCancellationMode::NativeCancel => work.tear_down(reason),
        CompletionCancellationMode::QuarantineUntilComplete => work.quarantine(),
    }
}
