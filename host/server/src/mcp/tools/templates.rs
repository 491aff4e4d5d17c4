//! Tools about definitions: `workflow_validate`, `template_save`,
//! `template_get`, `template_list`, `template_delete` and `plugin_list`.
//! Saving or deleting a template tells every session its tool list changed
//! (each template is also the tool `wf_<name>`).

use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_engine::clock::rfc3339;
use weft_engine::clock::system_now_ms as now_ms;
use weft_engine::store::TemplateRecord;

use crate::Change;
use crate::WeftServer;
use crate::mcp::errors::{ProblemOut, ToolError};
use crate::mcp::prepare::{self, blocking};
use crate::mcp::wf_tools;
use weft_runtime::guests;
use weft_runtime::usecase::catalog;

/// A workflow definition: an object with `name` and `steps` (see the
/// resource weft://guide). Its JSON text as a string is accepted too.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ValidateParams {
    /// The workflow definition to check: `{"name", "steps": [...]}` (format:
    /// resource weft://guide, JSON Schema: weft://schema/definition).
    #[schemars(with = "prepare::DefinitionArg")]
    pub definition: Value,
}

/// The result of a validation.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ValidateOut {
    /// Whether the definition is valid.
    pub valid: bool,
    /// Its name (when valid). Nothing is saved: template_save saves it
    /// and says which version it became.
    pub name: Option<String>,
    /// How many steps it has (when valid).
    pub steps: Option<usize>,
    /// Every problem, with its JSON path into `definition`.
    pub problems: Vec<ProblemOut>,
    /// What does not make it invalid but may be a mistake: servers that
    /// could not be reached to check their tools, text that looks like
    /// another template language's refs, child templates not saved yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<ProblemOut>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveParams {
    /// Save under this name instead of the definition's `name` (the
    /// definition's `name` is set to it).
    #[serde(default)]
    pub name: Option<String>,
    /// The workflow definition: `{"name", "steps": [...]}` (format: resource
    /// weft://guide, JSON Schema: weft://schema/definition).
    #[schemars(with = "prepare::DefinitionArg")]
    pub definition: Value,
}

/// A saved template version.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SaveOut {
    /// The template's name.
    pub name: String,
    /// The version just saved (1 for a new name).
    pub version: u32,
    /// The tool that runs it.
    pub tool: String,
    /// Saved, but worth a look (an unreachable server whose tools could
    /// not be checked, text that looks like another template language's
    /// refs, a child template not saved yet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<ProblemOut>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetParams {
    /// The template's name.
    pub name: String,
    /// A specific version (default: the latest).
    #[serde(default)]
    pub version: Option<u32>,
}

/// One template version with its definition.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateOut {
    pub name: String,
    pub version: u32,
    /// When this version was saved (RFC 3339).
    pub created_at: String,
    /// The definition's `description`, if any.
    pub description: Option<String>,
    /// The definition as saved (code steps naming files are pinned by digest).
    pub definition: Value,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct NoParams {}

/// A template in a listing.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateSummary {
    pub name: String,
    /// Its latest version.
    pub version: u32,
    /// When the latest version was saved (RFC 3339).
    pub created_at: String,
    pub description: Option<String>,
    /// The tool that runs it.
    pub tool: String,
}

/// Every template (latest versions).
#[derive(Debug, Serialize, JsonSchema)]
pub struct TemplateListOut {
    pub templates: Vec<TemplateSummary>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteParams {
    /// The template's name: every version is deleted.
    pub name: String,
}

/// What was deleted.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DeleteOut {
    pub name: String,
    /// How many versions were deleted.
    pub deleted_versions: u32,
}

/// Every plugin.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PluginListOut {
    pub plugins: Vec<catalog::PluginView>,
}

fn description(t: &TemplateRecord) -> Option<String> {
    t.definition.get("description").and_then(Value::as_str).map(String::from)
}

