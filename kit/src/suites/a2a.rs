//! A2A: variable all-to-all (`VariableAllToAllBackend::variable_all_to_all`).
//!
//! A2A-1: with `CommunicationPeerCounts::new(send, receive, n)`, the
//! `send[p]` consecutive slices of a member's input along `axis` go to peer
//! p, and its output is the `receive[p]` slices from each peer p, in peer
//! order (counts are extents along the axis: every input has several
//! elements per position). Zero counts are valid, and every member still
//! takes part: a member whose counts are all zero stays pending until the
//! last member has joined (checked after [`slack::SETTLE`], hence a timing
//! row). Counts for another group size are an error on every rank.
//!
//! Inputs are exact (see [`super::seeds`]); each step picks, from the
//! case's seed, the counts and the member that joins last; every wait is
//! bounded (see [`super::choreography`]).

use eredu_core::Completion;
use eredu_runtime::backend::VariableAllToAllBackend;
use eredu_runtime::CommunicationPeerCounts;

use super::choreography::{expect_error, in_turn, in_turn_then, run, Flow};
use super::common::{needs, settle};
use super::scenario::{elements, with_extent, Scenario, Semantics};
use super::seeds::{late_member, pick};
use super::values::{self, each_dtype, each_member_order, On, Refused};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::world::RankCtx;

/// Seed path component for the member whose counts are all zero.
const ZERO: u64 = 0x2e60;

/// Which members have all-zero counts in a step.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Zeros {
    /// Random counts from 0 to 2 (zeros included).
    Random,
    /// One member (never the late one) sends and receives nothing.
    One,
    /// Every count is zero.
    All,
}

/// The steps: each member's input is `base` with its total send count along
/// `axis` (the placeholder 0 there).
const STEPS: &[(&[usize], usize, Zeros)] = &[
    (&[0, 2], 0, Zeros::Random),
    (&[2, 0, 3], 1, Zeros::Random),
    (&[3, 0], 1, Zeros::Random),
    (&[0, 2], 0, Zeros::One),
    (&[2, 0, 3], 1, Zeros::All),
];

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: VariableAllToAllBackend,
{
    vec![Row {
        id: "A2A-1",
        applies: |s| s == Subject::Operation(Operation::VariableAllToAll),
        requires: needs::NOTHING,
        timing: true,
        pass_needs: needs::NOTHING,
        body: Body::Sizes {
            sizes: super::scenario::VALUE_WORLDS,
            script: all_to_all_routes_every_slice::<H>,
        },
    }]
}

/// One step's plan, identical on every rank (it comes from the seed).
struct Plan<'a> {
    step: u64,
    base: &'a [usize],
    axis: usize,
    /// `matrix[i][j]`: how many positions member i sends to member j.
    matrix: Vec<Vec<usize>>,
    late: usize,
    /// The member with all-zero counts that must wait for the late one.
    zero: Option<usize>,
}

impl Plan<'_> {
    fn sends(&self, member: usize) -> Vec<usize> {
        self.matrix.get(member).cloned().unwrap_or_default()
    }

    fn receives(&self, member: usize) -> Vec<usize> {
        self.matrix
            .iter()
            .map(|row| row.get(member).copied().unwrap_or(0))
            .collect()
    }

    fn shape(&self, member: usize) -> Vec<usize> {
        with_extent(self.base, self.axis, self.sends(member).iter().sum())
    }

    /// The step in `dtype`: every member's input (movement data of the
    /// plan's step) and what each is owed.
    fn scenario(&self, seed: u64, dtype: Dtype) -> Scenario {
        let size = self.matrix.len();
        let shapes: Vec<Vec<usize>> = (0..size).map(|member| self.shape(member)).collect();
        Scenario {
            common: Default::default(),
            label: format!(
                "axis {} of shape {:?} with count matrix {:?}",
                self.axis, self.base, self.matrix
            ),
            dtype,
            semantics: Semantics::AllToAll {
                axis: self.axis,
                matrix: self.matrix.clone(),
            },
            inputs: shapes
                .iter()
                .enumerate()
                .map(|(member, shape)| {
                    elements(dtype, seed, self.step, member, shape.iter().product())
                })
                .collect(),
            shapes,
        }
    }
}

