//! JUnit XML loads in an XML consumer with the JUnit structure; the
//! Markdown summary is capped by whole sections.

mod common;

use commcheck::results::Attributed;
use commcheck::Verdict;
use commcheck_report::{junit, markdown, picture, Expectations, Report};
use common::*;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

/// One parsed element: its path of names and its attributes.
#[derive(Debug)]
struct Element {
    path: Vec<String>,
    attributes: Vec<(String, String)>,
    text: String,
}

impl Element {
    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn attributes(start: &BytesStart<'_>) -> Vec<(String, String)> {
    start
        .attributes()
        .map(|a| {
            let a = a.unwrap_or_else(|e| panic!("bad attribute: {e}"));
            let value = a
                .unescape_value()
                .unwrap_or_else(|e| panic!("bad attribute value: {e}"))
                .into_owned();
            (String::from_utf8_lossy(a.key.as_ref()).into_owned(), value)
        })
        .collect()
}

/// Parses the whole document (panicking on any well-formedness error) into
/// its elements.
fn parse(xml: &str) -> Vec<Element> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<String> = Vec::new();
    let mut elements: Vec<Element> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(start)) => {
                stack.push(String::from_utf8_lossy(start.name().as_ref()).into_owned());
                elements.push(Element {
                    path: stack.clone(),
                    attributes: attributes(&start),
                    text: String::new(),
                });
                open.push(elements.len() - 1);
            }
            Ok(Event::Empty(start)) => {
                let mut path = stack.clone();
                path.push(String::from_utf8_lossy(start.name().as_ref()).into_owned());
                elements.push(Element {
                    path,
                    attributes: attributes(&start),
                    text: String::new(),
                });
            }
            Ok(Event::End(_)) => {
                stack.pop();
                open.pop();
            }
            Ok(Event::Text(text)) => {
                if let Some(&index) = open.last() {
                    let text = text.decode().unwrap_or_else(|e| panic!("bad text: {e}"));
                    let text = quick_xml::escape::unescape(&text)
                        .unwrap_or_else(|e| panic!("bad text: {e}"));
                    elements[index].text.push_str(&text);
                }
            }
            Ok(Event::GeneralRef(reference)) => {
                let name = reference
                    .decode()
                    .unwrap_or_else(|e| panic!("bad reference: {e}"));
                let text = match name.as_ref() {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    other => panic!("undeclared entity &{other};"),
                };
                if let Some(&index) = open.last() {
                    elements[index].text.push_str(text);
                }
            }
            Ok(Event::Eof) => break,
            Ok(_) => {}
            Err(error) => panic!("not well-formed at {}: {error}", reader.error_position()),
        }
    }
    assert!(stack.is_empty(), "unclosed elements: {stack:?}");
    elements
}

fn named<'a>(elements: &'a [Element], path: &str) -> Vec<&'a Element> {
    elements
        .iter()
        .filter(|e| e.path.join("/") == path)
        .collect()
}

#[test]
fn junit_has_the_junit_structure_and_maps_statuses() {
    let mut verdicts = standard(Verdict::Timeout);
    verdicts.push(("EXC-2", common::SUM, Verdict::Crash));
    verdicts.push(("CAN-2", common::SUM, Verdict::Flaky));
    verdicts.push(("CAN-1", common::SUM, Verdict::Fail));
    let report = report(&verdicts);
    let elements = parse(&junit::render(&report).unwrap_or_default());
    let root = named(&elements, "testsuites");
    assert_eq!(root.len(), 1);
    assert_eq!(root[0].attribute("tests"), Some("9"));
    assert_eq!(root[0].attribute("failures"), Some("4"));
    assert_eq!(root[0].attribute("errors"), Some("0"));
    assert_eq!(root[0].attribute("skipped"), Some("1"));
    let suites = named(&elements, "testsuites/testsuite");
    let suite_names: Vec<_> = suites.iter().filter_map(|s| s.attribute("name")).collect();
    assert_eq!(suite_names, ["RET", "EXC", "CAN", "SUM", "BRD"]);
    assert!(!named(&elements, "testsuites/testsuite/properties/property").is_empty());
    let cases = named(&elements, "testsuites/testsuite/testcase");
    assert_eq!(cases.len(), 9);
    for case in &cases {
        assert!(case.attribute("name").is_some() && case.attribute("classname").is_some());
        assert!(case
            .attribute("time")
            .is_some_and(|t| t.parse::<f64>().is_ok()));
    }
    let failures = named(&elements, "testsuites/testsuite/testcase/failure");
    let mut types: Vec<_> = failures
        .iter()
        .filter_map(|f| f.attribute("type"))
        .collect();
    types.sort_unstable();
    assert_eq!(types, ["crash", "fail", "flaky", "timeout"]);
    let timeout = failures
        .iter()
        .find(|f| f.attribute("type") == Some("timeout"));
    // The message, then the text of the invariant (from `commcheck::spec`).
    let expected = format!(
        "RET-1 on submit: timeout <&> \"quoted\" | piped\n\nRET-1: {}",
        commcheck::spec::invariant("RET-1").map_or("", |i| i.text)
    );
    assert!(timeout.is_some_and(|f| f.text == expected));
    let skipped = named(&elements, "testsuites/testsuite/testcase/skipped");
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0]
        .attribute("message")
        .is_some_and(|m| m.starts_with("not-supported: broadcast is not claimed")));
}

