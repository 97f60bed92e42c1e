//! The model on any [`Scheduler`]: [`check_sequence_on`] builds the
//! sequence's two-rank world from the harness and runs rank 1 (the late
//! peer) on a thread of the scheduler and rank 0 on the calling thread, the
//! same rank scripts as the std world's ([`super::check_sequence`]), with
//! the scheduler's clock, sleeps and waits.
//!
//! No watchdog runs here: the scheduler answers for hangs (shuttle reports a
//! deadlock, or a schedule that never ends, and can blame it on where rank 0
//! was: [`Scheduler::progress`]). A panic of rank 0 is the caller's; one of
//! rank 1 is a divergence, as in the std world.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::op::Op;
use super::outcome::{Divergence, Options, Stats};
use super::peer::late_peer;
use super::plan::Plan;
use super::scheduler::{lock, Event, Progress, Scheduler};
use super::subject::subject;
use crate::check::{Check, Finding};
use crate::harness::Harness;
use crate::world::{panic_message, Journal, RankCtx, Signals};

/// Ranks in a sequence's world: rank 0 runs the sequence, rank 1 is its late peer.
const RANKS: usize = 2;

/// The start barrier: no script starts before every rank's state exists.
struct Start {
    /// Ranks built so far, and the first that could not be.
    state: Mutex<(usize, Option<usize>)>,
    event: Box<dyn Event>,
}

impl Start {
    /// Records that rank `index` was built (or could not be) and waits, up
    /// to `limit`, until every rank was.
    fn arrive(&self, index: usize, built: bool, limit: Duration) -> Result<(), String> {
        {
            let mut state = lock(&self.state);
            match built {
                true => state.0 += 1,
                false => {
                    state.1.get_or_insert(index);
                }
            }
        }
        self.event.notify();
        let all = self.event.wait_until(
            &mut || {
                let state = lock(&self.state);
                state.1.is_some() || state.0 == RANKS
            },
            limit,
        );
        match (all, *lock(&self.state)) {
            (_, (_, Some(broken))) => Err(format!("rank {broken} could not be built")),
            (true, _) => Ok(()),
            (false, _) => Err(format!(
                "not every rank of the world was built within {limit:?}"
            )),
        }
    }
}

/// Arrives at the start barrier as unbuilt if rank state building unwinds.
struct Arrival<'s> {
    start: &'s Start,
    index: usize,
    limit: Duration,
    arrived: bool,
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            let _ = self.start.arrive(self.index, false, Duration::ZERO);
        }
    }
}

/// What one rank thread shares with the others.
struct World<H: Harness> {
    harness: Arc<H>,
    world: H::World,
    signals: Signals,
    journal: Journal,
    start: Start,
    limit: Duration,
}

