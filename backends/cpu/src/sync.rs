//! Synchronisation facade: `std` primitives normally, loom's under `--cfg commcheck_loom`.
//!
//! Only the completion state machine ([`crate::core`]) and the pieces it touches
//! go through this module, so the loom suite can explore their interleavings.

#[cfg(not(commcheck_loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

#[cfg(commcheck_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

/// Locks `mutex`, recovering the data if a panicking thread poisoned it.
///
/// Work bodies run user closures; one that panics must not wedge every later
/// observer of the same completion.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// How long a thread about to block polls first (see `Core::wait_for` and
/// the executor's worker loop).
pub(crate) const SPIN: std::time::Duration = std::time::Duration::from_micros(50);
