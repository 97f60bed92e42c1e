//! The canonical form of a report and its digests.
//!
//! **Canonical form.** The canonical form of a JSON value is:
//! - `null`, `true`, `false` as written;
//! - a number in serde_json's shortest round-trip decimal form (report
//!   numbers are all non-negative integers, written in plain decimal);
//! - a string as serde_json writes it: `"` and `\` escaped with a backslash,
//!   control characters below U+0020 as `\b`, `\f`, `\n`, `\r`, `\t` or
//!   `\u00XX` (lowercase hex), every other character as its literal UTF-8;
//! - an array as `[`, its elements' canonical forms separated by `,`, `]`;
//! - an object as `{`, its members sorted by key (byte-wise order of the
//!   keys' UTF-8), each written `"key":value` and separated by `,`, `}`;
//! - and no whitespace anywhere outside strings.
//!
//! **Volatile fields.** What differs between two runs that agree on
//! everything that matters (same kit, backend, seed and verdicts) stays out
//! of both digests: `provenance.generated_unix`, `provenance.host`,
//! `provenance.calibration`, and each case's `millis` and `attempts` (timing
//! and retries). Equal runs give equal digests; an edit of a volatile field
//! is not detected.
//!
//! **Report digest.** `digest` is `sha256:` followed by the 64 lowercase hex
//! digits of the SHA-256 of the canonical form of the whole report object
//! with its top-level `digest` member and the volatile fields removed. The
//! file itself may be pretty-printed: only its parsed content counts.
//!
//! **Case fingerprint.** Each case's `fingerprint` is the first 16 lowercase
//! hex digits of the SHA-256 of the canonical form of that case object with
//! its `fingerprint` member and its volatile fields removed. It lets
//! `verify` name the case that was edited; the report digest covers the
//! fingerprints too.
//!
//! **Why not RFC 8785 (JCS).** JCS, as `serde_json_canonicalizer`
//! implements it, writes every number as an IEEE 754 double (ECMAScript's
//! number form) and sorts keys by UTF-16 code units. A report's seeds are
//! `u64`s above 2^53: JCS would round them, and two reports that differ only
//! in a seed's low bits would share a digest. This form keeps integers
//! exact, which is what the digest must cover.
//!
//! Both detect accidental or careless edits and corruption. They are not
//! signatures: whoever can edit a report can recompute them. Sign the file
//! ([`crate::signature`]) when authenticity matters.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of [`crate::Report::digest`].
pub const DIGEST_PREFIX: &str = "sha256:";

/// Hex digits kept in a case fingerprint.
pub const FINGERPRINT_DIGITS: usize = 16;

/// The canonical form of `value` (see the module docs).
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                if let Some(member) = members.get(key) {
                    write_canonical(member, out);
                }
            }
            out.push('}');
        }
    }
}

/// A JSON string literal as serde_json writes it.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Lowercase hex SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// `value` without its top-level members `keys` (unchanged if not an
/// object).
fn without(value: &Value, keys: &[&str]) -> Value {
    let mut value = value.clone();
    if let Value::Object(members) = &mut value {
        for key in keys {
            members.remove(*key);
        }
    }
    value
}

/// A case's volatile members (see the module docs).
const VOLATILE_CASE: &[&str] = &["millis", "attempts"];

/// The provenance's volatile members (see the module docs).
const VOLATILE_PROVENANCE: &[&str] = &["generated_unix", "host", "calibration"];

/// The digest of a report given as JSON (its `digest` member and volatile
/// fields ignored).
pub fn report_digest(report: &Value) -> String {
    let mut stable = without(report, &["digest"]);
    if let Value::Object(members) = &mut stable {
        if let Some(provenance) = members.get_mut("provenance") {
            *provenance = without(provenance, VOLATILE_PROVENANCE);
        }
        if let Some(Value::Array(cases)) = members.get_mut("cases") {
            for case in cases {
                *case = without(case, VOLATILE_CASE);
            }
        }
    }
    format!("{DIGEST_PREFIX}{}", sha256_hex(&canonical(&stable)))
}

/// The fingerprint of one case object (its `fingerprint` member and
/// volatile fields ignored).
pub fn case_fingerprint(case: &Value) -> String {
    let mut hex = sha256_hex(&canonical(&without(
        &without(case, &["fingerprint"]),
        VOLATILE_CASE,
    )));
    hex.truncate(FINGERPRINT_DIGITS);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_sorts_keys_and_drops_whitespace() {
        let value: Value =
            serde_json::from_str(r#"{ "b": [1, {"z": null, "a": true}], "a": "x\"\n\u0001é" }"#)
                .unwrap_or(Value::Null);
        assert_eq!(
            canonical(&value),
            r#"{"a":"x\"\n\u0001é","b":[1,{"a":true,"z":null}]}"#
        );
    }

    #[test]
    fn strings_match_serde_json() {
        let s = "tab\t quote\" back\\ nul\u{0} del\u{7f} ü \u{1f}";
        assert_eq!(
            canonical(&Value::String(s.into())),
            serde_json::to_string(s).unwrap_or_default()
        );
    }

    #[test]
    fn digest_ignores_its_own_member_and_formatting() {
        let a: Value = serde_json::from_str(r#"{"x": 1, "digest": "old"}"#).unwrap_or(Value::Null);
        let b: Value = serde_json::from_str(r#"{"x":1}"#).unwrap_or(Value::Null);
        assert_eq!(report_digest(&a), report_digest(&b));
        assert_eq!(
            report_digest(&b),
            format!("sha256:{}", sha256_hex(r#"{"x":1}"#))
        );
    }
}
