//! Expectations files: waivers with a reason and a link; malformed files
//! rejected with the line and field at fault.

mod common;

use commcheck::Verdict;
use commcheck_report::{Expectations, Status};
use common::*;

const GOOD: &str = r#"# known problems
[[waiver]]
invariant = "RET-1"
subject = "submit"
reason = "storage released early, fix pending"
link = "https://tracker.invalid/1"

[[waiver]]
invariant = "EXC-1"
subject = "*"
reason = "slow poll"
link = "https://tracker.invalid/2"

[[waiver]]
invariant = "AGR-2"
subject = "agree_success"
reason = "unused"
link = "https://tracker.invalid/3"
"#;

fn errors(text: &str) -> Vec<String> {
    Expectations::parse(text, "exp.toml")
        .err()
        .map(|e| e.problems)
        .unwrap_or_default()
}

#[test]
fn a_waiver_without_reason_is_rejected_with_its_line() {
    let text = "[[waiver]]\ninvariant = \"RET-1\"\nsubject = \"submit\"\nlink = \"x\"\n\n[[waiver]]\ninvariant = \"RET-2\"\nsubject = \"submit\"\nreason = \"\"\nlink = \"y\"\n";
    assert_eq!(
        errors(text),
        vec![
            "exp.toml:1: waiver #1 has no `reason` (required)".to_owned(),
            "exp.toml:9: waiver #2: field `reason` is empty (required)".to_owned(),
        ]
    );
}

#[test]
fn malformed_fields_are_named_with_their_line() {
    let wrong_type =
        "[[waiver]]\ninvariant = \"RET-1\"\nsubject = \"submit\"\nreason = 5\nlink = \"x\"\n";
    assert_mentions(
        &errors(wrong_type),
        &["exp.toml:4:", "expected a string", "reason = 5"],
    );
    let unknown = "[[waiver]]\ninvariant = \"RET-1\"\nsubject = \"submit\"\nreason = \"r\"\nlink = \"x\"\nowner = \"me\"\n";
    assert_mentions(&errors(unknown), &["exp.toml:6:", "unknown field `owner`"]);
    let syntax = "[[waiver]]\ninvariant = \"RET-1\n";
    assert_mentions(&errors(syntax), &["exp.toml:2:"]);
    let bad_id =
        "[[waiver]]\ninvariant = \"RET-99\"\nsubject = \"submit\"\nreason = \"r\"\nlink = \"x\"\n";
    assert_mentions(
        &errors(bad_id),
        &["exp.toml:2:", "field `invariant`", "RET-99"],
    );
    let bad_subject =
        "[[waiver]]\ninvariant = \"RET-1\"\n\nsubject = \"sumbit\"\nreason = \"r\"\nlink = \"x\"\n";
    assert_mentions(
        &errors(bad_subject),
        &["exp.toml:4:", "field `subject`", "sumbit"],
    );
    let repeated = format!("{GOOD}\n[[waiver]]\ninvariant = \"RET-1\"\nsubject = \"submit\"\nreason = \"r\"\nlink = \"x\"\n");
    assert_mentions(
        &errors(&repeated),
        &["exp.toml:20:", "repeats `RET-1::submit`", "line 2"],
    );
}

#[test]
fn waivers_apply_to_their_cases() {
    let expectations = Expectations::parse(GOOD, "exp.toml").unwrap_or_default();
    assert_eq!(expectations.entries().len(), 3);
    let report = report_with(&standard(Verdict::Crash), &expectations);
    let status = |name: &str| {
        report
            .cases
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.status)
    };
    // A waived failure is waived, not a failure, but it never certifies: the
    // report reaches `full` only with its waiver, and says so.
    assert_eq!(status("RET-1::submit"), Some(Status::Waived));
    // A waived pass is an unexpected pass.
    assert_eq!(status("EXC-1::submit"), Some(Status::UnexpectedPass));
    assert_ne!(report.level, commcheck_report::Level::Full);
    assert_eq!(
        report.with_waivers(),
        Some((commcheck_report::Level::Full, 1))
    );
    assert!(
        report.outcome().ends_with("; full-with-waivers (1)"),
        "{}",
        report.outcome()
    );
    assert!(commcheck_report::markdown::render(&report).contains("full-with-waivers (1)"));
    assert_eq!(report.unused_waivers.len(), 1);
    assert_eq!(report.unused_waivers[0].invariant, "AGR-2");
    assert!(problems(&json(&report)).is_empty());
}

#[test]
fn unexpected_passes_and_waivers_are_flagged_in_every_sink() {
    let expectations = Expectations::parse(GOOD, "exp.toml").unwrap_or_default();
    let report = report_with(&standard(Verdict::Fail), &expectations);
    let junit = commcheck_report::junit::render(&report).unwrap_or_default();
    assert!(
        junit.contains("UNEXPECTED PASS: waived (slow poll; https://tracker.invalid/2) but passed")
    );
    assert!(junit.contains("<skipped message=\"waived (fail): storage released early, fix pending"));
    let summary = commcheck_report::markdown::render(&report);
    assert!(summary.contains("**Unexpected passes: 1**"));
    assert!(summary.contains("## Unexpected passes") && summary.contains("## Waived"));
    assert!(summary.contains("## Unused waivers"));
    assert!(json(&report).contains("\"status\": \"unexpected-pass\""));
}
