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
//!    status = [`Status::of`] its verdict and waiver, a message for every
//!    verdict but `pass`, at least one attempt, and every waiver (on a case
//!    or unused) has a reason and a link;
//! 6. the must-pass list is non-empty and without repeats, every must-pass
//!    case has exactly one result, and every other result is a
//!    `not-supported` case of an unclaimed operation;
//! 7. only statuses the claimed level allows appear ([`Level::requires`],
//!    [`Status::certifies`]), and the claimed level is the one the results
//!    reach.
//!
//! Files are read through [`read_text`]: at most [`MAX_INPUT_BYTES`] (a
//! larger file is refused before it is read), UTF-8 only, and never a
//! folder; each refusal starts `<path>: cannot read:` and says why.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize as _;
use serde_json::{Map, Value};

use crate::canonical;
pub use crate::input::{read_bounded, read_text, MAX_INPUT_BYTES};
use crate::model::{
    is_claimed, sole_results, Level, Provenance, Report, ReportCase, Status, REPORT_FORMAT,
    REPORT_SCHEMA,
};

/// Version of the kit this verifier belongs to.
pub const KIT_VERSION: &str = commcheck::VERSION;

/// The top-level members of a schema-1 report.
const MEMBERS: [&str; 9] = [
    "format",
    "schema",
    "level",
    "provenance",
    "must_pass",
    "cases",
    "unused_waivers",
    "invariants",
    "digest",
];

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

/// Parses JSON text as [`verify`] and [`load`] read it (see the module docs).
fn parse_json(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.starts_with('\u{feff}') {
        return Err(
            "not valid JSON: a second byte-order mark right after the first, at line 1 \
             (one at the start is ignored; expected a report: a JSON object)"
                .to_owned(),
        );
    }
    if text.trim().is_empty() {
        return Err(format!(
            "not valid JSON: the input is {} (expected a report: a JSON object)",
            if text.is_empty() {
                "empty"
            } else {
                "only whitespace"
            }
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    UniqueMembers { at: &Place::Root }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|error| {
            if error.is_data() {
                // A repeated member: valid JSON syntax, refused by the reader.
                return error.to_string();
            }
            let hint = if error.is_eof() {
                " (the file ends early: it looks truncated)"
            } else if error.to_string().starts_with("recursion limit exceeded") {
                " (arrays and objects nest more than 128 deep; a report nests a few levels)"
            } else {
                ""
            };
            format!("not valid JSON: {error}{hint}")
        })
}

/// Where a JSON value sits in the document, for messages: `cases[3].status`.
enum Place<'a> {
    Root,
    Member(&'a Place<'a>, &'a str),
    Element(&'a Place<'a>, usize),
}

impl fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Root => Ok(()),
            Self::Member(Self::Root, key) => f.write_str(&shorten(key, NAME_CHARS)),
            Self::Member(parent, key) => write!(f, "{parent}.{}", shorten(key, NAME_CHARS)),
            Self::Element(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// Deserializes a [`Value`], refusing an object that names a member twice
/// (serde_json keeps the last copy silently). serde_json's own recursion
/// limit (128) still bounds the nesting.
struct UniqueMembers<'a> {
    at: &'a Place<'a>,
}

impl<'de> DeserializeSeed<'de> for UniqueMembers<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueMembers<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(UniqueMembers {
            at: &Place::Element(self.at, items.len()),
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if members.contains_key(&key) {
                let case = match members.get("name") {
                    Some(Value::String(name)) => format!(" (case {})", shorten(name, NAME_CHARS)),
                    _ => String::new(),
                };
                return Err(de::Error::custom(format!(
                    "{}{case}: member `{}` appears more than once (each member may appear once: \
                     readers disagree on which copy counts)",
                    match self.at {
                        Place::Root => "report".to_owned(),
                        at => format!("`{at}`"),
                    },
                    shorten(&key, NAME_CHARS)
                )));
            }
            let value = map.next_value_seed(UniqueMembers {
                at: &Place::Member(self.at, &key),
            })?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

/// Longest name (case, member) quoted whole in a message, in characters.
const NAME_CHARS: usize = 120;

/// Longest value or serde message quoted in a problem, in characters.
const QUOTE_CHARS: usize = 240;

/// `text`, cut to `max` characters with `…` and the full length when longer.
fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len())),
    }
}

