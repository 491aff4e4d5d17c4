//! Agent cards: each saved template's (`/a2a/{template}/.well-known/agent-card.json`,
//! one skill) and the server's (`/.well-known/agent-card.json`, every
//! template a skill). A skill's input and output JSON Schemas travel in
//! the card's extension [`SCHEMAS_EXTENSION`] (A2A 1.0's skills have no
//! schema field), keyed by skill id; its examples are the input schema's
//! `examples`, as JSON text.

use serde_json::{Map, Value, json};
use weft_a2a::wire::{AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentSkill};
use weft_engine::store::TemplateRecord;

use super::task::Links;

/// The extension whose `params.skills.{id}` hold each skill's
/// `inputSchema` and `outputSchema`.
pub const SCHEMAS_EXTENSION: &str = "urn:weft:a2a:skill-schemas:v1";

/// The card of the agent that runs `t`, reached at `{base}/a2a/{name}`.
pub fn template_card(t: &TemplateRecord, links: &Links) -> AgentCard {
    let url = format!("{}/a2a/{}", links.base, t.name);
    let skill = skill_of(t);
    AgentCard {
        name: t.name.clone(),
        description: skill.description.clone(),
        supported_interfaces: interfaces(&url),
        provider: None,
        version: t.version.to_string(),
        documentation_url: None,
        capabilities: capabilities(std::slice::from_ref(t)),
        default_input_modes: skill.input_modes.clone(),
        default_output_modes: vec!["application/json".into()],
        skills: vec![skill],
    }
}

/// The server's card: every saved template (its latest version) a skill,
/// reached at `{base}/a2a` with the skill named in the message's metadata.
pub fn server_card(templates: &[TemplateRecord], links: &Links) -> AgentCard {
    let url = format!("{}/a2a", links.base);
    AgentCard {
        name: "weft".into(),
        description: "weft runs durable workflows; each saved template is a skill. Send a message to `/a2a` with \
                      `metadata.skill` naming one, or to the skill's own agent at `/a2a/{skill}` (its card: \
                      `/a2a/{skill}/.well-known/agent-card.json`)."
            .into(),
        supported_interfaces: vec![AgentInterface {
            url,
            protocol_binding: "JSONRPC".into(),
            protocol_version: weft_a2a::PROTOCOL_VERSION.into(),
        }],
        provider: None,
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: capabilities(templates),
        default_input_modes: vec!["application/json".into()],
        default_output_modes: vec!["application/json".into()],
        skills: templates.iter().map(skill_of).collect(),
    }
}

fn interfaces(url: &str) -> Vec<AgentInterface> {
    ["JSONRPC", "HTTP+JSON"]
        .into_iter()
        .map(|b| AgentInterface {
            url: url.to_string(),
            protocol_binding: b.into(),
            protocol_version: weft_a2a::PROTOCOL_VERSION.into(),
        })
        .collect()
}

fn capabilities(templates: &[TemplateRecord]) -> AgentCapabilities {
    let skills: Map<String, Value> = templates
        .iter()
        .map(|t| {
            let d = &t.definition;
            (t.name.clone(), {
                let mut s = json!({"inputSchema": d.get("input_schema").cloned().unwrap_or(json!({})),
                                       "version": t.version});
                if let Some(o) = d.get("output_schema") {
                    s["outputSchema"] = o.clone();
                }
                s
            })
        })
        .collect();
    let mut params = Map::new();
    params.insert("skills".into(), Value::Object(skills));
    AgentCapabilities {
        streaming: true,
        push_notifications: true,
        extended_agent_card: false,
        extensions: vec![AgentExtension {
            uri: SCHEMAS_EXTENSION.into(),
            description: "each skill's input JSON Schema (params.skills.{id}.inputSchema) and, when its template \
                          declares one, its output schema (outputSchema): send the input as one data part"
                .into(),
            required: false,
            params: Some(params),
        }],
    }
}

/// A template as a skill.
fn skill_of(t: &TemplateRecord) -> AgentSkill {
    let d = &t.definition;
    let schema = d.get("input_schema");
    let mut description = d
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("runs weft template `{}`", t.name));
    if let Some(fields) = fields(schema) {
        description.push_str(&format!(" Input (one data part): {fields}."));
    }
    let mut input_modes = vec!["application/json".to_string()];
    if takes_text(schema) {
        input_modes.push("text/plain".into());
    }
    let examples = schema
        .and_then(|s| s.get("examples"))
        .and_then(Value::as_array)
        .map(|xs| xs.iter().map(Value::to_string).collect())
        .unwrap_or_default();
    AgentSkill {
        id: t.name.clone(),
        name: t.name.clone(),
        description,
        tags: vec!["weft".into(), "workflow".into()],
        examples,
        input_modes,
        output_modes: vec!["application/json".into()],
    }
}

/// `a (string, required), b (integer)`: an object schema's fields.
fn fields(schema: Option<&Value>) -> Option<String> {
    let s = schema?;
    let props = s.get("properties")?.as_object()?;
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let all: Vec<String> = props
        .iter()
        .map(|(k, p)| {
            let ty = p.get("type").map(|t| t.as_str().map(str::to_string).unwrap_or_else(|| t.to_string()));
            let mut f = k.clone();
            let mut notes: Vec<String> = ty.into_iter().collect();
            if required.contains(&k.as_str()) {
                notes.push("required".into());
            }
            if !notes.is_empty() {
                f.push_str(&format!(" ({})", notes.join(", ")));
            }
            f
        })
        .collect();
    (!all.is_empty()).then(|| all.join(", "))
}

/// Whether one text part can carry the input (see `ops::input_of`).
fn takes_text(schema: Option<&Value>) -> bool {
    let Some(s) = schema else { return false };
    match s.get("type").and_then(Value::as_str) {
        Some("string") => true,
        Some("object") => s.get("properties").and_then(Value::as_object).is_some_and(|p| {
            p.len() == 1 && p.values().all(|v| v.get("type").and_then(Value::as_str) == Some("string"))
        }),
        _ => false,
    }
}
