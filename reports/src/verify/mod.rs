//! Re-verification of a report: everything wrong with it, not just the first thing.
//!
//! Checked, in order (each problem names the case or field at fault):
//! 1. the file is complete JSON (a truncated file is named as such), nested
//!    at most 128 deep, and no object names a member twice (readers
//!    disagree on which copy counts, so a repeated `level` or `digest` is
//!    rejected rather than resolved); one leading UTF-8 byte-order mark is
//!    ignored (RFC 8259 allows a reader to; TOML expectations files get the
//!    same treatment from the TOML parser);
//! 2. `format` is `commcheck-report` and `schema` is [`REPORT_SCHEMA`]
//!    (an unknown schema stops verification there: its fields may mean
//!    something else);
//! 3. the digest matches the canonical form, and each case's fingerprint
//!    matches the case (see [`crate::canonical`]);
//! 4. every member has the right shape (no unknown member, no missing one);
//! 5. each case is coherent: name = `<invariant>::<subject>`, family and
//!    class as INVARIANTS.md states them (for a report of this kit version),
//!    status = [`Status::of`](crate::Status::of) its verdict and waiver, a
//!    message for every verdict but `pass`, at least one attempt, and every
//!    waiver (on a case or unused) has a reason and a link;
//! 6. the must-pass list is non-empty and without repeats, every must-pass
//!    case has exactly one result, and every other result is a
//!    `not-supported` case of an unclaimed operation;
//! 7. only statuses the claimed level allows appear
//!    ([`Level::requires`](crate::Level::requires),
//!    [`Status::certifies`](crate::Status::certifies)), and the claimed level
//!    is the one the results reach.
//!
//! Files are read through [`read_text`]: at most [`MAX_INPUT_BYTES`] (a
//! larger file is refused before it is read), UTF-8 only, and never a
//! folder; each refusal starts `<path>: cannot read:` and says why.
//!
//! Each step has its file: [`read_text`] and [`MAX_INPUT_BYTES`] come from
//! the crate's input layer; `json` reads the text (step 1), `integrity`
//! checks the header, digest and fingerprints (2, 3), `members` types the
//! members (4), `cases` checks each case and the provenance (5), `coverage`
//! the must-pass list and the level (6, 7); `messages` and `fault` word the
//! problems. This file holds the entry points and runs the steps in order.

use std::path::Path;

use serde::Deserialize as _;
use serde_json::Value;

pub use crate::input::{read_bounded, read_text, MAX_INPUT_BYTES};
use crate::model::{Report, ReportCase, REPORT_SCHEMA};
pub use cases::KIT_VERSION;

mod cases;
mod coverage;
mod fault;
mod integrity;
mod json;
mod members;
mod messages;

use cases::{check_case, check_invariant_texts, check_provenance, check_waiver_text};
use coverage::{check_completeness, check_level};
use fault::at_fault;
use integrity::{check_digest, check_header};
use json::parse_json;
use members::Parts;
use messages::{shorten, NAME_CHARS};

/// Reads and verifies the report at `path` ([`read_text`], then [`verify`]).
pub fn verify_file(path: &Path) -> Result<Report, Vec<String>> {
    let text = read_text(path).map_err(|problem| vec![problem])?;
    verify(&text)
}

/// Parses a report and checks its schema version, without verifying it
/// (for `summary` and `diff`, which show what a report says). The JSON is
/// read as [`verify`] reads it (byte-order mark, repeated members, depth).
pub fn load(text: &str) -> Result<Report, String> {
    let value = parse_json(text)?;
    let mut problems = Vec::new();
    if !check_header(&value, &mut problems) {
        return Err(problems.join("; "));
    }
    Report::deserialize(&value).map_err(|error| {
        at_fault::<Report>(
            &format!("not a schema-{REPORT_SCHEMA} report"),
            &value,
            &error,
        )
    })
}

/// Reads a report without verifying it ([`read_text`], then [`load`]).
pub fn load_file(path: &Path) -> Result<Report, String> {
    let text = read_text(path)?;
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
            shorten(&waiver.invariant, NAME_CHARS),
            shorten(&waiver.subject, NAME_CHARS)
        );
        check_waiver_text(&at, &waiver.reason, &waiver.link, &mut problems);
    }
    if let Some(recorded) = &parts.invariants {
        let cases: Vec<ReportCase> = parts.cases.iter().flatten().cloned().collect();
        check_invariant_texts(recorded, &cases, &mut problems);
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
    Report::deserialize(&value).map_err(|error| vec![at_fault::<Report>("report", &value, &error)])
}
