//! The CPU reference backend through a harness with **no instruments** reaches
//! `core`: every class-A and class-M case passes on black-box evidence alone
//! (late peers, lazy tensor work, second handles), and no class-I case is a
//! pass unless it rests on black-box evidence.

use commcheck::spec::Class;
use commcheck::{run_cases, Evidence, Instruments, Verdict};
use commcheck_reference::cpu::CpuHarness;

#[test]
fn no_instruments_reach_core() {
    let results = run_cases(
        CpuHarness::new().with_instruments(Instruments::NONE),
        |_| true,
    )
    .expect("the COMMCHECK_* settings are valid");
    for line in results.family_summary() {
        println!("{line}");
    }
    if let Some(calibration) = &results.calibration {
        println!("calibration: {calibration:?}");
    }
    let mut wrong = Vec::new();
    for case in &results.cases {
        let ok = match case.class {
            Class::A | Class::M => case.verdict == Verdict::Pass,
            Class::I => matches!(case.verdict, Verdict::Pass | Verdict::NotSupported),
        };
        if !ok {
            wrong.push(format!(
                "{} ({:?}) {}: {}",
                case.name,
                case.class,
                case.verdict,
                case.message.clone().unwrap_or_default()
            ));
        }
        if case.verdict == Verdict::Pass {
            assert_eq!(case.evidence, Evidence::BlackBox, "{}", case.name);
        }
        assert!(
            case.attributed.is_empty(),
            "{}: {:?}",
            case.name,
            case.attributed
        );
    }
    assert!(
        wrong.is_empty(),
        "{} case(s):\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Planted defects that break a class-A invariant fail it through a harness
/// with no instruments too (black-box forms of SUB-1, SUB-3, RET-6, and the
/// weak form of RET-2 on local subjects).
#[test]
fn black_box_forms_catch_planted_defects() {
    use commcheck_cpu::Defect;
    let defects = [
        Defect::ForkSharesLane,
        Defect::OrderAfterIgnored,
        Defect::RetainDropsEarly,
        Defect::ExecutorNotRetained,
    ];
    let mut missed = Vec::new();
    for defect in defects {
        let id = defect.invariant();
        let results = run_cases(
            CpuHarness::with_defect(defect).with_instruments(Instruments::NONE),
            |case| case.invariant().id == id,
        )
        .expect("the COMMCHECK_* settings are valid");
        for case in &results.cases {
            println!(
                "{defect}: {} {}: {}",
                case.name,
                case.verdict,
                case.message.clone().unwrap_or_default()
            );
        }
        let failed = results
            .cases
            .iter()
            .any(|case| case.verdict == Verdict::Fail);
        if !failed {
            missed.push(format!("{defect}: no case of {id} failed"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
