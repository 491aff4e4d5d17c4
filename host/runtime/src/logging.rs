//! weft's log lines go to stderr through one writer that replaces every
//! secret of the configuration (the values `${VAR}`s expanded to, URL
//! credentials: `weft_mcp_client::redact`) — including in what libraries log
//! (rmcp logs the failing request's URL, query string and all). The
//! subscriber that writes through it is set up by [`crate::telemetry::init`].

use std::io::Write;
use std::sync::RwLock;

use weft_mcp_client::Secrets;

static SECRETS: RwLock<Vec<Secrets>> = RwLock::new(Vec::new());

/// Redacts these secrets from every log line from now on.
pub fn add_secrets(s: Secrets) {
    SECRETS.write().unwrap_or_else(|p| p.into_inner()).push(s);
}

/// `text` with every known secret replaced.
pub fn redact(text: &str) -> String {
    let all = SECRETS.read().unwrap_or_else(|p| p.into_inner());
    all.iter().fold(text.to_string(), |t, s| s.redact(&t))
}

/// A `MakeWriter` for `tracing_subscriber::fmt`: each log line is kept
/// whole, redacted, then written to stderr.
pub struct Redacting;

/// One log line on its way.
pub struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = redact(&String::from_utf8_lossy(&self.0));
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Redacting {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn log_lines_lose_their_secrets() {
        let mut s = weft_mcp_client::Secrets::none();
        s.add("hunter2-xyz", "${PW}");
        super::add_secrets(s);
        assert_eq!(super::redact("url?pw=hunter2-xyz"), "url?pw=${PW}");
    }
}
