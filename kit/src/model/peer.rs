//! The late peer: rank 1 follows rank 0's collective rounds.
//!
//! This is the completion matrix's late-peer protocol (`matrix::late_peer_rounds`:
//! rounds in order, each joined only when the subject releases it) extended
//! to a sequence that mixes operations: the release signal names the driver
//! (by claim order) rank 1 must submit, and a round rank 0 gave up on
//! (natively cancelled, or after the group was poisoned) is *skipped*, so the
//! peer never joins work nobody will meet. Rank 1's own outcomes are not
//! under test; it only tears its work down when rank 0 is done.

use std::sync::Mutex;
use std::time::Duration;

use eredu_core::{BoundedCompletion, BoundedCompletionWait, CompletionCancellationMode};

use super::op::Work;
use crate::check::{slack, Check, Finding};
use crate::harness::{CommCompletion, Harness};
use crate::matrix::{Driver, Handle};
use crate::world::RankCtx;

/// What rank 0 tells rank 1 about each round beyond its signals: the work
/// to submit (its parameters) and how late to join. Written before the
/// round's join signal is raised.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    rounds: Mutex<Vec<Option<Planned>>>,
    /// What rank 1 saw go wrong on its side of a round (the SPEC ID and a
    /// message): read by rank 0 once rank 1 finished.
    violations: Mutex<Vec<(&'static str, String)>>,
}

/// One round's plan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub(crate) work: Work,
    pub(crate) delay: Duration,
}

impl Plan {
    fn rounds(&self) -> std::sync::MutexGuard<'_, Vec<Option<Planned>>> {
        super::lock(&self.rounds)
    }

    /// Rank 1 is to submit `work` in `round`.
    pub(crate) fn set(&self, round: usize, work: Work) {
        let mut rounds = self.rounds();
        if rounds.len() <= round {
            rounds.resize(round + 1, None);
        }
        rounds[round] = Some(Planned {
            work,
            delay: Duration::ZERO,
        });
    }

    /// Rank 1 joins `round` `delay` after it is told to.
    pub(crate) fn delay(&self, round: usize, delay: Duration) {
        if let Some(Some(planned)) = self.rounds().get_mut(round) {
            planned.delay = delay;
        }
    }

    fn get(&self, round: usize) -> Option<Planned> {
        self.rounds().get(round).copied().flatten()
    }

    fn violation(&self, id: &'static str, message: String) {
        super::lock(&self.violations).push((id, message));
    }

    /// The first violation rank 1 saw.
    pub(crate) fn first_violation(&self) -> Option<(&'static str, String)> {
        super::lock(&self.violations).first().cloned()
    }
}

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
    completion: &Handle<H>,
    limit: Duration,
) -> Option<bool> {
    let start = std::time::Instant::now();
    loop {
        match ended(ctx, completion) {
            Some(ended) => return Some(ended),
            None if start.elapsed() >= limit => return None,
            None => crate::world::pause(Duration::from_micros(50)),
        }
    }
}

/// Rank 1 submits its side of `round` with driver `driver`.
pub(crate) fn join(round: usize, driver: usize) -> String {
    format!("commcheck-model-round-{round}-join-{driver}")
}

/// Rank 1 never joins `round`.
pub(crate) fn skip(round: usize) -> String {
    format!("commcheck-model-round-{round}-skip")
}

/// Rank 0 gave up on `round` after rank 1 may have joined it: rank 1 tears
/// its side down at once instead of waiting for it.
pub(crate) fn abandon(round: usize) -> String {
    format!("commcheck-model-round-{round}-abandon")
}

/// Rank 0 has released or skipped every round it will ever use.
pub(crate) const DONE: &str = "commcheck-model-done";

/// Rank 1 has torn down and dropped all of its work.
pub(crate) const FINISHED: &str = "commcheck-model-peer-finished";

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
pub(crate) fn late_peer<H: Harness>(ctx: &RankCtx<'_, H>, plan: &Plan) -> Check {
    let claims = ctx.harness().claims();
    let drivers: Vec<Driver<H>> = claims.drivers();
    let mut joined: Vec<(usize, Handle<H>)> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0.. {
        let mut names = vec![skip(round)];
        names.extend((0..drivers.len()).map(|driver| join(round, driver)));
        names.push(DONE.to_owned());
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        match ctx.await_any_signal(&refs, IDLE) {
            Some(0) => {}
            Some(index) if index <= drivers.len() => {
                let planned = plan.get(round);
                let delay = planned.map_or(Duration::ZERO, |p| p.delay);
                if !delay.is_zero() {
                    crate::world::pause(delay);
                }
                let varied =
                    planned.and_then(|p| Some((p.work, claims.varied(p.work.operation()?)?.1)));
                // P2P-3 is read only when no earlier send of this rank may
                // still add to the wire log (every earlier round has ended).
                let quiet = joined.iter().all(|(_, c)| ended(ctx, c).is_some());
                let submitted = match varied {
                    Some((work, vary)) => vary(ctx, ctx.executor(), work),
                    None => {
                        (drivers[index - 1].submit)(ctx, ctx.executor(), crate::matrix::Load::Light)
                    }
                };
                let sends =
                    varied.is_some_and(|(work, _)| matches!(work, Work::SendReceive { .. }));
                match submitted {
                    Ok(mut submitted) => {
                        let check = submitted.verify.take();
                        if let (true, Some(check)) = (sends, check) {
                            if quiet
                                && ended_within(ctx, &submitted.completion, SEND_SETTLES)
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
    tear_down(ctx, joined);
    ctx.signal(FINISHED);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Finding::Harness(format!(
            "the late peer could not submit its side: {}",
            failures.join("; ")
        )))
    }
}

/// Ends rank 1's work: rounds rank 0 completed finish promptly; abandoned
/// ones are torn down at once.
fn tear_down<H: Harness>(ctx: &RankCtx<'_, H>, joined: Vec<(usize, Handle<H>)>) {
    for (round, completion) in joined {
        let abandoned = ctx.await_signal(&abandon(round), Duration::ZERO);
        let timeout = if abandoned { ABANDONED } else { slack::RELEASE };
        if let Ok(policy) = BoundedCompletionWait::new(timeout, teardown_mode::<H>()) {
            let _ = completion.wait_bounded(ctx, policy);
        }
    }
}
