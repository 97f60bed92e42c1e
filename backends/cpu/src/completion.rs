//! The CPU backend's completion: one handle on a work item's [`Core`].

use std::cell::Cell;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use eredu_core::{
    BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
    CompletionCancellationMode,
};

use crate::core::{CancelRequest, Core, Observation, Phase};
use crate::defect::Defect;
use crate::device::CpuDevice;
use crate::error::CpuError;
use crate::group::GroupMember;
use crate::lane::LazyLaunch;
use crate::sync::rt::{self, Instant, Mutex};

/// Exact completion of one CPU submission.
///
/// It owns (through its shared core) every resource the work retains until
/// the work is terminal; dropping it never releases live resources (RET-4).
/// [`CpuCompletion::observer`] gives a second handle on the same state, so a
/// conformance kit can look after `wait_bounded` consumed the completion.
///
/// # Second handles
/// [`Clone::clone`] returns a second, full completion handle on the same work
/// (same shared core, device and operation). It survives `wait_bounded`
/// consuming the other handle, so a conformance kit can call
/// `resources_releasable()` (or `is_complete`, `wait`) after a bounded wait
/// timed out. Every handle answers from the same shared state:
///
/// - dropping any handle (or all of them) never releases live resources (RET-4);
/// - work whose launch is deferred (the SUM-2 `LazyLaunch` defect) is launched
///   exactly once, by whichever handle is observed first;
/// - a clone starts with a copy of its source handle's report history (what it
///   has already reported). That history only matters under the EXC-3, EXC-5
///   and EXC-6 defects, and copying it means cloning never gives a defect a
///   fresh "first report": a clone of a handle that already reported the
///   sticky error behaves as that handle would next. On a correct device
///   every handle reports the same sticky error and the same monotonic
///   completion, whatever was asked of the others.
pub struct CpuCompletion {
    core: Arc<Core>,
    device: CpuDevice,
    operation: &'static str,
    /// Work whose launch is deferred (the SUM-2 defect only), shared by
    /// every clone so it is launched exactly once; `None` for work that was
    /// launched at submission.
    lazy: Option<Arc<Mutex<Option<LazyLaunch>>>>,
    fenced_group: Option<Arc<GroupMember>>,
    reported_true: Cell<bool>,
    reported_error: Cell<bool>,
    /// The device's submission count when this handle first reported an
    /// error (the `SubmissionClearsError` defect).
    error_reported_at: Cell<Option<u64>>,
    stale_query_served: Cell<bool>,
    /// Reports completion before its work ran (the `BroadcastRootEarly`
    /// defect, on a broadcast's root only).
    early: bool,
    /// A send that waits for its receiver (the `rendezvous` personality):
    /// where the `RendezvousCancelErrors` defect acts.
    rendezvous_send: bool,
}

impl Clone for CpuCompletion {
    /// A second handle on the same work; see [`CpuCompletion`]'s "Second handles".
    fn clone(&self) -> Self {
        Self {
            core: Arc::clone(&self.core),
            device: self.device.clone(),
            operation: self.operation,
            lazy: self.lazy.clone(),
            fenced_group: self.fenced_group.clone(),
            reported_true: self.reported_true.clone(),
            reported_error: self.reported_error.clone(),
            error_reported_at: self.error_reported_at.clone(),
            stale_query_served: self.stale_query_served.clone(),
            early: self.early,
            rendezvous_send: self.rendezvous_send,
        }
    }
}

impl std::fmt::Debug for CpuCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCompletion")
            .field("operation", &self.operation)
            .field("state", &self.core.observe())
            .finish_non_exhaustive()
    }
}

/// A second, read-only handle on a completion's state (the *observer*).
///
/// It retains nothing the work uses (only the shared state and a handle on
/// the device, for its defect configuration): once the work is terminal every
/// retained resource is released whether or not observers exist.
#[derive(Clone)]
pub struct CompletionObserver {
    core: Arc<Core>,
    device: CpuDevice,
}

impl std::fmt::Debug for CompletionObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CompletionObserver")
            .field(&self.core.observe())
            .finish()
    }
}

impl CompletionObserver {
    /// Current state.
    pub fn observe(&self) -> Observation {
        self.core.observe()
    }

