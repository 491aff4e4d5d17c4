//! THE prepare-a-run pipeline, the one every front end calls (`weft run`,
//! `weft validate`, the MCP tools `workflow_validate`, `template_save`,
//! `run_start` and `wf_<name>`, the HTTP API):
//!
//! 1. **load** — a definition file, a document a client sent, or a saved
//!    template; read once, under the definition cap;
//! 2. **validate once** — against the installed plugins (their input
//!    schemas, `describe()`d by this process's one sandbox), the
//!    configured servers and, where they answer, the live tools of tool
//!    steps (an unknown tool, or a literal input that breaks a tool's
//!    schema, is a problem; an unreachable server only a warning) and the
//!    saved templates of `workflow` steps: a [`Definition`] with its
//!    warnings, or every problem at once with its JSON path;
//! 3. **check the input** against `input_schema` (when the definition is
//!    refused, the input's problems are told with it);
//! 4. **pin** — every guest is stored content-addressed and named by its
//!    digest in the plan, so a run executes the same code after a restart.
//!
//! Nothing here stores a run: the front end submits the [`Prepared`] plan
//! to the engine. A refusal is a [`Refused`], which each front end renders
//! in its reader's terms; the hints inside are written for the pipeline's
//! [`Audience`] (commands, MCP tools or API routes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;
use weft_engine::store::TemplateRecord;
use weft_engine::{RunOptions, Store};
use weft_model::{Action, CodeRef, Definition, Problem};
use weft_sandbox::Sandbox;
use weft_sandbox::registry::Registry;

use crate::audience::Audience;
use crate::config::Settings;
use crate::error::RuntimeError;
use crate::guests::{self, client_path_allowed, resolve_code};
use crate::lookup::{Invalid, RegistryLookup, sort_problems, validate_doc, validate_text};
use crate::online;

/// Where a definition comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file on this machine (relative `code.path`s against its folder).
    File(PathBuf),
    /// A document an MCP client sent: it may name files only under
    /// `[guests] allow_paths`.
    Client(Value),
    /// The latest version of a saved template.
    Template(String),
    /// A saved template already read from the store (by a front end that
    /// reports a missing one in its own terms).
    Saved(TemplateRecord),
}

/// A definition read and validated once.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The document as written (what a template saves).
    pub doc: Value,
    /// The validated definition.
    pub def: Definition,
    /// Where its relative `code.path`s are resolved.
    pub base_dir: PathBuf,
    /// The template and version it came from, if any.
    pub template: Option<(String, u32)>,
    /// What does not refuse the definition but is worth telling: servers
    /// that could not be reached to check its tools, text that looks like
    /// another template language's refs, child templates not saved yet.
    pub warnings: Vec<Problem>,
    /// Whether its tool steps were checked against their servers (a file
    /// read by [`Pipeline::load_file`] is checked offline only, and gets
    /// the rest in [`Pipeline::prepare`]).
    pub online: bool,
    /// Some server of its tool steps did not answer, so their literal
    /// inputs are unchecked (a saved template is then validated again on
    /// its next use instead of remembered).
    pub unanswered: bool,
}

/// A run ready to be created.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The definition with every guest pinned by digest.
    pub plan: Arc<Definition>,
    /// The run's input (checked against `input_schema`).
    pub input: Value,
    /// The caller's options, with the template's name and version.
    pub opts: RunOptions,
    /// The definition's warnings (servers of tool steps that could not be
    /// reached: the run's attempts retry per policy): for the front end
    /// to tell.
    pub warnings: Vec<Problem>,
}

/// A definition checked for saving as a template.
#[derive(Debug, Clone)]
pub struct Saving {
    /// The document to save (code named by a file is pinned by digest).
    pub doc: Value,
    /// The template's name.
    pub name: String,
    /// The definition's warnings, to tell with the saved version.
    pub warnings: Vec<Problem>,
}

