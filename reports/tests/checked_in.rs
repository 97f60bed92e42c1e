//! The checked-in certification of the CPU reference backend
//! (`reports/cpu/`, written by
//! `cargo run --release -p commcheck-report -- certify cpu --out reports/cpu`).
//!
//! - `checked_in_cpu_report_verifies` must pass on a clean clone: the report
//!   is verified against the must-pass list recorded *in the report* (the
//!   digest protects it), never against the live catalogue, so adding a
//!   suite does not break it.
//! - `checked_in_cpu_report_is_current` compares that list with the live
//!   catalogue. When they differ (a suite was added or changed since the
//!   report was written) it prints a warning naming the differences and
//!   passes, unless `COMMCHECK_REQUIRE_FRESH_REPORT=1`, when it fails
//!   (for a release check). Regenerate with the command above.

use std::path::PathBuf;

use commcheck_reference::cpu::CpuHarness;
use commcheck_report::Level;

fn checked_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("cpu")
        .join("report.json")
}

#[test]
fn checked_in_cpu_report_verifies() {
    let path = checked_in();
    let report = commcheck_report::verify_file(&path).unwrap_or_else(|problems| {
        panic!("{} is rejected:\n{}", path.display(), problems.join("\n"))
    });
    assert_eq!(report.provenance.backend.name, "commcheck-cpu");
    assert_eq!(
        report.level,
        Level::Full,
        "the CPU reference backend must certify at level full (DESIGN.md)"
    );
    for companion in ["junit.xml", "summary.md"] {
        assert!(
            path.with_file_name(companion).is_file(),
            "{companion} is missing beside the report"
        );
    }
}

#[test]
fn checked_in_cpu_report_is_current() {
    let Ok(report) = commcheck_report::load_file(&checked_in()) else {
        return; // checked_in_cpu_report_verifies reports it
    };
    let live = commcheck_report::must_pass(&CpuHarness::new());
    let added: Vec<&String> = live
        .iter()
        .filter(|n| !report.must_pass.contains(n))
        .collect();
    let removed: Vec<&String> = report
        .must_pass
        .iter()
        .filter(|n| !live.contains(n))
        .collect();
    let version = commcheck_report::verify::KIT_VERSION;
    if added.is_empty() && removed.is_empty() && report.provenance.kit_version == version {
        return;
    }
    let message = format!(
        "reports/cpu/report.json is stale (kit {} recorded, {version} built): {} must-pass case(s) added since \
         ({:?}…), {} removed ({:?}…); regenerate with \
         `cargo run --release -p commcheck-report -- certify cpu --out reports/cpu`",
        report.provenance.kit_version,
        added.len(),
        added.iter().take(5).collect::<Vec<_>>(),
        removed.len(),
        removed.iter().take(5).collect::<Vec<_>>(),
    );
    if std::env::var("COMMCHECK_REQUIRE_FRESH_REPORT").is_ok_and(|v| v == "1") {
        panic!("{message}");
    }
    eprintln!("warning: {message}");
}
