//! The kit's std world as the model's driver: [`check_sequence`] runs a
//! sequence's ranks (two, or up to four: [`check_sequence_sized`]) on `std` threads in a fresh world of the kit
//! (`crate::world`), under its watchdog (a hang, a crash, a call that must
//! not block and did become a [`Divergence`] at the step rank 0 was at),
//! with [`StdThreads`] for the model's clock, sleeps and waits.

use std::sync::{Arc, Mutex};

use super::op::Op;
use super::outcome::{Divergence, Options, Stats};
use super::peer::late_peer;
use super::plan::Plan;
use super::scheduler::{lock, Progress, Scheduler, StdThreads};
use super::subject::subject;
use crate::harness::Harness;
use crate::world::{run_world, RankCtx, Script, WorldEnd};

/// What rank 0 leaves for the caller.
#[derive(Default)]
struct Shared {
    progress: Progress,
    outcome: Option<Result<Stats, Divergence>>,
}

/// Runs `ops` against `harness` with default [`Options`]; the first
/// divergence from the reference model, or what the sequence did.
pub fn check_sequence<H: Harness>(harness: Arc<H>, ops: &[Op]) -> Result<Stats, Divergence> {
    check_sequence_with(harness, ops, Options::default())
}

/// Runs `ops` against `harness` in a fresh two-rank world under a watchdog
/// and compares the backend with the reference model after every step.
pub fn check_sequence_with<H: Harness>(
    harness: Arc<H>,
    ops: &[Op],
    options: Options,
) -> Result<Stats, Divergence> {
    check_sequence_sized(harness, ops, options, 2)
}

/// [`check_sequence_with`] in a world of `ranks` ranks (at least two):
/// rank 0 runs the sequence, and every other rank is a late peer that joins
/// each collective round when the sequence releases it. The parameterised
/// submissions ([`Work::UnevenGather`](super::Work::UnevenGather) and the
/// others with per-member parameters) name two members, so a world of more
/// ranks skips them; the standard submissions of every claimed operation
/// run at any size (a transfer's sender is the last rank).
pub fn check_sequence_sized<H: Harness>(
    harness: Arc<H>,
    ops: &[Op],
    options: Options,
    ranks: usize,
) -> Result<Stats, Divergence> {
    let ranks = ranks.max(2);
    let ops: Arc<[Op]> = ops.into();
    let shared = Arc::new(Mutex::new(Shared::default()));
    let scheduler: Arc<dyn Scheduler> = Arc::new(StdThreads);
    let plan = Arc::new(Plan::new(scheduler.event(), ranks - 1));
    let script: Script<H> = {
        let (ops, shared) = (Arc::clone(&ops), Arc::clone(&shared));
        Arc::new(move |ctx: &RankCtx<'_, H>| {
            if ctx.rank() == 0 {
                let at = |progress| lock(&shared).progress = progress;
                let outcome = subject(ctx, &ops, options, Arc::clone(&scheduler), &plan, &at);
                lock(&shared).outcome = Some(outcome);
                Ok(())
            } else {
                late_peer(ctx, &*scheduler, &plan)
            }
        })
    };
    let end = run_world(
        harness,
        ranks,
        0,
        options.limit,
        script,
        &Default::default(),
    );
    let mut shared = lock(&shared);
    let Progress { step, op, hint, .. } = std::mem::take(&mut shared.progress);
    let world_failure = |id, message| Divergence {
        step,
        op,
        id,
        message,
    };
    match end {
        WorldEnd::Finished(checks) => match shared.outcome.take() {
            Some(Err(divergence)) => Err(divergence),
            Some(Ok(stats)) => match checks.into_iter().find_map(Result::err) {
                None => Ok(stats),
                Some(finding) => Err(world_failure(None, format!("world: {finding:?}"))),
            },
            None => Err(world_failure(
                None,
                format!("rank 0 never ran the sequence: {:?}", checks),
            )),
        },
        WorldEnd::Crashed { rank, message } => {
            Err(world_failure(hint, format!("rank {rank} {message}")))
        }
        WorldEnd::TimedOut { ranks, stacks } => Err(world_failure(
            hint,
            format!(
                "rank(s) {ranks:?} did not return, and nothing moved for {:?} (hang){}",
                options.limit,
                crate::world::where_they_were(&ranks, &stacks)
            ),
        )),
        WorldEnd::Overran { ranks, ran, .. } => Err(world_failure(
            hint,
            format!("rank(s) {ranks:?} still running after {ran:?}, though not hung: too slow here to check"),
        )),
        WorldEnd::Blocked {
            rank,
            what,
            invariant,
            limit,
        } => Err(Divergence {
            step,
            op,
            id: crate::spec::invariant(&invariant).map(|known| known.id),
            message: format!("{what} on rank {rank} had not returned after {limit:?}"),
        }),
    }
}