/// Why a definition or input was refused: nothing was stored.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The source itself: no such file or template, a folder, not UTF-8,
    /// over the definition cap.
    #[error("{0}")]
    Unusable(String),
    /// The definition has problems (with the line and column of a JSON
    /// syntax error, tool steps that do not match their servers, and the
    /// input's problems when a run was asked for).
    #[error("the definition is not valid ({} problem{})", .0.problems.len(), plural(.0.problems.len()))]
    Definition(Invalid),
    /// A saved template no longer validates (a plugin or server is gone).
    #[error("template `{name}` version {version} does not validate against the installed plugins and servers")]
    Template { name: String, version: u32, problems: Vec<Problem> },
    /// The input does not match `input_schema`.
    #[error("the input was refused ({} problem{}); no run was created", .problems.len(), plural(.problems.len()))]
    Input { problems: Vec<Problem>, schema: Option<Value> },
    /// A guest could not be stored.
    #[error("cannot pin the code of every step")]
    Pin(Vec<Problem>),
    /// Not the input's fault: the store or the sandbox failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What is known of a document beyond the installed plugins: the live
/// tools of its tool steps and the saved templates of its `workflow`
/// steps.
#[derive(Default)]
struct Facts {
    tool_schemas: HashMap<(String, String), Value>,
    tool_output_schemas: HashMap<(String, String), Value>,
    template_schemas: HashMap<(String, Option<u32>), Value>,
    /// Tools their servers do not offer.
    problems: Vec<Problem>,
    /// Servers that did not answer.
    unreachable: Vec<Problem>,
    /// Child templates that are not saved.
    missing: Vec<Problem>,
}

/// What the pipeline needs: cheap to clone (the parts are shared).
#[derive(Clone)]
pub struct Pipeline {
    settings: Settings,
    sandbox: Arc<Sandbox>,
    registry: Arc<Registry>,
    upstreams: Arc<weft_mcp_client::Upstreams>,
    store: Option<Arc<dyn Store>>,
    base_dir: PathBuf,
    saved: Arc<Mutex<HashMap<(String, u32), Memo>>>,
    audience: Audience,
}

/// A saved template version as validated and pinned, kept while the
/// plugins stay as they were (the registry's stamp) and the stored
/// document is the same (a deleted template's name may be saved again).
#[derive(Clone)]
struct Memo {
    stamp: Option<SystemTime>,
    loaded: Arc<Loaded>,
    plan: Option<Arc<Definition>>,
}

/// Template versions remembered at most (then forgotten all at once).
const MEMO_CAP: usize = 256;

impl Pipeline {
    /// A pipeline over this process's sandbox; `store` (for templates)
    /// may be `None` where no store is open; a client's relative paths
    /// are resolved against `base_dir`. Its hints are for the CLI until
    /// [`Pipeline::for_audience`].
    pub fn new(
        settings: &Settings,
        sandbox: Arc<Sandbox>,
        upstreams: Arc<weft_mcp_client::Upstreams>,
        store: Option<Arc<dyn Store>>,
        base_dir: PathBuf,
    ) -> Pipeline {
        let registry = Arc::new(guests::registry(settings));
        let saved = Arc::default();
        let audience = Audience::default();
        Pipeline { settings: settings.clone(), sandbox, registry, upstreams, store, base_dir, saved, audience }
    }

    /// The configuration it was made with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The same pipeline (sharing what it remembers), its hints written
    /// for `audience`.
    pub fn for_audience(mut self, audience: Audience) -> Pipeline {
        self.audience = audience;
        self
    }

    /// Steps 1 and 2: reads `source` and validates it once (the tools of
    /// tool steps against their servers, where they answer). The sandbox
    /// work runs on a blocking thread.
    pub async fn load(&self, source: Source) -> Result<Loaded, Refused> {
        self.load_for(source, None).await
    }

    /// [`load`](Self::load); when the definition is refused, the problems
    /// of `input` (for a run) against its `input_schema` come with it.
    async fn load_for(&self, source: Source, input: Option<&Value>) -> Result<Loaded, Refused> {
        match source {
            Source::File(path) => {
                let cap = self.settings.size_limits().max_definition_bytes;
                let file = path.clone();
                let text = blocking(move || read_definition(&file, cap).map_err(Refused::Unusable)).await?;
                let base_dir = base_of(&path);
                match weft_model::parse_json_text(&text) {
                    Ok(doc) => self.check_doc(doc, base_dir, false, input).await,
                    Err(_) => {
                        let p = self.clone();
                        blocking(move || Err(Refused::Definition(p.invalid_text(&text, &base_dir)))).await
                    }
                }
            }
            Source::Client(doc) => self.check_doc(doc, self.base_dir.clone(), true, input).await,
            Source::Template(name) => {
                let store = self.store.clone().ok_or_else(|| Refused::Unusable("no store is open".into()))?;
                let t = store
                    .template(&name, None)
                    .await
                    .map_err(RuntimeError::store(format!("cannot read template `{name}`")))?
                    .ok_or_else(|| Refused::Unusable(format!("no template `{name}`")))?;
                self.load_saved(t).await
            }
            Source::Saved(t) => self.load_saved(t).await,
        }
    }

