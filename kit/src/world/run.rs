//! Running a world: a fresh world of `n` rank threads per case, each building
//! its own rank state, every thread supervised by the case watchdog, so a
//! hang becomes [`WorldEnd::TimedOut`], a panic [`WorldEnd::Crashed`].

use super::end::WorldEnd;
use super::rank::{Observe, RankCtx, ReportCheck, Script, REPORTS};
use super::sample::guard;
use super::signals::{Journal, Signals};
use super::watch::{self, CallWatch, WATCH_PERIOD};
use super::watch::{Expired, KitThread, Watchdog};
use crate::check::{Check, Finding};
use crate::dtype::Dtype;
use crate::harness::Harness;
use crate::results::Attributed;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// Runs `script` on every rank of a fresh `ranks`-rank world, under a watchdog.
///
/// World creation, every rank thread and every drop of rank state happen on
/// supervised threads: a hang anywhere becomes `TimedOut` (nothing moved for
/// `limit`), a panic anywhere `Crashed`, and the caller always gets an answer
/// within [`overrun`]`(limit)`.
pub(crate) fn run_world<H: Harness>(
    harness: Arc<H>,
    ranks: usize,
    seed: u64,
    limit: Duration,
    script: Script<H>,
    run: &Run,
) -> WorldEnd {
    let world = Ranks {
        size: ranks,
        local: 0..ranks,
        signals: Arc::new(Signals::default()),
        announce: None,
    };
    run_ranks(harness, &world, seed, limit, script, run, &|| None)
}

/// The ranks of a world that this process runs, and the world's signals.
pub(crate) struct Ranks {
    /// Ranks in the whole world.
    pub(crate) size: usize,
    /// The ranks run here (all of them, or one per process).
    pub(crate) local: std::ops::Range<usize>,
    /// The world's signals.
    pub(crate) signals: Arc<Signals>,
    /// Tells the world's other processes that this one's ranks moved (see
    /// [`watch::remote_progress`]); `None` for a world in one process.
    pub(crate) announce: Option<Box<dyn Fn() + Send + Sync>>,
}

