//! Which member of a JSON value a deserialization error is about: the
//! verifier names `provenance: at `host.cpus`: …`, not only serde's message.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::messages::{shorten, NAME_CHARS, QUOTE_CHARS};

/// Why `value` (at `label`) is not a `T`: `label`, the member or element
/// at fault inside it (`provenance: at `host.cpus`: …`), then serde's
/// message (shortened: it may quote a long value).
///
/// The narrowing keeps, at each level, the shortest prefix of the members
/// (in the order they are read) or elements that still fails with an error
/// other than a missing field: the last one kept is the one at fault.
pub(super) fn at_fault<T: DeserializeOwned>(
    label: &str,
    value: &Value,
    error: &serde_json::Error,
) -> String {
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
