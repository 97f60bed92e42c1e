//! The data of the value checks: every step of SUM-1, GAT-1, GAT-2, A2A-1,
//! BRD-1 and P2P-1 is a [`Scenario`] (each member's input and what the
//! operation owes each member), built by the family's suite and run by it on
//! the backend. The output-mutation matrix ([`crate::precision`]) feeds the
//! same scenarios' plausible wrong outputs to the same verifier
//! ([`judge`]): the data's own mutant proof.
//!
//! - **Dtypes.** Each step runs once per dtype the harness offers. Movement
//!   data ([`element`]) is exact in its dtype and distinct per member (every
//!   member's values lie in a range of their own) and, within a member, over
//!   1024 (`f32`, `f16`) or 128 (`bf16`) consecutive elements. Sum data
//!   ([`addend`]) lies in a band `[2^(p-1), 2^p)` of integers (in `f32`, the
//!   movement data itself), signed by member, so that leaving out or doubling
//!   any member moves a sum further than the sum's bound.
//! - **Sums** are compared within `γ_n · Σ|x_m|` per element, where `n` is
//!   the number of members, `γ_n = n·u / (1 − n·u)` and `u = 2^-p` is the
//!   dtype's unit roundoff (p = 24, 11, 8): the error bound of any summation
//!   order, in the dtype or in a wider type rounded once. A singleton's sum is
//!   its input, by numeric equality (`-0.0` equals `+0.0`). Everything else
//!   is compared bit for bit.
//! - **Sizes** ([`sweep`]): 0, 1, a small odd size, 2^8 ± 1, one element
//!   each side of every boundary the harness names, on worlds of 2 and 3
//!   members, and past the largest (at least 4 MiB per rank) on the world
//!   of 2.
//! - **Orders** ([`Arrival`]): a step's members join with a seeded member
//!   last, in reversed member order, or odd members first.

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::dtype::Dtype;

use super::seeds::{late_member, mix, periodic, value};

/// How members join a step: who submits when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// Every member but this one submits first (in any order), then it.
    Late(usize),
    /// Members submit one after the other, in this order.
    Order(Vec<usize>),
}

impl Arrival {
    /// The step's arrival: its index picks one of the three kinds, so that
    /// every check's steps use all three on every world of two or more.
    pub(crate) fn of_step(seed: u64, step: u64, size: usize) -> Self {
        match (step % 3, size) {
            (_, 0..=1) | (0, _) => Self::Late(late_member(seed, step, size)),
            (1, _) => Self::Order((0..size).rev().collect()),
            _ => Self::Order(
                (0..size)
                    .filter(|m| m % 2 == 1)
                    .chain((0..size).step_by(2))
                    .collect(),
            ),
        }
    }
}

impl std::fmt::Display for Arrival {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Late(member) => write!(f, "member {member} joined last"),
            Self::Order(order) => write!(f, "members joined in the order {order:?}"),
        }
    }
}

/// What an operation owes each member, given every member's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Semantics {
    /// The elementwise sum over members.
    Sum,
    /// The inputs concatenated along `axis` in member order (each member's
    /// extent along the axis is its own).
    Gather { axis: usize },
    /// `matrix[i][j]` positions along `axis` go from member i to member j;
    /// each member's output is its received slices in peer order.
    AllToAll {
        axis: usize,
        matrix: Vec<Vec<usize>>,
    },
    /// The root's input.
    Broadcast { root: usize },
}

/// One step of a value check, identical on every rank.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// What the step is (shape, axis, counts, size), for messages.
    pub(crate) label: String,
    pub(crate) dtype: Dtype,
    pub(crate) semantics: Semantics,
    /// Every member's input shape.
    pub(crate) shapes: Vec<Vec<usize>>,
    /// Every member's input values (row-major, widened to `f32`).
    pub(crate) inputs: Vec<Vec<f32>>,
    /// The expectation every member shares (sums, gathers, broadcasts),
    /// made by the first rank that asks: the scenario is shared by a
    /// world's ranks, and the expectation is as large as every input
    /// together. Made from the fields above, which do not change after it
    /// (a clone, which may change them, starts without it).
    pub(crate) common: Common,
}

/// [`Scenario::common`]: made once, and forgotten by a clone.
#[derive(Debug, Default)]
pub(crate) struct Common(OnceLock<Expected>);

