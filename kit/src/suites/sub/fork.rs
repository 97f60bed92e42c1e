//! SUB-1: `fork_executors(e, n)` returns exactly `n` executors, and they
//! are independent lanes: while one is kept busy, work on each of the
//! others completes.

use std::time::Instant;

use super::race::{blocked_work_is_pending, race, Race, Racer};
use super::shared::{as_setup, fork, lane, submit_values, LHS, SHAPE};
use crate::check::{ensure, setup, Check, Finding};
use crate::harness::{Harness, OwnedExecutor};
use crate::suites::blocker::{free_lane_limit, Blocker};
use crate::world::RankCtx;

/// Lazy work that blocks a lane in SUB-1 is scaled so that its known busy
/// while comfortably exceeds [`free_lane_limit`].
const SUB_1_FACTOR: usize = 2;

/// SUB-1: `fork_executors(e, n)` returns exactly `n` executors, and they are
/// independent lanes: while one of them is kept busy (held, or evaluating
/// lazy work), work submitted on each of the others completes.
pub(super) fn forked_lanes_are_independent<H: Harness>(ctx: &RankCtx<'_, H>) -> Check {
    // Independence first: it is the behaviour under test, and checking it on
    // the first lanes forked keeps its verdict free of earlier forks' drops.
    let lanes = forked_exactly(ctx, 3)?;
    for blocked in 0..lanes.len() {
        others_run_while_one_is_blocked(ctx, &lanes, blocked)?;
    }
    drop(lanes);
    for count in [0, 1] {
        forked_exactly(ctx, count)?;
    }
    Ok(())
}

/// `fork_executors(e, count)` returns exactly `count` executors.
fn forked_exactly<H: Harness>(
    ctx: &RankCtx<'_, H>,
    count: usize,
) -> Result<Vec<OwnedExecutor<H>>, Finding> {
    let lanes = fork(ctx, count, "SUB-1")?;
    ensure(lanes.len() == count, || {
        format!(
            "fork_executors(executor, {count}) returned {} executors, expected exactly {count}",
            lanes.len()
        )
    })?;
    Ok(lanes)
}

/// Keeps lane `blocked` busy with work queued on it; work on every other
/// lane completes while it is surely busy.
fn others_run_while_one_is_blocked<H: Harness>(
    ctx: &RankCtx<'_, H>,
    lanes: &[OwnedExecutor<H>],
    blocked: usize,
) -> Check {
    let input = ctx.tensor(&LHS, &SHAPE)?;
    let blocker = Blocker::block(ctx, lane::<H>(&lanes[blocked]), SUB_1_FACTOR)?;
    blocked_work_is_pending(
        &blocker,
        &blocker.completion,
        "fork_executors",
        &format!("the work keeping forked lane {blocked} busy"),
        "lane independence",
    )?;
    let mut racers = Vec::new();
    for (index, other) in lanes.iter().enumerate().filter(|(i, _)| *i != blocked) {
        blocker.confirm(&format!("work was submitted on forked lane {index}"))?;
        let submitted = Instant::now();
        let completion =
            submit_values::<H>(lane::<H>(other), &[&input], "work on a free lane", "SUB-1")?;
        racers.push(Racer {
            lane: format!("forked lane {index}"),
            completion,
            submitted,
        });
    }
    let how = blocker.how();
    match race(&blocker, &racers, free_lane_limit(&blocker)) {
        Race::Completed => {}
        Race::Stuck { lane, elapsed } => {
            return Err(Finding::Violation(format!(
                "fork_executors: work on {lane} was still pending {elapsed:?} after its submission \
                 while forked lane {blocked} was {how} (expected it to complete meanwhile), so the \
                 lanes are not independent"
            )))
        }
        Race::Failed { lane, error } => {
            return Err(Finding::Violation(format!(
                "fork_executors: work on {lane} failed while forked lane {blocked} was {how}: \
                 {error}"
            )))
        }
        Race::NotBusy => {
            return Err(setup(format!(
            "the lazy work keeping forked lane {blocked} busy may have finished before the work \
                 on the other forked lanes was seen complete"
        )))
        }
    }
    blocker
        .release_and_finish(|| {
            format!("the work keeping forked lane {blocked} busy did not complete once released")
        })
        .map_err(as_setup)
}
