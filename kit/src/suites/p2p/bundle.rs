//! A bundle on a backend, as every P2P check (P2P-1, P2P-2, P2P-3) and the
//! natural forms of EXC-6 and CAN-9 use it: framed with eredu-runtime's
//! public framing, its route endpoints opened on every rank before any rank
//! sends, submitted with `send_receive` (bounded), awaited, and checked
//! value by value against the payload it carries.

use std::borrow::Borrow;

use eredu_core::checkpoint::TensorDtype;
use eredu_runtime::backend::PointToPointBackend;
use eredu_runtime::{
    BoundaryRoleContract, CommunicationRouteId, RoleExactBoundaryContract, RoleExactBoundaryValue,
};

use super::routes::{payload, placeholder, Link};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::Handle;
use crate::suites::choreography::rendezvous;
use crate::suites::common::{handle_and_output, must_complete};
use crate::suites::exact::{differs, value_difference, Differs};
use crate::suites::scenario::exact;
use crate::world::RankCtx;

/// Schema of every bundle these rows frame.
const SCHEMA: &str = "commcheck.p2p";

/// A role of the bundle's contract.
pub(super) fn role(
    name: String,
    dtype: TensorDtype,
    shape: &[usize],
) -> Result<BoundaryRoleContract, Finding> {
    BoundaryRoleContract::new(name, dtype, shape.to_vec())
        .map_err(|e| Finding::Harness(format!("boundary role of shape {shape:?}: {e}")))
}

/// The roles a receiver expects: `value-i`, of `dtype`, the bundle's shapes.
pub(super) fn expected_roles(
    shapes: &[Vec<usize>],
    dtype: Dtype,
) -> Result<Vec<BoundaryRoleContract>, Finding> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| role(format!("value-{i}"), dtype.eredu(), shape))
        .collect()
}

/// Frames `tensors` with eredu-runtime's public framing.
pub(super) fn frame<T>(
    route: u64,
    roles: Vec<BoundaryRoleContract>,
    tensors: Vec<T>,
) -> Result<Vec<RoleExactBoundaryValue<T>>, Finding> {
    let contract = RoleExactBoundaryContract::new(SCHEMA, roles.clone())
        .map_err(|e| Finding::Harness(format!("boundary contract: {e}")))?;
    contract
        .frame_values(CommunicationRouteId::new(route), &roles, tensors)
        .map_err(|e| Finding::Harness(format!("framing for route {route}: {e}")))
}

/// This rank's side of `link`'s bundle, framed with the expected headers.
pub(super) fn well_formed<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
) -> Result<Vec<RoleExactBoundaryValue<Tensor<H>>>, Finding> {
    frame(
        link.id,
        expected_roles(&link.shapes, ctx.dtype())?,
        side_tensors(ctx, link)?,
    )
}

/// Makes this rank's tensors for `link`: the payload on the sender,
/// placeholders of the expected shapes on the receiver.
pub(super) fn side_tensors<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
) -> Result<Vec<Tensor<H>>, Finding> {
    let sender = ctx.rank() == link.source;
    link.shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let values = if sender {
                payload(ctx.dtype(), ctx.seed(), link.id, i, shape)
            } else {
                placeholder(shape)
            };
            ctx.tensor(&values, shape)
        })
        .collect()
}

/// Opens this rank's endpoints of `links` (`None` where it is no endpoint),
/// then waits until every rank has opened its own.
pub(super) fn open<H: Harness>(
    ctx: &RankCtx<'_, H>,
    links: &[Link],
    tag: &str,
) -> Result<Vec<Option<H::Route>>, Finding> {
    let ends = links
        .iter()
        .map(|link| {
            link.touches(ctx.rank())
                .then(|| ctx.route(link.id, link.source, link.destination))
                .transpose()
        })
        .collect::<Result<Vec<_>, _>>()?;
    rendezvous(ctx, tag)?;
    Ok(ends)
}

