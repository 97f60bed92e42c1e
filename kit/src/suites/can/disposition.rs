//! The dispositions a bounded wait owes live work, as observed right after
//! it returned: NativeCancel teardown finished (CAN-5: terminal work, freed
//! storages, the ledger, an executor that still completes new work),
//! quarantine retaining everything until the work completed and releasing
//! it then (CAN-6, with RET-7), and an `Err` that leaves no live work
//! dropped (CAN-7). Shared by CAN-5..8.

use eredu_core::BoundedCompletionOutcome::Completed;
use eredu_core::CompletionCancellationMode;
use eredu_core::CompletionCancellationMode::{NativeCancel, QuarantineUntilComplete as Quarantine};
use eredu_runtime::backend::CommunicationBackend;

use super::modes::policy;
use super::outcome::{describe, ended_early, why_pending};
use super::round::{Round, Seen};
use crate::check::{ensure, eventually, slack, Check, Finding};
use crate::harness::{Backend, Harness, WorkState};
use crate::matrix::{Handle, Subject};
use crate::world::RankCtx;

/// CAN-5: right after `DeadlineExceeded{NativeCancel}` returned, native work is
/// terminal, the probed storages (no caller handle left) are freed, and the
/// ledger counts no more pending work than before the submission.
pub(super) fn torn_down(seen: &Seen, subject: Subject, after: &str) -> Check {
    ensure(seen.state.is_terminal(), || {
        format!("{subject}: native work was still {:?} right after {after} returned: teardown had not finished", seen.state)
    })?;
    ensure(seen.live_probes == 0, || {
        format!(
            "{subject}: {} of {} probed storages (no caller handle left) were still allocated right after {after} returned: teardown had not released them",
            seen.live_probes, seen.probes
        )
    })?;
    ensure(seen.ledger.pending_work <= seen.before.pending_work, || {
        format!(
            "{subject}: right after {after} returned the ledger counts {} pending work items, {} before the submission: the cancelled work is still live",
            seen.ledger.pending_work, seen.before.pending_work
        )
    })
}

/// CAN-6: while quarantined work is live, everything it retains is alive and
/// the ledger shows it quarantined. Work that ended although it was surely
/// pending is a violation; work that ended when lazy work may have finished
/// leaves nothing to check (inconclusive).
pub(super) fn retained(seen: &Seen, subject: Subject, after: &str) -> Check {
    if !seen.live_throughout() {
        let state = if seen.state == WorkState::Live {
            seen.state_after
        } else {
            seen.state
        };
        if !seen.pending {
            return Err(crate::check::setup(format!(
                "{subject}: work {after} was {state:?}, but {} by then",
                ended_early(seen.via)
            )));
        }
        return Err(Finding::Violation(format!(
            "{subject}: work {after} was {state:?} although it could not have completed ({})",
            why_pending(seen.via)
        )));
    }
    ensure(seen.live_probes == seen.probes, || {
        format!(
            "{subject}: {} of {} probed storages were freed {after} while the quarantined work was live",
            seen.probes - seen.live_probes,
            seen.probes
        )
    })?;
    ensure(seen.ledger.quarantined > seen.before.quarantined, || {
        format!(
            "{subject}: {after}, live work was not quarantined: the ledger counts {} quarantined completions, {} before",
            seen.ledger.quarantined, seen.before.quarantined
        )
    })
}

/// CAN-7: an `Err` reports terminal work, or live work in the selected disposition.
pub(super) fn error_disposition(
    seen: &Seen,
    subject: Subject,
    mode: CompletionCancellationMode,
    error: &str,
) -> Check {
    if seen.state.is_terminal() {
        return Ok(());
    }
    match mode {
        NativeCancel => Err(Finding::Violation(format!(
            "{subject}: wait_bounded under NativeCancel returned Err({error}) while native work was still live: it was not torn down first"
        ))),
        Quarantine => retained(seen, subject, &format!("after wait_bounded under QuarantineUntilComplete returned Err({error})")),
    }
}

/// CAN-6 (and RET-7): released quarantined work finishes, then every probed
/// storage is freed and the ledger's quarantine drains. Work that does not
/// finish after its release is a setup failure (nothing to check).
pub(super) fn released_after_completion<H: Harness>(round: &Round<'_, '_, H>) -> Check {
    let subject = round.subject;
    let observer = round.observer()?;
    let limit = round.completes_within();
    if !eventually(limit, || observer.state().is_terminal()) {
        return Err(crate::check::setup(format!(
            "{subject}: quarantined work was still {:?} {limit:?} after its release, so its release of resources could not be checked",
            observer.state()
        )));
    }
    let freed = eventually(slack::RELEASE_RESOURCES, || {
        round.probes.iter().all(|probe| !probe.is_live())
    });
    ensure(freed, || {
        format!(
            "{subject}: probed storages were still allocated {:?} after the quarantined work finished",
            slack::RELEASE_RESOURCES
        )
    })?;
    let before = round.before()?;
    let mut last = round.ctx.ledger()?;
    let drained = eventually(slack::RELEASE_RESOURCES, || {
        last = round.ctx.ledger().unwrap_or(last);
        last.quarantined <= before.quarantined
    });
    ensure(drained, || {
        format!(
            "{subject}: the ledger still counts {} quarantined completions {:?} after the work finished ({} before)",
            last.quarantined,
            slack::RELEASE_RESOURCES,
            before.quarantined
        )
    })
}

/// CAN-5 (and CAN-8): the executor accepts and completes new work after a
/// teardown. Called once the round's holds are released.
fn executor_still_works<H: Harness>(ctx: &RankCtx<'_, H>, subject: Subject) -> Check {
    // One materialised value (empty local work is EXC-10's subject).
    let value = ctx.tensor(&[1.0], &[1])?;
    let submission =
        Backend::<H>::submit_local_dependencies([&value], ctx.executor()).map_err(|error| {
            Finding::Violation(format!(
                "{subject}: after a NativeCancel teardown the executor refused new work: {error}"
            ))
        })?;
    let policy = policy(slack::RELEASE, NativeCancel)?;
    let outcome = Handle::<H>::Communication(submission.completion)
        .wait_bounded(ctx, policy)
        .unwrap_or_else(|| Err("no bounded wait".into()));
    ensure(matches!(outcome, Ok(Completed)), || {
        format!(
            "{subject}: after a NativeCancel teardown, new local work on the same executor yielded {} within {:?}, expected Ok(Completed)",
            describe(&outcome),
            slack::RELEASE
        )
    })
}

/// After `DeadlineExceeded{NativeCancel}`: the executor, its holds released,
/// accepts and completes new work; then the round is disposed of.
pub(super) fn after_native_cancel<'c, 'w, H: Harness>(
    mut round: Round<'c, 'w, H>,
    kept: &mut Vec<Round<'c, 'w, H>>,
) -> Check {
    let (ctx, subject) = (round.ctx, round.subject);
    round.unhold();
    executor_still_works(ctx, subject)?;
    round.dispose(NativeCancel, kept)
}
