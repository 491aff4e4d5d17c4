//! Helpers shared by the end-to-end tests: a fresh data directory per test
//! and a way to run the real `weft` binary against it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The repository's top folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("host/ has a parent").to_path_buf()
}

/// The `weft` binary under test: cargo's, or `$WEFT_TEST_BIN` when set (a
/// copy of it, safe from another build rewriting a shared target folder
/// while the tests run).
pub fn weft_bin() -> PathBuf {
    std::env::var_os("WEFT_TEST_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_weft")))
}

/// What one `weft` invocation did.
#[derive(Debug)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    /// stdout parsed as JSON; panics with both streams when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("stdout is not JSON ({e}):\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
        })
    }

    /// Asserts the exit code, showing both streams when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr);
        self
    }
}

/// A `weft` with its own data directory, removed when dropped; its runs
/// are in `<data dir>/weft.db` ([`Weft::new`]) or in a fresh PostgreSQL
/// database ([`Weft::postgres`]).
pub struct Weft {
    pub dir: tempfile::TempDir,
    /// `WEFT_DATABASE`, for a PostgreSQL store.
    pub database: Option<String>,
}

impl Weft {
    pub fn new() -> Self {
        Weft { dir: tempfile::tempdir().expect("temp dir"), database: None }
    }

    /// A `weft` whose store is a fresh database on the test PostgreSQL
    /// (see `tests/postgres`): many workers may share it.
    pub fn postgres() -> Self {
        Weft { dir: tempfile::tempdir().expect("temp dir"), database: Some(weft_test_postgres::database()) }
    }

    /// The data directory this instance uses.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A `weft` command with the data directory set and the working
    /// directory in the temp dir (so no stray `weft.toml` is picked up).
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(weft_bin());
        cmd.env("WEFT_DATA_DIR", self.data_dir())
            .env_remove("WEFT_CONFIG")
            // One compiled-artifact cache for the whole suite: big guests
            // (JS, Python) compile once, and sharing across processes is
            // itself part of what is tested.
            .env("WEFT_CACHE_DIR", repo_root().join("target/test-cache"))
            .env("NO_COLOR", "1")
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        match &self.database {
            Some(url) => cmd.env("WEFT_DATABASE", url),
            None => cmd.env_remove("WEFT_DATABASE"),
        };
        cmd
    }

    /// Runs `weft ARGS...` to completion.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Outcome {
        let out = self.cmd().args(args).output().expect("start weft");
        Outcome {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `weft step run GUEST --input INPUT [EXTRA...]`.
    pub fn step_run(&self, guest: &Path, input: &Value, extra: &[&str]) -> Outcome {
        let mut args: Vec<String> =
            vec!["step".into(), "run".into(), guest.display().to_string(), "--input".into(), input.to_string()];
        args.extend(extra.iter().map(|s| s.to_string()));
        self.run(&args)
    }

    /// Runs `weft ARGS...` to completion, or kills it and panics after
    /// `limit`: a hung run fails its test instead of hanging the suite.
    pub fn run_within<S: AsRef<std::ffi::OsStr>>(&self, limit: std::time::Duration, args: &[S]) -> Outcome {
        let mut child =
            self.cmd().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start weft");
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let read_out = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        let read_err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut s);
            s
        });
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("wait for weft") {
                break st;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = read_err.join().unwrap_or_default();
                panic!("`weft` did not finish in {limit:?} (hung?); stderr:\n{stderr}");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        Outcome {
            code: status.code().unwrap_or(-1),
            stdout: read_out.join().unwrap_or_default(),
            stderr: read_err.join().unwrap_or_default(),
        }
    }

    /// `weft runs show ID --json`, parsed.
    pub fn show(&self, id: &str) -> Value {
        let out = self.run(&["runs", "show", id, "--json"]);
        out.expect_code(0);
        out.json()
    }

    /// `weft runs list --json`, parsed.
    pub fn runs(&self) -> Vec<Value> {
        let out = self.run(&["runs", "list", "--json"]);
        out.expect_code(0);
        out.json().as_array().expect("an array").clone()
    }

    /// Writes `def` as the file `name` in the temp dir; its path.
    pub fn write_file(&self, name: &str, def: &Value) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, serde_json::to_string_pretty(def).unwrap()).unwrap();
        path
    }

    /// Writes `def` as `NAME.json` in the temp dir; its path.
    pub fn write_def(&self, name: &str, def: &Value) -> PathBuf {
        let file = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_string_pretty(def).unwrap()).unwrap();
        file
    }
}

/// Step `name` of a run object (`runs show --json`).
pub fn step<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no step {name}: {run}"))
}

/// The resident memory of process `pid`, in KiB (Linux).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap().trim().trim_end_matches(" kB").parse().unwrap()
}

/// Kills (and reaps) a child when the test ends, passing or not: a test
/// that panics leaves no process running (a SIGSTOPped one dies of
/// SIGKILL too). Derefs to the child.
pub struct KillOnDrop(pub std::process::Child);

impl std::ops::Deref for KillOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A JSON object's map (MCP tool arguments).
pub fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

/// A test run on both stores: `on_both_stores! { fn NAME(w) { ... } }`
/// makes `NAME::sqlite` (a [`Weft::new`]) and `NAME::postgres` (a
/// [`Weft::postgres`]), the same body given `w`.
macro_rules! on_both_stores {
    ($(#[$m:meta])* fn $name:ident($w:ident) $body:block) => {
        $(#[$m])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn sqlite() {
                let $w = $crate::common::Weft::new();
                $body
            }
            #[test]
            fn postgres() {
                let $w = $crate::common::Weft::postgres();
                $body
            }
        }
    };
}
