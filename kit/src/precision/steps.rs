//! The steps the matrix mutates that no family suite builds as scenarios:
//! P2P-1's bundles (member `i` of a scenario is value `i` of the bundle)
//! and the completion matrix's standard submissions (judged by
//! `same_values`), and the world sizes of the value checks.

use crate::dtype::Dtype;
use crate::suites::p2p;
use crate::suites::scenario::{Scenario, Semantics};

/// World sizes of the value checks.
pub(super) const WORLDS: &[usize] = crate::suites::scenario::VALUE_WORLDS;

/// P2P-1's bundles as scenarios: member `i` holds value `i` of the bundle
/// (as sent), the "root" names the value the receiver's output `i` should
/// be; every member is judged as the receiver of its own value.
pub(super) fn p2p_scenarios(
    seed: u64,
    size: usize,
    dtype: Dtype,
    sweep: &[usize],
) -> Vec<Scenario> {
    p2p::p2p1_links(seed, size, p2p::p2p1_first_id(dtype), sweep)
        .into_iter()
        .flat_map(|link| {
            let payloads: Vec<Vec<f32>> = link
                .shapes
                .iter()
                .enumerate()
                .map(|(index, shape)| p2p::payload(dtype, seed, link.id, index, shape))
                .collect();
            (0..link.shapes.len()).map(move |index| Scenario {
                label: format!("value {index} of route {}", link.id),
                common: Default::default(),
                dtype,
                semantics: Semantics::Broadcast { root: index },
                shapes: link.shapes.clone(),
                inputs: payloads.clone(),
            })
        })
        .collect()
}

pub(super) fn standard_cases() -> Vec<Vec<Scenario>> {
    use crate::matrix::values;
    [2usize, 3, 4, 8]
        .into_iter()
        .map(|n| {
            let scenario = |label: &str, semantics, shapes: Vec<Vec<usize>>, inputs| Scenario {
                label: label.to_owned(),
                common: Default::default(),
                dtype: Dtype::F32,
                semantics,
                shapes,
                inputs,
            };
            let counts: Vec<usize> = (0..n).map(|r| r + 1).collect();
            vec![
                scenario(
                    "all_reduce_sum",
                    Semantics::Sum,
                    vec![vec![4]; n],
                    (0..n).map(|r| values(r, 4)).collect(),
                ),
                scenario(
                    "all_gather_even",
                    Semantics::Gather { axis: 0 },
                    vec![vec![2]; n],
                    (0..n).map(|r| values(r, 2)).collect(),
                ),
                scenario(
                    "all_gather_uneven",
                    Semantics::Gather { axis: 0 },
                    counts.iter().map(|&c| vec![c]).collect(),
                    (0..n).map(|r| values(r, counts[r])).collect(),
                ),
                scenario(
                    "variable_all_to_all",
                    Semantics::AllToAll {
                        axis: 0,
                        matrix: vec![vec![1; n]; n],
                    },
                    vec![vec![n]; n],
                    (0..n).map(|r| values(r, n)).collect(),
                ),
                scenario(
                    "broadcast",
                    Semantics::Broadcast { root: n - 1 },
                    vec![vec![4]; n],
                    (0..n)
                        .map(|r| {
                            if r == n - 1 {
                                values(r, 4)
                            } else {
                                vec![0.0; 4]
                            }
                        })
                        .collect(),
                ),
            ]
        })
        .collect()
}