#[test]
fn junit_escapes_what_xml_cannot_carry() {
    let mut report = report(&standard(Verdict::Fail));
    let hostile = "a<b>&\"'\u{1}\u{1b}[31m\u{fffe}\tz";
    for case in &mut report.cases {
        if case.name == "RET-1::submit" {
            case.message = Some(hostile.to_owned());
        }
    }
    let elements = parse(&junit::render(&report).unwrap_or_default());
    let failures = named(&elements, "testsuites/testsuite/testcase/failure");
    assert_eq!(failures.len(), 1);
    let carried = "a<b>&\"'\u{fffd}\u{fffd}[31m\u{fffd} z";
    assert_eq!(
        failures[0].attribute("message"),
        Some(format!("fail: {carried}").as_str())
    );
    assert!(failures[0]
        .text
        .starts_with(&format!("{carried}\n\nRET-1: ")));
}

#[test]
fn junit_counts_inconclusive_cases_as_errors() {
    let mut verdicts = standard(Verdict::Inconclusive);
    verdicts.push(("CAN-1", common::SUM, Verdict::Fail));
    let elements = parse(&junit::render(&report(&verdicts)).unwrap_or_default());
    let root = named(&elements, "testsuites");
    assert_eq!(root[0].attribute("tests"), Some("7"));
    assert_eq!(root[0].attribute("failures"), Some("1"));
    assert_eq!(root[0].attribute("errors"), Some("1"));
    let errors = named(&elements, "testsuites/testsuite/testcase/error");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].attribute("type"), Some("inconclusive"));
    let ret = named(&elements, "testsuites/testsuite")
        .into_iter()
        .find(|s| s.attribute("name") == Some("RET"));
    assert!(ret.is_some_and(|s| s.attribute("errors") == Some("1")));
}

#[test]
fn markdown_is_whole_when_it_fits() {
    let summary = markdown::render(&report(&standard(Verdict::Fail)));
    assert!(summary.starts_with("# commcheck certification: synthetic 1.0.0"));
    assert!(summary.contains("**Level reached: core**"));
    assert!(summary.contains("## Failures") && summary.contains("## All cases: RET"));
    assert!(summary.contains("RET-1 on submit: fail &lt;&amp;&gt; \"quoted\" \\| piped"));
    assert!(!summary.contains("Truncated"));
}

/// Every table of `text` is complete: header, separator, then rows, and
/// each `## ` section is followed by its whole table.
fn tables_are_whole(text: &str) -> bool {
    let lines: Vec<&str> = text.lines().collect();
    lines.iter().enumerate().all(|(i, line)| {
        !line.starts_with('|')
            || i + 1 == lines.len()
            || lines[i + 1].starts_with('|')
            || lines[i + 1].is_empty()
    }) && text.ends_with("\n\n")
}

#[test]
fn markdown_cap_cuts_whole_sections_with_a_note() {
    // Many cases so the per-family tables are large.
    let subjects = [
        commcheck::Subject::Submit,
        commcheck::Subject::LocalDependencies,
        common::SUM,
    ];
    let mut verdicts = Vec::new();
    for invariant in commcheck::spec::INVARIANTS {
        for subject in subjects {
            verdicts.push((invariant.id, subject, Verdict::Pass));
        }
    }
    verdicts.push(("CAN-5", commcheck::Subject::OrderAfter, Verdict::Fail));
    let report = report(&verdicts);
    let whole = markdown::render(&report);
    let cap = whole.len() / 2;
    let capped = markdown::render_capped(&report, cap);
    assert!(capped.len() <= cap, "{} > {cap}", capped.len());
    assert!(capped.contains("> **Truncated:** this summary is capped at"));
    // The highest-priority sections stay; the cut ones are named in the note.
    assert!(capped.contains("## Families") && capped.contains("## Failures"));
    let cut: Vec<&str> = whole
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter(|title| !capped.contains(&format!("## {title}\n")))
        .collect();
    assert!(!cut.is_empty());
    for title in &cut {
        assert!(
            capped.contains(&format!("\"{title}\" (")),
            "note does not name {title}"
        );
    }
    // Kept sections are byte-identical to the uncut rendering: nothing mid-table.
    for section in capped.split("\n## ").skip(1) {
        assert!(
            whole.contains(&format!("\n## {section}")),
            "section changed: {section:.60}"
        );
    }
    assert!(tables_are_whole(&capped));
}