/// A2A-1's steps in `dtype` on a world of `size`: [`STEPS`], then 1-D
/// tensors of the sweep's element counts (each member sending about that
/// many, split between its peers).
pub(crate) fn scenarios(seed: u64, size: usize, dtype: Dtype, sweep: &[usize]) -> Vec<Scenario> {
    let table = (0u64..)
        .zip(STEPS)
        .map(|(step, &row)| plan(seed, step, size, row).scenario(seed, dtype));
    let swept = (STEPS.len() as u64..).zip(sweep).map(|(step, &count)| {
        let matrix = (0..size)
            .map(|from| (0..size).map(|to| count / size + (from + to) % 2).collect())
            .collect();
        Plan {
            step,
            base: &[0],
            axis: 0,
            matrix,
            late: 0,
            zero: None,
        }
        .scenario(seed, dtype)
    });
    table.chain(swept).collect()
}

fn plan(
    seed: u64,
    step: u64,
    size: usize,
    (base, axis, zeros): (&'static [usize], usize, Zeros),
) -> Plan<'static> {
    let late = late_member(seed, step, size);
    let zero = match zeros {
        Zeros::One if size > 1 => Some((late + 1 + pick(seed, &[step, ZERO], size - 1)) % size),
        _ => None,
    };
    let matrix = (0..size)
        .map(|from| {
            (0..size)
                .map(|to| match zeros {
                    Zeros::All => 0,
                    _ if zero == Some(from) || zero == Some(to) => 0,
                    _ => pick(seed, &[step, from as u64, to as u64], 3),
                })
                .collect()
        })
        .collect();
    Plan {
        step,
        base,
        axis,
        matrix,
        late,
        zero: if zeros == Zeros::All { None } else { zero },
    }
}

/// A2A-1: for every dtype, exact exchanges on every step, the zero members
/// staying pending until the late member joins, and the size sweep; then
/// counts for another group size fail.
fn all_to_all_routes_every_slice<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: VariableAllToAllBackend,
{
    let mut tag = 0u64;
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            let scenarios = values::shared_scenarios(ctx, "a2a", (dtype, sweep), scenarios);
            for (index, scenario) in scenarios.iter().enumerate() {
                let first = index == 0;
                if let Some(&(base, axis, zeros)) = STEPS.get(index) {
                    let plan = plan(ctx.seed(), index as u64, ctx.size(), (base, axis, zeros));
                    exchange_once(ctx, (tag, first), &plan, scenario, zeros == Zeros::All)?;
                } else {
                    exchange_step(ctx, (tag, first), scenario, &On::world(ctx))?;
                }
                tag += 1;
            }
            Ok(())
        })?;
        let table = values::shared_scenarios(ctx, "a2a", (Dtype::F32, &[]), scenarios);
        each_member_order(ctx, 4, |on| {
            for scenario in table.iter() {
                exchange_step(ctx, (tag, false), scenario, on)?;
                tag += 1;
            }
            Ok(())
        })?;
        counts_for_another_group_fail(ctx, 1000)
    })
}

/// One A2A-1 step on `on`'s group, its members joining as the step's
/// arrival says.
fn exchange_step<H: Harness>(
    ctx: &RankCtx<'_, H>,
    (tag, first): (u64, bool),
    scenario: &Scenario,
    on: &On<'_, H>,
) -> Result<(), Refused>
where
    Backend<H>: VariableAllToAllBackend,
{
    let Semantics::AllToAll { axis, matrix } = &scenario.semantics else {
        return Ok(());
    };
    let (member, axis) = (on.member, *axis);
    let receive = matrix.iter().map(|row| row[member]).collect();
    let counts = peer_counts(matrix[member].clone(), receive, ctx.size())?;
    values::step(
        ctx,
        ("a2a-1", tag, first),
        crate::Operation::VariableAllToAll,
        (scenario, on),
        "should be the slices sent to this member, in peer order",
        |input, group| {
            Backend::<H>::variable_all_to_all(input, &counts, axis, group, ctx.executor())
        },
    )
}

/// Peer counts, or the harness's error (the kit built them wrong).
fn peer_counts(
    send: Vec<usize>,
    receive: Vec<usize>,
    size: usize,
) -> Result<CommunicationPeerCounts, Finding> {
    CommunicationPeerCounts::new(send, receive, size)
        .map_err(|e| Finding::Harness(format!("peer counts: {e}")))
}

