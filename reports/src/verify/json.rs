//! Step 1 of [`verify`](super::verify): JSON text to a [`Value`], as
//! [`verify`](super::verify) and [`load`](super::load) read it: one leading
//! byte-order mark ignored, a truncated file named as such, at most 128
//! levels of nesting, and no object that names a member twice.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::messages::{shorten, NAME_CHARS};

/// Parses JSON text as [`verify`](super::verify) and [`load`](super::load)
/// read it (see the module docs).
pub(super) fn parse_json(text: &str) -> Result<Value, String> {
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
