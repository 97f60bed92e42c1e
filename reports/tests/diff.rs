//! `diff`: regressions, fixes, new and removed cases.

mod common;

use commcheck::{Subject, Verdict};
use commcheck_report::{diff, Status};
use common::*;

#[test]
fn diff_finds_a_regression_a_fix_and_new_and_removed_cases() {
    let old = report(&[
        ("RET-6", Subject::Submit, Verdict::Pass),
        ("EXC-1", Subject::Submit, Verdict::Fail),
        ("RET-1", Subject::Submit, Verdict::Pass),
        ("SUM-1", SUM, Verdict::Pass),
    ]);
    let new = report(&[
        ("RET-6", Subject::Submit, Verdict::Timeout),
        ("EXC-1", Subject::Submit, Verdict::Pass),
        ("RET-1", Subject::Submit, Verdict::Pass),
        ("SUM-2", SUM, Verdict::Pass),
    ]);
    let diff = diff(&old, &new);
    assert_eq!(diff.regressions.len(), 1);
    assert_eq!(diff.regressions[0].name, "RET-6::submit");
    assert_eq!(
        (diff.regressions[0].before, diff.regressions[0].after),
        (Status::Pass, Status::Timeout)
    );
    assert_eq!(diff.fixes.len(), 1);
    assert_eq!(diff.fixes[0].name, "EXC-1::submit");
    assert_eq!(
        diff.new,
        vec![("SUM-2::all_reduce_sum".to_owned(), Status::Pass)]
    );
    assert_eq!(
        diff.removed,
        vec![("SUM-1::all_reduce_sum".to_owned(), Status::Pass)]
    );
    assert_eq!(diff.level, None, "both reports are at level none");
    let text = diff.render();
    assert!(text
        .contains("regressions (1):\n  RET-6::submit: pass -> timeout: RET-6 on submit: timeout"));
    assert!(text.contains("fixes (1):\n  EXC-1::submit: fail -> pass"));
    assert!(text.contains("new cases (1):") && text.contains("removed cases (1):"));
}

#[test]
fn identical_reports_have_no_changes() {
    let a = report(&standard(Verdict::Pass));
    let diff = diff(&a, &a);
    assert!(diff.is_empty());
    assert_eq!(diff.render(), "no changes\n");
}

#[test]
fn every_kind_of_regression_is_reported_and_named() {
    let old = report(&standard(Verdict::Pass));
    assert!(diff(&old, &old).regressed().is_empty());
    // A case that fails (from pass, or from not-supported).
    let mut failing = old.clone();
    failing.cases[0].status = Status::Fail;
    assert_eq!(
        diff(&old, &failing).regressed(),
        vec!["1 case(s) newly failing"]
    );
    let mut unsupported = old.clone();
    unsupported.cases[0].status = Status::NotSupported;
    assert_eq!(
        diff(&old, &unsupported).regressed(),
        vec!["1 case(s) newly not-supported"]
    );
    assert_eq!(
        diff(&unsupported, &failing).regressed(),
        vec!["1 case(s) newly failing"]
    );
    // A removed case.
    let mut shorter = old.clone();
    shorter.cases.pop();
    assert_eq!(diff(&old, &shorter).regressed(), vec!["1 case(s) removed"]);
    // A lower level (and no other change).
    let mut lower = old.clone();
    lower.level = commcheck_report::Level::Core;
    let mut higher = old.clone();
    higher.level = commcheck_report::Level::Full;
    assert_eq!(
        diff(&higher, &lower).regressed(),
        vec!["the level fell: full -> core"]
    );
    assert!(diff(&lower, &higher).regressed().is_empty());
    // Another backend, not another version of the same one.
    let mut other = old.clone();
    other.provenance.backend.name = "someone-else".into();
    let reasons = diff(&old, &other).regressed();
    assert_eq!(reasons.len(), 1);
    assert!(reasons[0].starts_with("another backend: "), "{reasons:?}");
    let mut newer = old.clone();
    newer.provenance.backend.version = "9.9.9".into();
    assert!(diff(&old, &newer).regressed().is_empty());
}