/// Builds the world, runs `script` on every local rank's thread, and
/// supervises them: `Finished` holds the local ranks' checks in rank order.
/// `interrupt` is asked every [`WATCH_PERIOD`] whether the world already
/// ended elsewhere (another process's rank crashed), and its answer ends
/// the wait.
pub(crate) fn run_ranks<H: Harness>(
    harness: Arc<H>,
    world: &Ranks,
    seed: u64,
    limit: Duration,
    script: Script<H>,
    run: &Run,
    interrupt: &dyn Fn() -> Option<WorldEnd>,
) -> WorldEnd {
    let (ranks, first, local) = (world.size, world.local.start, world.local.len());
    let (report, reports) = mpsc::channel::<(usize, std::thread::Result<Check>)>();
    let watches = CallWatch::world(local);
    let supervisor = {
        let report = report.clone();
        let watches = watches.clone();
        let journal = Arc::clone(&run.journal);
        let attempt = run.attempt;
        let large = run.large;
        let large_dtype = run.large_dtype;
        let largest_world = run.largest_world;
        let sends = run.sends;
        let signals = Arc::clone(&world.signals);
        move || {
            let built = catch_unwind(AssertUnwindSafe(|| harness.world(ranks)));
            let world = match built {
                Ok(Ok(world)) => Arc::new(world),
                Ok(Err(error)) => {
                    for index in first..first + local {
                        let _ = report.send((index, Ok(Err(Finding::Harness(error.0.clone())))));
                    }
                    return;
                }
                Err(payload) => {
                    let message = format!("in Harness::world: {}", panic_message(payload.as_ref()));
                    let _ = report.send((first, Err(Box::new(message))));
                    return;
                }
            };
            for (index, watch) in (first..).zip(watches) {
                let (harness, world, signals, script, report, journal) = (
                    Arc::clone(&harness),
                    Arc::clone(&world),
                    Arc::clone(&signals),
                    Arc::clone(&script),
                    report.clone(),
                    Arc::clone(&journal),
                );
                let spawned = std::thread::Builder::new()
                    .name(format!("commcheck-rank-{index}"))
                    .spawn({
                        let report = report.clone();
                        move || {
                            let _kit = KitThread::rank(watch);
                            if harness.instruments().observer {
                                let observing = Arc::clone(&harness);
                                let observe: Observe<H> = Box::new(move |completion| {
                                    observing.observer(completion).map(|o| o.state())
                                });
                                REPORTS.with(|slot| {
                                    *slot.borrow_mut() = Some(ReportCheck {
                                        journal: Arc::clone(&journal),
                                        observe: Box::new(observe),
                                    })
                                });
                            }
                            let outcome = catch_unwind(AssertUnwindSafe(|| {
                                let rank =
                                    catch_unwind(AssertUnwindSafe(|| harness.rank(&world, index)))
                                        .map_err(|payload| {
                                            format!(
                                                "in Harness::rank: {}",
                                                panic_message(payload.as_ref())
                                            )
                                        });
                                let rank = match rank {
                                    Ok(rank) => rank,
                                    Err(message) => {
                                        let _ = signals.start_barrier(index, false, ranks, limit);
                                        std::panic::resume_unwind(Box::new(message));
                                    }
                                };
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
                                    journal: &journal,
                                    seed,
                                    attempt,
                                    large,
                                    large_dtype,
                                    largest_world,
                                    sends,
                                    rounds: std::cell::Cell::new(0),
                                    fenced: std::cell::Cell::new(false),
                                    dtype: std::cell::Cell::new(Dtype::F32),
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
        return WorldEnd::Finished(
            (0..local)
                .map(|_| {
                    Err(Finding::Harness(format!(
                        "could not start the world thread: {error}"
                    )))
                })
                .collect(),
        );
    }
    drop(report);
    let mut watchdog = Watchdog::new(limit, local);
    let mut results: Vec<Option<Check>> = (0..local).map(|_| None).collect();
    while results.iter().any(Option::is_none) {
        if let Some(end) = interrupt() {
            return end;
        }
        if let Some(expired) = watchdog.look(&watches, first, world.announce.as_deref()) {
            let ranks: Vec<usize> = (first..first + local)
                .filter(|r| results[*r - first].is_none())
                .collect();
            return match expired {
                Expired::Blocked(blocked) => blocked,
                Expired::Hung(spun) => {
                    let stacks = ranks
                        .iter()
                        .map(|rank| {
                            let place = watch::whereabouts(&watches[rank - first]);
                            match spun {
                                Some((offset, run)) if offset + first == *rank => format!(
                                    "spinning: {run:?} of its own run time inside this call, and nothing \
                                     else in the world moved meanwhile; {place}"
                                ),
                                _ => place,
                            }
                        })
                        .collect();
                    WorldEnd::TimedOut { ranks, stacks }
                }
                Expired::Overran { ran, idle } => WorldEnd::Overran { ranks, ran, idle },
            };
        }
        match reports.recv_timeout(WATCH_PERIOD) {
            Ok((rank, Ok(check))) => results[rank - first] = Some(check),
            Ok((rank, Err(payload))) => {
                return WorldEnd::Crashed {
                    rank,
                    message: format!("panicked: {}", panic_message(payload.as_ref())),
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let ranks = (first..first + local)
                    .filter(|r| results[*r - first].is_none())
                    .collect();
                return WorldEnd::TimedOut {
                    ranks,
                    stacks: Vec::new(),
                };
            }
        }
    }
    WorldEnd::Finished(results.into_iter().flatten().collect())
}

/// What one attempt at a case shares with its world runs.
#[derive(Default)]
pub(crate) struct Run {
    /// Notes and attributed violations of the case.
    pub(crate) journal: Arc<Journal>,
    /// Which attempt this is (0 first).
    pub(crate) attempt: u32,
    /// The elements per rank of the completion matrix's submissions in this
    /// world, when it runs them past the harness's protocol boundaries
    /// ([`RankCtx::large`](super::RankCtx::large)); `None`: their standard
    /// sizes.
    pub(crate) large: Option<usize>,
    /// The dtype of those submissions
    /// ([`RankCtx::large_dtype`](super::RankCtx::large_dtype)).
    pub(crate) large_dtype: Dtype,
    /// The largest of the case's worlds
    /// ([`RankCtx::largest_world`](super::RankCtx::largest_world)).
    pub(crate) largest_world: usize,
    /// Whether the subject rank of a transfer is its sender in this world
    /// ([`RankCtx::subject_sends`](super::RankCtx::subject_sends)).
    pub(crate) sends: bool,
}

impl Run {
    /// Records a note of the case seen by the supervisor.
    pub(crate) fn journal_note(&self, note: &str) {
        guard(&self.journal.notes).push(note.to_owned());
    }

    /// Records a violation of `invariant` seen by the supervisor.
    pub(crate) fn journal_attribute(&self, invariant: &str, message: &str) {
        guard(&self.journal.attributed).push(Attributed {
            invariant: invariant.to_owned(),
            message: message.to_owned(),
        });
    }
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
    match run_world(
        harness,
        ranks,
        seed,
        limit,
        Arc::new(script),
        &Run::default(),
    ) {
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
        WorldEnd::Crashed { rank, message } => Err(format!("rank {rank} {message}")),
        WorldEnd::TimedOut { ranks, stacks } => Err(format!(
            "rank(s) {ranks:?} timed out: nothing moved for {limit:?}{}",
            crate::world::where_they_were(&ranks, &stacks)
        )),
        WorldEnd::Overran { ranks, ran, .. } => Err(format!(
            "rank(s) {ranks:?} still running after {ran:?}, though not hung (the machine is too slow now)"
        )),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => Err(format!(
            "rank {rank}: {what} had not returned after {limit:?} ({invariant})"
        )),
    }
}
