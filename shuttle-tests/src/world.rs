//! The workload: the kit's own sequence model
//! ([`commcheck::model::check_sequence_on`]) on shuttle threads, against
//! the CPU backend ([`ShuttleHarness`]).
//!
//! This crate has no model of its own. The kit's model does everything: rank
//! 0 runs the sequence and compares the backend with the reference model
//! after every step, rank 1 is the late peer, and a divergence names the
//! SPEC ID it violates. What is here is the glue: [`Shuttle`], the kit's
//! [`Scheduler`] on shuttle (its threads, its condition variables, and a
//! virtual clock: the CPU backend's, which its timed waits advance, plus
//! what the model's own sleeps and polls add), [`run_sequence`], which runs
//! one sequence and panics with its divergence, and what a failing
//! execution is blamed on ([`attribute`]: a divergence names its SPEC ID; a
//! deadlock or livelock shuttle reports is blamed on where rank 0 was, as
//! the kit's watchdog blames a hang).

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use commcheck::model::{
    check_sequence_on, sequence_strategy, Divergence, Event, Join, Op, Options, Progress,
    Scheduler, Stats,
};
use commcheck_cpu::shuttle_support::Instant;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

pub use crate::harness::{Backend, ShuttleHarness};

// ---------------------------------------------------------------------------
// Sequences.

/// `count` sequences of up to `max_len` operations from the kit's own
/// strategy (`commcheck::model::sequence_strategy`, the distribution
/// `tests/sequences.rs` draws from), generated from `seed` outside shuttle.
pub fn sequences(seed: u64, count: usize, max_len: usize) -> Vec<Vec<Op>> {
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&seed.to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = sequence_strategy(max_len);
    (0..count)
        .map(|_| match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current().0,
            Err(reason) => panic!("the kit's sequence strategy failed: {reason}"),
        })
        .collect()
}

/// Prints `ops` as the `vec![...]` literal `commcheck::model::Sequence` prints.
pub fn literal(ops: &[Op]) -> String {
    commcheck::model::Sequence(ops.to_vec()).to_string()
}

// ---------------------------------------------------------------------------
// The kit's scheduler on shuttle.

/// How far one yield of the model's polls moves the virtual clock: a poll
/// bounded in time ends after a bounded number of scheduling points.
const TICK: Duration = Duration::from_micros(1);

/// The kit's [`Scheduler`] on shuttle: threads are shuttle's, events are a
/// shuttle condition variable (a rank blocked on one that nobody will
/// notify is a deadlock shuttle reports; timeouts are left to shuttle), and
/// the clock is the CPU backend's virtual one (advanced by its timed waits)
/// plus what the model's own sleeps and yields advanced. Make one per
/// execution.
pub struct Shuttle {
    origin: Instant,
    /// Virtual nanoseconds the model's own sleeps and yields added.
    slept: AtomicU64,
}

impl Default for Shuttle {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            slept: AtomicU64::new(0),
        }
    }
}

impl Shuttle {
    fn advance(&self, duration: Duration) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .slept
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |slept| {
                Some(slept.saturating_add(nanos))
            });
    }
}

impl Scheduler for Shuttle {
    fn spawn(&self, name: &str, body: Box<dyn FnOnce() + Send>) -> Join {
        match shuttle::thread::Builder::new()
            .name(name.to_owned())
            .spawn(body)
        {
            Ok(handle) => Box::new(move || handle.join()),
            Err(error) => panic!("(no SPEC ID) shuttle could not spawn {name}: {error}"),
        }
    }

    fn yield_now(&self) {
        self.advance(TICK);
        shuttle::thread::yield_now();
    }

    fn sleep(&self, duration: Duration) {
        self.advance(duration);
        shuttle::thread::yield_now();
    }

    fn now(&self) -> Duration {
        self.origin.elapsed() + Duration::from_nanos(self.slept.load(Ordering::SeqCst))
    }

    fn thread(&self) -> u64 {
        u64::try_from(usize::from(shuttle::current::me())).unwrap_or(u64::MAX - 1) + 1
    }

    fn event(&self) -> Box<dyn Event> {
        Box::<ShuttleEvent>::default()
    }

    /// Without bound: a deadline on the virtual clock passes as soon as its
    /// waiter is scheduled before the work, and shuttle reports hangs.
    fn grace(&self, _allowance: Duration) -> Option<Duration> {
        None
    }

    fn progress(&self, progress: &Progress) {
        let phase = progress.op.is_none().then_some("final drain");
        let (step, op, hint) = (progress.step, progress.op, progress.hint);
        at(Place {
            step,
            op,
            phase,
            hint,
        });
    }
}

/// [`Shuttle`]'s event: a shuttle mutex and condition variable.
#[derive(Default)]
struct ShuttleEvent {
    lock: shuttle::sync::Mutex<()>,
    changed: shuttle::sync::Condvar,
}

