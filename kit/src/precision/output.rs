//! Output-level mutations, for every value check (SUM-1, GAT-1, GAT-2,
//! A2A-1, BRD-1, and `same_values`): layout confusions (transposed,
//! column-major), stale, zero and partial writes, and the wrong element
//! size.

use crate::suites::scenario::{Expected, Scenario};

/// `values` cut or padded with zeros to `len`.
pub(super) fn fitted(mut values: Vec<f32>, len: usize) -> Vec<f32> {
    values.resize(len, 0.0);
    values
}

pub(super) fn transposed(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    let (first, rest) = (*shape.first()?, shape.iter().skip(1).product::<usize>());
    (shape.len() >= 2).then(|| {
        (0..values.len())
            .map(|i| values[(i % first) * rest + i / first])
            .collect()
    })
}

pub(super) fn column_major(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let (shape, values) = (expected.shape.clone(), expected.values.clone());
    if shape.len() < 2 {
        return None;
    }
    // Element `i` of the column-major stream is written at row-major index i.
    let strides: Vec<usize> = (0..shape.len())
        .map(|a| shape[a + 1..].iter().product())
        .collect();
    Some(
        (0..values.len())
            .map(|i| {
                let mut rest = i;
                let mut at = 0;
                for axis in 0..shape.len() {
                    at += (rest % shape[axis]) * strides[axis];
                    rest /= shape[axis];
                }
                values[at]
            })
            .collect(),
    )
}

pub(super) fn stale(scenario: &Scenario, member: usize, expected: &Expected) -> Option<Vec<f32>> {
    let len = expected.values.len();
    Some(fitted(scenario.inputs[member].clone(), len))
}

pub(super) fn zeros(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    Some(vec![0.0; expected.values.len()])
}

pub(super) fn last_untouched(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    *values.last_mut()? = 0.0;
    Some(values)
}

pub(super) fn chunk_untouched(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    let len = values.len();
    let chunk = len.div_ceil(4).clamp(1, 4096);
    values
        .iter_mut()
        .skip(len / 2)
        .take(chunk)
        .for_each(|v| *v = 0.0);
    Some(values)
}

pub(super) fn element_size_halved(_: &Scenario, _: usize, expected: &Expected) -> Option<Vec<f32>> {
    let mut values = expected.values.clone();
    let half = values.len().div_ceil(2);
    values.iter_mut().skip(half).for_each(|v| *v = 0.0);
    Some(values)
}

pub(super) fn element_size_doubled(
    _: &Scenario,
    _: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let values = &expected.values;
    Some(
        (0..values.len())
            .map(|i| values.get(2 * i).copied().unwrap_or(0.0))
            .collect(),
    )
}
