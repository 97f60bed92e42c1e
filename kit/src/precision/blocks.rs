//! Mutations of gathers and all-to-all (GAT-1, GAT-2, A2A-1): the output is
//! blocks, one per member (peer), reordered, repeated, missing, offset, or
//! laid out with the wrong strides, counts or send offsets.

use super::output::fitted;
use crate::suites::scenario::{around, Expected, Scenario, Semantics};

/// The axis and each member's block extent of a gather or all-to-all, for
/// `member`'s output.
fn layout(scenario: &Scenario, member: usize) -> Option<(usize, Vec<usize>)> {
    match &scenario.semantics {
        Semantics::Gather { axis } => {
            Some((*axis, scenario.shapes.iter().map(|s| s[*axis]).collect()))
        }
        Semantics::AllToAll { axis, matrix } => {
            Some((*axis, matrix.iter().map(|row| row[member]).collect()))
        }
        _ => None,
    }
}

/// `member`'s right output split into its blocks (one per member or peer,
/// each with its extent along the axis), with the output's shape and axis.
struct Blocks {
    shape: Vec<usize>,
    axis: usize,
    len: usize,
    blocks: Vec<(Vec<f32>, usize)>,
}

fn split(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Blocks> {
    let (axis, extents) = layout(scenario, member)?;
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (outer, _, inner) = around(&shape, axis);
    let mut blocks: Vec<(Vec<f32>, usize)> = extents.iter().map(|&e| (Vec::new(), e)).collect();
    let mut at = 0;
    for _ in 0..outer {
        for (block, extent) in &mut blocks {
            block.extend_from_slice(values.get(at..at + *extent * inner)?);
            at += *extent * inner;
        }
    }
    Some(Blocks {
        shape,
        axis,
        len: values.len(),
        blocks,
    })
}

/// `member`'s output rebuilt from its blocks as `pick` rearranges them.
fn reblocked(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
    pick: impl Fn(Vec<(Vec<f32>, usize)>) -> Vec<(Vec<f32>, usize)>,
) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let blocks = pick(blocks);
    let borrowed: Vec<(&[f32], usize)> = blocks.iter().map(|(v, e)| (v.as_slice(), *e)).collect();
    Some(fitted(
        crate::suites::scenario::concat(&shape, axis, &borrowed),
        len,
    ))
}

pub(super) fn blocks_reversed(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    match scenario.semantics {
        Semantics::Gather { .. } | Semantics::AllToAll { .. } => {
            reblocked(scenario, member, expected, |mut b| {
                b.reverse();
                b
            })
        }
        _ => None,
    }
}

pub(super) fn blocks_rotated(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if !b.is_empty() {
            b.rotate_left(1);
        }
        b
    })
}

pub(super) fn block_repeated(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if b.len() > 1 && b[0].1 == b[1].1 {
            b[1] = b[0].clone();
        }
        b
    })
}

pub(super) fn block_missing(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    reblocked(scenario, member, expected, |mut b| {
        if let Some(last) = b.last_mut() {
            last.0.iter_mut().for_each(|v| *v = 0.0);
        }
        b
    })
}

pub(super) fn extents_swapped(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let (outer, _, inner) = around(&shape, axis);
    // Row o of the copy takes `extent × outer` values of each block at o:
    // the strides of the outer and inner extents exchanged.
    let mut out = Vec::with_capacity(len);
    for row in 0..inner {
        for (data, extent) in &blocks {
            let run = extent * outer;
            out.extend(data.iter().skip(row * run).take(run));
        }
    }
    Some(fitted(out, len))
}

pub(super) fn blocks_offset(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let (axis, _) = layout(scenario, member)?;
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (outer, extent, inner) = around(&shape, axis);
    let row = extent * inner;
    (row > inner).then_some(())?;
    Some(
        (0..values.len())
            .map(|i| {
                let (o, within) = (i / row.max(1), i % row.max(1));
                values[o * row + (within + inner) % row]
            })
            .take(outer * row)
            .collect(),
    )
}

pub(super) fn counts_shifted(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    let (outer, _, inner) = around(&shape, axis);
    let n = blocks.len();
    (n > 1).then_some(())?;
    // Block k's data read with block k+1's extent.
    let mut out = Vec::with_capacity(len);
    for row in 0..outer {
        for (k, (data, extent)) in blocks.iter().enumerate() {
            let wrong = blocks[(k + 1) % n].1 * inner;
            let mut taken: Vec<f32> = data
                .iter()
                .skip(row * extent * inner)
                .take(wrong)
                .copied()
                .collect();
            taken.resize(wrong, 0.0);
            out.extend(taken);
        }
    }
    Some(fitted(out, len))
}

pub(super) fn counts_as_elements(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Blocks {
        shape,
        axis,
        len,
        blocks,
    } = split(scenario, member, expected)?;
    (around(&shape, axis).2 > 1).then_some(())?;
    // Each block's first `count` elements, end to end.
    let out: Vec<f32> = blocks
        .iter()
        .flat_map(|(data, count)| data.iter().take(*count).copied())
        .collect();
    Some(fitted(out, len))
}

pub(super) fn send_offset_shifted(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Semantics::AllToAll { axis, matrix } = &scenario.semantics else {
        return None;
    };
    let (_, values) =
        crate::suites::scenario::all_to_all(scenario, *axis, matrix, member, |sends, peer, to| {
            (
                sends.iter().take(to).sum::<usize>() + 1,
                sends.get(to).copied().unwrap_or(0),
                peer,
            )
        });
    Some(fitted(values, expected.values.len()))
}

pub(super) fn matrix_transposed(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Semantics::AllToAll { axis, matrix } = &scenario.semantics else {
        return None;
    };
    let transposed: Vec<Vec<usize>> = (0..matrix.len())
        .map(|i| matrix.iter().map(|row| row[i]).collect())
        .collect();
    let (_, values) = crate::suites::scenario::all_to_all(
        scenario,
        *axis,
        &transposed,
        member,
        |sends, peer, to| {
            (
                sends.iter().take(to).sum(),
                sends.get(to).copied().unwrap_or(0),
                peer,
            )
        },
    );
    Some(fitted(values, expected.values.len()))
}
