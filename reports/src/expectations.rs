//! Expectations files: known failures, waived with a reason and a link.
//!
//! ```toml
//! # expectations.toml
//! [[waiver]]
//! invariant = "CAN-2"             # an invariant ID (INVARIANTS.md)
//! subject = "all_reduce_sum"      # a case subject, or "*" for every subject
//! reason = "deadline overshoot under load, see the issue"
//! link = "https://tracker.example/issues/12"
//! ```
//!
//! Every field is required and must be non-empty; unknown fields are
//! rejected. A waived failure is reported `waived` (not a failure); a waived
//! case that passes is reported `unexpected-pass`; an entry that matches no
//! case is listed in the report's `unused_waivers`. An entry for a specific
//! subject takes precedence over a `"*"` entry of the same invariant.
//!
//! The file is UTF-8 TOML of at most [`crate::verify::MAX_INPUT_BYTES`]
//! ([`Expectations::load`] refuses a larger one before reading it); a
//! leading byte-order mark is ignored, as in a JSON report. A key repeated
//! in one table (two `reason`s in a waiver) is a TOML error, so no copy is
//! picked silently. Every problem names the file, the line and the field.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use commcheck::{Operation, Subject};
use serde::Deserialize;
use toml::Spanned;

// Defined with the report data it is part of (`unused_waivers`); shown here
// too, where it has always been documented.
#[doc(inline)]
pub use crate::model::Expectation;
use crate::model::ReportCase;

/// Whether `entry` applies to `invariant` on `subject`: the same invariant,
/// and the same subject or `*`.
fn matches(entry: &Expectation, invariant: &str, subject: Subject) -> bool {
    entry.invariant == invariant && (entry.subject == "*" || entry.subject == subject.name())
}

/// A parsed, validated expectations file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectations {
    entries: Vec<Expectation>,
}

/// Why an expectations file was rejected: every problem found, each naming
/// the file, the line and the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectationsError {
    /// One line per problem, `<file>:<line>: <what is wrong>`.
    pub problems: Vec<String>,
}

impl std::fmt::Display for ExpectationsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problems.join("\n"))
    }
}

impl std::error::Error for ExpectationsError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    waiver: Vec<Spanned<RawWaiver>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWaiver {
    invariant: Option<Spanned<String>>,
    subject: Option<Spanned<String>>,
    reason: Option<Spanned<String>>,
    link: Option<Spanned<String>>,
}

/// Longest value or TOML message quoted in a problem, in characters.
const QUOTE_CHARS: usize = 240;

/// `text`, cut to `max` characters with `…` and the full length when longer.
fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len())),
    }
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Every subject name a waiver may use.
fn subject_names() -> Vec<&'static str> {
    let mut names = vec![
        "local_dependencies",
        "submit",
        "fork_executors",
        "order_after",
    ];
    names.extend(Operation::ALL.map(Operation::name));
    names
}

impl Expectations {
    /// No waivers.
    pub fn none() -> Self {
        Self::default()
    }

    /// The waivers, in file order.
    pub fn entries(&self) -> &[Expectation] {
        &self.entries
    }

