//! P2P-2: a received header that differs from the receiver's expected
//! `header()` (another route id, role name, dtype or shape) never yields
//! success, and that failure is sticky (as EXC-6 requires of any error).

use std::time::Duration;

use eredu_core::checkpoint::TensorDtype;
use eredu_core::{BoundedCompletionWait, CompletionCancellationMode};
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::RoleExactBoundaryValue;

use super::bundle::{
    expected_roles, frame, open, role, settle_side, side_tensors, submit, well_formed, Findings,
};
use super::routes::{distinct_pair, payload, Link};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::{wait_within, Handle};
use crate::suites::common::{poll, supported, Polled};
use crate::suites::seeds::mix_two as mix;
use crate::world::RankCtx;

/// How the sender's frame differs from what the receiver expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mismatch {
    /// Framed for another route id.
    RouteId,
    /// Another role name, same dtype and shape.
    RoleName,
    /// A role declared with another dtype, same shape.
    Dtype,
    /// Another shape with the same element count (the tensor has it too).
    Shape,
}

impl Mismatch {
    pub(super) const ALL: [Self; 4] = [Self::RouteId, Self::RoleName, Self::Dtype, Self::Shape];

    pub(super) fn describe(self, index: usize) -> String {
        match self {
            Self::RouteId => "a frame for another route id".into(),
            Self::RoleName => format!("value {index} framed under another role name"),
            Self::Dtype => format!("value {index} framed as f16 instead of f32"),
            Self::Shape => format!("value {index} framed with another shape of the same size"),
        }
    }
}

/// Another shape with the same number of elements.
fn other_shape(shape: &[usize]) -> Vec<usize> {
    let reversed: Vec<usize> = shape.iter().rev().copied().collect();
    if reversed != shape {
        reversed
    } else {
        let mut longer = shape.to_vec();
        longer.push(1);
        longer
    }
}

/// One P2P-2 route: the bundle, the mismatch, and which value carries it.
pub(super) struct Trap {
    pub(super) link: Link,
    pub(super) mismatch: Mismatch,
    pub(super) index: usize,
}

/// Every mismatch on a bundle of small values, and (`large`: elements past
/// the harness's protocol boundaries) every mismatch once more on the large
/// value of a bundle that carries one, where a backend whose protocol
/// switches with message size takes its other path.
fn p2p2_traps(seed: u64, n: usize, large: Option<usize>) -> Vec<Trap> {
    let small = Mismatch::ALL.iter().enumerate().map(|(v, &mismatch)| {
        let id = 300 + v as u64;
        let shapes = vec![vec![2, 3], vec![1], vec![4]];
        let index = (mix(seed, id, 32) % shapes.len() as u64) as usize;
        (id, mismatch, shapes, index)
    });
    let large = large.into_iter().flat_map(|elements| {
        Mismatch::ALL.iter().enumerate().map(move |(v, &mismatch)| {
            (
                310 + v as u64,
                mismatch,
                vec![vec![2, 3], vec![elements]],
                1,
            )
        })
    });
    small
        .chain(large)
        .map(|(id, mismatch, shapes, index)| {
            let (source, destination) = distinct_pair(seed, id, 30, n);
            Trap {
                link: Link {
                    id,
                    source,
                    destination,
                    shapes,
                },
                mismatch,
                index,
            }
        })
        .collect()
}

/// The signal a sender raises when the backend refused its mismatching frame
/// (before it drains the receiver with a well-formed one).
fn refused(trap: &Trap) -> String {
    format!("p2p2-refused-{}", trap.link.id)
}

/// P2P-2: for a frame for another route id, another role name, another
/// dtype and another shape, on a bundle of small values and on one that
/// carries a value past the harness's protocol boundaries, the receiver's
/// completion never reports success, and its error is sticky.
pub(super) fn mismatching_headers_never_succeed<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let large = crate::suites::scenario::past_boundaries(ctx.harness()).map(|large| large.elements);
    let traps = p2p2_traps(ctx.seed(), ctx.size(), large);
    let links: Vec<Link> = traps.iter().map(|trap| trap.link.clone()).collect();
    let ends = open(ctx, &links, "p2p2-open")?;
    let mut findings = Findings::default();
    for (trap, end) in traps.iter().zip(&ends) {
        let Some(route) = end else { continue };
        findings.add(if ctx.rank() == trap.link.source {
            send_mismatching(ctx, trap, route)
        } else {
            receive_mismatching(ctx, trap, route)
        });
    }
    findings.into_check()
}

/// The sender's frame for `trap`: the expected one with one difference.
fn mismatching_frame<H: Harness>(
    ctx: &RankCtx<'_, H>,
    trap: &Trap,
) -> Result<Vec<RoleExactBoundaryValue<Tensor<H>>>, Finding> {
    let mut roles = expected_roles(&trap.link.shapes, Dtype::F32)?;
    let mut tensors = side_tensors(ctx, &trap.link)?;
    let shape = &trap.link.shapes[trap.index];
    let name = format!("value-{}", trap.index);
    let mut route = trap.link.id;
    match trap.mismatch {
        Mismatch::RouteId => route += 1000,
        Mismatch::RoleName => {
            roles[trap.index] = role(format!("{name}-other"), TensorDtype::F32, shape)?
        }
        Mismatch::Dtype => roles[trap.index] = role(name, TensorDtype::F16, shape)?,
        Mismatch::Shape => {
            let other = other_shape(shape);
            roles[trap.index] = role(name, TensorDtype::F32, &other)?;
            tensors[trap.index] = ctx.tensor(
                &payload(Dtype::F32, ctx.seed(), route, trap.index, &other),
                &other,
            )?;
        }
    }
    frame(route, roles, tensors)
}

