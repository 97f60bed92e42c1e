//! Shuttle's primitives behind `std`'s signatures, and the virtual clock
//! (`--cfg commcheck_shuttle` only; see [`super::rt`]).
//!
//! Shuttle runs every thread of one execution as a coroutine on the test's
//! OS thread, so nothing here may block that OS thread (a `std` lock or
//! `OnceLock` another coroutine holds would hang it for good), and a plain
//! `std` thread-local is shared by all of them: the clock uses that, the
//! backend's own thread-locals use shuttle's.

use std::cell::Cell;
use std::ops::{Add, Deref, DerefMut, Sub};
use std::sync::atomic::Ordering;
use std::sync::{LockResult, PoisonError, TryLockError, TryLockResult};
use std::time::Duration;

pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize};
pub(crate) use shuttle::thread::{yield_now, Builder};
pub(crate) use shuttle::thread_local;

std::thread_local! {
    /// Virtual nanoseconds. Shared by every coroutine of the executions that
    /// run on this OS thread, and never reset: only differences matter.
    static NOW: Cell<u64> = const { Cell::new(0) };
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// Moves the virtual clock on by `duration`.
fn advance(duration: Duration) {
    NOW.with(|now| now.set(now.get().saturating_add(nanos(duration))));
}

/// A point on the virtual clock, with `std::time::Instant`'s API.
///
/// Like `std`'s, it cannot represent instants far in the future:
/// [`Instant::checked_add`] of `Duration::MAX` is `None`, and `+` panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The virtual clock now.
    pub fn now() -> Self {
        Self(NOW.with(Cell::get))
    }

    /// `self + duration`, or `None` past the clock's range.
    pub fn checked_add(&self, duration: Duration) -> Option<Self> {
        let nanos = u64::try_from(duration.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Self)
    }

    /// `self - duration`, or `None` before the clock's start.
    pub fn checked_sub(&self, duration: Duration) -> Option<Self> {
        let nanos = u64::try_from(duration.as_nanos()).ok()?;
        self.0.checked_sub(nanos).map(Self)
    }

    /// Time from `earlier` to `self` (zero if `earlier` is later).
    pub fn duration_since(&self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Virtual time since `self`.
    pub fn elapsed(&self) -> Duration {
        Self::now().duration_since(*self)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, duration: Duration) -> Instant {
        self.checked_add(duration)
            .expect("overflow when adding duration to instant")
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;

    fn sub(self, duration: Duration) -> Instant {
        self.checked_sub(duration)
            .expect("overflow when subtracting duration from instant")
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}

/// Sleeps for `duration` of virtual time: the clock moves on, and the
/// thread yields to the scheduler.
pub fn sleep(duration: Duration) {
    advance(duration);
    yield_now();
}

/// Shuttle's mutex with `std`'s signatures; its guard remembers the mutex,
/// so a timed wait can release and retake it.
#[derive(Default)]
pub struct Mutex<T: ?Sized> {
    inner: shuttle::sync::Mutex<T>,
}

/// The guard of a locked [`Mutex`].
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    guard: shuttle::sync::MutexGuard<'a, T>,
}

impl<T> Mutex<T> {
    /// A new, unlocked mutex.
    pub const fn new(value: T) -> Self {
        Self {
            inner: shuttle::sync::Mutex::new(value),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    fn guard<'a>(&'a self, guard: shuttle::sync::MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        MutexGuard { mutex: self, guard }
    }

    /// Locks (a scheduling point).
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        match self.inner.lock() {
            Ok(guard) => Ok(self.guard(guard)),
            Err(poisoned) => Err(PoisonError::new(self.guard(poisoned.into_inner()))),
        }
    }

    /// Locks if the mutex is free.
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        match self.inner.try_lock() {
            Ok(guard) => Ok(self.guard(guard)),
            Err(TryLockError::Poisoned(poisoned)) => Err(TryLockError::Poisoned(PoisonError::new(
                self.guard(poisoned.into_inner()),
            ))),
            Err(TryLockError::WouldBlock) => Err(TryLockError::WouldBlock),
        }
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.inner, f)
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// Whether a timed wait timed out (`std`'s `WaitTimeoutResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

#[allow(dead_code, reason = "std's API; the backend ignores it")]
impl WaitTimeoutResult {
    /// Whether the wait timed out.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// Shuttle's condition variable with `std`'s signatures, and timed waits
/// that can time out (see [`super::rt`]).
#[derive(Default)]
pub struct Condvar {
    inner: shuttle::sync::Condvar,
    /// Notifications so far: a timed waiter that sees it unchanged after
    /// yielding was not notified, so its timeout fired. (A `std` atomic:
    /// bookkeeping, not a scheduling point.)
    notified: std::sync::atomic::AtomicU64,
}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Self {
        Self {
            inner: shuttle::sync::Condvar::new(),
            notified: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Blocks until notified (shuttle reports a deadlock if nobody can).
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> LockResult<MutexGuard<'a, T>> {
        let MutexGuard { mutex, guard } = guard;
        match self.inner.wait(guard) {
            Ok(guard) => Ok(mutex.guard(guard)),
            Err(poisoned) => Err(PoisonError::new(mutex.guard(poisoned.into_inner()))),
        }
    }

    /// Releases the lock and yields; unless the condition variable was
    /// notified meanwhile, the timeout fired: the virtual clock moves on by
    /// `timeout`. Then retakes the lock.
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: Duration,
    ) -> LockResult<(MutexGuard<'a, T>, WaitTimeoutResult)> {
        let mutex = guard.mutex;
        let before = self.notified.load(Ordering::SeqCst);
        drop(guard);
        yield_now();
        let timed_out = self.notified.load(Ordering::SeqCst) == before;
        if timed_out {
            advance(timeout);
        }
        let result = WaitTimeoutResult(timed_out);
        match mutex.lock() {
            Ok(guard) => Ok((guard, result)),
            Err(poisoned) => Err(PoisonError::new((poisoned.into_inner(), result))),
        }
    }

    /// Wakes one blocked waiter.
    pub fn notify_one(&self) {
        self.notified.fetch_add(1, Ordering::SeqCst);
        self.inner.notify_one();
    }

    /// Wakes every blocked waiter.
    pub fn notify_all(&self) {
        self.notified.fetch_add(1, Ordering::SeqCst);
        self.inner.notify_all();
    }
}

/// `std::sync::OnceLock` whose initialisation is serialised by a shuttle
/// mutex: a second thread arriving while the first initialises blocks in
/// shuttle (a scheduling point), never on `std`'s futex.
#[derive(Debug)]
pub struct OnceLock<T> {
    cell: std::sync::OnceLock<T>,
    init: Mutex<()>,
}

impl<T> OnceLock<T> {
    /// An empty cell.
    pub fn new() -> Self {
        Self {
            cell: std::sync::OnceLock::new(),
            init: Mutex::new(()),
        }
    }

    /// The value, computed by the first caller.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        if let Some(value) = self.cell.get() {
            return value;
        }
        let _init = super::rt::lock(&self.init);
        self.cell.get_or_init(init)
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> Self {
        Self::new()
    }
}