    /// A saved template version, validated once while the plugins stay
    /// as they were (a served `wf_<name>` call validates nothing again).
    async fn load_saved(&self, t: TemplateRecord) -> Result<Loaded, Refused> {
        let stamp = self.registry.stamp();
        if let Some(m) = self.remembered(&t.name, t.version, stamp, &t.definition) {
            return Ok(Loaded::clone(&m.loaded));
        }
        let (name, version) = (t.name, t.version);
        let mut loaded =
            self.check_doc(t.definition, self.base_dir.clone(), true, None).await.map_err(|r| match r {
                Refused::Definition(invalid) => {
                    Refused::Template { name: name.clone(), version, problems: invalid.problems }
                }
                other => other,
            })?;
        loaded.template = Some((name.clone(), version));
        if loaded.unanswered {
            return Ok(loaded);
        }
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        if saved.len() >= MEMO_CAP {
            saved.clear();
        }
        saved.insert((name, version), Memo { stamp, loaded: Arc::new(loaded.clone()), plan: None });
        Ok(loaded)
    }

    /// What is remembered of a template version, if still valid.
    fn remembered(&self, name: &str, version: u32, stamp: Option<SystemTime>, doc: &Value) -> Option<Memo> {
        let saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        let m = saved.get(&(name.to_string(), version))?;
        (m.stamp == stamp && &m.loaded.doc == doc).then(|| m.clone())
    }

    /// A definition file, read once under the definition cap and checked
    /// offline (without asking servers: [`prepare`](Self::prepare) does
    /// that before a run).
    pub fn load_file(&self, file: &Path) -> Result<Loaded, Refused> {
        let text =
            read_definition(file, self.settings.size_limits().max_definition_bytes).map_err(Refused::Unusable)?;
        let base_dir = base_of(file);
        let def = validate_text(&text, &self.lookup(&base_dir)).map_err(Refused::Definition)?;
        let doc: Value = weft_model::parse_json_text(&text).expect("validated text is JSON");
        let mut warnings = weft_model::lookalike::check(&doc).warnings;
        warnings.extend(weft_model::unlisted_input_refs(&def));
        warnings.extend(weft_model::early_return::early_returns(&def));
        sort_problems(&mut warnings);
        Ok(Loaded { doc, def, base_dir, template: None, warnings, online: false, unanswered: false })
    }

    /// The problems of text that is not JSON (its syntax error first).
    fn invalid_text(&self, text: &str, base_dir: &Path) -> Invalid {
        validate_text(text, &self.lookup(base_dir)).err().unwrap_or_default()
    }

    /// Validates a document once, with what its servers and the store say
    /// (see the module docs). `client`: a document a client sent, which
    /// may name files only where the operator allowed.
    async fn check_doc(
        &self,
        doc: Value,
        base_dir: PathBuf,
        client: bool,
        input: Option<&Value>,
    ) -> Result<Loaded, Refused> {
        // Refused with the input's problems and the warnings a valid
        // definition would have had (`unreachable`: servers not answering).
        let refused = |mut invalid: Invalid, unreachable: Vec<Problem>| {
            invalid.input = input.map(|i| input_problems(&doc, i)).unwrap_or_default();
            invalid.warnings = weft_model::lookalike::check(&doc).warnings;
            invalid.warnings.extend(unreachable);
            sort_problems(&mut invalid.warnings);
            Refused::Definition(invalid)
        };
        // A client names plugins and digests; files only where the
        // operator allowed, and none is read before that is checked.
        if client {
            let paths = self.client_paths(&doc);
            if !paths.is_empty() {
                return Err(refused(Invalid { problems: paths, ..Default::default() }, vec![]));
            }
        }
        let facts = self.facts(&doc).await;
        let (p, d, base) = (self.clone(), doc.clone(), base_dir.clone());
        let (tools, templates) = (facts.tool_schemas, facts.template_schemas);
        let outputs = facts.tool_output_schemas;
        let checked = blocking(move || {
            let lookup = p
                .lookup(&base)
                .with_tool_schemas(tools)
                .with_tool_output_schemas(outputs)
                .with_template_schemas(templates);
            Ok(validate_doc(&d, &lookup))
        })
        .await?;
        match checked {
            Ok(def) if facts.problems.is_empty() => {
                let unanswered = !facts.unreachable.is_empty();
                let mut warnings = facts.unreachable;
                warnings.extend(facts.missing);
                warnings.extend(weft_model::lookalike::check(&doc).warnings);
                warnings.extend(weft_model::unlisted_input_refs(&def));
                warnings.extend(weft_model::early_return::early_returns(&def));
                sort_problems(&mut warnings);
                Ok(Loaded { doc, def, base_dir, template: None, warnings, online: true, unanswered })
            }
            Ok(_) => Err(refused(Invalid { problems: facts.problems, ..Default::default() }, facts.unreachable)),
            Err(mut invalid) => {
                invalid.problems.extend(facts.problems);
                sort_problems(&mut invalid.problems);
                Err(refused(invalid, facts.unreachable))
            }
        }
    }

