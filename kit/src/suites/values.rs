//! Running the value checks' scenarios ([`super::scenario`]) on a backend:
//! once per dtype the harness offers, each step's members joining as its
//! [`Arrival`] says, every output judged by the one verifier.

use std::fmt::Display;

use eredu_core::Submission;

use super::choreography::{arrive, output_of, Flow, Stop};
use super::exact::check_output;
use super::scenario::{sweep_for_world, Arrival, Scenario};
use crate::dtype::Dtype;
use crate::harness::{CommCompletion, Group, Harness, Tensor};
use crate::operation::Operation;
use crate::world::RankCtx;

/// Runs `steps` once per dtype the harness offers (each listed once, in the
/// kit's order), with tensors built and read in it. `steps` gets the dtype
/// and the sweep's element counts for this world (none outside
/// the sweep's worlds and the case's largest world, the largest count on a
/// world of 2 only); the counts above the harness's limit are skipped with a
/// note. A dtype the backend refuses (see [`step`]) ends its own steps
/// only, with a note quoting the backend.
pub(crate) fn each_dtype<H: Harness>(
    ctx: &RankCtx<'_, H>,
    mut steps: impl FnMut(Dtype, &[usize]) -> Result<(), Refused>,
) -> Flow {
    let offered = ctx.harness().dtypes();
    for dtype in Dtype::ALL.into_iter().filter(|d| offered.contains(d)) {
        let harness = ctx.harness();
        let limit = harness.max_message_bytes();
        let (counts, skipped) = sweep_for_world(
            dtype,
            &harness.boundaries(dtype),
            limit,
            (ctx.size(), ctx.largest_world()),
        );
        if !skipped.is_empty() && ctx.rank() == 0 {
            ctx.note(format!(
                "{dtype}: sizes of {skipped:?} elements skipped: above the harness's limit of {} bytes per rank",
                limit.unwrap_or(0)
            ));
        }
        match ctx.in_dtype(dtype, || steps(dtype, &counts)) {
            Ok(()) => {}
            Err(Refused::Dtype(why)) => {
                if ctx.rank() == 0 {
                    ctx.note(format!(
                        "{dtype}: not supported by the backend, its steps skipped ({why})"
                    ));
                }
            }
            Err(Refused::Stop(stop)) => return Err(stop),
        }
    }
    Ok(())
}

/// The scenarios `build` makes for this world (a function of the case's
/// seed, the world's size, `dtype` and the sweep), built by the first rank
/// that asks and shared by the others: each scenario holds every member's
/// inputs, which every rank would otherwise build in full. `name` tells
/// the builders of one case apart.
pub(crate) fn shared_scenarios<H: Harness>(
    ctx: &RankCtx<'_, H>,
    name: &str,
    (dtype, sweep): (Dtype, &[usize]),
    build: fn(u64, usize, Dtype, &[usize]) -> Vec<Scenario>,
) -> std::sync::Arc<Vec<Scenario>> {
    ctx.shared(format!("scenarios/{name}/{dtype}/{sweep:?}"), || {
        build(ctx.seed(), ctx.size(), dtype, sweep)
    })
}

/// Why a dtype's steps ended early.
pub(crate) enum Refused {
    /// The backend refused the dtype at its first step's submission (quoted).
    Dtype(String),
    /// A finding, or another rank's.
    Stop(Stop),
}

impl From<Stop> for Refused {
    fn from(stop: Stop) -> Self {
        Self::Stop(stop)
    }
}

impl From<crate::check::Finding> for Refused {
    fn from(finding: crate::check::Finding) -> Self {
        Self::Stop(Stop::Found(finding))
    }
}

