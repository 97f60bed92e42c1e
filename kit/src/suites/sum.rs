//! SUM: sum reduction (`SumReductionBackend::all_reduce_sum`).
//!
//! - SUM-1: every member's output is the elementwise sum of every member's
//!   input, with the input's shape; on a singleton group that is the
//!   identity. What members that disagree on the shape are owed is not
//!   checked: eredu says nothing about it (neither an error nor a result is
//!   promised), so no answer can be blamed on SUM-1.
//! - SUM-2: a wave of reductions that every member submits before waiting
//!   for any of them completes, whatever order each member then waits in
//!   (here: rank 0 in submission order, every other rank in reverse). This is
//!   what `all_reduce_sum_wave` of eredu-runtime relies on; a backend that
//!   starts collectives only when they are first observed deadlocks there.
//!
//! SUM-1 runs in every dtype the harness offers, on its shapes and on the
//! size sweep; its inputs are integers of a band of their own per member
//! ([`super::scenario::addend`]) and outputs are compared within the bound
//! of any summation order (see [`super::scenario`]). Each step's members
//! join as its arrival says (a seeded member last, reversed, odd members
//! first); every wait is bounded, so a hang is a failure that names the
//! operation and the arrival (see [`super::choreography`]).

use std::time::Duration;

use eredu_runtime::backend::SumReductionBackend;

use super::choreography::{output_of, run, settle_all, Owned};
use super::common::needs;
use super::exact::check_output;
use super::scenario::{addends, numeric, sum, Scenario, Semantics};
use super::seeds::values;
use super::values::{self, each_dtype, each_member_order, On, Refused};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::world::RankCtx;

/// SUM-1 shapes: plain, 2-D, a scalar, empty ones, a single element, 3-D.
const SHAPES: &[&[usize]] = &[&[4], &[2, 3], &[], &[0], &[1], &[3, 0, 2], &[2, 3, 4]];

/// The SUM-2 wave: one reduction per shape, in submission order, with
/// [`LARGE_IN_WAVE`] large ones between them.
const WAVE: &[&[usize]] = &[&[3], &[2, 2], &[0], &[1], &[2, 1, 2], &[]];

/// Reductions of the SUM-2 wave past the harness's protocol boundaries
/// (`scenario::past_boundaries`), one after each of the first small ones:
/// more large operations in flight at once than a backend that limits them
/// (and hands a credit back only when a completion is observed) may allow,
/// so that a wait order it does not expect deadlocks.
const LARGE_IN_WAVE: usize = 4;

/// The wave's shapes: [`WAVE`] with [`LARGE_IN_WAVE`] 1-D reductions of
/// `large` elements interleaved, when there is such a size.
fn wave(large: Option<usize>) -> Vec<Vec<usize>> {
    let mut shapes = Vec::new();
    for (index, shape) in WAVE.iter().enumerate() {
        shapes.push(shape.to_vec());
        if let Some(large) = large.filter(|_| index < LARGE_IN_WAVE) {
            shapes.push(vec![large]);
        }
    }
    shapes
}

/// The order in which rank `rank` waits for a wave of `len`: submission
/// order, reverse, or interleaved (the even indices, then the odd ones), by
/// rank, so that every world of two ranks or more mixes orders.
fn wait_order(rank: usize, len: usize) -> (Vec<usize>, &'static str) {
    match rank % 3 {
        0 => ((0..len).collect(), "submission order"),
        1 => ((0..len).rev().collect(), "reverse order"),
        _ => (
            (0..len).step_by(2).chain((1..len).step_by(2)).collect(),
            "interleaved order",
        ),
    }
}

/// How long the whole SUM-2 wave may take once every member submitted it:
/// half of [`slack::RELEASE`], still thousands of times what six reductions
/// of at most six elements need, so that a deadlock is this case's own
/// `fail` (naming the reduction and the wait order) before a watchdog of
/// [`slack::RELEASE`] fires. The row is a timing row: a failure is retried.
const WAVE_LIMIT: Duration = Duration::from_millis(slack::RELEASE.as_millis() as u64 / 2);

fn is_sum(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::AllReduceSum)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: SumReductionBackend,
{
    vec![
        Row {
            id: "SUM-1",
            applies: is_sum,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: super::scenario::VALUE_WORLDS,
                script: sums_are_exact::<H>,
            },
        },
        Row {
            id: "SUM-2",
            applies: is_sum,
            requires: needs::NOTHING,
            timing: true,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: super::scenario::VALUE_WORLDS,
                script: waves_complete_in_any_wait_order::<H>,
            },
        },
    ]
}

/// SUM-1: for every dtype, sums of every shape and of the size sweep within
/// their bound; then, alone, the bitwise identity.
fn sums_are_exact<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: SumReductionBackend,
{
    let mut step = 0u64;
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            let claim = if ctx.size() == 1 {
                "should be the identity on a singleton group"
            } else {
                "should be the elementwise sum over members (within its bound)"
            };
            for (index, scenario) in values::shared_scenarios(ctx, "sum", (dtype, sweep), scenarios)
                .iter()
                .enumerate()
            {
                values::step(
                    ctx,
                    ("sum-1", step, index == 0),
                    crate::Operation::AllReduceSum,
                    (scenario, &On::world(ctx)),
                    claim,
                    |input, group| Backend::<H>::all_reduce_sum(input, group, ctx.executor()),
                )?;
                step += 1;
            }
            if ctx.size() == 1 {
                singleton_is_the_identity(ctx, dtype)?;
            }
            Ok(())
        })?;
        let table = values::shared_scenarios(ctx, "sum", (Dtype::F32, &[]), scenarios);
        each_member_order(ctx, 1, |on| {
            for scenario in table.iter() {
                values::step(
                    ctx,
                    ("sum-1", step, false),
                    crate::Operation::AllReduceSum,
                    (scenario, on),
                    "should be the elementwise sum over members (within its bound)",
                    |input, group| Backend::<H>::all_reduce_sum(input, group, ctx.executor()),
                )?;
                step += 1;
            }
            Ok(())
        })
    })
}