    /// Asks the servers of `doc`'s tool steps for their tools and the
    /// store for the templates of its `workflow` steps.
    async fn facts(&self, doc: &Value) -> Facts {
        let mut facts = Facts::default();
        if !online::tool_steps(doc).is_empty() {
            let o = online::check(&self.upstreams, doc, self.audience).await;
            (facts.tool_schemas, facts.problems, facts.unreachable) = (o.schemas, o.problems, o.unreachable);
            facts.tool_output_schemas = o.output_schemas;
        }
        (facts.template_schemas, facts.missing) = self.children(doc).await;
        facts.problems.extend(self.notify_targets(doc));
        facts
    }

    /// A problem for each `notify` target that names a webhook or an MCP
    /// server weft.toml does not configure.
    fn notify_targets(&self, doc: &Value) -> Vec<Problem> {
        let Some(list) = doc.get("notify").and_then(Value::as_array) else { return vec![] };
        let webhooks: Vec<&str> = self.settings.webhooks.iter().map(|w| w.name.as_str()).collect();
        let mut out = vec![];
        for (i, n) in list.iter().enumerate() {
            if let Some(name) = n.get("webhook").and_then(Value::as_str)
                && !webhooks.contains(&name)
            {
                let p = Problem::new(format!("/notify/{i}/webhook"), format!("no webhook `{name}` is configured"));
                out.push(p.hint(self.audience.add_webhook(name, &webhooks)));
            }
            if let Some(url) = n.pointer("/push/url").and_then(Value::as_str)
                && let Some(why) = crate::a2a::push_refused(url, &self.settings.file.a2a.push_urls)
            {
                let p = Problem::new(format!("/notify/{i}/push/url"), why);
                out.push(p.hint(
                    "the operator allows push URLs in weft.toml: [a2a] push_urls = [\"http://host:port/path/\"]",
                ));
            }
            if let Some(server) = n.pointer("/tool/server").and_then(Value::as_str)
                && !self.settings.servers.iter().any(|s| s.name == server)
            {
                let p =
                    Problem::new(format!("/notify/{i}/tool/server"), format!("no MCP server `{server}` is configured"));
                out.push(p.hint(self.audience.add_server(server)));
            }
        }
        out
    }

