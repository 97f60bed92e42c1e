//! Mutations of point-to-point bundles (P2P-1): a value of the bundle in
//! another's place, or the receiver's placeholder returned.

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
