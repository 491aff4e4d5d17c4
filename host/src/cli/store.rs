//! `weft store copy --from DB --to DB`: moves a store's history (every
//! run with its events and artifacts, every template version, the
//! schedules) into another store, e.g. from the embedded SQLite file up to
//! PostgreSQL. Runs already in the target are left as they are (copying
//! again resumes an interrupted copy). Unfinished runs are copied too and
//! go on in the target's workers: stop the source's worker first (on
//! SQLite the copy takes its scheduler lock, and is refused while another
//! process owns it).

use clap::{Args, Subcommand};
use weft_engine::store::{RunFilter, Write};
use weft_engine::{Store, StoreError};
use weft_runtime::app::{self, Backend, open_backend, parse_database};
use weft_runtime::config::Settings;

use super::{Exit, bad, output};

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy every run, template and schedule of one store into another.
    Copy(CopyArgs),
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy from: `sqlite:PATH` (or a path) or `postgres://...`.
    #[arg(long, value_name = "DB")]
    from: String,
    /// The store to copy into (created or migrated as needed).
    #[arg(long, value_name = "DB")]
    to: String,
    /// Print the counts as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(settings: &Settings, cmd: StoreCommand) -> anyhow::Result<Exit> {
    match cmd {
        StoreCommand::Copy(a) => copy(settings, a),
    }
}

/// What a copy did.
#[derive(Debug, Default, serde::Serialize)]
struct Copied {
    runs: u64,
    runs_already_there: u64,
    template_versions: u64,
    schedules: u64,
}

fn copy(settings: &Settings, a: CopyArgs) -> anyhow::Result<Exit> {
    let (from_db, to_db) = (parse_database(&a.from), parse_database(&a.to));
    if from_db == to_db {
        return Err(bad(anyhow::anyhow!("--from and --to name the same store")));
    }
    if let app::Database::Sqlite(p) = &from_db
        && !p.exists()
    {
        return Err(bad(anyhow::anyhow!("--from {}: no such file", p.display())));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let (from_name, from) = open_backend(&from_db, settings, &rt)?;
    let (to_name, to) = open_backend(&to_db, settings, &rt)?;
    // Nobody may execute the source's runs meanwhile.
    let _lock = match &from {
        Backend::Sqlite(s) => Some(s.lock_scheduler().map_err(|e| match e {
            StoreError::Locked { pid, .. } => bad(anyhow::anyhow!(
                "{from_name} is owned by {}: stop it first (its runs would go on in both stores)",
                app::holder(pid)
            )),
            e => e.into(),
        })?),
        Backend::Postgres(_) => None,
    };
    let (src, dst) = (from.store(), to.store());
    let done = rt.block_on(copy_all(src.as_ref(), dst.as_ref()))?;
    if a.json {
        output::json(&serde_json::to_value(&done)?);
    } else {
        eprintln!(
            "copied {} run(s) ({} already there), {} template version(s) and {} schedule(s) from {from_name} to {to_name}",
            done.runs, done.runs_already_there, done.template_versions, done.schedules
        );
    }
    Ok(Exit::Success)
}

async fn copy_all(src: &dyn Store, dst: &dyn Store) -> Result<Copied, StoreError> {
    let mut done = Copied::default();
    for t in src.list_templates().await? {
        for v in src.template_versions(&t.name).await? {
            match dst.import_template(v).await {
                Ok(()) => done.template_versions += 1,
                Err(StoreError::Conflict(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    for s in src.schedules().await? {
        match dst.commit(weft_engine::store::Batch { writes: vec![Write::PutSchedule(s)] }).await {
            Ok(()) => done.schedules += 1,
            Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let mut page = RunFilter { limit: Some(500), ..Default::default() };
    loop {
        let runs = src.list_runs(&page).await?;
        let Some(last) = runs.last() else { break };
        page.before = Some(last.id.clone());
        for r in &runs {
            let Some(e) = src.export_run(&r.id).await? else { continue };
            match dst.import_run(e).await {
                Ok(()) => done.runs += 1,
                Err(StoreError::Conflict(_)) => done.runs_already_there += 1,
                Err(e) => return Err(e),
            }
        }
        let n = done.runs + done.runs_already_there;
        if n % 5000 < 500 {
            eprintln!("weft store copy: {n} run(s) so far");
        }
    }
    Ok(done)
}
