//! weft as an MCP server (and proxy): everything an MCP client meets.
//! The tools are thin adapters over the runtime's use-case layer
//! (`weft_runtime::usecase`) and its prepare-a-run pipeline; what they
//! add is MCP's: tool names in every hint, elicitation, progress, tasks.
//!
//! | file | owns |
//! |---|---|
//! | `session.rs` | [`WeftServer`] (one per MCP session), [`Session`], [`ToolSource`] — the seam for tools that are not built in |
//! | `server.rs` | the rmcp `ServerHandler`: server info, `tools/list`, `tools/call` dispatch, resources, `list_changed` |
//! | `tools/templates.rs` | `workflow_validate`, `template_*`, `plugin_list` |
//! | `tools/runs.rs` | `run_start`, `run_get`, `run_list`, `run_events`, `run_cancel`; starting a run in MCP's terms |
//! | `tools/waits.rs` | `run_signal`, `event_emit`: answering waits |
//! | `tools/recording.rs` | `recording_start`, `step_preset`, `step_code`, `recording_remove_step`, `recording_save`, `recording_stop` |
//! | `tools/values.rs` | `run_value`: a run's or a step's input or output, paged (what `run_get` trims) |
//! | `tools/schedules.rs` | `schedule_add`, `schedule_list`, `schedule_pause`, `schedule_remove` |
//! | `tools/compare.rs` | `run_compare`: a run beside its recording or another run, step by step |
//! | `wf_tools.rs` | every saved template as a tool `wf_<name>` (a [`ToolSource`]) |
//! | `proxy.rs`, `proxy_tools.rs` | every upstream tool as `<server>__<tool>` (a [`ToolSource`]), forwarded; recorded in recording mode |
//! | `recording/` | recording mode's bookkeeping: the DAG of proxied calls with literals proposed as refs (`mod.rs`), what a save says (`review.rs`), the active recording and the run in state `recording` that keeps it (`journal.rs`) |
//! | `reply.rs` | what a waiting call ends with ([`reply::Outcome`]) and whom it tells of progress |
//! | `elicit.rs` | asking a waiting client for a run's input (elicitation; `input_required` results and tasks on 2026-07-28) |
//! | `prepare.rs` | definitions from tool arguments; the use-case layer's and the pipeline's refusals as tool errors |
//! | `views.rs` | what `run_start` and `wf_<name>` answer once they stop waiting: `RunStartOut` |
//! | `tool_schemas.rs` | the tools' JSON Schemas as `tools/list` shows them: strict-client safe, output schemas brief (the full ones are resources `weft://schema/tools/<tool>`) |
//! | `resources.rs` | runs as resources `weft://runs/{id}` |
//! | `guide.rs`, `guide.md` | the guide (`weft://guide`, the prompt `workflow_guide`) and the definition schema |
//! | `stdio.rs`, `oversized.rs` | MCP over stdin/stdout with every message answered: one over the cap gets a JSON-RPC error naming it (over HTTP too) |
//! | `errors.rs` | [`ToolError`]: `isError` results that say what, where and how to fix; [`ServeError`] |
//! | `tests.rs` | fuzzing the decoding of MCP tool requests (property tests) |

pub mod elicit;
pub mod errors;
pub mod guide;
pub mod oversized;
pub mod prepare;
pub mod proxy;
pub mod proxy_tools;
pub mod recording;
pub mod reply;
pub mod resources;
pub mod server;
pub mod session;
pub mod stdio;
#[cfg(test)]
mod tests;
pub mod tool_schemas;
pub mod tools;
pub mod views;
pub mod wf_tools;

pub use errors::{ProblemOut, ServeError, ToolError};
pub use session::{Session, SourceCall, ToolSource, WeftServer};
