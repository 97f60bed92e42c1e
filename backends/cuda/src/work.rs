//! One submission's shared state and its completion handles.
//!
//! A work item is a stretch of one stream: optional waits (inputs' events,
//! a collective's gates), a `started` mark the stream writes when its device
//! part begins, kernels that poll the item's cancel word and report into its
//! error word, and the completion event recorded last. The item retains its
//! resources until that event completed (or until a NativeCancel teardown
//! proved that no kernel touches them); the reaper ([`crate::reaper`])
//! releases them when nobody is looking, so dropping a completion never
//! releases anything (RET-4).
//!
//! ```text
//!            event completed, error word 0
//!  Pending ─────────────────────────────────▶ Completed
//!    │  │    event completed, error word ≠ 0 or a host-side error
//!    │  └─────────────────────────────────▶ Failed
//!    │ NativeCancel teardown
//!    ▼
//!  Cancelled
//! ```

use crate::defect::Defect;
use crate::device::StreamLease;
use crate::error::CudaError;
use crate::ffi::{Event, HostSlot};
use crate::reaper::{Pollable, Polled, Registry};
use eredu_core::{
    BoundedCompletion, BoundedCompletionOutcome, BoundedCompletionWait, Completion,
    CompletionCancellationMode,
};
use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A value kept alive until the work no longer uses it.
pub(crate) type Retained = Box<dyn Any + Send>;

/// Error-word codes (`kernels/commcheck.cu`).
pub(crate) const CODE_CANCELLED: u32 = 1;
const CODE_HEADER_MISMATCH: u32 = 2;
pub(crate) const CODE_INJECTED_FAULT: u32 = 3;

/// Where a work item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Submitted; the device may still use its resources.
    Pending,
    /// Completed exactly, without error.
    Completed,
    /// Finished with an error.
    Failed,
    /// Torn down by a NativeCancel deadline.
    Cancelled,
}

impl Phase {
    /// Whether the device has stopped using the work's resources for good.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Pending)
    }
}

struct State {
    phase: Phase,
    error: Option<CudaError>,
    retained: Vec<Retained>,
    released: bool,
    cancel_requested: bool,
    quarantined: bool,
    /// The completion event was seen complete: the device is done with the
    /// item's own words and its stream.
    device_done: bool,
}

/// What a collective member's work needs from its instance on teardown.
pub(crate) trait Rendezvous: Send + Sync {
    /// Cancels the whole instance because of member `member`: every
    /// member's cancel word is set and its gates opened; returns the events
    /// of members whose kernels may be running, to wait for before
    /// `member`'s buffers may go.
    fn cancel(&self, member: usize, reason: &str) -> Vec<Arc<Event>>;
}

/// The shared state of one submission.
pub(crate) struct Work {
    pub(crate) operation: &'static str,
    /// `None`: nothing was enqueued (terminal at birth).
    event: Option<Arc<Event>>,
    started: Option<HostSlot>,
    error: HostSlot,
    cancel: HostSlot,
    /// Words and buffers the device uses until the event completed.
    device_owned: Mutex<Vec<Retained>>,
    lease: Mutex<Option<Arc<StreamLease>>>,
    rendezvous: Mutex<Option<(Arc<dyn Rendezvous>, usize)>>,
    quarantined_counter: Arc<AtomicUsize>,
    counts: bool,
    defect: Option<Defect>,
    registry: Arc<Registry>,
    state: Mutex<State>,
    changed: Condvar,
}

/// The parts of a work item its submission built.
pub(crate) struct Parts {
    pub(crate) operation: &'static str,
    pub(crate) event: Option<Arc<Event>>,
    pub(crate) started: Option<HostSlot>,
    pub(crate) error: HostSlot,
    pub(crate) cancel: HostSlot,
    pub(crate) device_owned: Vec<Retained>,
    pub(crate) lease: Option<Arc<StreamLease>>,
    pub(crate) retained: Vec<Retained>,
    pub(crate) quarantined_counter: Arc<AtomicUsize>,
    /// An error known at submission (the work then fails however it ends).
    pub(crate) failed: Option<CudaError>,
    /// Whether the ledger counts it as pending work.
    pub(crate) counts: bool,
    /// The device's planted defect.
    pub(crate) defect: Option<Defect>,
    /// The device's registry (the `WaitForDevice` defect looks at it).
    pub(crate) registry: Arc<Registry>,
}

