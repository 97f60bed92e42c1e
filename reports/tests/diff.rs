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
