//! The drivers of the eight operations: each one's standard submission, with
//! inputs from (rank, index) so that every expected output is exact. In a
//! world that runs past the harness's protocol boundaries
//! ([`RankCtx::large`]), each rank's contribution to an operation that moves
//! data carries that many elements instead of a few.

use super::driver::{operation_driver, Driver};
use super::handle::Handle;
use super::submitted::{
    attribute_value, extend_values_in, failed, one_to_one, probes, values_in, verify_tensors,
    waits_for_peers, Submitted, Verify,
};
use crate::check::{slack, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, ClaimVisitor, Claims, Harness};
use crate::operation::Operation;
use crate::world::{guarded, RankCtx};
use eredu_runtime::backend::{
    BarrierBackend, BroadcastBackend, EvenGatherBackend, FailureAgreementBackend,
    PointToPointBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::{
    BoundaryRoleContract, CommunicationPeerCounts, CommunicationRouteId, RoleExactBoundaryContract,
};

pub(crate) fn all_reduce_sum<H: Harness>() -> Driver<H>
where
    Backend<H>: SumReductionBackend,
{
    operation_driver(Operation::AllReduceSum, |ctx, executor, _| {
        let n = ctx.large().unwrap_or(4);
        let dtype = ctx.large_dtype();
        let input = input(ctx, &values_in(dtype, ctx.rank(), n), &[n])?;
        // Σ over ranks of their values, exact in the dtype at these sizes.
        let size = ctx.size();
        let expected = move || {
            let mut sum = values_in(dtype, 0, n);
            for rank in 1..size {
                for (total, value) in sum.iter_mut().zip(values_in(dtype, rank, n)) {
                    *total += value;
                }
            }
            sum
        };
        one_to_one(ctx, Operation::AllReduceSum, input, expected, |input| {
            Backend::<H>::all_reduce_sum(input, ctx.group(), executor)
        })
    })
}

pub(crate) fn all_gather_even<H: Harness>() -> Driver<H>
where
    Backend<H>: EvenGatherBackend,
{
    operation_driver(Operation::AllGatherEven, |ctx, executor, _| {
        let n = ctx.large().unwrap_or(2);
        let dtype = ctx.large_dtype();
        let input = input(ctx, &values_in(dtype, ctx.rank(), n), &[n])?;
        let size = ctx.size();
        let expected = move || {
            let mut expected = Vec::with_capacity(size * n);
            for rank in 0..size {
                extend_values_in(dtype, &mut expected, rank, 0..n);
            }
            expected
        };
        one_to_one(ctx, Operation::AllGatherEven, input, expected, |input| {
            Backend::<H>::all_gather_even(input, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn all_gather_uneven<H: Harness>() -> Driver<H>
where
    Backend<H>: UnevenGatherBackend,
{
    operation_driver(Operation::AllGatherUneven, |ctx, executor, _| {
        let base = ctx.large().unwrap_or(1);
        let counts: Vec<usize> = (0..ctx.size()).map(|r| r + base).collect();
        let own = counts[ctx.rank()];
        let dtype = ctx.large_dtype();
        let input = input(ctx, &values_in(dtype, ctx.rank(), own), &[own])?;
        let all = counts.clone();
        let expected = move || {
            let mut expected = Vec::with_capacity(all.iter().sum());
            for (rank, &count) in all.iter().enumerate() {
                extend_values_in(dtype, &mut expected, rank, 0..count);
            }
            expected
        };
        one_to_one(ctx, Operation::AllGatherUneven, input, expected, |input| {
            Backend::<H>::all_gather_uneven(input, &counts, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn variable_all_to_all<H: Harness>() -> Driver<H>
where
    Backend<H>: VariableAllToAllBackend,
{
    operation_driver(Operation::VariableAllToAll, |ctx, executor, _| {
        let n = ctx.size();
        let me = ctx.rank();
        // Rows of `k` elements to each peer: one, or (past the boundaries)
        // enough that what each rank sends passes them.
        let k = ctx.large().map_or(1, |large| large.div_ceil(n));
        let dtype = ctx.large_dtype();
        let input = input(ctx, &values_in(dtype, me, n * k), &[n * k])?;
        let counts = CommunicationPeerCounts::new(vec![k; n], vec![k; n], n)
            .map_err(|e| Finding::Harness(e.to_string()))?;
        let expected = move || {
            let mut expected = Vec::with_capacity(n * k);
            for peer in 0..n {
                extend_values_in(dtype, &mut expected, peer, me * k..(me + 1) * k);
            }
            expected
        };
        one_to_one(ctx, Operation::VariableAllToAll, input, expected, |input| {
            Backend::<H>::variable_all_to_all(input, &counts, 0, ctx.group(), executor)
        })
    })
}

pub(crate) fn broadcast<H: Harness>() -> Driver<H>
where
    Backend<H>: BroadcastBackend,
{
    operation_driver(Operation::Broadcast, |ctx, executor, _| {
        // The root is the last rank: the subject (rank 0) waits for a late
        // root. In the world whose subject sends (`RankCtx::subject_sends`)
        // the subject is the root, a member whose part needs no peer: it may
        // complete before its late peers join, or stay pending until they do.
        let sends = ctx.subject_sends();
        let root = if sends { 0 } else { ctx.size() - 1 };
        let n = ctx.large().unwrap_or(4);
        let dtype = ctx.large_dtype();
        let input = if ctx.rank() == root {
            input(ctx, &values_in(dtype, root, n), &[n])?
        } else {
            let filler = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0];
            let filler: Vec<f32> = (0..n).map(|i| filler[i % 4]).collect();
            input(ctx, &filler, &[n])?
        };
        let mut submitted = one_to_one(
            ctx,
            Operation::Broadcast,
            input,
            move || values_in(dtype, root, n),
            |input| Backend::<H>::broadcast(input, root, ctx.group(), executor),
        )?;
        submitted.alone = sends && ctx.rank() == 0;
        Ok(submitted)
    })
}

pub(crate) fn barrier<H: Harness>() -> Driver<H>
where
    Backend<H>: BarrierBackend,
{
    operation_driver(Operation::Barrier, |ctx, executor, _| {
        let completion = waits_for_peers(Operation::Barrier, || {
            Backend::<H>::barrier(ctx.group(), executor)
        })
        .map_err(|e| failed(ctx, Operation::Barrier, e))?;
        Ok(Submitted {
            completion: Handle::Communication(completion),
            input_probes: Vec::new(),
            output_probes: Vec::new(),
            verify: None,
            lazy: None,
            watch: None,
            feeder: None,
            alone: false,
        })
    })
}

pub(crate) fn agree_success<H: Harness>() -> Driver<H>
where
    Backend<H>: FailureAgreementBackend,
{
    operation_driver(Operation::AgreeSuccess, |ctx, executor, _| {
        // agree_success must not block on its peers (AGR-2): a late peer
        // would otherwise wait for this rank until the case watchdog.
        let submission = guarded(
            "agree_success() while a peer had not submitted",
            "AGR-2",
            slack::BLOCKED,
            || Backend::<H>::agree_success(true, ctx.group(), executor),
        )
        .map_err(|e| failed(ctx, Operation::AgreeSuccess, e))?;
        Ok(verified_agreement(
            submission,
            true,
            "every member voted true".to_owned(),
        ))
    })
}

/// A submitted agreement whose output, once complete, must resolve to
/// `expected` (`votes` says what the members submitted); a wrong value is
/// attributed to AGR-1 by [`attribute_value`].
pub(crate) fn verified_agreement<H: Harness>(
    submission: eredu_core::Submission<
        <Backend<H> as FailureAgreementBackend>::FailureAgreementOutput,
        crate::harness::CommCompletion<H>,
    >,
    expected: bool,
    votes: String,
) -> Submitted<H>
where
    Backend<H>: FailureAgreementBackend,
{
    let output = submission.output;
    let verify: Verify<H> = Box::new(move |ctx: &RankCtx<'_, H>| {
        let wrong = match Backend::<H>::resolve_failure_agreement(output) {
            Ok(agreed) if agreed == expected => return Ok(()),
            Ok(agreed) => format!("{votes}, the agreement resolved to {agreed}"),
            Err(error) => format!("resolve_failure_agreement after completion failed: {error}"),
        };
        attribute_value(
            ctx,
            Operation::AgreeSuccess,
            format!("agree_success on rank {}: {wrong}", ctx.rank()),
        );
        Ok(())
    });
    Submitted {
        completion: Handle::Communication(submission.completion),
        input_probes: Vec::new(),
        output_probes: Vec::new(),
        verify: Some(verify),
        lazy: None,
        watch: None,
        feeder: None,
        alone: false,
    }
}

/// Route id of the standard point-to-point route (late rank 1 → subject 0).
pub(crate) const ROUTE: u64 = 7;

/// A tensor of the completion matrix's operations: in the world's dtype
/// ([`RankCtx::large_dtype`]).
fn input<H: Harness>(
    ctx: &RankCtx<'_, H>,
    values: &[f32],
    shape: &[usize],
) -> Result<crate::harness::Tensor<H>, Finding> {
    ctx.in_dtype(ctx.large_dtype(), || ctx.tensor(values, shape))
}

/// Frames `tensors` for the standard route with eredu-runtime's public framing.
pub(crate) fn frame<T>(
    route: u64,
    schema: &str,
    (shapes, dtype): (&[Vec<usize>], Dtype),
    tensors: Vec<T>,
) -> Result<Vec<eredu_runtime::RoleExactBoundaryValue<T>>, Finding> {
    let roles = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            BoundaryRoleContract::new(format!("value-{i}"), dtype.eredu(), shape.clone())
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Finding::Harness(format!("boundary role: {e}")))?;
    let contract = RoleExactBoundaryContract::new(schema, roles.clone())
        .map_err(|e| Finding::Harness(format!("boundary contract: {e}")))?;
    contract
        .frame_values(CommunicationRouteId::new(route), &roles, tensors)
        .map_err(|e| Finding::Harness(format!("framing: {e}")))
}

pub(crate) fn send_receive<H: Harness>() -> Driver<H>
where
    Backend<H>: PointToPointBackend,
{
    operation_driver(Operation::SendReceive, |ctx, executor, _| {
        // The late peer (last rank) sends and the subject (rank 0) receives;
        // in the world whose subject sends (`RankCtx::subject_sends`), the
        // other way round: a rendezvous send stays pending until its late
        // receiver posts.
        let late = ctx.size() - 1;
        let sends = ctx.subject_sends();
        let (source, destination) = if sends { (0, late) } else { (late, 0) };
        let route = ctx.route(ROUTE, source, destination)?;
        let n = ctx.large().unwrap_or(4);
        let dtype = ctx.large_dtype();
        let payload = if ctx.rank() == source {
            values_in(dtype, source, n)
        } else {
            vec![0.0; n]
        };
        let input = input(ctx, &payload, &[n])?;
        let input_probes = probes(ctx, &[&input])?;
        let framed = frame(ROUTE, "commcheck.matrix", (&[vec![n]], dtype), vec![input])?;
        let submit =
            || Backend::<H>::send_receive(framed, std::borrow::Borrow::borrow(&route), executor);
        // The subject receives before its late sender submits. A backend
        // whose submission waits for the peer never returns here; no SPEC
        // invariant bounds a submission (eredu says nothing), so that ends
        // the case inconclusive after a second instead of a watchdog's
        // timeout blamed on the case's invariant. (A sender that waits in its
        // submission for a late receiver is the same.)
        let early = ctx.rank() == 0;
        let submitted = if early {
            let what = if sends {
                "send_receive() submitted by the sender before its receiver (a submission that waits for its peer)"
            } else {
                "send_receive() submitted by the receiver before its sender (a submission that waits for its peer)"
            };
            crate::world::guarded(what, crate::world::SETUP, slack::BLOCKED, submit)
        } else {
            submit()
        };
        let submission = submitted.map_err(|e| failed(ctx, Operation::SendReceive, e))?;
        let outputs: Vec<_> = submission.output.iter().collect();
        let output_probes = probes(ctx, &outputs)?;
        // The receiver's output holds what arrived. A sender's output is
        // its input itself: the subject keeps no handle on it, so that its
        // retention is the completion's alone (RET-3, RET-5).
        let alone = sends && ctx.rank() == 0;
        let verify = if alone {
            drop(submission.output);
            None
        } else {
            Some(verify_tensors(
                Operation::SendReceive,
                submission.output,
                move || vec![values_in(dtype, source, n)],
            ))
        };
        // The route endpoint must outlive nothing: the completion retains it (RET-3).
        drop(route);
        Ok(Submitted {
            completion: Handle::Communication(submission.completion),
            input_probes,
            output_probes,
            verify,
            lazy: None,
            watch: None,
            feeder: None,
            alone,
        })
    })
}

impl<H: Harness> Claims<H> {
    /// The completion-matrix drivers of the claimed operations, in claim order.
    pub(crate) fn drivers(&self) -> Vec<Driver<H>> {
        let mut drivers = DriversOf(Vec::new());
        self.visit(&mut drivers);
        drivers.0
    }
}

/// Builds each claimed operation's driver.
struct DriversOf<H: Harness>(Vec<Driver<H>>);

impl<H: Harness> ClaimVisitor<H> for DriversOf<H> {
    fn sum_reduction(&mut self)
    where
        Backend<H>: SumReductionBackend,
    {
        self.0.push(all_reduce_sum::<H>());
    }
    fn even_gather(&mut self)
    where
        Backend<H>: EvenGatherBackend,
    {
        self.0.push(all_gather_even::<H>());
    }
    fn uneven_gather(&mut self)
    where
        Backend<H>: UnevenGatherBackend,
    {
        self.0.push(all_gather_uneven::<H>());
    }
    fn variable_all_to_all(&mut self)
    where
        Backend<H>: VariableAllToAllBackend,
    {
        self.0.push(variable_all_to_all::<H>());
    }
    fn point_to_point(&mut self)
    where
        Backend<H>: PointToPointBackend,
    {
        self.0.push(send_receive::<H>());
    }
    fn broadcast(&mut self)
    where
        Backend<H>: BroadcastBackend,
    {
        self.0.push(broadcast::<H>());
    }
    fn barrier(&mut self)
    where
        Backend<H>: BarrierBackend,
    {
        self.0.push(barrier::<H>());
    }
    fn failure_agreement(&mut self)
    where
        Backend<H>: FailureAgreementBackend,
    {
        self.0.push(agree_success::<H>());
    }
}