    /// Whether native work has stopped for good (completed, failed or torn down).
    pub fn is_terminal(&self) -> bool {
        self.core.observe().phase.is_terminal()
    }

    /// What `resources_releasable()` on the completion answers now, through
    /// the same code path, planted defects included (`ReleasableNeverTrue`,
    /// `ReleasableEarly`, `ReleasableAfterDeadline`).
    ///
    /// One difference, on purpose: under `ReleasableRunsDestructors` only the
    /// completion's own call drops the values the defect kept, so asking an
    /// observer never changes what the ledger and probes show.
    pub fn resources_releasable(&self) -> bool {
        resources_releasable(&self.core, &self.device, false)
    }

    /// Blocks until the work is terminal or `timeout` passed; returns whether it is terminal.
    pub fn wait_terminal(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        self.core
            .wait_for(deadline, |seen| seen.phase.is_terminal())
            .phase
            .is_terminal()
    }
}

impl CpuCompletion {
    pub(crate) fn new(core: Arc<Core>, device: CpuDevice, operation: &'static str) -> Self {
        Self {
            core,
            device,
            operation,
            lazy: None,
            fenced_group: None,
            reported_true: Cell::new(false),
            reported_error: Cell::new(false),
            error_reported_at: Cell::new(None),
            stale_query_served: Cell::new(false),
            early: false,
            rendezvous_send: false,
        }
    }

    pub(crate) fn with_lazy_launch(mut self, launch: LazyLaunch) -> Self {
        self.lazy = Some(Arc::new(Mutex::new(Some(launch))));
        self
    }

    pub(crate) fn with_fenced_group(mut self, group: Option<Arc<GroupMember>>) -> Self {
        self.fenced_group = group;
        self
    }

    /// This handle reports `Ok(true)` from `is_complete` before its work
    /// ran (the `BroadcastRootEarly` defect).
    pub(crate) fn reporting_early(mut self) -> Self {
        self.early = true;
        self
    }

    /// This handle is a rendezvous send's (see `rendezvous_send`).
    pub(crate) fn of_rendezvous_send(mut self) -> Self {
        self.rendezvous_send = true;
        self
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// A second handle on this completion's state.
    pub fn observer(&self) -> CompletionObserver {
        CompletionObserver {
            core: Arc::clone(&self.core),
            device: self.device.clone(),
        }
    }

    /// Name of the operation that produced this completion.
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    fn has(&self, defect: Defect) -> bool {
        self.device.has(defect)
    }

    /// Waits until `stop` holds for the work's state or `deadline` passes:
    /// asleep on the core's condition variable, or, under the
    /// [`Personality::spins`](crate::Personality::spins) personalities,
    /// polling in a busy loop on the calling thread.
    fn wait_until(
        &self,
        deadline: Option<Instant>,
        stop: impl Fn(&Observation) -> bool,
    ) -> Observation {
        if self.device.personality().spins() {
            // Each turn of the loop is a call into the backend (what moves
            // the `rendezvous` personality's transfers).
            let stop = |seen: &Observation| {
                self.device.called();
                stop(seen)
            };
            if let Some(seen) = self.core.spin_until(deadline, &stop) {
                return seen;
            }
        }
        self.core.wait_for(deadline, stop)
    }

    fn launch(&self) {
        let Some(lazy) = &self.lazy else {
            return;
        };
        let launch = lazy.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(launch) = launch {
            launch.launch();
        }
    }

    /// Applies the non-sticky-error defect to an error report.
    fn report_error(&self, error: CpuError) -> Result<(), CpuError> {
        if self.has(Defect::NonStickyError) && self.reported_error.replace(true) {
            return Ok(());
        }
        if self.has(Defect::SubmissionClearsError) {
            let now = self.device.submissions();
            match self.error_reported_at.get() {
                Some(at) if now > at => return Ok(()),
                Some(_) => {}
                None => self.error_reported_at.set(Some(now)),
            }
        }
        Err(error)
    }

    /// NativeCancel: request cancellation and wait for native teardown,
    /// including the release of everything the work retained.
    fn cancel_and_tear_down(&self) -> Observation {
        match self.core.request_cancel(self.operation) {
            CancelRequest::TornDown(retained) => self.device.torn_down(&self.core, retained),
            CancelRequest::Requested | CancelRequest::AlreadyTerminal
                if !self.has(Defect::NativeCancelNoTeardown) =>
            {
                self.core.wait_for(None, |seen| seen.released);
            }
            CancelRequest::Requested | CancelRequest::AlreadyTerminal => {}
        }
        self.core.observe()
    }

    /// Puts live work in the selected disposition.
    fn dispose(&self, mode: CompletionCancellationMode) -> Observation {
        if let Some(group) = &self.fenced_group {
            group.fence("a local-dependency deadline");
        }
        match mode {
            CompletionCancellationMode::NativeCancel => self.cancel_and_tear_down(),
            CompletionCancellationMode::QuarantineUntilComplete => {
                if self.has(Defect::QuarantineDropsLive) {
                    drop(self.core.take_retained());
                }
                self.device.quarantine(Arc::clone(&self.core));
                self.core.observe()
            }
        }
    }
}

impl Completion for CpuCompletion {
    type Error = CpuError;

