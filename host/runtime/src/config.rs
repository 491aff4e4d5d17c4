//! `weft.toml`: where weft keeps its data and the default limits of code
//! steps. Found at `--config FILE`, else `$WEFT_CONFIG`, else `./weft.toml`;
//! no file is needed at all. Unknown keys are errors naming the file and
//! line, so a typo never silently changes behaviour.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use weft_sandbox::Limits;

/// The parsed configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Store, plugins and compiled cache. Relative to the config file.
    pub data_dir: Option<PathBuf>,
    /// `sqlite:PATH` (the default is `sqlite:<data_dir>/weft.db`) or
    /// `postgres://user@host/db` (many workers); `$WEFT_DATABASE` overrides.
    pub database: Option<String>,
    /// `normal` or `full`.
    pub durability: Option<Durability>,
    /// How long finished runs are kept (with their events and artifacts):
    /// `30d` by default, any `humantime` span (`12h`, `2w`), or `off`.
    pub retention: Option<Retention>,
    /// `[workers]`: many workers on one PostgreSQL database.
    #[serde(default)]
    pub workers: WorkersConfig,
    /// Defaults for code and tool steps.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Upstream MCP servers (used by tool steps).
    #[serde(default)]
    pub servers: BTreeMap<String, crate::servers::RawServer>,
    /// Where guests may come from.
    #[serde(default)]
    pub guests: GuestsConfig,
    /// `[webhooks.NAME]`: where a definition's `notify` may send
    /// (docs/notifications.md).
    #[serde(default)]
    pub webhooks: BTreeMap<String, crate::webhooks::RawWebhook>,
    /// `[notifications]`: how deliveries are retried.
    #[serde(default)]
    pub notifications: crate::webhooks::NotificationsConfig,
    /// `[agents.NAME]`: remote A2A agents that agent steps may call
    /// (docs/a2a.md).
    #[serde(default)]
    pub agents: BTreeMap<String, crate::a2a::RawAgent>,
    /// `[a2a]`: the A2A endpoint's settings (docs/a2a.md).
    #[serde(default)]
    pub a2a: crate::a2a::A2aConfig,
    /// `[telemetry]`: logs, traces (docs/observability.md).
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
}

/// `[guests]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestsConfig {
    /// Folders whose files a definition sent by a client (over MCP) may
    /// name as `code.path`; none by default: clients name plugins and
    /// digests. The CLI's own definition files are not limited.
    #[serde(default)]
    pub allow_paths: Vec<PathBuf>,
}

/// `[workers]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkersConfig {
    /// A worker's lease, in ms (default 5000): renewed every third of it;
    /// a worker silent longer loses its runs to another within about a
    /// second more.
    pub lease_ms: Option<u64>,
}

/// `retention`: how long finished runs are kept, or for ever (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<Duration>);

/// Finished runs are kept 30 days unless `retention` says otherwise.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

impl Default for Retention {
    fn default() -> Self {
        Retention(Some(DEFAULT_RETENTION))
    }
}

impl std::str::FromStr for Retention {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("off") {
            return Ok(Retention(None));
        }
        let d = humantime::parse_duration(s.trim())
            .map_err(|e| format!("{s:?} is not a span of time ({e}): write e.g. \"30d\", \"12h\" or \"off\""))?;
        if d < Duration::from_secs(1) {
            return Err(format!("{s:?} is shorter than a second: keep runs at least that long, or write \"off\""));
        }
        Ok(Retention(Some(d)))
    }
}

