//! BRD: root-to-group publication (`BroadcastBackend::broadcast`).
//!
//! - BRD-1: every member's output equals the root's input bit for bit,
//!   whatever the non-roots' placeholders hold (NaN, ±Inf, garbage), with
//!   `root` indexing member order: every member is the root in turn.
//! - BRD-2: an out-of-range root is an error, at submission or from the
//!   completion within a bounded wait; never a hang, never a silent result.

use eredu_runtime::backend::BroadcastBackend;

use super::choreography::run;
use super::common::{handle_and_output, must_complete, needs, poll, violations, Polled};
use super::exact::{differs, value_difference, Differs};
use super::scenario::{elements, Scenario, Semantics};
use super::seeds::mix_two as mix;
use super::values::{each_dtype, Refused};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::dtype::Dtype;
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::Subject;
use crate::operation::Operation;
use crate::world::RankCtx;

fn broadcast(subject: Subject) -> bool {
    subject == Subject::Operation(Operation::Broadcast)
}

pub(crate) fn rows<H: Harness>() -> Vec<Row<H>>
where
    Backend<H>: BroadcastBackend,
{
    vec![
        Row {
            id: "BRD-1",
            applies: broadcast,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[1, 2, 3, 4, 8],
                script: every_member_gets_the_roots_input::<H>,
            },
        },
        Row {
            id: "BRD-2",
            applies: broadcast,
            requires: needs::NOTHING,
            timing: false,
            pass_needs: needs::NOTHING,
            body: Body::Sizes {
                sizes: &[1, 2, 3, 4],
                script: out_of_range_root_is_an_error::<H>,
            },
        },
    ]
}

/// Shapes a broadcast carries, empty and one-element ones included.
const SHAPES: &[&[usize]] = &[&[4], &[1], &[2, 3], &[0], &[3, 1, 2], &[2, 0, 3], &[5]];

/// BRD-1's steps in `dtype` on a world of `size`: every member as the root
/// in turn (seeded shapes), an empty and a one-element tensor from seeded
/// roots, then 1-D tensors of the sweep's element counts from the first,
/// a middle and the last member in turn. The root's input is movement data
/// with a negative zero at index 1; the others' placeholders are garbage.
pub(crate) fn scenarios(seed: u64, size: usize, dtype: Dtype, sweep: &[usize]) -> Vec<Scenario> {
    let start = mix(seed, size as u64, 1) as usize % SHAPES.len();
    let mut rounds: Vec<(usize, Vec<usize>)> = (0..size)
        .map(|root| (root, SHAPES[(start + root) % SHAPES.len()].to_vec()))
        .collect();
    for (k, shape) in [vec![0], vec![1]].into_iter().enumerate() {
        rounds.push((
            (mix(seed, size as u64, 2 + k as u64) % size as u64) as usize,
            shape,
        ));
    }
    let roots = [0, size / 2, size.saturating_sub(1)];
    rounds.extend(
        sweep
            .iter()
            .zip(roots.iter().cycle())
            .map(|(&count, &root)| (root, vec![count])),
    );
    rounds
        .into_iter()
        .zip(0u64..)
        .map(|((root, shape), round)| {
            let len = shape.iter().product();
            let inputs = (0..size)
                .map(|member| {
                    if member == root {
                        let mut values = elements(dtype, seed, round, root, len);
                        if let Some(one) = values.get_mut(1) {
                            *one = -0.0;
                        }
                        values
                    } else {
                        garbage(seed, member, len)
                    }
                })
                .collect();
            Scenario {
                label: format!("shape {shape:?} from root {root}"),
                common: Default::default(),
                dtype,
                semantics: Semantics::Broadcast { root },
                inputs,
                shapes: vec![shape; size],
            }
        })
        .collect()
}

/// What a non-root's placeholder holds: NaN (two payloads), ±Inf, huge and
/// seeded garbage bits, rotated by rank (narrowed to the step's dtype).
fn garbage(seed: u64, rank: usize, len: usize) -> Vec<f32> {
    let junk = f32::from_bits(mix(seed, rank as u64, 4) as u32);
    let pool = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0xffc0_1234),
        3.0e38,
        junk,
    ];
    (0..len).map(|i| pool[(i + rank) % pool.len()]).collect()
}

