//! What a guest said while it ran: log lines, progress messages and
//! artifacts, collected per invocation under caps so a chatty guest cannot
//! exhaust the host. An optional [`Observer`] sees each item live (the
//! engine turns them into run events).

use serde_json::Value;
use std::sync::Arc;

/// Log levels, as in the WIT `host.level` enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal information; stdout/stderr lines of guests land here.
    Info,
    /// Something looks wrong.
    Warn,
    /// Something failed.
    Error,
}

impl Level {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Trace => "trace",
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its level.
    pub level: Level,
    /// Its text.
    pub message: String,
}

/// A named blob a guest produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Its name.
    pub name: String,
    /// Its media type.
    pub mime: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// Receives what a guest reports as it happens. Called on the invoking
/// thread; keep it quick.
pub trait Observer: Send + Sync {
    /// A log line was accepted.
    fn log(&self, _line: &LogLine) {}
    /// A progress message, with its data if the guest gave any.
    fn progress(&self, _message: &str, _data: Option<&Value>) {}
    /// An artifact.
    fn artifact(&self, _artifact: &Artifact) {}
    /// The invocation waits for its CPU slot and memory (see `gate`).
    fn queued(&self) {}
    /// It got them after `waited`; its limits run from now.
    fn admitted(&self, _waited: std::time::Duration) {}
}

/// The largest progress data a guest may attach to one update, as JSON
/// text (it also counts against the invocation's log budget).
pub const PROGRESS_DATA_CAP: usize = 16 * 1024;

/// A status update from a guest: a message, and data if it gave any.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub message: String,
    pub data: Option<Value>,
}

/// The marker appended once when logs are cut.
pub const TRUNCATED_MARKER: &str = "[weft: log output truncated at the per-invocation cap]";

/// Everything a guest reported in one invocation.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Log lines, in order (including captured stdout/stderr lines).
    pub logs: Vec<LogLine>,
    /// Progress updates, in order.
    pub progress: Vec<ProgressUpdate>,
    /// Artifacts, in order.
    pub artifacts: Vec<Artifact>,
    /// True when log lines were dropped because of the cap.
    pub logs_truncated: bool,
}

/// Collects a [`Report`] under caps.
pub(crate) struct Collector {
    pub(crate) report: Report,
    log_bytes: usize,
    log_cap: usize,
    artifact_bytes: usize,
    artifact_cap: usize,
    observer: Option<Arc<dyn Observer>>,
    /// Fuel the guest used, set once the call ended.
    pub(crate) fuel_used: Option<u64>,
    /// The largest linear memory the guest grew to, in bytes.
    pub(crate) memory_peak: Option<u64>,
}

impl Collector {
    pub(crate) fn new(log_cap: usize, artifact_cap: usize, observer: Option<Arc<dyn Observer>>) -> Self {
        Collector {
            report: Report::default(),
            log_bytes: 0,
            log_cap,
            artifact_bytes: 0,
            artifact_cap,
            observer,
            fuel_used: None,
            memory_peak: None,
        }
    }

    pub(crate) fn log(&mut self, level: Level, message: String) {
        if self.report.logs_truncated {
            return;
        }
        if self.log_bytes + message.len() > self.log_cap {
            self.report.logs_truncated = true;
            let marker = LogLine { level: Level::Warn, message: TRUNCATED_MARKER.to_string() };
            if let Some(o) = &self.observer {
                o.log(&marker);
            }
            self.report.logs.push(marker);
            return;
        }
        self.log_bytes += message.len();
        let line = LogLine { level, message };
        if let Some(o) = &self.observer {
            o.log(&line);
        }
        self.report.logs.push(line);
    }

    pub(crate) fn progress(&mut self, message: String, data: Option<Value>) {
        // Progress counts against the log budget: it is text from the guest.
        let size = message.len() + data.as_ref().map_or(0, |d| d.to_string().len());
        if self.log_bytes + size > self.log_cap {
            self.log(Level::Info, message);
            return;
        }
        self.log_bytes += size;
        if let Some(o) = &self.observer {
            o.progress(&message, data.as_ref());
        }
        self.report.progress.push(ProgressUpdate { message, data });
    }

    /// Progress with data given as JSON text (the `progress-data` host
    /// call): data that is not JSON, or over [`PROGRESS_DATA_CAP`], is
    /// left out, and a warning line says why.
    pub(crate) fn progress_text(&mut self, message: String, data: &str) {
        if data.len() > PROGRESS_DATA_CAP {
            let why = format!("progress data of {} bytes left out: over {PROGRESS_DATA_CAP} bytes", data.len());
            self.log(Level::Warn, why);
            return self.progress(message, None);
        }
        match serde_json::from_str::<Value>(data) {
            Ok(v) => self.progress(message, Some(v)),
            Err(e) => {
                self.log(Level::Warn, format!("progress data left out: it is not JSON ({e})"));
                self.progress(message, None)
            }
        }
    }

    pub(crate) fn artifact(&mut self, name: String, mime: String, data: Vec<u8>) {
        if self.artifact_bytes + data.len() > self.artifact_cap {
            self.log(
                Level::Warn,
                format!("[weft: artifact `{name}` ({} bytes) dropped: over the artifact cap]", data.len()),
            );
            return;
        }
        self.artifact_bytes += data.len();
        let a = Artifact { name, mime, data };
        if let Some(o) = &self.observer {
            o.artifact(&a);
        }
        self.report.artifacts.push(a);
    }

    /// Turns captured stdout/stderr text into log lines.
    pub(crate) fn log_text(&mut self, level: Level, text: &[u8]) {
        for line in String::from_utf8_lossy(text).lines() {
            if !line.is_empty() {
                self.log(level, line.to_string());
            }
        }
    }
}