/// A report names the build that ran the cases, as the run recorded it (a
/// suite run under nightly says nightly), and the hosts that ran them, not
/// the tool that wrote the report; results that do not say fall back to the
/// tool's own build.
#[test]
fn the_report_names_the_build_that_ran_the_cases() {
    let verdicts = [("SUM-1", SUM, Verdict::Pass)];
    let mut results = results(&verdicts);
    let nightly = "rustc 1.97.0-nightly (0123456789 2026-11-30)";
    results.build = Some(commcheck::build::Build {
        rustc: nightly.to_owned(),
        target: "aarch64-unknown-linux-gnu".to_owned(),
        kit: commcheck::VERSION.to_owned(),
        eredu: [("eredu-core".to_owned(), "0.5.9".to_owned())].into(),
    });
    results.hosts = vec!["shard-a".to_owned(), "shard-b".to_owned()];
    let must_pass = vec!["SUM-1::all_reduce_sum".to_owned()];
    let report = commcheck_report::Report::build(
        &results,
        must_pass.clone(),
        &commcheck_report::Expectations::none(),
        environment(),
    );
    assert_eq!(report.provenance.rustc, nightly);
    assert_eq!(
        report.provenance.target.as_deref(),
        Some("aarch64-unknown-linux-gnu")
    );
    assert_eq!(report.provenance.eredu["eredu-core"], "0.5.9");
    assert_eq!(report.provenance.ran_on, ["shard-a", "shard-b"]);
    assert!(markdown::render(&report).contains("nightly"));
    assert!(markdown::render(&report).contains("shard-a, shard-b"));
    assert!(junit::render(&report)
        .unwrap_or_default()
        .contains("nightly"));
    results.build = None;
    let report = commcheck_report::Report::build(
        &results,
        must_pass,
        &commcheck_report::Expectations::none(),
        environment(),
    );
    assert_eq!(report.provenance.rustc, environment().rustc);
    assert_eq!(report.provenance.target, None);
}

/// An attribute of the `<rect>` of `name`'s cell in the picture.
fn cell_attribute<'a>(svg: &'a str, name: &str, attribute: &str) -> &'a str {
    let line = svg
        .lines()
        .find(|line| line.contains(&format!("<title>{name}:")))
        .unwrap_or_default();
    line.split(&format!(" {attribute}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
}

/// The picture tells a case not-supported for want of an instrument (it
/// keeps a report from `full`) from one whose operation is not claimed,
/// outlines a case that saw a violation no case of its invariant fails, and
/// calls no report signed.
#[test]
fn the_picture_tells_what_blocks_a_level() {
    let picture = |attributed: Vec<Attributed>| {
        let mut results = results(&[
            ("RET-3", SUM, Verdict::Pass),
            ("CAN-6", SUM, Verdict::NotSupported),
        ]);
        results.cases[0].attributed = attributed;
        results.cases[1].message = Some("the harness provides no ledger instrument".to_owned());
        let must_pass = vec!["RET-3::all_reduce_sum".to_owned()];
        picture::svg(&Report::build(
            &results,
            must_pass,
            &Expectations::none(),
            environment(),
        ))
    };
    let svg = picture(vec![Attributed {
        invariant: "SUM-1".to_owned(),
        message: "a wrong sum".to_owned(),
    }]);
    let fill = |name| cell_attribute(&svg, name, "fill");
    assert_ne!(
        fill("CAN-6::all_reduce_sum"),
        fill("BRD-1::broadcast"),
        "{svg}"
    );
    assert_ne!(
        cell_attribute(&svg, "RET-3::all_reduce_sum", "stroke"),
        "white",
        "{svg}"
    );
    assert!(!svg.contains("signed source of truth"), "{svg}");
    let clean = picture(Vec::new());
    assert_eq!(
        cell_attribute(&clean, "RET-3::all_reduce_sum", "stroke"),
        "white",
        "{clean}"
    );
}
