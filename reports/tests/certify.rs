//! The one end-to-end test: `certify` on the CPU reference backend through
//! the library, on a small selection of cases.

use commcheck_reference::cpu::CpuHarness;
use commcheck_report::certify::{
    JUNIT_FILE, PARTIAL_FILE, PICTURE_FILE, REPORT_FILE, SUMMARY_FILE,
};
use commcheck_report::{certify, CertifyOptions, Level, Status};
use serde_json::Value;

#[test]
fn certify_cpu_on_a_small_selection() {
    let out = std::env::temp_dir().join(format!("commcheck-report-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let options = CertifyOptions {
        keep_partial: true,
        progress: commcheck_report::ProgressStyle::Off,
        ..CertifyOptions::new(&out)
    };
    let selected = |id: &str| matches!(id, "EXC-10" | "RET-6");
    let certification = certify(
        CpuHarness::new(),
        |case| selected(case.invariant().id),
        &options,
    );
    let certification = certification.unwrap_or_else(|e| panic!("certify failed: {e}"));
    let report = &certification.report;
    let files: Vec<_> = certification
        .files
        .iter()
        .filter_map(|p| p.file_name())
        .collect();
    assert_eq!(files, [REPORT_FILE, JUNIT_FILE, SUMMARY_FILE, PICTURE_FILE]);

    // The selected cases ran and passed on the correct backend.
    assert!(!report.cases.is_empty());
    assert!(report.cases.iter().all(|c| selected(&c.invariant)));
    assert!(
        report.cases.iter().all(|c| c.status == Status::Pass),
        "{:#?}",
        report.cases
    );

    // The must-pass list is the whole catalogue's, so a partial run reaches
    // no level and verify names exactly the cases that did not run.
    assert_eq!(
        report.must_pass,
        commcheck_report::must_pass(&CpuHarness::new())
    );
    assert_eq!(report.level, Level::None);
    let text = std::fs::read_to_string(out.join(REPORT_FILE)).unwrap_or_default();
    let problems = commcheck_report::verify(&text).err().unwrap_or_default();
    let missing = report.must_pass.len() - report.cases.len();
    let missing_problems = problems
        .iter()
        .filter(|p| p.ends_with("must-pass case has no result (missing)"));
    assert_eq!(missing_problems.count(), missing, "{problems:#?}");
    // Nothing else is wrong: the recorded level (none) is the one reached.
    assert_eq!(problems.len(), missing, "{problems:#?}");

    // Every case was streamed, after a start line.
    let streamed = std::fs::read_to_string(out.join(PARTIAL_FILE)).unwrap_or_default();
    let lines: Vec<Value> = streamed
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(lines.len(), streamed.lines().count());
    assert_eq!(
        lines.first().map(|l| l["kind"].clone()),
        Some("start".into())
    );
    let mut names: Vec<&str> = lines[1..]
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = report.cases.iter().map(|c| c.name.as_str()).collect();
    expected.sort_unstable();
    assert_eq!(names, expected);

    let junit = std::fs::read_to_string(out.join(JUNIT_FILE)).unwrap_or_default();
    assert!(junit.contains("<testcase name=\"EXC-10::local_dependencies\""));
    let summary = std::fs::read_to_string(out.join(SUMMARY_FILE)).unwrap_or_default();
    assert!(summary.contains("## Missing results"));
    let _ = std::fs::remove_dir_all(&out);
}
