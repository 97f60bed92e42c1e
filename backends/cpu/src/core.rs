//! The completion state machine shared by every kind of work item.
//!
//! ```text
//!            start            finish(Ok)
//!  Queued ─────────▶ Running ───────────▶ Completed
//!    │                 │  │   finish(Err)
//!    │ cancel          │  └─────────────▶ Failed
//!    ▼                 │ cancel requested, work observes it
//!  Cancelled ◀─────────┘
//! ```
//!
//! Resources retained by a completion live in [`Core`] until the state is
//! terminal, and are handed back to the caller of the transition so that they
//! are dropped outside the lock (RET-4, RET-6, EXC-8). An error may be
//! *published* while work is still running (an asynchronous fault): it is
//! sticky from then on (EXC-6) but is not release (EXC-7).
//!
//! Built on [`crate::sync`], so the loom suite can explore its interleavings.

use crate::error::CpuError;
use crate::sync::{lock, Condvar, Instant, Mutex, MutexGuard};
use std::any::Any;

/// A value kept alive until the work reaches a terminal state.
pub type Retained = Box<dyn Any + Send>;

/// What running work that blocks on something else (a rendezvous, a
/// mailbox) registers with [`Core::wake_on_cancel`], so a cancellation
/// request wakes it instead of the work polling for one.
pub type CancelWake = std::sync::Arc<dyn Fn() + Send + Sync>;

/// Where a work item is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Submitted, not started.
    Queued,
    /// Started on its executor; native work may touch retained resources.
    Running,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
    /// Torn down by a `NativeCancel` deadline.
    Cancelled,
}

impl Phase {
    /// Whether native work has stopped for good.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What an observer sees at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Lifecycle phase.
    pub phase: Phase,
    /// The sticky error, once one was published.
    pub error: Option<CpuError>,
    /// Whether a `NativeCancel` request is outstanding or was honoured.
    pub cancel_requested: bool,
    /// Whether the completion was handed to the quarantine owner.
    pub quarantined: bool,
    /// Whether the retained resources of terminal work have been released
    /// (native teardown is over: nothing the work used is still accounted).
    pub released: bool,
    /// Whether a `wait_bounded` on this work passed its deadline (the work was
    /// then torn down or quarantined). This alone never makes resources
    /// releasable (EXC-8).
    pub deadline_passed: bool,
}

struct Inner {
    phase: Phase,
    error: Option<CpuError>,
    cancel_requested: bool,
    quarantined: bool,
    released: bool,
    deadline_passed: bool,
    retained: Vec<Retained>,
    /// Threads blocked on `changed` (in [`Core::wait_for`]). Changes notify
    /// only when there is one, so work nobody waits on costs no wake-up call.
    waiters: usize,
    /// Called once a cancellation request reaches running work.
    cancel_wake: Option<CancelWake>,
}

/// Result of a cancellation request.
pub enum CancelRequest {
    /// The work had not started: it is cancelled, and these retained values are released.
    TornDown(Vec<Retained>),
    /// The work is running; it will observe the request.
    Requested,
    /// The work had already reached a terminal state.
    AlreadyTerminal,
}

/// A planted defect of the core itself, compiled only for the loom suite
/// (`--cfg commcheck_loom`): each is a small, plausible edit of one
/// transition that breaks one SPEC invariant ([`Mutant::invariant`]) in
/// the interleavings that reach it, so the loom models can show that they
/// find it. Chosen per core with [`Core::with_mutant`]; a core without one is
/// the shipped state machine, and a normal build has neither the type nor
/// the field.
#[cfg(commcheck_loom)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// `wait_for` checks the state under one lock acquisition and blocks
    /// under another: a change in between is never seen (lost wake-up).
    StaleWaitCheck,
    /// `request_cancel` reads the phase, unlocks, and acts on what it read:
    /// work that started in between is torn down as if it were queued.
    CancelCheckThenAct,
    /// `start` checks for `Queued`, unlocks, and then sets `Running`: work
    /// torn down in between starts anyway (and may later complete).
    StartCheckThenAct,
    /// `retain` hands the value back unless the work is still queued
    /// (started work is taken for finished).
    RetainRejectsRunning,
    /// `mark_quarantined` releases the retained values (the quarantine owner
    /// keeps the work but not what it uses).
    QuarantineReleases,
    /// `mark_quarantined` also requests native cancellation.
    QuarantineCancels,
    /// `observe` reports a published error once: it takes it out of the state.
    ReportErrorOnce,
    /// [`Core::completed`] is born unreleased.
    BornUnreleased,
}

