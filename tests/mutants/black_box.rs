//! Mutant proofs with **no instruments**: what a check sees through the
//! public API alone (late peers, lazy tensor work, second handles) is enough
//! to catch these defects, each under its own ID.

use commcheck::{run_cases, CaseResult, Instruments, Subject, Verdict};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;

/// Runs `defect`'s own invariant on the CPU backend with no instruments.
fn black_box(defect: Defect) -> Vec<CaseResult> {
    crate::mutant_settings();
    let id = defect.invariant();
    let harness = CpuHarness::with_defect(defect).with_instruments(Instruments::NONE);
    let results = run_cases(harness, |case| case.invariant().id == id)
        .expect("the COMMCHECK_* settings are valid");
    crate::show(&results);
    results.cases
}

fn failed_on(cases: &[CaseResult], subject: Subject) -> bool {
    cases
        .iter()
        .any(|case| case.subject == subject && case.verdict.is_failure())
}

#[test]
fn can_4_native_cancel_errors_fails_on_a_local_and_an_operation_subject() {
    let cases = black_box(Defect::NativeCancelErrors);
    assert!(failed_on(&cases, Subject::LocalDependencies), "{cases:#?}");
    assert!(
        failed_on(
            &cases,
            Subject::Operation(commcheck::Operation::AllReduceSum)
        ),
        "{cases:#?}"
    );
}

#[test]
fn exc_8_releasable_after_deadline_fails_exc_8() {
    let cases = black_box(Defect::ReleasableAfterDeadline);
    assert!(
        cases.iter().any(|case| case.verdict == Verdict::Fail),
        "{cases:#?}"
    );
}

#[test]
fn exc_1_blocking_is_complete_fails_exc_1() {
    let cases = black_box(Defect::BlockingIsComplete);
    assert!(
        cases.iter().any(|case| case.verdict == Verdict::Fail),
        "{cases:#?}"
    );
    for case in &cases {
        println!("time to first failure of {}: {} ms", case.name, case.millis);
    }
}
