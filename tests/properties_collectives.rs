//! Property tests of the collective families (SUM-1, GAT-1, GAT-2, A2A-1)
//! on the CPU reference backend: random worlds of 1 to 8 ranks, shapes with
//! empty and one-element extents, axes, uneven and zero counts, and which
//! member joins last (it submits only once every other member has).
//!
//! Every instance is one world run by `commcheck::world::run_script`; its
//! expected outputs come from an independent host reference. Inputs are
//! small integers, so sums are exact in `f32` and outputs are compared bit for
//! bit. A failure shrinks and prints the instance.

use std::sync::Arc;
use std::time::Duration;

use commcheck::{Check, Finding, RankCtx};
use commcheck_cpu::{CpuBackend, CpuCompletion, CpuTensor};
use commcheck_reference::cpu::CpuHarness;
use eredu_core::{Completion, Submission};
use eredu_runtime::backend::{
    EvenGatherBackend, SumReductionBackend, UnevenGatherBackend, VariableAllToAllBackend,
};
use eredu_runtime::CommunicationPeerCounts;
use proptest::prelude::*;

type Ctx<'w> = RankCtx<'w, CpuHarness>;

/// Watchdog for one world.
const LIMIT: Duration = Duration::from_secs(10);
/// Bound on one wait for a peer's signal: only against a signal that is
/// never raised, since the world's watchdog (progress-based, so load alone
/// never trips it) ends a real hang long before.
const WAIT: Duration = Duration::from_secs(120);
/// Largest world.
const MAX_RANKS: usize = 8;

fn violation(message: String) -> Finding {
    Finding::Violation(message)
}

/// Member `rank`'s input value at flat `index`: distinct across members and
/// within a member, and small enough that any sum is exact in `f32`.
fn value(rank: usize, index: usize) -> f32 {
    let magnitude = ((rank + 1) * 1000 + index % 1000) as f32;
    if rank % 2 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

fn values(rank: usize, len: usize) -> Vec<f32> {
    (0..len).map(|index| value(rank, index)).collect()
}

/// (elements before `axis`, extent, elements after).
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

fn with_extent(shape: &[usize], axis: usize, extent: usize) -> Vec<usize> {
    let mut out = shape.to_vec();
    out[axis] = extent;
    out
}

/// Host reference: blocks (values, extent along `axis`) joined along `axis`.
fn concat(shape: &[usize], axis: usize, blocks: &[(Vec<f32>, usize)]) -> Vec<f32> {
    let (outer, _, inner) = around(shape, axis);
    let mut out = Vec::new();
    for row in 0..outer {
        for (data, extent) in blocks {
            out.extend_from_slice(&data[row * extent * inner..(row + 1) * extent * inner]);
        }
    }
    out
}

/// Host reference: positions `start..start + len` along `axis`.
fn slice(data: &[f32], shape: &[usize], axis: usize, start: usize, len: usize) -> Vec<f32> {
    let (outer, extent, inner) = around(shape, axis);
    let mut out = Vec::new();
    for row in 0..outer {
        let from = (row * extent + start) * inner;
        out.extend_from_slice(&data[from..from + len * inner]);
    }
    out
}

/// Submits in turn: `late` only after every other member has submitted.
fn in_turn<T>(ctx: &Ctx<'_>, late: usize, submit: impl FnOnce() -> T) -> Result<T, Finding> {
    if ctx.rank() != late {
        let submitted = submit();
        ctx.signal(&format!("joined/{}", ctx.rank()));
        return Ok(submitted);
    }
    for rank in (0..ctx.size()).filter(|r| *r != late) {
        if !ctx.await_signal(&format!("joined/{rank}"), WAIT) {
            return Err(Finding::Harness(format!("member {rank} never submitted")));
        }
    }
    Ok(submit())
}

/// Waits with the backend's own blocking `wait()`: a hang is the run's
/// watchdog's (progress-based, so load alone never trips it), never a bound
/// of this test's own; `late` is named in the error.
fn wait(completion: &CpuCompletion, what: &str, late: usize) -> Check {
    completion.wait().map_err(|error| {
        violation(format!(
            "{what}: failed after member {late} joined last: {error}"
        ))
    })
}

/// Submits in turn (`late` last) and waits (bounded) for success; the output.
fn output_in_turn<E: std::fmt::Display>(
    ctx: &Ctx<'_>,
    late: usize,
    operation: &str,
    submit: impl FnOnce() -> Result<Submission<CpuTensor, CpuCompletion>, E>,
) -> Result<CpuTensor, Finding> {
    let submission = in_turn(ctx, late, submit)?
        .map_err(|e| violation(format!("{operation} submission failed: {e}")))?;
    wait(&submission.completion, operation, late)?;
    Ok(submission.output)
}

/// Compares an output's shape and bits with the reference.
fn compare(
    ctx: &Ctx<'_>,
    what: &str,
    output: &CpuTensor,
    shape: &[usize],
    expected: &[f32],
) -> Check {
    let dims: Vec<usize> = output.dims().iter().map(|&d| d.max(0) as usize).collect();
    if dims != shape {
        return Err(violation(format!(
            "{what}: output shape {dims:?}, expected {shape:?}"
        )));
    }
    let got = ctx.read(output)?;
    let same = got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    if same {
        Ok(())
    } else {
        Err(violation(format!(
            "{what}: output {got:?}, expected {expected:?}"
        )))
    }
}

/// Runs one instance's script on a fresh world.
fn world(
    ranks: usize,
    script: impl Fn(&Ctx<'_>) -> Check + Send + Sync + 'static,
) -> Result<(), String> {
    commcheck::world::run_script(Arc::new(CpuHarness::new()), ranks, 0, LIMIT, script)
}

#[derive(Debug, Clone)]
struct Sum {
    ranks: usize,
    shape: Vec<usize>,
    late: usize,
}

fn sum_instances() -> impl Strategy<Value = Sum> {
    (
        1..=MAX_RANKS,
        prop::collection::vec(0usize..4, 0..=3),
        0..MAX_RANKS,
    )
        .prop_map(|(ranks, shape, late)| Sum {
            ranks,
            shape,
            late: late % ranks,
        })
}

fn sum_script(instance: Sum) -> impl Fn(&Ctx<'_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let Sum {
            ranks,
            ref shape,
            late,
        } = instance;
        let len = shape.iter().product();
        let input = ctx.tensor(&values(ctx.rank(), len), shape)?;
        let output = output_in_turn(ctx, late, "all_reduce_sum", || {
            CpuBackend::all_reduce_sum(input, ctx.group(), ctx.executor())
        })?;
        let expected: Vec<f32> = (0..len)
            .map(|i| (0..ranks).map(|r| value(r, i)).sum())
            .collect();
        compare(ctx, "all_reduce_sum", &output, shape, &expected)
    }
}

