//! Mutations of point-to-point bundles (P2P-1): a value of the bundle in
//! another's place (by a fixed permutation, or sorted by size), or the
//! receiver's placeholder returned.

use super::output::fitted;
use crate::suites::p2p;
use crate::suites::scenario::{Expected, Scenario, Semantics};

/// The receiver's output `index` (the scenario's root) taken from another
/// value of the bundle (cut or padded to the output's length).
fn bundle_value(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
    by: usize,
) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    (member == root && scenario.size() > 1).then_some(())?;
    let other = (root + by) % scenario.size();
    let len = expected.values.len();
    Some(fitted(scenario.inputs[other].clone(), len))
}

pub(super) fn bundle_reversed(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    let n = scenario.size();
    bundle_value(scenario, member, expected, (2 * n - 1 - 2 * root) % n)
}

pub(super) fn bundle_rotated(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    bundle_value(scenario, member, expected, 1)
}

/// A receiver that places the bundle's values by size (smallest first)
/// instead of by position: value `i` is the `i`-th smallest.
pub(super) fn bundle_by_size(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    let n = scenario.size();
    let mut by_size: Vec<usize> = (0..n).collect();
    by_size.sort_by_key(|&i| scenario.inputs[i].len());
    let by = (by_size.get(root)? + n - root) % n;
    (by != 0).then(|| bundle_value(scenario, member, expected, by))?
}

pub(super) fn placeholder_returned(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    let shape = &scenario.shapes[member];
    let len = expected.values.len();
    Some(fitted(
        p2p::placeholder(shape)
            .into_iter()
            .map(|v| scenario.dtype.round(v))
            .collect(),
        len,
    ))
}