impl<'de> Deserialize<'de> for Retention {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How hard commits are pushed to disk (`durability = "normal" | "full"`).
pub use weft_engine::store::Durability;

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Fuel per code-step invocation.
    pub fuel: Option<u64>,
    /// Memory cap per guest, MiB.
    pub memory_mb: Option<u64>,
    /// Default per-attempt timeout of code steps.
    pub code_timeout_ms: Option<u64>,
    /// Default per-attempt timeout of tool steps.
    pub tool_timeout_ms: Option<u64>,
    /// A step interrupted this many times in a row (its process died, the
    /// host panicked) fails as `crashed` (default 3).
    pub max_interruptions: Option<u32>,
    /// Bytes of logs and progress one run may add to its event log
    /// (default 16 MiB); past it one `log.truncated` event says so.
    pub max_run_log_bytes: Option<u64>,
    /// Signals a live run may hold for steps that do not wait yet
    /// (default 100); each is taken when its wait starts.
    pub max_queued_signals: Option<usize>,
    /// How long a queued signal, or an event emitted before the wait it is
    /// for started, stays good for that wait (default 86,400,000: a day).
    pub early_ttl_ms: Option<u64>,
    /// Events emitted before a wait started that the wait looks at when it
    /// starts, oldest first (default 100).
    pub max_early_events: Option<usize>,
    /// A run's input, a signal's or an event's data (default 4 MiB).
    pub max_input_bytes: Option<usize>,
    /// A step's stored output: a guest's result, a tool's, a transform's
    /// (default 16 MiB).
    pub max_output_bytes: Option<usize>,
    /// A definition, as JSON (default 1 MiB).
    pub max_definition_bytes: Option<usize>,
    /// Guests computing at once (default: the machine's cores). More wait
    /// in priority order; their timeouts start when they do. Guests parked
    /// in a host call (a sleep) and tool steps take none.
    pub max_running_guests: Option<usize>,
    /// MiB of memory all running guests together may reserve, each its
    /// `memory_mb` (default: half the machine's memory). A guest that does
    /// not fit waits.
    pub guest_memory_budget_mb: Option<u64>,
}

pub use crate::error::ConfigError;

/// Everything a command needs to know about where things are.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The compiled-artifact cache.
    pub cache_dir: PathBuf,
    /// The configuration file that was read, if any.
    pub config_path: Option<PathBuf>,
    /// The parsed file (defaults when there is none).
    pub file: ConfigFileShared,
    /// `[servers.*]`, checked and with `${VAR}`s expanded (memory only).
    pub servers: std::sync::Arc<Vec<weft_mcp_client::ServerConfig>>,
    /// `[webhooks.*]`, checked and with `${VAR}`s expanded (memory only).
    pub webhooks: std::sync::Arc<Vec<crate::webhooks::Webhook>>,
    /// `[agents.*]`, checked and with `${VAR}`s expanded (memory only).
    pub agents: std::sync::Arc<Vec<crate::a2a::RemoteAgent>>,
}

/// The parsed file, shareable.
pub type ConfigFileShared = std::sync::Arc<ConfigFile>;

impl Settings {
    /// The defaults, with no configuration file, data under `dir/data` and
    /// compiled guests under `dir/cache` (benches, tests, tools that own a
    /// temporary folder).
    pub fn in_dir(dir: &Path) -> Settings {
        Settings {
            data_dir: dir.join("data"),
            cache_dir: dir.join("cache"),
            config_path: None,
            file: std::sync::Arc::default(),
            servers: std::sync::Arc::default(),
            webhooks: std::sync::Arc::default(),
            agents: std::sync::Arc::default(),
        }
    }

