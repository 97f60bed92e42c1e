//! Exact values: seeded inputs whose every sum is exact in `f32`, reference
//! layouts along an axis (concatenation, slices), and bit-for-bit comparison
//! of outputs with what they should hold. Shared by the family suites (SUM,
//! GAT, A2A, BRD, P2P) and SUB.

use super::scenario::{judge, Expected, Mismatch};
use crate::check::{Check, Finding};
use crate::harness::{Harness, Tensor};
use crate::operation::Operation;
use crate::violation;
use crate::world::RankCtx;

/// splitmix64 of the case seed and a path of integers (the SUM, GAT and A2A
/// suites' randomness).
pub(crate) fn mix(seed: u64, path: &[u64]) -> u64 {
    path.iter().fold(seed, |state, part| {
        let mut z =
            (state ^ part.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// SplitMix64 of the case seed and two integers (the BRD and P2P suites'
/// randomness; its draws differ from [`mix`]'s, so each suite keeps its own).
pub(crate) fn mix_two(seed: u64, a: u64, b: u64) -> u64 {
    let mut z =
        seed ^ a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xd1b5_4a32_d192_ed69);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A number below `n` (which must be positive) chosen by the seed and `path`.
pub(crate) fn pick(seed: u64, path: &[u64], n: usize) -> usize {
    (mix(seed, path) % n.max(1) as u64) as usize
}

/// Input value of member `rank` at flat `index` in step `step`: an integer
/// of magnitude `(rank + 1) * 1024 - 512 + k` with `k < 1024`, negative
/// on odd ranks. Members' ranges are disjoint (a block in the wrong place
/// shows), the values of one member are distinct over any 1024
/// consecutive indexes (`37 * index` permutes residues mod 1024), and a
/// sum over up to eight members stays far below 2^24, so it is exact in
/// `f32` in any order.
pub(crate) fn value(seed: u64, step: u64, rank: usize, index: usize) -> f32 {
    let offset = mix(seed, &[step, rank as u64]) % 1024;
    let k = (index as u64 % 1024 * 37 + offset) % 1024;
    let magnitude = ((rank as u64 + 1) * 1024 - 512 + k) as f32;
    if rank % 2 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// The first `len` input values of member `rank` in step `step`.
pub(crate) fn values(seed: u64, step: u64, rank: usize, len: usize) -> Vec<f32> {
    periodic(len, 1024, |index| value(seed, step, rank, index))
}

/// `len` values of a sequence with period `period`: one period computed,
/// then repeated (quick for the size sweep's long tensors, even unoptimised).
pub(crate) fn periodic(len: usize, period: usize, at: impl Fn(usize) -> f32) -> Vec<f32> {
    let once: Vec<f32> = (0..len.min(period)).map(at).collect();
    once.iter().copied().cycle().take(len).collect()
}

/// Bit-exact equality (NaN payloads and signed zeros included).
pub(crate) fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// A shape as a tensor reports it, as extents (a negative extent reads as
/// `usize::MAX`, which no expected shape has).
fn extents(got: &[i32]) -> Vec<usize> {
    got.iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect()
}

/// What an output holds where it is not what it should be.
pub(crate) enum Differs {
    /// Its shape, which is not the expected one (its values were not read).
    Shape(Vec<i32>),
    /// Its values, which are not the expected ones (see [`judge`]).
    Values(Vec<f32>, Mismatch),
}

/// Compares an output's shape, then its values, with `expected` by the
/// value checks' one verifier ([`judge`]: bit for bit, or within the sum's
/// bound); `None` when both match. The output is read in the rank's current
/// dtype; an output of another dtype is a violation.
pub(crate) fn differs<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    output: &Tensor<H>,
    expected: &Expected,
) -> Result<Option<Differs>, Finding> {
    let got_shape = eredu_nn::Tensor::shape(output);
    if extents(got_shape) != expected.shape {
        return Ok(Some(Differs::Shape(got_shape.to_vec())));
    }
    // Read after the backend reported the work complete: a failed read is a
    // value the backend never wrote, or the harness's own read failing; the
    // kit cannot tell which, so it blames neither (inconclusive).
    let got = ctx.read(output).map_err(|finding| match finding {
        Finding::Harness(error) => crate::check::setup(format!(
            "{operation}: the output could not be read back after its completion was reported ({error}): \
             either the backend never wrote it or the harness's read failed, and the kit cannot tell which"
        )),
        other => other,
    })?;
    Ok(judge(expected, &expected.shape, &got).map(|mismatch| Differs::Values(got, mismatch)))
}

/// Checks an output's shape and values (see [`differs`]); `what` names the
/// operation, the rank, the step and what the output should be.
pub(crate) fn check_output<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    what: impl Fn() -> String,
    output: &Tensor<H>,
    expected: &Expected,
) -> Check {
    match differs(ctx, operation, output, expected)? {
        None => Ok(()),
        Some(Differs::Shape(got_shape)) => Err(violation!(
            "{}: output shape {got_shape:?}, expected {:?}",
            what(),
            expected.shape
        )),
        Some(Differs::Values(got, mismatch)) => Err(violation!(
            "{}: {}",
            what(),
            value_difference(&got, expected, mismatch)
        )),
    }
}

/// At most this many values are quoted in a message.
const QUOTED: usize = 16;

/// Where values that are not the expected ones first differ from them (long
/// outputs are quoted around that element only).
pub(crate) fn value_difference(got: &[f32], expected: &Expected, mismatch: Mismatch) -> String {
    let quote = |values: &[f32], at: usize| {
        let from = at.saturating_sub(QUOTED / 2);
        let shown: Vec<f32> = values.iter().skip(from).take(QUOTED).copied().collect();
        if values.len() <= QUOTED {
            format!("{shown:?}")
        } else {
            format!(
                "[… {shown:?} …] (elements {from} to {} of {})",
                from + shown.len(),
                values.len()
            )
        }
    };
    match mismatch {
        Mismatch::Element(at) => {
            let rule = match &expected.bound {
                Some(bound) => format!("expected {} within {}", expected.values[at], bound[at]),
                None => format!("expected {} bit for bit", expected.values[at]),
            };
            format!(
                "output element {at} is {}, {rule} (output {}, expected {})",
                got[at],
                quote(got, at),
                quote(&expected.values, at)
            )
        }
        Mismatch::Shape | Mismatch::Length => format!(
            "output holds {} values, expected {} ({} instead of {})",
            got.len(),
            expected.values.len(),
            quote(got, 0),
            quote(&expected.values, 0)
        ),
    }
}
