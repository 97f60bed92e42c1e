//! AGR: all-rank success agreement (`FailureAgreementBackend`).
//!
//! - AGR-1: `agree_success` resolves to `true` only when every member
//!   submitted `true`: all true, one false at each member position, all
//!   false, checked on every rank.
//! - AGR-2: `agree_success` does not block on peers (it returns within
//!   [`slack::PROMPT`] while a member is late), and
//!   `resolve_failure_agreement` starts no native work and does not block:
//!   called after completion, with no other submission, it answers within
//!   `PROMPT`; where the harness has a hold it is called with the executor
//!   held (so it cannot rely on the lane making progress), and where it has a
//!   ledger no pending work may appear during the call.

use std::time::Duration;

use eredu_runtime::backend::FailureAgreementBackend;

use super::choreography::{await_members, rendezvous, silent_peer};
use super::common::{handle_and_output, must_complete, needs, violations};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness};
use crate::matrix::{Handle, Subject};
use crate::operation::Operation;
use crate::world::RankCtx;

/// The backend's agreement output.
type Output<H> = <Backend<H> as FailureAgreementBackend>::FailureAgreementOutput;

fn agree_success(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::AgreeSuccess)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: FailureAgreementBackend,
{
    vec![
        Row {
            id: "AGR-1",
            applies: agree_success,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[1, 2, 3, 4, 8],
                script: agreement_is_a_conjunction::<H>,
            },
        },
        Row {
            id: "AGR-2",
            applies: agree_success,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[1, 2, 3, 4],
                script: agreement_never_blocks::<H>,
            },
        },
    ]
}

/// The statuses of AGR-1's rounds: all true, one false at each position, all false.
pub(crate) fn patterns(n: usize) -> Vec<Vec<bool>> {
    let mut patterns = vec![vec![true; n]];
    patterns.extend((0..n).map(|falsy| (0..n).map(|member| member != falsy).collect()));
    patterns.push(vec![false; n]);
    patterns
}

