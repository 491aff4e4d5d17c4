//! Live progress of a run on stderr, drawn from snapshots of the stored run
//! (so a run executed by this process and one executed by a worker look
//! the same): on a terminal, one line per step with its state, attempt and
//! elapsed time (indicatif); otherwise a plain line each time a step's state
//! or attempt changes.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;
use weft_engine::clock::system_now_ms as now_ms;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use weft_engine::store::StepRecord;
use weft_engine::{RunRecord, RunState, StepState};

/// Renders a run's progress.
pub struct Progress {
    mode: Mode,
    /// (state, attempts) last shown per step.
    seen: HashMap<String, (StepState, u32)>,
    run_state: Option<RunState>,
}

enum Mode {
    Tty { multi: MultiProgress, bars: HashMap<String, ProgressBar>, width: usize },
    Plain,
    Quiet,
}

/// `850 ms`, `1.2 s`, `3 min 4 s`.
pub fn human_ms(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// How long a step has run (or ran).
pub fn step_elapsed(s: &StepRecord) -> Option<i64> {
    let start = s.started_at?;
    Some(s.ended_at.unwrap_or_else(now_ms) - start)
}

impl Progress {
    /// A renderer: bars when stderr is a terminal, plain lines otherwise,
    /// nothing when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Tty {
                multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
                bars: HashMap::new(),
                width: 0,
            }
        } else {
            Mode::Plain
        };
        Progress { mode, seen: HashMap::new(), run_state: None }
    }

    /// Shows what changed since the last snapshot.
    pub fn update(&mut self, rec: &RunRecord) {
        if self.run_state.is_none() {
            self.run_state = Some(rec.state);
            match self.mode {
                Mode::Plain => eprintln!("run {} ({}{}): {}", rec.id, rec.template, version(rec), rec.state),
                Mode::Tty { .. } => eprintln!("run {} ({}{})", rec.id, rec.template, version(rec)),
                Mode::Quiet => {}
            }
        }
        self.steps(rec);
        if self.run_state != Some(rec.state) {
            self.run_state = Some(rec.state);
            if let Mode::Plain = self.mode {
                eprintln!("run {}: {}", rec.id, rec.state);
            }
        }
    }

    fn steps(&mut self, rec: &RunRecord) {
        match &mut self.mode {
            Mode::Quiet => {}
            Mode::Plain => {
                for s in &rec.steps {
                    let key = (s.state, s.attempts);
                    if s.state == StepState::Pending || self.seen.get(&s.name) == Some(&key) {
                        continue;
                    }
                    self.seen.insert(s.name.clone(), key);
                    eprintln!("  step {}: {}", s.name, describe(s));
                }
            }
            Mode::Tty { multi, bars, width } => {
                *width = (*width).max(rec.steps.iter().map(|s| s.name.len()).max().unwrap_or(0));
                for s in &rec.steps {
                    let bar = bars.entry(s.name.clone()).or_insert_with(|| {
                        let b = multi.add(ProgressBar::new_spinner());
                        b.set_style(ProgressStyle::with_template("{spinner} {wide_msg}").expect("a valid template"));
                        b.enable_steady_tick(Duration::from_millis(100));
                        b
                    });
                    if bar.is_finished() {
                        continue;
                    }
                    let line = format!("{:<w$}  {}", s.name, describe(s), w = *width);
                    if s.state.is_terminal() {
                        let mark = match s.state {
                            StepState::Succeeded => "✔",
                            StepState::Skipped => "-",
                            _ => "✘",
                        };
                        bar.set_style(ProgressStyle::with_template("{wide_msg}").expect("a valid template"));
                        bar.finish_with_message(format!("{mark} {line}"));
                    } else {
                        bar.set_message(line);
                    }
                }
            }
        }
    }

    /// The last snapshot: every bar stops, and a closing line.
    pub fn finish(&mut self, rec: &RunRecord) {
        self.update(rec);
        if let Mode::Tty { bars, .. } = &mut self.mode {
            for b in bars.values() {
                if !b.is_finished() {
                    b.abandon();
                }
            }
        }
        if !matches!(self.mode, Mode::Quiet) {
            let took = human_ms(rec.updated_at - rec.created_at);
            match &rec.error {
                Some(e) => eprintln!("run {} {} after {took}: {e}", rec.id, rec.state),
                None => eprintln!("run {} {} in {took}", rec.id, rec.state),
            }
        }
    }
}

fn version(rec: &RunRecord) -> String {
    rec.version.map(|v| format!(" v{v}")).unwrap_or_default()
}

/// `running (attempt 2, 1.2 s)`, `succeeded (1 attempt, 12 ms)`,
/// `failed after 3 attempts: timeout: ...`.
pub fn describe(s: &StepRecord) -> String {
    let elapsed = step_elapsed(s).map(human_ms);
    let attempts = match s.attempts {
        0 => String::new(),
        1 => "1 attempt".to_string(),
        n => format!("{n} attempts"),
    };
    match s.state {
        StepState::Pending | StepState::Skipped | StepState::Waiting => s.state.to_string(),
        StepState::Running => {
            format!("running (attempt {}{})", s.attempts.max(1), elapsed.map(|e| format!(", {e}")).unwrap_or_default())
        }
        StepState::Retrying => {
            let err = s.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
            // An interrupted attempt runs again as itself: it did not fail.
            if s.error.as_ref().is_some_and(|e| e.kind == weft_engine::ErrorKind::Interrupted) {
                return format!("interrupted (attempt {} runs again){err}", s.attempts.max(1));
            }
            let when = s.next_attempt_at.map(|t| format!(", next in {}", human_ms(t - now_ms()))).unwrap_or_default();
            format!("retrying (attempt {} failed{when}){err}", s.attempts)
        }
        StepState::Succeeded => {
            let mut parts = vec![];
            if !attempts.is_empty() {
                parts.push(attempts);
            }
            if let Some(e) = elapsed {
                parts.push(e);
            }
            if parts.is_empty() { "succeeded".into() } else { format!("succeeded ({})", parts.join(", ")) }
        }
        StepState::Failed | StepState::Canceled => {
            let after = if attempts.is_empty() { String::new() } else { format!(" after {attempts}") };
            let err = s.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default();
            format!("{}{after}{err}", s.state)
        }
    }
}
