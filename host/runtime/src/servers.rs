//! `[servers.NAME]` tables of `weft.toml`: upstream MCP servers for tool
//! steps. A table has either `command` (+ `args`, `env`, `cwd`: a child
//! process over stdio) or `url` (+ `headers`: streamable HTTP), and may set
//! `timeout_ms`, `allow_tools` and `deny_tools`. `${VAR}` in any string is
//! replaced from the environment when the file is read; an unset variable
//! is an error naming the file and line. Expanded values live in memory
//! only: nothing here is written to the store or the event log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use weft_mcp_client::{ServerConfig, ToolFilter, Transport};

use crate::error::ConfigError;

/// One `[servers.NAME]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory (relative to the configuration file).
    pub cwd: Option<PathBuf>,
    /// Endpoint of a streamable-HTTP server.
    pub url: Option<String>,
    /// Sent with every HTTP request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Per-call timeout when a step sets none.
    pub timeout_ms: Option<u64>,
    /// Only these tools (exact names or `prefix*`).
    pub allow_tools: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default)]
    pub deny_tools: Vec<String>,
}

/// Turns the raw tables into server configurations: checks that each has
/// exactly one of `command` and `url`, expands `${VAR}`s (via `lookup`,
/// the environment in production), and resolves `cwd` against `base`.
/// `text` is the file's content, for line numbers.
pub fn resolve(
    path: &Path,
    text: &str,
    base: &Path,
    raw: &BTreeMap<String, RawServer>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, s) in raw {
        let invalid = |message: String, needle: &str| ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of(text, needle).or_else(|| line_of(text, &format!("[servers.{name}]"))).unwrap_or(1),
            message,
        };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') || name.contains("__") {
            return Err(invalid(
                format!("server name `{name}` may hold only letters, digits, `-` and `_` (and no `__`)"),
                &format!("[servers.{name}]"),
            ));
        }
        // Every value a `${VAR}` expanded to is a secret (see weft_mcp_client::redact).
        let secrets = std::cell::RefCell::new(weft_mcp_client::Secrets::none());
        let lookup_noting = |var: &str| {
            let v = lookup(var);
            if let Some(value) = &v {
                secrets.borrow_mut().add(value, &format!("${{{var}}}"));
            }
            v
        };
        let expand = |v: &str| -> Result<String, ConfigError> {
            expand_vars(v, &lookup_noting).map_err(|var| {
                invalid(
                    format!(
                        "[servers.{name}]: environment variable `{var}` is not set (referenced as `${{{var}}}`); set it or remove the reference"
                    ),
                    &format!("${{{var}}}"),
                )
            })
        };
        let transport = match (&s.command, &s.url) {
            (Some(command), None) => {
                if !s.headers.is_empty() {
                    return Err(invalid(
                        format!("[servers.{name}]: `headers` applies to `url` servers, not `command` ones"),
                        "headers",
                    ));
                }
                Transport::Stdio {
                    command: expand(command)?,
                    args: s.args.iter().map(|a| expand(a)).collect::<Result<_, _>>()?,
                    env: s.env.iter().map(|(k, v)| Ok((k.clone(), expand(v)?))).collect::<Result<_, ConfigError>>()?,
                    cwd: s.cwd.as_ref().map(|c| base.join(c)),
                }
            }
            (None, Some(url)) => {
                if !s.args.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                    return Err(invalid(
                        format!("[servers.{name}]: `args`, `env` and `cwd` apply to `command` servers, not `url` ones"),
                        &format!("[servers.{name}]"),
                    ));
                }
                let url = expand(url)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(
                        format!("[servers.{name}]: `url` must start with http:// or https://, got `{url}`"),
                        "url",
                    ));
                }
                Transport::Http {
                    url,
                    headers: s
                        .headers
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), expand(v)?)))
                        .collect::<Result<_, ConfigError>>()?,
                }
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    format!(
                        "[servers.{name}] sets both `command` and `url`; a server is either a program (stdio) or an endpoint (HTTP)"
                    ),
                    &format!("[servers.{name}]"),
                ));
            }
            (None, None) => {
                return Err(invalid(
                    format!(
                        "[servers.{name}] needs `command` (a program speaking MCP on stdio) or `url` (a streamable-HTTP endpoint)"
                    ),
                    &format!("[servers.{name}]"),
                ));
            }
        };
        if s.timeout_ms == Some(0) {
            return Err(invalid(format!("[servers.{name}]: `timeout_ms` must be at least 1"), "timeout_ms"));
        }
        let mut secrets = secrets.into_inner();
        if let Transport::Http { url, .. } = &transport {
            secrets.add_url_credentials(url);
        }
        out.push(ServerConfig {
            name: name.clone(),
            transport,
            timeout: s.timeout_ms.map(Duration::from_millis),
            tools: ToolFilter { allow: s.allow_tools.clone(), deny: s.deny_tools.clone() },
            secrets,
        });
    }
    Ok(out)
}

