//! Fuzzing the decoding of MCP tool requests (docs/reliability.md, "fuzzing"):
//! any JSON as any tool's arguments, and any definition document, is
//! decoded or refused without a panic. `PROPTEST_CASES=N` runs longer.

use proptest::prelude::*;
use serde_json::{Map, Value};

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("template".to_string()),
        Just("definition".to_string()),
        Just("input".to_string()),
        Just("wait_ms".to_string()),
        Just("presets".to_string()),
        Just("concurrency_key".to_string()),
        Just("run_fuel".to_string()),
        Just("run_id".to_string()),
        Just("step".to_string()),
        Just("data".to_string()),
        Just("name".to_string()),
        Just("steps".to_string()),
        "[a-z_]{0,10}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn decode<T: serde::de::DeserializeOwned>(v: &Value) {
    let _ = serde_json::from_value::<T>(v.clone());
}

proptest! {
    #[test]
    fn any_tool_arguments_decode_or_are_refused(v in json_value(), text in ".{0,64}") {
        decode::<crate::mcp::tools::runs::RunStartParams>(&v);
        decode::<crate::mcp::tools::runs::RunIdParams>(&v);
        decode::<crate::mcp::tools::runs::RunListParams>(&v);
        decode::<crate::mcp::tools::runs::RunEventsParams>(&v);
        decode::<crate::mcp::tools::templates::ValidateParams>(&v);
        decode::<crate::mcp::tools::templates::SaveParams>(&v);
        decode::<crate::mcp::tools::waits::RunSignalParams>(&v);
        decode::<crate::mcp::tools::waits::EventEmitParams>(&v);
        decode::<crate::mcp::tools::recording::StartParams>(&v);
        // A definition given as a value or as JSON text (possibly broken).
        let _ = crate::mcp::prepare::definition_doc(v.clone());
        let _ = crate::mcp::prepare::definition_doc(Value::String(text));
        let _ = crate::mcp::prepare::definition_doc(Value::String(v.to_string()));
    }
}

/// A definition sent as JSON text with a key given twice is refused with
/// the key's path, not run with the last value.
#[test]
fn a_definition_string_with_a_duplicate_key_is_refused() {
    let text = r#"{"name": "dup", "steps": [{"name": "a", "return": 1}], "name": "dup2"}"#;
    let err = crate::mcp::prepare::definition_doc(Value::String(text.into())).expect_err("a duplicate key");
    let shown = format!("{err:?}");
    assert!(shown.contains("/name") && shown.contains("twice"), "{shown}");
    let ok = crate::mcp::prepare::definition_doc(Value::String(r#"{"name": "a", "steps": []}"#.into()));
    assert!(ok.is_ok());
}
