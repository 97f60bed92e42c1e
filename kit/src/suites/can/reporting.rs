//! What `wait_bounded` reports: CAN-1 (`Completed` exactly when the work
//! completed), CAN-2 (the deadline honoured, and a quarantine wait returning
//! on time), CAN-3 (the cancellation reported is the policy's mode) and
//! CAN-4 (a claimed mode turns pending work into `DeadlineExceeded`).

use eredu_core::BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use eredu_core::CompletionCancellationMode::NativeCancel;

use super::modes::each_mode;
use super::outcome::{
    completed_while_pending, describe, exceeded, finished_early, why_pending, Waited,
};
use super::round::{finished_work_yields_completed, wait_on_pending, Finished};
use crate::check::{ensure, slack, Check, Finding};
use crate::harness::Harness;
use crate::matrix::{Driver, PendingVia, Subject};
use crate::world::RankCtx;

/// CAN-1: work that completed before the call yields `Ok(Completed)` under a
/// generous deadline; work still pending at a short deadline never does.
pub(super) fn completion_is_reported_exactly<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        finished_work_yields_completed(ctx, driver, slack::RELEASE, mode, Finished::BeforeTheCall)?;
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on work that had not finished",
            slack::DEADLINE
        );
        not_completed_while_pending(driver.subject, driver.pending, &call, &waited)
    })
}

/// CAN-1: pending work never yields `Ok(Completed)` while it is surely
/// pending; if it may have finished during `call`, the round tells nothing.
fn not_completed_while_pending(
    subject: Subject,
    via: PendingVia,
    call: &str,
    waited: &Waited,
) -> Check {
    match &waited.outcome {
        Ok(Completed) if waited.pending => Err(Finding::Violation(completed_while_pending(
            subject, via, call,
        ))),
        Ok(Completed) => Err(finished_early(subject, via, call, waited)),
        _ => Ok(()),
    }
}

/// CAN-2: `DeadlineExceeded` never comes before the timeout, and under
/// quarantine the call returns within the timeout plus [`slack::OVERRUN`].
/// A NativeCancel wait returns once teardown has finished, which the
/// contract does not bound: only its lower bound is checked, and a return
/// later than the timeout plus the slack is reported here, once, as a note
/// with the deadline, the return time and the outcome (never a failure, and
/// never a teardown measured on other work subtracted from it).
pub(super) fn deadline_is_honoured<H: Harness>(ctx: &RankCtx<'_, H>, driver: Driver<H>) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        returns_on_time(ctx, driver.subject, &waited)
    })
}

fn returns_on_time<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject, waited: &Waited) -> Check {
    let (timeout, mode, elapsed) = (waited.timeout, waited.mode, waited.elapsed);
    let call = format!("wait_bounded({timeout:?}, {mode:?}) on pending work");
    if matches!(waited.outcome, Ok(DeadlineExceeded { .. })) {
        ensure(elapsed >= timeout, || {
            format!("{subject}: {call} returned DeadlineExceeded after only {elapsed:?}, before its timeout")
        })?;
    }
    let late = elapsed > timeout + slack::OVERRUN;
    if mode == NativeCancel {
        if late {
            ctx.note(format!(
                "{subject}: {call} returned {} after {elapsed:?}, {:?} past its deadline: NativeCancel returns once \
                 native teardown has finished, which the contract does not bound (when it returned, the backend \
                 reported the work {})",
                describe(&waited.outcome),
                elapsed.saturating_sub(timeout),
                match waited.outcome {
                    Ok(Completed) => "complete",
                    Ok(DeadlineExceeded { .. }) => "torn down",
                    Err(_) => "failed",
                }
            ));
        }
        return Ok(());
    }
    ensure(!late, || {
        format!(
            "{subject}: {call} returned {} after {elapsed:?}, later than the timeout plus {:?} slack",
            describe(&waited.outcome),
            slack::OVERRUN
        )
    })
}

/// CAN-3: the cancellation a `DeadlineExceeded` reports is the policy's mode.
pub(super) fn reported_mode_is_the_policy_mode<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on pending work",
            slack::DEADLINE
        );
        match &waited.outcome {
            Ok(DeadlineExceeded { cancellation }) => ensure(*cancellation == mode, || {
                format!(
                    "{}: {call} reported DeadlineExceeded {{ cancellation: {cancellation:?} }}, expected {mode:?}",
                    driver.subject
                )
            }),
            _ if !waited.pending => Err(finished_early(driver.subject, driver.pending, &call, &waited)),
            other => Err(Finding::NotSupported(format!(
                "{}: pending work under {mode:?} yielded {}, which reports no cancellation (see CAN-1, CAN-4)",
                driver.subject,
                describe(other)
            ))),
        }
    })
}

/// CAN-4: a mode the backend claims (`supports_cancellation` true) turns
/// pending work into `Ok(DeadlineExceeded { cancellation: mode })`: an `Err`
/// or `Completed` on work still surely pending when the call returned, or
/// another mode, is a violation.
pub(super) fn supported_modes_are_honoured<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        let waited = wait_on_pending(ctx, driver, slack::DEADLINE, mode, &mut kept)?;
        let call = format!(
            "wait_bounded({:?}, {mode:?}) on pending work",
            slack::DEADLINE
        );
        let other_mode = matches!(waited.outcome, Ok(DeadlineExceeded { .. }));
        if exceeded(&waited.outcome, mode) {
            Ok(())
        } else if !waited.pending && !other_mode {
            Err(finished_early(
                driver.subject,
                driver.pending,
                &call,
                &waited,
            ))
        } else {
            Err(Finding::Violation(format!(
                "{}: supports_cancellation({mode:?}) is true, yet {call} yielded {}{}, expected Ok(DeadlineExceeded {{ cancellation: {mode:?} }})",
                driver.subject,
                describe(&waited.outcome),
                if other_mode {
                    String::new()
                } else {
                    format!(" although the work was certainly still pending ({})", why_pending(driver.pending))
                }
            )))
        }
    })
}
