//! Running a workload under shuttle's schedulers, with fixed seeds, and
//! reporting what was explored.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};

use shuttle::scheduler::{PctScheduler, RandomScheduler, Schedule, Scheduler, Task, TaskId};
use shuttle::{Config, FailurePersistence, MaxSteps, Runner};

use crate::world;

/// Which of shuttle's schedulers explores the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `RandomScheduler`: a uniformly random runnable thread at every
    /// scheduling point (`shuttle::check_random`, with a fixed seed).
    Random,
    /// `PctScheduler` (probabilistic concurrency testing) with this bug
    /// depth: random thread priorities and `depth - 1` priority changes
    /// (`shuttle::check_pct`, with a fixed seed).
    Pct {
        /// Bug depth.
        depth: usize,
    },
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Random => f.write_str("random"),
            Self::Pct { depth } => write!(f, "PCT (depth {depth})"),
        }
    }
}

/// What one exploration covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Explored {
    /// Executions (iterations) started.
    pub executions: usize,
    /// Scheduling decisions taken, over all executions.
    pub steps: u64,
    /// Distinct schedules among the executions (sequences of the threads
    /// chosen at each decision).
    pub schedules: usize,
    /// What the workload did in those executions.
    pub work: world::Tally,
}

impl std::ops::AddAssign for Explored {
    fn add_assign(&mut self, other: Explored) {
        self.executions += other.executions;
        self.steps += other.steps;
        self.schedules += other.schedules;
        self.work += other.work;
    }
}

impl std::fmt::Display for Explored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} executions, {} distinct schedules, {} scheduling decisions; {}",
            self.executions, self.schedules, self.steps, self.work
        )
    }
}

/// A failing execution: the panic it ended with, attributed to a SPEC ID.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The message, starting with the SPEC ID it violates when known.
    pub message: String,
    /// What was explored, the failing execution included (its number is
    /// `explored.executions`).
    pub explored: Explored,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n(found in execution {}, after {})",
            self.message, self.explored.executions, self.explored
        )
    }
}

#[derive(Default)]
struct Tally {
    explored: Explored,
    seen: HashSet<u64>,
    /// The schedule of the execution under way, hashed as it goes.
    current: DefaultHasher,
    /// Decisions in the execution under way.
    current_steps: u64,
}

impl Tally {
    /// Ends the execution under way, if it took any decision.
    fn finish_execution(&mut self) {
        if std::mem::take(&mut self.current_steps) > 0 {
            let finished = std::mem::take(&mut self.current).finish();
            self.seen.insert(finished);
        }
        self.explored.schedules = self.seen.len();
    }
}

/// Wraps a scheduler to count executions, decisions and distinct schedules.
struct Counting<S> {
    inner: S,
    tally: Arc<Mutex<Tally>>,
}

impl<S: Scheduler> Scheduler for Counting<S> {
    fn new_execution(&mut self) -> Option<Schedule> {
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.finish_execution();
        let schedule = self.inner.new_execution();
        if schedule.is_some() {
            tally.explored.executions += 1;
        }
        schedule
    }

    fn next_task(
        &mut self,
        runnable: &[&Task],
        current: Option<TaskId>,
        is_yielding: bool,
    ) -> Option<TaskId> {
        let next = self.inner.next_task(runnable, current, is_yielding);
        let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        tally.explored.steps += 1;
        tally.current_steps += 1;
        next.map(usize::from).hash(&mut tally.current);
        next
    }

    fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }
}

/// Scheduling decisions one execution may take before shuttle stops it as
/// a livelock (the step bound): far above what a clean sequence needs.
pub const MAX_STEPS: usize = 200_000;

/// Runs `body` under `strategy` for `iterations` executions from `seed`;
/// the first failing execution, if any. A failure's message starts with the
/// SPEC ID it violates: the body's own checks name theirs; a deadlock or a
/// livelock that shuttle detects is blamed on what rank 0 was doing (the
/// kit's hint for its step, `commcheck::model::Progress`), as the kit's
/// watchdog blames a hang.
pub fn explore<F>(
    strategy: Strategy,
    seed: u64,
    iterations: usize,
    body: F,
) -> Result<Explored, Failure>
where
    F: Fn() + Send + Sync + 'static,
{
    explore_with(strategy, seed, iterations, FailurePersistence::Print, body)
}