    fn is_complete(&self) -> Result<bool, CpuError> {
        self.device.called();
        self.launch();
        if self.has(Defect::BlockingIsComplete) {
            let deadline = Instant::now().checked_add(Duration::from_secs(2));
            self.core.wait_for(deadline, |seen| {
                seen.phase.is_terminal() || seen.error.is_some()
            });
        }
        let seen = self.core.observe();
        if let Some(error) = seen.error {
            return self.report_error(error).map(|()| true);
        }
        let complete = match seen.phase {
            Phase::Completed => true,
            Phase::Running => self.early || self.has(Defect::EarlyCompletion),
            Phase::Queued => self.early,
            Phase::Failed | Phase::Cancelled => false,
        };
        if complete
            && self.has(Defect::StaleCompletionQuery)
            && !self.stale_query_served.replace(true)
        {
            return Ok(false);
        }
        if complete && self.has(Defect::NonMonotonicCompletion) && self.reported_true.replace(true)
        {
            self.reported_true.set(false);
            return Ok(false);
        }
        Ok(complete)
    }

    fn wait(&self) -> Result<(), CpuError> {
        self.launch();
        if self.has(Defect::WaitForDevice) {
            while self.device.ledger().pending_work > 0 {
                rt::sleep(Duration::from_millis(1));
            }
        }
        let seen = self.wait_until(None, |seen| {
            seen.phase.is_terminal() || seen.error.is_some()
        });
        match seen.error {
            Some(error) => self.report_error(error),
            None => Ok(()),
        }
    }

    fn resources_releasable(&self) -> bool {
        resources_releasable(&self.core, &self.device, true)
    }
}

/// `resources_releasable()` of the work behind `core`, for the completion and
/// its observers alike. Nonblocking: a contended state answers `false`.
///
/// `drains` says whether the caller is the completion itself, the only caller
/// whose answer runs the kept destructors under `ReleasableRunsDestructors`.
fn resources_releasable(core: &Core, device: &CpuDevice, drains: bool) -> bool {
    if device.has(Defect::ReleasableNeverTrue) {
        return false;
    }
    if drains && device.has(Defect::ReleasableRunsDestructors) {
        // Terminal work's values are kept as its release runs, just after the
        // phase changed: wait (briefly) for that, so this call surely runs
        // their destructors.
        if core
            .try_observe()
            .is_some_and(|seen| seen.phase.is_terminal())
        {
            let deadline = Instant::now().checked_add(Duration::from_millis(100));
            core.wait_for(deadline, |seen| seen.released);
        }
        drain_kept(core);
    }
    match core.try_observe() {
        None => false,
        Some(seen) => {
            seen.phase.is_terminal()
                || (device.has(Defect::ReleasableEarly)
                    && (seen.error.is_some() || seen.cancel_requested))
                || (device.has(Defect::ReleasableAfterDeadline) && seen.deadline_passed)
        }
    }
}

/// Drops the values the EXC-8 destructor defect kept on terminal work
/// (values of live work stay: they are still retained).
fn drain_kept(core: &Core) {
    if core.observe().phase.is_terminal() {
        drop(core.take_retained());
    }
}

impl BoundedCompletion for CpuCompletion {
    /// Both modes, except `NativeCancel` in a process of the
    /// [`crate::Personality::CollectivesCancel`] personality.
    fn supports_cancellation(mode: CompletionCancellationMode) -> bool {
        mode == CompletionCancellationMode::QuarantineUntilComplete
            || crate::personality::transfers_cancel()
    }