#[cfg(commcheck_loom)]
impl Mutant {
    /// Every mutant.
    pub const ALL: &'static [Mutant] = &[
        Mutant::StaleWaitCheck,
        Mutant::CancelCheckThenAct,
        Mutant::StartCheckThenAct,
        Mutant::RetainRejectsRunning,
        Mutant::QuarantineReleases,
        Mutant::QuarantineCancels,
        Mutant::ReportErrorOnce,
        Mutant::BornUnreleased,
    ];

    /// SPEC ID of the invariant the mutant breaks.
    pub const fn invariant(self) -> &'static str {
        match self {
            Mutant::StaleWaitCheck => "EXC-4",
            Mutant::CancelCheckThenAct => "EXC-8",
            Mutant::StartCheckThenAct => "CAN-5",
            Mutant::RetainRejectsRunning => "RET-6",
            Mutant::QuarantineReleases => "CAN-6",
            Mutant::QuarantineCancels => "CAN-3",
            Mutant::ReportErrorOnce => "EXC-6",
            Mutant::BornUnreleased => "EXC-10",
        }
    }
}

/// Shared state of one work item's completion.
pub struct Core {
    inner: Mutex<Inner>,
    changed: Condvar,
    #[cfg(commcheck_loom)]
    mutant: Option<Mutant>,
}