    /// The `input_schema`s of the saved templates `doc`'s `workflow` steps
    /// start, and a problem for each that is not saved (with a
    /// did-you-mean).
    async fn children(&self, doc: &Value) -> (HashMap<(String, Option<u32>), Value>, Vec<Problem>) {
        let (mut schemas, mut missing) = (HashMap::new(), vec![]);
        let Some(store) = &self.store else { return (schemas, missing) };
        let Some(steps) = doc.get("steps").and_then(Value::as_array) else { return (schemas, missing) };
        let mut names: Option<Vec<String>> = None;
        for (i, step) in steps.iter().enumerate() {
            let Some(name) = step.pointer("/workflow/template").and_then(Value::as_str) else { continue };
            let version = step.pointer("/workflow/version").and_then(Value::as_u64).map(|v| v as u32);
            match store.template(name, version).await {
                Ok(Some(t)) => {
                    if let Some(schema) = t.definition.get("input_schema") {
                        schemas.insert((name.to_string(), version), schema.clone());
                    }
                }
                Ok(None) => {
                    if names.is_none() {
                        let all = store.list_templates().await.unwrap_or_default();
                        names = Some(all.into_iter().map(|t| t.name).collect());
                    }
                    let known = names.as_deref().unwrap_or_default();
                    let hint = match weft_model::closest(name, known.iter().map(String::as_str)) {
                        Some(n) if n != name => format!("did you mean `{n}`?"),
                        _ => format!("save it with {} before a run starts this step", self.audience.save_template()),
                    };
                    let what = match version {
                        Some(v) => format!("no template `{name}` version {v} is saved"),
                        None => format!("no template `{name}` is saved"),
                    };
                    missing.push(Problem::new(format!("/steps/{i}/workflow/template"), what).hint(hint));
                }
                Err(_) => {}
            }
        }
        (schemas, missing)
    }

    /// Steps 3 and 4: checks `input` (and, for a file loaded offline, the
    /// tools of tool steps) and pins the code. `opts` gets the template's
    /// name and version.
    pub async fn prepare(&self, loaded: Loaded, input: Value, mut opts: RunOptions) -> Result<Prepared, Refused> {
        let loaded = match loaded.online {
            true => loaded,
            false => {
                let template = loaded.template.clone();
                let mut again = self.check_doc(loaded.doc, loaded.base_dir, false, Some(&input)).await?;
                again.template = template;
                again
            }
        };
        input_fits(&loaded.def, &input)?;
        if let Some((name, version)) = &loaded.template {
            opts.template = Some(name.clone());
            opts.version = Some(*version);
        }
        let warnings = loaded.warnings.clone();
        // A child template must be saved by the time the run starts.
        let children = loaded.def.steps.iter().any(|s| matches!(s.action, Action::Workflow(_)));
        if children {
            let (_, missing) = self.children(&loaded.doc).await;
            if !missing.is_empty() {
                return Err(Refused::Definition(Invalid { problems: missing, ..Default::default() }));
            }
        }
        // A saved template's plan is pinned once per version (as long as
        // the plugins stay as they were).
        let stamp = self.registry.stamp();
        if let Some((name, version)) = &loaded.template
            && let Some(plan) = self.remembered(name, *version, stamp, &loaded.doc).and_then(|m| m.plan)
        {
            return Ok(Prepared { plan, input, opts, warnings });
        }
        let p = self.clone();
        let template = loaded.template.clone().map(|t| (t, loaded.doc.clone()));
        let plan = blocking(move || {
            let mut plan = loaded.def;
            pin_definition(&mut plan, &p.registry, &loaded.base_dir).map_err(Refused::Pin)?;
            Ok(Arc::new(plan))
        })
        .await?;
        if let Some(((name, version), doc)) = template {
            let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
            // With child templates, the next start checks them again
            // (see `prepare_source`): its plan is pinned each time.
            if let Some(m) = saved.get_mut(&(name, version))
                && !children
                && m.stamp == stamp
                && m.loaded.doc == doc
            {
                m.plan = Some(plan.clone());
            }
        }
        Ok(Prepared { plan, input, opts, warnings })
    }

    /// [`load`](Self::load) then [`prepare`](Self::prepare); a refused
    /// definition comes with the input's problems.
    pub async fn prepare_source(&self, source: Source, input: Value, opts: RunOptions) -> Result<Prepared, Refused> {
        if let Source::Saved(t) = &source
            && let Some(m) = self.remembered(&t.name, t.version, self.registry.stamp(), &t.definition)
            && let Some(plan) = m.plan
        {
            // Validated and pinned before (never with child templates).
            let loaded = &m.loaded;
            input_fits(&loaded.def, &input)?;
            let mut opts = opts;
            opts.template = Some(t.name.clone());
            opts.version = Some(t.version);
            return Ok(Prepared { plan, input, opts, warnings: loaded.warnings.clone() });
        }
        let loaded = self.load_for(source, Some(&input)).await?;
        self.prepare(loaded, input, opts).await
    }

