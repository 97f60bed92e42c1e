//! CAN-8: edge deadlines (`Duration::MAX`, 1 ns, 500 µs) neither panic nor
//! overflow, and on pending work give what CAN-1, CAN-3, CAN-4 and (with the
//! instruments) the CAN-5..7 dispositions require.

use std::time::Duration;

use eredu_core::BoundedCompletionOutcome::{Completed, DeadlineExceeded};
use eredu_core::CompletionCancellationMode;
use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};

use super::disposition::{
    after_native_cancel, error_disposition, released_after_completion, retained, torn_down,
};
use super::modes::each_mode;
use super::outcome::{completed_while_pending, finished_early, recorded_for, shown, why_pending};
use super::round::{finished_work_yields_completed, Finished, Round, Setup, DISPOSITION};
use crate::check::Check;
use crate::harness::Harness;
use crate::matrix::Driver;
use crate::world::RankCtx;

/// The edge deadlines of CAN-8 used on pending work.
const EDGE_DEADLINES: [Duration; 2] = [Duration::from_nanos(1), Duration::from_micros(500)];

/// CAN-8: edge deadlines neither panic nor overflow (a panic is a `crash`
/// verdict). Black-box: `Duration::MAX` on work that completed (and, on
/// late-peer subjects, on work released just before the call: completions
/// are thread-affine, so held work could never be released during the wait)
/// yields `Ok(Completed)`; 1 ns and 500 µs on pending work never yield
/// `Completed` while it is surely pending, report the policy's mode, and
/// leave the executor working after a NativeCancel. With probes, observer and
/// ledger, the work also gets the disposition CAN-5..7 require; without them
/// a note says those were not observed.
pub(super) fn edge_deadlines_are_safe<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
) -> Check {
    let observed = ctx.harness().instruments().covers(DISPOSITION);
    let mut kept = Vec::new();
    each_mode(ctx, |mode| {
        unbounded_deadline_completes(ctx, driver, mode)?;
        for timeout in EDGE_DEADLINES {
            let round = Round::start(ctx, driver, Setup::default())?;
            edge_round(round, timeout, mode, observed, &mut kept)?;
        }
        Ok(())
    })?;
    if !observed {
        ctx.note(format!(
            "{}: the CAN-5..7 dispositions under edge deadlines were not observed (they need the {} instrument(s)); \
             only the black-box parts of CAN-8 were checked",
            driver.subject,
            ctx.harness().instruments().missing(DISPOSITION).join(", ")
        ));
    }
    Ok(())
}

fn unbounded_deadline_completes<H: Harness>(
    ctx: &RankCtx<'_, H>,
    driver: Driver<H>,
    mode: CompletionCancellationMode,
) -> Check {
    let unbounded = Duration::MAX;
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::BeforeTheCall)?;
    if !driver.pending.late_peers() {
        return Ok(());
    }
    finished_work_yields_completed(ctx, driver, unbounded, mode, Finished::JustReleased)
}

/// CAN-8: waits on pending work with an edge `timeout` under `mode`, and
/// checks it by what that returned. Black-box: after
/// `DeadlineExceeded{NativeCancel}` the executor completes new work. With
/// `observed` (probes, observer and ledger), also the disposition: CAN-5 for
/// NativeCancel, CAN-6 for quarantine, and an `Err` leaves no live resource
/// dropped (CAN-7). Then disposes of the round. What the edge deadline breaks
/// of CAN-1, CAN-3 or CAN-4 (`Completed`, another mode or `Err` on work still
/// surely pending) is recorded for that invariant; a round that reports
/// `Completed` leaves no disposition to check (inconclusive).
fn edge_round<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    timeout: Duration,
    mode: CompletionCancellationMode,
    observed: bool,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (subject, ctx, via) = (round.subject, round.ctx, round.via);
    round.let_start(timeout);
    let waited = round.wait_bounded(timeout, mode)?;
    let seen = if observed { Some(round.seen()?) } else { None };
    let call = format!("wait_bounded({}, {mode:?}) on pending work", shown(timeout));
    match &waited.outcome {
        Ok(Completed) => {
            let finding = if waited.pending {
                let message = completed_while_pending(subject, via, &call);
                recorded_for(ctx, "CAN-1", "CAN-8", message)
            } else {
                finished_early(subject, via, &call, &waited)
            };
            round.dispose(mode, kept)?;
            Err(finding)
        }
        Ok(DeadlineExceeded { cancellation }) => {
            if *cancellation != mode {
                ctx.attribute(
                    "CAN-3",
                    format!(
                        "{subject}: {call} reported DeadlineExceeded {{ cancellation: {cancellation:?} }}, expected {mode:?}"
                    ),
                );
            }
            // The disposition due is the policy's (the selected one).
            match (mode, &seen) {
                (NativeCancel, seen) => {
                    if let Some(seen) = seen {
                        torn_down(seen, subject, &format!("{call} (DeadlineExceeded)"))?;
                    }
                    after_native_cancel(round, kept)
                }
                (Quarantine, Some(seen)) => {
                    retained(
                        seen,
                        subject,
                        &format!("right after {call} returned DeadlineExceeded"),
                    )?;
                    round.release();
                    released_after_completion(&round)
                }
                (Quarantine, None) => round.dispose(mode, kept),
            }
        }
        Err(error) => {
            if waited.pending {
                ctx.attribute(
                    "CAN-4",
                    format!(
                        "{subject}: supports_cancellation({mode:?}) is true, yet {call} yielded Err({error}) while the work \
                         was certainly pending ({}), expected Ok(DeadlineExceeded {{ cancellation: {mode:?} }})",
                        why_pending(via)
                    ),
                );
            }
            match &seen {
                Some(seen) => {
                    error_disposition(seen, subject, mode, error)?;
                    if mode == Quarantine {
                        round.release();
                        released_after_completion(&round)
                    } else {
                        round.dispose(mode, kept)
                    }
                }
                None => round.dispose(mode, kept),
            }
        }
    }
}