    /// Resolves settings: `data_dir_flag` > `$WEFT_DATA_DIR` > the file's
    /// `data_dir` > `.weft`; the cache is `$WEFT_CACHE_DIR` or
    /// `<data_dir>/cache`.
    pub fn load(config_flag: Option<&Path>, data_dir_flag: Option<&Path>) -> Result<Settings, ConfigError> {
        let env_config = std::env::var_os("WEFT_CONFIG").map(PathBuf::from);
        let candidate = config_flag.map(Path::to_path_buf).or(env_config);
        let (config_path, file, text) = match candidate {
            Some(p) => {
                let (f, t) = read_file(&p)?;
                (Some(p), f, t)
            }
            None if Path::new("weft.toml").exists() => {
                let p = PathBuf::from("weft.toml");
                let (f, t) = read_file(&p)?;
                (Some(p), f, t)
            }
            None => (None, ConfigFile::default(), String::new()),
        };
        let base = config_path.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        let servers = crate::servers::resolve(
            config_path.as_deref().unwrap_or(Path::new("weft.toml")),
            &text,
            &base,
            &file.servers,
            &|v| std::env::var(v).ok(),
        )?;
        let webhooks = crate::webhooks::resolve(
            config_path.as_deref().unwrap_or(Path::new("weft.toml")),
            &text,
            &file.webhooks,
            &|v| std::env::var(v).ok(),
        )?;
        let agents = crate::a2a::resolve_agents(
            config_path.as_deref().unwrap_or(Path::new("weft.toml")),
            &text,
            &file.agents,
            &|v| std::env::var(v).ok(),
        )?;
        let data_dir = data_dir_flag
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("WEFT_DATA_DIR").map(PathBuf::from))
            .or_else(|| file.data_dir.as_ref().map(|d| base.join(d)))
            .unwrap_or_else(|| PathBuf::from(".weft"));
        let cache_dir = std::env::var_os("WEFT_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| data_dir.join("cache"));
        Ok(Settings {
            data_dir,
            cache_dir,
            config_path,
            file: std::sync::Arc::new(file),
            servers: std::sync::Arc::new(servers),
            webhooks: std::sync::Arc::new(webhooks),
            agents: std::sync::Arc::new(agents),
        })
    }

    /// The upstream MCP servers, none started yet.
    pub fn upstreams(&self) -> weft_mcp_client::Upstreams {
        weft_mcp_client::Upstreams::new(self.servers.iter().cloned())
    }

    /// Default limits of a code step, from `[limits]`.
    pub fn code_limits(&self) -> Limits {
        let mut l = Limits::default();
        let c = &self.file.limits;
        if let Some(f) = c.fuel {
            l.fuel = Some(f);
        }
        if let Some(m) = c.memory_mb {
            l.memory_bytes = (m as usize) << 20;
        }
        if let Some(t) = c.code_timeout_ms {
            l.timeout = Duration::from_millis(t);
        }
        l.output_bytes = self.size_limits().max_output_bytes;
        l
    }

    /// The caps of `[limits]` (defaults where unset).
    pub fn size_limits(&self) -> weft_engine::size_limits::SizeLimits {
        let d = weft_engine::size_limits::SizeLimits::default();
        let c = &self.file.limits;
        weft_engine::size_limits::SizeLimits {
            max_input_bytes: c.max_input_bytes.unwrap_or(d.max_input_bytes),
            max_output_bytes: c.max_output_bytes.unwrap_or(d.max_output_bytes),
            max_definition_bytes: c.max_definition_bytes.unwrap_or(d.max_definition_bytes),
        }
    }
}

fn read_file(path: &Path) -> Result<(ConfigFile, String), ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    Ok((parse(path, &text)?, text))
}

/// Parses `text` (the content of `path`), mapping errors to file:line.
pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1).unwrap_or(1);
        ConfigError::Invalid { path: path.to_path_buf(), line, message: e.message().to_string() }
    })?;
    check_limits(&file.limits).map_err(|(key, message)| {
        // The line of `key = ...` (the first, as `[limits]` keys are unique).
        let line = text.lines().position(|l| l.trim_start().starts_with(key)).map_or(1, |n| n + 1);
        ConfigError::Invalid { path: path.to_path_buf(), line, message }
    })?;
    Ok(file)
}

