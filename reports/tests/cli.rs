//! The `commcheck-report` binary: `explain` and the exit status of `diff`.

mod common;

use std::process::Command;

use commcheck::Verdict;
use common::*;

fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_commcheck-report"))
        .args(args)
        .output()
        .expect("run commcheck-report");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn explain_prints_an_invariant_and_rejects_unknown_ids() {
    let (code, out, _) = cli(&["explain", "CAN-5"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("CAN-5 (CAN, class I)"), "{out}");
    assert!(
        out.contains("Source: ") && out.contains("Evidence: "),
        "{out}"
    );
    let (code, _, err) = cli(&["explain", "CAN-99"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no invariant `CAN-99`"), "{err}");
}

#[test]
fn diff_exits_1_naming_each_regression() {
    let dir = std::env::temp_dir().join(format!("commcheck-report-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let old = report(&standard(Verdict::Pass));
    let mut new = old.clone();
    new.cases.pop();
    new.provenance.backend.name = "another-backend".into();
    let (a, b) = (dir.join("old.json"), dir.join("new.json"));
    std::fs::write(&a, json(&old)).expect("write old.json");
    std::fs::write(&b, json(&new)).expect("write new.json");
    let (code, out, _) = cli(&["diff", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{out}");
    let (code, out, _) = cli(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("regressed: 1 case(s) removed"), "{out}");
    assert!(out.contains("regressed: another backend: "), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn version_and_unreadable_files() {
    let (code, out, _) = cli(&["--version"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        format!("commcheck-report {}\n", env!("CARGO_PKG_VERSION"))
    );
    // An unreadable file is exit status 2 (usage or I/O error), not 1 (rejected).
    let (code, _, err) = cli(&["verify", "/nonexistent/commcheck/report.json"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot read"), "{err}");
}
