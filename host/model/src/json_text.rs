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
    strictly::<Doc>(text)
}

/// What [`parse_json_text`] would refuse in `text`, without building the
/// document (the HTTP front end checks every JSON-RPC body before its MCP
/// library parses it).
pub fn check_json_text(text: &str) -> Result<(), JsonTextError> {
    strictly::<Check>(text)
}

fn strictly<B: Build>(text: &str) -> Result<B::Out, JsonTextError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict::<B> { at: &At::Root, build: std::marker::PhantomData }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
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

/// Where a value is in the document: written out as a JSON Pointer only
/// for a refusal (a string per value cost more than the parse).
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn pointer(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Key(up, key) => format!("{}/{}", up.pointer(), segment(key)),
            At::Index(up, i) => format!("{}/{i}", up.pointer()),
        }
    }
}

/// What a strict read makes of the values it meets: the document, or
/// nothing (a check).
trait Build {
    type Out;
    type Object: Default;
    fn scalar(v: Value) -> Self::Out;
    fn string(s: &str) -> Self::Out;
    fn array(items: Vec<Self::Out>) -> Self::Out;
    /// Whether `key` is in the object already.
    fn has(object: &Self::Object, key: &str) -> bool;
    fn put(object: &mut Self::Object, key: String, v: Self::Out);
    fn object(object: Self::Object) -> Self::Out;
}

/// Builds the [`Value`].
struct Doc;

impl Build for Doc {
    type Out = Value;
    type Object = Map<String, Value>;
    fn scalar(v: Value) -> Value {
        v
    }
    fn string(s: &str) -> Value {
        Value::String(s.to_string())
    }
    fn array(items: Vec<Value>) -> Value {
        Value::Array(items)
    }
    fn has(object: &Self::Object, key: &str) -> bool {
        object.contains_key(key)
    }
    fn put(object: &mut Self::Object, key: String, v: Value) {
        object.insert(key, v);
    }
    fn object(object: Self::Object) -> Value {
        Value::Object(object)
    }
}

/// Keeps only each object's keys, to find one given twice.
struct Check;

impl Build for Check {
    type Out = ();
    type Object = std::collections::HashSet<String>;
    fn scalar(_: Value) {}
    fn string(_: &str) {}
    fn array(_: Vec<()>) {}
    fn has(object: &Self::Object, key: &str) -> bool {
        object.contains(key)
    }
    fn put(object: &mut Self::Object, key: String, (): ()) {
        object.insert(key);
    }
    fn object(_: Self::Object) {}
}

/// Reads the value at `at`, refusing duplicate keys.
struct Strict<'a, B> {
    at: &'a At<'a>,
    build: std::marker::PhantomData<B>,
}

impl<'de, B: Build> DeserializeSeed<'de> for Strict<'_, B> {
    type Value = B::Out;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<B::Out, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, B: Build> Visitor<'de> for Strict<'_, B> {
    type Value = B::Out;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<B::Out, E> {
        Ok(B::scalar(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<B::Out, E> {
        Ok(B::scalar(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<B::Out, E> {
        Ok(B::scalar(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<B::Out, E> {
        Ok(B::scalar(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }

    fn visit_str<E>(self, v: &str) -> Result<B::Out, E> {
        Ok(B::string(v))
    }

    fn visit_unit<E>(self) -> Result<B::Out, E> {
        Ok(B::scalar(Value::Null))
    }

    fn visit_none<E>(self) -> Result<B::Out, E> {
        Ok(B::scalar(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<B::Out, A::Error> {
        let mut out = vec![];
        loop {
            let at = At::Index(self.at, out.len());
            match seq.next_element_seed(Strict::<B> { at: &at, build: std::marker::PhantomData })? {
                Some(v) => out.push(v),
                None => return Ok(B::array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<B::Out, A::Error> {
        let mut out = B::Object::default();
        while let Some(key) = map.next_key::<String>()? {
            if B::has(&out, &key) {
                let path = At::Key(self.at, &key).pointer();
                return Err(de::Error::custom(format!("{DUPLICATE}{path}\u{1}{key}")));
            }
            let at = At::Key(self.at, &key);
            let v = map.next_value_seed(Strict::<B> { at: &at, build: std::marker::PhantomData })?;
            B::put(&mut out, key, v);
        }
        Ok(B::object(out))
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
    fn the_check_refuses_what_the_parse_refuses_and_nothing_else() {
        for text in [
            "{\"steps\": [\n  {\"id\": \"a\", \"id\": \"b\"}\n]}",
            r#"{"a~/b": [0, {"c": 1, "c": 2}]}"#,
            r#"{"x": 1, "x": 1}"#,
            "{\"a\": 1,\n}",
            "{} x",
            r#"[{"a": "\u00e9", "b": {"a": 1}}, {"a": 2}]"#,
            "\u{feff}{\"a\": 1}",
        ] {
            assert_eq!(check_json_text(text).err(), parse_json_text(text).err(), "{text}");
        }
        assert_eq!(
            check_json_text(r#"{"a~/b": [0, {"c": 1, "c": 2}]}"#).unwrap_err().path.as_deref(),
            Some("/a~0~1b/1/c")
        );
    }

    #[test]
    fn a_byte_order_mark_is_skipped_and_syntax_errors_keep_their_place() {
        assert_eq!(parse_json_text("\u{feff}{\"a\": 1}").unwrap(), serde_json::json!({"a": 1}));
        let e = parse_json_text("{\"a\": 1,\n}").unwrap_err();
        assert_eq!((e.line, e.path.clone()), (2, None));
        assert!(parse_json_text("{} x").is_err(), "trailing text");
    }
}