impl Event for ShuttleEvent {
    fn notify(&self) {
        let _lock = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.changed.notify_all();
    }

    /// Waits without a limit: a wait nobody ends is shuttle's deadlock.
    fn wait_until(&self, ready: &mut dyn FnMut() -> bool, _limit: Duration) -> bool {
        let mut lock = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        while !ready() {
            lock = self.changed.wait(lock).unwrap_or_else(|p| p.into_inner());
        }
        true
    }
}

// ---------------------------------------------------------------------------
// Attribution.

/// Where rank 0 was, for blaming a hang (the kit's watchdog hints).
#[derive(Debug, Clone, Default)]
struct Place {
    step: usize,
    op: Option<Op>,
    /// In the final drain or teardown (`op` is `None` there).
    phase: Option<&'static str>,
    hint: Option<&'static str>,
}

std::thread_local! {
    /// Every shuttle thread of an execution runs on the OS thread of the
    /// `Runner`, which reads this after the execution ends.
    static PLACE: RefCell<Place> = RefCell::default();
}

fn at(place: Place) {
    PLACE.with(|p| *p.borrow_mut() = place);
}

pub(crate) fn clear_progress() {
    at(Place::default());
}

/// Whether `message` starts with a SPEC ID (`ABC-1:`).
fn names_id(message: &str) -> bool {
    let Some((id, _)) = message.split_once(':') else {
        return false;
    };
    commcheck::spec::invariant(id).is_some()
}

/// A failing execution's panic message, starting with a SPEC ID: the kit's
/// divergences name theirs, and a harness failure says it names none;
/// anything else (shuttle's deadlock or step-bound report, a panic in the
/// backend) is blamed on what rank 0 was doing when the execution failed.
pub(crate) fn attribute(message: &str) -> String {
    if names_id(message) || message.starts_with("(no SPEC ID)") {
        return message.to_owned();
    }
    let p = PLACE.with(|p| p.borrow().clone());
    let place = match (p.op, p.phase) {
        (Some(op), _) => format!("step {} ({op})", p.step),
        (None, Some(phase)) => format!("step {} ({phase})", p.step),
        (None, None) => "before the first step".to_owned(),
    };
    match p.hint {
        Some(id) => format!("{id}: {place} never returned (shuttle: {message})"),
        None => format!("(no SPEC ID) {place}: {message}"),
    }
}

/// A divergence as a panic message: its SPEC ID first.
fn blame(divergence: &Divergence) -> String {
    let place = match divergence.op {
        Some(op) => format!("step {} ({op})", divergence.step),
        None => format!("step {} (final drain)", divergence.step),
    };
    match divergence.id {
        Some(id) => format!("{id}: {place}: {}", divergence.message),
        None => format!("(no SPEC ID) {place}: {}", divergence.message),
    }
}

// ---------------------------------------------------------------------------
// Running a sequence.

/// What the executions on this OS thread did, summed (for reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Sequences that matched the model.
    pub passed: usize,
    /// Operations that acted on the backend.
    pub executed: usize,
    /// Operations the model could not follow in their state, skipped.
    pub skipped: usize,
    /// Submissions made.
    pub submissions: usize,
}

std::thread_local! {
    static TALLY: RefCell<Tally> = RefCell::default();
}

fn tally(stats: Stats) {
    TALLY.with(|t| {
        let mut t = t.borrow_mut();
        t.passed += 1;
        t.executed += stats.executed;
        t.skipped += stats.skipped;
        t.submissions += stats.submissions;
    });
}

/// What the executions run on this thread so far did; resets the sums.
pub fn take_tally() -> Tally {
    TALLY.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.passed += other.passed;
        self.executed += other.executed;
        self.skipped += other.skipped;
        self.submissions += other.submissions;
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} sequences matched the model: {} operations executed ({} skipped), {} submissions",
            self.passed, self.executed, self.skipped, self.submissions
        )
    }
}

/// One execution: the kit's model runs `ops` against a fresh `backend`
/// device (every operation claimed), rank 0 on this shuttle thread and the
/// late peer on another. Panics with the SPEC ID of the first divergence.
pub fn run_sequence(ops: &[Op], backend: Backend) {
    clear_progress();
    let outcome = check_sequence_on(
        Arc::new(Shuttle::default()),
        Arc::new(ShuttleHarness::new(backend)),
        ops,
        Options::default(),
    );
    // Every handle is gone: each executor's worker must now exit, or
    // shuttle reports the execution deadlocked (a lane outliving its handles).
    at(Place {
        step: ops.len(),
        op: None,
        phase: Some("teardown: every handle dropped, every worker must exit"),
        hint: Some("RET-7"),
    });
    match outcome {
        Ok(stats) => tally(stats),
        Err(divergence) => panic!("{}", blame(&divergence)),
    }
}
