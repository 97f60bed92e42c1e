//! Errors from a bounded wait: CAN-7 (an `Err` reports terminal work, or
//! comes after live work was put in the selected disposition; faulted work
//! kept live by a hold) and CAN-9 (work that failed yields `Err`, never
//! `Completed`).

use std::time::Duration;

use eredu_core::BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use eredu_core::CompletionCancellationMode;
use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

use super::disposition::{error_disposition, retained};
use super::modes::each_mode;
use super::outcome::{completed_while_pending, describe, finished_early, recorded_for, Waited};
use super::round::{Round, Seen, Setup};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Harness, WorkState};
use crate::matrix::Driver;
use crate::suites::common::settle;
use crate::world::RankCtx;

/// CAN-7: an `Err` from `wait_bounded` reports terminal work, or comes after
/// live work was put in the selected disposition. A fault is injected before
/// submission, and the work is kept live by its hold (late-peer subjects: by
/// a hold on the subject's executor as well as the late peer), so the error
/// can be published while the work is still live. A backend that publishes
/// the error only once the work ended never returns an error for live work:
/// CAN-7 holds by its design (a pass with a note).
pub(super) fn errors_never_drop_live_work<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let setup = Setup {
            fault: true,
            hold: driver.pending.late_peers(),
        };
        let mut round = Round::start(ctx, driver, setup)?;
        // Let the injected error become observable (bounded; never asserted).
        let mut reported = None;
        {
            let completion = round.completion()?;
            eventually(slack::PROMPT, || match completion.is_complete() {
                Ok(false) => false,
                Ok(true) => true,
                Err(error) => {
                    reported = Some(error);
                    true
                }
            });
        }
        let waited = round.wait_bounded(slack::DEADLINE, mode)?;
        let seen = round.seen()?;
        let Err(error) = &waited.outcome else {
            return no_error_for_live_work(round, mode, &waited, &seen, reported, &mut kept);
        };
        error_disposition(&seen, driver.subject, mode, error)?;
        if mode == Quarantine && !seen.state.is_terminal() {
            settle();
            let later = round.seen()?;
            if !later.state.is_terminal() {
                let after = format!(
                    "{:?} after wait_bounded under QuarantineUntilComplete returned Err({error})",
                    slack::SETTLE
                );
                retained(&later, driver.subject, &after)?;
            }
        }
        round.dispose(mode, &mut kept)
    })
}

/// CAN-7 when faulted, held work yielded no `Err`. `DeadlineExceeded` on work
/// that was live with no error published means the backend publishes the
/// injected error only once the work ended: no error path ever sees live
/// work, so CAN-7 holds by design (a pass, with a note saying why, once the
/// fault is seen to have taken effect or the work was torn down). Anything
/// else is another invariant's violation (recorded for it, the case
/// inconclusive) or lazy work that finished early.
fn no_error_for_live_work<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    mode: CompletionCancellationMode,
    waited: &Waited,
    seen: &Seen,
    reported: Option<String>,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (subject, ctx) = (round.subject, round.ctx);
    let call = format!(
        "wait_bounded({:?}, {mode:?}) on held work with an injected fault",
        slack::DEADLINE
    );
    let elsewhere = |id: &str, message: String| recorded_for(ctx, id, "CAN-7", message);
    if let Some(error) = reported {
        return Err(elsewhere(
            "EXC-6",
            format!(
                "{subject}: is_complete() reported Err({error}), then {call} yielded {}: errors must be sticky",
                describe(&waited.outcome)
            ),
        ));
    }
    if seen.state == WorkState::Failed {
        return Err(elsewhere(
            "CAN-9",
            format!(
                "{subject}: {call} yielded {} although the work had failed",
                describe(&waited.outcome)
            ),
        ));
    }
    match &waited.outcome {
        Ok(Completed) if waited.pending => Err(elsewhere(
            "CAN-1",
            completed_while_pending(subject, round.via, &call),
        )),
        Ok(DeadlineExceeded { .. }) if waited.pending => {
            let ended = match mode {
                Quarantine => {
                    round.release();
                    let observer = round.observer()?;
                    let limit = round.completes_within();
                    eventually(limit, || observer.state().is_terminal());
                    match observer.state() {
                        WorkState::Failed => "ended Failed once released".to_owned(),
                        WorkState::Live => {
                            return Err(crate::check::setup(format!(
                                "{subject}: the quarantined faulted work was still Live {limit:?} after its release"
                            )))
                        }
                        other => {
                            return Err(crate::check::setup(format!(
                                "{subject}: fault injection did not make the work fail: after release it was {other:?}"
                            )))
                        }
                    }
                }
                NativeCancel => {
                    let state = seen.state;
                    round.dispose(mode, kept)?;
                    format!("was {state:?} after its teardown")
                }
            };
            ctx.note(format!(
                "{subject} under {mode:?}: the backend publishes an injected fault only once the work ended (the held \
                 work was still Live with no error at the deadline, {call} yielded {}, and the work {ended}); no \
                 error is ever returned for live work, so no error path can drop live resources",
                describe(&waited.outcome)
            ));
            Ok(())
        }
        _ => Err(finished_early(subject, round.via, &call, waited)),
    }
}