impl Clone for Common {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// What one member's output should be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    pub(crate) shape: Vec<usize>,
    pub(crate) values: Vec<f32>,
    /// Per-element bound on `|got − expected|` (sums over two or more
    /// members); `None`: bit for bit.
    pub(crate) bound: Option<Vec<f32>>,
}

impl Scenario {
    /// Members of the step's world.
    pub(crate) fn size(&self) -> usize {
        self.inputs.len()
    }

    /// What `member`'s output should be.
    pub(crate) fn expected(&self, member: usize) -> Cow<'_, Expected> {
        // Every member's, made once (see `common`).
        let common = |make: &dyn Fn() -> Expected| Cow::Borrowed(self.common.0.get_or_init(make));
        match &self.semantics {
            Semantics::Sum => common(&|| sum(self.dtype, &self.inputs, self.shapes[0].clone())),
            Semantics::Gather { axis } => common(&|| {
                let blocks: Vec<(&[f32], usize)> = self
                    .inputs
                    .iter()
                    .zip(&self.shapes)
                    .map(|(values, shape)| (values.as_slice(), extent(shape, *axis)))
                    .collect();
                exact(
                    with_extent(&self.shapes[0], *axis, blocks.iter().map(|b| b.1).sum()),
                    concat(&self.shapes[0], *axis, &blocks),
                )
            }),
            Semantics::AllToAll { axis, matrix } => {
                let (shape, values) = all_to_all(self, *axis, matrix, member, |sends, peer, to| {
                    (
                        sends.iter().take(to).sum(),
                        sends.get(to).copied().unwrap_or(0),
                        peer,
                    )
                });
                Cow::Owned(exact(shape, values))
            }
            Semantics::Broadcast { root } => common(&|| {
                exact(
                    self.shapes.get(*root).cloned().unwrap_or_default(),
                    self.inputs.get(*root).cloned().unwrap_or_default(),
                )
            }),
        }
    }
}

/// An expectation compared bit for bit.
pub(crate) fn exact(shape: Vec<usize>, values: Vec<f32>) -> Expected {
    Expected {
        shape,
        values,
        bound: None,
    }
}

/// An expectation compared by numeric equality (a bound of zero: `-0.0`
/// equals `+0.0`, NaN equals NaN): a sum's result, which computes values
/// (a sum that starts from `+0.0` is a correct identity on one member).
pub(crate) fn numeric(shape: Vec<usize>, values: Vec<f32>) -> Expected {
    let bound = Some(vec![0.0; values.len()]);
    Expected {
        shape,
        values,
        bound,
    }
}

/// The sum over `inputs`, with its bound (see the module docs).
pub(crate) fn sum(dtype: Dtype, inputs: &[Vec<f32>], shape: Vec<usize>) -> Expected {
    let len = inputs.first().map_or(0, Vec::len);
    let n = inputs.len();
    let values = (0..len)
        .map(|i| inputs.iter().map(|m| f64::from(m[i])).sum::<f64>() as f32)
        .collect();
    if n < 2 {
        return numeric(shape, values);
    }
    let gamma = gamma(dtype, n);
    let bound = (0..len)
        .map(|i| (gamma * inputs.iter().map(|m| f64::from(m[i]).abs()).sum::<f64>()) as f32)
        .collect();
    Expected {
        shape,
        values,
        bound: Some(bound),
    }
}

/// `γ_n = n·u / (1 − n·u)` for the dtype's unit roundoff `u`.
pub(crate) fn gamma(dtype: Dtype, n: usize) -> f64 {
    let nu = n as f64 * dtype.unit_roundoff();
    nu / (1.0 - nu)
}

/// A member's expected all-to-all output: for each peer (in the order
/// `peers` gives), the slice `take(sends, peer, member)` names as (offset,
/// length, source member) along the axis of the source's input.
pub(crate) fn all_to_all(
    scenario: &Scenario,
    axis: usize,
    matrix: &[Vec<usize>],
    member: usize,
    take: impl Fn(&[usize], usize, usize) -> (usize, usize, usize),
) -> (Vec<usize>, Vec<f32>) {
    let base = &scenario.shapes[0];
    let blocks: Vec<(Vec<f32>, usize)> = (0..matrix.len())
        .map(|peer| {
            let (offset, len, source) = take(&matrix[peer], peer, member);
            let source = source.min(scenario.size().saturating_sub(1));
            let shape = &scenario.shapes[source];
            let available = extent(shape, axis);
            let len = len.min(available.saturating_sub(offset));
            (
                slice(&scenario.inputs[source], shape, axis, offset, len),
                len,
            )
        })
        .collect();
    let total = blocks.iter().map(|b| b.1).sum();
    let borrowed: Vec<(&[f32], usize)> = blocks.iter().map(|(v, e)| (v.as_slice(), *e)).collect();
    (
        with_extent(base, axis, total),
        concat(base, axis, &borrowed),
    )
}