impl Work {
    pub(crate) fn new(parts: Parts) -> Arc<Self> {
        let terminal = parts.event.is_none();
        let phase = match (&parts.failed, terminal) {
            (_, false) => Phase::Pending,
            (Some(_), true) => Phase::Failed,
            (None, true) => Phase::Completed,
        };
        let work = Arc::new(Self {
            operation: parts.operation,
            event: parts.event,
            started: parts.started,
            error: parts.error,
            cancel: parts.cancel,
            device_owned: Mutex::new(parts.device_owned),
            lease: Mutex::new(parts.lease),
            rendezvous: Mutex::new(None),
            quarantined_counter: parts.quarantined_counter,
            counts: parts.counts,
            defect: parts.defect,
            registry: parts.registry,
            state: Mutex::new(State {
                phase,
                error: parts.failed,
                retained: if terminal { Vec::new() } else { parts.retained },
                released: terminal,
                cancel_requested: false,
                quarantined: false,
                device_done: terminal,
            }),
            changed: Condvar::new(),
        });
        // ErrorReleases: an error known at submission (an injected fault)
        // is reported while the work is live, and the defect frees what the
        // work still uses, as `publish` does for a later error.
        if !terminal && work.has(Defect::ErrorReleases) && work.lock().error.is_some() {
            work.drop_retained();
        }
        work
    }

    fn has(&self, defect: Defect) -> bool {
        self.defect == Some(defect)
    }