/// A JSON value as a message quotes it: scalars as written (long strings
/// shortened), arrays and objects by their size.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!(
            "the string {}",
            shorten(&serde_json::to_string(s).unwrap_or_default(), QUOTE_CHARS)
        ),
        Value::Array(items) => format!("an array of {} element(s)", items.len()),
        Value::Object(members) => format!("an object of {} member(s)", members.len()),
    }
}

/// Why `value` (at `label`) is not a `T`: `label`, the member or element
/// at fault inside it (`provenance: at `host.cpus`: …`), then serde's
/// message (shortened: it may quote a long value).
///
/// The narrowing keeps, at each level, the shortest prefix of the members
/// (in the order they are read) or elements that still fails with an error
/// other than a missing field: the last one kept is the one at fault.
fn at_fault<T: DeserializeOwned>(label: &str, value: &Value, error: &serde_json::Error) -> String {
    let fails = |candidate: &Value| {
        T::deserialize(candidate)
            .err()
            .is_some_and(|e| !e.to_string().starts_with("missing field"))
    };
    let mut path = String::new();
    let mut trial = value.clone();
    let mut steps: Vec<Step> = Vec::new();
    // Each level costs O(log n) trial parses; parsing bounds the depth (128).
    loop {
        let len = match node(&trial, &steps) {
            Some(Value::Object(members)) => members.len(),
            Some(Value::Array(items)) => items.len(),
            _ => break,
        };
        if len == 0 || fails(&prefix(&trial, &steps, 0)) || !fails(&trial) {
            break;
        }
        // The smallest `keep` in 1..=len that still fails.
        let (mut low, mut high) = (1, len);
        while low < high {
            let middle = low + (high - low) / 2;
            if fails(&prefix(&trial, &steps, middle)) {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        trial = prefix(&trial, &steps, low);
        let step = match node(&trial, &steps) {
            Some(Value::Object(members)) => match members.keys().nth(low - 1) {
                Some(key) => Step::Key(key.clone()),
                None => break,
            },
            _ => Step::Index(low - 1),
        };
        match &step {
            Step::Key(key) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&shorten(key, NAME_CHARS));
            }
            Step::Index(index) => path.push_str(&format!("[{index}]")),
        }
        steps.push(step);
    }
    let message = shorten(&error.to_string(), QUOTE_CHARS).into_owned();
    if path.is_empty() {
        format!("{label}: {message}")
    } else {
        format!("{label}: at `{path}`: {message}")
    }
}

/// One step down into a JSON value.
enum Step {
    Key(String),
    Index(usize),
}

/// The value `steps` lead to inside `value`.
fn node<'v>(value: &'v Value, steps: &[Step]) -> Option<&'v Value> {
    steps.iter().try_fold(value, |value, step| match step {
        Step::Key(key) => value.get(key.as_str()),
        Step::Index(index) => value.get(*index),
    })
}

/// `value` with only the first `keep` members (in key order) or elements
/// of the object or array that `steps` lead to.
fn prefix(value: &Value, steps: &[Step], keep: usize) -> Value {
    let mut value = value.clone();
    let target = steps.iter().try_fold(&mut value, |value, step| match step {
        Step::Key(key) => value.get_mut(key.as_str()),
        Step::Index(index) => value.get_mut(*index),
    });
    match target {
        Some(Value::Object(members)) => {
            let dropped: Vec<String> = members.keys().skip(keep).cloned().collect();
            for key in dropped {
                members.remove(&key);
            }
        }
        Some(Value::Array(items)) => items.truncate(keep),
        _ => {}
    }
    value
}

