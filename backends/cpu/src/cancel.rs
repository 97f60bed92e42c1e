//! The cancellation token of the work item running on the current thread.
//!
//! A `NativeCancel` request on running work is cooperative: the work observes
//! its core's cancel flag and stops. Work bodies see the flag through
//! [`crate::work::WorkCtx`]; code that runs *inside* a body without a
//! context to hand, notably the evaluation of lazy tensor values
//! ([`crate::tensor`], [`crate::neural`]), sees it through this module. The
//! worker enters a [`Scope`] with the running item's token around the body,
//! and evaluation calls [`checkpoint`] before computing each deferred value
//! and inside long kernels (every few rows of a matmul).
//!
//! Outside any work item (a tensor read on a user thread, a helper thread)
//! there is no token: [`checkpoint`] always succeeds and evaluation runs to
//! the end, as it would without cancellation.
//!
//! The token only reads the core's flag; it never changes the state machine,
//! so the loom-checked transitions of [`crate::core`] are unaffected.

use std::cell::RefCell;
use std::sync::Arc;

use crate::core::Core;
use crate::error::CpuError;

/// The cancel flag of one running work item, and the operation to name when it aborts.
pub(crate) struct CancelToken {
    core: Arc<Core>,
    operation: &'static str,
}

impl CancelToken {
    pub(crate) fn new(core: Arc<Core>, operation: &'static str) -> Self {
        Self { core, operation }
    }
}

crate::sync::rt::thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// The current thread runs a work item until this is dropped (even by a
/// panic unwinding through the body); the previous token, if any, is restored.
#[must_use = "the token is current only while the scope lives"]
pub(crate) struct Scope {
    previous: Option<CancelToken>,
    /// A scope belongs to the thread whose token it set.
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Makes `token` current on this thread for the lifetime of the returned scope.
pub(crate) fn enter(token: CancelToken) -> Scope {
    let previous = CURRENT.with(|current| current.replace(Some(token)));
    Scope {
        previous,
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// `Err(Cancelled)` naming the running work's operation once a `NativeCancel`
/// was requested for it; `Ok` when it was not, or when no work item runs here.
pub(crate) fn checkpoint() -> Result<(), CpuError> {
    CURRENT.with(|current| match &*current.borrow() {
        Some(token) if token.core.cancel_requested() => Err(CpuError::Cancelled {
            operation: token.operation,
        }),
        _ => Ok(()),
    })
}

/// Whether `error` is the running work's own cancellation, as opposed to a
/// failure (say, an input published as cancelled by other work) that would
/// recur however often the value is evaluated.
pub(crate) fn is_own_abort(error: &CpuError) -> bool {
    matches!(error, CpuError::Cancelled { .. }) && checkpoint().is_err()
}