/// Findings of several independent routes: a rank keeps playing its part on
/// every route after one failed, so its peers are never left waiting.
#[derive(Default)]
pub(super) struct Findings(Vec<Finding>);

impl Findings {
    pub(super) fn add(&mut self, check: Check) {
        if let Err(finding) = check {
            self.0.push(finding);
        }
    }

    /// Every violation, joined; otherwise the first other finding.
    pub(super) fn into_check(self) -> Check {
        let violations: Vec<&str> = self
            .0
            .iter()
            .filter_map(|finding| match finding {
                Finding::Violation(message) => Some(message.as_str()),
                _ => None,
            })
            .collect();
        if !violations.is_empty() {
            return Err(Finding::Violation(violations.join("; ")));
        }
        self.0.into_iter().next().map_or(Ok(()), Err)
    }
}

/// Submits one framed bundle on `route`. A submission that has not returned
/// after [`slack::BLOCKED`] (one that waits for its peer, whose own turn may
/// depend on it) ends the case inconclusive, naming the call: no SPEC
/// invariant bounds a submission.
pub(super) fn submit<H: Harness>(
    ctx: &RankCtx<'_, H>,
    framed: Vec<RoleExactBoundaryValue<Tensor<H>>>,
    route: &H::Route,
) -> Result<(Handle<H>, Vec<Tensor<H>>), String>
where
    Backend<H>: PointToPointBackend,
{
    crate::world::guarded(
        "send_receive() (a submission that waits for its peer)",
        crate::world::SETUP,
        slack::BLOCKED,
        || Backend::<H>::send_receive(framed, route.borrow(), ctx.executor()),
    )
    .map(handle_and_output::<H, _>)
    .map_err(|e| e.to_string())
}

/// Submits this rank's well-formed side of `link`; a refusal is a violation.
pub(super) fn submit_side<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    framed: Vec<RoleExactBoundaryValue<Tensor<H>>>,
    route: &H::Route,
) -> Result<(Handle<H>, Vec<Tensor<H>>), Finding>
where
    Backend<H>: PointToPointBackend,
{
    submit(ctx, framed, route).map_err(|error| {
        Finding::Violation(format!(
            "{}: the {} (rank {}) could not submit: {error}",
            link.describe(),
            link.role(ctx.rank()),
            ctx.rank()
        ))
    })
}

/// Waits (bounded) for this rank's side of `link` to complete.
pub(super) fn settle_side<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    completion: &Handle<H>,
) -> Check {
    must_complete(completion, || {
        format!(
            "{}: the {} (rank {}) did not complete",
            link.describe(),
            link.role(ctx.rank()),
            ctx.rank()
        )
    })
}

/// Checks `outputs` against the bundle `link` carries: count, shapes, values.
pub(super) fn check_bundle<H: Harness>(
    ctx: &RankCtx<'_, H>,
    link: &Link,
    outputs: &[Tensor<H>],
) -> Check {
    let who = format!(
        "{}, {} rank {}",
        link.describe(),
        link.role(ctx.rank()),
        ctx.rank()
    );
    if outputs.len() != link.shapes.len() {
        return Err(Finding::Violation(format!(
            "{who}: output has {} tensors, expected the {} of the bundle",
            outputs.len(),
            link.shapes.len()
        )));
    }
    for (index, (output, shape)) in outputs.iter().zip(&link.shapes).enumerate() {
        let expected = exact(
            shape.clone(),
            payload(ctx.dtype(), ctx.seed(), link.id, index, shape),
        );
        let wrong = match differs(ctx, crate::Operation::SendReceive, output, &expected)? {
            None => continue,
            Some(Differs::Shape(got_shape)) => {
                format!("{who}: value {index} has shape {got_shape:?}, expected {shape:?}")
            }
            Some(Differs::Values(got, mismatch)) => format!(
                "{who}: value {index} (shape {shape:?}) should be the sent value bit for bit: {}",
                value_difference(&got, &expected, mismatch)
            ),
        };
        return Err(Finding::Violation(wrong));
    }
    Ok(())
}
