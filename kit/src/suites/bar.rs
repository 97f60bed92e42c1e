//! BAR: payload-free agreement (`BarrierBackend::barrier`).
//!
//! BAR-1: a barrier completes only after every member entered it. Each
//! member in turn is late: it enters only once every other member has
//! submitted its barrier and watched it stay pending for [`slack::SETTLE`];
//! then every member's barrier must complete.

use std::time::Instant;

use eredu_runtime::backend::BarrierBackend;

use super::choreography::{await_members, silent_peer};
use super::common::{must_complete, needs, violations};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::harness::{Backend, Harness};
use crate::matrix::{Handle, Subject};
use crate::operation::Operation;
use crate::world::RankCtx;

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: BarrierBackend,
{
    vec![Row {
        id: "BAR-1",
        applies: |s| s == Subject::Operation(Operation::Barrier),
        requires: needs::NOTHING,
        timing: false,
        pass_needs: needs::NOTHING,
        body: Body::Sizes {
            sizes: &[1, 2, 3, 4, 8],
            script: barrier_waits_for_every_member::<H>,
        },
    }]
}

/// The signal an early member raises once it watched its barrier stay
/// pending while `late` had not entered.
fn watched(late: usize, rank: usize) -> String {
    format!("bar1-late-{late}-watched-by-{rank}")
}

/// BAR-1: with each member in turn late, no other member's barrier reports
/// complete before the late one enters, and all complete after it did.
/// An early completion is recorded and the rounds go on (so no member is left
/// waiting); a barrier that fails or never completes ends the script.
fn barrier_waits_for_every_member<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: BarrierBackend,
{
    let mut early = Vec::new();
    for late in 0..ctx.size() {
        if ctx.rank() == late {
            enter_late(ctx, late)?;
        } else if let Err(message) = enter_early(ctx, late)? {
            early.push(message);
        }
    }
    violations(early)
}

/// Submits this member's barrier, or reports the failure.
fn enter<H: Harness>(ctx: &RankCtx<'_, H>, late: usize) -> Result<Handle<H>, Finding>
where
    Backend<H>: BarrierBackend,
{
    Backend::<H>::barrier(ctx.group(), ctx.executor())
        .map(Handle::Communication)
        .map_err(|e| {
            Finding::Violation(format!(
                "barrier (member {late} late) on rank {}: submission failed: {e}",
                ctx.rank()
            ))
        })
}

/// An early member: its barrier stays pending while the late one is out,
/// then completes once it entered. `Ok(Err(message))` when it completed too
/// early (the round still finishes, so no member is left waiting).
fn enter_early<H: Harness>(ctx: &RankCtx<'_, H>, late: usize) -> Result<Result<(), String>, Finding>
where
    Backend<H>: BarrierBackend,
{
    let what = format!(
        "barrier on rank {} in a group of {}",
        ctx.rank(),
        ctx.size()
    );
    let completion = enter(ctx, late);
    let watch = match &completion {
        Ok(completion) => watch(completion, &what, late),
        Err(_) => Watch::Pending,
    };
    ctx.signal(&watched(late, ctx.rank()));
    let completion = completion?;
    match watch {
        Watch::Pending => {}
        Watch::Early(message) => return Ok(Err(message)),
        Watch::Failed(message) => return Err(Finding::Violation(message)),
    }
    must_complete(&completion, || {
        format!("{what}: did not complete after the late member {late} entered")
    })?;
    Ok(Ok(()))
}

/// What an early member saw of its barrier while the late one was out.
enum Watch {
    Pending,
    Early(String),
    Failed(String),
}

/// Watches `completion` for [`slack::SETTLE`]: it must stay pending.
fn watch<H: Harness>(completion: &Handle<H>, what: &str, late: usize) -> Watch {
    let start = Instant::now();
    while start.elapsed() < slack::SETTLE {
        match completion.is_complete() {
            Ok(false) => crate::world::pause(std::time::Duration::from_millis(1)),
            Ok(true) => {
                return Watch::Early(format!(
                "{what}: reported complete {:?} after submission, before member {late} entered it",
                start.elapsed()
            ))
            }
            Err(error) => {
                return Watch::Failed(format!(
                    "{what}: failed while member {late} had not entered yet: {error}"
                ))
            }
        }
    }
    Watch::Pending
}

/// The late member: enters once every other member watched its barrier
/// pending, then its barrier must complete.
fn enter_late<H: Harness>(ctx: &RankCtx<'_, H>, late: usize) -> Check
where
    Backend<H>: BarrierBackend,
{
    await_members(ctx, late, |peer| watched(late, peer)).map_err(|peer| {
        silent_peer(
            peer,
            &format!("submit and watch its barrier (late member {late})"),
        )
    })?;
    let completion = enter(ctx, late)?;
    must_complete(&completion, || {
        format!(
            "barrier on rank {late} (the late member) in a group of {}: did not complete after every member entered",
            ctx.size()
        )
    })
}
