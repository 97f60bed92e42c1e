//! Mutations of broadcasts (BRD-1): the root off by one either way.

use super::output::fitted;
use crate::suites::scenario::{Expected, Scenario, Semantics};

pub(super) fn root_shifted(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    root_moved(scenario, member, expected, 1)
}

pub(super) fn root_before(
    scenario: &Scenario,
    member: usize,
    expected: &Expected,
) -> Option<Vec<f32>> {
    root_moved(
        scenario,
        member,
        expected,
        scenario.size().saturating_sub(1),
    )
}

fn root_moved(scenario: &Scenario, _: usize, expected: &Expected, by: usize) -> Option<Vec<f32>> {
    let Semantics::Broadcast { root } = scenario.semantics else {
        return None;
    };
    let n = scenario.size();
    (n > 1).then_some(())?;
    let len = expected.values.len();
    Some(fitted(scenario.inputs[(root + by) % n].clone(), len))
}
