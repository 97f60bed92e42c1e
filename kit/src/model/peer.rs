//! The late peers: every rank but rank 0 follows rank 0's collective rounds
//! (rank 1 of a two-rank world; ranks 1 to 3 of a larger one).
//!
//! This is the completion matrix's late-peer protocol (`matrix::late_peer_rounds`:
//! rounds in order, each joined only when the subject releases it) extended
//! to a sequence that mixes operations: rank 0's [`Plan`] names the driver
//! (by claim order) rank 1 must submit, and a round rank 0 gave up on
//! (natively cancelled, or after the group was poisoned) is *skipped*, so the
//! peer never joins work nobody will meet. Rank 1's own outcomes are not
//! under test, except the sender's wire log of a transfer it joined (P2P-3);
//! it only tears its work down when rank 0 is done. It waits, sleeps and
//! polls through the sequence's [`Scheduler`].

use std::time::Duration;

use eredu_core::{BoundedCompletion, BoundedCompletionWait, CompletionCancellationMode};

use super::op::Work;
use super::plan::{Plan, Told};
use super::scheduler::Scheduler;
use crate::check::{slack, Check, Finding};
use crate::harness::{CommCompletion, Harness};
use crate::matrix::{Driver, Handle};
use crate::world::RankCtx;

/// How long rank 1 waits for its send to complete before reading its wire
/// log (a send that takes longer is not checked).
const SEND_SETTLES: Duration = Duration::from_millis(200);

/// Whether `completion`'s work has ended (`Some(true)`: completed,
/// `Some(false)`: failed or cancelled): the observer's word when the harness
/// has one (rank 1 does not test `is_complete`, and must not be misled by an
/// early one), else `is_complete`'s.
fn ended<H: Harness>(ctx: &RankCtx<'_, H>, completion: &Handle<H>) -> Option<bool> {
    match ctx.optional_observer(completion.as_ref()) {
        Some(observer) => match observer.state() {
            crate::harness::WorkState::Live => None,
            crate::harness::WorkState::Completed => Some(true),
            _ => Some(false),
        },
        None => match completion.is_complete() {
            Ok(true) => Some(true),
            Err(_) => Some(false),
            Ok(false) => None,
        },
    }
}

/// [`ended`], polled for up to `limit`.
fn ended_within<H: Harness>(
    ctx: &RankCtx<'_, H>,
    scheduler: &dyn Scheduler,
    completion: &Handle<H>,
    limit: Duration,
) -> Option<bool> {
    let start = scheduler.now();
    loop {
        match ended(ctx, completion) {
            Some(ended) => return Some(ended),
            None if scheduler.now().saturating_sub(start) >= limit => return None,
            None => scheduler.sleep(Duration::from_micros(50)),
        }
    }
}

/// How long rank 1 waits for a round's fate before giving up.
const IDLE: Duration = Duration::from_secs(60);

/// Deadline for rank 1's own work at the end: short for abandoned rounds.
const ABANDONED: Duration = Duration::from_millis(1);

/// A cancellation mode the backend supports (teardown of rank 1's work).
pub(crate) fn teardown_mode<H: Harness>() -> CompletionCancellationMode {
    if <CommCompletion<H> as BoundedCompletion>::supports_cancellation(
        CompletionCancellationMode::NativeCancel,
    ) {
        CompletionCancellationMode::NativeCancel
    } else {
        CompletionCancellationMode::QuarantineUntilComplete
    }
}

/// Rank 1's script: join each round when told, in order, until rank 0 is done.
pub(crate) fn late_peer<H: Harness>(
    ctx: &RankCtx<'_, H>,
    scheduler: &dyn Scheduler,
    plan: &Plan,
) -> Check {
    let claims = ctx.harness().claims();
    let drivers: Vec<Driver<H>> = claims.drivers();
    let mut joined: Vec<(usize, Handle<H>)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0.. {
        match plan.next(round, IDLE) {
            Some(Told::Skip) => {}
            // A transfer's sender is the last rank; the other peers of a
            // larger world are not on its route.
            Some(Told::Join(driver))
                if drivers.get(driver).is_some_and(|d| {
                    d.subject.operation() == Some(crate::Operation::SendReceive)
                        && ctx.rank() + 1 != ctx.size()
                }) => {}
            Some(Told::Join(driver)) if driver < drivers.len() => {
                let planned = plan.get(round);
                let delay = planned.map_or(Duration::ZERO, |p| p.delay);
                if !delay.is_zero() {
                    scheduler.sleep(delay);
                }
                let varied =
                    planned.and_then(|p| Some((p.work, claims.varied(p.work.operation()?)?.1)));
                // P2P-3 is read only when no earlier send of this rank may
                // still add to the wire log (every earlier round has ended).
                let quiet = joined.iter().all(|(_, c)| ended(ctx, c).is_some());
                let submitted = match varied {
                    Some((work, vary)) => vary(ctx, ctx.executor(), work),
                    None => {
                        (drivers[driver].submit)(ctx, ctx.executor(), crate::matrix::Load::Light)
                    }
                };
                let sends =
                    varied.is_some_and(|(work, _)| matches!(work, Work::SendReceive { .. }));
                match submitted {
                    Ok(mut submitted) => {
                        let check = submitted.verify.take();
                        if let (true, Some(check)) = (sends, check) {
                            if quiet
                                && ended_within(ctx, scheduler, &submitted.completion, SEND_SETTLES)
                                    == Some(true)
                            {
                                if let Err(Finding::Violation(message)) = check(ctx) {
                                    plan.violation("P2P-3", format!("round {round}: {message}"));
                                }
                            }
                        }
                        joined.push((round, submitted.completion));
                    }
                    // Work that must fail may be refused on this side too.
                    Err(_) if planned.is_some_and(|p| p.work.must_fail().is_some()) => {}
                    Err(finding) => failures.push(format!("round {round}: {finding:?}")),
                }
            }
            _ => break,
        }
    }
    tear_down(ctx, scheduler, plan, joined);
    plan.finish();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Finding::Harness(format!(
            "the late peer could not submit its side: {}",
            failures.join("; ")
        )))
    }
}

/// Ends rank 1's work: rounds rank 0 completed finish promptly (within the
/// scheduler's grace for `slack::RELEASE`); abandoned ones are torn down at
/// once.
fn tear_down<H: Harness>(
    ctx: &RankCtx<'_, H>,
    scheduler: &dyn Scheduler,
    plan: &Plan,
    joined: Vec<(usize, Handle<H>)>,
) {
    for (round, completion) in joined {
        let timeout = if plan.abandoned(round) {
            Some(ABANDONED)
        } else {
            scheduler.grace(slack::RELEASE)
        };
        let Some(timeout) = timeout else {
            let _ = completion.wait();
            continue;
        };
        if let Ok(policy) = BoundedCompletionWait::new(timeout, teardown_mode::<H>()) {
            let _ = completion.wait_bounded(ctx, policy);
        }
    }
}
