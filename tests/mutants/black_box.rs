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

/// `defect`, run black-box, fails its own invariant on each of `subjects`.
fn fails_on(defect: Defect, subjects: &[Subject]) {
    let cases = black_box(defect);
    for subject in subjects {
        assert!(failed_on(&cases, *subject), "{subject}: {cases:#?}");
    }
}

const ALL_REDUCE_SUM: Subject = Subject::Operation(commcheck::Operation::AllReduceSum);
const SEND_RECEIVE: Subject = Subject::Operation(commcheck::Operation::SendReceive);

#[test]
fn can_4_native_cancel_errors_fails_on_a_local_and_an_operation_subject() {
    fails_on(
        Defect::NativeCancelErrors,
        &[Subject::LocalDependencies, ALL_REDUCE_SUM],
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

/// EXC-4 with no instruments keeps the other lane busy with a second
/// late-peer round (no lazy work, no timing): `wait()` waiting for the whole
/// device fails EXC-4 on local subjects (peer-fed) and on operations.
#[test]
fn exc_4_wait_for_device_fails_exc_4_without_lazy_work() {
    fails_on(
        Defect::WaitForDevice,
        &[Subject::LocalDependencies, ALL_REDUCE_SUM],
    );
}

/// EXC-6 with no fault injection provokes its error through the public API
/// (a header mismatch on `send_receive`): an error replaced by success fails
/// EXC-6 there.
#[test]
fn exc_6_non_sticky_error_fails_exc_6_with_a_provoked_error() {
    fails_on(Defect::NonStickyError, &[SEND_RECEIVE]);
}

/// CAN-9 with no fault injection: work failed by a header mismatch on
/// `send_receive` must yield `Err` from `wait_bounded`; reporting it
/// `Completed` fails CAN-9 there.
#[test]
fn can_9_failed_is_completed_fails_can_9_with_a_provoked_error() {
    fails_on(Defect::FailedIsCompleted, &[SEND_RECEIVE]);
}

/// The same on the eager personality, which has no lazy work at all: local
/// subjects are kept pending by the late peer's reduction alone.
#[test]
fn eager_black_box_catches_planted_defects_on_local_subjects() {
    crate::mutant_settings();
    // (EarlyCompletion, "complete once started", cannot arise here: peer-fed
    // local work waits in its queue behind the reduction and never starts early.)
    for defect in [
        Defect::WaitForDevice,
        Defect::CompletedAtDeadline,
        Defect::EarlyDeadline,
        Defect::NonMonotonicCompletion,
    ] {
        let id = defect.invariant();
        let harness = CpuHarness::with_defect(defect)
            .with_personality("eager")
            .expect("a known personality")
            .with_instruments(Instruments::NONE);
        let results = run_cases(harness, |case| {
            case.invariant().id == id && case.subject() == Subject::LocalDependencies
        })
        .expect("the COMMCHECK_* settings are valid");
        crate::show(&results);
        assert!(
            failed_on(&results.cases, Subject::LocalDependencies),
            "{defect}: {:#?}",
            results.cases
        );
    }
}

/// Runs `defect`'s own invariant on the CPU backend offering `instruments`
/// only, and asserts that it fails on each of `subjects`: the check decides
/// with that set alone (the late peer keeps the work pending; the backend's
/// own error report stands in for the observer).
fn fails_with(defect: Defect, instruments: &str, subjects: &[Subject]) {
    crate::mutant_settings();
    let id = defect.invariant();
    let set: Instruments = instruments.parse().expect("a known instrument set");
    let harness = CpuHarness::with_defect(defect).with_instruments(set);
    let results = run_cases(harness, |case| {
        case.invariant().id == id && subjects.contains(&case.subject())
    })
    .expect("the COMMCHECK_* settings are valid");
    crate::show(&results);
    for subject in subjects {
        assert!(
            failed_on(&results.cases, *subject),
            "{defect} with {instruments} only, {subject}: {:#?}",
            results.cases
        );
    }
}

#[test]
fn exc_6_and_can_9_fail_with_fault_injection_alone() {
    fails_with(Defect::NonStickyError, "fault", &[ALL_REDUCE_SUM]);
    fails_with(Defect::SubmissionClearsError, "fault", &[ALL_REDUCE_SUM]);
    fails_with(Defect::FailedIsCompleted, "fault", &[ALL_REDUCE_SUM]);
}

#[test]
fn ret_4_and_can_6_fail_with_the_probe_alone() {
    fails_with(Defect::DropReleasesPending, "probe", &[ALL_REDUCE_SUM]);
    fails_with(Defect::QuarantineDropsLive, "probe", &[ALL_REDUCE_SUM]);
}