/// BRD-1: in every dtype, with every member as the root in turn and on the
/// size sweep, every member's output has the root's shape and exactly the
/// root's values, although non-roots pass placeholders full of NaN, ±Inf
/// and garbage.
fn every_member_gets_the_roots_input<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: BroadcastBackend,
{
    let mut wrong = Vec::new();
    run(ctx, || {
        each_dtype(ctx, |dtype, sweep| {
            for (index, scenario) in
                super::values::shared_scenarios(ctx, "brd", (dtype, sweep), scenarios)
                    .iter()
                    .enumerate()
            {
                let rank = ctx.rank();
                let input = ctx.tensor(&scenario.inputs[rank], &scenario.shapes[rank])?;
                let output = match broadcast_once(ctx, scenario, input) {
                    Err(Finding::Violation(why)) if index == 0 && dtype != Dtype::F32 => {
                        return Err(Refused::Dtype(why))
                    }
                    other => other?,
                };
                if let Err(message) = matches_root(ctx, scenario, &output)? {
                    wrong.push(message);
                }
            }
            Ok(())
        })
    })?;
    violations(wrong)
}

/// What a broadcast step is, for messages.
fn describe<H: Harness>(ctx: &RankCtx<'_, H>, scenario: &Scenario) -> String {
    format!(
        "broadcast in {} of {} in a group of {}, rank {}",
        scenario.dtype,
        scenario.label,
        ctx.size(),
        ctx.rank()
    )
}

/// Submits one broadcast and waits (bounded) for it; returns the output.
fn broadcast_once<H: Harness>(
    ctx: &RankCtx<'_, H>,
    scenario: &Scenario,
    input: Tensor<H>,
) -> Result<Tensor<H>, Finding>
where
    Backend<H>: BroadcastBackend,
{
    let what = describe(ctx, scenario);
    let Semantics::Broadcast { root } = scenario.semantics else {
        return Err(Finding::Harness(format!("{what}: not a broadcast step")));
    };
    let (completion, output) = Backend::<H>::broadcast(input, root, ctx.group(), ctx.executor())
        .map(handle_and_output::<H, _>)
        .map_err(|e| Finding::Violation(format!("{what}: submission failed: {e}")))?;
    must_complete(&completion, || format!("{what}: did not complete"))?;
    Ok(output)
}

/// `Ok(Err(message))` when the output differs from the root's input.
fn matches_root<H: Harness>(
    ctx: &RankCtx<'_, H>,
    scenario: &Scenario,
    output: &Tensor<H>,
) -> Result<Result<(), String>, Finding> {
    let what = describe(ctx, scenario);
    let expected = scenario.expected(ctx.rank());
    Ok(
        match differs(ctx, crate::Operation::Broadcast, output, &expected)? {
            None => Ok(()),
            Some(Differs::Shape(shape)) => Err(format!(
                "{what}: output shape {shape:?}, expected the root's {:?}",
                expected.shape
            )),
            Some(Differs::Values(got, mismatch)) => Err(format!(
                "{what}: should be the root's input bit for bit: {}",
                value_difference(&got, &expected, mismatch)
            )),
        },
    )
}

/// BRD-2: every member names the same out-of-range root (the group size, a
/// little beyond, `usize::MAX`); each broadcast must be refused at submission
/// or fail from its completion within a bounded wait.
fn out_of_range_root_is_an_error<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: BroadcastBackend,
{
    let n = ctx.size();
    let beyond = n + 1 + (mix(ctx.seed(), n as u64, 5) % 3) as usize;
    for root in [n, beyond, usize::MAX] {
        let what = format!(
            "broadcast with root {root} in a group of size {n}, rank {}",
            ctx.rank()
        );
        let input = ctx.tensor(&[1.0, 2.0], &[2])?;
        let Ok(submission) = Backend::<H>::broadcast(input, root, ctx.group(), ctx.executor())
        else {
            continue;
        };
        let (completion, output) = handle_and_output::<H, _>(submission);
        match poll(&completion, slack::RELEASE) {
            Polled::Error(_) => {}
            Polled::Complete => {
                let output = ctx.read(&output).map_or_else(|e| format!("unreadable: {e:?}"), |v| format!("{v:?}"));
                return Err(Finding::Violation(format!(
                    "{what}: completed with output {output}, expected an error (at submission or from the completion)"
                )));
            }
            Polled::Pending => {
                return Err(Finding::Violation(format!(
                    "{what}: accepted, then still pending after {:?} with every member submitted: a hang, expected an error",
                    slack::RELEASE
                )))
            }
        }
    }
    Ok(())
}
