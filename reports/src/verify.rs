//! Re-verification of a report: everything wrong with it, not just the first thing.
//!
//! Checked, in order (each problem names the case or field at fault):
//! 1. the file is complete JSON (a truncated file is named as such);
//! 2. `format` is `commcheck-report` and `schema` is [`REPORT_SCHEMA`]
//!    (an unknown schema stops verification there: its fields may mean
//!    something else);
//! 3. the digest matches the canonical form, and each case's fingerprint
//!    matches the case (see [`crate::canonical`]);
//! 4. every member has the right shape (no unknown member, no missing one);
//! 5. each case is coherent: name = `<invariant>::<subject>`, family and
//!    class as SPEC.md states them (for a report of this kit version),
//!    status = [`Status::of`] its verdict and waiver, a message for every
//!    verdict but `pass`, at least one attempt, and every waiver (on a case
//!    or unused) has a reason and a link;
//! 6. the must-pass list is non-empty and without repeats, every must-pass
//!    case has exactly one result, and every other result is a
//!    `not-supported` case of an unclaimed operation;
//! 7. only statuses the claimed level allows appear ([`Level::requires`],
//!    [`Status::certifies`]), and the claimed level is the one the results
//!    reach.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::canonical;
use crate::model::{
    is_claimed, Level, Provenance, Report, ReportCase, Status, REPORT_FORMAT, REPORT_SCHEMA,
};

/// Version of the kit this verifier belongs to.
pub const KIT_VERSION: &str = commcheck::VERSION;

/// The top-level members of a schema-1 report.
const MEMBERS: [&str; 8] = [
    "format",
    "schema",
    "level",
    "provenance",
    "must_pass",
    "cases",
    "unused_waivers",
    "digest",
];

/// Reads and verifies the report at `path`.
pub fn verify_file(path: &Path) -> Result<Report, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| vec![format!("{}: cannot read: {error}", path.display())])?;
    verify(&text)
}

/// Parses a report and checks its schema version, without verifying it
/// (for `summary` and `diff`, which show what a report says).
pub fn load(text: &str) -> Result<Report, String> {
    let value = parse_json(text)?;
    let mut problems = Vec::new();
    if !check_header(&value, &mut problems) {
        return Err(problems.join("; "));
    }
    serde_json::from_value(value)
        .map_err(|error| format!("not a schema-{REPORT_SCHEMA} report: {error}"))
}

/// Reads a report without verifying it (see [`load`]).
pub fn load_file(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("{}: cannot read: {error}", path.display()))?;
    load(&text).map_err(|error| format!("{}: {error}", path.display()))
}

/// Verifies a report given as JSON text: the report, or every problem found.
pub fn verify(text: &str) -> Result<Report, Vec<String>> {
    let value = parse_json(text).map_err(|problem| vec![problem])?;
    let mut problems = Vec::new();
    if !check_header(&value, &mut problems) {
        return Err(problems);
    }
    let Value::Object(members) = &value else {
        return Err(problems);
    };
    check_digest(&value, members, &mut problems);
    let parts = Parts::parse(members, &mut problems);
    if let Some(provenance) = &parts.provenance {
        check_provenance(provenance, &mut problems);
    }
    for (index, case) in parts.cases.iter().enumerate() {
        if let Some(case) = case {
            check_case(index, case, parts.provenance.as_ref(), &mut problems);
        }
    }
    for (index, waiver) in parts.unused_waivers.iter().enumerate() {
        let at = format!(
            "unused_waivers[{index}] ({}::{})",
            waiver.invariant, waiver.subject
        );
        check_waiver_text(&at, &waiver.reason, &waiver.link, &mut problems);
    }
    if let (Some(must_pass), Some(provenance)) = (&parts.must_pass, &parts.provenance) {
        let cases: Vec<ReportCase> = parts.cases.iter().flatten().cloned().collect();
        check_completeness(must_pass, &cases, provenance, &mut problems);
        if let Some(level) = parts.level {
            check_level(level, must_pass, &cases, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    serde_json::from_value(value).map_err(|error| vec![format!("report: {error}")])
}

fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|error| {
        let hint = if error.is_eof() {
            " (the file ends early: it looks truncated)"
        } else {
            ""
        };
        format!("not valid JSON: {error}{hint}")
    })
}

/// Checks `format` and `schema`; false when the rest cannot be interpreted.
fn check_header(value: &Value, problems: &mut Vec<String>) -> bool {
    let Value::Object(members) = value else {
        problems.push("report: expected a JSON object at the top level".to_owned());
        return false;
    };
    match members.get("format") {
        Some(Value::String(format)) if format == REPORT_FORMAT => {}
        Some(other) => problems.push(format!(
            "format: expected \"{REPORT_FORMAT}\", found {other}"
        )),
        None => problems.push(format!("format: missing (expected \"{REPORT_FORMAT}\")")),
    }
    match members.get("schema") {
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(REPORT_SCHEMA)) => true,
        Some(Value::Number(n)) => {
            problems.push(format!(
                "schema: version {n} is not known to this verifier (it reads version {REPORT_SCHEMA})"
            ));
            false
        }
        Some(other) => {
            problems.push(format!("schema: expected a version number, found {other}"));
            false
        }
        None => {
            problems.push("schema: missing (no schema version)".to_owned());
            false
        }
    }
}

