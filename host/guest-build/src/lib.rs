//! Compile weft guests (plugins, test guests) to wasm from a build script.
//!
//! ```no_run
//! // build.rs of a crate that embeds guests
//! let built = weft_guest_build::build_guests(&["weft-plugin-json-select"], "wasm32-wasip2");
//! for (package, wasm) in built {
//!     println!("cargo:warning={package} -> {}", wasm.display());
//! }
//! ```
//!
//! [`build_guests`] runs a nested `cargo build --profile guest --target <t>
//! -p <pkg>...` of this workspace with its own target directory,
//! `<target>/guests` (`<target>` is the outer build's target directory,
//! `CARGO_TARGET_DIR` when set, else `<workspace>/target`), so it never waits on the outer build's lock
//! and host flags never leak into guests. It prints `cargo:rerun-if-changed`
//! for every source file the guests were built from (from cargo's dep-info),
//! for the guest crates, `guest-sdk/` and `wit/`, and panics with the nested
//! cargo's output when the build fails.

use serde_json::Value;
use std::collections::BTreeSet;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Environment of the outer build that must not reach the nested one: host
/// rustflags, the outer target and target dir, clippy's wrapper, and the
/// variables cargo sets for the build script itself.
const LEAKY_VARS: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_BUILD_DIR",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_PRIMARY_PACKAGE",
    "TARGET",
    "HOST",
    "OUT_DIR",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
];

/// Build `packages` (workspace package names) for `target` (`wasm32-wasip2`
/// for components, `wasm32-wasip1` for WASI command guests) with the
/// workspace's `guest` profile. Returns `(package, artifact)` for every wasm
/// the packages produce: a cdylib gives `<name_with_underscores>.wasm`, each
/// bin `<bin>.wasm`, under `<target dir>/guests/<target>/guest/`.
///
/// Meant for build scripts (it reads `CARGO` and `CARGO_MANIFEST_DIR`);
/// panics with the nested cargo's output when anything fails.
pub fn build_guests(packages: &[&str], target: &str) -> Vec<(String, PathBuf)> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| env::current_dir().expect("a current directory"));
    let workspace = workspace_root(&manifest_dir);
    let target_dir = outer_target_dir(&workspace).join("guests");

    for dir in ["guest-sdk", "wit"] {
        rerun_if_changed(&workspace.join(dir));
    }
    rerun_if_changed(&workspace.join("Cargo.toml"));
    rerun_if_changed(&workspace.join("Cargo.lock"));
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    if packages.is_empty() {
        return Vec::new();
    }

    let metadata = run_json(nested(&cargo, &workspace).args(["metadata", "--no-deps", "--format-version", "1"]));
    let mut wanted: Vec<(String, Vec<String>)> = Vec::new(); // (package, artifact stems)
    for &name in packages {
        let package = metadata["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("weft-guest-build: no package `{name}` in {}", workspace.display()));
        let manifest = Path::new(package["manifest_path"].as_str().expect("manifest_path"));
        rerun_if_changed(manifest.parent().expect("a package directory"));
        let mut stems = Vec::new();
        for t in package["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let target_name = t["name"].as_str().expect("target name");
            if kinds.contains(&"cdylib") {
                stems.push(target_name.replace('-', "_"));
            } else if kinds.contains(&"bin") {
                stems.push(target_name.to_string());
            }
        }
        if stems.is_empty() {
            panic!("weft-guest-build: `{name}` has neither a cdylib nor a bin target: nothing to build");
        }
        wanted.push((name.to_string(), stems));
    }

    let mut cmd = nested(&cargo, &workspace);
    cmd.args(["build", "--profile", "guest", "--target", target]).env("CARGO_TARGET_DIR", &target_dir);
    for &name in packages {
        cmd.args(["-p", name]);
    }
    run(&mut cmd);

    let out_dir = target_dir.join(target).join("guest");
    let mut seen = BTreeSet::new();
    let mut built = Vec::new();
    for (package, stems) in wanted {
        for stem in stems {
            let wasm = out_dir.join(format!("{stem}.wasm"));
            assert!(wasm.is_file(), "weft-guest-build: `{package}` built, but {} is missing", wasm.display());
            rerun_from_dep_info(&wasm.with_extension("d"), &mut seen);
            built.push((package.clone(), wasm));
        }
    }
    built
}

