//! Mirrors, over the core's public operations and without planted defects,
//! of the backend code on the other side of each race: the completion's
//! queries and bounded wait (`completion.rs`), its disposition, the
//! quarantine owner and the release (`device.rs`), and the running of one
//! item (`lane.rs`). A change to those files reaches loom only once the
//! mirror follows it.

use std::time::Instant;

use commcheck_cpu::loom_core::{CancelRequest, Core};
use commcheck_cpu::{CpuError, Observation, Phase};
use eredu_core::{BoundedCompletionOutcome, CompletionCancellationMode};
use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use loom::sync::{Arc, Mutex};

/// `Completion::is_complete` of `CpuCompletion`, without planted defects.
pub(crate) fn is_complete(core: &Core) -> Result<bool, CpuError> {
    let seen = core.observe();
    match seen.error {
        Some(error) => Err(error),
        None => Ok(seen.phase == Phase::Completed),
    }
}

/// `Completion::resources_releasable` of `CpuCompletion`, without planted
/// defects: nonblocking, `false` when the state is contended.
pub(crate) fn resources_releasable(core: &Core) -> bool {
    core.try_observe()
        .is_some_and(|seen| seen.phase.is_terminal())
}

/// `Completion::wait` of `CpuCompletion`, without planted defects.
pub(crate) fn wait(core: &Core) -> Result<(), CpuError> {
    let seen = core.wait_for(None, |seen| {
        seen.phase.is_terminal() || seen.error.is_some()
    });
    match seen.error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// The device's quarantine owner (device.rs): the live work it was handed.
pub(crate) type Quarantine = Mutex<Vec<Arc<Core>>>;

/// `BoundedCompletion::wait_bounded` of `CpuCompletion`, without planted
/// defects, with a deadline that has passed when its wait first looks at the
/// clock: the deadline fires at the waiting thread's first look at the state,
/// and loom places that look anywhere in the worker's progress.
///
/// Returns the outcome and the state seen when it was decided.
pub(crate) fn wait_bounded_expired(
    core: &Arc<Core>,
    mode: CompletionCancellationMode,
    quarantine: &Quarantine,
) -> (Result<BoundedCompletionOutcome, CpuError>, Observation) {
    let seen = core.wait_for(Some(Instant::now()), |seen| {
        seen.phase.is_terminal() || seen.error.is_some()
    });
    if let Some(error) = seen.error.clone() {
        if seen.phase.is_terminal() {
            return (Err(error), seen);
        }
        let after = dispose(core, mode, quarantine);
        return (Err(error), after);
    }
    if seen.phase == Phase::Completed {
        return (Ok(BoundedCompletionOutcome::Completed), seen);
    }
    core.mark_deadline_passed();
    let after = dispose(core, mode, quarantine);
    if after.phase == Phase::Completed && after.error.is_none() {
        return (Ok(BoundedCompletionOutcome::Completed), after);
    }
    (
        Ok(BoundedCompletionOutcome::DeadlineExceeded { cancellation: mode }),
        after,
    )
}

/// `CpuCompletion::dispose`: NativeCancel requests cancellation and waits
/// for the teardown, release included; quarantine hands the work to the owner.
pub(crate) fn dispose(
    core: &Arc<Core>,
    mode: CompletionCancellationMode,
    quarantine: &Quarantine,
) -> Observation {
    match mode {
        CompletionCancellationMode::NativeCancel => match core.request_cancel("model") {
            CancelRequest::TornDown(retained) => {
                drop(retained);
                core.mark_released();
            }
            CancelRequest::Requested | CancelRequest::AlreadyTerminal => {
                core.wait_for(None, |seen| seen.released);
            }
        },
        CompletionCancellationMode::QuarantineUntilComplete => {
            core.mark_quarantined();
            quarantine.lock().unwrap().push(Arc::clone(core));
        }
    }
    core.observe()
}

/// The executor running one item (lane.rs `execute` and device.rs
/// `finish`): start, run the native body (`live` while it may touch retained
/// values; `body` sees whether cancellation was requested and says whether
/// it succeeded), finish, release outside the lock, mark released.
pub(crate) fn execute(core: &Core, live: &AtomicBool, body: impl FnOnce(bool) -> bool) {
    if !core.start() {
        return;
    }
    live.store(true, SeqCst);
    let cancelled = core.cancel_requested();
    let succeeded = body(cancelled);
    live.store(false, SeqCst);
    let outcome = if succeeded {
        Ok(())
    } else {
        Err(CpuError::Cancelled { operation: "model" })
    };
    if let Some(retained) = core.finish(outcome) {
        drop(retained);
        core.mark_released();
    }
}
