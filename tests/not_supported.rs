//! Nothing unchecked is `pass`: an unclaimed operation is `not-supported` for
//! every one of its IDs, and a case that needs a missing instrument is
//! `not-supported` too, never `pass`.

use std::collections::BTreeSet;

use commcheck::{catalogue, run_cases, Instruments, Operation, Subject, Verdict};
use commcheck_reference::cpu::CpuHarness;

/// The SPEC IDs of each operation's own family.
fn family_ids(operation: Operation) -> Vec<&'static str> {
    commcheck::spec::INVARIANTS
        .iter()
        .filter(|invariant| invariant.family == operation.family())
        .filter(|invariant| match invariant.id {
            "GAT-1" => operation == Operation::AllGatherEven,
            "GAT-2" => operation == Operation::AllGatherUneven,
            _ => true,
        })
        .map(|invariant| invariant.id)
        .collect()
}

#[test]
fn unclaimed_operations_are_not_supported_for_every_id() {
    let harness = CpuHarness::new().claiming(&[Operation::AllReduceSum]);
    let cases = catalogue(&harness);
    for operation in Operation::ALL {
        let on_operation: Vec<_> = cases
            .iter()
            .filter(|case| case.subject() == Subject::Operation(operation))
            .collect();
        let ids: BTreeSet<_> = on_operation
            .iter()
            .map(|case| case.invariant().id)
            .collect();
        for id in family_ids(operation) {
            assert!(ids.contains(id), "{operation}: no case for {id}");
        }
        for case in &on_operation {
            let unsupported = case.unsupported().is_some();
            assert_eq!(
                unsupported,
                operation != Operation::AllReduceSum,
                "{}: claimed {}, unsupported reason {:?}",
                case.name(),
                operation == Operation::AllReduceSum,
                case.unsupported()
            );
        }
    }
    // Running them never yields `pass`.
    let results = run_cases(
        harness,
        |case| matches!(case.subject(), Subject::Operation(op) if op != Operation::AllReduceSum),
    )
    .expect("the COMMCHECK_* settings are valid");
    assert!(!results.cases.is_empty());
    for case in &results.cases {
        assert_eq!(case.verdict, Verdict::NotSupported, "{}", case.name);
        assert!(
            case.message
                .as_deref()
                .unwrap_or("")
                .contains("not claimed"),
            "{}: {:?}",
            case.name,
            case.message
        );
    }
}

#[test]
fn missing_instruments_make_their_cases_not_supported() {
    let harness = CpuHarness::new()
        .claiming(&[Operation::AllReduceSum])
        .with_instruments(Instruments::NONE);
    let results = run_cases(harness, |case| {
        matches!(
            case.subject(),
            Subject::LocalDependencies | Subject::Operation(Operation::AllReduceSum)
        )
    })
    .expect("the COMMCHECK_* settings are valid");
    let by_name = |name: &str| {
        results
            .cases
            .iter()
            .find(|case| case.name == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    };
    // Class I checks need instruments: not-supported, with the instrument named.
    for name in [
        "RET-1::local_dependencies",
        "RET-3::all_reduce_sum",
        "CAN-5::all_reduce_sum",
        "EXC-7::all_reduce_sum",
    ] {
        let case = by_name(name);
        assert_eq!(
            case.verdict,
            Verdict::NotSupported,
            "{name}: {:?}",
            case.message
        );
        assert!(
            case.message.as_deref().unwrap_or("").contains("instrument"),
            "{name}: {:?}",
            case.message
        );
    }
    // Black-box value checks need none: they still run and pass.
    assert_eq!(by_name("SUM-1::all_reduce_sum").verdict, Verdict::Pass);
    // Nothing that needed a missing instrument passed: every pass rests on
    // black-box evidence (a class-I invariant may, in its weak form: RET-2),
    // and its case needs no instrument on this harness.
    let harness = CpuHarness::new()
        .claiming(&[Operation::AllReduceSum])
        .with_instruments(Instruments::NONE);
    let cases = catalogue(&harness);
    for case in results.cases.iter().filter(|c| c.verdict == Verdict::Pass) {
        assert_eq!(
            case.evidence,
            commcheck::Evidence::BlackBox,
            "{}",
            case.name
        );
        let listed = cases
            .iter()
            .find(|c| c.name() == case.name)
            .unwrap_or_else(|| panic!("no case {}", case.name));
        assert_eq!(listed.needs(), Instruments::NONE, "{} passed", case.name);
    }
}

/// Work faults and submission faults are separate instruments: a harness
/// that can fail work but not refuse a submission on demand (it declares
/// `fault` only) gets SUB-4 `not-supported`, naming the submission fault
/// instrument, never a `fail` blaming the harness; the checks that inject
/// work faults still run and pass.
#[test]
fn work_faults_without_submission_faults_leave_only_sub4_unsupported() {
    let mut instruments = Instruments::ALL;
    instruments.submission_fault = false;
    let harness = CpuHarness::new()
        .claiming(&[Operation::AllReduceSum])
        .with_instruments(instruments);
    let results = run_cases(harness, |case| {
        ["SUB-4", "EXC-6", "EXC-7", "CAN-9"].contains(&case.invariant().id)
            && matches!(
                case.subject(),
                Subject::LocalDependencies | Subject::Operation(Operation::AllReduceSum)
            )
    })
    .expect("the COMMCHECK_* settings are valid");
    assert!(results.cases.iter().any(|c| c.invariant == "SUB-4"));
    for case in &results.cases {
        let message = case.message.as_deref().unwrap_or("");
        if case.invariant == "SUB-4" {
            assert_eq!(
                case.verdict,
                Verdict::NotSupported,
                "{}: {message}",
                case.name
            );
            assert!(
                message.contains("submission fault injection"),
                "{}: {message}",
                case.name
            );
        } else {
            assert_eq!(case.verdict, Verdict::Pass, "{}: {message}", case.name);
        }
    }
}