/// SUM-1's steps in `dtype` on a world of `size`: [`SHAPES`], then 1-D
/// tensors of the sweep's element counts. Inputs are [`addends`].
pub(crate) fn scenarios(seed: u64, size: usize, dtype: Dtype, sweep: &[usize]) -> Vec<Scenario> {
    SHAPES
        .iter()
        .map(|shape| shape.to_vec())
        .chain(sweep.iter().map(|&count| vec![count]))
        .zip(0u64..)
        .map(|(shape, step)| {
            let len = shape.iter().product();
            Scenario {
                label: format!("shape {shape:?}"),
                common: Default::default(),
                dtype,
                semantics: Semantics::Sum,
                inputs: (0..size)
                    .map(|member| addends(dtype, seed, step, member, len))
                    .collect(),
                shapes: vec![shape; size],
            }
        })
        .collect()
}

/// On a singleton group the sum is the identity: a negative zero (as
/// either zero), fractions, the dtype's largest value and its smallest
/// normal one come back as given.
fn singleton_is_the_identity<H: Harness>(ctx: &RankCtx<'_, H>, dtype: Dtype) -> Result<(), Refused>
where
    Backend<H>: SumReductionBackend,
{
    let input = [-0.0, 0.5, -3.25, dtype.max(), dtype.min_positive()];
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let tensor = ctx.tensor(&input, &[input.len()])?;
    let what = || format!("all_reduce_sum in {dtype} on a singleton group");
    let submitted = Backend::<H>::all_reduce_sum(tensor.clone(), ctx.group(), ctx.executor());
    let output = output_of(ctx, &what, submitted)?;
    check_output(
        ctx,
        crate::Operation::AllReduceSum,
        || format!("{} should be the identity (by numeric equality)", what()),
        &output,
        &numeric(vec![input.len()], input.to_vec()),
    )?;
    Ok(())
}

/// SUM-2: every member submits the whole wave, then waits for it in its own
/// order; every reduction must complete with its exact sum.
fn waves_complete_in_any_wait_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: SumReductionBackend,
{
    run(ctx, || {
        let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
        // Large members on the size sweep's worlds (two ranks, and three,
        // where every wait order appears), as the sweep's sizes.
        let large = super::scenario::past_boundaries(ctx.harness())
            .map(|large| large.elements)
            .filter(|_| super::scenario::SWEEP_WORLDS.contains(&size));
        let shapes = wave(large);
        let mut kept = Vec::new();
        let mut outputs = Vec::new();
        let mut completions = Vec::new();
        for (index, step) in (0..shapes.len()).zip(200u64..) {
            let shape = &shapes[index];
            let input = ctx.tensor(&values(seed, step, rank, shape.iter().product()), shape)?;
            kept.push(input.clone());
            let submission = Backend::<H>::all_reduce_sum(input, ctx.group(), ctx.executor())
                .map_err(|e| {
                    Finding::Violation(format!(
                        "all_reduce_sum wave on rank {rank} of {size}: submitting reduction \
                         {index} of {} failed: {e}",
                        shapes.len()
                    ))
                })?;
            outputs.push(submission.output);
            completions.push(Owned::new(submission.completion));
        }
        let (order, named) = wait_order(rank, shapes.len());
        settle_all(
            ctx,
            "sum-2/wave-submitted",
            completions,
            &order,
            WAVE_LIMIT,
            |index| {
                format!(
                    "all_reduce_sum wave of {} on rank {rank} of {size}, every member having \
                 submitted the whole wave before waiting: reduction {index} (shape {:?}), this \
                 rank waiting in {named} {order:?} (ranks wait in submission, reverse and \
                 interleaved order by rank; a wave must complete whatever the wait order)",
                    shapes.len(),
                    shapes[index],
                )
            },
        )?;
        for ((index, step), output) in (0..shapes.len()).zip(200u64..).zip(&outputs) {
            let shape = &shapes[index];
            let inputs: Vec<Vec<f32>> = (0..size)
                .map(|member| values(seed, step, member, shape.iter().product()))
                .collect();
            let expected = sum(Dtype::F32, &inputs, shape.to_vec());
            let what = || {
                format!(
                    "all_reduce_sum wave on rank {rank} of {size}: reduction {index} (shape \
                     {shape:?}) should be the elementwise sum over members"
                )
            };
            // A wrong sum is SUM-1's; SUM-2 is about the wave completing.
            match check_output(ctx, crate::Operation::AllReduceSum, what, output, &expected) {
                Err(crate::check::Finding::Violation(wrong)) => ctx.attribute("SUM-1", wrong),
                other => other?,
            }
        }
        drop(kept);
        Ok(())
    })
}