/// Submits this member's status, or reports the failure.
fn submit<H: Harness>(ctx: &RankCtx<'_, H>, status: bool) -> Result<(Handle<H>, Output<H>), Finding>
where
    Backend<H>: FailureAgreementBackend,
{
    Backend::<H>::agree_success(status, ctx.group(), ctx.executor())
        .map(handle_and_output::<H, _>)
        .map_err(|e| {
            Finding::Violation(format!(
                "agree_success({status}) on rank {}: submission failed: {e}",
                ctx.rank()
            ))
        })
}

/// Waits (bounded) for the agreement, then resolves it.
fn complete<H: Harness>(
    ctx: &RankCtx<'_, H>,
    completion: &Handle<H>,
    output: Output<H>,
    what: &str,
) -> Result<bool, Finding>
where
    Backend<H>: FailureAgreementBackend,
{
    must_complete(completion, || {
        format!("{what} on rank {}: did not complete", ctx.rank())
    })?;
    Backend::<H>::resolve_failure_agreement(output).map_err(|e| {
        Finding::Violation(format!(
            "{what} on rank {}: resolve_failure_agreement after completion failed: {e}",
            ctx.rank()
        ))
    })
}

/// AGR-1: on every rank, the agreement is `true` exactly when every member
/// submitted `true`.
fn agreement_is_a_conjunction<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: FailureAgreementBackend,
{
    let mut wrong = Vec::new();
    for statuses in patterns(ctx.size()) {
        let what = format!("agree_success with statuses {statuses:?}");
        let (completion, output) = submit(ctx, statuses[ctx.rank()])?;
        let agreed = complete(ctx, &completion, output, &what)?;
        let expected = statuses.iter().all(|&status| status);
        if !agrees(&statuses, agreed) {
            wrong.push(format!(
                "{what}: rank {} resolved {agreed}, expected {expected}",
                ctx.rank()
            ));
        }
    }
    violations(wrong)
}

/// AGR-1's verifier: whether `agreed` is the conjunction of `statuses`.
pub(crate) fn agrees(statuses: &[bool], agreed: bool) -> bool {
    agreed == statuses.iter().all(|&status| status)
}

/// The signal a member raises once its own `agree_success` call returned.
fn submitted(late: usize, rank: usize) -> String {
    format!("agr2-late-{late}-submitted-by-{rank}")
}

/// AGR-2: with each member in turn late, every `agree_success` call returns
/// within `PROMPT` (the early ones while the late member has not submitted);
/// after completion, `resolve_failure_agreement` answers within `PROMPT`
/// without any further submission. Every round ends with a host-side
/// rendezvous; after a round with a finding every rank stops.
fn agreement_never_blocks<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: FailureAgreementBackend,
{
    for late in 0..ctx.size() {
        let round = agreement_round(ctx, late);
        let bad = format!("agr2-late-{late}-finding");
        if round.is_err() {
            ctx.signal(&bad);
        }
        rendezvous(ctx, &format!("agr2-late-{late}-done"))?;
        round?;
        if ctx.await_signal(&bad, Duration::ZERO) {
            break;
        }
    }
    Ok(())
}

/// One AGR-2 round, member `late` late: even rounds agree on `true`, odd
/// rounds have the late member submit `false`.
fn agreement_round<H: Harness>(ctx: &RankCtx<'_, H>, late: usize) -> Check
where
    Backend<H>: FailureAgreementBackend,
{
    let expected = late % 2 == 0;
    let status = expected || ctx.rank() != late;
    if ctx.rank() == late {
        await_members(ctx, late, |peer| submitted(late, peer)).map_err(|peer| {
            silent_peer(
                peer,
                &format!("return from agree_success (member {late} late)"),
            )
        })?;
    }
    let what = format!(
        "agree_success({status}) on rank {} with member {late} late",
        ctx.rank()
    );
    let submission = crate::world::prompt(
        "agree_success",
        "AGR-2",
        || submit(ctx, status),
        |_| format!("{what} (it must return without waiting for peers)"),
    );
    ctx.signal(&submitted(late, ctx.rank()));
    let (completion, output) = submission??;
    must_complete(&completion, || format!("{what}: did not complete"))?;
    // Ranks resolve in turn, so no other rank's hold or work shows in this
    // rank's ledger readings.
    let resolved = |rank: usize| format!("agr2-late-{late}-resolved-by-{rank}");
    if ctx.rank() > 0 && !ctx.await_signal(&resolved(ctx.rank() - 1), slack::RELEASE) {
        return Err(silent_peer(
            ctx.rank() - 1,
            &format!("resolve its agreement ({what})"),
        ));
    }
    let outcome = resolves_promptly(ctx, output, expected, &what);
    ctx.signal(&resolved(ctx.rank()));
    outcome
}

/// `resolve_failure_agreement` after completion: no other submission, an
/// answer within `PROMPT`, the right value; with a hold, the executor is
/// held during the call; with a ledger, no pending work appears.
fn resolves_promptly<H: Harness>(
    ctx: &RankCtx<'_, H>,
    output: Output<H>,
    expected: bool,
    what: &str,
) -> Check
where
    Backend<H>: FailureAgreementBackend,
{
    let hold = ctx.optional_hold(ctx.executor());
    let before = ctx.optional_ledger();
    let what = format!("{what}: resolve_failure_agreement after completion");
    let resolved = crate::world::prompt(
        "resolve_failure_agreement",
        "AGR-2",
        || Backend::<H>::resolve_failure_agreement(output),
        |_| what.clone(),
    );
    let after = ctx.optional_ledger();
    drop(hold);
    let resolved = resolved?;
    if let (Some(before), Some(after)) = (before, after) {
        if after.pending_work > before.pending_work {
            return Err(Finding::Violation(format!(
                "{what} started native work: pending work went from {} to {}",
                before.pending_work, after.pending_work
            )));
        }
    }
    match resolved {
        Ok(agreed) if agreed == expected => Ok(()),
        Ok(agreed) => {
            // The agreement's value is AGR-1's; AGR-2 is about not blocking.
            ctx.attribute(
                "AGR-1",
                format!("{what} resolved {agreed}, expected {expected}"),
            );
            Ok(())
        }
        Err(e) => Err(Finding::Violation(format!(
            "{what} failed with no further submission: {e}"
        ))),
    }
}
