//! Damaged versions of the valid report: random structural mutations (for
//! the property tests) and crafted edits (a member inserted, deep nesting,
//! a raw JSON token in place of a value).

use proptest::prelude::*;
use serde_json::Value;

use crate::valid_text;

/// One step down into a JSON value.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Key(String),
    Index(usize),
}

/// The path of every member and element of `value`.
fn paths(value: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    let children: Vec<(Step, &Value)> = match value {
        Value::Object(members) => members
            .iter()
            .map(|(k, v)| (Step::Key(k.clone()), v))
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (Step::Index(i), v))
            .collect(),
        _ => Vec::new(),
    };
    for (step, child) in children {
        prefix.push(step);
        out.push(prefix.clone());
        paths(child, prefix, out);
        prefix.pop();
    }
}

/// The value `path` leads to inside `value`.
fn node_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, step| match step {
        Step::Key(key) => value.get_mut(key.as_str()),
        Step::Index(index) => value.get_mut(*index),
    })
}

/// A marker string replaced by a raw JSON token after serialising.
const RAW_MARK: &str = "\u{2}raw\u{2}";
/// Keys replaced by the key of the duplicated member after serialising:
/// the first sorts before every report key, the second after.
const DUP_FIRST: &str = "\u{1}dup";
const DUP_LAST: &str = "\u{7f}dup";

#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    /// Remove the member or element.
    Delete,
    /// Replace it with another JSON value (often of the wrong type).
    Replace(Value),
    /// Replace it with a raw token (huge numbers, NaN, invalid escapes…).
    Raw(&'static str),
    /// A member named twice: the copy before or after the original, with
    /// the original's value (`None`) or another one.
    Duplicate { first: bool, value: Option<Value> },
}

/// `depth` arrays nested in one another around `null`.
fn nested_arrays_value(depth: usize) -> Value {
    (0..depth).fold(Value::Null, |inner, _| Value::Array(vec![inner]))
}

/// Values to put in place of a member or element.
fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::from(0)),
        Just(Value::from(-1)),
        Just(Value::from(u64::MAX)),
        Just(Value::from(i64::MIN)),
        Just(Value::from(u64::from(u32::MAX) + 1)),
        Just(Value::from(1.5)),
        Just(Value::from(1e308)),
        Just(Value::from(-1e308)),
        Just(Value::from("NaN")),
        Just(Value::from("Infinity")),
        Just(Value::from("-inf")),
        Just(Value::from("1e999")),
        Just(Value::from("")),
        Just(Value::from("x".repeat(5000))),
        Just(Value::from("\u{0}\u{1f}\u{7f}\u{feff}\u{fffd}é𝄞 | <b>`")),
        Just(Value::Array(Vec::new())),
        Just(serde_json::json!({})),
        Just(serde_json::json!([1, "two", null])),
        Just(serde_json::json!({"a": 1, "operation": "all_reduce_sum"})),
        Just(nested_arrays_value(100)),
        any::<String>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
    ]
}

/// A mutation of one member or element.
pub(crate) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::Delete),
        replacement().prop_map(Mutation::Replace),
        prop::sample::select(vec![
            "NaN",
            "Infinity",
            "-Infinity",
            "1e400",
            "-1e400",
            "18446744073709551616",
            "-9223372036854775809",
            "123456789012345678901234567890123456789",
            "1e-400",
            "01",
            "-",
            "+1",
            ".5",
            "1.",
            "1e",
            "0x10",
            "\"\\ud800\"",
            "\"\\u0000\"",
            "\"\\x41\"",
            "tru",
            "nul",
            "undefined",
            "[1,]",
            "{\"a\":1,}",
            "\"a\" \"b\"",
        ])
        .prop_map(Mutation::Raw),
        (any::<bool>(), prop::option::of(replacement()))
            .prop_map(|(first, value)| Mutation::Duplicate { first, value }),
    ]
}

/// The valid report's JSON with `mutation` applied at `path`.
pub(crate) fn mutate(path: &[Step], mutation: &Mutation) -> String {
    let mut value: Value = serde_json::from_str(&valid_text()).expect("a report is JSON");
    let (parent_path, last) = path.split_at(path.len() - 1);
    let mut raw = None;
    let mut duplicated = None;
    match mutation {
        Mutation::Delete => match (node_mut(&mut value, parent_path), &last[0]) {
            (Some(Value::Object(members)), Step::Key(key)) => {
                members.remove(key);
            }
            (Some(Value::Array(items)), Step::Index(index)) => {
                items.remove(*index);
            }
            _ => {}
        },
        Mutation::Replace(new) => {
            if let Some(node) = node_mut(&mut value, path) {
                *node = new.clone();
            }
        }
        Mutation::Raw(token) => {
            if let Some(node) = node_mut(&mut value, path) {
                *node = Value::from(RAW_MARK);
                raw = Some(*token);
            }
        }
        Mutation::Duplicate { first, value: copy } => {
            let original = node_mut(&mut value, path).map(|node| node.clone());
            let copy = copy.clone().or(original).unwrap_or(Value::Null);
            match (node_mut(&mut value, parent_path), &last[0]) {
                (Some(Value::Object(members)), Step::Key(key)) => {
                    let mark = if *first { DUP_FIRST } else { DUP_LAST };
                    members.insert(mark.to_owned(), copy);
                    duplicated = Some((mark, key.clone()));
                }
                (Some(Value::Array(items)), Step::Index(index)) => {
                    items.insert(*index, copy);
                }
                _ => {}
            }
        }
    }
    let mut text = serde_json::to_string_pretty(&value).expect("JSON");
    if let Some(token) = raw {
        text = text.replace(&serde_json::to_string(RAW_MARK).expect("JSON"), token);
    }
    if let Some((mark, key)) = duplicated {
        text = text.replace(
            &serde_json::to_string(mark).expect("JSON"),
            &serde_json::to_string(&key).expect("JSON"),
        );
    }
    text
}

/// The path of every member and element of the valid report.
pub(crate) fn all_paths() -> Vec<Vec<Step>> {
    let value: Value = serde_json::from_str(&valid_text()).expect("a report is JSON");
    let mut out = Vec::new();
    paths(&value, &mut Vec::new(), &mut out);
    out
}

/// `text` with `member` inserted right after the first `anchor`.
pub(crate) fn insert_after(text: &str, anchor: &str, member: &str) -> String {
    let at = text.find(anchor).expect("anchor in the report") + anchor.len();
    format!("{}{member}{}", &text[..at], &text[at..])
}

/// `[` × depth then `]` × depth.
pub(crate) fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `{"a":` × depth, `null`, `}` × depth.
pub(crate) fn nested_objects(depth: usize) -> String {
    format!("{}null{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

/// The valid report with the value of `member` of the first case (or of
/// the report, for `cases`) replaced by `raw` JSON.
pub(crate) fn with_raw_member(member: &str, raw: &str) -> String {
    let mut value: Value = serde_json::from_str(&valid_text()).expect("JSON");
    let slot = if member == "cases" || member == "provenance" {
        &mut value[member]
    } else {
        &mut value["cases"][0][member]
    };
    *slot = Value::from(RAW_MARK);
    serde_json::to_string_pretty(&value)
        .expect("JSON")
        .replace(&serde_json::to_string(RAW_MARK).expect("JSON"), raw)
}
