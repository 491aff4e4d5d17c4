//! Whom a hint is written for. The same problem is fixed differently by a
//! person at a terminal (`weft plugin list`), an MCP client (the tool
//! `plugin_list`, the proxied tools `<server>__<tool>`) and an HTTP client
//! (the routes under `/api/v1`): the pipeline and the validation lookup
//! phrase their hints through an [`Audience`], so no front end shows another's
//! commands.

/// The audience of a refusal or a warning: who reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Audience {
    /// `weft …` at a terminal.
    #[default]
    Cli,
    /// An MCP client of `weft serve`.
    Mcp,
    /// A client of the HTTP API at `/api/v1`.
    Http,
}

impl Audience {
    /// Where to find the plugins a code step can name.
    pub fn plugins(self) -> &'static str {
        match self {
            Audience::Cli => "`weft plugin list` shows the installed plugins; `weft plugin add FILE` adds one",
            Audience::Mcp => "plugin_list shows the installed plugins and their input schemas",
            Audience::Http => "the installed plugins are those `weft plugin list` shows on the server",
        }
    }

    /// How a module gets stored by its digest.
    pub fn digests(self) -> &'static str {
        match self {
            Audience::Cli => "`weft plugin add FILE` stores a module by its digest",
            Audience::Mcp => "name a plugin instead (plugin_list shows them); modules are stored by the operator",
            Audience::Http => "name a plugin instead; modules are stored by the operator (`weft plugin add`)",
        }
    }

    /// Where the tools of `server` are listed.
    pub fn tools(self, server: &str) -> String {
        match self {
            Audience::Cli => format!("`weft tools list {server}` shows them"),
            Audience::Mcp => format!("tools/list shows them as `{server}__<tool>`, with their input schemas"),
            Audience::Http => format!("`weft tools list {server}` on the server shows them"),
        }
    }

    /// How a server that is not configured gets configured.
    /// What to do about an agent step naming an agent weft.toml lacks.
    pub fn add_agent(self, agent: &str) -> String {
        match self {
            Audience::Cli => format!("add an [agents.{agent}] table to weft.toml with the agent's `url`"),
            Audience::Mcp | Audience::Http => {
                format!("no agent `{agent}` is configured; the operator adds A2A agents to weft.toml ([agents.NAME])")
            }
        }
    }

    pub fn add_server(self, server: &str) -> String {
        match self {
            Audience::Cli => {
                format!("add a [servers.{server}] table to weft.toml (`command` for stdio, `url` for HTTP)")
            }
            Audience::Mcp | Audience::Http => {
                format!("no server `{server}` is configured; the operator adds servers to weft.toml")
            }
        }
    }

    /// How a webhook that is not configured gets configured (`known`: those that are).
    pub fn add_webhook(self, name: &str, known: &[&str]) -> String {
        let have = if known.is_empty() { "none is".to_string() } else { format!("configured: {}", known.join(", ")) };
        match self {
            Audience::Cli => format!("add a [webhooks.{name}] table (`url`, `secret`) to weft.toml ({have})"),
            Audience::Mcp | Audience::Http => {
                format!("name a webhook the operator configured in weft.toml ({have}); definitions never carry a URL")
            }
        }
    }

    /// What to check when `server` cannot be reached.
    pub fn reach_server(self, server: &str) -> String {
        match self {
            Audience::Cli => format!("check [servers.{server}] in weft.toml and that the server starts"),
            Audience::Mcp => format!(
                "the server did not answer; its tools (`{server}__*` in tools/list) are offered again once it does"
            ),
            Audience::Http => "the server did not answer; ask the operator to check it".to_string(),
        }
    }

    /// How a template gets saved.
    pub fn save_template(self) -> &'static str {
        match self {
            Audience::Cli => "`weft templates save FILE`",
            Audience::Mcp => "template_save",
            Audience::Http => "PUT /api/v1/templates/{name}",
        }
    }
}
