//! Exact values: seeded inputs whose every sum is exact in `f32`, reference
//! layouts along an axis (concatenation, slices), and bit-for-bit comparison
//! of outputs with what they should hold. Shared by the family suites (SUM,
//! GAT, A2A, BRD, P2P) and SUB.

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
    (0..len)
        .map(|index| value(seed, step, rank, index))
        .collect()
}

/// `shape` seen from `axis`: (elements before it, its extent, elements after it).
fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape.iter().take(axis).product();
    let extent = shape.get(axis).copied().unwrap_or(0);
    let inner = shape.iter().skip(axis + 1).product();
    (outer, extent, inner)
}

/// `shape` with its extent along `axis` replaced.
pub(crate) fn with_extent(shape: &[usize], axis: usize, extent: usize) -> Vec<usize> {
    let mut out = shape.to_vec();
    if let Some(slot) = out.get_mut(axis) {
        *slot = extent;
    }
    out
}

/// Reference concatenation along `axis` of row-major blocks, each given
/// with its extent along the axis; every block has `shape` off the axis.
pub(crate) fn concat(shape: &[usize], axis: usize, blocks: &[(Vec<f32>, usize)]) -> Vec<f32> {
    let (outer, _, inner) = around(shape, axis);
    let mut out = Vec::new();
    for row in 0..outer {
        for (data, extent) in blocks {
            let run = extent * inner;
            out.extend(data.iter().skip(row * run).take(run));
        }
    }
    out
}

/// Reference slice: positions `start..start + len` along `axis` of a
/// row-major tensor of `shape`.
pub(crate) fn slice(
    data: &[f32],
    shape: &[usize],
    axis: usize,
    start: usize,
    len: usize,
) -> Vec<f32> {
    let (outer, extent, inner) = around(shape, axis);
    (0..outer)
        .flat_map(|row| {
            data.iter()
                .skip((row * extent + start) * inner)
                .take(len * inner)
        })
        .copied()
        .collect()
}

/// Bit-exact equality (NaN payloads and signed zeros included).
pub(crate) fn same_bits(got: &[f32], expected: &[f32]) -> bool {
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// Whether a shape as a tensor reports it is `shape`.
fn same_shape(got: &[i32], shape: &[usize]) -> bool {
    got.len() == shape.len()
        && got
            .iter()
            .zip(shape)
            .all(|(got, want)| usize::try_from(*got).ok() == Some(*want))
}

/// What an output holds where it is not what it should be.
pub(crate) enum Differs {
    /// Its shape, which is not the expected one (its values were not read).
    Shape(Vec<i32>),
    /// Its values, which are not the expected ones bit for bit.
    Values(Vec<f32>),
}

/// Compares an output's shape, then its values with the expected ones by
/// `operation`'s comparison rule ([`Operation::same_values`]: bit for bit,
/// or numeric equality for sums); `None` when both match.
pub(crate) fn differs<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    output: &Tensor<H>,
    shape: &[usize],
    expected: &[f32],
) -> Result<Option<Differs>, Finding> {
    let got_shape = eredu_nn::Tensor::shape(output);
    if !same_shape(got_shape, shape) {
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
    Ok((!operation.same_values(&got, expected)).then_some(Differs::Values(got)))
}

/// Checks an output's shape and values (by `operation`'s comparison rule);
/// `what` names the operation, the rank and what the output should be.
pub(crate) fn check_output<H: Harness>(
    ctx: &RankCtx<'_, H>,
    operation: Operation,
    what: impl Fn() -> String,
    output: &Tensor<H>,
    shape: &[usize],
    expected: &[f32],
) -> Check {
    match differs(ctx, operation, output, shape, expected)? {
        None => Ok(()),
        Some(Differs::Shape(got_shape)) => Err(violation!(
            "{}: output shape {got_shape:?}, expected {shape:?}",
            what()
        )),
        Some(Differs::Values(got)) => Err(violation!(
            "{}: {}",
            what(),
            value_difference(&got, expected)
        )),
    }
}

/// Where values that are not the expected ones first differ from them.
fn value_difference(got: &[f32], expected: &[f32]) -> String {
    let first = got
        .iter()
        .zip(expected)
        .position(|(got, want)| got.to_bits() != want.to_bits());
    match first {
        Some(at) if got.len() == expected.len() => format!(
            "output element {at} is {}, expected {} (output {got:?}, expected {expected:?})",
            got[at], expected[at]
        ),
        _ => format!(
            "output holds {} values, expected {} ({got:?} instead of {expected:?})",
            got.len(),
            expected.len()
        ),
    }
}
