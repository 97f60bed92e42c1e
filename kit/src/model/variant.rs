//! Parameterised submissions of the claimed operations: the model's
//! [`Work`] kinds beyond the completion matrix's standard submissions
//! (uneven and zero counts, extents that differ from element counts, every
//! broadcast root, per-rank agreement votes, mismatched headers).
//!
//! Each function is one rank's side, on either rank of the model's two-rank
//! world (the subject and its late peer call the same function). A refusal
//! by the backend is a [`Finding::Violation`] (the runner decides whether
//! the work was allowed to be refused); a tensor the harness cannot make is
//! [`Finding::NotSupported`] (the work is skipped).

use eredu_core::checkpoint::TensorDtype;
use eredu_runtime::backend::{
    BroadcastBackend, FailureAgreementBackend, PointToPointBackend, UnevenGatherBackend,
    VariableAllToAllBackend,
};
use eredu_runtime::{
    BoundaryRoleContract, CommunicationPeerCounts, CommunicationRouteId, RoleExactBoundaryContract,
    RoleExactBoundaryValue,
};

use super::op::{Header, Work};
use crate::check::{slack, Finding};
use crate::harness::{Backend, Executor, Harness, Tensor};
use crate::matrix::{self, Handle, Submitted, Verify};
use crate::operation::Operation;
use crate::world::{guarded, RankCtx};

/// One rank's side of a parameterised submission.
pub(crate) type Vary<H> = fn(&RankCtx<'_, H>, &Executor<H>, Work) -> Result<Submitted<H>, Finding>;

fn refused(operation: Operation, error: impl std::fmt::Display) -> Finding {
    Finding::Violation(format!("{operation} was refused: {error}"))
}

fn tensor<H: Harness>(
    ctx: &RankCtx<'_, H>,
    values: &[f32],
    shape: &[usize],
) -> Result<Tensor<H>, Finding> {
    ctx.tensor(values, shape).map_err(|finding| {
        Finding::NotSupported(format!(
            "the harness made no tensor of shape {shape:?}: {finding:?}"
        ))
    })
}

fn wrong_work(operation: Operation, work: Work) -> Finding {
    Finding::Harness(format!("{work} is not a parameterised {operation}"))
}

/// A submission with one input and one output tensor, and the output's
/// expected values.
fn one_to_one<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    input: Tensor<H>,
    expected: Vec<f32>,
    submit: impl FnOnce(
        Tensor<H>,
    ) -> Result<
        eredu_core::Submission<Tensor<H>, crate::harness::CommCompletion<H>>,
        <Backend<H> as eredu_runtime::backend::CommunicationBackend>::CommunicationError,
    >,
) -> Result<Submitted<H>, Finding> {
    let input_probes = matrix::probes(ctx, &[&input])?;
    let submission = submit(input).map_err(|e| refused(operation, e))?;
    let output_probes = matrix::probes(ctx, &[&submission.output])?;
    Ok(Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes,
        output_probes,
        verify: Some(matrix::verify_tensors(
            operation,
            vec![submission.output],
            move || vec![expected],
        )),
        lazy: None,
        watch: None,
        feeder: None,
        alone: false,
    })
}

/// [`Work::UnevenGather`]: member `r` contributes `[counts[r], width]` on axis 0.
pub(crate) fn uneven_gather<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    work: Work,
) -> Result<Submitted<H>, Finding>
where
    Backend<H>: UnevenGatherBackend,
{
    let Work::UnevenGather { counts, width } = work.normalized() else {
        return Err(wrong_work(Operation::AllGatherUneven, work));
    };
    let width = 1 + usize::from(width);
    let counts: Vec<usize> = counts.iter().map(|&c| usize::from(c)).collect();
    let me = ctx.rank();
    let input = tensor(
        ctx,
        &matrix::values(me, counts[me] * width),
        &[counts[me], width],
    )?;
    let expected = (0..ctx.size())
        .flat_map(|r| matrix::values(r, counts[r] * width))
        .collect();
    one_to_one(ctx, Operation::AllGatherUneven, input, expected, |input| {
        Backend::<H>::all_gather_uneven(input, &counts, 0, ctx.group(), executor)
    })
}