    /// A definition to save as a template: validated, with the code of
    /// steps that name a file stored (plugin names stay names, so a
    /// template follows its plugins' updates).
    pub async fn for_template(&self, source: Source) -> Result<Saving, Refused> {
        let loaded = self.load(source).await?;
        let p = self.clone();
        blocking(move || p.template_doc(loaded)).await
    }

    /// [`for_template`](Self::for_template) of a loaded definition.
    pub fn template_doc(&self, loaded: Loaded) -> Result<Saving, Refused> {
        let mut doc = loaded.doc;
        pin_code(&mut doc, &self.registry, &loaded.base_dir, true).map_err(Refused::Pin)?;
        Ok(Saving { doc, name: loaded.def.name, warnings: loaded.warnings })
    }

    fn lookup(&self, base_dir: &Path) -> RegistryLookup<'_> {
        let servers = self.settings.servers.iter().map(|s| s.name.clone());
        let agents = self.settings.agents.iter().map(|a| a.name.clone());
        RegistryLookup::new(&self.sandbox, &self.registry, base_dir)
            .with_servers(servers)
            .with_agents(agents)
            .for_audience(self.audience)
    }

    /// A problem for each `code.path` (or `transform.path`) of a client's
    /// definition outside `[guests] allow_paths`.
    fn client_paths(&self, doc: &Value) -> Vec<Problem> {
        let allowed = &self.settings.file.guests.allow_paths;
        let Some(steps) = doc.get("steps").and_then(Value::as_array) else { return vec![] };
        let mut out = vec![];
        for (i, step) in steps.iter().enumerate() {
            for field in ["code", "transform"] {
                if let Some(p) = step.get(field).and_then(|c| c.get("path")).and_then(Value::as_str)
                    && let Err(why) = client_path_allowed(allowed, &self.base_dir, p)
                {
                    out.push(Problem::new(format!("/steps/{i}/{field}/path"), why));
                }
            }
        }
        out
    }
}

/// The folder relative `code.path`s of `file` are resolved against.
fn base_of(file: &Path) -> PathBuf {
    file.parent().map(Path::to_path_buf).filter(|b| !b.as_os_str().is_empty()).unwrap_or_else(|| ".".into())
}

/// The problems of a run's `input` against the `input_schema` of a
/// document that may not validate (none when the schema is not usable:
/// the definition's problems say so).
fn input_problems(doc: &Value, input: &Value) -> Vec<Problem> {
    match doc.get("input_schema") {
        Some(schema) if weft_model::json_schema::check_schema(schema, "").is_empty() => {
            weft_model::validate_against(schema, input).err().unwrap_or_default()
        }
        _ => vec![],
    }
}

/// `input` against the definition's `input_schema`.
fn input_fits(def: &Definition, input: &Value) -> Result<(), Refused> {
    weft_model::validate_input(def, input)
        .map_err(|problems| Refused::Input { problems, schema: def.input_schema.clone() })
}

/// Runs `f` on a blocking thread (the sandbox compiles and describes guests).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Refused> + Send + 'static) -> Result<T, Refused> {
    // A burst of requests queues here rather than each taking a thread of
    // its own (200 cold starts once held 207 threads).
    static CHECKS: std::sync::LazyLock<tokio::sync::Semaphore> = std::sync::LazyLock::new(|| {
        tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()) * 2)
    });
    let _check = CHECKS.acquire().await.map_err(|e| Refused::Unusable(format!("the check was stopped: {e}")))?;
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(Refused::Unusable(format!("the check was stopped: {e}"))),
    }
}

/// The text of a definition file: an existing regular file of at most `cap`
/// bytes of UTF-8. The error is a sentence for a person.
pub fn read_definition(file: &Path, cap: usize) -> Result<String, String> {
    if !file.exists() {
        return Err(format!("no file `{}`", file.display()));
    }
    if file.is_dir() {
        return Err(format!("`{}` is a folder, not a definition file", file.display()));
    }
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if size > cap as u64 {
        return Err(format!(
            "{} is {size} bytes, over the {cap}-byte cap on definitions; split the workflow (child runs: \
             `workflow` steps), or raise `[limits] max_definition_bytes` in weft.toml",
            file.display()
        ));
    }
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    String::from_utf8(bytes).map_err(|e| format!("{} is not UTF-8 text: {e}", file.display()))
}

