//! `weft tools list [SERVER] [--json]`: what the configured upstream MCP
//! servers offer (names, descriptions, input schemas), as a workflow's tool
//! steps would see it (after `allow_tools` / `deny_tools`). One server
//! that cannot be reached does not hide the others; it makes the exit
//! code 1. An unknown server name is bad usage (exit 2).

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Exit, bad, output};
use weft_runtime::config::Settings;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the tools of every configured MCP server (or of one).
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this server (a `[servers.NAME]` of weft.toml).
    server: Option<String>,
    /// Print JSON on stdout (with each tool's input schema).
    #[arg(long)]
    json: bool,
}

pub fn run(settings: &Settings, cmd: ToolsCommand) -> anyhow::Result<Exit> {
    match cmd {
        ToolsCommand::List(a) => list(settings, a),
    }
}

fn list(settings: &Settings, args: ListArgs) -> anyhow::Result<Exit> {
    let upstreams = settings.upstreams();
    let names: Vec<String> = match &args.server {
        Some(s) if upstreams.config(s).is_none() => {
            let known: Vec<&str> = upstreams.names().collect();
            return Err(bad(anyhow::anyhow!(
                "unknown MCP server `{s}` (configured: {})",
                if known.is_empty() {
                    "none; add a [servers.NAME] table to weft.toml".into()
                } else {
                    known.join(", ")
                }
            )));
        }
        Some(s) => vec![s.clone()],
        None => upstreams.names().map(String::from).collect(),
    };
    if names.is_empty() {
        eprintln!("no MCP servers are configured: add a [servers.NAME] table to weft.toml (see docs/tools.md)");
        if args.json {
            output::json(&json!({"servers": []}));
        }
        return Ok(Exit::Success);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start a runtime")?;
    type Listed = Result<(Option<String>, Vec<weft_mcp_client::ToolInfo>), weft_mcp_client::CallError>;
    let results: Vec<(String, Listed)> = rt.block_on(async {
        let mut out = vec![];
        for name in &names {
            let r = async {
                let tools = upstreams.list_tools(name).await?;
                let protocol = upstreams.protocol(name).await?.map(|p| p.to_string());
                Ok((protocol, tools))
            }
            .await;
            out.push((name.clone(), r));
        }
        upstreams.shutdown().await;
        out
    });
    let failed = results.iter().any(|(_, r)| r.is_err());
    if args.json {
        let servers: Vec<Value> = results
            .iter()
            .map(|(name, r)| {
                let transport = upstreams.config(name).map(|c| c.transport.kind()).unwrap_or("?");
                match r {
                    Ok((protocol, tools)) => {
                        json!({"name": name, "transport": transport, "protocol": protocol, "tools": tools})
                    }
                    Err(e) => json!({"name": name, "transport": transport,
                                     "error": {"kind": e.kind.as_str(), "message": e.message}}),
                }
            })
            .collect();
        output::json(&json!({"servers": servers}));
    } else {
        for (name, r) in &results {
            match r {
                Ok((protocol, tools)) => {
                    let p = protocol.as_deref().unwrap_or("?");
                    outln!("{name} ({} tool{}, MCP {p})", tools.len(), if tools.len() == 1 { "" } else { "s" });
                    for t in tools {
                        let d = t.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
                        outln!("  {:<32} {d}", t.name);
                    }
                }
                Err(e) => outln!("{name}: cannot list tools: {e}"),
            }
        }
    }
    Ok(if failed { Exit::Failed } else { Exit::Success })
}