/// The extent of `shape` along `axis` (0 past its rank).
pub(crate) fn extent(shape: &[usize], axis: usize) -> usize {
    shape.get(axis).copied().unwrap_or(0)
}

/// `shape` seen from `axis`: (elements before it, its extent, elements after it).
pub(crate) fn around(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape.iter().take(axis).product();
    let inner = shape.iter().skip(axis + 1).product();
    (outer, extent(shape, axis), inner)
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
pub(crate) fn concat(shape: &[usize], axis: usize, blocks: &[(&[f32], usize)]) -> Vec<f32> {
    let (outer, _, inner) = around(shape, axis);
    let mut out = Vec::with_capacity(outer * inner * blocks.iter().map(|b| b.1).sum::<usize>());
    for row in 0..outer {
        for (data, extent) in blocks {
            let run = extent * inner;
            out.extend_from_slice(within(data, row * run, run));
        }
    }
    out
}

/// Up to `len` values of `data` from `from` (fewer, or none, past its end).
fn within(data: &[f32], from: usize, len: usize) -> &[f32] {
    let rest = data.get(from..).unwrap_or_default();
    &rest[..len.min(rest.len())]
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
    let mut out = Vec::with_capacity(outer * len * inner);
    for row in 0..outer {
        out.extend_from_slice(within(data, (row * extent + start) * inner, len * inner));
    }
    out
}

/// Movement data: member `rank`'s value at `index` in step `step`, exact in
/// `dtype`; members' ranges are disjoint and a member's values are distinct
/// over any 1024 (`bf16`: 128) consecutive indexes. `f32` keeps the suites'
/// historical data ([`value`]).
pub(crate) fn element(dtype: Dtype, seed: u64, step: u64, rank: usize, index: usize) -> f32 {
    let offset = mix(seed, &[step, rank as u64]);
    match dtype {
        Dtype::F32 => value(seed, step, rank, index),
        Dtype::F16 => {
            // Sign by parity, a binade of its own per member (exponent field
            // 8 to 23: normal, finite), 10 mantissa bits.
            let mantissa = (index as u64 % 1024 * 37 + offset) % 1024;
            let bits = ((rank as u64 % 2) << 15) | ((8 + rank as u64 % 16) << 10) | mantissa;
            half::f16::from_bits(bits as u16).to_f32()
        }
        Dtype::Bf16 => {
            let mantissa = (index as u64 % 128 * 37 + offset) % 128;
            let bits = ((rank as u64 % 2) << 15) | ((120 + rank as u64 % 16) << 7) | mantissa;
            half::bf16::from_bits(bits as u16).to_f32()
        }
    }
}

/// The first `len` movement values of member `rank` in step `step`.
pub(crate) fn elements(dtype: Dtype, seed: u64, step: u64, rank: usize, len: usize) -> Vec<f32> {
    let period = if dtype == Dtype::Bf16 { 128 } else { 1024 };
    periodic(len, period, |i| element(dtype, seed, step, rank, i))
}

/// Sum data: member `rank`'s addend at `index`, an integer of magnitude in
/// `[2^(p-1), 2^p)` for the dtype's precision p (exact in it), negative on
/// odd members; `f32` keeps the historical data ([`value`]), whose members'
/// magnitudes are at least 512 while the bound stays below 1.
pub(crate) fn addend(dtype: Dtype, seed: u64, step: u64, rank: usize, index: usize) -> f32 {
    if dtype == Dtype::F32 {
        return value(seed, step, rank, index);
    }
    let half_range = 1u64 << (dtype.precision() - 1);
    let offset = mix(seed, &[step, rank as u64, 0x5a]);
    let k = (index as u64 % half_range * 37 + offset) % half_range;
    let magnitude = (half_range + k) as f32;
    if rank % 2 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

/// The first `len` addends of member `rank` in step `step`.
pub(crate) fn addends(dtype: Dtype, seed: u64, step: u64, rank: usize, len: usize) -> Vec<f32> {
    let period = if dtype == Dtype::F32 {
        1024
    } else {
        1 << (dtype.precision() - 1)
    };
    periodic(len, period, |i| addend(dtype, seed, step, rank, i))
}

/// World sizes the value checks of the collectives (SUM, GAT, A2A) run on.
pub(crate) const VALUE_WORLDS: &[usize] = &[1, 2, 3, 4, 8];

/// World sizes the size sweep runs on (a power of two and not), besides
/// each case's largest world (see [`sweeps_on`]).
pub(crate) const SWEEP_WORLDS: &[usize] = &[2, 3];

/// The world the sweep's largest message (past every boundary, at least
/// [`SWEEP_FLOOR`] bytes per rank) runs on; the other sweep worlds stop at
/// the boundaries (which keeps a certification's wall time in check).
pub(crate) const LARGEST_WORLD: usize = 2;

/// The sweep's floor for its largest message, in bytes per rank.
pub(crate) const SWEEP_FLOOR: usize = 4 << 20;

/// Element counts of the size sweep for `dtype`, given the harness's
/// boundaries (bytes) and limit: sorted, without repeats; and the counts
/// the limit skipped.
pub(crate) fn sweep(
    dtype: Dtype,
    boundaries: &[usize],
    limit: Option<usize>,
) -> (Vec<usize>, Vec<usize>) {
    let size = dtype.size();
    let mut counts = vec![0, 1, 7, 255, 257];
    for &bytes in boundaries {
        let at = bytes / size;
        counts.extend([at.saturating_sub(1), at + 1]);
    }
    counts.push(largest_count(dtype, boundaries));
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .partition(|&count| limit.is_none_or(|limit| count * size <= limit))
}

/// The sweep's largest element count for `dtype`: past every boundary, and
/// at least [`SWEEP_FLOOR`] bytes per rank.
pub(crate) fn largest_count(dtype: Dtype, boundaries: &[usize]) -> usize {
    let largest = boundaries.iter().copied().max().unwrap_or(0);
    SWEEP_FLOOR.max(2 * largest) / dtype.size() + 3
}

/// The size past the harness's protocol boundaries, in `f32` elements per
/// rank, and which boundary it passes (for messages): just past the largest
/// boundary the harness names, or the sweep's largest message where it names
/// none; `None` when the harness's message limit is below it. The completion
/// matrix's second regime (`crate::case::Large`) and SUM-2's large members.
pub(crate) fn past_boundaries<H: crate::harness::Harness>(
    harness: &H,
) -> Option<crate::case::Large> {
    let size = Dtype::F32.size();
    let boundaries = harness.boundaries(Dtype::F32);
    let (elements, why) = match boundaries.iter().max() {
        Some(&largest) => (
            largest / size + 1,
            format!("just past the largest protocol boundary the harness names ({largest} bytes)"),
        ),
        None => (
            largest_count(Dtype::F32, &[]),
            "the size sweep's largest message (the harness names no protocol boundary)".to_owned(),
        ),
    };
    let fits = |elements: usize, dtype: Dtype| {
        harness
            .max_message_bytes()
            .is_none_or(|limit| elements * dtype.size() <= limit)
    };
    // Each other dtype whose boundaries differ from f32's (and from those of
    // a dtype already chosen), just past its own largest boundary.
    let mut seen = vec![boundaries.clone()];
    let mut dtypes = Vec::new();
    for dtype in harness.dtypes() {
        let own = harness.boundaries(dtype);
        if dtype == Dtype::F32 || seen.contains(&own) {
            continue;
        }
        if let Some(&largest) = own.iter().max() {
            let count = largest / dtype.size() + 1;
            if fits(count, dtype) {
                dtypes.push((dtype, count));
            }
        }
        seen.push(own);
    }
    fits(elements, Dtype::F32).then_some(crate::case::Large {
        elements,
        why,
        sender: false,
        dtypes,
    })
}

/// [`sweep`] for a world of `world` members in a case whose largest world is
/// `largest_world`: empty outside [`SWEEP_WORLDS`] and that largest world
/// (where a backend's algorithm for many members differs: it chooses by
/// message bytes, so there in `f32` only, the 16-bit dtypes' own paths
/// being swept on the sweep's worlds), and without the largest count
/// outside [`LARGEST_WORLD`].
pub(crate) fn sweep_for_world(
    dtype: Dtype,
    boundaries: &[usize],
    limit: Option<usize>,
    (world, largest_world): (usize, usize),
) -> (Vec<usize>, Vec<usize>) {
    let only_largest = !SWEEP_WORLDS.contains(&world);
    if !sweeps_on(world, largest_world) || (only_largest && dtype != Dtype::F32) {
        return (Vec::new(), Vec::new());
    }
    let (mut counts, mut skipped) = sweep(dtype, boundaries, limit);
    if world != LARGEST_WORLD {
        let largest = largest_count(dtype, boundaries);
        counts.retain(|&c| c != largest);
        skipped.retain(|&c| c != largest);
    }
    (counts, skipped)
}

/// Whether the size sweep runs on a world of `world` members in a case
/// whose largest world is `largest_world`.
pub(crate) fn sweeps_on(world: usize, largest_world: usize) -> bool {
    SWEEP_WORLDS.contains(&world) || (world == largest_world && world > 1)
}

/// Whether `got` (of `got_shape`) is what `expected` says: `None` when it
/// is, or how it differs. The one verifier of every value check.
pub(crate) fn judge(expected: &Expected, got_shape: &[usize], got: &[f32]) -> Option<Mismatch> {
    if got_shape != expected.shape.as_slice() {
        return Some(Mismatch::Shape);
    }
    let bounds = expected.bound.as_ref().map_or(got.len(), Vec::len);
    if got.len() != expected.values.len() || bounds != got.len() {
        return Some(Mismatch::Length);
    }
    let pairs = got.iter().zip(&expected.values);
    let first = match &expected.bound {
        None => pairs
            .map(|(g, e)| g.to_bits() != e.to_bits())
            .position(|wrong| wrong),
        Some(bound) => pairs
            .zip(bound)
            .map(|((&g, &e), &bound)| match e.is_nan() {
                true => !g.is_nan(),
                false => !(f64::from(g) - f64::from(e)).abs().le(&f64::from(bound)),
            })
            .position(|wrong| wrong),
    };
    first.map(Mismatch::Element)
}

/// How an output differs from its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// Another shape.
    Shape,
    /// The right shape, another number of values.
    Length,
    /// The first element that is wrong.
    Element(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_runs_on_its_worlds_and_the_largest_without_the_largest_count() {
        let boundaries = [16 << 10];
        let full = sweep(Dtype::F32, &boundaries, None).0;
        let largest = largest_count(Dtype::F32, &boundaries);
        assert_eq!(
            sweep_for_world(Dtype::F32, &boundaries, None, (2, 8)).0,
            full
        );
        let on_eight = sweep_for_world(Dtype::F32, &boundaries, None, (8, 8)).0;
        assert!(on_eight.contains(&(4 << 10 | 1)) && !on_eight.contains(&largest));
        assert!(sweep_for_world(Dtype::F32, &boundaries, None, (4, 8))
            .0
            .is_empty());
        assert!(sweep_for_world(Dtype::F32, &boundaries, None, (1, 1))
            .0
            .is_empty());
    }

    #[test]
    fn slices_and_concatenations_take_the_runs_an_index_walk_takes() {
        let shape = [3, 4, 2];
        let data: Vec<f32> = (0..24).map(|i| i as f32).collect();
        for axis in 0..3 {
            let (outer, extent, inner) = around(&shape, axis);
            for start in 0..=extent {
                for len in 0..=extent - start {
                    let walked: Vec<f32> = (0..outer)
                        .flat_map(|row| (start..start + len).map(move |k| (row, k)))
                        .flat_map(|(row, k)| {
                            (0..inner).map(move |j| (row * extent + k) * inner + j)
                        })
                        .map(|index| data[index])
                        .collect();
                    assert_eq!(slice(&data, &shape, axis, start, len), walked);
                }
            }
            let (a, b) = (
                slice(&data, &shape, axis, 0, 1),
                slice(&data, &shape, axis, 1, extent - 1),
            );
            assert_eq!(concat(&shape, axis, &[(&a, 1), (&b, extent - 1)]), data);
        }
        // Data shorter than its shape says: what there is, never a panic.
        assert_eq!(
            concat(&[2, 2], 0, &[(&[1.0, 2.0, 3.0], 2)]),
            vec![1.0, 2.0, 3.0]
        );
        assert_eq!(slice(&[1.0, 2.0, 3.0], &[2, 2], 1, 1, 1), vec![2.0]);
    }

    #[test]
    fn judging_names_the_first_wrong_element() {
        let exact = Expected {
            shape: vec![4],
            values: vec![1.0, -0.0, f32::NAN, 4.0],
            bound: None,
        };
        assert_eq!(judge(&exact, &[4], &[1.0, -0.0, f32::NAN, 4.0]), None);
        assert_eq!(
            judge(&exact, &[4], &[1.0, 0.0, f32::NAN, 4.0]),
            Some(Mismatch::Element(1))
        );
        assert_eq!(
            judge(&exact, &[4], &[1.0, -0.0, f32::NAN, 5.0]),
            Some(Mismatch::Element(3))
        );
        assert_eq!(
            judge(&exact, &[2, 2], &[1.0, -0.0, f32::NAN, 4.0]),
            Some(Mismatch::Shape)
        );
        assert_eq!(
            judge(&exact, &[4], &[1.0, -0.0, f32::NAN]),
            Some(Mismatch::Length)
        );
        let bounded = Expected {
            bound: Some(vec![0.0, 0.5, 0.0, 0.5]),
            ..exact.clone()
        };
        assert_eq!(
            judge(&bounded, &[4], &[1.0, 0.5, 1.0, 4.5]),
            Some(Mismatch::Element(2))
        );
        assert_eq!(judge(&bounded, &[4], &[1.0, 0.5, f32::NAN, 4.5]), None);
        assert_eq!(
            judge(&bounded, &[4], &[1.0, 0.5, f32::NAN, 4.6]),
            Some(Mismatch::Element(3))
        );
        let short = Expected {
            bound: Some(vec![0.0; 3]),
            ..exact
        };
        assert_eq!(
            judge(&short, &[4], &[1.0, -0.0, f32::NAN, 4.0]),
            Some(Mismatch::Length)
        );
    }

    #[test]
    fn data_is_exact_in_its_dtype_and_members_do_not_overlap() {
        for dtype in Dtype::ALL {
            for rank in 0..8 {
                for index in 0..2048 {
                    let v = element(dtype, 7, 1, rank, index);
                    assert!(v.is_finite() && dtype.represents(v), "{dtype} {v}");
                    let a = addend(dtype, 7, 1, rank, index);
                    assert!(dtype.represents(a), "{dtype} addend {a}");
                }
            }
            let ranges: Vec<(f32, f32)> = (0..8)
                .map(|rank| {
                    let values: Vec<f32> = elements(dtype, 7, 1, rank, 1024)
                        .iter()
                        .map(|v| v.abs())
                        .collect();
                    (
                        values.iter().copied().fold(f32::MAX, f32::min),
                        values.iter().copied().fold(0.0, f32::max),
                    )
                })
                .collect();
            for (a, ra) in ranges.iter().enumerate() {
                for rb in ranges.iter().skip(a + 1) {
                    assert!(
                        ra.1 < rb.0 || rb.1 < ra.0,
                        "{dtype}: members' ranges overlap"
                    );
                }
            }
        }
    }

    #[test]
    fn the_sweep_goes_past_every_boundary_and_the_limit_skips() {
        let (counts, skipped) = sweep(Dtype::F32, &[16 << 10, 1 << 20], None);
        assert!(skipped.is_empty());
        for want in [
            0,
            1,
            7,
            255,
            257,
            4095,
            4097,
            262_143,
            262_145,
            (1 << 20) + 3,
        ] {
            assert!(counts.contains(&want), "{want} missing from {counts:?}");
        }
        let (counts, skipped) = sweep(Dtype::Bf16, &[], Some(1024));
        assert_eq!(counts, vec![0, 1, 7, 255, 257]);
        assert_eq!(skipped, vec![(2 << 20) + 3]);
    }

    #[test]
    fn a_correct_sum_in_the_dtype_is_within_the_bound_and_a_missing_member_is_not() {
        for dtype in Dtype::ALL {
            for n in [2, 3, 8] {
                let inputs: Vec<Vec<f32>> = (0..n).map(|m| addends(dtype, 3, 2, m, 300)).collect();
                let expected = sum(dtype, &inputs, vec![300]);
                // Recursive summation in the dtype itself, in reverse order.
                let in_dtype: Vec<f32> = (0..300)
                    .map(|i| {
                        inputs
                            .iter()
                            .rev()
                            .fold(0.0f32, |acc, m| dtype.round(acc + m[i]))
                    })
                    .collect();
                assert_eq!(judge(&expected, &[300], &in_dtype), None, "{dtype} n={n}");
                let missing: Vec<f32> = (0..300)
                    .map(|i| inputs.iter().take(n - 1).map(|m| m[i]).sum())
                    .collect();
                assert!(
                    judge(&expected, &[300], &missing).is_some(),
                    "{dtype} n={n}"
                );
            }
        }
    }
}
