//! Step 4 of [`verify`](super::verify): every top-level member typed, each
//! one that does not parse named with the member or element at fault, and
//! no unknown member.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::fault::at_fault;
use super::messages::{case_label, kind, shorten, NAME_CHARS};
use crate::model::{Expectation, Level, Provenance, ReportCase, REPORT_SCHEMA};

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

/// The typed members of a report; a member that does not parse is `None`
/// (and a problem).
pub(super) struct Parts {
    pub(super) level: Option<Level>,
    pub(super) provenance: Option<Provenance>,
    pub(super) must_pass: Option<Vec<String>>,
    pub(super) cases: Vec<Option<ReportCase>>,
    pub(super) unused_waivers: Vec<Expectation>,
    /// `invariants` (optional: absent when no case fails).
    pub(super) invariants: Option<std::collections::BTreeMap<String, String>>,
}

/// The member `name`, typed.
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

/// The elements of the array member `name`, each typed on its own.
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

impl Parts {
    /// The members of the report object `members`; each problem found is
    /// pushed to `problems`.
    pub(super) fn parse(members: &Map<String, Value>, problems: &mut Vec<String>) -> Self {
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
