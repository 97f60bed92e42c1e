//! BRD: root-to-group publication (`BroadcastBackend::broadcast`).
//!
//! - BRD-1: every member's output equals the root's input bit for bit,
//!   whatever the non-roots' placeholders hold (NaN, ±Inf, garbage), with
//!   `root` indexing member order: every member is the root in turn.
//! - BRD-2: an out-of-range root is an error, at submission or from the
//!   completion within a bounded wait; never a hang, never a silent result.

use eredu_runtime::backend::BroadcastBackend;

use super::exact::{differs, mix_two as mix, Differs};
use super::{handle_and_output, must_complete, needs, poll, violations, Polled};
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
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

/// One broadcast of a BRD-1 world.
struct Round {
    root: usize,
    shape: Vec<usize>,
}

/// Every member as the root in turn (seeded shapes), then an empty and a
/// one-element tensor from seeded roots.
fn rounds(seed: u64, n: usize) -> Vec<Round> {
    let start = mix(seed, n as u64, 1) as usize % SHAPES.len();
    let mut rounds: Vec<Round> = (0..n)
        .map(|root| Round {
            root,
            shape: SHAPES[(start + root) % SHAPES.len()].to_vec(),
        })
        .collect();
    for (k, shape) in [vec![0], vec![1]].into_iter().enumerate() {
        let root = (mix(seed, n as u64, 2 + k as u64) % n as u64) as usize;
        rounds.push(Round { root, shape });
    }
    rounds
}

/// The root's exact input: small integers (one negative zero), distinct per round.
fn root_values(seed: u64, round: usize, len: usize) -> Vec<f32> {
    let base = mix(seed, round as u64, 3) % 1000;
    (0..len)
        .map(|i| {
            if i == 1 {
                -0.0
            } else {
                (base + i as u64) as f32 - 500.0
            }
        })
        .collect()
}

/// What a non-root's placeholder holds: NaN (two payloads), ±Inf, huge and
/// seeded garbage bits, rotated by rank.
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

/// BRD-1: with every member as the root in turn, every member's output has
/// the root's shape and exactly the root's values, although non-roots pass
/// placeholders full of NaN, ±Inf and garbage.
fn every_member_gets_the_roots_input<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: BroadcastBackend,
{
    let mut wrong = Vec::new();
    for (index, round) in rounds(ctx.seed(), ctx.size()).iter().enumerate() {
        let len = round.shape.iter().product();
        let expected = root_values(ctx.seed(), index, len);
        let values = if ctx.rank() == round.root {
            expected.clone()
        } else {
            garbage(ctx.seed(), ctx.rank(), len)
        };
        let output = broadcast_once(ctx, round, ctx.tensor(&values, &round.shape)?)?;
        if let Err(message) = matches_root(ctx, round, &output, &expected)? {
            wrong.push(message);
        }
    }
    violations(wrong)
}

/// Submits one broadcast and waits (bounded) for it; returns the output.
fn broadcast_once<H: Harness>(
    ctx: &RankCtx<'_, H>,
    round: &Round,
    input: Tensor<H>,
) -> Result<Tensor<H>, Finding>
where
    Backend<H>: BroadcastBackend,
{
    let what = format!(
        "broadcast from root {} of shape {:?} in a group of {}, rank {}",
        round.root,
        round.shape,
        ctx.size(),
        ctx.rank()
    );
    let (completion, output) =
        Backend::<H>::broadcast(input, round.root, ctx.group(), ctx.executor())
            .map(handle_and_output::<H, _>)
            .map_err(|e| Finding::Violation(format!("{what}: submission failed: {e}")))?;
    must_complete(&completion, || format!("{what}: did not complete"))?;
    Ok(output)
}

/// `Ok(Err(message))` when the output differs from the root's input.
fn matches_root<H: Harness>(
    ctx: &RankCtx<'_, H>,
    round: &Round,
    output: &Tensor<H>,
    expected: &[f32],
) -> Result<Result<(), String>, Finding> {
    let what = format!(
        "broadcast from root {} in a group of {}, rank {}",
        round.root,
        ctx.size(),
        ctx.rank()
    );
    Ok(
        match differs(
            ctx,
            crate::Operation::Broadcast,
            output,
            &round.shape,
            expected,
        )? {
            None => Ok(()),
            Some(Differs::Shape(shape)) => Err(format!(
                "{what}: output shape {shape:?}, expected the root's {:?}",
                round.shape
            )),
            Some(Differs::Values(got)) => Err(format!(
                "{what}: output {got:?}, expected the root's input {expected:?} bit for bit"
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
