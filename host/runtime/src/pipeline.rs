//! THE prepare-a-run pipeline, the one every front end calls (`weft run`,
//! the MCP tools `run_start` and `wf_<name>`, `template_save`):
//!
//! 1. **load** — a definition file, a document a client sent, or a saved
//!    template; read once, under the definition cap;
//! 2. **validate once** — against the installed plugins (their input
//!    schemas, `describe()`d by this process's one sandbox) and the
//!    configured servers: a [`Definition`], or every problem with its JSON
//!    path;
//! 3. **check the input** against `input_schema`;
//! 4. **check the tools** — with tool steps, their servers are asked for
//!    their tools (an unknown tool or an input that breaks a tool's schema
//!    refuses the run; an unreachable server is only a warning);
//! 5. **pin** — every guest is stored content-addressed and named by its
//!    digest in the plan, so a run executes the same code after a restart.
//!
//! Nothing here stores a run: the front end submits the [`Prepared`] plan
//! to the engine. A refusal is a [`Refused`], which each front end renders
//! in its reader's terms (stderr lines and exit 2; an `isError` result
//! naming MCP tools).

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

use crate::config::Settings;
use crate::error::RuntimeError;
use crate::guests::{self, client_path_allowed, resolve_code};
use crate::lookup::{Invalid, RegistryLookup, validate_doc, validate_text};
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
    /// Servers of tool steps that could not be reached (the run's attempts
    /// retry per policy): for the front end to warn about.
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
    /// syntax error).
    #[error("the definition is not valid ({} problem{})", .0.problems.len(), plural(.0.problems.len()))]
    Definition(Invalid),
    /// A saved template no longer validates (a plugin or server is gone).
    #[error("template `{name}` version {version} does not validate against the installed plugins and servers")]
    Template { name: String, version: u32, problems: Vec<Problem> },
    /// The input does not match `input_schema`.
    #[error("the input was refused ({} problem{}); no run was created", .problems.len(), plural(.problems.len()))]
    Input { problems: Vec<Problem>, schema: Option<Value> },
    /// Tool steps name tools their servers do not offer, or break their
    /// input schemas.
    #[error("the tool steps do not match what their MCP servers offer")]
    Tools(Vec<Problem>),
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

/// What the pipeline needs: cheap to clone (the parts are shared).
#[derive(Clone)]
pub struct Pipeline {
    settings: Settings,
    sandbox: Arc<Sandbox>,
    registry: Arc<Registry>,
    upstreams: Arc<weft_mcp::Upstreams>,
    store: Option<Arc<dyn Store>>,
    base_dir: PathBuf,
    saved: Arc<Mutex<HashMap<(String, u32), Memo>>>,
}

/// A saved template version as validated and pinned, kept while the
/// plugins stay as they were (the registry's stamp) and the stored
/// document is the same (a deleted template's name may be saved again).
#[derive(Clone)]
struct Memo {
    stamp: Option<SystemTime>,
    loaded: Loaded,
    plan: Option<Arc<Definition>>,
}

/// Template versions remembered at most (then forgotten all at once).
const MEMO_CAP: usize = 256;

impl Pipeline {
    /// A pipeline over this process's sandbox; `store` (for templates)
    /// may be `None` where no store is open; a client's relative paths
    /// are resolved against `base_dir`.
    pub fn new(
        settings: &Settings,
        sandbox: Arc<Sandbox>,
        upstreams: Arc<weft_mcp::Upstreams>,
        store: Option<Arc<dyn Store>>,
        base_dir: PathBuf,
    ) -> Pipeline {
        let registry = Arc::new(guests::registry(settings));
        let saved = Arc::default();
        Pipeline { settings: settings.clone(), sandbox, registry, upstreams, store, base_dir, saved }
    }

    /// Steps 1 and 2: reads `source` and validates it once. The sandbox
    /// work runs on a blocking thread.
    pub async fn load(&self, source: Source) -> Result<Loaded, Refused> {
        match source {
            Source::File(path) => {
                let p = self.clone();
                blocking(move || p.load_file(&path)).await
            }
            Source::Client(doc) => {
                let p = self.clone();
                blocking(move || p.load_client(doc)).await
            }
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
            return Ok(m.loaded);
        }
        let p = self.clone();
        let loaded = blocking(move || {
            let version = t.version;
            let mut loaded = p.load_client(t.definition).map_err(|r| match r {
                Refused::Definition(invalid) => {
                    Refused::Template { name: t.name.clone(), version, problems: invalid.problems }
                }
                other => other,
            })?;
            loaded.template = Some((t.name, version));
            Ok(loaded)
        })
        .await?;
        let (name, version) = loaded.template.clone().expect("set above");
        let mut saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        if saved.len() >= MEMO_CAP {
            saved.clear();
        }
        saved.insert((name, version), Memo { stamp, loaded: loaded.clone(), plan: None });
        Ok(loaded)
    }