/// Sends the mismatching frame. If the backend refuses it on the sending
/// side (also never a success on the receiver), says so and drains the
/// receiver with a well-formed bundle so its lane does not stay blocked.
pub(super) fn send_mismatching<H: Harness>(
    ctx: &RankCtx<'_, H>,
    trap: &Trap,
    route: &H::Route,
) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let sent = submit(ctx, mismatching_frame(ctx, trap)?, route)
        .and_then(|(completion, _outputs)| wait_within(&completion, slack::RELEASE));
    if sent.is_ok() {
        return Ok(());
    }
    ctx.signal(&refused(trap));
    let framed = well_formed(ctx, &trap.link)?;
    let (completion, _outputs) = submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{}: a well-formed bundle could not be sent: {error}",
            trap.link.describe()
        ))
    })?;
    settle_side(ctx, &trap.link, &completion)
}

/// What the receiver of a mismatching frame saw.
pub(super) enum Received<H: Harness> {
    /// Its completion reported an error (the completion, for more calls).
    Failed(Handle<H>),
    /// Its completion reported success after the sender's backend refused
    /// the mismatching frame (and sent a well-formed one instead).
    Refused,
    /// Its completion reported success for the mismatching frame.
    Succeeded,
    /// Its completion neither failed nor completed within [`slack::RELEASE`].
    Hung,
}

/// Receives `trap`'s route with the expected headers (the sender sends the
/// mismatching frame).
pub(super) fn receive_mismatching_frame<H: Harness>(
    ctx: &RankCtx<'_, H>,
    trap: &Trap,
    route: &H::Route,
    what: &str,
) -> Result<Received<H>, Finding>
where
    Backend<H>: PointToPointBackend,
{
    let framed = well_formed(ctx, &trap.link)?;
    let (completion, _outputs) = submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{what}: the receiver's own well-formed submission was refused: {error}"
        ))
    })?;
    Ok(match poll(&completion, slack::RELEASE) {
        Polled::Complete if ctx.await_signal(&refused(trap), Duration::ZERO) => Received::Refused,
        Polled::Complete => Received::Succeeded,
        Polled::Pending => Received::Hung,
        Polled::Error(_) => Received::Failed(completion),
    })
}

/// What the receiver of `trap`, on this rank, is told, for messages.
pub(super) fn receiver_what<H: Harness>(ctx: &RankCtx<'_, H>, trap: &Trap) -> String {
    format!(
        "{}, receiver rank {}, sent {}",
        trap.link.describe(),
        ctx.rank(),
        trap.mismatch.describe(trap.index)
    )
}

/// Receives with the expected headers: the completion must fail, stickily.
fn receive_mismatching<H: Harness>(ctx: &RankCtx<'_, H>, trap: &Trap, route: &H::Route) -> Check
where
    Backend<H>: PointToPointBackend,
{
    let what = receiver_what(ctx, trap);
    match receive_mismatching_frame(ctx, trap, route, &what)? {
        Received::Refused => Ok(()),
        Received::Succeeded => Err(Finding::Violation(format!(
            "{what}: the receiver's completion reported success (expected an error: the received header differs from its header())"
        ))),
        Received::Hung => Err(Finding::Violation(format!(
            "{what}: the receiver neither failed nor completed within {:?} (a hang, expected an error)",
            slack::RELEASE
        ))),
        Received::Failed(completion) => error_is_sticky(ctx, completion, &what),
    }
}

/// Calls of `is_complete` after an error was reported, each of which must
/// report an error again.
const STICKY_CALLS: usize = 64;

/// After an error was reported: [`STICKY_CALLS`] `is_complete` calls, `wait`
/// and `wait_bounded` all report an error again (EXC-6, as P2P-2 requires).
pub(super) fn error_is_sticky<H: Harness>(
    ctx: &RankCtx<'_, H>,
    completion: Handle<H>,
    what: &str,
) -> Check {
    for call in 1..=STICKY_CALLS {
        if let Ok(state) = completion.is_complete() {
            return Err(Finding::Violation(format!(
                "{what}: after the header mismatch was reported, is_complete call {call} returned Ok({state}) (the error must be sticky)"
            )));
        }
    }
    if completion.wait_on_complete().is_ok() {
        return Err(Finding::Violation(format!(
            "{what}: after the header mismatch was reported, wait returned Ok (the error must be sticky)"
        )));
    }
    if completion.is_complete().is_ok() {
        return Err(Finding::Violation(format!(
            "{what}: after wait reported the header mismatch again, is_complete returned Ok (the error must be sticky)"
        )));
    }
    // Again after the rank submitted new work, on its own lane and on
    // another where the backend forks one (dropped unwaited).
    let forked = crate::suites::common::fork_one_lane(ctx).ok();
    let mut lanes = vec![ctx.executor()];
    lanes.extend(forked.as_ref().map(std::borrow::Borrow::borrow));
    let newer = crate::suites::common::new_work(ctx, &lanes)?;
    if completion.is_complete().is_ok() {
        return Err(Finding::Violation(format!(
            "{what}: after the rank submitted new work, is_complete returned Ok (the error must be sticky)"
        )));
    }
    drop(newer);
    let mode = if supported::<H>(CompletionCancellationMode::QuarantineUntilComplete) {
        CompletionCancellationMode::QuarantineUntilComplete
    } else {
        CompletionCancellationMode::NativeCancel
    };
    let policy = BoundedCompletionWait::new(slack::DEADLINE, mode)
        .map_err(|e| Finding::Harness(e.to_string()))?;
    match completion.wait_bounded(ctx, policy) {
        Some(Ok(outcome)) => Err(Finding::Violation(format!(
            "{what}: after the header mismatch was reported, wait_bounded returned Ok({outcome:?}) (the error must be sticky)"
        ))),
        Some(Err(_)) | None => Ok(()),
    }
}
