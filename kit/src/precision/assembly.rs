//! Assembling the matrix: every check's steps (SUM-1, GAT-1, GAT-2, A2A-1,
//! BRD-1, P2P-1) on every world and seed, each member's right output
//! mutated by each of the check's mutations and judged by the check's own
//! verifier (the value checks' `judge`, or the matrix's `same_values` for the
//! standard submissions of RET, EXC and CAN); then AGR-1's rows.

use super::agreement::agreement_rows;
use super::mutations::{
    Catalogue, Mutate, ALL_TO_ALL, BROADCAST, COMMON, GATHER, STANDARD, SUM, TRANSFER, UNEVEN,
};
use super::report::{MatrixRow, MutationMatrix};
use super::steps::{p2p_scenarios, standard_cases, WORLDS};
use crate::dtype::Dtype;
use crate::operation::Operation;
use crate::suites::scenario::{judge, Expected, Scenario, Semantics};
use crate::suites::{a2a, brd, gat, sum as sum_suite};

/// Seeds every row is tried with (a case's seed picks its data).
const SEEDS: [u64; 3] = [0, 1, 0x00c0_ffee];

/// The sweep's largest message stands for itself at this many elements:
/// its data is the same function of (member, index) at every length, and
/// no mutation of the catalogue depends on the length past a 4096-element
/// chunk, so the matrix stays quick.
const LARGEST: usize = (1 << 16) + 3;

/// How a check's suite builds its steps (seed, world size, dtype, sweep).
type Steps = fn(u64, usize, Dtype, &[usize]) -> Vec<Scenario>;

/// The matrix, computed (no backend involved).
pub fn mutation_matrix() -> MutationMatrix {
    let mut rows = Vec::new();
    let sweep_of = |dtype: Dtype, size: usize| -> Vec<usize> {
        let (counts, _) = crate::suites::scenario::sweep_for_world(
            dtype,
            &[],
            None,
            (size, WORLDS.iter().copied().max().unwrap_or(size)),
        );
        counts.into_iter().map(|count| count.min(LARGEST)).collect()
    };
    let checks: [(&'static str, Steps, Catalogue); 6] = [
        ("SUM-1", sum_suite::scenarios, SUM),
        ("GAT-1", gat::even_scenarios, GATHER),
        ("GAT-2", gat::uneven_scenarios, UNEVEN),
        ("A2A-1", a2a::scenarios, ALL_TO_ALL),
        ("BRD-1", brd::scenarios, BROADCAST),
        ("P2P-1", p2p_scenarios, TRANSFER),
    ];
    for (check, steps, mutations) in checks {
        for dtype in Dtype::ALL {
            let cases: Vec<Vec<Scenario>> = WORLDS
                .iter()
                .filter(|&&size| size > 1 || check != "P2P-1")
                .flat_map(|&size| {
                    SEEDS.map(|seed| steps(seed, size, dtype, &sweep_of(dtype, size)))
                })
                .collect();
            let all: Vec<(&'static str, Mutate)> =
                mutations.iter().chain(COMMON).copied().collect();
            rows.extend(tally((check, dtype), &cases, &all, judge_scenario));
        }
    }
    let standard = standard_cases();
    rows.extend(tally(
        ("same_values", Dtype::F32),
        &standard,
        STANDARD,
        same_values,
    ));
    rows.extend(agreement_rows());
    MutationMatrix { rows }
}

/// Judges a wrong output by the value checks' verifier.
fn judge_scenario(_: &Scenario, expected: &Expected, got: &[f32]) -> bool {
    judge(expected, &expected.shape, got).is_some()
}

/// Judges by the matrix's verifier ([`Operation::same_values`]).
fn same_values(scenario: &Scenario, expected: &Expected, got: &[f32]) -> bool {
    let operation = match scenario.semantics {
        Semantics::Sum => Operation::AllReduceSum,
        Semantics::Gather { .. } => Operation::AllGatherEven,
        Semantics::AllToAll { .. } => Operation::VariableAllToAll,
        Semantics::Broadcast { .. } => Operation::Broadcast,
    };
    !operation.same_values(got, &expected.values)
}

/// The rows of one check in one dtype: over every case, whether each
/// mutation arose and was refused (each expectation computed once).
fn tally(
    (check, dtype): (&'static str, Dtype),
    cases: &[Vec<Scenario>],
    mutations: &[(&'static str, Mutate)],
    refuses: fn(&Scenario, &Expected, &[f32]) -> bool,
) -> Vec<MatrixRow> {
    let mut rows: Vec<MatrixRow> = mutations
        .iter()
        .map(|(mutation, _)| MatrixRow {
            check,
            dtype,
            mutation,
            cases: 0,
            rejected: 0,
            applies: false,
        })
        .collect();
    for steps in cases {
        let mut seen = vec![(false, false); mutations.len()];
        for scenario in steps {
            for member in 0..scenario.size() {
                let expected = scenario.expected(member);
                let right = bits(&expected.values);
                for (k, (_, mutate)) in mutations.iter().enumerate() {
                    let Some(wrong) = mutate(scenario, member, &expected) else {
                        continue;
                    };
                    rows[k].applies = true;
                    if bits(&wrong) != right {
                        seen[k].0 = true;
                        seen[k].1 |= refuses(scenario, &expected, &wrong);
                    }
                }
            }
        }
        for (row, (changed, refused)) in rows.iter_mut().zip(seen) {
            row.cases += usize::from(changed);
            row.rejected += usize::from(changed && refused);
        }
    }
    rows
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[cfg(test)]
mod tests {
    use super::super::blocks::extents_swapped;
    use super::*;

    #[test]
    fn the_old_middle_axis_gather_could_not_tell_swapped_extents() {
        // [2, 3, 2] on axis 1: outer and inner extents are equal, so the
        // stride confusion yields the right bytes (the GAT-1 blind spot).
        let scenario = Scenario {
            label: "old".into(),
            common: Default::default(),
            dtype: Dtype::F32,
            semantics: Semantics::Gather { axis: 1 },
            shapes: vec![vec![2, 3, 2]; 2],
            inputs: (0..2)
                .map(|m| crate::suites::scenario::elements(Dtype::F32, 0, 1, m, 12))
                .collect(),
        };
        let wrong = extents_swapped(&scenario, 0, &scenario.expected(0)).unwrap();
        assert_eq!(bits(&wrong), bits(&scenario.expected(0).values));
        let mut new = scenario.clone();
        new.shapes = vec![vec![2, 3, 4]; 2];
        new.inputs = (0..2)
            .map(|m| crate::suites::scenario::elements(Dtype::F32, 0, 1, m, 24))
            .collect();
        let expected = new.expected(0);
        let wrong = extents_swapped(&new, 0, &expected).unwrap();
        assert!(judge_scenario(&new, &expected, &wrong));
    }
}