/// [`Work::AllToAll`]: member `r` sends `sends[r][p]` rows of `width` to `p`.
pub(crate) fn all_to_all<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    work: Work,
) -> Result<Submitted<H>, Finding>
where
    Backend<H>: VariableAllToAllBackend,
{
    let Work::AllToAll { sends, width } = work.normalized() else {
        return Err(wrong_work(Operation::VariableAllToAll, work));
    };
    let width = 1 + usize::from(width);
    let sends: Vec<Vec<usize>> = sends
        .iter()
        .map(|row| row.iter().map(|&c| usize::from(c)).collect())
        .collect();
    let (me, n) = (ctx.rank(), ctx.size());
    let rows = |r: usize| sends[r].iter().sum::<usize>();
    let input = tensor(
        ctx,
        &matrix::values(me, rows(me) * width),
        &[rows(me), width],
    )?;
    let receive: Vec<usize> = (0..n).map(|p| sends[p][me]).collect();
    let counts = CommunicationPeerCounts::new(sends[me].clone(), receive, n)
        .map_err(|e| Finding::NotSupported(format!("peer counts {sends:?}: {e}")))?;
    let expected = (0..n)
        .flat_map(|p| {
            let offset: usize = sends[p][..me].iter().sum();
            let all = matrix::values(p, rows(p) * width);
            all[offset * width..(offset + sends[p][me]) * width].to_vec()
        })
        .collect();
    one_to_one(ctx, Operation::VariableAllToAll, input, expected, |input| {
        Backend::<H>::variable_all_to_all(input, &counts, 0, ctx.group(), executor)
    })
}

/// [`Work::Broadcast`]: from member `root`, or an out-of-range root.
pub(crate) fn broadcast<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    work: Work,
) -> Result<Submitted<H>, Finding>
where
    Backend<H>: BroadcastBackend,
{
    let Work::Broadcast { root } = work.normalized() else {
        return Err(wrong_work(Operation::Broadcast, work));
    };
    let root = usize::from(root);
    let input = if ctx.rank() == root || root >= ctx.size() {
        tensor(ctx, &matrix::values(ctx.rank(), 4), &[4])?
    } else {
        tensor(
            ctx,
            &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0],
            &[4],
        )?
    };
    let expected = matrix::values(root, 4);
    one_to_one(ctx, Operation::Broadcast, input, expected, |input| {
        Backend::<H>::broadcast(input, root, ctx.group(), executor)
    })
}

/// [`Work::Agree`]: member `r` votes `votes[r]`.
pub(crate) fn agree<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    work: Work,
) -> Result<Submitted<H>, Finding>
where
    Backend<H>: FailureAgreementBackend,
{
    let Work::Agree { votes } = work else {
        return Err(wrong_work(Operation::AgreeSuccess, work));
    };
    let expected = votes.iter().all(|&vote| vote);
    let vote = votes[ctx.rank().min(1)];
    // agree_success must not block on its peers (AGR-2).
    let submission = guarded(
        "agree_success() while a peer had not submitted",
        "AGR-2",
        slack::BLOCKED,
        || Backend::<H>::agree_success(vote, ctx.group(), executor),
    )
    .map_err(|e| refused(Operation::AgreeSuccess, e))?;
    Ok(matrix::verified_agreement(
        submission,
        expected,
        format!("the votes were {votes:?}"),
    ))
}

/// The receiver's contract of a [`Work::SendReceive`] of `count` values.
const SCHEMA: &str = "commcheck.model";

