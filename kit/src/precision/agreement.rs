//! AGR-1's rows: verdicts, not tensors. Each wrong agreement (a
//! disjunction, one member's own status, ...) is judged by AGR-1's own
//! verifier over every pattern of statuses of every world. (BRD-2 owes an
//! error, never a value: it has no row.)

use super::report::MatrixRow;
use super::steps::WORLDS;
use crate::dtype::Dtype;
use crate::suites::agr;

pub(super) fn agreement_rows() -> Vec<MatrixRow> {
    type Agree = fn(&[bool], usize) -> bool;
    let mutations: [(&'static str, Agree); 6] = [
        ("a disjunction instead of a conjunction", |s, _| {
            s.iter().any(|&x| x)
        }),
        ("the member's own status", |s, m| s[m]),
        ("member 0's status", |s, _| s[0]),
        ("the last member ignored", |s, _| {
            s[..s.len() - 1].iter().all(|&x| x)
        }),
        ("always true", |_, _| true),
        ("always false", |_, _| false),
    ];
    mutations
        .into_iter()
        .map(|(mutation, agree)| {
            let (mut cases, mut rejected) = (0, 0);
            for &n in WORLDS {
                let patterns = agr::patterns(n);
                // The mutation arises where its answer differs from the
                // right one; AGR-1's verifier refuses an answer that is not
                // the conjunction of the statuses.
                let right = |s: &Vec<bool>| s.iter().all(|&x| x);
                let changed = patterns
                    .iter()
                    .any(|s| (0..n).any(|m| agree(s, m) != right(s)));
                let refused = patterns
                    .iter()
                    .any(|s| (0..n).any(|m| !agr::agrees(s, agree(s, m))));
                cases += usize::from(changed);
                rejected += usize::from(changed && refused);
            }
            MatrixRow {
                check: "AGR-1",
                dtype: Dtype::F32,
                mutation,
                cases,
                rejected,
                applies: true,
            }
        })
        .collect()
}
