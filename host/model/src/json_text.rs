//! Definition text to JSON, strictly: the one place text becomes a
//! document, so every reader (files, the HTTP API's bodies) refuses the
//! same things.
//!
//! Why not `serde_json::from_str` alone: it keeps the last of two equal
//! keys in an object, so `{"steps": [...], "steps": [...]}` would silently
//! run half of what was written; and it refuses a leading UTF-8 byte-order
//! mark (which editors on Windows write) with "expected value at line 1
//! column 1". Here a duplicate key is an error naming its JSON Pointer,
//! and a byte-order mark is skipped.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why text is not a JSON document.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonTextError {
    /// What is wrong (serde_json's words, or the duplicate key).
    pub message: String,
    /// Where in the text (1-based).
    pub line: usize,
    pub column: usize,
    /// The JSON Pointer of the duplicated key, when that is what is wrong.
    pub path: Option<String>,
}

impl fmt::Display for JsonTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at line {} column {}", self.message, self.line, self.column)
    }
}

const DUPLICATE: &str = "\u{1}duplicate\u{1}";

/// `text` as JSON: a leading byte-order mark skipped, a key given twice in
/// one object refused.
pub fn parse_json_text(text: &str) -> Result<Value, JsonTextError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict { path: String::new() }.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| {
        let full = e.to_string();
        // serde_json appends " at line L column C" to a custom message.
        let bare = full.split(" at line ").next().unwrap_or(&full).to_string();
        match bare.strip_prefix(DUPLICATE) {
            Some(rest) => {
                let (path, key) = rest.split_once('\u{1}').unwrap_or((rest, ""));
                JsonTextError {
                    message: format!("the key {key:?} appears twice in one object (JSON keeps only one of them)"),
                    line: e.line(),
                    column: e.column(),
                    path: Some(path.to_string()),
                }
            }
            None => JsonTextError { message: bare, line: e.line(), column: e.column(), path: None },
        }
    })
}

/// A JSON Pointer segment (RFC 6901 escaping).
fn segment(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Builds a [`Value`] at `path`, refusing duplicate keys.
struct Strict {
    path: String,
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
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
        Ok(Value::String(v.to_string()))
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
        let mut out = vec![];
        while let Some(v) = seq.next_element_seed(Strict { path: format!("{}/{}", self.path, out.len()) })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = format!("{}/{}", self.path, segment(&key));
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE}{path}\u{1}{key}")));
            }
            let v = map.next_value_seed(Strict { path })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_value_as_serde_json_for_plain_documents() {
        let text = r#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c~/d": "e"}"#;
        assert_eq!(parse_json_text(text).unwrap(), serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_pointer_and_line() {
        let text = "{\"steps\": [\n  {\"id\": \"a\", \"id\": \"b\"}\n]}";
        let e = parse_json_text(text).unwrap_err();
        assert_eq!(e.path.as_deref(), Some("/steps/0/id"));
        assert!(e.message.contains("\"id\" appears twice"), "{}", e.message);
        assert_eq!(e.line, 2);
        let top = parse_json_text(r#"{"x": 1, "x": 1}"#).unwrap_err();
        assert_eq!(top.path.as_deref(), Some("/x"));
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_syntax_errors_keep_their_place() {
        assert_eq!(parse_json_text("\u{feff}{\"a\": 1}").unwrap(), serde_json::json!({"a": 1}));
        let e = parse_json_text("{\"a\": 1,\n}").unwrap_err();
        assert_eq!((e.line, e.path.clone()), (2, None));
        assert!(parse_json_text("{} x").is_err(), "trailing text");
    }
}