    /// Drops what the work retains now, live or not (planted defects only).
    fn drop_retained(&self) {
        let released = std::mem::take(&mut self.lock().retained);
        drop(released);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the work to a collective instance as member `member`.
    pub(crate) fn join(&self, rendezvous: Arc<dyn Rendezvous>, member: usize) {
        *self.rendezvous.lock().unwrap_or_else(|p| p.into_inner()) = Some((rendezvous, member));
    }

    /// The completion event (a consumer's stream waits on it).
    pub(crate) fn event(&self) -> Option<&Arc<Event>> {
        self.event.as_ref()
    }

    /// Adds a retained value; hands it back when the work is already terminal.
    pub(crate) fn retain(&self, value: Retained) -> Result<(), Retained> {
        let mut state = self.lock();
        if state.phase.is_terminal() {
            return Err(value);
        }
        state.retained.push(value);
        Ok(())
    }

    /// Publishes a sticky error while the work may still be live.
    pub(crate) fn publish(&self, error: CudaError) {
        let mut state = self.lock();
        if state.error.is_none() {
            state.error = Some(error);
        }
        let live = !state.phase.is_terminal();
        drop(state);
        if live && self.has(Defect::ErrorReleases) {
            self.drop_retained();
        }
        self.changed.notify_all();
    }

    /// Sets the cancel word: kernels of this item stop at their next tile.
    pub(crate) fn set_cancel(&self) {
        self.cancel.store(1);
    }

    /// Whether the device part has begun (kernels may be touching buffers).
    pub(crate) fn has_started(&self) -> bool {
        self.started.as_ref().is_none_or(|s| s.load() != 0)
    }

    fn meaning(&self, code: u32) -> CudaError {
        match code {
            CODE_CANCELLED => CudaError::Cancelled {
                operation: self.operation,
                reason: "its kernels were cancelled".into(),
            },
            CODE_HEADER_MISMATCH => CudaError::Device {
                operation: self.operation,
                code: code as i32,
                meaning: "the header bytes received differ from the expected header (P2P-2)",
            },
            CODE_INJECTED_FAULT => CudaError::InjectedFault {
                operation: self.operation,
            },
            _ => CudaError::Device {
                operation: self.operation,
                code: code as i32,
                meaning: "unknown error code",
            },
        }
    }

    /// Moves the item on without blocking: publishes an error its kernels
    /// already wrote, and settles it once its event completed. Returns
    /// whether it is terminal.
    pub(crate) fn settle(&self) -> bool {
        {
            let state = self.lock();
            if state.device_done {
                return state.phase.is_terminal();
            }
        }
        let complete = match &self.event {
            None => true,
            Some(event) => match event.query() {
                Ok(complete) => complete,
                Err(error) => {
                    // The context failed: nothing on it runs any more.
                    self.publish(error);
                    true
                }
            },
        };
        let code = self.error.load();
        if !complete {
            if code != 0 && code != CODE_CANCELLED {
                self.publish(self.meaning(code));
            }
            return self.lock().phase.is_terminal();
        }
        let mut state = self.lock();
        state.device_done = true;
        let mut released = Vec::new();
        if !state.phase.is_terminal() {
            state.phase = if state.error.is_some() {
                Phase::Failed
            } else if state.cancel_requested {
                // Its end came from the cancellation (the cancel word, or
                // gates the teardown opened), whatever its kernels wrote:
                // cancelled, never completed.
                state.error = Some(self.meaning(CODE_CANCELLED));
                Phase::Cancelled
            } else if code != 0 {
                state.error = Some(self.meaning(code));
                Phase::Failed
            } else {
                Phase::Completed
            };
            released = std::mem::take(&mut state.retained);
        }
        let quarantined = std::mem::replace(&mut state.quarantined, false);
        drop(state);
        if self.has(Defect::LeakRetained) {
            std::mem::forget(released);
        } else {
            drop(released);
        }
        if quarantined {
            self.quarantined_counter.fetch_sub(1, Ordering::SeqCst);
        }
        let lease = self.lease.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(lease);
        drop(std::mem::take(
            &mut *self.device_owned.lock().unwrap_or_else(|p| p.into_inner()),
        ));
        self.lock().released = true;
        self.changed.notify_all();
        true
    }

    /// The phase and sticky error now.
    pub(crate) fn observe(&self) -> (Phase, Option<CudaError>) {
        let state = self.lock();
        (state.phase, state.error.clone())
    }

    /// Nonblocking: `None` when the state is contended.
    fn try_observe(&self) -> Option<(Phase, bool)> {
        let state = self.state.try_lock().ok()?;
        Some((state.phase, state.released))
    }

    /// NativeCancel: requests cancellation of the item (of its whole
    /// collective instance), and returns once no kernel touches its
    /// resources any more and they were released.
    fn tear_down(&self, reason: &str) {
        // Work that already completed is not cancelled.
        if self.settle() {
            return;
        }
        self.lock().cancel_requested = true;
        self.set_cancel();
        let rendezvous = self
            .rendezvous
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((rendezvous, member)) = rendezvous {
            for event in rendezvous.cancel(member, reason) {
                let _ = event.synchronize();
            }
        }
        if self.has_started() {
            // Its kernels may be running: they stop at their next tile.
            if let Some(event) = &self.event {
                let _ = event.synchronize();
            }
            self.settle();
            // The reaper may be settling it at the same time: teardown is
            // over only once everything retained was released.
            let mut state = self.lock();
            while !state.released {
                state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            return;
        }
        // The cancel word was set before the stream reached the item: its
        // kernels will touch nothing. Release now; the reaper keeps the
        // item's own words until the stream gets past them.
        let mut state = self.lock();
        if state.phase.is_terminal() {
            return;
        }
        state.phase = Phase::Cancelled;
        if state.error.is_none() {
            state.error = Some(CudaError::Cancelled {
                operation: self.operation,
                reason: reason.to_string(),
            });
        }
        let released = std::mem::take(&mut state.retained);
        drop(state);
        drop(released);
        self.lock().released = true;
        self.changed.notify_all();
    }

    /// Quarantine: the reaper keeps the item (it already does) and releases
    /// it once its event completed.
    fn quarantine(&self) {
        let mut state = self.lock();
        if !state.phase.is_terminal() && !state.quarantined {
            state.quarantined = true;
            self.quarantined_counter.fetch_add(1, Ordering::SeqCst);
        }
        drop(state);
        if self.has(Defect::QuarantineDropsLive) {
            self.drop_retained();
        }
    }
}

impl Pollable for Work {
    fn poll(&self) -> Polled {
        let was = self.lock().device_done;
        if was {
            return Polled::Done;
        }
        self.settle();
        if self.lock().device_done {
            Polled::Done
        } else {
            Polled::Pending
        }
    }

    fn unreleased(&self) -> bool {
        self.counts && !self.lock().released
    }
}

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
