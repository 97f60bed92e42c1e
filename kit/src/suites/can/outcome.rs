//! What one `wait_bounded` call returned ([`Waited`]) and how the CAN
//! checks word it: the outcome and timeout as messages show them, why
//! pending work could not have completed (CAN-1), why work may have ended
//! before an observation (inconclusive, never a violation), the
//! NativeCancel wait that let work run to its end (CAN-2, CAN-5), and a
//! violation of another invariant seen while checking one (CAN-1, CAN-3,
//! CAN-4, CAN-9 and EXC-6, recorded for them).

use std::time::Duration;

use eredu_core::BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use eredu_core::CompletionCancellationMode::NativeCancel;
use eredu_core::{BoundedCompletionOutcome, CompletionCancellationMode};

use super::modes::did_not_apply;
use crate::check::{slack, Finding};
use crate::harness::Harness;
use crate::matrix::{Driver, PendingVia, Subject};
use crate::world::RankCtx;

type Outcome = Result<BoundedCompletionOutcome, String>;

/// What one `wait_bounded` call returned.
pub(super) struct Waited {
    pub(super) outcome: Outcome,
    /// The policy's timeout and mode.
    pub(super) timeout: Duration,
    pub(super) mode: CompletionCancellationMode,
    /// How long the call took.
    pub(super) elapsed: Duration,
    /// Whether the work was still surely pending right after the call
    /// returned (always, for held or late-peer work not yet released).
    pub(super) pending: bool,
    /// The work may end before its late peer joins (a sender, a root:
    /// `Submitted::alone`).
    pub(super) alone: bool,
}

/// Whether `outcome` is `Ok(DeadlineExceeded { cancellation: mode })`.
pub(super) fn exceeded(outcome: &Outcome, mode: CompletionCancellationMode) -> bool {
    matches!(outcome, Ok(DeadlineExceeded { cancellation }) if *cancellation == mode)
}

pub(super) fn describe(outcome: &Outcome) -> String {
    match outcome {
        Ok(outcome) => format!("Ok({outcome:?})"),
        Err(error) => format!("Err({error})"),
    }
}

/// A timeout as messages show it (`Duration::MAX` by name).
pub(super) fn shown(timeout: Duration) -> String {
    if timeout == Duration::MAX {
        "Duration::MAX".into()
    } else {
        format!("{timeout:?}")
    }
}

/// Why pending work could not have completed, as messages say it.
pub(super) fn why_pending(via: PendingVia) -> &'static str {
    match via {
        PendingVia::Hold => "its hold was not released",
        PendingVia::LatePeer => "its late peer had not joined",
        PendingVia::PeerFed => {
            "the sum reduction whose output it reads had a late peer that had not joined"
        }
        PendingVia::Lazy => "its lazy work was certainly still running",
    }
}

/// Why work kept pending may have ended before a check's observation.
pub(super) fn ended_early(via: PendingVia) -> &'static str {
    match via {
        PendingVia::Lazy => "the lazy work that kept the subject pending may have finished",
        PendingVia::Hold | PendingVia::LatePeer | PendingVia::PeerFed => {
            "the observer reports that the work ended on its own although the kit kept it pending (the \
             operation's own invariant answers for that)"
        }
    }
}

/// The inconclusive finding for an outcome that tells nothing because the
/// work may have ended on its own before `call` returned.
/// Why a disposition check has nothing to check when `call` did not return
/// `DeadlineExceeded { cancellation: mode }`: the work finished first
/// (inconclusive), or the backend answered otherwise (CAN-3 and CAN-4 judge
/// that; here it is not-supported).
pub(super) fn nothing_to_dispose<H: Harness>(
    driver: Driver<H>,
    mode: CompletionCancellationMode,
    call: &str,
    waited: &Waited,
    what: &str,
) -> Finding {
    if !waited.pending {
        return finished_early(driver.subject, driver.pending, call, waited);
    }
    Finding::NotSupported(format!(
        "{}: {call} yielded {}, not DeadlineExceeded {{ cancellation: {mode:?} }}: no {what} to check (see CAN-3, \
         CAN-4)",
        driver.subject,
        describe(&waited.outcome)
    ))
}

pub(super) fn finished_early(
    subject: Subject,
    via: PendingVia,
    call: &str,
    waited: &Waited,
) -> Finding {
    if waited.alone && !waited.pending {
        return Finding::NothingToCheck(format!(
            "{subject}: {call} yielded {}, and the sender's (root's) part may have ended on its own before \
             the call returned (an eager protocol at this size; the backend did not say it was still \
             pending): nothing to check on its side",
            describe(&waited.outcome)
        ));
    }
    if completed_in_teardown(waited) {
        return did_not_apply(format!(
            "{subject}: {call} yielded Ok(Completed) {:?} after it was called, not at its deadline: the \
             backend let the work run to its end instead of stopping it (its teardown of such work is not \
             native cancellation), and {}, so Completed may be exact; the NativeCancel part could not be \
             decided on this work (CAN-2 reports the return time)",
            waited.elapsed,
            ended_early(via)
        ));
    }
    crate::check::setup(format!(
        "{subject}: {call} yielded {}, but {} before the call returned",
        describe(&waited.outcome),
        ended_early(via)
    ))
}

/// Whether a NativeCancel wait returned `Ok(Completed)` well after its
/// deadline on work the kit cannot vouch was still pending then: the
/// backend ran the work to its end during teardown (it cannot stop it), and
/// the completion may be exact. A backend that answers `Completed` *at* the
/// deadline gets no such benefit of the doubt.
fn completed_in_teardown(waited: &Waited) -> bool {
    waited.mode == NativeCancel
        && matches!(waited.outcome, Ok(Completed))
        && !waited.pending
        && waited.elapsed > waited.timeout.saturating_add(slack::OVERRUN)
}

/// The CAN-1 violation `Completed` on surely pending work is, as messages say it.
pub(super) fn completed_while_pending(subject: Subject, via: PendingVia, call: &str) -> String {
    format!(
        "{subject}: {call} yielded Ok(Completed) although the work could not have completed ({})",
        why_pending(via)
    )
}

/// A violation of invariant `id` seen while checking the case's invariant
/// `checking`: recorded for `id` (never the case's verdict), and the case
/// learnt nothing about its own invariant from this round (inconclusive).
pub(super) fn recorded_for<H: Harness>(
    ctx: &RankCtx<'_, H>,
    id: &str,
    checking: &str,
    message: String,
) -> Finding {
    ctx.attribute(id, message.clone());
    Finding::Inconclusive(format!(
        "{id} violated while checking {checking} (recorded for {id}): {message}"
    ))
}
