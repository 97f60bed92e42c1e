//! How a sequence's ranks run and how time passes for them: the
//! [`Scheduler`] the model is written against, and [`StdThreads`], the one
//! on `std` threads and the wall clock.
//!
//! The model itself (the reference state, the per-step expectations and
//! checks, the late peer's protocol) never spawns a thread, sleeps, reads a
//! clock or blocks on a primitive of its own: every such act goes through a
//! `Scheduler`. So the same model runs on the kit's std world
//! ([`check_sequence`](super::check_sequence), ranks on `std` threads under
//! the kit's watchdog) and on any other scheduler
//! ([`check_sequence_on`](super::check_sequence_on)), such as shuttle's
//! randomized and PCT schedulers with a virtual clock (`shuttle-tests/`).
//! What a scheduler must provide: a thread spawn and its join, a yield, a
//! sleep and the clock it advances (the clock the backend's deadlines run
//! on, so a bounded wait's duration can be measured: CAN-2), an identity of
//! the calling thread (EXC-8: a destructor run inside a call on the calling
//! thread), and [`Event`]s, a condition the ranks block on until another
//! rank notifies it (a scheduler that detects deadlocks sees a rank blocked
//! on one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::op::Op;

/// Joins a thread started by [`Scheduler::spawn`]; `Err` holds its panic.
pub type Join = Box<dyn FnOnce() -> std::thread::Result<()> + Send>;

/// How a sequence's ranks run and how time passes for them (see the module
/// docs). Implementations must be cheap to call: the model polls through
/// them.
pub trait Scheduler: Send + Sync + 'static {
    /// Runs `body` on a new thread named `name`; the returned closure joins it.
    fn spawn(&self, name: &str, body: Box<dyn FnOnce() + Send>) -> Join;

    /// Lets the other threads run (a scheduling point). A scheduler whose
    /// clock only moves when told may move it a little: the model polls in
    /// loops bounded in time.
    fn yield_now(&self);

    /// Blocks the calling thread for `duration` of [`Scheduler::now`]'s clock.
    fn sleep(&self, duration: Duration);

    /// Time since an arbitrary origin, on the clock the backend's deadlines
    /// run on (monotonic).
    fn now(&self) -> Duration;

    /// An identity of the calling thread, distinct from every other live
    /// thread's, and never zero.
    fn thread(&self) -> u64;

    /// A new condition the ranks can block on.
    fn event(&self) -> Box<dyn Event>;

    /// A clock for the model's bounded polls: each reading is the
    /// time since the call that the kit can vouch for. Default:
    /// [`Scheduler::now`]'s (a virtual clock is exact).
    fn stopwatch(&self) -> Box<dyn FnMut() -> Duration + '_> {
        let start = self.now();
        Box::new(move || self.now().saturating_sub(start))
    }

    /// How long to give work that a correct backend finishes before giving
    /// up on it, where the model allows it `allowance` of the wall clock
    /// (the late peer's teardown of the rounds rank 0 completed); `None`:
    /// wait for it without bound (a plain `wait()`). Default:
    /// `Some(allowance)`. A scheduler whose clock is virtual (any deadline
    /// passes as soon as its waiter is scheduled before the work) and that
    /// reports hangs itself answers `None`.
    fn grace(&self, allowance: Duration) -> Option<Duration> {
        Some(allowance)
    }

    /// Rank 0 is at `progress` (a step, or the final drain): a scheduler that
    /// reports hangs itself blames one on it. Default: nothing.
    fn progress(&self, progress: &Progress) {
        let _ = progress;
    }
}

/// A condition the ranks of one sequence block on: one rank changes the
/// state the condition reads (under its own lock), then notifies.
pub trait Event: Send + Sync {
    /// Wakes every thread blocked in [`Event::wait_until`].
    fn notify(&self);