/// Whether this rank must still be pending when the late member has not
/// joined: the step's zero member, or (in an all-zero step) every member.
fn must_wait(plan: &Plan<'_>, rank: usize, all_zero: bool) -> bool {
    rank != plan.late && (plan.zero == Some(rank) || all_zero)
}

/// One step of [`STEPS`]: its late member joins last, and its zero members
/// must still be pending until then.
fn exchange_once<H: Harness>(
    ctx: &RankCtx<'_, H>,
    (tag, first): (u64, bool),
    plan: &Plan<'_>,
    scenario: &Scenario,
    all_zero: bool,
) -> Result<(), Refused>
where
    Backend<H>: VariableAllToAllBackend,
{
    let (size, rank) = (ctx.size(), ctx.rank());
    let (send, receive) = (plan.sends(rank), plan.receives(rank));
    let (axis, late) = (plan.axis, plan.late);
    let counts = peer_counts(send.clone(), receive.clone(), size)?;
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let input = ctx.tensor(&scenario.inputs[rank], &scenario.shapes[rank])?;
    let what = || {
        format!(
            "variable_all_to_all in {} on axis {axis} with send {send:?} and receive {receive:?}, rank \
             {rank} of {size} (member {late} joined last; count matrix {:?})",
            scenario.dtype, plan.matrix
        )
    };
    let submitted = in_turn_then(
        ctx,
        &format!("a2a-1/{tag}"),
        late,
        || {
            Backend::<H>::variable_all_to_all(
                input.clone(),
                &counts,
                axis,
                ctx.group(),
                ctx.executor(),
            )
        },
        |submitted| match submitted {
            Ok(submission) if must_wait(plan, rank, all_zero) => {
                still_pending::<H>(&submission.completion, &what)
            }
            _ => Ok(()),
        },
    )?;
    values::judged(
        ctx,
        (crate::Operation::VariableAllToAll, first),
        (scenario, rank),
        (
            &what,
            "should be the slices sent to this member, in peer order",
        ),
        submitted,
    )
}

/// A member with all-zero counts still takes part: before the late member
/// joined, its completion must not report success. Called right after the
/// submitting call returned; `is_complete` runs under the block guard
/// (EXC-1), and the message quotes the measured time.
fn still_pending<H: Harness>(
    completion: &crate::harness::CommCompletion<H>,
    what: &dyn Fn() -> String,
) -> Flow {
    let returned = std::time::Instant::now();
    settle();
    let seen = crate::world::guarded("is_complete()", "EXC-1", slack::BLOCKED, || {
        completion.is_complete()
    });
    let after = returned.elapsed();
    match seen {
        Ok(false) => Ok(()),
        Ok(true) => Err({
            // Cross-checked with the observer: an early report is EXC-2's.
            crate::world::note_completion_report::<H>(
                crate::harness::CompletionRef::Communication(completion),
            );
            Finding::Violation(format!(
                "{}: this member's counts are all zero, yet is_complete() reported it complete {after:?} \
                 after the submitting call returned, before the late member had joined; every member must \
                 still take part",
                what()
            ))
        }
        .into()),
        Err(error) => Err(Finding::Violation(format!(
            "{}: this member's counts are all zero, and it failed before the late member had \
             joined: {error}",
            what()
        ))
        .into()),
    }
}

/// Bad input: counts built for a group one larger than the real one (every
/// count zero, so each input matches its own counts). Every rank must see
/// an error.
fn counts_for_another_group_fail<H: Harness>(ctx: &RankCtx<'_, H>, step: u64) -> Flow
where
    Backend<H>: VariableAllToAllBackend,
{
    let (seed, size, rank) = (ctx.seed(), ctx.size(), ctx.rank());
    let late = late_member(seed, step, size);
    let counts = CommunicationPeerCounts::new(vec![0; size + 1], vec![0; size + 1], size + 1)
        .map_err(|e| Finding::Harness(format!("peer counts: {e}")))?;
    // The caller keeps a handle: retention is RET-3's subject, not this one's.
    let input = ctx.tensor(&[], &[0, 2])?;
    let submitted = in_turn(ctx, &format!("a2a-1/{step}"), late, || {
        Backend::<H>::variable_all_to_all(input.clone(), &counts, 0, ctx.group(), ctx.executor())
    })?;
    expect_error(
        ctx,
        &|| {
            format!(
                "variable_all_to_all with counts for {} peers in a group of {size} (rank {rank}, \
                 member {late} joined last)",
                size + 1
            )
        },
        submitted,
    )
}