#[derive(Debug, Clone)]
struct Gather {
    ranks: usize,
    /// Every member's shape off the axis; along it, `counts[member]`.
    shape: Vec<usize>,
    axis: usize,
    counts: Vec<usize>,
    late: usize,
}

fn gather_instances(even: bool) -> impl Strategy<Value = Gather> {
    (
        1..=MAX_RANKS,
        prop::collection::vec(0usize..4, 1..=3),
        0usize..3,
        prop::collection::vec(0usize..4, MAX_RANKS),
        0..MAX_RANKS,
    )
        .prop_map(move |(ranks, shape, axis, counts, late)| {
            let axis = axis % shape.len();
            let counts = if even {
                vec![shape[axis]; ranks]
            } else {
                counts[..ranks].to_vec()
            };
            Gather {
                ranks,
                shape,
                axis,
                counts,
                late: late % ranks,
            }
        })
}

fn gather_script(
    instance: Gather,
    even: bool,
) -> impl Fn(&Ctx<'_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let Gather {
            ranks,
            ref shape,
            axis,
            ref counts,
            late,
        } = instance;
        let shape_of = |member: usize| with_extent(shape, axis, counts[member]);
        let mine = shape_of(ctx.rank());
        let input = ctx.tensor(&values(ctx.rank(), mine.iter().product()), &mine)?;
        let operation = if even {
            "all_gather_even"
        } else {
            "all_gather_uneven"
        };
        let output = output_in_turn(ctx, late, operation, || {
            if even {
                CpuBackend::all_gather_even(input, axis, ctx.group(), ctx.executor())
            } else {
                CpuBackend::all_gather_uneven(input, counts, axis, ctx.group(), ctx.executor())
            }
        })?;
        let blocks: Vec<(Vec<f32>, usize)> = (0..ranks)
            .map(|member| {
                (
                    values(member, shape_of(member).iter().product()),
                    counts[member],
                )
            })
            .collect();
        let total = counts.iter().sum();
        compare(
            ctx,
            operation,
            &output,
            &with_extent(shape, axis, total),
            &concat(shape, axis, &blocks),
        )
    }
}