/// CAN-9: work that failed (an injected fault, run to its end) yields `Err`
/// from `wait_bounded`, never `Completed`.
pub(super) fn failed_work_is_an_error<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    each_mode(ctx, |mode| {
        let setup = Setup {
            fault: true,
            hold: false,
        };
        let mut round = Round::start(ctx, driver, setup)?;
        round.release();
        let limit = round.completes_within();
        if round.observer.is_some() {
            observed_failure(&round, limit)?;
        } else {
            reported_failure(&round, limit)?;
        }
        let waited = round.wait_bounded(slack::RELEASE, mode)?;
        ensure(waited.outcome.is_err(), || {
            format!(
                "{}: work that had failed yielded {} from wait_bounded({:?}, {mode:?}), expected Err",
                driver.subject,
                describe(&waited.outcome),
                slack::RELEASE
            )
        })
    })
}

/// CAN-9 with the observer: the released faulted work ended `Failed`.
fn observed_failure<H: Harness>(round: &Round<'_, '_, H>, limit: Duration) -> Check {
    let observer = round.observer()?;
    eventually(limit, || observer.state().is_terminal());
    match observer.state() {
        WorkState::Failed => Ok(()),
        WorkState::Live => Err(crate::check::setup(format!(
            "{}: the faulted work was still Live {limit:?} after its release",
            round.subject
        ))),
        other => Err(crate::check::setup(format!(
            "{}: fault injection did not make the work fail: after release it was {other:?}",
            round.subject
        ))),
    }
}

/// CAN-9 with fault injection alone: the backend itself reported the
/// released faulted work's error (`is_complete()` returned `Err`). Work it
/// reports complete instead is inconclusive: without an observer, nothing
/// tells a fault that never fired from an error the backend lost.
fn reported_failure<H: Harness>(round: &Round<'_, '_, H>, limit: Duration) -> Check {
    let completion = round
        .completion
        .as_ref()
        .ok_or_else(|| Finding::Harness("CAN-9: the round's completion was taken".into()))?;
    let mut answer = Ok(false);
    eventually(limit, || {
        answer = completion.is_complete();
        !matches!(answer, Ok(false))
    });
    match answer {
        Err(_) => Ok(()),
        Ok(false) => Err(crate::check::setup(format!(
            "{}: is_complete() still returned Ok(false) {limit:?} after the faulted work's release",
            round.subject
        ))),
        Ok(true) => Err(crate::check::setup(format!(
            "{}: is_complete() returned Ok(true) for the released faulted work: with no observer, nothing \
             tells a fault that never fired from an error the backend lost, so CAN-9 could not be checked",
            round.subject
        ))),
    }
}