/// Frames `tensors` with eredu's public framing: one role per tensor,
/// `value-<i>` of dtype F32 and shape `[4]`, except where `header` changes
/// the first role or the schema, with `route` in the header.
pub(crate) fn frame_as<T>(
    route: u64,
    header: Header,
    tensors: Vec<T>,
) -> Result<Vec<RoleExactBoundaryValue<T>>, Finding> {
    let roles = (0..tensors.len())
        .map(|i| {
            let (mut name, mut dtype, mut shape) =
                (format!("value-{i}"), TensorDtype::F32, vec![4]);
            if i == 0 {
                match header {
                    Header::Role => name = "value-x".into(),
                    Header::Dtype => dtype = TensorDtype::I32,
                    Header::Shape => shape = vec![2, 2],
                    _ => {}
                }
            }
            BoundaryRoleContract::new(name, dtype, shape)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finding::Harness(format!("boundary role: {e}")))?;
    let schema = match header {
        Header::Schema => "commcheck.model.other",
        _ => SCHEMA,
    };
    let contract = RoleExactBoundaryContract::new(schema, roles.clone())
        .map_err(|e| Finding::Harness(format!("boundary contract: {e}")))?;
    contract
        .frame_values(CommunicationRouteId::new(route), &roles, tensors)
        .map_err(|e| Finding::Harness(format!("framing: {e}")))
}

/// [`Work::SendReceive`]: the late peer (the last rank) sends, the subject
/// (rank 0) receives `1 + values` values of shape `[4]`.
pub(crate) fn send_receive<H: Harness>(
    ctx: &RankCtx<'_, H>,
    executor: &Executor<H>,
    work: Work,
) -> Result<Submitted<H>, Finding>
where
    Backend<H>: PointToPointBackend,
{
    let Work::SendReceive { values, header } = work.normalized() else {
        return Err(wrong_work(Operation::SendReceive, work));
    };
    let source = ctx.size() - 1;
    let sending = ctx.rank() == source;
    let expected_count = 1 + usize::from(values);
    let payload = matrix::values(source, 4 * (expected_count + 1));
    let (count, header) = match (sending, header) {
        (true, Header::Count) => (expected_count + 1, Header::Matching),
        (true, header) => (expected_count, header),
        (false, _) => (expected_count, Header::Matching),
    };
    let tensors = (0..count)
        .map(|i| {
            let values = if sending {
                payload[4 * i..4 * (i + 1)].to_vec()
            } else {
                vec![0.0; 4]
            };
            tensor(ctx, &values, &[4])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let input_probes = matrix::probes(ctx, &tensors.iter().collect::<Vec<_>>())?;
    let route_in_header = match header {
        Header::Route => matrix::ROUTE + 1,
        _ => matrix::ROUTE,
    };
    let framed = frame_as(route_in_header, header, tensors)?;
    let sent: Vec<Vec<u8>> = framed.iter().map(|v| v.header().to_vec()).collect();
    let route = ctx.route(matrix::ROUTE, source, 0)?;
    let logged = ctx.wire_log(&route).map(|log| log.len());
    let submit =
        || Backend::<H>::send_receive(framed, std::borrow::Borrow::borrow(&route), executor);
    let submitted = if sending {
        submit()
    } else {
        guarded(
            "send_receive() submitted by the receiver before its sender (a submission that waits for its peer)",
            crate::world::SETUP,
            slack::BLOCKED,
            submit,
        )
    };
    let submission = submitted.map_err(|e| refused(Operation::SendReceive, e))?;
    let outputs: Vec<_> = submission.output.iter().collect();
    let output_probes = matrix::probes(ctx, &outputs)?;
    let verify = match (sending, logged) {
        // The sender's check, once its send completed: the wire log shows
        // exactly one new native message, carrying exactly the framed
        // headers (P2P-3). It keeps the sender's route endpoint.
        (true, Some(before)) => wire_check::<H>(route, before, sent),
        (true, None) => {
            drop(route);
            Box::new(|_: &RankCtx<'_, H>| Ok(()))
        }
        (false, _) => {
            let expected = (0..expected_count)
                .map(|i| payload[4 * i..4 * (i + 1)].to_vec())
                .collect();
            // The completion retains the route (RET-3).
            drop(route);
            matrix::verify_tensors(Operation::SendReceive, submission.output, move || expected)
        }
    };
    Ok(Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes,
        output_probes,
        verify: Some(verify),
        lazy: None,
        watch: None,
        feeder: None,
        alone: false,
    })
}

/// P2P-3 on the sending side: the sends since `before` on `route` are one
/// native message whose headers are exactly `sent`.
fn wire_check<H: Harness>(route: H::Route, before: usize, sent: Vec<Vec<u8>>) -> Verify<H> {
    Box::new(move |ctx: &RankCtx<'_, H>| {
        let log = ctx.wire_log(&route).unwrap_or_default();
        let new = log.get(before..).unwrap_or_default();
        match new {
            [record] if record.headers == sent => Ok(()),
            _ => Err(Finding::Violation(format!(
                "one send of {} framed value(s) produced {} native message(s) ({:?} header(s) each), expected one \
                 carrying exactly the framed headers and the payload",
                sent.len(),
                new.len(),
                new.iter().map(|r| r.headers.len()).collect::<Vec<_>>()
            ))),
        }
    })
}

impl<H: Harness> crate::Claims<H> {
    /// The claimed operation's driver and parameterised submission, when it
    /// is claimed and has one.
    pub(crate) fn varied(&self, operation: Operation) -> Option<(matrix::Driver<H>, Vary<H>)> {
        let mut varied = VariedOf(Vec::new());
        self.visit(&mut varied);
        let vary = varied.0.into_iter().find(|(op, _)| *op == operation)?.1;
        let driver = self
            .drivers()
            .into_iter()
            .find(|driver| driver.subject.operation() == Some(operation))?;
        Some((driver, vary))
    }
}

/// Collects the parameterised submission of each claimed operation that has one.
struct VariedOf<H: Harness>(Vec<(Operation, Vary<H>)>);

impl<H: Harness> crate::harness::ClaimVisitor<H> for VariedOf<H> {
    fn sum_reduction(&mut self) {}
    fn even_gather(&mut self) {}
    fn uneven_gather(&mut self)
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.0
            .push((Operation::AllGatherUneven, uneven_gather::<H>));
    }
    fn variable_all_to_all(&mut self)
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.0.push((Operation::VariableAllToAll, all_to_all::<H>));
    }
    fn point_to_point(&mut self)
    where
        Backend<H>: PointToPointBackend,
    {
        self.0.push((Operation::SendReceive, send_receive::<H>));
    }
    fn broadcast(&mut self)
    where
        Backend<H>: BroadcastBackend,
    {
        self.0.push((Operation::Broadcast, broadcast::<H>));
    }
    fn barrier(&mut self) {}
    fn failure_agreement(&mut self)
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.0.push((Operation::AgreeSuccess, agree::<H>));
    }
}