impl<H: Harness> World<H> {
    /// Builds rank `index`'s state, waits for every rank's, then runs
    /// `script` on the rank; `Err` when the rank never ran it.
    fn rank<T>(
        &self,
        index: usize,
        script: impl FnOnce(&RankCtx<'_, H>) -> T,
    ) -> Result<T, Finding> {
        let mut arrival = Arrival {
            start: &self.start,
            index,
            limit: self.limit,
            arrived: false,
        };
        let rank = self.harness.rank(&self.world, index);
        arrival.arrived = true;
        let started = self.start.arrive(index, rank.is_ok(), arrival.limit);
        let rank = rank.map_err(|error| Finding::Harness(error.0))?;
        started.map_err(Finding::Harness)?;
        let ctx = RankCtx::unwatched(
            &*self.harness,
            rank,
            index,
            RANKS,
            &self.signals,
            &self.journal,
        );
        Ok(script(&ctx))
    }
}

/// Runs `ops` against `harness` in a fresh two-rank world whose ranks run
/// on `scheduler`, and compares the backend with the reference model after
/// every step: the same model, checks and divergences as
/// [`check_sequence_with`](super::check_sequence_with), with time, sleeps
/// and waits on the scheduler's clock. `options.limit` bounds only the
/// wait for both ranks' state (the scheduler answers for hangs). The harness's world, ranks and instruments must be usable on the
/// scheduler's threads: for shuttle, a backend built on shuttle's
/// primitives (`shuttle-tests/` runs the CPU backend so).
///
/// ```
/// use std::sync::Arc;
/// use commcheck::model::{check_sequence_on, Op, Options, StdThreads, Work};
///
/// fn one_submission<H: commcheck::Harness>(harness: H) {
///     let ops = [Op::Submit { work: Work::Submit, lane: 0, fault: false }, Op::Release { sub: 0 }];
///     let outcome = check_sequence_on(Arc::new(StdThreads), Arc::new(harness), &ops, Options::default());
///     if let Err(divergence) = outcome {
///         panic!("{divergence}");
///     }
/// }
/// ```
pub fn check_sequence_on<H: Harness>(
    scheduler: Arc<dyn Scheduler>,
    harness: Arc<H>,
    ops: &[Op],
    options: Options,
) -> Result<Stats, Divergence> {
    let progress = Arc::new(Mutex::new(Progress::default()));
    let world = match harness.world(RANKS) {
        Ok(world) => world,
        Err(error) => {
            let checks: Vec<Check> = (0..RANKS)
                .map(|_| Err(Finding::Harness(error.0.clone())))
                .collect();
            return Err(never_ran(Progress::default(), &checks));
        }
    };
    let world = Arc::new(World {
        harness,
        world,
        signals: Signals::default(),
        journal: Journal::default(),
        start: Start {
            state: Mutex::default(),
            event: scheduler.event(),
        },
        limit: options.limit,
    });
    let plan = Arc::new(Plan::new(scheduler.event(), RANKS - 1));
    let peer: Arc<Mutex<Option<Check>>> = Arc::default();
    let join = {
        let (world, plan, peer, threads) = (
            Arc::clone(&world),
            Arc::clone(&plan),
            Arc::clone(&peer),
            Arc::clone(&scheduler),
        );
        scheduler.spawn(
            "commcheck-rank-1 (late peer)",
            Box::new(move || {
                let check = world
                    .rank(1, |ctx| late_peer(ctx, &*threads, &plan))
                    .and_then(|check| check);
                *lock(&peer) = Some(check);
            }),
        )
    };
    let report = |at: Progress| {
        scheduler.progress(&at);
        *lock(&progress) = at;
    };
    let outcome = world.rank(0, |ctx| {
        subject(ctx, ops, options, Arc::clone(&scheduler), &plan, &report)
    });
    if outcome.is_err() {
        // Rank 0 never ran: the peer must not wait for it.
        plan.done();
    }
    let joined = join();
    let at = *lock(&progress);
    let failure = |id, message| Divergence {
        step: at.step,
        op: at.op,
        id,
        message,
    };
    if let Err(payload) = joined {
        return Err(failure(
            at.hint,
            format!("rank 1 panicked: {}", panic_message(payload.as_ref())),
        ));
    }
    let peer = lock(&peer)
        .take()
        .unwrap_or_else(|| Err(Finding::Harness("rank 1 ended without a verdict".into())));
    match outcome {
        Ok(Err(divergence)) => Err(divergence),
        Ok(Ok(stats)) => match peer {
            Ok(()) => Ok(stats),
            Err(finding) => Err(failure(None, format!("world: {finding:?}"))),
        },
        Err(finding) => Err(never_ran(at, &[Err(finding), peer])),
    }
}

/// Rank 0 never ran the sequence: what every rank reported.
fn never_ran(at: Progress, checks: &[Check]) -> Divergence {
    Divergence {
        step: at.step,
        op: at.op,
        id: None,
        message: format!("rank 0 never ran the sequence: {checks:?}"),
    }
}
