//! Mutations of sums (SUM-1, and `same_values` on the standard all-reduce):
//! a member left out or counted twice, 16-bit inputs decoded in the other
//! 16-bit format.

use crate::dtype::Dtype;
use crate::suites::scenario::{sum, Expected, Scenario, Semantics};

fn sum_of(scenario: &Scenario, inputs: &[Vec<f32>]) -> Option<Vec<f32>> {
    (scenario.semantics == Semantics::Sum)
        .then(|| sum(scenario.dtype, inputs, scenario.shapes[0].clone()).values)
        .map(|values| {
            values
                .into_iter()
                .map(|v| scenario.dtype.round(v))
                .collect()
        })
}

pub(super) fn sum_without_last(scenario: &Scenario, _: usize, _: &Expected) -> Option<Vec<f32>> {
    let n = scenario.size();
    (n > 1).then_some(())?;
    sum_of(scenario, &scenario.inputs[..n - 1])
}

pub(super) fn sum_first_twice(scenario: &Scenario, _: usize, _: &Expected) -> Option<Vec<f32>> {
    let mut inputs = scenario.inputs.clone();
    inputs.push(inputs.first()?.clone());
    sum_of(scenario, &inputs)
}

pub(super) fn sum_other_half_format(
    scenario: &Scenario,
    _: usize,
    _: &Expected,
) -> Option<Vec<f32>> {
    let decode: fn(f32) -> f32 = match scenario.dtype {
        Dtype::F16 => |v| half::bf16::from_bits(half::f16::from_f32(v).to_bits()).to_f32(),
        Dtype::Bf16 => |v| half::f16::from_bits(half::bf16::from_f32(v).to_bits()).to_f32(),
        _ => return None,
    };
    let inputs: Vec<Vec<f32>> = scenario
        .inputs
        .iter()
        .map(|m| m.iter().map(|&v| decode(v)).collect())
        .collect();
    sum_of(scenario, &inputs)
}