/// The outer build's target directory: the ancestor of `OUT_DIR` that cargo
/// tagged with `CACHEDIR.TAG` (right whether the target dir came from
/// `CARGO_TARGET_DIR`, a config file or the default), else
/// `CARGO_TARGET_DIR` (relative to the workspace), else `<workspace>/target`.
fn outer_target_dir(workspace: &Path) -> PathBuf {
    let from_out_dir = env::var_os("OUT_DIR").and_then(|out| {
        Path::new(&out).ancestors().find(|dir| dir.join("CACHEDIR.TAG").is_file()).map(Path::to_path_buf)
    });
    from_out_dir
        .or_else(|| env::var_os("CARGO_TARGET_DIR").map(|dir| workspace.join(dir)))
        .unwrap_or_else(|| workspace.join("target"))
}

/// The directory of the `Cargo.toml` with `[workspace]` above `start`.
fn workspace_root(start: &Path) -> PathBuf {
    start
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|toml| toml.lines().any(|l| l.trim() == "[workspace]"))
        })
        .unwrap_or_else(|| panic!("weft-guest-build: no workspace above {}", start.display()))
        .to_path_buf()
}

/// A cargo command in `workspace` without the outer build's leaky settings.
/// Jobserver variables (`CARGO_MAKEFLAGS`...) stay, so the nested build
/// shares the outer build's job slots.
fn nested(cargo: &std::ffi::OsStr, workspace: &Path) -> Command {
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace);
    for var in LEAKY_VARS {
        cmd.env_remove(var);
    }
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("CARGO_CFG_") || key.starts_with("CARGO_FEATURE_") {
            cmd.env_remove(&*key);
        }
    }
    cmd
}

fn run(cmd: &mut Command) -> Vec<u8> {
    eprintln!("weft-guest-build: running {cmd:?}");
    let out =
        cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("weft-guest-build: cannot start {cmd:?}: {e}"));
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A fresh machine: rustc's own note names the target; say what
        // installs it.
        let hint = if stderr.contains("target may not be installed") {
            "\nhint: run scripts/setup.sh first: it installs the Rust targets (rustup target add) and the \
             toolchains the build needs\n"
        } else {
            ""
        };
        panic!(
            "weft-guest-build: {cmd:?} failed ({}):\n{}{stderr}{hint}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    out.stdout
}

fn run_json(cmd: &mut Command) -> Value {
    serde_json::from_slice(&run(cmd)).expect("weft-guest-build: cargo printed JSON")
}

fn rerun_if_changed(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// Print `rerun-if-changed` for every file in a cargo dep-info (`.d`) file:
/// `target: dep dep\ with\ space ...`.
fn rerun_from_dep_info(dep_info: &Path, seen: &mut BTreeSet<String>) {
    let Ok(text) = std::fs::read_to_string(dep_info) else {
        return;
    };
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut file = String::new();
        for part in deps.split(' ') {
            if let Some(head) = part.strip_suffix('\\') {
                file.push_str(head);
                file.push(' ');
                continue;
            }
            file.push_str(part);
            if !file.is_empty() && seen.insert(file.clone()) {
                println!("cargo:rerun-if-changed={file}");
            }
            file.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_workspace_root() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = workspace_root(here);
        assert!(root.join("wit").is_dir(), "{}", root.display());
        assert!(here.starts_with(&root));
    }

    #[test]
    fn parses_dep_info_with_escaped_spaces() {
        let dir = std::env::temp_dir().join(format!("weft-guest-build-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.join("x.d");
        std::fs::write(&d, "/t/x.wasm: /src/a.rs /src/my\\ file.rs\n\n/src/a.rs:\n").unwrap();
        let mut seen = BTreeSet::new();
        rerun_from_dep_info(&d, &mut seen);
        let files: Vec<&str> = seen.iter().map(String::as_str).collect();
        assert_eq!(files, ["/src/a.rs", "/src/my file.rs"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
