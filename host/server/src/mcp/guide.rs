//! What a client reads before writing a workflow: the guide (the format in
//! a few screens, with complete examples: `guide.md`) as the resource
//! `weft://guide` and the prompt `workflow_guide`, and the definition's
//! JSON Schema, served once as the resource `weft://schema/definition`
//! (tool descriptions point at it instead of repeating it).

use rmcp::ErrorData;
use rmcp::model::{
    GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult, Resource,
    ResourceContents, Role,
};
use serde_json::Value;

/// The guide's URI.
pub const GUIDE_URI: &str = "weft://guide";
/// The definition schema's URI.
pub const SCHEMA_URI: &str = "weft://schema/definition";
/// The prompt that hands a client the guide.
pub const PROMPT: &str = "workflow_guide";

/// The guide, in Markdown.
pub const GUIDE: &str = include_str!("guide.md");

/// The JSON Schema of a definition, as served.
pub fn schema() -> Value {
    weft_model::definition_schema()
}

/// The guide and the schema, for `resources/list`.
pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new(GUIDE_URI, "guide")
            .with_title("How to write weft workflows (read first)")
            .with_description("The definition format in a few screens, refs, conditions, complete examples, recording")
            .with_mime_type("text/markdown"),
        Resource::new(SCHEMA_URI, "definition-schema")
            .with_title("JSON Schema of a workflow definition")
            .with_description("What workflow_validate, template_save and run_start accept as `definition`")
            .with_mime_type("application/schema+json"),
    ]
}

/// Reads `uri` if it is the guide or the schema.
pub fn read(uri: &str) -> Option<ReadResourceResult> {
    let contents = match uri {
        GUIDE_URI => ResourceContents::text(GUIDE, uri).with_mime_type("text/markdown"),
        SCHEMA_URI => {
            let text = serde_json::to_string_pretty(&schema()).expect("a schema is JSON");
            ResourceContents::text(text, uri).with_mime_type("application/schema+json")
        }
        _ => return None,
    };
    Some(ReadResourceResult::new(vec![contents]))
}

/// `prompts/list`.
pub fn prompts() -> ListPromptsResult {
    let goal = PromptArgument::new("goal")
        .with_description("What the workflow should do (optional): the prompt then asks for it")
        .with_required(false);
    let p = Prompt::new(
        PROMPT,
        Some("The weft workflow guide: how to write, validate, save and run a workflow"),
        Some(vec![goal]),
    )
    .with_title("Write a weft workflow");
    ListPromptsResult::with_all_items(vec![p])
}

/// `prompts/get` of `name`.
pub fn prompt(name: &str, arguments: Option<&rmcp::model::JsonObject>) -> Result<GetPromptResult, ErrorData> {
    if name != PROMPT {
        return Err(ErrorData::invalid_params(format!("no prompt `{name}` (prompts/list shows `{PROMPT}`)"), None));
    }
    let goal = arguments.and_then(|a| a.get("goal")).and_then(Value::as_str).filter(|g| !g.trim().is_empty());
    let mut messages = vec![PromptMessage::new_text(Role::User, GUIDE)];
    let ask = match goal {
        Some(g) => format!(
            "Write a weft workflow definition that does this: {g}\nCheck it with workflow_validate, fix every problem it lists, then save it with template_save and run it with its wf_ tool."
        ),
        None => "Use this guide to write weft workflows: check each with workflow_validate before template_save or run_start.".to_string(),
    };
    messages.push(PromptMessage::new_text(Role::User, ask));
    let mut r = GetPromptResult::new(messages);
    r.description = Some("The weft workflow guide".into());
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example in the guide is a valid definition.
    #[test]
    fn the_guides_examples_validate() {
        let mut n = 0;
        for block in GUIDE.split("```json").skip(1) {
            let text = block.split("```").next().unwrap();
            let doc: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            let def = weft_model::from_value(&doc, &weft_model::NoSchemas);
            assert!(def.is_ok(), "{def:?}: {text}");
            let l = weft_model::lookalike::check(&doc);
            assert!(l.errors.is_empty() && l.warnings.is_empty(), "{l:?}");
            n += 1;
        }
        assert!(n >= 4, "tool, code, for_each, wait and child examples");
        for what in ["\"tool\"", "\"code\"", "\"when\"", "\"for_each\"", "\"wait\"", "\"workflow\"", "\"return\""] {
            assert!(GUIDE.split("```json").skip(1).any(|b| b.contains(what)), "an example with {what}");
        }
    }

    #[test]
    fn the_schema_is_written_for_its_readers() {
        let text = schema().to_string();
        for leak in ["[`", "see the docs", "crate::"] {
            assert!(!text.contains(leak), "rustdoc leaks into the schema: {leak}");
        }
        assert!(read(SCHEMA_URI).is_some() && read(GUIDE_URI).is_some() && read("weft://nope").is_none());
    }

    #[test]
    fn the_prompt_carries_the_guide_and_the_goal() {
        let mut args = rmcp::model::JsonObject::new();
        args.insert("goal".into(), "add two numbers".into());
        let p = prompt(PROMPT, Some(&args)).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains("weft://schema/definition") && text.contains("add two numbers"), "{text}");
        assert!(prompt("nope", None).is_err());
    }
}