#[derive(Debug, Clone)]
struct AllToAll {
    ranks: usize,
    /// Every member's shape off the axis; along it, its total send count.
    shape: Vec<usize>,
    axis: usize,
    /// `matrix[i][j]`: positions member i sends to member j.
    matrix: Vec<Vec<usize>>,
    late: usize,
}

fn all_to_all_instances() -> impl Strategy<Value = AllToAll> {
    (
        1..=MAX_RANKS,
        prop::collection::vec(0usize..3, 1..=3),
        0usize..3,
        prop::collection::vec(prop::collection::vec(0usize..3, MAX_RANKS), MAX_RANKS),
        0..MAX_RANKS,
        prop::option::of(0..MAX_RANKS),
    )
        .prop_map(|(ranks, shape, axis, matrix, late, zero)| {
            let axis = axis % shape.len();
            let zero = zero.map(|z| z % ranks);
            let matrix = (0..ranks)
                .map(|i| {
                    (0..ranks)
                        .map(|j| {
                            if zero == Some(i) || zero == Some(j) {
                                0
                            } else {
                                matrix[i][j]
                            }
                        })
                        .collect()
                })
                .collect();
            AllToAll {
                ranks,
                shape,
                axis,
                matrix,
                late: late % ranks,
            }
        })
}

fn all_to_all_script(instance: AllToAll) -> impl Fn(&Ctx<'_>) -> Check + Send + Sync + 'static {
    move |ctx| {
        let AllToAll {
            ranks,
            ref shape,
            axis,
            ref matrix,
            late,
        } = instance;
        let me = ctx.rank();
        let shape_of = |member: usize| with_extent(shape, axis, matrix[member].iter().sum());
        let input_of = |member: usize| values(member, shape_of(member).iter().product());
        let receive: Vec<usize> = matrix.iter().map(|row| row[me]).collect();
        let counts = CommunicationPeerCounts::new(matrix[me].clone(), receive.clone(), ranks)
            .map_err(|e| Finding::Harness(e.to_string()))?;
        let input = ctx.tensor(&input_of(me), &shape_of(me))?;
        let output = output_in_turn(ctx, late, "variable_all_to_all", || {
            CpuBackend::variable_all_to_all(input, &counts, axis, ctx.group(), ctx.executor())
        })?;
        let blocks: Vec<(Vec<f32>, usize)> = (0..ranks)
            .map(|peer| {
                let offset = matrix[peer][..me].iter().sum();
                let len = matrix[peer][me];
                (
                    slice(&input_of(peer), &shape_of(peer), axis, offset, len),
                    len,
                )
            })
            .collect();
        let total = receive.iter().sum();
        compare(
            ctx,
            "variable_all_to_all",
            &output,
            &with_extent(shape, axis, total),
            &concat(shape, axis, &blocks),
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// SUM-1: the elementwise sum over members, same shape (identity on one).
    #[test]
    fn all_reduce_sum_is_the_elementwise_sum(instance in sum_instances()) {
        let outcome = world(instance.ranks, sum_script(instance.clone()));
        prop_assert!(outcome.is_ok(), "{instance:?}: {outcome:?}");
    }

    /// GAT-1: members' inputs concatenated in member order along the axis.
    #[test]
    fn all_gather_even_concatenates_in_member_order(instance in gather_instances(true)) {
        let outcome = world(instance.ranks, gather_script(instance.clone(), true));
        prop_assert!(outcome.is_ok(), "{instance:?}: {outcome:?}");
    }

    /// GAT-2: counts are extents along the axis; zero counts included.
    #[test]
    fn all_gather_uneven_counts_are_axis_extents(instance in gather_instances(false)) {
        let outcome = world(instance.ranks, gather_script(instance.clone(), false));
        prop_assert!(outcome.is_ok(), "{instance:?}: {outcome:?}");
    }

    /// A2A-1: send[p] slices go to peer p; outputs in peer order; zero counts
    /// (including a member that sends and receives nothing) are valid.
    #[test]
    fn variable_all_to_all_routes_every_slice(instance in all_to_all_instances()) {
        let outcome = world(instance.ranks, all_to_all_script(instance.clone()));
        prop_assert!(outcome.is_ok(), "{instance:?}: {outcome:?}");
    }
}