    fn wait_bounded(
        self,
        policy: BoundedCompletionWait,
    ) -> Result<BoundedCompletionOutcome, CpuError> {
        self.launch();
        let mode = policy.cancellation();
        let timeout = if self.has(Defect::EarlyDeadline) {
            (policy.timeout() / 4).max(Duration::from_nanos(1))
        } else {
            policy.timeout()
        };
        let deadline = if self.has(Defect::DeadlineOverflow) {
            #[allow(clippy::unchecked_time_subtraction, reason = "the CAN-8 defect")]
            Some(Instant::now() + timeout)
        } else {
            // `None`: the deadline is beyond what `Instant` can represent.
            Instant::now().checked_add(timeout)
        };
        let seen = self.wait_until(deadline, |seen| {
            seen.phase.is_terminal() || seen.error.is_some()
        });
        if let Some(error) = seen.error {
            if seen.phase.is_terminal() {
                if self.has(Defect::FailedIsCompleted) {
                    return Ok(BoundedCompletionOutcome::Completed);
                }
                return Err(error);
            }
            // Live work with an error: never return by merely dropping it (CAN-7).
            if self.has(Defect::ErrorDropsLive) {
                drop(self.core.take_retained());
                return Err(error);
            }
            self.dispose(mode);
            return Err(error);
        }
        if seen.phase == Phase::Completed {
            return Ok(BoundedCompletionOutcome::Completed);
        }
        if self.has(Defect::CompletedAtDeadline) {
            return Ok(BoundedCompletionOutcome::Completed);
        }
        // Recorded before the disposition, so other handles see it for the
        // whole NativeCancel teardown too (the EXC-8 defect reads it).
        self.core.mark_deadline_passed();
        if mode == CompletionCancellationMode::NativeCancel
            && self.operation == "send_receive"
            && !crate::personality::transfers_cancel()
        {
            // A transfer of the collectives-cancel personality: never dropped
            // live, quarantined instead, and the unsupported policy refused.
            self.dispose(CompletionCancellationMode::QuarantineUntilComplete);
            return Err(CpuError::NativeCancelUnsupported {
                operation: self.operation,
            });
        }
        let after = self.dispose(mode);
        if after.phase == Phase::Completed && after.error.is_none() {
            // The work finished during teardown: it completed exactly.
            return Ok(BoundedCompletionOutcome::Completed);
        }
        let errors = self.has(Defect::NativeCancelErrors)
            || (self.rendezvous_send && self.has(Defect::RendezvousCancelErrors));
        if mode == CompletionCancellationMode::NativeCancel && errors {
            return Err(CpuError::Cancelled {
                operation: self.operation,
            });
        }
        let reported = if self.has(Defect::WrongCancellationMode) {
            match mode {
                CompletionCancellationMode::NativeCancel => {
                    CompletionCancellationMode::QuarantineUntilComplete
                }
                CompletionCancellationMode::QuarantineUntilComplete => {
                    CompletionCancellationMode::NativeCancel
                }
            }
        } else {
            mode
        };
        Ok(BoundedCompletionOutcome::DeadlineExceeded {
            cancellation: reported,
        })
    }
}

impl Drop for CpuCompletion {
    fn drop(&mut self) {
        if self.has(Defect::DropReleasesPending) && !self.core.observe().phase.is_terminal() {
            drop(self.core.take_retained());
        }
        // The EXC-8 destructor defect keeps released values for the next
        // `resources_releasable` call, but never past the completion's life
        // (it breaks EXC-8 only, and leaks nothing).
        if self.has(Defect::ReleasableRunsDestructors) {
            drain_kept(&self.core);
        }
    }
}
