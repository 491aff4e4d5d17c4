//! The engine the bench drives in its own process: over a store it is
//! given, with this process's sandbox, and one plan pinned. W10 creates
//! runs with it for workers elsewhere; W9 runs them here, beside its served
//! figures.

use std::sync::Arc;

use serde_json::json;
use weft_engine::{Engine, EngineConfig, RunOptions, SeededRng, Store, SystemClock};
use weft_runtime::pipeline::Source;

/// An engine over a store (one that drives nothing, for W10's PostgreSQL
/// client; the owner, for W9's in-process runs) and a plan pinned as
/// `weft run` pins it.
pub struct Client {
    pub engine: Engine,
    pub store: Arc<dyn Store>,
    pub plan: Arc<weft_model::Definition>,
}

impl Client {
    /// An engine over `store` with this process's sandbox (its settings
    /// in `dir`) and the plan of `doc` pinned.
    pub async fn over(store: Arc<dyn Store>, dir: &std::path::Path, doc: serde_json::Value) -> anyhow::Result<Client> {
        let settings = weft_runtime::config::Settings::in_dir(dir);
        let sandbox = weft_runtime::guests::sandbox(&settings)?;
        let ups = Arc::new(weft_mcp_client::Upstreams::new([]));
        let pipeline = weft_runtime::pipeline::Pipeline::new(
            &settings,
            sandbox,
            ups.clone(),
            Some(store.clone()),
            dir.to_path_buf(),
        );
        let p = pipeline
            .prepare_source(Source::Client(doc), json!({}), RunOptions::default())
            .await
            .map_err(|r| anyhow::anyhow!("the bench's workflow is refused: {r:?}"))?;
        let code = weft_runtime::runner::CodeRunner::from_settings(&settings, dir.to_path_buf())?;
        let runner =
            Arc::new(weft_runtime::tool_runner::Runners::new(code, weft_runtime::tool_runner::ToolRunner::new(ups)));
        let engine = Engine::new(
            store.clone(),
            runner,
            Arc::new(SystemClock),
            Arc::new(SeededRng::from_entropy()),
            EngineConfig::default(),
        );
        Ok(Client { engine, store, plan: p.plan })
    }

    /// Starts a run of the plan here and waits for its end: whether it
    /// completed.
    pub async fn run_here(&self) -> anyhow::Result<bool> {
        let id = self.engine.submit_shared(self.plan.clone(), json!({}), RunOptions::default()).await?;
        Ok(self.engine.wait(&id).await?.state == weft_engine::RunState::Completed)
    }
}
