//! The harness every backend target fuzzes: the CPU reference backend, with
//! the planted defect named by `COMMCHECK_FUZZ_DEFECT` (a `Defect` variant's
//! name, e.g. `AgreementLocal`), to prove the target finds it.

use std::sync::OnceLock;

use commcheck_cpu::Defect;
use commcheck_reference::cpu::CpuHarness;

pub fn harness() -> &'static CpuHarness {
    static HARNESS: OnceLock<CpuHarness> = OnceLock::new();
    HARNESS.get_or_init(|| {
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
    })
}
