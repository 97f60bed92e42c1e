//! The `rendezvous` personality's progress engine: no thread moves a large
//! transfer on its own. Its sender reads the buffer in chunks of
//! [`RENDEZVOUS_CHUNK`] bytes, one chunk per call into the backend on the
//! device (a submission, `is_complete`, each turn of a spinning `wait` or
//! `wait_bounded`), whichever rank makes it: as in an MPI library with no
//! progress thread, a transfer nobody calls into stands still.

use std::sync::Arc;

use crate::error::CpuError;
use crate::sync::rt::{lock, Condvar, Mutex};
use crate::work::WorkCtx;

/// How many bytes of a rendezvous send's buffer one call into the backend
/// moves.
pub const RENDEZVOUS_CHUNK: usize = 16 << 10;

/// Calls into the backend on one device, counted.
#[derive(Default)]
pub(crate) struct Progress {
    calls: Mutex<u64>,
    made: Condvar,
}

impl Progress {
    /// One call into the backend: lets a waiting transfer move a chunk.
    pub(crate) fn call(&self) {
        *lock(&self.calls) += 1;
        self.made.notify_all();
    }

    /// Calls made so far.
    pub(crate) fn calls(&self) -> u64 {
        *lock(&self.calls)
    }

    /// Waits, observing cancellation, until a call after the `seen`-th was
    /// made; returns the count then.
    pub(crate) fn after(
        self: &Arc<Self>,
        ctx: &WorkCtx<'_>,
        seen: u64,
        operation: &'static str,
    ) -> Result<u64, CpuError> {
        ctx.wake_on_cancel(
            self,
            |progress| (&progress.calls, &progress.made),
            || {
                let mut calls = lock(&self.calls);
                loop {
                    if *calls > seen {
                        return Ok(*calls);
                    }
                    if ctx.cancelled() {
                        return Err(CpuError::Cancelled { operation });
                    }
                    calls = ctx.block(&self.made, calls);
                }
            },
        )
    }
}
