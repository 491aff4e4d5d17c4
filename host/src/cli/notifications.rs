//! `weft notifications list [--run R] [--state S] | resend ID`: the
//! notifications a definition's `notify` sends (the outbox, as MCP's
//! `notification_*` tools and `/api/v1/notifications`). The store's owner
//! (`weft worker`, `weft serve`) sends them; a resent one goes out from
//! its first try, with the same id (docs/notifications.md).

use clap::Subcommand;
use weft_engine::delivery::{DeliveryFilter, DeliveryState};
use weft_runtime::app::App;
use weft_runtime::config::Settings;
use weft_runtime::usecase::{NotificationView, ResendRefused, UseCases};

use super::{Exit, bad, output};

#[derive(Debug, Subcommand)]
pub enum NotificationsCommand {
    /// Notifications, newest first, with where each stands.
    List {
        /// Only this run's.
        #[arg(long)]
        run: Option<String>,
        /// Only those `pending`, `delivered` or `failed`.
        #[arg(long)]
        state: Option<String>,
        /// At most this many (default 100).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Send a failed notification again, from its first try (same id).
    Resend {
        /// The notification's id (`dlv_…`, from `weft notifications list`).
        id: String,
    },
}

pub fn run(settings: &Settings, cmd: NotificationsCommand) -> anyhow::Result<Exit> {
    let app = App::open(settings)?;
    let cases = UseCases::new(app.engine()?, app.dyn_store(), app.pipeline()?);
    match cmd {
        NotificationsCommand::List { run, state, limit, json } => {
            let run = run
                .map(|r| r.trim().parse().map_err(|_| bad(anyhow::anyhow!("`{r}` is not a run id (r_…)"))))
                .transpose()?;
            let state = state.map(|s| s.parse::<DeliveryState>().map_err(|e| bad(anyhow::anyhow!(e)))).transpose()?;
            let list = app.block_on(cases.notifications(&DeliveryFilter { run, state, limit: Some(limit) }))?;
            if json {
                output::json(&list);
            } else if list.is_empty() {
                eprintln!("no notifications");
            } else {
                for n in &list {
                    outln!("{}", line(n));
                }
            }
            Ok(Exit::Success)
        }
        NotificationsCommand::Resend { id } => match app.block_on(cases.resend(&id)) {
            Ok(n) => {
                eprintln!(
                    "notification {} goes out again (the store's owner sends it: `weft worker`, `weft serve`)",
                    n.id
                );
                output::json(&n);
                Ok(Exit::Success)
            }
            Err(ResendRefused::NotFound(id)) => Err(bad(anyhow::anyhow!(
                "no notification `{id}` (`weft notifications list --state failed` shows them)"
            ))),
            Err(e @ (ResendRefused::NotFailed { .. } | ResendRefused::NeverSent { .. })) => {
                Err(bad(anyhow::anyhow!("{e}")))
            }
            Err(ResendRefused::Failed(e)) => Err(e.into()),
        },
    }
}

/// One notification on one line: id, run, event, target, state, tries, error.
pub fn line(n: &NotificationView) -> String {
    let target = match (n.target.get("webhook"), n.target.get("tool")) {
        (Some(w), _) => format!("webhook {}", w.as_str().unwrap_or_default()),
        (_, Some(t)) => {
            format!("tool {}/{}", t["server"].as_str().unwrap_or_default(), t["name"].as_str().unwrap_or_default())
        }
        _ => "?".into(),
    };
    let err = n.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
    format!(
        "{}  {}  {:<16}  {:<24}  {} ({}/{} tries){err}",
        n.id, n.run_id, n.on, target, n.state, n.attempts, n.max_attempts
    )
}
