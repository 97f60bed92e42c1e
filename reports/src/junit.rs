//! The JUnit XML sink, built with [`quick_junit`].
//!
//! One `<testsuites>` per report, one `<testsuite>` per SPEC family (in SPEC
//! order), one `<testcase>` per case (`name` = case name, `classname` =
//! `commcheck.<family>`, `time` in seconds). Status mapping:
//! - `pass`: an empty `<testcase>`;
//! - `not-supported`: `<skipped message="not-supported: …"/>`, never a failure;
//! - `waived`: `<skipped message="waived (<verdict>): <reason> (<link>); …"/>`;
//! - `fail`, `timeout`, `crash`, `flaky`: `<failure message="…"
//!   type="fail|timeout|crash|flaky">` with the full message, then the text
//!   of the failing invariant, as its text;
//! - `inconclusive`: `<error message="inconclusive: …" type="inconclusive">`,
//!   counted in `errors`;
//! - `unexpected-pass`: a passing case whose `<system-out>` starts with
//!   `UNEXPECTED PASS:`, and counted in the `unexpected_passes` property.
//!
//! The `tests`, `failures`, `errors` and `skipped` counts of every element
//! are those of the cases under it. Each `<testsuite>` carries the report's
//! provenance, level and digest as `<properties>` (where the common JUnit
//! schemas allow them). Characters that XML 1.0 cannot carry (most control
//! characters) become U+FFFD, and tabs become spaces.

use std::time::Duration;

use commcheck::spec::FAMILIES;
use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use crate::model::{Report, ReportCase, Status};

/// Why a report could not be rendered as JUnit XML.
#[derive(Debug, thiserror::Error)]
#[error("cannot render the JUnit XML: {0}")]
pub struct JunitError(#[from] quick_junit::SerializeError);

/// The report as JUnit XML.
pub fn render(report: &Report) -> Result<String, JunitError> {
    let backend = &report.provenance.backend;
    let mut junit = quick_junit::Report::new(xml_text(&format!(
        "commcheck {} {} (level {})",
        backend.name, backend.version, report.level
    )));
    junit.set_time(millis(report.cases.iter()));
    let properties = properties(report);
    for family in families(report) {
        let cases: Vec<&ReportCase> = report.cases.iter().filter(|c| c.family == family).collect();
        if cases.is_empty() {
            continue;
        }
        let mut suite = TestSuite::new(xml_text(&family));
        suite.set_time(millis(cases.iter().copied()));
        suite.add_properties(properties.iter().cloned());
        suite.add_test_cases(cases.into_iter().map(testcase));
        junit.add_test_suite(suite);
    }
    Ok(junit.to_string()?)
}

/// `text` with every character XML 1.0 cannot carry (control characters
/// other than tab, line feed and carriage return; U+FFFE, U+FFFF) replaced
/// by U+FFFD, and tabs by spaces (`quick_junit` drops tabs, carriage returns
/// and ANSI escape sequences; escaping is left to it too).
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' => ' ',
            '\n' | '\r' => c,
            c if u32::from(c) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => '\u{fffd}',
            c => c,
        })
        .collect()
}

/// The summed time of `cases`.
fn millis<'a>(cases: impl Iterator<Item = &'a ReportCase>) -> Duration {
    Duration::from_millis(cases.map(|case| case.millis).sum())
}

/// Families in SPEC order, then any unknown family found in the report.
fn families(report: &Report) -> Vec<String> {
    let mut families: Vec<String> = FAMILIES.iter().map(|f| (*f).to_owned()).collect();
    for case in &report.cases {
        if !families.contains(&case.family) {
            families.push(case.family.clone());
        }
    }
    families
}

/// The report's provenance, level and digest, as `<property>` elements.
fn properties(report: &Report) -> Vec<Property> {
    let p = &report.provenance;
    let mut properties = vec![
        ("level".to_owned(), report.level.as_str().to_owned()),
        ("digest".to_owned(), report.digest.clone()),
        ("kit_version".to_owned(), p.kit_version.clone()),
        (
            "backend".to_owned(),
            format!("{} {}", p.backend.name, p.backend.version),
        ),
        ("device".to_owned(), p.backend.device.clone()),
    ];
    properties.extend(p.eredu.iter().map(|(n, v)| (n.clone(), v.clone())));
    if !p.ranks.is_empty() {
        properties.push(("ranks".to_owned(), crate::markdown::ranks(&p.ranks)));
    }
    properties.extend([
        ("rustc".to_owned(), p.rustc.clone()),
        (
            "target".to_owned(),
            p.target
                .clone()
                .unwrap_or_else(|| "not recorded".to_owned()),
        ),
        ("ran_on".to_owned(), p.ran_on.join(", ")),
        (
            "git_revision".to_owned(),
            p.git_revision.clone().unwrap_or_else(|| "none".to_owned()),
        ),
        (
            "host".to_owned(),
            format!(
                "{} ({} {}, {} cpus)",
                p.host.hostname, p.host.os, p.host.arch, p.host.cpus
            ),
        ),
        ("seed".to_owned(), p.seed.to_string()),
        (
            "unexpected_passes".to_owned(),
            report.count(Status::UnexpectedPass).to_string(),
        ),
        (
            "waived".to_owned(),
            report.count(Status::Waived).to_string(),
        ),
    ]);
    properties
        .into_iter()
        .map(|(name, value)| Property::new(xml_text(&name), xml_text(&value)))
        .collect()
}

fn testcase(case: &ReportCase) -> TestCase {
    let message = case.message.as_deref().unwrap_or("");
    let waiver = case.waiver.as_ref();
    let reason = waiver.map_or("", |w| w.reason.as_str());
    let link = waiver.map_or("", |w| w.link.as_str());
    let skipped = |text: String| {
        let mut status = TestCaseStatus::skipped();
        status.set_message(xml_text(&text));
        status
    };
    let non_success = |kind, ty: &str, description: String| {
        let mut status = TestCaseStatus::non_success(kind);
        status
            .set_message(xml_text(&format!("{ty}: {message}")))
            .set_type(ty)
            .set_description(xml_text(&description));
        status
    };
    let status = match case.status {
        Status::Pass | Status::UnexpectedPass => TestCaseStatus::success(),
        Status::NotSupported => skipped(format!("not-supported: {message}")),
        Status::Waived => skipped(format!(
            "waived ({}): {reason} ({link}); {message}",
            case.verdict
        )),
        Status::Inconclusive => {
            non_success(NonSuccessKind::Error, "inconclusive", message.to_owned())
        }
        Status::Fail | Status::Timeout | Status::Crash | Status::Flaky => non_success(
            NonSuccessKind::Failure,
            case.status.as_str(),
            with_invariant_text(message, &case.invariant),
        ),
    };
    let mut testcase = TestCase::new(xml_text(&case.name), status);
    testcase
        .set_classname(xml_text(&format!("commcheck.{}", case.family)))
        .set_time(Duration::from_millis(case.millis));
    if case.status == Status::UnexpectedPass {
        testcase.set_system_out(xml_text(&format!(
            "UNEXPECTED PASS: waived ({reason}; {link}) but passed"
        )));
    }
    testcase
}

/// A failure's text: its message, then the text of the invariant it
/// concerns (so a CI log says what was broken without the spec at hand).
fn with_invariant_text(message: &str, id: &str) -> String {
    match commcheck::spec::invariant(id) {
        Some(invariant) => format!("{message}\n\n{id}: {}", invariant.text),
        None => message.to_owned(),
    }
}
