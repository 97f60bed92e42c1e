//! GAT: gathers (`EvenGatherBackend::all_gather_even`,
//! `UnevenGatherBackend::all_gather_uneven`).
//!
//! - GAT-1: the even gather's output is the members' inputs concatenated in
//!   member order along `axis` (checked on the first, a middle and the last
//!   axis of 3-D tensors, on 2-D, one-element and empty tensors). What
//!   members that disagree on the shape are owed is not checked: eredu
//!   promises neither an error nor a result.
//! - GAT-2: for the uneven gather, `counts[i]` is member i's *extent along
//!   `axis`* (not an element count: every input has several elements per
//!   position along the axis, so the two readings differ); the output's
//!   extent is their sum, blocks in member order; zero counts are valid; a
//!   `counts` whose length is not the group size is an error on every rank.
//!
//! Both run in every dtype the harness offers, on their tables and on the
//! size sweep, with data exact in the dtype and distinct per member (see
//! [`super::scenario`]); each step's members join as its arrival says (a
//! seeded member last, reversed, odd members first); every wait is bounded
//! (see [`super::choreography`]).

use eredu_runtime::backend::{EvenGatherBackend, UnevenGatherBackend};

use super::choreography::{expect_error, in_turn, run, Flow};
use super::common::needs;
use super::scenario::{elements, with_extent, Scenario, Semantics};
use super::seeds::{late_member, pick, values};
use super::values::{self, each_dtype, each_member_order, On, Refused};
use crate::case::{Body, Row};
use crate::check::Check;
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::world::RankCtx;

/// GAT-1 inputs (every member's shape) and gather axes.
/// Distinct extents on every axis, so that no two layouts agree by chance:
/// middle axes with the outer extent below and above the inner one.
const EVEN: &[(&[usize], usize)] = &[
    (&[2, 3], 0),
    (&[2, 3, 4], 1),
    (&[4, 3, 2], 1),
    (&[2, 1, 3], 2),
    (&[3, 2, 4], 0),
    (&[1], 0),
    (&[0, 3], 0),
    (&[2, 0, 3], 1),
];

/// GAT-2 inputs: each member's shape is this one with its own count along
/// the axis (the placeholder 0 there).
const UNEVEN: &[(&[usize], usize)] =
    &[(&[0, 3], 0), (&[2, 0, 3], 1), (&[3, 2, 0], 2), (&[0, 2], 0)];

/// Seed path component for the member given a zero count.
const ZERO: u64 = 0x2e60;

pub(crate) fn even_rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: EvenGatherBackend,
{
    vec![Row {
        id: "GAT-1",
        applies: |s| s == Subject::Operation(Operation::AllGatherEven),
        requires: needs::NOTHING,
        timing: false,
        pass_needs: needs::NOTHING,
        body: Body::Sizes {
            sizes: super::scenario::VALUE_WORLDS,
            script: even_gathers_concatenate_in_member_order::<H>,
        },
    }]
}

pub(crate) fn uneven_rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: UnevenGatherBackend,
{
    vec![Row {
        id: "GAT-2",
        applies: |s| s == Subject::Operation(Operation::AllGatherUneven),
        requires: needs::NOTHING,
        timing: false,
        pass_needs: needs::NOTHING,
        body: Body::Sizes {
            sizes: super::scenario::VALUE_WORLDS,
            script: uneven_counts_are_axis_extents::<H>,
        },
    }]
}

/// GAT-1: for every dtype, exact concatenations on every (shape, axis) and
/// of the size sweep.
fn even_gathers_concatenate_in_member_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: EvenGatherBackend,
{
    let mut step = 0u64;
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            for (index, scenario) in
                values::shared_scenarios(ctx, "even", (dtype, sweep), even_scenarios)
                    .iter()
                    .enumerate()
            {
                gather_even_step(ctx, (step, index == 0), scenario, &On::world(ctx))?;
                step += 1;
            }
            Ok(())
        })?;
        let table = values::shared_scenarios(ctx, "even", (Dtype::F32, &[]), even_scenarios);
        each_member_order(ctx, 2, |on| {
            for scenario in table.iter() {
                gather_even_step(ctx, (step, false), scenario, on)?;
                step += 1;
            }
            Ok(())
        })
    })
}

/// One GAT-1 step on `on`'s group.
fn gather_even_step<H: Harness>(
    ctx: &RankCtx<'_, H>,
    (step, first): (u64, bool),
    scenario: &Scenario,
    on: &On<'_, H>,
) -> Result<(), Refused>
where
    Backend<H>: EvenGatherBackend,
{
    let Semantics::Gather { axis } = scenario.semantics else {
        return Ok(());
    };
    values::step(
        ctx,
        ("gat-1", step, first),
        crate::Operation::AllGatherEven,
        (scenario, on),
        "should be the members' inputs concatenated in member order",
        |input, group| Backend::<H>::all_gather_even(input, axis, group, ctx.executor()),
    )
}

/// GAT-1's steps in `dtype` on a world of `size`: [`EVEN`], then 1-D
/// tensors of the sweep's element counts, gathered on axis 0.
pub(crate) fn even_scenarios(
    seed: u64,
    size: usize,
    dtype: Dtype,
    sweep: &[usize],
) -> Vec<Scenario> {
    EVEN.iter()
        .map(|(shape, axis)| (shape.to_vec(), *axis))
        .chain(sweep.iter().map(|&count| (vec![count], 0)))
        .zip(0u64..)
        .map(|((shape, axis), step)| {
            let len = shape.iter().product();
            Scenario {
                label: format!("shape {shape:?} on axis {axis}"),
                common: Default::default(),
                dtype,
                semantics: Semantics::Gather { axis },
                inputs: (0..size)
                    .map(|member| elements(dtype, seed, step, member, len))
                    .collect(),
                shapes: vec![shape; size],
            }
        })
        .collect()
}

