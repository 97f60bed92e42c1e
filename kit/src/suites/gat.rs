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
//! Inputs are exact (see [`super::exact`]); each step picks, from the
//! case's seed, the member that joins last; every wait is bounded (see
//! [`super::choreography`]).

use eredu_runtime::backend::{EvenGatherBackend, UnevenGatherBackend};

use super::choreography::{expect_error, in_turn, late_member, output_of, run, Flow};
use super::exact::{check_output, concat, pick, values, with_extent};
use super::needs;
use crate::case::{Body, Row};
use crate::check::Check;
use crate::harness::{Backend, Harness};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::world::RankCtx;

/// World sizes every GAT case runs on.
const SIZES: &[usize] = &[1, 2, 3, 4, 8];

/// GAT-1 inputs (every member's shape) and gather axes.
const EVEN: &[(&[usize], usize)] = &[
    (&[2, 3], 0),
    (&[2, 3, 2], 1),
    (&[2, 1, 3], 2),
    (&[3, 2, 2], 0),
    (&[1], 0),
    (&[0, 3], 0),
    (&[2, 0, 2], 1),
];

/// GAT-2 inputs: each member's shape is this one with its own count along
/// the axis (the placeholder 0 there).
const UNEVEN: &[(&[usize], usize)] =
    &[(&[0, 3], 0), (&[2, 0, 2], 1), (&[2, 2, 0], 2), (&[0, 2], 0)];

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
            sizes: SIZES,
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
            sizes: SIZES,
            script: uneven_counts_are_axis_extents::<H>,
        },
    }]
}

/// GAT-1: exact concatenations on every (shape, axis).
fn even_gathers_concatenate_in_member_order<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: EvenGatherBackend,
{
    run(ctx, || {
        for (step, (shape, axis)) in (0u64..).zip(EVEN) {
            gather_even_once(ctx, step, shape, *axis)?;
        }
        Ok(())
    })
}

fn gather_even_once<H: Harness>(
    ctx: &RankCtx<'_, H>,
    step: u64,
    shape: &[usize],
    axis: usize,
) -> Flow
where
    Backend<H>: EvenGatherBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let len = shape.iter().product();
    let late = late_member(seed, step, size);
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let input = ctx.tensor(&values(seed, step, rank, len), shape)?;
    let what = || {
        format!(
            "all_gather_even of shape {shape:?} on axis {axis}, rank {rank} of {size} (member \
             {late} joined last)"
        )
    };
    let submitted = in_turn(ctx, &format!("gat-1/{step}"), late, || {
        Backend::<H>::all_gather_even(input.clone(), axis, ctx.group(), ctx.executor())
    })?;
    let output = output_of(ctx, &what, submitted)?;
    let extent = shape.get(axis).copied().unwrap_or(0);
    let blocks: Vec<(Vec<f32>, usize)> = (0..size)
        .map(|member| (values(seed, step, member, len), extent))
        .collect();
    check_output(
        ctx,
        crate::Operation::AllGatherEven,
        || {
            format!(
                "{}: output should be the members' inputs concatenated in member order",
                what()
            )
        },
        &output,
        &with_extent(shape, axis, extent * size),
        &concat(shape, axis, &blocks),
    )?;
    Ok(())
}

/// GAT-2: exact uneven concatenations (counts are axis extents, with a zero
/// count and an all-zero step), then `counts` of the wrong length fail.
fn uneven_counts_are_axis_extents<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: UnevenGatherBackend,
{
    run(ctx, || {
        let last = UNEVEN.len() - 1;
        for (step, (shape, axis)) in (0u64..).zip(UNEVEN) {
            let counts = if step as usize == last {
                vec![0; ctx.size()]
            } else {
                uneven_counts(ctx.seed(), step, ctx.size())
            };
            gather_uneven_once(ctx, step, shape, *axis, &counts)?;
        }
        let size = ctx.size();
        counts_of_wrong_length_fail(ctx, 100, size + 1)?;
        if size > 1 {
            counts_of_wrong_length_fail(ctx, 101, size - 1)?;
        }
        Ok(())
    })
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

fn gather_uneven_once<H: Harness>(
    ctx: &RankCtx<'_, H>,
    step: u64,
    base: &[usize],
    axis: usize,
    counts: &[usize],
) -> Flow
where
    Backend<H>: UnevenGatherBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let late = late_member(seed, step, size);
    let shape_of =
        |member: usize| with_extent(base, axis, counts.get(member).copied().unwrap_or(0));
    let mine = shape_of(rank);
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let input = ctx.tensor(&values(seed, step, rank, mine.iter().product()), &mine)?;
    let what = || {
        format!(
            "all_gather_uneven with counts {counts:?} on axis {axis} (rank {rank} submitted shape \
             {mine:?}), rank {rank} of {size} (member {late} joined last)"
        )
    };
    let submitted = in_turn(ctx, &format!("gat-2/{step}"), late, || {
        Backend::<H>::all_gather_uneven(input.clone(), counts, axis, ctx.group(), ctx.executor())
    })?;
    let output = output_of(ctx, &what, submitted)?;
    let blocks: Vec<(Vec<f32>, usize)> = (0..size)
        .map(|member| {
            let len = shape_of(member).iter().product();
            (
                values(seed, step, member, len),
                counts.get(member).copied().unwrap_or(0),
            )
        })
        .collect();
    check_output(
        ctx,
        crate::Operation::AllGatherUneven,
        || {
            format!(
                "{}: counts[i] is member i's extent along the axis, so the output's extent should \
                 be their sum with the blocks in member order",
                what()
            )
        },
        &output,
        &with_extent(base, axis, counts.iter().sum()),
        &concat(base, axis, &blocks),
    )?;
    Ok(())
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