    /// Blocks until `ready` returns `true` (then `true`), or until `limit`
    /// passed (then `false`; a scheduler that reports deadlocks itself may
    /// wait for good instead). `ready` is called again after every
    /// notification, and never while the notifier is between its state change
    /// and its [`Event::notify`].
    fn wait_until(&self, ready: &mut dyn FnMut() -> bool, limit: Duration) -> bool;
}

/// Where rank 0 is in a sequence, for blaming a hang on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// The step's index; the sequence's length for the final drain.
    pub step: usize,
    /// The step's operation (`None` for the final drain).
    pub op: Option<Op>,
    /// The SPEC ID a hang here violates, when one does (a `wait` that never
    /// returns: EXC-4; a deadline not kept: CAN-2, CAN-8).
    pub hint: Option<&'static str>,
}

impl Progress {
    /// Step `step`, running `op`.
    pub(crate) fn at(step: usize, op: Option<Op>, hint: Option<&'static str>) -> Self {
        Self { step, op, hint }
    }
}

/// The [`Scheduler`] of `std` threads and the wall clock ([`Instant`]); its
/// sleeps count as the kit's pauses for the case watchdog, and its event
/// notifications as a rank's progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdThreads;

impl Scheduler for StdThreads {
    fn spawn(&self, name: &str, body: Box<dyn FnOnce() + Send>) -> Join {
        match std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(body)
        {
            Ok(handle) => Box::new(move || handle.join()),
            Err(error) => {
                let message = format!("could not start thread {name}: {error}");
                Box::new(move || Err(Box::new(message)))
            }
        }
    }

    fn yield_now(&self) {
        std::thread::yield_now();
    }

    fn sleep(&self, duration: Duration) {
        crate::world::pause(duration);
    }

    fn now(&self) -> Duration {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }

    /// Only time the case watchdog would count (the kit's stopwatch, which
    /// counts nothing while the machine cannot vouch for it):
    /// on a loaded machine a bound takes longer to pass, and a world that
    /// cannot get that time ends at its ceiling, inconclusive, never with a
    /// breach that rests on a guess of how long the backend takes.
    fn stopwatch(&self) -> Box<dyn FnMut() -> Duration + '_> {
        let mut watch = crate::world::Stopwatch::start();
        Box::new(move || watch.elapsed())
    }

    fn thread(&self) -> u64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        thread_local! {
            static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
        }
        ID.with(|id| *id)
    }

    fn event(&self) -> Box<dyn Event> {
        Box::<StdEvent>::default()
    }
}

/// [`StdThreads`]' event: a generation count under a `std` mutex.
#[derive(Default)]
struct StdEvent {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Event for StdEvent {
    fn notify(&self) {
        *lock(&self.generation) += 1;
        self.changed.notify_all();
        crate::world::progressed();
    }

    fn wait_until(&self, ready: &mut dyn FnMut() -> bool, limit: Duration) -> bool {
        let deadline = Instant::now().checked_add(limit);
        let mut generation = lock(&self.generation);
        loop {
            if ready() {
                return true;
            }
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if now >= deadline => return false,
                Some(deadline) => deadline - now,
                None => Duration::from_secs(3600),
            };
            generation = match self.changed.wait_timeout(generation, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// Locks `mutex`, recovering the data if a panicking thread poisoned it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Polls `condition` until it holds or `limit` of the scheduler's
/// [`Scheduler::stopwatch`] passes (time the kit can vouch for: on a loaded
/// machine, longer): yields for the first millisecond (released resources
/// usually go within microseconds), then sleeps briefly between polls.
pub(crate) fn soon(
    scheduler: &dyn Scheduler,
    limit: Duration,
    mut condition: impl FnMut() -> bool,
) -> bool {
    let mut clock = scheduler.stopwatch();
    loop {
        if condition() {
            return true;
        }
        let elapsed = clock();
        if elapsed >= limit {
            return false;
        }
        if elapsed < Duration::from_millis(1) {
            scheduler.yield_now();
        } else {
            scheduler.sleep(Duration::from_micros(200));
        }
    }
}
