//! How the verifier's problems quote what they are about: long names and
//! values shortened, JSON values described by their kind and size, cases
//! named with their index.

use std::borrow::Cow;

use serde_json::Value;

/// Longest name (case, member) quoted whole in a message, in characters.
pub(super) const NAME_CHARS: usize = 120;

/// Longest value or serde message quoted in a problem, in characters.
pub(super) const QUOTE_CHARS: usize = 240;

/// `text`, cut to `max` characters with `…` and the full length when longer.
pub(super) fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}… ({} bytes in all)", &text[..end], text.len())),
    }
}

/// A JSON value as a message quotes it: scalars as written (long strings
/// shortened), arrays and objects by their size.
pub(super) fn describe(value: &Value) -> String {
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

/// `case <name> (cases[<index>])` for a case object with a name, else
/// `cases[<index>]`.
pub(super) fn case_label(index: usize, case: &Value) -> String {
    match case.get("name").and_then(Value::as_str) {
        Some(name) => case_at(index, name),
        None => format!("cases[{index}]"),
    }
}

/// `case <name> (cases[<index>])`, a long name shortened.
pub(super) fn case_at(index: usize, name: &str) -> String {
    format!("case {} (cases[{index}])", shorten(name, NAME_CHARS))
}

/// The kind of a JSON value, with its article: `an array`.
pub(super) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
