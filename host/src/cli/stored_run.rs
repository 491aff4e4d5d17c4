//! A stored run named on the command line: its id parsed, the run read,
//! either refused as bad input (exit 2) with a pointer to `weft runs list`.

use weft_engine::{RunId, RunRecord};
use weft_runtime::app::App;

use super::bad;

/// Parses a run id, refusing a malformed one as bad input.
pub fn parse_id(s: &str) -> anyhow::Result<RunId> {
    s.trim()
        .parse()
        .map_err(|_| bad(anyhow::anyhow!("no run `{s}` (a run id looks like r_01k…, see `weft runs list`)")))
}

/// The stored run `id`, or an exit-2 error naming it.
pub fn load_run(app: &App, id: &str) -> anyhow::Result<RunRecord> {
    let rid = parse_id(id)?;
    app.block_on(app.store.run(&rid))?.ok_or_else(|| bad(anyhow::anyhow!("no run `{rid}` (see `weft runs list`)")))
}