/// [`explore`] for a failure that is expected: shuttle does not print the
/// failing schedule (its panic hook still reports the panic).
pub fn explore_expecting_failure<F>(
    strategy: Strategy,
    seed: u64,
    iterations: usize,
    body: F,
) -> Result<Explored, Failure>
where
    F: Fn() + Send + Sync + 'static,
{
    explore_with(strategy, seed, iterations, FailurePersistence::None, body)
}

fn explore_with<F>(
    strategy: Strategy,
    seed: u64,
    iterations: usize,
    persistence: FailurePersistence,
    body: F,
) -> Result<Explored, Failure>
where
    F: Fn() + Send + Sync + 'static,
{
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counted = Arc::clone(&tally);
    let mut config = Config::new();
    config.stack_size = 1 << 20;
    config.max_steps = MaxSteps::FailAfter(MAX_STEPS);
    config.silence_warnings = true;
    config.failure_persistence = persistence;
    let run = move |config: Config| match strategy {
        Strategy::Random => Runner::new(
            Counting {
                inner: RandomScheduler::new_from_seed(seed, iterations),
                tally: Arc::clone(&counted),
            },
            config,
        )
        .run(body),
        Strategy::Pct { depth } => Runner::new(
            Counting {
                inner: PctScheduler::new_from_seed(seed, depth, iterations),
                tally: Arc::clone(&counted),
            },
            config,
        )
        .run(body),
    };
    // A fresh OS thread per exploration: shuttle runs every coroutine of
    // an execution on it, and a failing execution may leave per-thread
    // state behind (a coroutine abandoned mid-unwind keeps the thread's
    // panic count raised), which must not leak into the next exploration.
    let explored = std::thread::Builder::new()
        .name(format!("shuttle {strategy} {seed:#x}"))
        .spawn(move || {
            world::clear_progress();
            world::take_tally();
            let outcome = catch_unwind(AssertUnwindSafe(|| run(config)));
            let work = world::take_tally();
            let mut tally = tally.lock().unwrap_or_else(PoisonError::into_inner);
            tally.finish_execution();
            let explored = Explored {
                work,
                ..tally.explored
            };
            match outcome {
                Ok(_) => Ok(explored),
                Err(payload) => Err(Failure {
                    message: world::attribute(&panic_message(payload.as_ref())),
                    explored,
                }),
            }
        })
        .map(std::thread::JoinHandle::join);
    match explored {
        Ok(Ok(result)) => result,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(error) => panic!("could not start an exploration thread: {error}"),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

/// How much a run explores: the CI defaults, or the environment's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Sequences generated (each explored on its own).
    pub sequences: usize,
    /// Executions per sequence and scheduler.
    pub iterations: usize,
    /// Seed of the sequences and the schedulers.
    pub seed: u64,
}

/// Default seed (`COMMCHECK_SHUTTLE_SEED` overrides).
pub const SEED: u64 = 0x5eed_c0de_2026_0011;

impl Budget {
    /// `defaults`, overridden by `COMMCHECK_SHUTTLE_SEQUENCES`,
    /// `COMMCHECK_SHUTTLE_ITERATIONS` and `COMMCHECK_SHUTTLE_SEED` (for deeper
    /// nightly runs).
    pub fn from_env(defaults: Budget) -> Budget {
        let read = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        Budget {
            sequences: read("COMMCHECK_SHUTTLE_SEQUENCES")
                .map_or(defaults.sequences, |v| v as usize),
            iterations: read("COMMCHECK_SHUTTLE_ITERATIONS")
                .map_or(defaults.iterations, |v| v as usize),
            seed: read("COMMCHECK_SHUTTLE_SEED").unwrap_or(defaults.seed),
        }
    }
}