    /// What is remembered of a template version, if still valid.
    fn remembered(&self, name: &str, version: u32, stamp: Option<SystemTime>, doc: &Value) -> Option<Memo> {
        let saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        let m = saved.get(&(name.to_string(), version))?;
        (m.stamp == stamp && &m.loaded.doc == doc).then(|| m.clone())
    }

    /// A definition file, read once under the definition cap.
    pub fn load_file(&self, file: &Path) -> Result<Loaded, Refused> {
        let text = read_definition(file, self.settings.caps().max_definition_bytes).map_err(Refused::Unusable)?;
        let base = file.parent().map(Path::to_path_buf).filter(|b| !b.as_os_str().is_empty());
        let base_dir = base.unwrap_or_else(|| ".".into());
        let def = validate_text(&text, &self.lookup(&base_dir)).map_err(Refused::Definition)?;
        let doc = serde_json::from_str(&text).expect("validated text is JSON");
        Ok(Loaded { doc, def, base_dir, template: None })
    }

    /// A document a client sent (or a saved template's).
    pub fn load_client(&self, doc: Value) -> Result<Loaded, Refused> {
        // A client names plugins and digests; files only where the
        // operator allowed, and none is read before that is checked.
        let paths = self.client_paths(&doc);
        if !paths.is_empty() {
            return Err(Refused::Definition(Invalid { problems: paths, syntax: None }));
        }
        let base_dir = self.base_dir.clone();
        let def = validate_doc(&doc, &self.lookup(&base_dir)).map_err(Refused::Definition)?;
        Ok(Loaded { doc, def, base_dir, template: None })
    }

    /// Steps 3 to 5: checks `input`, the tools of tool steps, and pins the
    /// code. `opts` gets the template's name and version.
    pub async fn prepare(&self, loaded: Loaded, input: Value, mut opts: RunOptions) -> Result<Prepared, Refused> {
        if let Err(problems) = weft_model::validate_input(&loaded.def, &input) {
            return Err(Refused::Input { problems, schema: loaded.def.input_schema.clone() });
        }
        if let Some((name, version)) = &loaded.template {
            opts.template = Some(name.clone());
            opts.version = Some(*version);
        }
        let warnings = self.check_tools(&loaded).await?;
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
            if let Some(m) = saved.get_mut(&(name, version))
                && m.stamp == stamp
                && m.loaded.doc == doc
            {
                m.plan = Some(plan.clone());
            }
        }
        Ok(Prepared { plan, input, opts, warnings })
    }

    /// [`load`](Self::load) then [`prepare`](Self::prepare).
    pub async fn prepare_source(&self, source: Source, input: Value, opts: RunOptions) -> Result<Prepared, Refused> {
        let loaded = self.load(source).await?;
        self.prepare(loaded, input, opts).await
    }

    /// A definition to save as a template: validated, with the code of
    /// steps that name a file stored (plugin names stay names, so a
    /// template follows its plugins' updates). The document and its name.
    pub async fn for_template(&self, source: Source) -> Result<(Value, String), Refused> {
        let loaded = self.load(source).await?;
        let p = self.clone();
        blocking(move || p.template_doc(loaded)).await
    }

    /// [`for_template`](Self::for_template) of a loaded definition.
    pub fn template_doc(&self, loaded: Loaded) -> Result<(Value, String), Refused> {
        let mut doc = loaded.doc;
        pin_code(&mut doc, &self.registry, &loaded.base_dir, true).map_err(Refused::Pin)?;
        Ok((doc, loaded.def.name))
    }

    /// Step 4: asks the servers of tool steps for their tools; the
    /// unreachable ones are returned as warnings.
    async fn check_tools(&self, loaded: &Loaded) -> Result<Vec<Problem>, Refused> {
        if online::tool_steps(&loaded.doc).is_empty() {
            return Ok(vec![]);
        }
        let online = online::check(&self.upstreams, &loaded.doc).await;
        let mut problems = online.problems;
        if !online.schemas.is_empty() {
            let p = self.clone();
            let doc = loaded.doc.clone();
            let base = loaded.base_dir.clone();
            let schemas = online.schemas;
            let found = blocking(move || {
                let lookup = p.lookup(&base).with_tool_schemas(schemas);
                Ok(weft_model::from_value(&doc, &lookup).err().unwrap_or_default())
            })
            .await?;
            problems.extend(found);
        }
        if problems.is_empty() { Ok(online.unreachable) } else { Err(Refused::Tools(problems)) }
    }

    fn lookup(&self, base_dir: &Path) -> RegistryLookup<'_> {
        let servers = self.settings.servers.iter().map(|s| s.name.clone());
        RegistryLookup::new(&self.sandbox, &self.registry, base_dir).with_servers(servers)
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

/// Runs `f` on a blocking thread (the sandbox compiles and describes guests).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Refused> + Send + 'static) -> Result<T, Refused> {
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
        assert_eq!(registry.blob(&hex.parse().unwrap()).unwrap(), wasm);

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
