//! The harness every backend target fuzzes: the CPU reference backend, with
//! the planted defect named by `COMMCHECK_FUZZ_DEFECT` (a `Defect` variant's
//! name, e.g. `AgreementLocal`), to prove the target finds it, in the
//! personality named by `COMMCHECK_FUZZ_PERSONALITY` (e.g. `rendezvous`; the
//! defect's own, or `lazy`, when unset).

use std::sync::OnceLock;

use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;

pub fn harness() -> &'static CpuHarness {
    static HARNESS: OnceLock<CpuHarness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let harness = defective();
        match std::env::var("COMMCHECK_FUZZ_PERSONALITY") {
            Ok(name) if !name.is_empty() => {
                harness.with_personality(&name).unwrap_or_else(|error| {
                    eprintln!("COMMCHECK_FUZZ_PERSONALITY={name}: {}", error.0);
                    std::process::exit(2)
                })
            }
            _ => harness,
        }
    })
}

/// The CPU harness with the defect `COMMCHECK_FUZZ_DEFECT` names, if any.
fn defective() -> CpuHarness {
    let name = std::env::var("COMMCHECK_FUZZ_DEFECT").unwrap_or_default();
    if name.is_empty() {
        return CpuHarness::new();
    }
    match Defect::ALL.iter().find(|defect| defect.name() == name) {
        Some(&defect) => CpuHarness::with_defect(defect),
        None => {
            let names: Vec<&str> = Defect::ALL.iter().map(|d| d.name()).collect();
            eprintln!(
                "COMMCHECK_FUZZ_DEFECT={name}: no such defect; one of {}",
                names.join(", ")
            );
            std::process::exit(2)
        }
    }
}
