//! EXC-4: `wait` blocks on its own submission only: it returns once that
//! work completed, never before, and never waits for work on another lane
//! that is kept busy (a [`Busy`] lane: fed, held or lazy).

use super::shared::{optional_observer, wait_on_complete_succeeds, wait_succeeds};
use crate::check::{ensure, eventually, Check, Finding};
use crate::harness::{Executor, Harness, Observer, WorkState};
use crate::matrix::{wait_within, Driver, Pending, Subject};
use crate::suites::blocker::Blocker;
use crate::suites::common::{fork_one_lane, settle, verify_outputs};
use crate::world::RankCtx;

/// EXC-4: `wait()` returns only after this work completed, and waits for
/// nothing else: with a submission blocked on another executor lane, the
/// subject's released work completes and `wait()` returns.
pub(super) fn wait_waits_for_this_work_only<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    wait_returns_only_after_completion(ctx, driver)?;
    wait_ignores_a_blocked_lane(ctx, driver)
}

/// EXC-4, first half: `wait()` right after release returns only once the
/// work completed: the observer reports it completed (when the harness has
/// one), `is_complete()` agrees, and the outputs hold their values.
fn wait_returns_only_after_completion<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut pending = driver.pending(ctx)?;
    let observer = optional_observer(ctx, &pending.submitted.completion);
    settle();
    pending.release();
    wait_succeeds(
        &pending.submitted.completion,
        driver.subject,
        "right after release",
    )?;
    if let Some(observer) = observer {
        let state = observer.state();
        ensure(state == WorkState::Completed, || {
            format!(
                "{}: wait() returned Ok(()) while the observer reported {state:?}; expected it to return only after completion",
                driver.subject
            )
        })?;
    }
    // Black-box: the work is complete once wait() returned (a stale first
    // query is EXC-5's business, so a few queries are allowed).
    let completion = &pending.submitted.completion;
    let seen: Vec<_> = (0..3).map(|_| completion.is_complete()).collect();
    ensure(seen.iter().any(|seen| matches!(seen, Ok(true))), || {
        format!(
            "{}: wait() returned Ok(()), yet is_complete() then returned {seen:?}; wait() must return only after this \
             submission completed",
            driver.subject
        )
    })?;
    verify_outputs(&mut pending, ctx)
}

/// What keeps EXC-4's forked lane busy: the hold when the harness has one;
/// else, where late peers keep the subject pending, a second round of the
/// subject's own work on the lane, whose peer joins only after the subject's
/// (submitted after it, so a backend that matches a group's collectives in
/// submission order pairs each with its own: black-box, with no timing);
/// else a [`Blocker`] (fed, or lazy work). `send_receive` rounds share one
/// route, where two receives could take each other's message, so it keeps a
/// blocker.
fn peer_round_keeps_busy<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> bool {
    !ctx.harness().instruments().hold
        && driver.pending.late_peers()
        && driver.subject != Subject::Operation(crate::Operation::SendReceive)
}

enum Busy<'c, 'w, H: Harness> {
    Blocker(Blocker<'c, 'w, H>),
    Round(Pending<'c, 'w, H>),
}

impl<'c, 'w, H: Harness> Busy<'c, 'w, H> {
    fn on(ctx: &'c RankCtx<'w, H>, driver: Driver<H>, lane: &Executor<H>) -> Result<Self, Finding> {
        if peer_round_keeps_busy(ctx, driver) {
            return Ok(Self::Round(driver.about_to_release_on(ctx, lane)?));
        }
        let blocker = Blocker::block(ctx, lane, 4)?;
        if matches!(blocker.completion.is_complete(), Ok(true)) {
            blocker.confirm("the blocked lane's work reported complete")?;
            return Err(if blocker.certain() && !ctx.harness().instruments().hold {
                crate::check::setup(
                    "work on the output of a sum reduction whose late peer had not joined reported \
                     complete (see EXC-2): the forked lane is not busy",
                )
            } else {
                Finding::Harness(
                    "the hold instrument did not keep work on a forked lane pending".into(),
                )
            });
        }
        Ok(Self::Blocker(blocker))
    }

    fn confirm(&self, what: &str) -> Check {
        match self {
            Self::Blocker(blocker) => blocker.confirm(what),
            Self::Round(round) => round.confirm(what),
        }
    }

    fn release_and_finish(self) -> Check {
        let what = "the submission on the forked lane did not complete once released";
        match self {
            Self::Blocker(blocker) => blocker.release_and_finish(|| what.into()),
            Self::Round(mut round) => round
                .release_and_wait()
                .map_err(|error| crate::check::setup(format!("{what}: {error}"))),
        }
    }
}

/// EXC-4, second half: a busy forked lane (see [`Busy`]) delays neither the
/// subject's work nor its `wait()`: once the work is reported complete,
/// `wait()` has nothing left to wait for and must return at once (a `wait()`
/// that waits for the other lane fails within [`slack::BLOCKED`](crate::check::slack::BLOCKED)), while the
/// other lane is still busy.
fn wait_ignores_a_blocked_lane<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let lane = fork_one_lane(ctx)?;
    let lane: &Executor<H> = std::borrow::Borrow::borrow(&lane);
    // A late-peer round on the lane (the subject's work, or a fed blocker's)
    // comes after the subject's: peers join rounds in order.
    let late_peer_round = !ctx.harness().instruments().hold && driver.pending.late_peers();
    let (busy, mut pending) = if late_peer_round {
        let pending = driver.about_to_release(ctx)?;
        (Busy::on(ctx, driver, lane)?, pending)
    } else {
        let busy = Busy::on(ctx, driver, lane)?;
        (busy, driver.about_to_release(ctx)?)
    };
    let observer = optional_observer(ctx, &pending.submitted.completion);
    pending.release();
    let limit = pending.submitted.completes_within();
    let completion = &pending.submitted.completion;
    let finished = match &observer {
        Some(observer) => eventually(limit, || {
            let _ = completion.is_complete();
            observer.state().is_terminal()
        }),
        None => wait_within(completion, limit).is_ok(),
    };
    busy.confirm("the subject's work finished")?;
    ensure(finished, || {
        format!(
            "{}: released work did not finish within {limit:?} while a submission on another executor lane was kept \
             busy (observer: {:?}); it must not wait for other lanes",
            driver.subject,
            observer.as_ref().map(Observer::state)
        )
    })?;
    wait_on_complete_succeeds(
        &pending.submitted.completion,
        driver.subject,
        "on finished work while another executor lane was busy",
    )?;
    busy.confirm("wait() returned")?;
    verify_outputs(&mut pending, ctx)?;
    busy.release_and_finish()
}
