//! What rank 0 keeps of each submission besides the model's record: its
//! backend handles ([`Live`]: the completion, the liveness probes on its
//! inputs and outputs, the observer, the outputs' verification), and the
//! drop flags of the values given to `retain_until_complete` ([`Flag`]),
//! which also tell whether a value was dropped inside a
//! `resources_releasable` call on the calling thread (EXC-8).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::reference::HandleState;
use super::scheduler::Scheduler;
use crate::harness::{Harness, Observer, Probe, WorkState};
use crate::matrix::{Handle, Pending, Submitted, Verify};

/// Which thread ([`Scheduler::thread`]) is inside a `resources_releasable`
/// call of rank 0 (zero: none), shared with the drop flags.
#[derive(Clone)]
pub(super) struct Releasing {
    scheduler: Arc<dyn Scheduler>,
    inside: Arc<AtomicU64>,
}

impl Releasing {
    pub(super) fn new(scheduler: Arc<dyn Scheduler>) -> Self {
        Self {
            scheduler,
            inside: Arc::default(),
        }
    }

    /// Marks the calling thread as inside `resources_releasable` until the
    /// returned guard is dropped.
    pub(super) fn enter(&self) -> Inside<'_> {
        self.inside.store(self.scheduler.thread(), Ordering::SeqCst);
        Inside(self)
    }

    /// Whether the calling thread is inside `resources_releasable`.
    pub(super) fn here(&self) -> bool {
        self.inside.load(Ordering::SeqCst) == self.scheduler.thread()
    }
}

/// Marks a thread as inside `resources_releasable` until dropped.
pub(super) struct Inside<'r>(&'r Releasing);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.inside.store(0, Ordering::SeqCst);
    }
}

/// What a value given to `retain_until_complete` reports: whether it was
/// dropped, and whether that happened inside a `resources_releasable` call
/// on the calling thread (EXC-8: the call runs no application destructor).
#[derive(Clone, Default)]
pub(super) struct Flag {
    dropped: Arc<AtomicBool>,
    pub(super) inside: Arc<AtomicBool>,
}

impl Flag {
    pub(super) fn dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// Sets its flags when dropped (a value given to `retain_until_complete`).
pub(super) struct DropFlag(pub(super) Flag, pub(super) Releasing);

impl Drop for DropFlag {
    fn drop(&mut self) {
        if self.1.here() {
            self.0.inside.store(true, Ordering::SeqCst);
        }
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// Backend handles of one submission (the model's record has the rest).
pub(super) struct Live<'c, 'w, H: Harness> {
    /// Held or late-peer work: the matrix's pending submission.
    pub(super) pending: Option<Pending<'c, 'w, H>>,
    /// Unheld work.
    pub(super) direct: Option<Handle<H>>,
    /// Driver index in claim order (collectives).
    pub(super) driver: usize,
    pub(super) observer: Option<Observer>,
    pub(super) inputs: Vec<Probe>,
    pub(super) outputs: Vec<Probe>,
    pub(super) verify: Option<Verify<H>>,
    pub(super) flags: Vec<Flag>,
    /// The terminal state the observer reported, once it did.
    pub(super) terminal: Option<WorkState>,
    /// An observation found every resource of the submission alive (the
    /// backend was retaining them). Without it, a release blamed on an
    /// injected fault (EXC-7) may as well be a resource never retained.
    pub(super) retained_seen: bool,
    /// A second handle on the work (`Harness::second_handle`), taken when
    /// `wait_bounded` consumed the completion: EXC-8's timeout clause is
    /// read on it.
    pub(super) second: Option<Handle<H>>,
}

impl<'c, 'w, H: Harness> Live<'c, 'w, H> {
    pub(super) fn new(
        pending: Option<Pending<'c, 'w, H>>,
        direct: Option<Submitted<H>>,
        driver: usize,
    ) -> Self {
        let mut live = Self {
            pending,
            direct: None,
            driver,
            observer: None,
            inputs: Vec::new(),
            outputs: Vec::new(),
            verify: None,
            flags: Vec::new(),
            terminal: None,
            retained_seen: false,
            second: None,
        };
        let parts = match (&mut live.pending, direct) {
            (Some(pending), _) => Parts::of(&mut pending.submitted),
            (None, Some(mut submitted)) => {
                let parts = Parts::of(&mut submitted);
                live.direct = Some(submitted.completion);
                parts
            }
            (None, None) => Parts::default(),
        };
        live.inputs = parts.inputs;
        live.outputs = parts.outputs;
        live.verify = parts.verify;
        live
    }

    pub(super) fn completion(&self, state: HandleState) -> Option<&Handle<H>> {
        if state != HandleState::Held {
            return None;
        }
        match &self.pending {
            Some(pending) => Some(&pending.submitted.completion),
            None => self.direct.as_ref(),
        }
    }

    pub(super) fn probes(&self) -> impl Iterator<Item = &Probe> {
        self.inputs.iter().chain(&self.outputs)
    }

    pub(super) fn all_released(&self) -> bool {
        self.probes().all(|p| !p.is_live()) && self.flags.iter().all(Flag::dropped)
    }
}

/// What the caller keeps of a submission besides its completion.
pub(super) struct Parts<H: Harness> {
    pub(super) inputs: Vec<Probe>,
    pub(super) outputs: Vec<Probe>,
    pub(super) verify: Option<Verify<H>>,
}

impl<H: Harness> Default for Parts<H> {
    fn default() -> Self {
        Self {
            inputs: Vec::new(),
            outputs: Vec::new(),
            verify: None,
        }
    }
}

impl<H: Harness> Parts<H> {
    pub(super) fn of(submitted: &mut Submitted<H>) -> Self {
        Self {
            inputs: std::mem::take(&mut submitted.input_probes),
            outputs: std::mem::take(&mut submitted.output_probes),
            verify: submitted.verify.take(),
        }
    }
}
