//! The natural forms of EXC-6 and CAN-9, for harnesses without fault
//! injection: the error a header mismatch provokes through the public API
//! (which P2P-2 requires) is sticky (EXC-6), and `wait_bounded` on that
//! failed work yields `Err` in every supported mode (CAN-9).

use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::PointToPointBackend;

use super::bundle::{open, Findings};
use super::headers::{
    error_is_sticky, receive_mismatching_frame, receiver_what, send_mismatching, Mismatch,
    Received, Trap,
};
use super::routes::Link;
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness};
use crate::matrix::Handle;
use crate::suites::common::supported;
use crate::suites::seeds::mix_two as mix;
use crate::world::RankCtx;

/// Provokes an error through the public API, for the natural forms of EXC-6
/// and CAN-9 (harnesses without fault injection): rank 1 sends a bundle on
/// route `route_id` whose header frames one value as `f16`, rank 0 receives
/// with its own `f32` header, which P2P-2 requires to fail. On the sender,
/// `None` once it sent; on the receiver, its completion once it reported the
/// error, and what it is, for messages. A backend that refuses the frame at
/// the sender leaves no error on a completion (not-supported: `id` needs fault
/// injection there); one whose receiver succeeds or hangs breaks P2P-2
/// (recorded there), and the attempt checked nothing of `id` (inconclusive).
fn provoked_error<H: Harness>(
    ctx: &RankCtx<'_, H>,
    id: &str,
    route_id: u64,
) -> Result<Option<(Handle<H>, String)>, Finding>
where
    Backend<H>: PointToPointBackend,
{
    let trap = Trap {
        link: Link {
            id: route_id,
            source: 1,
            destination: 0,
            shapes: vec![vec![2, 3], vec![1], vec![4]],
        },
        mismatch: Mismatch::Dtype,
        index: (mix(ctx.seed(), route_id, 60) % 3) as usize,
    };
    let ends = open(
        ctx,
        std::slice::from_ref(&trap.link),
        &format!("natural-{route_id}"),
    )?;
    let Some(route) = ends.into_iter().next().flatten() else {
        return Ok(None);
    };
    if ctx.rank() == trap.link.source {
        send_mismatching(ctx, &trap, &route)?;
        return Ok(None);
    }
    let what = receiver_what(ctx, &trap);
    match receive_mismatching_frame(ctx, &trap, &route, &what)? {
        Received::Failed(completion) => Ok(Some((completion, what))),
        Received::Refused => Err(Finding::NotSupported(format!(
            "{what}: the backend refused the mismatching frame when it was sent, so no error reached a \
             completion; {id} needs fault injection here"
        ))),
        outcome @ (Received::Succeeded | Received::Hung) => {
            let seen = if matches!(outcome, Received::Succeeded) {
                "reported success"
            } else {
                "neither failed nor completed"
            };
            let message = format!(
                "{what}: the receiver's completion {seen} (P2P-2 requires an error), so there was no \
                 failed work for {id} to check"
            );
            ctx.attribute("P2P-2", message.clone());
            Err(crate::check::setup(message))
        }
    }
}

/// EXC-6 with no fault injection: once the error provoked by a header
/// mismatch (see [`provoked_error`]) was reported, every later
/// `is_complete`, `wait` and `wait_bounded` reports an error.
pub(super) fn a_provoked_error_is_sticky<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    match provoked_error(ctx, "EXC-6", 500)? {
        Some((completion, what)) => error_is_sticky(ctx, completion, &what),
        None => Ok(()),
    }
}

/// CAN-9 with no fault injection: in each supported mode, work that failed
/// through a header mismatch (see [`provoked_error`]) yields `Err` from
/// `wait_bounded`, never `Completed` or `DeadlineExceeded`. Both ranks go
/// through the modes in the same order, one route each.
pub(super) fn provoked_failure_is_an_error<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let modes: Vec<CompletionCancellationMode> = [
        CompletionCancellationMode::QuarantineUntilComplete,
        CompletionCancellationMode::NativeCancel,
    ]
    .into_iter()
    .filter(|mode| supported::<H>(*mode))
    .collect();
    if modes.is_empty() {
        return Err(Finding::NotSupported(
            "the backend supports no cancellation mode, so it has no bounded wait to check".into(),
        ));
    }
    // Every mode's route is played to its end on both ranks, whatever an
    // earlier one found, so that no peer is left waiting.
    let mut findings = Findings::default();
    for (index, mode) in modes.into_iter().enumerate() {
        findings.add(
            provoked_error(ctx, "CAN-9", 501 + index as u64).and_then(|provoked| {
                let Some((completion, what)) = provoked else {
                    return Ok(());
                };
                let policy = BoundedCompletionWait::new(slack::RELEASE, mode)
                    .map_err(|e| Finding::Harness(e.to_string()))?;
                match completion.wait_bounded(ctx, policy) {
                    Some(Ok(outcome)) => Err(Finding::Violation(format!(
                        "{what}: after the receiver reported the header mismatch, wait_bounded({:?}, \
                         {mode:?}) returned Ok({outcome:?}); work that failed must yield Err",
                        slack::RELEASE
                    ))),
                    Some(Err(_)) | None => Ok(()),
                }
            }),
        );
    }
    findings.into_check()
}
