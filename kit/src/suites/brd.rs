//! BRD: root-to-group publication (`BroadcastBackend::broadcast`).
//!
//! - BRD-1: every member's output equals the root's input bit for bit,
//!   whatever the non-roots' placeholders hold (NaN, ±Inf, garbage), with
//!   `root` indexing member order: every member is the root in turn.
//! - BRD-2: an out-of-range root is an error, at submission or from the
//!   completion within a bounded wait; never a hang, never a silent result.

use eredu_runtime::backend::BroadcastBackend;

use super::needs;
use crate::case::{Body, Row};
use crate::check::{slack, Check, Finding};
use crate::claims::Operation;
use crate::harness::{Backend, Harness, Tensor};
use crate::matrix::{wait_within, Handle, Subject};
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
            body: Body::Sizes {
                sizes: &[1, 2, 3, 4],
                script: out_of_range_root_is_an_error::<H>,
            },
        },
    ]
}

/// SplitMix64: the case's randomness, derived from its seed.
fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xd1b5_4a32_d192_ed69);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

/// Bit-exact equality (NaN payloads and signed zeros included).
fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// BRD-1: with every member as the root in turn, every member's output has
/// the root's shape and exactly the root's values, although non-roots pass
/// placeholders full of NaN, ±Inf and garbage.
fn every_member_gets_the_roots_input<H: Harness>(ctx: &RankCtx<'_, H>) -> Check
where
    Backend<H>: BroadcastBackend,
{
    let mut violations = Vec::new();
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
            violations.push(message);
        }
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Finding::Violation(violations.join("; ")))
    }
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
    let submission = Backend::<H>::broadcast(input, round.root, ctx.group(), ctx.executor())
        .map_err(|e| Finding::Violation(format!("{what}: submission failed: {e}")))?;
    let completion = Handle::<H>::Communication(submission.completion);
    wait_within(&completion, slack::RELEASE)
        .map_err(|error| Finding::Violation(format!("{what}: did not complete: {error}")))?;
    Ok(submission.output)
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
    let shape = <Tensor<H> as eredu_nn::Tensor>::shape(output);
    let want: Vec<i32> = round.shape.iter().map(|&d| d as i32).collect();
    if shape != want.as_slice() {
        return Ok(Err(format!(
            "{what}: output shape {shape:?}, expected the root's {want:?}"
        )));
    }
    let got = ctx.read(output)?;
    if same_bits(&got, expected) {
        Ok(Ok(()))
    } else {
        Ok(Err(format!(
            "{what}: output {got:?}, expected the root's input {expected:?} bit for bit"
        )))
    }
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
        let completion = Handle::<H>::Communication(submission.completion);
        match ended(&completion) {
            Ended::Failed => {}
            Ended::Completed => {
                let output = ctx.read(&submission.output).map_or_else(|e| format!("unreadable: {e:?}"), |v| format!("{v:?}"));
                return Err(Finding::Violation(format!(
                    "{what}: completed with output {output}, expected an error (at submission or from the completion)"
                )));
            }
            Ended::Pending => {
                return Err(Finding::Violation(format!(
                    "{what}: accepted, then still pending after {:?} with every member submitted: a hang, expected an error",
                    slack::RELEASE
                )))
            }
        }
    }
    Ok(())
}

/// How a completion ended within [`slack::RELEASE`].
enum Ended {
    Completed,
    Failed,
    Pending,
}

/// Polls `completion` (never blocking) until it ends or the limit passes.
fn ended<H: Harness>(completion: &Handle<H>) -> Ended {
    let start = std::time::Instant::now();
    loop {
        match completion.is_complete() {
            Ok(true) => return Ended::Completed,
            Err(_) => return Ended::Failed,
            Ok(false) if start.elapsed() >= slack::RELEASE => return Ended::Pending,
            Ok(false) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}
