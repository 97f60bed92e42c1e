//! Worlds: `n` rank threads per case, each building its own rank state, with
//! host-side signals for choreography (a late peer joins when told to).

use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::check::{harness, Check, Finding};
use crate::harness::{
    CompletionRef, Executor, Group, Harness, HoldGuard, Ledger, Observer, Probe, Tensor,
    TensorContext,
};

/// Host-side signals shared by the rank threads of one world.
#[derive(Default)]
pub(crate) struct Signals {
    raised: Mutex<HashSet<String>>,
    changed: Condvar,
}

fn guard<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Signals {
    fn raise(&self, name: &str) {
        guard(&self.raised).insert(name.to_owned());
        self.changed.notify_all();
    }

    fn wait(&self, name: &str, limit: Duration) -> bool {
        self.wait_any(&[name], limit).is_some()
    }

    /// Start barrier: records that rank `index` was built (or could not be)
    /// and waits until every rank was built. `Err` names what went wrong:
    /// a rank that could not be built, or a timeout.
    fn start_barrier(
        &self,
        index: usize,
        built: bool,
        ranks: usize,
        limit: Duration,
    ) -> Result<(), String> {
        self.raise(&if built {
            format!("built-{index}")
        } else {
            format!("unbuilt-{index}")
        });
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(broken) =
                (0..ranks).find(|rank| raised.contains(&format!("unbuilt-{rank}")))
            {
                return Err(format!("rank {broken} could not be built"));
            }
            if (0..ranks).all(|rank| raised.contains(&format!("built-{rank}"))) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!(
                    "not every rank of the world was built within {limit:?}"
                ));
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits for the first of `names` to be raised; returns its index.
    fn wait_any(&self, names: &[&str], limit: Duration) -> Option<usize> {
        let deadline = Instant::now() + limit;
        let mut raised = guard(&self.raised);
        loop {
            if let Some(index) = names.iter().position(|name| raised.contains(*name)) {
                return Some(index);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            raised = match self.changed.wait_timeout(raised, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// One rank's view of a case: its state, the harness, and the world's signals.
pub struct RankCtx<'w, H: Harness> {
    harness: &'w H,
    rank: H::Rank,
    index: usize,
    size: usize,
    signals: &'w Signals,
    seed: u64,
    /// Late-peer rounds this rank has started (see `matrix::Pending`).
    pub(crate) rounds: std::cell::Cell<usize>,
}

impl<'w, H: Harness> RankCtx<'w, H> {
    /// This rank's index.
    pub fn rank(&self) -> usize {
        self.index
    }

    /// Number of ranks in the world.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The case's seed (for randomised cases).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The harness.
    pub fn harness(&self) -> &'w H {
        self.harness
    }

    /// The rank's harness-built state.
    pub fn state(&self) -> &H::Rank {
        &self.rank
    }

    /// The rank's executor.
    pub fn executor(&self) -> &Executor<H> {
        self.harness.executor(&self.rank)
    }

    /// The rank's tensor context.
    pub fn context(&self) -> &TensorContext<H> {
        self.harness.context(&self.rank)
    }

    /// The world group, as seen from this rank.
    pub fn group(&self) -> &Group<H> {
        self.harness.group(&self.rank)
    }

    /// Makes a tensor; a harness failure becomes [`Finding::Harness`].
    pub fn tensor(&self, values: &[f32], shape: &[usize]) -> Result<Tensor<H>, Finding> {
        harness(self.harness.tensor(&self.rank, values, shape))
    }

    /// Reads a tensor back without evaluating it.
    pub fn read(&self, tensor: &Tensor<H>) -> Result<Vec<f32>, Finding> {
        harness(self.harness.read(&self.rank, tensor))
    }

    /// This rank's endpoint of a route.
    pub fn route(&self, id: u64, source: usize, destination: usize) -> Result<H::Route, Finding> {
        harness(self.harness.route(&self.rank, id, source, destination))
    }

    /// Holds `executor` (the hold instrument), or reports it unsupported.
    pub fn hold(&self, executor: &Executor<H>) -> Result<HoldGuard, Finding> {
        self.harness
            .hold(&self.rank, executor)
            .ok_or_else(|| Finding::NotSupported("the harness provides no hold instrument".into()))
    }

    /// A liveness probe on `tensor`, or `NotSupported`.
    pub fn probe(&self, tensor: &Tensor<H>) -> Result<Probe, Finding> {
        self.harness
            .probe(&self.rank, tensor)
            .ok_or_else(|| Finding::NotSupported("the harness provides no liveness probe".into()))
    }

    /// The resource ledger, or `NotSupported`.
    pub fn ledger(&self) -> Result<Ledger, Finding> {
        self.harness
            .ledger(&self.rank)
            .ok_or_else(|| Finding::NotSupported("the harness provides no resource ledger".into()))
    }

    /// An observer on `completion`, or `NotSupported`.
    pub fn observer(&self, completion: CompletionRef<'_, H>) -> Result<Observer, Finding> {
        self.harness.observer(completion).ok_or_else(|| {
            Finding::NotSupported("the harness provides no completion observer".into())
        })
    }

    /// Makes the next native work item on `executor` fail, or `NotSupported`.
    pub fn inject_fault(&self, executor: &Executor<H>) -> Check {
        if self.harness.inject_fault(&self.rank, executor) {
            Ok(())
        } else {
            Err(Finding::NotSupported(
                "the harness provides no fault injection".into(),
            ))
        }
    }

    /// Makes the next submission on `executor` return `Err`, or `NotSupported`.
    pub fn fail_next_submission(&self, executor: &Executor<H>) -> Check {
        if self.harness.fail_next_submission(&self.rank, executor) {
            Ok(())
        } else {
            Err(Finding::NotSupported(
                "the harness provides no submission fault injection".into(),
            ))
        }
    }

    /// Raises a host-side signal every rank can wait for.
    pub fn signal(&self, name: &str) {
        self.signals.raise(name);
    }

    /// Waits for a host-side signal; `false` after `limit`.
    pub fn await_signal(&self, name: &str, limit: Duration) -> bool {
        self.signals.wait(name, limit)
    }

    /// Waits for the first of several signals; its index, or `None` after `limit`.
    pub fn await_any_signal(&self, names: &[&str], limit: Duration) -> Option<usize> {
        self.signals.wait_any(names, limit)
    }
}

/// How one world run ended.
pub(crate) enum WorldEnd {
    /// Every rank returned; findings in rank order.
    Finished(Vec<Check>),
    /// A rank panicked.
    Crashed { rank: usize, message: String },
    /// Not every rank returned in time.
    TimedOut { ranks: Vec<usize> },
}

/// The per-rank script of a case.
pub(crate) type Script<H> = Arc<dyn Fn(&RankCtx<'_, H>) -> Check + Send + Sync>;

/// Runs `script` on every rank of a fresh `ranks`-rank world, under a watchdog.
///
/// World creation, every rank thread and every drop of rank state happen on
/// supervised threads: a hang anywhere becomes `TimedOut`, a panic anywhere
/// `Crashed`, and the caller always gets an answer within `limit`.
pub(crate) fn run_world<H: Harness>(
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    limit: Duration,
    script: Script<H>,
) -> WorldEnd {
    let (report, reports) = mpsc::channel::<(usize, std::thread::Result<Check>)>();
    let supervisor = {
        let report = report.clone();
        move || {
            let world = match harness.world(ranks) {
                Ok(world) => Arc::new(world),
                Err(error) => {
                    for rank in 0..ranks {
                        let _ = report.send((rank, Ok(Err(Finding::Harness(error.0.clone())))));
                    }
                    return;
                }
            };
            let signals = Arc::new(Signals::default());
            for index in 0..ranks {
                let (harness, world, signals, script, report) = (
                    Arc::clone(&harness),
                    Arc::clone(&world),
                    Arc::clone(&signals),
                    Arc::clone(&script),
                    report.clone(),
                );
                let spawned = std::thread::Builder::new()
                    .name(format!("commcheck-rank-{index}"))
                    .spawn({
                        let report = report.clone();
                        move || {
                            let outcome = catch_unwind(AssertUnwindSafe(|| {
                                let rank = harness.rank(&world, index);
                                // No script starts before every rank's state exists.
                                let started =
                                    signals.start_barrier(index, rank.is_ok(), ranks, limit);
                                let rank = rank.map_err(|e| Finding::Harness(e.0))?;
                                started.map_err(Finding::Harness)?;
                                let ctx = RankCtx {
                                    harness: &*harness,
                                    rank,
                                    index,
                                    size: ranks,
                                    signals: &signals,
                                    seed,
                                    rounds: std::cell::Cell::new(0),
                                };
                                script(&ctx)
                            }));
                            let _ = report.send((index, outcome));
                        }
                    });
                if let Err(error) = spawned {
                    let finding =
                        Finding::Harness(format!("could not start rank thread {index}: {error}"));
                    let _ = report.send((index, Ok(Err(finding))));
                }
            }
        }
    };
    if let Err(error) = std::thread::Builder::new()
        .name("commcheck-world".into())
        .spawn(supervisor)
    {
        return WorldEnd::Finished(vec![Err(Finding::Harness(format!(
            "could not start the world thread: {error}"
        )))]);
    }
    drop(report);
    let deadline = Instant::now() + limit;
    let mut results: Vec<Option<Check>> = (0..ranks).map(|_| None).collect();
    while results.iter().any(Option::is_none) {
        let remaining = deadline.saturating_duration_since(Instant::now());
        match reports.recv_timeout(remaining) {
            Ok((rank, Ok(check))) => results[rank] = Some(check),
            Ok((rank, Err(payload))) => {
                return WorldEnd::Crashed {
                    rank,
                    message: panic_message(payload.as_ref()),
                }
            }
            Err(_) => {
                let ranks = (0..ranks).filter(|r| results[*r].is_none()).collect();
                return WorldEnd::TimedOut { ranks };
            }
        }
    }
    WorldEnd::Finished(results.into_iter().flatten().collect())
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".into())
}

/// Runs `script` on every rank of a fresh world of `ranks` ranks, under the
/// watchdog, and says how it went: `Ok` when every rank passed, otherwise a
/// message naming the rank and the finding (including not-supported).
///
/// This is the building block for property tests over world shapes: each
/// generated instance is one world.
pub fn run_script<H: Harness>(
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    limit: Duration,
    script: impl Fn(&RankCtx<'_, H>) -> Check + Send + Sync + 'static,
) -> Result<(), String> {
    match run_world(harness, ranks, seed, limit, Arc::new(script)) {
        WorldEnd::Finished(checks) => {
            let problems: Vec<String> = checks
                .into_iter()
                .enumerate()
                .filter_map(|(rank, check)| {
                    check
                        .err()
                        .map(|finding| format!("rank {rank}: {finding:?}"))
                })
                .collect();
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("; "))
            }
        }
        WorldEnd::Crashed { rank, message } => Err(format!("rank {rank} panicked: {message}")),
        WorldEnd::TimedOut { ranks } => Err(format!("rank(s) {ranks:?} timed out after {limit:?}")),
    }
}