impl Core {
    pub fn new(retained: Vec<Retained>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                phase: Phase::Queued,
                error: None,
                cancel_requested: false,
                quarantined: false,
                released: false,
                deadline_passed: false,
                retained,
                waiters: 0,
                cancel_wake: None,
            }),
            changed: Condvar::new(),
            #[cfg(commcheck_loom)]
            mutant: None,
        }
    }

    /// Work that was exactly complete when it was submitted (it had nothing
    /// left to do, see [`crate::executor`]): `Completed` and released from
    /// the start, retaining nothing.
    pub fn completed() -> Self {
        Self {
            inner: Mutex::new(Inner {
                phase: Phase::Completed,
                error: None,
                cancel_requested: false,
                quarantined: false,
                released: true,
                deadline_passed: false,
                retained: Vec::new(),
                waiters: 0,
                cancel_wake: None,
            }),
            changed: Condvar::new(),
            #[cfg(commcheck_loom)]
            mutant: None,
        }
    }

    /// The same core with `mutant` planted (loom suite only).
    #[cfg(commcheck_loom)]
    pub fn with_mutant(mut self, mutant: Mutant) -> Self {
        if mutant == Mutant::BornUnreleased {
            lock(&self.inner).released = false;
        }
        self.mutant = Some(mutant);
        self
    }

    #[cfg(commcheck_loom)]
    fn has_mutant(&self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// Releases the lock after a change of state, waking the threads blocked
    /// in [`Core::wait_for`], if any. A waiter registers under the lock before
    /// it blocks, so none can miss the change.
    fn changed_unlock(&self, inner: MutexGuard<'_, Inner>) {
        let waiters = inner.waiters > 0;
        drop(inner);
        if waiters {
            self.changed.notify_all();
        }
    }

    /// Adds a retained value. Returns it back when the work is already terminal.
    pub fn retain(&self, value: Retained) -> Result<(), Retained> {
        let mut inner = lock(&self.inner);
        if inner.phase.is_terminal() {
            return Err(value);
        }
        #[cfg(commcheck_loom)]
        if self.has_mutant(Mutant::RetainRejectsRunning) && inner.phase != Phase::Queued {
            return Err(value);
        }
        inner.retained.push(value);
        Ok(())
    }

    /// Queued → Running. `false` when the item was cancelled before it started.
    pub fn start(&self) -> bool {
        let mut inner = lock(&self.inner);
        if inner.phase != Phase::Queued {
            return false;
        }
        #[cfg(commcheck_loom)]
        if self.has_mutant(Mutant::StartCheckThenAct) {
            drop(inner);
            inner = lock(&self.inner);
        }
        inner.phase = Phase::Running;
        self.changed_unlock(inner);
        true
    }

    /// Publishes a sticky error while the work may still be live.
    pub fn publish_error(&self, error: CpuError) {
        let mut inner = lock(&self.inner);
        if inner.error.is_none() {
            inner.error = Some(error);
        }
        self.changed_unlock(inner);
    }

    /// Takes the retained values while work is still live (planted defects only).
    pub fn take_retained(&self) -> Vec<Retained> {
        std::mem::take(&mut lock(&self.inner).retained)
    }

    /// Keeps values on terminal work, for the completion to drop later
    /// (the EXC-8 destructor defect only).
    pub fn keep_after_end(&self, values: Vec<Retained>) {
        lock(&self.inner).retained.extend(values);
    }

    pub fn cancel_requested(&self) -> bool {
        lock(&self.inner).cancel_requested
    }

    /// Registers `wake` to be called (outside this core's lock) when
    /// cancellation is requested while the work runs, in place of any
    /// registered before; `None` unregisters. A caller that registers,
    /// then checks [`Core::cancel_requested`] under the lock its wait
    /// releases, and whose `wake` takes that lock before notifying, misses
    /// no request.
    pub fn wake_on_cancel(&self, wake: Option<CancelWake>) {
        lock(&self.inner).cancel_wake = wake;
    }

    /// Running → terminal. Returns the retained values to drop outside the
    /// lock, or `None` when the work was terminal already.
    ///
    /// `Err(Cancelled)` after a cancellation request ends in `Cancelled`; any
    /// other error, or an error published earlier, ends in `Failed`.
    pub fn finish(&self, outcome: Result<(), CpuError>) -> Option<Vec<Retained>> {
        let mut inner = lock(&self.inner);
        if inner.phase.is_terminal() {
            return None;
        }
        inner.phase = match outcome {
            Err(CpuError::Cancelled { .. }) if inner.cancel_requested => Phase::Cancelled,
            Err(error) => {
                if inner.error.is_none() {
                    inner.error = Some(error);
                }
                Phase::Failed
            }
            Ok(()) if inner.error.is_some() => Phase::Failed,
            Ok(()) => Phase::Completed,
        };
        if inner.phase == Phase::Cancelled && inner.error.is_none() {
            inner.error = Some(CpuError::Cancelled {
                operation: "cancelled work",
            });
        }
        let retained = std::mem::take(&mut inner.retained);
        self.changed_unlock(inner);
        Some(retained)
    }

    /// Requests native cancellation.
    pub fn request_cancel(&self, operation: &'static str) -> CancelRequest {
        let mut inner = lock(&self.inner);
        let phase = inner.phase;
        #[cfg(commcheck_loom)]
        if self.has_mutant(Mutant::CancelCheckThenAct) {
            drop(inner);
            inner = lock(&self.inner);
        }
        match phase {
            Phase::Queued => {
                inner.cancel_requested = true;
                inner.phase = Phase::Cancelled;
                if inner.error.is_none() {
                    inner.error = Some(CpuError::Cancelled { operation });
                }
                let retained = std::mem::take(&mut inner.retained);
                self.changed_unlock(inner);
                CancelRequest::TornDown(retained)
            }
            Phase::Running => {
                inner.cancel_requested = true;
                let wake = inner.cancel_wake.clone();
                self.changed_unlock(inner);
                if let Some(wake) = wake {
                    wake();
                }
                CancelRequest::Requested
            }
            _ => CancelRequest::AlreadyTerminal,
        }
    }

    /// Records that the retained values of terminal work were released.
    pub fn mark_released(&self) {
        let mut inner = lock(&self.inner);
        inner.released = true;
        self.changed_unlock(inner);
    }

    /// Records that a `wait_bounded` on this work passed its deadline.
    pub fn mark_deadline_passed(&self) {
        let mut inner = lock(&self.inner);
        inner.deadline_passed = true;
        self.changed_unlock(inner);
    }

    pub fn mark_quarantined(&self) {
        lock(&self.inner).quarantined = true;
        #[cfg(commcheck_loom)]
        {
            if self.has_mutant(Mutant::QuarantineCancels) {
                lock(&self.inner).cancel_requested = true;
            }
            if self.has_mutant(Mutant::QuarantineReleases) {
                drop(self.take_retained());
            }
        }
    }

    pub fn observe(&self) -> Observation {
        #[cfg(commcheck_loom)]
        if self.has_mutant(Mutant::ReportErrorOnce) {
            let mut inner = lock(&self.inner);
            let error = inner.error.take();
            return Observation {
                phase: inner.phase,
                error,
                cancel_requested: inner.cancel_requested,
                quarantined: inner.quarantined,
                released: inner.released,
                deadline_passed: inner.deadline_passed,
            };
        }
        let inner = lock(&self.inner);
        Observation {
            phase: inner.phase,
            error: inner.error.clone(),
            cancel_requested: inner.cancel_requested,
            quarantined: inner.quarantined,
            released: inner.released,
            deadline_passed: inner.deadline_passed,
        }
    }

    /// Nonblocking: `None` when the lock is contended.
    pub fn try_observe(&self) -> Option<Observation> {
        let inner = self.inner.try_lock().ok()?;
        Some(Observation {
            phase: inner.phase,
            error: inner.error.clone(),
            cancel_requested: inner.cancel_requested,
            quarantined: inner.quarantined,
            released: inner.released,
            deadline_passed: inner.deadline_passed,
        })
    }

    /// Polls briefly before blocking: on an idle machine a sleeping thread
    /// takes tens of microseconds to wake, longer than most work takes.
    #[cfg(not(commcheck_loom))]
    fn spin_for(
        &self,
        deadline: Option<Instant>,
        stop: &impl Fn(&Observation) -> bool,
    ) -> Option<Observation> {
        // Work that is already done (say, run inline) answers without a clock read.
        let seen = self.observe();
        if stop(&seen) {
            return Some(seen);
        }
        let until = Instant::now() + crate::sync::SPIN;
        let until = deadline.map_or(until, |deadline| deadline.min(until));
        loop {
            if Instant::now() >= until {
                return None;
            }
            std::thread::yield_now();
            let seen = self.observe();
            if stop(&seen) {
                return Some(seen);
            }
        }
    }

    /// Polls the state in a busy loop, never sleeping, until `stop` holds
    /// or `deadline` passes (the spin-wait personality's waits). `None`
    /// under loom, which explores blocking waits only: the caller blocks.
    #[cfg(not(commcheck_loom))]
    pub(crate) fn spin_until(
        &self,
        deadline: Option<Instant>,
        stop: &impl Fn(&Observation) -> bool,
    ) -> Option<Observation> {
        loop {
            let seen = self.observe();
            if stop(&seen) || deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return Some(seen);
            }
            std::hint::spin_loop();
        }
    }

    /// Loom explores blocking waits only.
    #[cfg(commcheck_loom)]
    pub(crate) fn spin_until(
        &self,
        _deadline: Option<Instant>,
        _stop: &impl Fn(&Observation) -> bool,
    ) -> Option<Observation> {
        None
    }

    /// Loom explores blocking waits only.
    #[cfg(commcheck_loom)]
    fn spin_for(
        &self,
        _deadline: Option<Instant>,
        _stop: &impl Fn(&Observation) -> bool,
    ) -> Option<Observation> {
        None
    }

    /// Blocks until `stop` holds for the state, or until `deadline` passes
    /// (`None` waits without bound). Returns the last observation.
    pub fn wait_for(
        &self,
        deadline: Option<Instant>,
        stop: impl Fn(&Observation) -> bool,
    ) -> Observation {
        if let Some(seen) = self.spin_for(deadline, &stop) {
            return seen;
        }
        let mut inner = lock(&self.inner);
        loop {
            let seen = Observation {
                phase: inner.phase,
                error: inner.error.clone(),
                cancel_requested: inner.cancel_requested,
                quarantined: inner.quarantined,
                released: inner.released,
                deadline_passed: inner.deadline_passed,
            };
            if stop(&seen) {
                return seen;
            }
            #[cfg(commcheck_loom)]
            if self.has_mutant(Mutant::StaleWaitCheck) {
                drop(inner);
                inner = lock(&self.inner);
            }
            match deadline {
                None => {
                    inner.waiters += 1;
                    inner = match self.changed.wait(inner) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                    inner.waiters -= 1;
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return seen;
                    }
                    inner.waiters += 1;
                    inner = match self.changed.wait_timeout(inner, deadline - now) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                    inner.waiters -= 1;
                }
            }
        }
    }
}
