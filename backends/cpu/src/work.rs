//! Native work as an executor runs it: the body a submission queues, what
//! ends it when the body never runs, and what a running body can ask of its
//! executor (cancellation, the injected fault).
//!
//! Below every module that runs bodies or blocks inside them (the lanes of
//! [`crate::lane`], the rendezvous of [`crate::group`], the mailboxes of
//! [`crate::route`]), which all observe cancellation through [`WorkCtx`].

use std::time::Duration;

use crate::core::Core;
use crate::error::CpuError;
use std::sync::Arc;

use crate::sync::rt::{lock, Condvar, Mutex, MutexGuard};

/// How often blocked native work re-checks a cancellation request.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(1);

/// Native work body. It receives the context of its run and must return
/// `Err(CpuError::Cancelled)` promptly once [`WorkCtx::cancelled`] is true.
/// While it runs, the item's cancel token is current on the worker thread
/// ([`crate::cancel`]), so lazy values it evaluates abort with that error too.
pub(crate) type Body = Box<dyn FnOnce(&WorkCtx<'_>) -> Result<(), CpuError> + Send>;

/// Called instead of the body when work ends without its body running
/// (cancelled while queued, abandoned), so a collective can abort its
/// rendezvous and its peers fail instead of hanging.
pub(crate) type Abort = Box<dyn FnOnce(&str) + Send>;

/// What a submission queues: its body, and what to do if the body never runs.
pub(crate) struct Work {
    pub(crate) body: Body,
    pub(crate) abort: Option<Abort>,
}

impl Work {
    /// Work with nothing to undo if it never runs.
    pub(crate) fn local(body: Body) -> Self {
        Self { body, abort: None }
    }
}

/// What a running body can ask of its executor.
pub(crate) struct WorkCtx<'a> {
    core: &'a Core,
    operation: &'static str,
    fault: Option<CpuError>,
    stoppable: bool,
    /// Whether a blocked body polls for a cancellation request instead of
    /// being woken by it (the `NativeCancelNoTeardown` defect: teardown
    /// lags the request, as in a backend that notices it on its own).
    polled: bool,
}

impl<'a> WorkCtx<'a> {
    /// The context of one run of `operation`'s body on the work of `core`;
    /// `fault` is the fault injected into it, if any, and `stoppable` whether
    /// a `NativeCancel` request stops it.
    pub(crate) fn new(
        core: &'a Core,
        operation: &'static str,
        fault: Option<CpuError>,
        stoppable: bool,
    ) -> Self {
        Self {
            core,
            operation,
            fault,
            stoppable,
            polled: false,
        }
    }

    /// The same context, whose blocked body polls for a cancellation
    /// request (every [`CANCEL_POLL`]) instead of being woken by it.
    pub(crate) fn polled(self, polled: bool) -> Self {
        Self { polled, ..self }
    }

    /// Whether a `NativeCancel` teardown was requested (and stops this body).
    pub(crate) fn cancelled(&self) -> bool {
        self.stoppable && self.core.cancel_requested()
    }

    /// Runs `wait`, a body blocked on something else than its executor (a
    /// rendezvous, a mailbox), so that a `NativeCancel` request reaching it
    /// wakes it instead of the body polling: the request takes the lock
    /// that `parts` names in `owner`, then notifies the condition variable.
    /// A `wait` that checks [`WorkCtx::cancelled`] under that lock and
    /// blocks with [`WorkCtx::block`] therefore misses no request.
    pub(crate) fn wake_on_cancel<S, T, R>(
        &self,
        owner: &Arc<S>,
        parts: fn(&S) -> (&Mutex<T>, &Condvar),
        wait: impl FnOnce() -> R,
    ) -> R
    where
        S: Send + Sync + 'static,
        T: 'static,
    {
        if !self.stoppable || self.polled {
            return wait();
        }
        let owner = Arc::clone(owner);
        self.core.wake_on_cancel(Some(Arc::new(move || {
            let (mutex, condvar) = parts(&owner);
            drop(lock(mutex));
            condvar.notify_all();
        })));
        let result = wait();
        self.core.wake_on_cancel(None);
        result
    }

    /// Blocks on `condvar` (inside [`WorkCtx::wake_on_cancel`]) until it is
    /// notified, or for at most [`CANCEL_POLL`] when the body polls for
    /// cancellation instead.
    pub(crate) fn block<'g, T>(
        &self,
        condvar: &Condvar,
        guard: MutexGuard<'g, T>,
    ) -> MutexGuard<'g, T> {
        if self.stoppable && self.polled {
            match condvar.wait_timeout(guard, CANCEL_POLL) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            }
        } else {
            match condvar.wait(guard) {
                Ok(guard) => guard,
                Err(poisoned) => poisoned.into_inner(),
            }
        }
    }

    /// `Err(Cancelled)` once cancellation was requested.
    pub(crate) fn checkpoint(&self) -> Result<(), CpuError> {
        if self.cancelled() {
            Err(CpuError::Cancelled {
                operation: self.operation,
            })
        } else {
            Ok(())
        }
    }

    /// The fault injected into this item, if any. Bodies that rendezvous with
    /// peers must still abort their rendezvous so peers fail instead of hanging.
    pub(crate) fn fault(&self) -> Option<&CpuError> {
        self.fault.as_ref()
    }

    /// The injected fault, once the body returned.
    pub(crate) fn into_fault(self) -> Option<CpuError> {
        self.fault
    }
}