/// `[limits]` numbers in the ranges the engine can use (the same as a
/// definition's: durations at most a year, memory at most 4096 MiB, caps
/// and fuel at least 1).
fn check_limits(l: &LimitsConfig) -> Result<(), (&'static str, String)> {
    use weft_model::definition::{MAX_DURATION_MS, MAX_MEMORY_MB};
    let range = |key: &'static str, v: Option<u64>, max: u64| match v {
        Some(n) if n < 1 || n > max => {
            let range = if max == u64::MAX { String::from("≥ 1") } else { format!("from 1 to {max}") };
            Err((key, format!("`{key}` must be an integer {range}, got {n}")))
        }
        _ => Ok(()),
    };
    range("fuel", l.fuel, u64::MAX)?;
    range("memory_mb", l.memory_mb, MAX_MEMORY_MB)?;
    range("code_timeout_ms", l.code_timeout_ms, MAX_DURATION_MS)?;
    range("tool_timeout_ms", l.tool_timeout_ms, MAX_DURATION_MS)?;
    range("max_input_bytes", l.max_input_bytes.map(|n| n as u64), u64::MAX)?;
    range("max_output_bytes", l.max_output_bytes.map(|n| n as u64), u64::MAX)?;
    range("max_definition_bytes", l.max_definition_bytes.map(|n| n as u64), u64::MAX)?;
    range("max_running_guests", l.max_running_guests.map(|n| n as u64), 4096)?;
    range("guest_memory_budget_mb", l.guest_memory_budget_mb, u64::MAX)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_name_the_file_and_line() {
        let text = "data_dir = \"x\"\n[limits]\nfuel = 5\nfule = 6\n";
        let err = parse(Path::new("weft.toml"), text).unwrap_err().to_string();
        assert!(err.starts_with("weft.toml:4:"), "{err}");
        assert!(err.contains("fule"), "{err}");
    }

    #[test]
    fn limits_out_of_range_name_the_key_and_line() {
        for (text, want) in [
            ("[limits]\nmemory_mb = 0\n", "weft.toml:2: `memory_mb` must be an integer from 1 to 4096, got 0"),
            ("[limits]\nfuel = 5\n  code_timeout_ms = 9223372036854775807\n", "weft.toml:3: `code_timeout_ms`"),
            ("[limits]\ntool_timeout_ms = 0\n", "weft.toml:2: `tool_timeout_ms`"),
            ("[limits]\nmax_input_bytes = 0\n", "weft.toml:2: `max_input_bytes` must be an integer ≥ 1, got 0"),
            ("[limits]\nmax_output_bytes = 0\n", "`max_output_bytes`"),
            ("[limits]\nmax_definition_bytes = 0\n", "`max_definition_bytes`"),
        ] {
            let err = parse(Path::new("weft.toml"), text).unwrap_err().to_string();
            assert!(err.starts_with("weft.toml:") && err.contains(want), "{err}");
        }
        let ok = "[limits]\nmemory_mb = 4096\ncode_timeout_ms = 31622400000\nmax_input_bytes = 1\n";
        assert!(parse(Path::new("weft.toml"), ok).is_ok());
    }

    #[test]
    fn the_spec_example_parses() {
        let text = r#"
data_dir = ".weft"
database = "sqlite:.weft/weft.db"
durability = "normal"
retention = "30d"
[limits]
fuel = 1_000_000_000
memory_mb = 64
code_timeout_ms = 10000
tool_timeout_ms = 30000
[servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
"#;
        let c = parse(Path::new("weft.toml"), text).unwrap();
        assert_eq!(c.limits.memory_mb, Some(64));
        assert_eq!(c.durability, Some(Durability::Normal));
        assert!(c.servers.contains_key("everything"));
        assert_eq!(c.retention, Some(Retention(Some(DEFAULT_RETENTION))));
    }

    #[test]
    fn retention_is_a_span_or_off_and_a_bad_one_names_its_line() {
        let p = |t: &str| parse(Path::new("weft.toml"), t);
        assert_eq!(p("retention = \"off\"\n").unwrap().retention, Some(Retention(None)));
        assert_eq!(p("retention = \"12h\"\n").unwrap().retention, Some(Retention(Some(Duration::from_secs(43_200)))));
        assert_eq!(Retention::default(), Retention(Some(DEFAULT_RETENTION)));
        for (bad, want) in [("soon", "not a span of time"), ("500ms", "shorter than a second")] {
            let e = p(&format!("durability = \"normal\"\nretention = \"{bad}\"\n")).unwrap_err().to_string();
            assert!(e.starts_with("weft.toml:2:") && e.contains(want), "{e}");
        }
        let e = p("[workers]\nlease = 5\n").unwrap_err().to_string();
        assert!(e.contains("lease"), "{e}");
        assert_eq!(p("[workers]\nlease_ms = 2000\n").unwrap().workers.lease_ms, Some(2000));
    }
}