/// The digest a code reference pins to (`None`: already a digest, or a
/// plugin name kept by `paths_only`), storing the guest's bytes.
fn pin_one(registry: &Registry, base_dir: &Path, code: &CodeRef, paths_only: bool) -> Result<Option<String>, String> {
    if matches!(code, CodeRef::Sha256(_)) || (paths_only && !matches!(code, CodeRef::Path(_))) {
        return Ok(None);
    }
    let found = resolve_code(registry, base_dir, code)?;
    registry.put_blob_known(&found.digest, &found.bytes).map_err(|e| format!("cannot store the guest: {e}"))?;
    Ok(Some(found.digest.hex()))
}

/// Pins a validated definition's code: every code step's (and
/// `transform`'s) guest is stored content-addressed and named by its
/// digest, so a run executes the same code after a restart even if plugins
/// or files changed. Each guest is resolved once, however many steps name it.
pub fn pin_definition(def: &mut Definition, registry: &Registry, base_dir: &Path) -> Result<(), Vec<Problem>> {
    let mut problems = vec![];
    let mut pinned: HashMap<CodeRef, Result<Option<String>, String>> = HashMap::new();
    for (i, step) in def.steps.iter_mut().enumerate() {
        let code = match &mut step.action {
            Action::Code(c) => Some(("code", c)),
            _ => None,
        };
        for (field, c) in code.into_iter().chain(step.transform.as_mut().map(|t| ("transform", t))) {
            let pin = pinned.entry(c.clone()).or_insert_with(|| pin_one(registry, base_dir, c, false)).clone();
            match pin {
                Ok(Some(hex)) => *c = CodeRef::Sha256(hex),
                Ok(None) => {}
                Err(why) => problems.push(Problem::new(format!("/steps/{i}/{field}"), why)),
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Pins a definition document's code like [`pin_definition`]. With
/// `paths_only`, plugin names are kept (templates keep naming their
/// plugins; runs pin them at creation).
pub fn pin_code(doc: &mut Value, registry: &Registry, base_dir: &Path, paths_only: bool) -> Result<(), Vec<Problem>> {
    let mut problems = vec![];
    let Some(steps) = doc.get_mut("steps").and_then(Value::as_array_mut) else { return Ok(()) };
    for (i, step) in steps.iter_mut().enumerate() {
        for field in ["code", "transform"] {
            let Some(v) = step.get_mut(field) else { continue };
            let Ok(code) = serde_json::from_value::<CodeRef>(v.clone()) else { continue };
            match pin_one(registry, base_dir, &code, paths_only) {
                Ok(Some(hex)) => *v = serde_json::json!({"sha256": hex}),
                Ok(None) => {}
                Err(why) => problems.push(Problem::new(format!("/steps/{i}/{field}"), why)),
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn code_is_pinned_by_digest() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(dir.path(), crate::guests::bundled());
        let wasm = weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm;
        std::fs::write(dir.path().join("g.wasm"), wasm).unwrap();
        let hex = weft_sandbox::Digest::of(wasm).hex();
        let mut doc = json!({"name": "x", "steps": [
            {"name": "a", "code": {"plugin": "json-select"}},
            {"name": "b", "code": {"path": "g.wasm"}},
            {"name": "c", "return": true}
        ]});
        let mut paths_only = doc.clone();
        pin_code(&mut paths_only, &registry, dir.path(), true).unwrap();
        assert_eq!(paths_only["steps"][0]["code"], json!({"plugin": "json-select"}));
        assert_eq!(paths_only["steps"][1]["code"], json!({"sha256": hex}));
        pin_code(&mut doc, &registry, dir.path(), false).unwrap();
        assert_eq!(doc["steps"][0]["code"], json!({"sha256": hex}));
        assert_eq!(registry.stored(&hex.parse().unwrap()).unwrap().read().unwrap(), wasm);

        let mut missing = json!({"name": "x", "steps": [{"name": "a", "code": {"path": "nope.wasm"}}]});
        let p = pin_code(&mut missing, &registry, dir.path(), false).unwrap_err();
        assert_eq!(p[0].path, "/steps/0/code");
    }

    #[test]
    fn a_typed_plan_is_pinned_like_its_document() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(dir.path(), crate::guests::bundled());
        let wasm = weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm;
        std::fs::write(dir.path().join("g.wasm"), wasm).unwrap();
        let hex = weft_sandbox::Digest::of(wasm).hex();
        let doc = json!({"name": "x", "steps": [
            {"name": "a", "code": {"plugin": "json-select"}},
            {"name": "b", "code": {"path": "g.wasm"}},
            {"name": "c", "return": true}
        ]});
        let mut def = weft_model::from_value(&doc, &weft_model::NoSchemas).unwrap();
        pin_definition(&mut def, &registry, dir.path()).unwrap();
        let mut pinned = doc.clone();
        pin_code(&mut pinned, &registry, dir.path(), false).unwrap();
        assert_eq!(def, weft_model::from_value(&pinned, &weft_model::NoSchemas).unwrap());
        assert_eq!(pinned["steps"][0]["code"], json!({"sha256": hex}));

        let missing = json!({"name": "x", "steps": [{"name": "a", "code": {"path": "nope.wasm"}}]});
        let mut def = weft_model::from_value(&missing, &weft_model::NoSchemas).unwrap();
        let p = pin_definition(&mut def, &registry, dir.path()).unwrap_err();
        assert_eq!(p[0].path, "/steps/0/code");
    }

    fn pipeline(dir: &Path) -> Pipeline {
        let s = Settings::in_dir(dir);
        let sandbox = crate::guests::sandbox(&s).unwrap();
        Pipeline::new(&s, sandbox, Arc::new(s.upstreams()), None, dir.to_path_buf())
    }

    #[tokio::test]
    async fn a_file_is_validated_its_input_checked_and_its_plan_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let p = pipeline(dir.path());
        let file = dir.path().join("one.json");
        let doc = json!({"name": "one", "input_schema": {"type": "object", "required": ["a"]},
            "steps": [{"name": "s", "code": {"plugin": "json-select"}, "input": {"data": "@input", "path": "a"}}]});
        std::fs::write(&file, doc.to_string()).unwrap();

        let refused = p.prepare_source(Source::File(file.clone()), json!({}), RunOptions::default()).await;
        assert!(matches!(&refused, Err(Refused::Input { problems, .. }) if problems.len() == 1), "{refused:?}");

        let ok = p.prepare_source(Source::File(file), json!({"a": 1}), RunOptions::default()).await.unwrap();
        let Action::Code(CodeRef::Sha256(hex)) = &ok.plan.steps[0].action else { panic!("{:?}", ok.plan.steps[0]) };
        let wasm = weft_bundled::all().iter().find(|p| p.name == "json-select").unwrap().wasm;
        assert_eq!(*hex, weft_sandbox::Digest::of(wasm).hex(), "pinned to the plugin's digest");
        assert!(ok.warnings.is_empty());
    }

    #[tokio::test]
    async fn refusals_say_what_is_wrong_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let p = pipeline(dir.path());
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"name": "x", "steps": [{"name": "a", "code": {"plugin": "no-such"}}]}"#).unwrap();
        match p.load(Source::File(bad)).await {
            Err(Refused::Definition(invalid)) => assert_eq!(invalid.problems[0].path, "/steps/0/code"),
            other => panic!("{other:?}"),
        }
        let syntax = dir.path().join("syntax.json");
        std::fs::write(&syntax, "{\n  \"name\": ").unwrap();
        match p.load(Source::File(syntax)).await {
            Err(Refused::Definition(invalid)) => assert_eq!(invalid.syntax.map(|s| s.0), Some(2)),
            other => panic!("{other:?}"),
        }
        let missing = p.load(Source::File(dir.path().join("nope.json"))).await;
        assert!(matches!(&missing, Err(Refused::Unusable(m)) if m.contains("no file")), "{missing:?}");
        // A client may not name files unless the operator allowed a folder.
        let client = json!({"name": "x", "steps": [{"name": "a", "code": {"path": "g.wasm"}}]});
        match p.load(Source::Client(client)).await {
            Err(Refused::Definition(invalid)) => assert_eq!(invalid.problems[0].path, "/steps/0/code/path"),
            other => panic!("{other:?}"),
        }
        // No store: a template cannot be read.
        assert!(matches!(p.load(Source::Template("t".into())).await, Err(Refused::Unusable(_))));
    }

    #[test]
    fn the_process_has_one_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let s = Settings::in_dir(dir.path());
        let a = crate::guests::sandbox(&s).unwrap();
        let b = crate::guests::sandbox(&s).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one wasmtime engine per process");
    }
}
