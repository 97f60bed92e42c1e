//! The JUnit XML sink.
//!
//! One `<testsuites>` per report, one `<testsuite>` per SPEC family (in SPEC
//! order), one `<testcase>` per case (`name` = case name, `classname` =
//! `commcheck.<family>`, `time` in seconds). Status mapping:
//! - `pass`: an empty `<testcase>`;
//! - `not-supported`: `<skipped message="not-supported: …"/>`, never a failure;
//! - `waived`: `<skipped message="waived (<verdict>): <reason> (<link>)"/>`;
//! - `fail`, `timeout`, `crash`, `flaky`: `<failure type="fail|timeout|crash|flaky"
//!   message="…">` with the full message as text;
//! - `unexpected-pass`: a passing case whose `<system-out>` starts with
//!   `UNEXPECTED PASS:`, and counted in the `unexpected_passes` property.
//!
//! Each `<testsuite>` carries the report's provenance, level and digest as
//! `<properties>` (where the common JUnit schemas allow them).

use commcheck::spec::FAMILIES;

use crate::model::{Report, ReportCase, Status};

/// Escapes text for XML 1.0 content or attribute values; characters XML 1.0
/// cannot carry (most control characters) become U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if u32::from(c) < 0x20 || matches!(c, '\u{fffe}' | '\u{ffff}') => {
                out.push('\u{fffd}')
            }
            c => out.push(c),
        }
    }
    out
}

fn seconds(millis: u64) -> String {
    format!("{}.{:03}", millis / 1000, millis % 1000)
}

/// Counts of one suite: (tests, failures, skipped, millis).
fn counts<'a>(cases: impl Iterator<Item = &'a ReportCase>) -> (usize, usize, usize, u64) {
    cases.fold((0, 0, 0, 0), |(tests, failures, skipped, millis), case| {
        (
            tests + 1,
            failures + usize::from(case.status.is_failure()),
            skipped + usize::from(matches!(case.status, Status::NotSupported | Status::Waived)),
            millis + case.millis,
        )
    })
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

fn property(out: &mut String, indent: &str, name: &str, value: &str) {
    out.push_str(&format!(
        "{indent}<property name=\"{}\" value=\"{}\"/>\n",
        escape(name),
        escape(value)
    ));
}

/// The report's provenance, level and digest as a `<properties>` element.
fn properties(report: &Report) -> String {
    let p = &report.provenance;
    let mut out = String::from("    <properties>\n");
    let mut add = |name: &str, value: &str| property(&mut out, "      ", name, value);
    add("level", report.level.as_str());
    add("digest", &report.digest);
    add("kit_version", &p.kit_version);
    add(
        "backend",
        &format!("{} {}", p.backend.name, p.backend.version),
    );
    add("device", &p.backend.device);
    for (name, version) in &p.eredu {
        add(name, version);
    }
    add("rustc", &p.rustc);
    add("git_revision", p.git_revision.as_deref().unwrap_or("none"));
    add(
        "host",
        &format!(
            "{} ({} {}, {} cpus)",
            p.host.hostname, p.host.os, p.host.arch, p.host.cpus
        ),
    );
    add("seed", &p.seed.to_string());
    add(
        "unexpected_passes",
        &report.count(Status::UnexpectedPass).to_string(),
    );
    add("waived", &report.count(Status::Waived).to_string());
    out.push_str("    </properties>\n");
    out
}

fn testcase(case: &ReportCase, out: &mut String) {
    let open = format!(
        "    <testcase name=\"{}\" classname=\"commcheck.{}\" time=\"{}\"",
        escape(&case.name),
        escape(&case.family),
        seconds(case.millis)
    );
    let message = case.message.as_deref().unwrap_or("");
    let waiver = case.waiver.as_ref();
    let body = match case.status {
        Status::Pass => None,
        Status::NotSupported => Some(format!(
            "      <skipped message=\"{}\"/>\n",
            escape(&format!("not-supported: {message}"))
        )),
        Status::Waived => Some(format!(
            "      <skipped message=\"{}\"/>\n",
            escape(&format!(
                "waived ({}): {} ({}); {message}",
                case.verdict,
                waiver.map_or("", |w| w.reason.as_str()),
                waiver.map_or("", |w| w.link.as_str()),
            ))
        )),
        Status::UnexpectedPass => Some(format!(
            "      <system-out>{}</system-out>\n",
            escape(&format!(
                "UNEXPECTED PASS: waived ({}; {}) but passed",
                waiver.map_or("", |w| w.reason.as_str()),
                waiver.map_or("", |w| w.link.as_str()),
            ))
        )),
        Status::Inconclusive => Some(format!(
            "      <error type=\"inconclusive\" message=\"{}\">{}</error>\n",
            escape(&format!("inconclusive: {message}")),
            escape(message)
        )),
        Status::Fail | Status::Timeout | Status::Crash | Status::Flaky => Some(format!(
            "      <failure type=\"{}\" message=\"{}\">{}</failure>\n",
            case.status,
            escape(&format!("{}: {message}", case.status)),
            escape(&with_invariant_text(message, &case.invariant))
        )),
    };
    match body {
        None => out.push_str(&format!("{open}/>\n")),
        Some(body) => out.push_str(&format!("{open}>\n{body}    </testcase>\n")),
    }
}

/// The report as JUnit XML.
pub fn render(report: &Report) -> String {
    let (tests, failures, skipped, millis) = counts(report.cases.iter());
    let backend = &report.provenance.backend;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">\n",
        escape(&format!("commcheck {} {} (level {})", backend.name, backend.version, report.level)),
        seconds(millis)
    ));
    let properties = properties(report);
    for family in families(report) {
        let cases: Vec<&ReportCase> = report.cases.iter().filter(|c| c.family == family).collect();
        if cases.is_empty() {
            continue;
        }
        let (tests, failures, skipped, millis) = counts(cases.iter().copied());
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">\n",
            escape(&family),
            seconds(millis)
        ));
        out.push_str(&properties);
        for case in cases {
            testcase(case, &mut out);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// A failure's text: its message, then the text of the invariant it
/// concerns (so a CI log says what was broken without the spec at hand).
fn with_invariant_text(message: &str, id: &str) -> String {
    match commcheck::spec::invariant(id) {
        Some(invariant) => format!("{message}\n\n{id}: {}", invariant.text),
        None => message.to_owned(),
    }
}