/// Checks `format` and `schema`; false when the rest cannot be interpreted.
fn check_header(value: &Value, problems: &mut Vec<String>) -> bool {
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

fn check_digest(value: &Value, members: &Map<String, Value>, problems: &mut Vec<String>) {
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

fn case_label(index: usize, case: &Value) -> String {
    match case.get("name").and_then(Value::as_str) {
        Some(name) => case_at(index, name),
        None => format!("cases[{index}]"),
    }
}

/// `case <name> (cases[<index>])`, a long name shortened.
fn case_at(index: usize, name: &str) -> String {
    format!("case {} (cases[{index}])", shorten(name, NAME_CHARS))
}

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

/// The typed members of a report; a member that does not parse is `None`
/// (and a problem).
struct Parts {
    level: Option<Level>,
    provenance: Option<Provenance>,
    must_pass: Option<Vec<String>>,
    cases: Vec<Option<ReportCase>>,
    unused_waivers: Vec<crate::Expectation>,
    /// `invariants` (optional: absent when no case fails).
    invariants: Option<std::collections::BTreeMap<String, String>>,
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
    T::deserialize(value)
        .map_err(|error| problems.push(at_fault::<T>(name, value, &error)))
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
                T::deserialize(item)
                    .map_err(|error| {
                        problems.push(at_fault::<T>(&label(index, item), item, &error))
                    })
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
            problems.push(format!(
                "{}: unknown member for schema {REPORT_SCHEMA} (expected only {})",
                shorten(name, NAME_CHARS),
                MEMBERS.join(", ")
            ));
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
            invariants: if members.contains_key("invariants") {
                member(members, "invariants", problems)
            } else {
                Some(Default::default())
            },
        }
    }
}

/// `invariants` holds the kit's text of exactly the invariants the cases
/// fail.
fn check_invariant_texts(
    recorded: &std::collections::BTreeMap<String, String>,
    cases: &[ReportCase],
    problems: &mut Vec<String>,
) {
    let expected = crate::model::failing_invariants(cases);
    for (id, text) in &expected {
        match recorded.get(id) {
            None => problems.push(format!(
                "invariants: no text for {id}, which a case fails (expected the kit's text of every failing invariant)"
            )),
            Some(seen) if seen != text => problems.push(format!(
                "invariants.{id}: the text differs from the kit's ({})",
                shorten(text, QUOTE_CHARS)
            )),
            Some(_) => {}
        }
    }
    for id in recorded.keys().filter(|id| !expected.contains_key(*id)) {
        problems.push(format!(
            "invariants.{}: no case fails it (only failing invariants are listed)",
            shorten(id, NAME_CHARS)
        ));
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
                "provenance.git_revision: `{}` is not a hex commit id",
                shorten(revision, QUOTE_CHARS)
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
    let at = case_at(index, &case.name);
    let expected_name = format!("{}::{}", case.invariant, case.subject);
    if case.name != expected_name {
        problems.push(format!(
            "{at}: name does not match its invariant and subject (expected `{}`)",
            shorten(&expected_name, NAME_CHARS)
        ));
    }
    if provenance.is_some_and(|p| p.kit_version == KIT_VERSION) {
        match commcheck::spec::invariant(&case.invariant) {
            None => problems.push(format!(
                "{at}: `{}` is not an invariant of kit {KIT_VERSION}",
                shorten(&case.invariant, NAME_CHARS)
            )),
            Some(invariant) => {
                if invariant.family != case.family {
                    problems.push(format!(
                        "{at}: family `{}`, SPEC says `{}`",
                        shorten(&case.family, NAME_CHARS),
                        invariant.family
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
    // A case not-supported before anything ran is recorded without running
    // (zero attempts); every other verdict rests on at least one attempt.
    if case.attempts == 0 && case.verdict != commcheck::Verdict::NotSupported {
        problems.push(format!(
            "{at}: zero attempts for verdict `{}` (only a case not-supported before running has none)",
            case.verdict
        ));
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
        problems.push(format!(
            "must_pass: case {} is listed {count} times",
            shorten(name, NAME_CHARS)
        ));
    }
    let mut results: BTreeMap<&str, usize> = BTreeMap::new();
    for case in cases {
        *results.entry(&case.name).or_default() += 1;
    }
    for name in listed.keys() {
        let shown = shorten(name, NAME_CHARS);
        match results.get(name).copied().unwrap_or(0) {
            1 => {}
            0 => problems.push(format!(
                "case {shown}: must-pass case has no result (missing)"
            )),
            n => problems.push(format!(
                "case {shown}: {n} results (duplicate; expected exactly one)"
            )),
        }
    }
    for (index, case) in cases.iter().enumerate() {
        let claimed = is_claimed(case.subject, &provenance.claims);
        let at = case_at(index, &case.name);
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
    let results = sole_results(cases);
    for name in must_pass {
        if let Some(Some(case)) = results.get(name.as_str()) {
            if claimed.requires(case.class) && !case.status.certifies() {
                problems.push(format!(
                    "case {}: status `{}` is not allowed at level {claimed} for a class-{:?} invariant (allowed: {})",
                    shorten(name, NAME_CHARS),
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
