//! Synthetic results for fast report tests (no suite run).

#![allow(dead_code)]

use std::collections::BTreeMap;

use commcheck::spec::{self, Class};
use commcheck::{CaseResult, Identity, Instruments, Operation, RunResults, Subject, Verdict};
use commcheck_report::model::Host;
use commcheck_report::{Environment, Expectations, Report};

/// A fixed environment, so reports are reproducible.
pub fn environment() -> Environment {
    Environment {
        tool: "commcheck-report test".to_owned(),
        eredu: BTreeMap::from([
            ("eredu-core".to_owned(), "0.5.0".to_owned()),
            ("eredu-nn".to_owned(), "0.2.1".to_owned()),
            ("eredu-runtime".to_owned(), "0.5.0".to_owned()),
        ]),
        rustc: "rustc 1.85.0 (test)".to_owned(),
        git_revision: Some("0123456789abcdef0123456789abcdef01234567".to_owned()),
        host: Host {
            hostname: "test-host".to_owned(),
            os: "linux".to_owned(),
            arch: "x86_64".to_owned(),
            cpus: 4,
        },
        generated_unix: 1_700_000_000,
    }
}

/// One kit result.
pub fn result(id: &str, subject: Subject, verdict: Verdict) -> CaseResult {
    let invariant = spec::invariant(id).map_or(("???", Class::A), |i| (i.family, i.class));
    CaseResult {
        name: format!("{id}::{subject}"),
        invariant: id.to_owned(),
        family: invariant.0.to_owned(),
        class: invariant.1,
        subject,
        verdict,
        message: (verdict != Verdict::Pass)
            .then(|| format!("{id} on {subject}: {verdict} <&> \"quoted\" | piped")),
        attempts: 1,
        millis: 12,
        seed: 42,
        evidence: commcheck::Evidence::BlackBox,
        worlds: vec![1],
        notes: Vec::new(),
        attributed: Vec::new(),
    }
}

pub const SUM: Subject = Subject::Operation(Operation::AllReduceSum);
pub const BRD: Subject = Subject::Operation(Operation::Broadcast);

/// Claimed subjects' cases (must-pass) with the given verdicts, plus one
/// unclaimed operation's not-supported case.
pub fn results(verdicts: &[(&str, Subject, Verdict)]) -> RunResults {
    let mut cases: Vec<CaseResult> = verdicts
        .iter()
        .map(|(id, s, v)| result(id, *s, *v))
        .collect();
    cases.push(CaseResult {
        message: Some("broadcast is not claimed by this backend".to_owned()),
        ..result("BRD-1", BRD, Verdict::NotSupported)
    });
    RunResults {
        schema: commcheck::runner::results::RESULTS_SCHEMA,
        kit_version: env!("CARGO_PKG_VERSION").to_owned(),
        backend: Identity {
            name: "synthetic".to_owned(),
            version: "1.0.0".to_owned(),
            device: "none".to_owned(),
        },
        instruments: Instruments::ALL,
        claims: vec![Operation::AllReduceSum],
        seed: 7,
        cases,
        calibration: None,
        processes: None,
        incomplete: None,
        data: None,
        build: None,
        hosts: Vec::new(),
        ranks: Vec::new(),
    }
}

/// The standard synthetic cases: class A, M and I on claimed subjects.
pub fn standard(verdict_of_i: Verdict) -> Vec<(&'static str, Subject, Verdict)> {
    vec![
        ("RET-6", Subject::Submit, Verdict::Pass),
        ("EXC-1", Subject::Submit, Verdict::Pass),
        ("RET-1", Subject::Submit, verdict_of_i),
        ("SUM-1", SUM, Verdict::Pass),
        ("CAN-5", SUM, Verdict::Pass),
    ]
}

/// A report on `verdicts` (all of them must-pass) with `expectations`.
pub fn report_with(verdicts: &[(&str, Subject, Verdict)], expectations: &Expectations) -> Report {
    let results = results(verdicts);
    let must_pass = verdicts
        .iter()
        .map(|(id, s, _)| format!("{id}::{s}"))
        .collect();
    Report::build(&results, must_pass, expectations, environment())
}

/// A report on `verdicts`, no waivers.
pub fn report(verdicts: &[(&str, Subject, Verdict)]) -> Report {
    report_with(verdicts, &Expectations::none())
}

/// The report as JSON text.
pub fn json(report: &Report) -> String {
    report.to_json().unwrap_or_default()
}

/// `verify`'s problems (empty when the report is valid).
pub fn problems(text: &str) -> Vec<String> {
    commcheck_report::verify(text).err().unwrap_or_default()
}

/// Whether some problem contains every one of `parts`.
pub fn mentions(problems: &[String], parts: &[&str]) -> bool {
    problems
        .iter()
        .any(|p| parts.iter().all(|part| p.contains(part)))
}

/// Asserts that some problem contains every one of `parts`.
#[track_caller]
pub fn assert_mentions(problems: &[String], parts: &[&str]) {
    assert!(
        mentions(problems, parts),
        "no problem mentions all of {parts:?}; problems: {problems:#?}"
    );
}
