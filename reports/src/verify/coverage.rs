//! Steps 6 and 7 of [`verify`](super::verify): the must-pass list is
//! complete (one result for each listed case, nothing else but unclaimed
//! `not-supported` cases) and the claimed level is the one reached, with
//! only statuses it allows.

use std::collections::BTreeMap;

use super::messages::{case_at, shorten, NAME_CHARS};
use crate::model::{is_claimed, sole_results, Level, Provenance, ReportCase, Status};

/// The must-pass list and the results agree (step 6).
pub(super) fn check_completeness(
    must_pass: &[String],
    cases: &[ReportCase],
    provenance: &Provenance,
    problems: &mut Vec<String>,
) {
    if must_pass.is_empty() {
        problems.push("must_pass: empty (a report must list the cases it certifies)".to_owned());
    }
    let mut listed: BTreeMap<&str, usize> = BTreeMap::new();
    for name in must_pass {
        *listed.entry(name).or_default() += 1;
    }
    for (name, count) in listed.iter().filter(|(_, count)| **count > 1) {
        problems.push(format!(
            "must_pass: case {} is listed {count} times",
            shorten(name, NAME_CHARS)
        ));
    }
    let mut results: BTreeMap<&str, usize> = BTreeMap::new();
    for case in cases {
        *results.entry(&case.name).or_default() += 1;
    }
    for name in listed.keys() {
        let shown = shorten(name, NAME_CHARS);
        match results.get(name).copied().unwrap_or(0) {
            1 => {}
            0 => problems.push(format!(
                "case {shown}: must-pass case has no result (missing)"
            )),
            n => problems.push(format!(
                "case {shown}: {n} results (duplicate; expected exactly one)"
            )),
        }
    }
    for (index, case) in cases.iter().enumerate() {
        let claimed = is_claimed(case.subject, &provenance.claims);
        let at = case_at(index, &case.name);
        if listed.contains_key(case.name.as_str()) {
            if !claimed {
                problems.push(format!(
                    "{at}: must-pass, but `{}` is not claimed by the backend",
                    case.subject
                ));
            }
        } else if claimed {
            problems.push(format!(
                "{at}: a result for a claimed subject outside the must-pass list"
            ));
        } else if case.verdict != commcheck::Verdict::NotSupported {
            problems.push(format!(
                "{at}: `{}` is not claimed, so the case must be not-supported, not `{}`",
                case.subject, case.verdict
            ));
        } else if results.get(case.name.as_str()).copied().unwrap_or(0) > 1 {
            problems.push(format!("{at}: duplicate result (expected exactly one)"));
        }
    }
}

/// The claimed level is allowed by the statuses and reached (step 7).
pub(super) fn check_level(
    claimed: Level,
    must_pass: &[String],
    cases: &[ReportCase],
    problems: &mut Vec<String>,
) {
    let allowed: Vec<&str> = Status::ALL
        .iter()
        .filter(|s| s.certifies())
        .map(|s| s.as_str())
        .collect();
    let results = sole_results(cases);
    for name in must_pass {
        if let Some(Some(case)) = results.get(name.as_str()) {
            if claimed.requires(case.class) && !case.status.certifies() {
                problems.push(format!(
                    "case {}: status `{}` is not allowed at level {claimed} for a class-{:?} invariant (allowed: {})",
                    shorten(name, NAME_CHARS),
                    case.status,
                    case.class,
                    allowed.join(", ")
                ));
            }
        }
    }
    let reached = Level::reached(must_pass, cases);
    if reached != claimed {
        problems.push(format!(
            "level: the report claims `{claimed}`, but its results reach `{reached}`"
        ));
    }
}
