//! Mutant proofs: every check can fail.
//!
//! For every planted defect of the CPU reference backend, the cases of the
//! invariant it breaks must report a failure verdict, while sentinel cases of
//! unrelated families keep passing (so a verdict points at its cause).
//! One module per family; each lists the defects it proves in `PROVEN`.

mod a2a;
mod agr;
mod bar;
mod black_box;
mod brd;
mod can;
mod exc;
mod gat;
mod p2p;
mod ret;
mod sub;
mod sum;

use commcheck::{run_cases, RunResults, Verdict};
use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;

/// One case per family, on the simplest subject that family has.
const SENTINELS: &[&str] = &[
    "RET-1::local_dependencies",
    "EXC-5::local_dependencies",
    "CAN-1::local_dependencies",
    "SUB-2::submit",
    "SUM-1::all_reduce_sum",
    "GAT-1::all_gather_even",
    "BRD-1::broadcast",
    "AGR-1::agree_success",
];

fn family(id: &str) -> &str {
    id.split('-').next().unwrap_or(id)
}

/// Watchdog for mutant runs: some defects make work hang on purpose, and a
/// hang is proven as soon as the watchdog fires. It is longer than twice
/// `slack::RELEASE`, so checks that bound their own waits report their own
/// `fail` first; hung cases overlap (`COMMCHECK_JOBS`), as they use no CPU.
const MUTANT_CASE_TIMEOUT_MS: &str = "11000";

/// The watchdog and parallelism of mutant runs (set once per process).
pub fn mutant_settings() {
    static WATCHDOG: std::sync::Once = std::sync::Once::new();
    WATCHDOG.call_once(|| {
        std::env::set_var("COMMCHECK_CASE_TIMEOUT_MS", MUTANT_CASE_TIMEOUT_MS);
        std::env::set_var("COMMCHECK_JOBS", "4");
    });
}

/// Runs the defect's own invariant and the sentinels of other families.
pub fn prove(defect: Defect) -> RunResults {
    mutant_settings();
    let id = defect.invariant();
    let results = run_cases(CpuHarness::with_defect(defect), |case| {
        let name = case.name();
        case.invariant().id == id
            || (SENTINELS.contains(&name.as_str()) && family(&name) != family(id))
    });
    let own: Vec<_> = results.cases.iter().filter(|c| c.invariant == id).collect();
    assert!(!own.is_empty(), "{defect}: no case checks {id}");
    assert!(
        own.iter().all(|c| c.verdict != Verdict::NotSupported),
        "{defect}: {id} is not-supported on the CPU harness: {own:#?}"
    );
    assert!(
        own.iter().any(|c| c.verdict.is_failure()),
        "{defect}: no case of {id} failed:\n{}",
        own.iter()
            .map(|c| format!("  {} {}", c.name, c.verdict))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let sentinels: Vec<_> = results.cases.iter().filter(|c| c.invariant != id).collect();
    let failing: Vec<_> = sentinels
        .iter()
        .filter(|c| c.verdict.is_failure())
        .collect();
    assert!(
        failing.len() * 2 <= sentinels.len(),
        "{defect}: unrelated families fail along with {id}: {:#?}",
        failing
            .iter()
            .map(|c| format!(
                "{} {}: {}",
                c.name,
                c.verdict,
                c.message.clone().unwrap_or_default()
            ))
            .collect::<Vec<_>>()
    );
    results
}

/// Prints the verdicts of a proof when the test is run with `--nocapture`.
pub fn show(results: &RunResults) {
    for case in &results.cases {
        println!(
            "{:<32} {:<13} {}",
            case.name,
            case.verdict,
            case.message.clone().unwrap_or_default()
        );
    }
}

/// Declares one test per defect, named after the defect, and `PROVEN`.
#[macro_export]
macro_rules! mutants {
    ($($test:ident => $defect:ident,)*) => {
        $(
            #[test]
            fn $test() {
                $crate::show(&$crate::prove(commcheck_cpu::Defect::$defect));
            }
        )*

        /// The defects this module proves.
        pub const PROVEN: &[commcheck_cpu::Defect] = &[$(commcheck_cpu::Defect::$defect),*];
    };
}

/// Every defect whose invariant the kit checks has a proof in some module.
#[test]
fn every_covered_defect_has_a_proof() {
    let proven: Vec<Defect> = [
        a2a::PROVEN,
        agr::PROVEN,
        bar::PROVEN,
        brd::PROVEN,
        can::PROVEN,
        exc::PROVEN,
        gat::PROVEN,
        p2p::PROVEN,
        ret::PROVEN,
        sub::PROVEN,
        sum::PROVEN,
    ]
    .concat();
    let covered = commcheck::catalogue(&CpuHarness::new())
        .iter()
        .filter(|case| case.unsupported().is_none())
        .map(|case| case.invariant().id)
        .collect::<std::collections::BTreeSet<_>>();
    for defect in Defect::ALL {
        if covered.contains(defect.invariant()) {
            assert!(proven.contains(defect), "{defect} has no mutant proof");
        }
    }
}
