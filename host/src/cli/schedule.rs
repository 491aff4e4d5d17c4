//! `weft schedule add TEMPLATE --cron EXPR [--input JSON] [--name N] |
//! list | pause NAME | resume NAME | remove NAME`: cron schedules that
//! start runs of a template (the use-case layer's, as MCP's `schedule_*`
//! tools and `/api/v1/schedules`).
//!
//! A schedule lives in the store; the process that owns the store (`weft
//! worker`, `weft serve`) fires it. Times are UTC; five fields (minute hour
//! day month weekday), six with seconds first, or `@daily`-style aliases.
//! A fire commits its run together with the schedule's next time, so a
//! restart never fires the same time twice; after an outage a schedule
//! fires once, for the latest time it missed (docs/schedules.md).

use clap::Subcommand;
use serde_json::{Value, json};
use weft_engine::clock::rfc3339;
use weft_engine::store::ScheduleRecord;

use super::{Exit, bad, output};
use weft_runtime::app::App;
use weft_runtime::config::Settings;
use weft_runtime::usecase::{ScheduleRefused, ScheduleRequest, UseCases};

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Start a run of TEMPLATE at every time the cron expression names (UTC).
    Add {
        /// The template to run (its latest version at each fire).
        template: String,
        /// When: `0 2 * * *` (02:00 every night), `*/10 * * * * *` (every 10 s), `@hourly`.
        #[arg(long)]
        cron: String,
        /// The runs' input (JSON; checked against the template's input_schema now).
        #[arg(long, default_value = "{}")]
        input: String,
        /// The schedule's name (default: the template's).
        #[arg(long)]
        name: Option<String>,
    },
    /// Every schedule with its next and last fire.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Stop a schedule from firing until it is resumed.
    Pause {
        /// The schedule's name.
        name: String,
    },
    /// Let a paused schedule fire again, from its next time after now
    /// (the times it was paused over are not made up).
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Delete a schedule (runs it started are kept).
    Remove {
        /// The schedule's name.
        name: String,
    },
}

fn schedule_json(s: &ScheduleRecord) -> Value {
    json!({
        "name": s.name,
        "template": s.template,
        "cron": s.cron,
        "input": s.input,
        "next_fire_at": (!s.paused).then(|| rfc3339(s.next_fire_at)),
        "last_fire_at": s.last_fire_at.map(rfc3339),
        "last_run": s.last_run,
        "created_at": rfc3339(s.created_at),
        "paused": s.paused,
    })
}

/// A refusal as the CLI says it: each problem on its own line, then exit 2.
fn refused(name: &str, e: ScheduleRefused) -> anyhow::Error {
    match e {
        ScheduleRefused::Invalid(p) => {
            for x in &p.0 {
                eprintln!("schedule {name}: {x}");
            }
            bad(anyhow::anyhow!("schedule `{name}` was not added"))
        }
        ScheduleRefused::NotFound(name) => bad(anyhow::anyhow!("no schedule `{name}` (see `weft schedule list`)")),
        ScheduleRefused::Failed(e) => e.into(),
    }
}

/// `weft schedule pause NAME` (`paused`) or `resume NAME`.
fn pause(app: &App, cases: UseCases, name: &str, paused: bool) -> anyhow::Result<Exit> {
    let rec = app.block_on(cases.pause_schedule(name, paused)).map_err(|e| refused(name, e))?;
    match paused {
        true => eprintln!("schedule {name} is paused (`weft schedule resume {name}` lets it fire again)"),
        false => eprintln!("schedule {name} fires again; next: {}", rfc3339(rec.next_fire_at)),
    }
    output::json(&schedule_json(&rec));
    Ok(Exit::Success)
}

pub fn run(settings: &Settings, cmd: ScheduleCommand) -> anyhow::Result<Exit> {
    let app = App::open(settings)?;
    let cases = || -> anyhow::Result<UseCases> { Ok(UseCases::new(app.engine()?, app.dyn_store(), app.pipeline()?)) };
    match cmd {
        ScheduleCommand::Add { template, cron, input, name } => {
            let input: Value = serde_json::from_str(&input)
                .map_err(|e| bad(anyhow::anyhow!("--input is not JSON: {e} (quote it: --input '{{\"a\": 1}}')")))?;
            let label = name.clone().unwrap_or_else(|| template.clone());
            let req = ScheduleRequest { name, template, cron, input };
            let rec = app.block_on(cases()?.add_schedule(req)).map_err(|e| refused(&label, e))?;
            eprintln!(
                "schedule {} runs template {} at `{}` (UTC); next: {}; the store's owner (`weft worker` or `weft serve`) fires it",
                rec.name,
                rec.template,
                rec.cron,
                rfc3339(rec.next_fire_at)
            );
            output::json(&schedule_json(&rec));
            Ok(Exit::Success)
        }
        ScheduleCommand::List { json } => {
            let all = app.block_on(cases()?.schedules()).map_err(|e| refused("", e))?;
            if json {
                output::json(&all.iter().map(schedule_json).collect::<Vec<_>>());
            } else if all.is_empty() {
                eprintln!("no schedules (add one with `weft schedule add TEMPLATE --cron EXPR`)");
            } else {
                let w = all.iter().map(|s| s.name.len()).max().unwrap_or(0).max(4);
                outln!("{:<w$}  {:<20}  {:<16}  {:<24}  LAST RUN", "NAME", "TEMPLATE", "CRON", "NEXT FIRE");
                for s in &all {
                    let last = s.last_run.as_ref().map(|r| r.to_string()).unwrap_or_else(|| "-".into());
                    let next = if s.paused { "paused".to_string() } else { rfc3339(s.next_fire_at) };
                    outln!("{:<w$}  {:<20}  {:<16}  {:<24}  {last}", s.name, s.template, s.cron, next);
                }
            }
            Ok(Exit::Success)
        }
        ScheduleCommand::Pause { name } => pause(&app, cases()?, &name, true),
        ScheduleCommand::Resume { name } => pause(&app, cases()?, &name, false),
        ScheduleCommand::Remove { name } => {
            app.block_on(cases()?.remove_schedule(&name)).map_err(|e| refused(&name, e))?;
            eprintln!("removed schedule {name}");
            Ok(Exit::Success)
        }
    }
}