/// GAT-2: for every dtype, exact uneven concatenations (counts are axis
/// extents, with a zero count and an all-zero step) and of the size sweep;
/// then `counts` of the wrong length fail.
fn uneven_counts_are_axis_extents<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: UnevenGatherBackend,
{
    let mut step = 0u64;
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            for (index, scenario) in
                values::shared_scenarios(ctx, "uneven", (dtype, sweep), uneven_scenarios)
                    .iter()
                    .enumerate()
            {
                gather_uneven_step(ctx, (step, index == 0), scenario, &On::world(ctx))?;
                step += 1;
            }
            Ok(())
        })?;
        let table = values::shared_scenarios(ctx, "uneven", (Dtype::F32, &[]), uneven_scenarios);
        each_member_order(ctx, 3, |on| {
            for scenario in table.iter() {
                gather_uneven_step(ctx, (step, false), scenario, on)?;
                step += 1;
            }
            Ok(())
        })?;
        let size = ctx.size();
        counts_of_wrong_length_fail(ctx, 100, size + 1)?;
        if size > 1 {
            counts_of_wrong_length_fail(ctx, 101, size - 1)?;
        }
        Ok(())
    })
}

/// GAT-2's steps in `dtype` on a world of `size`: [`UNEVEN`] with seeded
/// counts (the last step all zero), then 1-D tensors of the sweep's element
/// counts, member m sending that count plus m.
pub(crate) fn uneven_scenarios(
    seed: u64,
    size: usize,
    dtype: Dtype,
    sweep: &[usize],
) -> Vec<Scenario> {
    let last = UNEVEN.len() - 1;
    let table = UNEVEN.iter().zip(0u64..).map(|((base, axis), step)| {
        let counts = if step as usize == last {
            vec![0; size]
        } else {
            uneven_counts(seed, step, size)
        };
        (base.to_vec(), *axis, counts)
    });
    let swept = sweep.iter().map(|&count| {
        (
            vec![0],
            0,
            (0..size).map(|member| count + member).collect::<Vec<_>>(),
        )
    });
    table
        .chain(swept)
        .zip(0u64..)
        .map(|((base, axis, counts), step)| {
            let shapes: Vec<Vec<usize>> = counts
                .iter()
                .map(|&count| with_extent(&base, axis, count))
                .collect();
            Scenario {
                label: format!("counts {counts:?} on axis {axis} of shape {base:?}"),
                common: Default::default(),
                dtype,
                semantics: Semantics::Gather { axis },
                inputs: shapes
                    .iter()
                    .enumerate()
                    .map(|(member, shape)| {
                        elements(dtype, seed, step, member, shape.iter().product())
                    })
                    .collect(),
                shapes,
            }
        })
        .collect()
}

/// One GAT-2 step on `on`'s group.
fn gather_uneven_step<H: Harness>(
    ctx: &RankCtx<'_, H>,
    (step, first): (u64, bool),
    scenario: &Scenario,
    on: &On<'_, H>,
) -> Result<(), Refused>
where
    Backend<H>: UnevenGatherBackend,
{
    let Semantics::Gather { axis } = scenario.semantics else {
        return Ok(());
    };
    let counts: Vec<usize> = scenario.shapes.iter().map(|shape| shape[axis]).collect();
    values::step(
        ctx,
        ("gat-2", step, first),
        crate::Operation::AllGatherUneven,
        (scenario, on),
        &format!(
            "counts {counts:?} are the members' extents along the axis, so the output's extent \
             should be their sum with the blocks in member order"
        ),
        |input, group| Backend::<H>::all_gather_uneven(input, &counts, axis, group, ctx.executor()),
    )
}

/// Counts 1 to 3, except one member's, which is 0 (in groups of two or more).
fn uneven_counts(seed: u64, step: u64, size: usize) -> Vec<usize> {
    let zero = pick(seed, &[step, ZERO], size);
    (0..size)
        .map(|member| {
            if size > 1 && member == zero {
                0
            } else {
                1 + pick(seed, &[step, member as u64], 3)
            }
        })
        .collect()
}

/// Bad input: every member submits a correct input with a `counts` of
/// `length` entries. Every rank must see an error.
fn counts_of_wrong_length_fail<H: Harness>(ctx: &RankCtx<'_, H>, step: u64, length: usize) -> Flow
where
    Backend<H>: UnevenGatherBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let late = late_member(seed, step, size);
    let counts: Vec<usize> = (0..length).map(|member| 1 + member % 2).collect();
    let own = counts.get(rank).copied().unwrap_or(1);
    let shape = [own, 2];
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let input = ctx.tensor(&values(seed, step, rank, own * 2), &shape)?;
    let submitted = in_turn(ctx, &format!("gat-2/{step}"), late, || {
        Backend::<H>::all_gather_uneven(input.clone(), &counts, 0, ctx.group(), ctx.executor())
    })?;
    expect_error(
        ctx,
        &|| {
            format!(
                "all_gather_uneven with {length} counts {counts:?} for a group of {size} (rank \
                 {rank}, member {late} joined last)"
            )
        },
        submitted,
    )
}
