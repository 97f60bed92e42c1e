//! The `commcheck-report` binary: `explain`, the exit status of `diff`,
//! help and usage errors.

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

#[test]
fn help_exits_0_and_usage_errors_exit_2_naming_the_option() {
    for args in [
        &["--help"][..],
        &["help"],
        &["help", "certify"],
        &["certify", "--help"],
        &["verify", "-h"],
        &["keygen", "--help"],
    ] {
        let (code, out, err) = cli(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(out.contains("Usage: commcheck-report"), "{args:?}: {out}");
    }
    // Each command's --help keeps what it writes, its environment and its
    // exit statuses.
    let (_, out, _) = cli(&["help", "certify"]);
    for part in [
        "report.partial.jsonl",
        "report.json.minisig",
        "COMMCHECK_SEED",
        "COMMCHECK_CASE_TIMEOUT_MS",
        "Exit status: 0 level reached; 1 not reached; 2 usage or I/O error",
        "- core: Every class-A and class-M must-pass case certifies",
    ] {
        assert!(out.contains(part), "`{part}` missing from:\n{out}");
    }
    let (_, out, _) = cli(&["verify", "--help"]);
    assert!(out.contains("Exit status: 0 valid"), "{out}");
    assert!(out.contains("--key <PUBLIC_KEY_FILE>"), "{out}");
    let (code, _, err) = cli(&[]);
    assert_eq!(code, Some(2), "no command is a usage error");
    assert!(err.contains("Usage: commcheck-report"), "{err}");
    let (code, _, err) = cli(&["certify", "cpu", "--require", "none"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("'none'") && err.contains("--require") && err.contains("core, full"),
        "{err}"
    );
    let (code, _, err) = cli(&["summary", "report.json", "--max-bytes", "abc"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--max-bytes") && err.contains("expected a number of bytes"),
        "{err}"
    );
    let (code, out, err) = cli(&["summary", "report.json", "--max-bytes", "10"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        err.contains("--max-bytes") && err.contains("expected at least 4096 bytes"),
        "{err}"
    );
    for args in [
        &["frobnicate"][..],
        &["verify"],
        &["diff", "a.json"],
        &["certify", "cpu", "--unknown"],
        &["help", "frobnicate"],
    ] {
        let (code, _, err) = cli(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
    }
}

/// An unknown CPU personality is a usage error naming it and the known ones,
/// before anything runs.
#[cfg(feature = "cpu")]
#[test]
fn an_unknown_personality_exits_2_naming_it() {
    let out = tempfile::tempdir().expect("a temporary folder");
    let dir = out.path().to_string_lossy().into_owned();
    let (code, _, err) = cli(&["certify", "cpu", "--personality", "eagre", "--out", &dir]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("'eagre'") && err.contains("collectives-cancel") && err.contains("rendezvous"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(out.path()).map_or(0, |d| d.count()) == 0,
        "nothing is written for a usage error"
    );
}

/// A `COMMCHECK_*` variable set for `certify`, which does not read it, is a
/// usage error naming it, before anything is written (it was ignored: an
/// interface that does not exist, a negative timeout, an empty records
/// directory or a result file certify never writes all certified `full`);
/// `--help` lists every variable with who reads it.
#[cfg(feature = "cpu")]
#[test]
fn certify_rejects_settings_it_does_not_read() {
    let out = tempfile::tempdir().expect("a temporary folder");
    let dir = out.path().to_string_lossy().into_owned();
    for (variable, value) in [
        ("COMMCHECK_MESH_ADDRESS", "eth99"),
        ("COMMCHECK_CONNECT_TIMEOUT_MS", "-5"),
        ("COMMCHECK_RESULTS_DIR", ""),
        ("COMMCHECK_RESULTS", "/nonexistent/dir/x.json"),
        ("COMMCHECK_ISOLATION", "process"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_commcheck-report"))
            .args(["certify", "cpu", "--out", &dir])
            .env(variable, value)
            .output()
            .expect("run commcheck-report");
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{variable}: {err}");
        assert!(
            err.contains(&format!(
                "{variable}={value:?} does not apply to commcheck-report certify"
            )),
            "{variable}: {err}"
        );
        assert!(
            std::fs::read_dir(out.path()).map_or(0, |d| d.count()) == 0,
            "{variable}: nothing is written for a rejected setting"
        );
    }
    let (code, help, _) = cli(&["certify", "--help"]);
    assert_eq!(code, Some(0));
    for variable in commcheck::settings::TABLE {
        assert!(
            help.contains(variable.name),
            "--help omits {}",
            variable.name
        );
    }
}

/// `verify` says so when a `report.partial.jsonl` lies beside the report:
/// a later certify into the folder died, and the report may be older.
#[test]
fn verify_warns_of_a_partial_run_beside_the_report() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("report.json");
    std::fs::write(&path, json(&report(&standard(Verdict::Pass)))).expect("write the report");
    let report_path = path.to_string_lossy().into_owned();
    let (code, _, err) = cli(&["verify", &report_path]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("report.partial.jsonl"), "{err}");
    std::fs::write(dir.path().join("report.partial.jsonl"), "{}\n")
        .expect("write the partial file");
    let (code, _, err) = cli(&["verify", &report_path]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("report.partial.jsonl is beside it: a later certify into this folder died"),
        "{err}"
    );
}