fn check_digest(value: &Value, members: &Map<String, Value>, problems: &mut Vec<String>) {
    let computed = canonical::report_digest(value);
    match members.get("digest") {
        Some(Value::String(recorded)) if *recorded == computed => {}
        Some(Value::String(recorded)) => problems.push(format!(
            "digest: recorded {recorded}, but the report's canonical form hashes to {computed}: \
             the report was altered after it was written"
        )),
        Some(other) => problems.push(format!("digest: expected a string, found {other}")),
        None => problems.push("digest: missing".to_owned()),
    }
    if let Some(Value::Array(cases)) = members.get("cases") {
        for (index, case) in cases.iter().enumerate() {
            check_fingerprint(index, case, problems);
        }
    }
}

fn case_label(index: usize, case: &Value) -> String {
    match case.get("name").and_then(Value::as_str) {
        Some(name) => format!("case {name} (cases[{index}])"),
        None => format!("cases[{index}]"),
    }
}

fn check_fingerprint(index: usize, case: &Value, problems: &mut Vec<String>) {
    let computed = canonical::case_fingerprint(case);
    match case.get("fingerprint").and_then(Value::as_str) {
        Some(recorded) if recorded == computed => {}
        Some(recorded) => problems.push(format!(
            "{}: content does not match its fingerprint (recorded {recorded}, computed {computed}): \
             the case was edited after the report was written",
            case_label(index, case)
        )),
        None => problems.push(format!("{}: fingerprint missing", case_label(index, case))),
    }
}

/// The typed members of a report; a member that does not parse is `None`
/// (and a problem).
struct Parts {
    level: Option<Level>,
    provenance: Option<Provenance>,
    must_pass: Option<Vec<String>>,
    cases: Vec<Option<ReportCase>>,
    unused_waivers: Vec<crate::Expectation>,
}

fn member<T: DeserializeOwned>(
    members: &Map<String, Value>,
    name: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    let Some(value) = members.get(name) else {
        problems.push(format!("{name}: missing"));
        return None;
    };
    serde_json::from_value(value.clone())
        .map_err(|error| problems.push(format!("{name}: {error}")))
        .ok()
}

