//! Steps 2 and 3 of [`verify`](super::verify): the header (`format` and
//! `schema`) and the checksums (the report's digest, each case's
//! fingerprint; see [`crate::canonical`]).

use serde_json::{Map, Value};

use super::messages::{case_label, describe, shorten, QUOTE_CHARS};
use crate::canonical;
use crate::model::{REPORT_FORMAT, REPORT_SCHEMA};

/// Checks `format` and `schema`; false when the rest cannot be interpreted.
pub(super) fn check_header(value: &Value, problems: &mut Vec<String>) -> bool {
    let Value::Object(members) = value else {
        problems.push(format!(
            "report: expected a JSON object at the top level, found {}",
            describe(value)
        ));
        return false;
    };
    match members.get("format") {
        Some(Value::String(format)) if format == REPORT_FORMAT => {}
        Some(other) => problems.push(format!(
            "format: expected the string \"{REPORT_FORMAT}\", found {}",
            describe(other)
        )),
        None => problems.push(format!("format: missing (expected \"{REPORT_FORMAT}\")")),
    }
    match members.get("schema") {
        Some(Value::Number(n)) if n.as_u64() == Some(u64::from(REPORT_SCHEMA)) => true,
        Some(Value::Number(n)) if n.is_u64() => {
            problems.push(format!(
                "schema: version {n} is not known to this verifier (it reads version {REPORT_SCHEMA})"
            ));
            false
        }
        Some(other) => {
            problems.push(format!(
                "schema: expected a version number (a whole number; this verifier reads \
                 {REPORT_SCHEMA}), found {}",
                describe(other)
            ));
            false
        }
        None => {
            problems.push("schema: missing (no schema version)".to_owned());
            false
        }
    }
}

/// Checks the report's digest and each case's fingerprint against the
/// canonical form.
pub(super) fn check_digest(
    value: &Value,
    members: &Map<String, Value>,
    problems: &mut Vec<String>,
) {
    let computed = canonical::report_digest(value);
    match members.get("digest") {
        Some(Value::String(recorded)) if *recorded == computed => {}
        Some(Value::String(recorded)) => problems.push(format!(
            "digest: recorded {}, but the report's canonical form hashes to {computed}: \
             the report was altered after it was written",
            shorten(recorded, QUOTE_CHARS)
        )),
        Some(other) => problems.push(format!(
            "digest: expected a string (\"{}<64 hex digits>\"), found {}",
            canonical::DIGEST_PREFIX,
            describe(other)
        )),
        None => problems.push(format!(
            "digest: missing (expected \"{}<64 hex digits>\")",
            canonical::DIGEST_PREFIX
        )),
    }
    if let Some(Value::Array(cases)) = members.get("cases") {
        for (index, case) in cases.iter().enumerate() {
            check_fingerprint(index, case, problems);
        }
    }
}

/// Checks the fingerprint of case `index` against the case.
fn check_fingerprint(index: usize, case: &Value, problems: &mut Vec<String>) {
    let computed = canonical::case_fingerprint(case);
    match case.get("fingerprint") {
        Some(Value::String(recorded)) if *recorded == computed => {}
        Some(Value::String(recorded)) => problems.push(format!(
            "{}: content does not match its fingerprint (recorded {}, computed {computed}): \
             the case was edited after the report was written",
            case_label(index, case),
            shorten(recorded, QUOTE_CHARS)
        )),
        Some(other) => problems.push(format!(
            "{}: fingerprint: expected a string of 16 hex digits, found {}",
            case_label(index, case),
            describe(other)
        )),
        None if !case.is_object() => problems.push(format!(
            "{}: expected a case object, found {}",
            case_label(index, case),
            describe(case)
        )),
        None => problems.push(format!("{}: fingerprint missing", case_label(index, case))),
    }
}
