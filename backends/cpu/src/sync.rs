//! Synchronisation facade: `std` primitives normally; loom's or shuttle's
//! under a configuration switch.
//!
//! - `--cfg commcheck_loom`: the completion state machine ([`crate::core`])
//!   uses loom's `Mutex` and `Condvar`, so the loom suite can explore every
//!   interleaving of it (`loom-tests/`). The rest of the backend stays on
//!   `std`: loom explores the core alone.
//! - `--cfg commcheck_shuttle`: every primitive the whole in-process backend
//!   uses ([`rt`]: mutexes, condition variables, atomics, once-cells, thread
//!   spawns, yields, sleeps, timed waits and the clock they are measured
//!   against) is shuttle's, so shuttle's randomized and PCT schedulers can
//!   drive executors, the group rendezvous, routes, the quarantine owner
//!   and the core together (`shuttle-tests/`). See [`rt`] for how time is
//!   modelled there.
//!
//! A normal build re-exports `std` items unchanged: no wrapper, no cost.

#[cfg(all(commcheck_loom, commcheck_shuttle))]
compile_error!("--cfg commcheck_loom and --cfg commcheck_shuttle are exclusive");

#[cfg(not(commcheck_loom))]
pub(crate) use self::rt::{Condvar, Mutex, MutexGuard};

#[cfg(commcheck_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

/// The clock deadlines are measured against (shuttle's virtual one under
/// `--cfg commcheck_shuttle`).
pub(crate) use self::rt::Instant;

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
/// the executor's worker loop). Zero under shuttle: a spin measured in time
/// is no schedule shuttle can explore, and the blocking path it skips to is
/// the one whose wake-ups matter.
#[cfg(not(commcheck_shuttle))]
pub(crate) const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// See the other `SPIN`.
#[cfg(commcheck_shuttle)]
pub(crate) const SPIN: std::time::Duration = std::time::Duration::ZERO;

#[cfg(commcheck_shuttle)]
pub(crate) mod controlled;

/// What the whole backend synchronises with: executors, groups, routes,
/// the device (quarantine owner, registries), the ledger, tensors, the
/// cancellation scope. `std` normally and under loom; shuttle's under
/// `--cfg commcheck_shuttle`, with the same signatures:
///
/// - `Mutex`, `MutexGuard`, `Condvar`, atomics, `OnceLock`, thread spawns
///   (`Builder`), `yield_now` and `thread_local!` are shuttle's (wrapped
///   where `std`'s signature needs it), so each is a scheduling point;
/// - time is virtual: [`Instant`] reads a clock that only timed waits and
///   sleeps advance. `Condvar::wait_timeout` releases the lock and yields
///   to the scheduler; if nobody notified the condition variable meanwhile,
///   the timeout fired: the clock moves on by the whole timeout and the wait
///   reports it timed out. `sleep` moves the clock on and yields. So a
///   deadline passes exactly when the waiter gave up waiting for it, every
///   timed wait is a schedule point (shuttle's own `wait_timeout` never times
///   out), and an untimed `wait` nobody will ever notify is a deadlock
///   shuttle reports.
///
/// `Arc` and `Weak` stay `std`'s (shuttle's are the same types); the rare
/// two-thread split of a very large sum (`std::thread::scope`) and the
/// multi-process fabric stay on `std` too: no in-process path the shuttle
/// suite drives reaches them.
pub(crate) mod rt {
    #[cfg(not(commcheck_shuttle))]
    pub(crate) use std::{
        sync::{
            atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize},
            Condvar, Mutex, MutexGuard, OnceLock,
        },
        thread::{sleep, yield_now, Builder},
        thread_local,
        time::Instant,
    };

    #[cfg(commcheck_shuttle)]
    pub(crate) use super::controlled::{
        sleep, thread_local, yield_now, AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Builder,
        Condvar, Instant, Mutex, MutexGuard, OnceLock,
    };

    /// Locks `mutex`, recovering the data if a panicking thread poisoned it.
    pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        match mutex.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