#[tool_router(router = template_router, vis = "pub(crate)")]
impl WeftServer {
    #[tool(
        description = concat!(
            "Check a workflow definition without storing anything, with the checks template_save and run_start make (plugins, live tools, refs, child templates). Returns valid: true with its name (and `warnings`), or every problem with its JSON path into `definition` and a hint. Format: weft://guide (JSON Schema: weft://schema/definition). Example: {\"definition\": ",
            prepare::definition_example!(),
            "}"
        ),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn workflow_validate(
        &self,
        Parameters(p): Parameters<ValidateParams>,
    ) -> Result<Json<ValidateOut>, ToolError> {
        let invalid = |problems| ValidateOut { valid: false, name: None, steps: None, problems, warnings: vec![] };
        let doc =
            match prepare::capped_definition_doc(p.definition, self.core.settings.size_limits().max_definition_bytes) {
                Ok(doc) => doc,
                Err(e) if !e.problems.is_empty() => return Ok(Json(invalid(e.problems))),
                Err(e) => return Err(e),
            };
        let checked = prepare::validate(&self.core, doc).await?;
        Ok(Json(match checked {
            Ok(loaded) => ValidateOut {
                valid: true,
                name: Some(loaded.def.name),
                steps: Some(loaded.def.steps.len()),
                problems: vec![],
                warnings: ProblemOut::all("definition", &loaded.warnings),
            },
            Err(bad) => ValidateOut {
                warnings: ProblemOut::all("definition", &bad.warnings),
                ..invalid(ProblemOut::all("definition", &bad.problems))
            },
        }))
    }

    #[tool(
        description = concat!(
            "Validate a definition (as workflow_validate) and save it as the next version of template `name` (default: the definition's), also the tool `wf_<name>`. Invalid: refused with every problem's JSON path, nothing stored. Tool servers out of reach: saved with `warnings`. Example: {\"definition\": ",
            prepare::definition_example!(),
            "}"
        ),
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn template_save(&self, Parameters(p): Parameters<SaveParams>) -> Result<Json<SaveOut>, ToolError> {
        let mut doc =
            prepare::capped_definition_doc(p.definition, self.core.settings.size_limits().max_definition_bytes)?;
        if let Some(name) = p.name {
            if name.trim().is_empty() {
                return Err(ToolError::new("`name` is empty").fix("give the template a name, or leave `name` out"));
            }
            doc["name"] = Value::String(name);
        }
        let saving = prepare::for_template(&self.core, doc).await?;
        let (name, doc) = (saving.name, saving.doc);
        let version = self.core.store.save_template(&name, &doc, now_ms()).await.map_err(ToolError::internal)?;
        self.core.changed(Change::Templates);
        let warnings = ProblemOut::all("definition", &saving.warnings);
        Ok(Json(SaveOut { tool: wf_tools::tool_name(&name), name, version, warnings }))
    }

    #[tool(
        description = "A saved template's definition: the latest version, or `version`.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn template_get(&self, Parameters(p): Parameters<GetParams>) -> Result<Json<TemplateOut>, ToolError> {
        let t = self.core.store.template(&p.name, p.version).await.map_err(ToolError::internal)?;
        let Some(t) = t else { return Err(prepare::no_template_near(&self.core, &p.name, p.version).await) };
        Ok(Json(TemplateOut {
            description: description(&t),
            name: t.name,
            version: t.version,
            created_at: rfc3339(t.created_at),
            definition: t.definition,
        }))
    }

    #[tool(
        description = "Every saved template (latest version), with the tool `wf_<name>` that runs it.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn template_list(&self, Parameters(_): Parameters<NoParams>) -> Result<Json<TemplateListOut>, ToolError> {
        let all = self.core.store.list_templates().await.map_err(ToolError::internal)?;
        let templates = all
            .iter()
            .map(|t| TemplateSummary {
                name: t.name.clone(),
                version: t.version,
                created_at: rfc3339(t.created_at),
                description: description(t),
                tool: wf_tools::tool_name(&t.name),
            })
            .collect();
        Ok(Json(TemplateListOut { templates }))
    }

    #[tool(
        description = "Delete every version of a template (and its tool `wf_<name>`). Runs already started keep their pinned plan.",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false)
    )]
    async fn template_delete(&self, Parameters(p): Parameters<DeleteParams>) -> Result<Json<DeleteOut>, ToolError> {
        let n = self.core.store.delete_template(&p.name).await.map_err(ToolError::internal)?;
        if n == 0 {
            return Err(prepare::no_template_near(&self.core, &p.name, None).await);
        }
        self.core.changed(Change::Templates);
        Ok(Json(DeleteOut { name: p.name, deleted_versions: n }))
    }

    #[tool(
        description = "The code plugins a code step can use (`{\"code\": {\"plugin\": NAME}}`), with descriptions and input/output JSON Schemas.",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false)
    )]
    async fn plugin_list(&self, Parameters(_): Parameters<NoParams>) -> Result<Json<PluginListOut>, ToolError> {
        let core = self.core.clone();
        let plugins = blocking(move || {
            let registry = guests::registry(&core.settings);
            catalog::plugins(&registry, &core.sandbox).map_err(ToolError::internal)
        })
        .await?;
        Ok(Json(PluginListOut { plugins }))
    }
}
