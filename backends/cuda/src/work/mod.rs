//! One submission's shared state: the work item the reaper polls, its
//! phase and sticky error, and what it retains (its completion handles,
//! the backend's `Completion`, are the child module `completion`).
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

mod completion;

use crate::defect::Defect;
use crate::device::StreamLease;
use crate::error::CudaError;
use crate::ffi::{Event, HostSlot};
use crate::reaper::{Pollable, Polled, Registry};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub use completion::{CompletionObserver, CudaCompletion};

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
