//! The JSON Schema of the definition format, generated from the types with
//! schemars (docs/definition.schema.json is a committed copy, checked by a
//! test: regenerate it with `WEFT_BLESS=1 cargo test -p weft-model`).

use serde_json::Value;

use crate::definition::Definition;

/// The JSON Schema (draft 2020-12) of a definition.
pub fn definition_schema() -> Value {
    let schema = schemars::schema_for!(Definition);
    serde_json::to_value(schema).expect("a schema is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/definition.schema.json");
        let text = serde_json::to_string_pretty(&definition_schema()).unwrap() + "\n";
        if std::env::var_os("WEFT_BLESS").is_some() {
            std::fs::write(path, &text).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == text,
            "docs/definition.schema.json is stale or missing: regenerate it with `WEFT_BLESS=1 cargo test -p weft-model`"
        );
    }

    #[test]
    fn schema_is_a_valid_schema() {
        assert!(crate::json_schema::check_schema(&definition_schema(), "").is_empty());
    }
}