/// `v` with every `${NAME}` replaced; `Err(NAME)` for the first unset one.
/// `$${` is a literal `${`.
pub fn expand_vars(v: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(lit) = after.strip_prefix("${") {
            out.push_str("${");
            rest = lit;
        } else if let Some(inner) = after.strip_prefix('{')
            && let Some(end) = inner.find('}')
        {
            let var = &inner[..end];
            out.push_str(&lookup(var).ok_or_else(|| var.to_string())?);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The 1-based line of the first occurrence of `needle` in `text`.
pub(crate) fn line_of(text: &str, needle: &str) -> Option<usize> {
    text.find(needle).map(|at| text[..at].matches('\n').count() + 1)
}

/// One `[KIND.NAME]` table of weft.toml being checked (webhooks, agents):
/// each refusal names the file and the line of what it is about.
pub(crate) struct TableCheck<'a> {
    path: &'a Path,
    text: &'a str,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// `[webhooks.ops]`.
    pub table: String,
}

impl<'a> TableCheck<'a> {
    pub fn new(
        path: &'a Path,
        text: &'a str,
        kind: &str,
        name: &str,
        lookup: &'a dyn Fn(&str) -> Option<String>,
    ) -> Self {
        TableCheck { path, text, lookup, table: format!("[{kind}.{name}]") }
    }

    /// A refusal at the line of `needle` (else of the table).
    pub fn invalid(&self, message: String, needle: &str) -> ConfigError {
        let line = line_of(self.text, needle).or_else(|| line_of(self.text, &self.table)).unwrap_or(1);
        ConfigError::Invalid { path: self.path.to_path_buf(), line, message }
    }

    /// The table's name is letters, digits, `-` and `_` (`what`: `webhook`).
    pub fn name(&self, what: &str, name: &str) -> Result<(), ConfigError> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            let message = format!("{what} name `{name}` may hold only letters, digits, `-` and `_`");
            return Err(self.invalid(message, &self.table));
        }
        Ok(())
    }

    /// `field`'s value with its `${VAR}`s expanded.
    pub fn expand(&self, v: &str, field: &str) -> Result<String, ConfigError> {
        expand_vars(v, self.lookup).map_err(|var| {
            self.invalid(
                format!("{} {field}: environment variable `{var}` is not set (referenced as `${{{var}}}`)", self.table),
                &format!("${{{var}}}"),
            )
        })
    }

    /// `url` is a plain `http://` URL (this build has no TLS; `does`: what
    /// weft does with it, `sends webhooks`).
    pub fn http_url(&self, url: &str, does: &str) -> Result<(), ConfigError> {
        if url.starts_with("https://") {
            return Err(self.invalid(
                format!(
                    "{} url: this build {does} over plain HTTP only (it has no TLS); point `url` at an http:// \
                     address, such as a local TLS-terminating proxy",
                    self.table
                ),
                "url",
            ));
        }
        if !url.starts_with("http://") || url.len() <= "http://".len() {
            return Err(self.invalid(format!("{} url: `{url}` is not an http:// URL", self.table), "url"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        match var {
            "TOKEN" => Some("s3cret".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
        let file = crate::config::parse(Path::new("weft.toml"), text)?;
        resolve(Path::new("weft.toml"), text, Path::new("/cfg"), &file.servers, &env)
    }

    #[test]
    fn expands_variables_and_keeps_escapes() {
        assert_eq!(expand_vars("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cret");
        assert_eq!(expand_vars("${HOME}/x and $${TOKEN} and $5", &env).unwrap(), "/home/u/x and ${TOKEN} and $5");
        assert_eq!(expand_vars("${NOPE}", &env).unwrap_err(), "NOPE");
    }

    #[test]
    fn stdio_and_http_servers_resolve() {
        let text = r#"
[servers.everything]
command = "node"
args = ["server.js", "stdio"]
env = { LOG_LEVEL = "warn", KEY = "${TOKEN}" }
cwd = "peers"
timeout_ms = 5000
allow_tools = ["echo", "get-*"]

[servers.crm]
url = "http://127.0.0.1:8080/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
deny_tools = ["delete_user"]
"#;
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 2);
        let crm = &s[0];
        assert_eq!(crm.name, "crm");
        match &crm.transport {
            Transport::Http { url, headers } => {
                assert_eq!(url, "http://127.0.0.1:8080/mcp");
                assert_eq!(headers["Authorization"], "Bearer s3cret");
            }
            other => panic!("{other:?}"),
        }
        assert!(!crm.tools.allows("delete_user") && crm.tools.allows("get_user"));
        let ev = &s[1];
        match &ev.transport {
            Transport::Stdio { command, args, env, cwd } => {
                assert_eq!(command, "node");
                assert_eq!(args, &["server.js", "stdio"]);
                assert_eq!(env["KEY"], "s3cret");
                assert_eq!(cwd.as_deref(), Some(Path::new("/cfg/peers")));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ev.timeout, Some(Duration::from_secs(5)));
        assert!(ev.tools.allows("get-sum") && !ev.tools.allows("trigger-long-running-operation"));
    }

    #[test]
    fn mistakes_name_the_file_and_line() {
        let cases = [
            ("[limits]\nfuel = 1\n\n[servers.a]\ncommand = \"x\"\nargz = []\n", 6, "argz"),
            ("\n[servers.a]\nurl = \"http://x/mcp\"\nheaders = { A = \"${MISSING}\" }\n", 4, "MISSING"),
            ("\n\n[servers.b]\ncommand = \"x\"\nurl = \"http://x\"\n", 3, "both"),
            ("[servers.c]\ntimeout_ms = 10\n", 1, "needs `command`"),
            ("[servers.d]\nurl = \"ftp://x\"\n", 2, "http://"),
            ("[servers.e]\nurl = \"http://x\"\nargs = [\"a\"]\n", 1, "apply to `command`"),
            ("[servers.\"a__b\"]\ncommand = \"x\"\n", 1, "no `__`"),
        ];
        for (text, line, says) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(&format!("weft.toml:{line}:")), "{text:?} -> {e}");
            assert!(e.contains(says), "{text:?} -> {e}");
        }
    }
}
