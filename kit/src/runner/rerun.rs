//! What a rerun takes to restore a certification: the violations cases
//! recorded for other invariants, grouped ([`seen_by`]), and the cases to
//! run again once the backend is fixed ([`to_rerun`]), as one command
//! ([`command`]).
//!
//! A case's record keeps what it saw until the case runs again: with a
//! planted SUM-1 bug fixed, rerunning `SUM-1::all_reduce_sum` alone leaves
//! the SUM-1 violations that five other cases recorded, and the merged
//! report stays at level `none`. The rerun takes those cases too.
//!
//! ```
//! use commcheck::runner::rerun::command;
//!
//! assert_eq!(
//!     command(42, Some("commcheck"), &["SUM-1::all_reduce_sum", "SUM-2::all_reduce_sum"]),
//!     "COMMCHECK_SEED=42 cargo test --test commcheck -- --exact SUM-1::all_reduce_sum SUM-2::all_reduce_sum"
//! );
//! ```

use super::level::Graded;
use crate::results::Verdict;

/// The violations of one invariant that one case recorded while checking
/// its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenBy<'a> {
    /// The invariant they violate, e.g. `SUM-1`.
    pub invariant: &'a str,
    /// The case that saw them.
    pub case: &'a str,
    /// How many it recorded.
    pub count: usize,
    /// The first one's message.
    pub first: &'a str,
    /// Whether a case of `invariant` fails in the same results (otherwise
    /// the violation fails nothing, and keeps the level at `none`).
    pub failed: bool,
}

/// The violations `cases` recorded for other invariants, one entry per
/// invariant and observing case, in the order they were first recorded.
pub fn seen_by<G: Graded>(cases: &[G]) -> Vec<SeenBy<'_>> {
    let failed = super::level::failing(cases);
    let mut groups: Vec<SeenBy<'_>> = Vec::new();
    for case in cases {
        for seen in case.attributed() {
            match groups
                .iter_mut()
                .find(|g| g.case == case.name() && g.invariant == seen.invariant)
            {
                Some(group) => group.count += 1,
                None => groups.push(SeenBy {
                    invariant: &seen.invariant,
                    case: case.name(),
                    count: 1,
                    first: &seen.message,
                    failed: failed.contains(seen.invariant.as_str()),
                }),
            }
        }
    }
    groups
}

/// One line for a group: `SUM-1 ×85 seen by SUM-2::all_reduce_sum (first: …)`.
/// The message is cut after [`FIRST_CHARS`] characters.
pub fn describe(group: &SeenBy<'_>) -> String {
    let first = match group.first.char_indices().nth(FIRST_CHARS) {
        Some((at, _)) => format!("{}…", &group.first[..at]),
        None => group.first.to_owned(),
    };
    format!(
        "{} ×{} seen by {}{} (first: {})",
        group.invariant,
        group.count,
        group.case,
        if group.failed {
            ""
        } else {
            ", and no case of it failed"
        },
        first
    )
}

/// How much of a group's first message [`describe`] keeps.
pub const FIRST_CHARS: usize = 200;

/// The cases to run again once the backend is fixed, in the order of
/// `cases`: every failing or inconclusive case, and every case that
/// recorded a violation of another invariant (its record keeps it until it
/// runs again).
pub fn to_rerun<G: Graded>(cases: &[G]) -> Vec<&str> {
    cases
        .iter()
        .filter(|case| {
            case.fails() || case.verdict() == Verdict::Inconclusive || !case.attributed().is_empty()
        })
        .map(Graded::name)
        .collect()
}

/// The command that reruns `names` of the test target `suite` (`None`:
/// a placeholder) under base seed `seed`, so that its records merge with
/// the run's others.
pub fn command(seed: u64, suite: Option<&str>, names: &[&str]) -> String {
    format!(
        "COMMCHECK_SEED={seed} cargo test --test {} -- --exact {}",
        suite.unwrap_or("<your suite>"),
        names.join(" ")
    )
}

/// The name of the cargo test target this process runs: its executable's
/// name without the hash cargo appends (`commcheck-0123456789abcdef` is
/// `commcheck`).
pub fn this_suite() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let stem = exe.file_stem()?.to_str()?;
    Some(match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Attributed, CaseResult};
    use crate::runner::level::tests::case;
    use crate::spec::Class;

    fn seen(name: &str, verdict: Verdict, invariant: &str, n: usize) -> CaseResult {
        CaseResult {
            attributed: (0..n)
                .map(|i| Attributed {
                    invariant: invariant.to_owned(),
                    message: format!("wrong value {i}"),
                })
                .collect(),
            ..case(name, Class::A, verdict)
        }
    }

    #[test]
    fn violations_group_by_invariant_and_case_and_the_rerun_takes_their_cases() {
        let cases = [
            case("SUM-1::all_reduce_sum", Class::A, Verdict::Pass),
            seen("SUM-2::all_reduce_sum", Verdict::Pass, "SUM-1", 85),
            seen("RET-3::all_reduce_sum", Verdict::Pass, "SUM-1", 1),
            case("BAR-1::barrier", Class::A, Verdict::Pass),
            case("CAN-2::barrier", Class::A, Verdict::Inconclusive),
        ];
        let groups = seen_by(&cases);
        assert_eq!(groups.len(), 2);
        assert_eq!(
            (groups[0].case, groups[0].count),
            ("SUM-2::all_reduce_sum", 85)
        );
        assert!(!groups[0].failed);
        assert_eq!(
            describe(&groups[1]),
            "SUM-1 ×1 seen by RET-3::all_reduce_sum, and no case of it failed (first: wrong value 0)"
        );
        assert_eq!(
            to_rerun(&cases),
            [
                "SUM-2::all_reduce_sum",
                "RET-3::all_reduce_sum",
                "CAN-2::barrier"
            ]
        );
    }
}
