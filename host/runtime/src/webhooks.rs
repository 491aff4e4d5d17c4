//! `[webhooks.NAME]` and `[notifications]` of `weft.toml`: the only
//! addresses a definition's `notify` can send to (definitions name a
//! webhook; they never carry a URL), their Standard Webhooks secrets, and
//! how deliveries are retried (docs/notifications.md). `${VAR}` in `url`
//! and `secret` is replaced from the environment when the file is read.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ConfigError;
use crate::servers::TableCheck;

/// One `[webhooks.NAME]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    /// `http://host[:port]/path`.
    pub url: String,
    /// A Standard Webhooks secret: `whsec_` and base64 (`${VAR}` allowed).
    pub secret: String,
    /// How long one try may take (default: `[notifications] timeout_ms`).
    pub timeout_ms: Option<u64>,
}

/// `[notifications]`: how a delivery is retried when its definition does
/// not say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// Tries in all (default 8).
    pub max_attempts: Option<u32>,
    /// The wait after the first failed try (default 1000 ms); it doubles.
    pub initial_delay_ms: Option<u64>,
    /// The longest wait between tries (default 300000 ms).
    pub max_delay_ms: Option<u64>,
    /// How long one try may take (default 10000 ms).
    pub timeout_ms: Option<u64>,
}

/// The default time a try may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl NotificationsConfig {
    /// The engine's default retry policy of deliveries.
    pub fn retry(&self, base: weft_engine::delivery::DeliveryRetry) -> weft_engine::delivery::DeliveryRetry {
        weft_engine::delivery::DeliveryRetry {
            max_attempts: self.max_attempts.unwrap_or(base.max_attempts).max(1),
            backoff_ms: self.initial_delay_ms.unwrap_or(base.backoff_ms),
            max_backoff_ms: self.max_delay_ms.unwrap_or(base.max_backoff_ms),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout_ms.map(Duration::from_millis).unwrap_or(DEFAULT_TIMEOUT)
    }
}

/// A webhook, checked, with its `${VAR}`s expanded (memory only).
#[derive(Clone)]
pub struct Webhook {
    pub name: String,
    pub url: String,
    /// The Standard Webhooks secret (never logged).
    pub secret: String,
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").field("name", &self.name).field("url", &self.url).finish_non_exhaustive()
    }
}

/// Checks the raw tables: a name of letters, digits, `-` and `_`; an
/// `http://` URL; a secret the Standard Webhooks library accepts.
pub fn resolve(
    path: &Path,
    text: &str,
    raw: &BTreeMap<String, RawWebhook>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Webhook>, ConfigError> {
    let mut out = vec![];
    for (name, w) in raw {
        let check = TableCheck::new(path, text, "webhooks", name, lookup);
        check.name("webhook", name)?;
        let url = check.expand(&w.url, "url")?;
        check.http_url(&url, "sends webhooks")?;
        let secret = check.expand(&w.secret, "secret")?;
        if standardwebhooks::Webhook::new(&secret).is_err() {
            return Err(check.invalid(
                format!("{} secret: not a Standard Webhooks secret (`whsec_` followed by base64)", check.table),
                "secret",
            ));
        }
        out.push(Webhook { name: name.clone(), url, secret, timeout: w.timeout_ms.map(Duration::from_millis) });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(url: &str, secret: &str) -> BTreeMap<String, RawWebhook> {
        let w = RawWebhook { url: url.into(), secret: secret.into(), timeout_ms: None };
        BTreeMap::from([("ops".to_string(), w)])
    }

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn a_webhook_is_checked_and_its_variables_expanded() {
        let env = |v: &str| (v == "HOOK_SECRET").then(|| SECRET.to_string());
        let text = "[webhooks.ops]\nurl = \"http://127.0.0.1:9/h\"\nsecret = \"${HOOK_SECRET}\"\n";
        let ok = resolve(Path::new("weft.toml"), text, &raw("http://127.0.0.1:9/h", "${HOOK_SECRET}"), &env).unwrap();
        assert_eq!(ok[0].secret, SECRET);
        assert!(!format!("{:?}", ok[0]).contains("whsec_"), "the secret is never printed");
        let err = |url: &str, secret: &str| {
            resolve(Path::new("weft.toml"), text, &raw(url, secret), &env).unwrap_err().to_string()
        };
        assert!(err("https://x/h", SECRET).contains("plain HTTP only"));
        assert!(err("ftp://x", SECRET).contains("not an http:// URL"));
        assert!(
            err("http://x/h", "not-a-secret").contains("weft.toml:3: [webhooks.ops] secret"),
            "{}",
            err("http://x/h", "x")
        );
        assert!(err("http://x/h", "${NOPE}").contains("`NOPE` is not set"));
    }
}