    /// Reads ([`crate::verify::read_text`]: size limit, UTF-8, not a
    /// folder) and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ExpectationsError> {
        let text = crate::input::read_text(path).map_err(|problem| ExpectationsError {
            problems: vec![problem],
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses an expectations file; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<Self, ExpectationsError> {
        let raw: RawFile = toml::from_str(text).map_err(|error| {
            let line = error.span().map_or(1, |span| line_of(text, span.start));
            let context = text
                .lines()
                .nth(line - 1)
                .unwrap_or("")
                .trim()
                .trim_start_matches('\u{feff}');
            ExpectationsError {
                problems: vec![format!(
                    "{source}:{line}: {} (at `{}`)",
                    shorten(error.message().trim(), QUOTE_CHARS),
                    shorten(context, QUOTE_CHARS)
                )],
            }
        })?;
        let mut problems = Vec::new();
        let mut entries: Vec<(usize, Expectation)> = Vec::new();
        // The line of the first waiver of each `invariant::subject`.
        let mut first_line: HashMap<(String, String), usize> = HashMap::new();
        let subjects = subject_names();
        for (index, waiver) in raw.waiver.iter().enumerate() {
            let line = line_of(text, waiver.span().start);
            let at = |field: &Option<Spanned<String>>| {
                field
                    .as_ref()
                    .map_or(line, |f| line_of(text, f.span().start))
            };
            let waiver = waiver.get_ref();
            let mut field = |name: &str, value: &Option<Spanned<String>>| -> String {
                match value {
                    None => {
                        problems.push(format!(
                            "{source}:{line}: waiver #{} has no `{name}` (required)",
                            index + 1
                        ));
                        String::new()
                    }
                    Some(v) if v.get_ref().trim().is_empty() => {
                        problems.push(format!(
                            "{source}:{}: waiver #{}: field `{name}` is empty (required)",
                            at(value),
                            index + 1
                        ));
                        String::new()
                    }
                    Some(v) => v.get_ref().trim().to_owned(),
                }
            };
            let entry = Expectation {
                invariant: field("invariant", &waiver.invariant),
                subject: field("subject", &waiver.subject),
                reason: field("reason", &waiver.reason),
                link: field("link", &waiver.link),
            };
            if !entry.invariant.is_empty() && commcheck::spec::invariant(&entry.invariant).is_none()
            {
                problems.push(format!(
                    "{source}:{}: waiver #{}: field `invariant`: `{}` is not an invariant ID of INVARIANTS.md \
                     (expected e.g. `CAN-2`)",
                    at(&waiver.invariant),
                    index + 1,
                    shorten(&entry.invariant, QUOTE_CHARS)
                ));
            }
            if !entry.subject.is_empty()
                && entry.subject != "*"
                && !subjects.contains(&entry.subject.as_str())
            {
                problems.push(format!(
                    "{source}:{}: waiver #{}: field `subject`: `{}` is not a subject (expected `*` or one of {})",
                    at(&waiver.subject),
                    index + 1,
                    shorten(&entry.subject, QUOTE_CHARS),
                    subjects.join(", ")
                ));
            }
            let key = (entry.invariant.clone(), entry.subject.clone());
            if let Some(first) = first_line.get(&key) {
                problems.push(format!(
                    "{source}:{line}: waiver #{} repeats `{}::{}` (first waived at line {first})",
                    index + 1,
                    shorten(&entry.invariant, QUOTE_CHARS),
                    shorten(&entry.subject, QUOTE_CHARS)
                ));
            } else {
                first_line.insert(key, line);
            }
            entries.push((line, entry));
        }
        if problems.is_empty() {
            Ok(Self {
                entries: entries.into_iter().map(|(_, e)| e).collect(),
            })
        } else {
            Err(ExpectationsError { problems })
        }
    }

    /// The waiver for `invariant` on `subject`: an exact entry, else a `*` one.
    pub fn waiver_for(&self, invariant: &str, subject: Subject) -> Option<&Expectation> {
        let matching = || {
            self.entries
                .iter()
                .filter(move |e| matches(e, invariant, subject))
        };
        matching()
            .find(|e| e.subject != "*")
            .or_else(|| matching().next())
    }

    /// Entries that apply to none of `cases`.
    pub fn unused(&self, cases: &[ReportCase]) -> Vec<Expectation> {
        let invariants: HashSet<&str> = cases.iter().map(|c| c.invariant.as_str()).collect();
        let exact: HashSet<(&str, &str)> = cases
            .iter()
            .map(|c| (c.invariant.as_str(), c.subject.name()))
            .collect();
        self.entries
            .iter()
            .filter(|e| {
                if e.subject == "*" {
                    !invariants.contains(e.invariant.as_str())
                } else {
                    !exact.contains(&(e.invariant.as_str(), e.subject.as_str()))
                }
            })
            .cloned()
            .collect()
    }
}