fn elements<T: DeserializeOwned>(
    members: &Map<String, Value>,
    name: &str,
    label: impl Fn(usize, &Value) -> String,
    problems: &mut Vec<String>,
) -> Vec<Option<T>> {
    match members.get(name) {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(index, item)| {
                serde_json::from_value(item.clone())
                    .map_err(|error| problems.push(format!("{}: {error}", label(index, item))))
                    .ok()
            })
            .collect(),
        Some(other) => {
            problems.push(format!("{name}: expected an array, found {}", kind(other)));
            Vec::new()
        }
        None => {
            problems.push(format!("{name}: missing"));
            Vec::new()
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Parts {
    fn parse(members: &Map<String, Value>, problems: &mut Vec<String>) -> Self {
        for name in members.keys().filter(|k| !MEMBERS.contains(&k.as_str())) {
            problems.push(format!("{name}: unknown member for schema {REPORT_SCHEMA}"));
        }
        Self {
            level: member(members, "level", problems),
            provenance: member(members, "provenance", problems),
            must_pass: member(members, "must_pass", problems),
            cases: elements(members, "cases", case_label, problems),
            unused_waivers: elements(
                members,
                "unused_waivers",
                |i, _| format!("unused_waivers[{i}]"),
                problems,
            )
            .into_iter()
            .flatten()
            .collect(),
        }
    }
}

fn check_provenance(provenance: &Provenance, problems: &mut Vec<String>) {
    if provenance.kit_version.trim().is_empty() {
        problems.push("provenance.kit_version: empty".to_owned());
    }
    if provenance.backend.name.trim().is_empty() {
        problems.push("provenance.backend.name: empty".to_owned());
    }
    if let Some(revision) = &provenance.git_revision {
        if revision.is_empty() || !revision.bytes().all(|b| b.is_ascii_hexdigit()) {
            problems.push(format!(
                "provenance.git_revision: `{revision}` is not a hex commit id"
            ));
        }
    }
}

fn check_waiver_text(at: &str, reason: &str, link: &str, problems: &mut Vec<String>) {
    if reason.trim().is_empty() {
        problems.push(format!(
            "{at}: waiver has no reason (a waiver needs a reason and a link)"
        ));
    }
    if link.trim().is_empty() {
        problems.push(format!(
            "{at}: waiver has no link (a waiver needs a reason and a link)"
        ));
    }
}

fn check_case(
    index: usize,
    case: &ReportCase,
    provenance: Option<&Provenance>,
    problems: &mut Vec<String>,
) {
    let at = format!("case {} (cases[{index}])", case.name);
    let expected_name = format!("{}::{}", case.invariant, case.subject);
    if case.name != expected_name {
        problems.push(format!(
            "{at}: name does not match its invariant and subject (`{expected_name}`)"
        ));
    }
    if provenance.is_some_and(|p| p.kit_version == KIT_VERSION) {
        match commcheck::spec::invariant(&case.invariant) {
            None => problems.push(format!(
                "{at}: `{}` is not an invariant of kit {KIT_VERSION}",
                case.invariant
            )),
            Some(invariant) => {
                if invariant.family != case.family {
                    problems.push(format!(
                        "{at}: family `{}`, SPEC says `{}`",
                        case.family, invariant.family
                    ));
                }
                if invariant.class != case.class {
                    problems.push(format!(
                        "{at}: class {:?}, SPEC says {:?}",
                        case.class, invariant.class
                    ));
                }
            }
        }
    }
    let expected = Status::of(case.verdict, case.waiver.is_some());
    if case.status != expected {
        problems.push(format!(
            "{at}: status `{}` does not follow from verdict `{}` {} a waiver (expected `{expected}`)",
            case.status,
            case.verdict,
            if case.waiver.is_some() { "with" } else { "without" }
        ));
    }
    if case.verdict != commcheck::Verdict::Pass
        && case.message.as_deref().is_none_or(|m| m.trim().is_empty())
    {
        problems.push(format!("{at}: verdict `{}` has no message", case.verdict));
    }
    if case.attempts == 0 {
        problems.push(format!("{at}: zero attempts"));
    }
    if let Some(waiver) = &case.waiver {
        check_waiver_text(&at, &waiver.reason, &waiver.link, problems);
    }
}

fn check_completeness(
    must_pass: &[String],
    cases: &[ReportCase],
    provenance: &Provenance,
    problems: &mut Vec<String>,
) {
    if must_pass.is_empty() {
        problems.push("must_pass: empty (a report must list the cases it certifies)".to_owned());
    }
    let mut listed: BTreeMap<&str, usize> = BTreeMap::new();
    for name in must_pass {
        *listed.entry(name).or_default() += 1;
    }
    for (name, count) in listed.iter().filter(|(_, count)| **count > 1) {
        problems.push(format!("must_pass: case {name} is listed {count} times"));
    }
    let mut results: BTreeMap<&str, usize> = BTreeMap::new();
    for case in cases {
        *results.entry(&case.name).or_default() += 1;
    }
    for name in listed.keys() {
        match results.get(name).copied().unwrap_or(0) {
            1 => {}
            0 => problems.push(format!(
                "case {name}: must-pass case has no result (missing)"
            )),
            n => problems.push(format!(
                "case {name}: {n} results (duplicate; expected exactly one)"
            )),
        }
    }
    for (index, case) in cases.iter().enumerate() {
        let claimed = is_claimed(case.subject, &provenance.claims);
        let at = format!("case {} (cases[{index}])", case.name);
        if listed.contains_key(case.name.as_str()) {
            if !claimed {
                problems.push(format!(
                    "{at}: must-pass, but `{}` is not claimed by the backend",
                    case.subject
                ));
            }
        } else if claimed {
            problems.push(format!(
                "{at}: a result for a claimed subject outside the must-pass list"
            ));
        } else if case.verdict != commcheck::Verdict::NotSupported {
            problems.push(format!(
                "{at}: `{}` is not claimed, so the case must be not-supported, not `{}`",
                case.subject, case.verdict
            ));
        } else if results.get(case.name.as_str()).copied().unwrap_or(0) > 1 {
            problems.push(format!("{at}: duplicate result (expected exactly one)"));
        }
    }
}

fn check_level(
    claimed: Level,
    must_pass: &[String],
    cases: &[ReportCase],
    problems: &mut Vec<String>,
) {
    let allowed: Vec<&str> = Status::ALL
        .iter()
        .filter(|s| s.certifies())
        .map(|s| s.as_str())
        .collect();
    for name in must_pass {
        let mut results = cases.iter().filter(|c| c.name == *name);
        if let (Some(case), None) = (results.next(), results.next()) {
            if claimed.requires(case.class) && !case.status.certifies() {
                problems.push(format!(
                    "case {name}: status `{}` is not allowed at level {claimed} for a class-{:?} invariant (allowed: {})",
                    case.status,
                    case.class,
                    allowed.join(", ")
                ));
            }
        }
    }
    let reached = Level::reached(must_pass, cases);
    if reached != claimed {
        problems.push(format!(
            "level: the report claims `{claimed}`, but its results reach `{reached}`"
        ));
    }
}