/// One step: builds this rank's input, submits it as the step's arrival
/// says, waits (bounded) and judges the output against the scenario's
/// expectation; `claim` says what the output should be. A submission error
/// on the first step of a dtype other than `f32` (`first`) is the backend
/// refusing the dtype: a refusal must come at submission, on every rank.
pub(crate) fn step<H: Harness, E: Display>(
    ctx: &RankCtx<'_, H>,
    (tag, step, first): (&str, u64, bool),
    operation: Operation,
    (scenario, on): (&Scenario, &On<'_, H>),
    claim: &str,
    submit: impl FnOnce(Tensor<H>, &Group<H>) -> Result<Submission<Tensor<H>, CommCompletion<H>>, E>,
) -> Result<(), Refused> {
    let (rank, size, member) = (ctx.rank(), ctx.size(), on.member);
    let input = ctx.tensor(&scenario.inputs[member], &scenario.shapes[member])?;
    let arrival = Arrival::of_step(ctx.seed(), step, size);
    let what = || {
        format!(
            "{operation} of {} in {}, rank {rank} of {size} as member {member} of {} ({arrival})",
            scenario.label, scenario.dtype, on.order
        )
    };
    let submitted = arrive(ctx, &format!("{tag}/{step}"), &arrival, || {
        submit(input.clone(), on.group)
    })?;
    judged(
        ctx,
        (operation, first),
        (scenario, member),
        (&what, claim),
        submitted,
    )?;
    drop(input);
    Ok(())
}

/// The end of a step once submitted: a submission error on the first step
/// of a dtype other than `f32` is the backend refusing the dtype; otherwise
/// the output is awaited (bounded) and judged against `member`'s
/// expectation. `what` names the step, `claim` what the output should be.
pub(crate) fn judged<H: Harness, E: Display>(
    ctx: &RankCtx<'_, H>,
    (operation, first): (Operation, bool),
    (scenario, member): (&Scenario, usize),
    (what, claim): (&dyn Fn() -> String, &str),
    submitted: Result<Submission<Tensor<H>, CommCompletion<H>>, E>,
) -> Result<(), Refused> {
    let submitted = match submitted {
        Err(error) if first && scenario.dtype != Dtype::F32 => {
            return Err(Refused::Dtype(format!(
                "{}: submission failed: {error}",
                what()
            )))
        }
        other => other,
    };
    let output = output_of(ctx, what, submitted)?;
    check_output(
        ctx,
        operation,
        || format!("{}: {claim}", what()),
        &output,
        &scenario.expected(member),
    )?;
    Ok(())
}

/// The group a step runs on, and this rank's member index in it.
pub(crate) struct On<'g, H: Harness> {
    pub(crate) group: &'g Group<H>,
    pub(crate) member: usize,
    /// How the group lists the world's ranks, for messages.
    pub(crate) order: String,
}

impl<'g, H: Harness> On<'g, H> {
    /// The world group: member `i` is world rank `i`.
    pub(crate) fn world(ctx: &'g RankCtx<'_, H>) -> Self {
        Self {
            group: ctx.group(),
            member: ctx.rank(),
            order: "the world group".into(),
        }
    }
}

/// Member orders other than the world's, for a world of `size` (three or
/// more, where reversed and interleaved differ): reversed, then even ranks
/// first.
pub(crate) fn member_orders(size: usize) -> Vec<(&'static str, Vec<usize>)> {
    if size < 3 {
        return Vec::new();
    }
    vec![
        ("reversed", (0..size).rev().collect()),
        (
            "interleaved",
            (0..size).step_by(2).chain((1..size).step_by(2)).collect(),
        ),
    ]
}

/// Runs `steps` on a group of the world in each of [`member_orders`]; `key`
/// names the check (each group gets its own key). A harness that builds no
/// such group gets a note, once.
pub(crate) fn each_member_order<H: Harness>(
    ctx: &RankCtx<'_, H>,
    key: u64,
    mut steps: impl FnMut(&On<'_, H>) -> Result<(), Refused>,
) -> Flow {
    for (index, (name, order)) in (0u64..).zip(member_orders(ctx.size())) {
        let Some(group) = ctx.ordered_group(key * 16 + index, &order)? else {
            if ctx.rank() == 0 {
                ctx.note(
                    "member orders: the harness builds no group in another member order \
                     (Harness::ordered_group), so the steps on reversed and interleaved groups were skipped",
                );
            }
            return Ok(());
        };
        let member = order
            .iter()
            .position(|&r| r == ctx.rank())
            .unwrap_or(ctx.rank());
        let on = On {
            group: (*group).borrow(),
            member,
            order: format!("a group in {name} order {order:?}"),
        };
        match steps(&on) {
            Ok(()) => {}
            Err(Refused::Stop(stop)) => return Err(stop),
            // Only the f32 steps run on ordered groups: nothing is refused.
            Err(Refused::Dtype(why)) => {
                return Err(Stop::Found(crate::check::Finding::Violation(why)))
            }
        }
    }
    Ok(())
}
