//! `weft guest build` and `weft guest test` for a project folder: the
//! language comes from its files (`Cargo.toml`, `package.json`,
//! `pyproject.toml`, `*.c`), then the language's own tools do the work
//! (cargo; esbuild + componentize-js through `guest-sdk/js/build.mjs`;
//! componentize-py; clang-19 + wasi-libc). Tool output goes to stderr; the
//! built file's path is the result.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use anyhow::{Context as _, bail};

use super::toolchain::{self, describe};
use super::{Lang, Sdk};
use crate::cli::{Exit, bad};

/// The language of the project in `dir`, from its files.
fn detect(dir: &Path) -> anyhow::Result<Lang> {
    if dir.join("Cargo.toml").is_file() {
        return Ok(Lang::Rust);
    }
    if dir.join("package.json").is_file() {
        let pkg = package_json(dir)?;
        let main = pkg["main"].as_str().unwrap_or_default();
        return Ok(if main.ends_with(".ts") || main.ends_with(".mts") { Lang::Ts } else { Lang::Js });
    }
    if dir.join("pyproject.toml").is_file() {
        return Ok(Lang::Python);
    }
    if !c_sources(dir)?.is_empty() {
        return Ok(Lang::C);
    }
    Err(bad(anyhow::anyhow!(
        "{} holds no Cargo.toml, package.json, pyproject.toml or .c file: is it a step project? (`weft guest new --lang ts NAME` makes one)",
        dir.display()
    )))
}

/// Builds the project in `dir`; the built file.
pub fn build(dir: &Path, sdk: &Sdk) -> anyhow::Result<PathBuf> {
    let lang = detect(dir)?;
    eprintln!("weft guest build: a {} step in {}", lang.name(), dir.display());
    match lang {
        Lang::Rust => rust(dir),
        Lang::Ts | Lang::Js => js(dir, sdk),
        Lang::Python => python(dir, sdk),
        Lang::C => c(dir),
    }
}

/// Runs the project's native unit tests with its output shown.
pub fn test(dir: &Path, sdk: &Sdk) -> anyhow::Result<Exit> {
    let lang = detect(dir)?;
    let mut cmd = match lang {
        Lang::Rust => {
            let mut c = Command::new("cargo");
            c.arg("test");
            c
        }
        Lang::Ts | Lang::Js => {
            toolchain::npm_install(dir, sdk)?;
            let mut c = Command::new("npm");
            c.args(["test", "--silent"]);
            c
        }
        Lang::Python => {
            let mut c = Command::new("python3");
            c.args(["-m", "unittest"]);
            let sdk_src = sdk.python().join("src");
            let path = match std::env::var_os("PYTHONPATH") {
                Some(old) if !old.is_empty() => {
                    std::env::join_paths([sdk_src, PathBuf::from(old)]).context("PYTHONPATH")?
                }
                _ => sdk_src.into_os_string(),
            };
            c.env("PYTHONPATH", path);
            c
        }
        Lang::C => {
            let mut c = Command::new("sh");
            c.arg("test.sh");
            c
        }
    };
    cmd.current_dir(dir).stdin(Stdio::null());
    eprintln!("weft guest test: {}", describe(&cmd));
    let status = cmd.status().with_context(|| format!("cannot start `{}`", describe(&cmd)))?;
    Ok(if status.success() { Exit::Success } else { Exit::Failed })
}

/// Runs `cmd` with stderr shown and stdout captured; its stdout.
fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::inherit()).output().map_err(|e| {
        let program = cmd.get_program().to_string_lossy();
        match e.kind() {
            std::io::ErrorKind::NotFound => {
                bad(anyhow::anyhow!("`{program}` is not on PATH: {}", install_hint(&program)))
            }
            _ => anyhow::anyhow!("cannot start `{}`: {e}", describe(cmd)),
        }
    })?;
    if !out.status.success() {
        bail!("`{}` failed ({})", describe(cmd), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn package_json(dir: &Path) -> anyhow::Result<serde_json::Value> {
    let file = dir.join("package.json");
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display())).map_err(bad)
}

/// The output file `build/<name>.wasm` for a project named `name`.
fn output(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let stem: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    let build = dir.join("build");
    std::fs::create_dir_all(&build).with_context(|| format!("cannot create {}", build.display()))?;
    Ok(build.join(format!("{}.wasm", stem.trim_matches('-'))))
}

/// Whether `out` exists and is newer than every file in `inputs` (folders
/// are walked, leaving out `node_modules`, `build`, `target`,
/// `__pycache__` and hidden entries); says so on stderr when it is.
fn up_to_date(out: &Path, inputs: &[PathBuf]) -> bool {
    let Ok(built) = std::fs::metadata(out).and_then(|m| m.modified()) else { return false };
    let fresh = inputs.iter().all(|input| newest(input).is_some_and(|t| t < built));
    if fresh {
        eprintln!("weft guest build: {} is up to date", out.display());
    }
    fresh
}

/// The newest modification time under `path` (None when unreadable).
fn newest(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::metadata(path).ok()?;
    let mut latest = meta.modified().ok()?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || matches!(&*name, "node_modules" | "build" | "target" | "__pycache__") {
                continue;
            }
            latest = latest.max(newest(&entry.path())?);
        }
    }
    Some(latest)
}

// ------------------------------------------------------------------ Rust --

/// `cargo build --release --target wasm32-wasip2`; the cdylib's .wasm, from
/// cargo's JSON messages (right wherever the target folder is).
fn rust(dir: &Path) -> anyhow::Result<PathBuf> {
    let mut cmd = Command::new("cargo");
    cmd.args(["build", "--release", "--target", "wasm32-wasip2", "--message-format=json-render-diagnostics"])
        .current_dir(dir);
    let stdout = run(&mut cmd)?;
    let mut built = None;
    for line in stdout.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let is_cdylib = msg["target"]["crate_types"].as_array().is_some_and(|k| k.iter().any(|k| k == "cdylib"));
        if msg["reason"] == "compiler-artifact" && is_cdylib {
            let wasm = msg["filenames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f.as_str())
                .find(|f| f.ends_with(".wasm"));
            if let Some(f) = wasm {
                built = Some(PathBuf::from(f));
            }
        }
    }
    built.ok_or_else(|| {
        bad(anyhow::anyhow!(
            "cargo built no .wasm library: Cargo.toml needs `[lib] crate-type = [\"cdylib\", \"rlib\"]`"
        ))
    })
}

// ------------------------------------------------------ JavaScript / TS --

fn js(dir: &Path, sdk: &Sdk) -> anyhow::Result<PathBuf> {
    let pkg = package_json(dir)?;
    let Some(name) = pkg["name"].as_str() else {
        return Err(bad(anyhow::anyhow!("{}: package.json has no \"name\"", dir.display())));
    };
    let out = output(dir, name)?;
    let tools = toolchain::js(sdk)?;
    toolchain::npm_install(dir, sdk)?;
    let inputs = [
        dir.to_path_buf(),
        dir.join("node_modules/weft-guest"),
        sdk.js().join("build.mjs"),
        sdk.js().join("lazy-build.mjs"),
        sdk.js().join("toolchain"),
        sdk.wit(),
    ];
    if up_to_date(&out, &inputs) {
        return Ok(out);
    }
    let mut cmd = Command::new("node");
    cmd.arg(sdk.js().join("build.mjs"))
        .arg("--project")
        .arg(dir)
        .arg("--toolchain")
        .arg(&tools)
        .arg("--wit")
        .arg(sdk.wit())
        .arg("--out")
        .arg(&out)
        .current_dir(dir);
    run(&mut cmd)?;
    Ok(out)
}

// ---------------------------------------------------------------- Python --

fn python(dir: &Path, sdk: &Sdk) -> anyhow::Result<PathBuf> {
    let file = dir.join("pyproject.toml");
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let doc: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not TOML", file.display())).map_err(bad)?;
    let project = doc.get("project").and_then(|p| p.as_table());
    let Some(name) = project.and_then(|p| p.get("name")).and_then(|n| n.as_str()) else {
        return Err(bad(anyhow::anyhow!("{}: [project] has no `name`", file.display())));
    };
    let module = doc
        .get("tool")
        .and_then(|t| t.get("weft"))
        .and_then(|w| w.get("module"))
        .and_then(|m| m.as_str())
        .map(String::from)
        .unwrap_or_else(|| name.replace('-', "_"));
    let version = project.and_then(|p| p.get("version")).and_then(|v| v.as_str());
    let description = project.and_then(|p| p.get("description")).and_then(|v| v.as_str());
    let src = dir.join("src");
    let search: Vec<&Path> = if src.is_dir() { vec![dir, src.as_path()] } else { vec![dir] };
    if !search.iter().any(|d| d.join(format!("{module}.py")).is_file() || d.join(&module).join("__init__.py").is_file())
    {
        return Err(bad(anyhow::anyhow!(
            "{}: no module `{module}` ({module}.py) here or in src/: name the step's module in [tool.weft] module = \"...\"",
            dir.display()
        )));
    }

    let out = output(dir, name)?;
    let inputs = [dir.to_path_buf(), sdk.python().join("src"), sdk.python().join("toolchain.txt"), sdk.wit()];
    if up_to_date(&out, &inputs) {
        return Ok(out);
    }
    let work = dir.join("build/.weft");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let py_str = |s: Option<&str>| s.map(|s| serde_json::to_string(s).expect("a string")).unwrap_or("None".into());
    let app = format!(
        "# Generated by `weft guest build`: the component's exports for `{module}`.\n\
         import {module} as _step_module\n\
         from weft_guest._component import world\n\n\
         WitWorld = world(_step_module, version={}, description={})\n",
        py_str(version),
        py_str(description)
    );
    std::fs::write(work.join("weft_app.py"), app)?;

    let componentize = toolchain::python(sdk)?;
    let tmp = out.with_extension(format!("wasm.{}.tmp", std::process::id()));
    let mut cmd = Command::new(&componentize);
    cmd.arg("-d").arg(sdk.wit()).args(["-w", "step", "componentize", "weft_app", "-p"]).arg(&work);
    for d in &search {
        cmd.arg("-p").arg(d);
    }
    cmd.arg("-p").arg(sdk.python().join("src")).arg("-o").arg(&tmp).current_dir(dir);
    let started = std::time::Instant::now();
    run(&mut cmd)?;
    std::fs::rename(&tmp, &out).with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("weft guest build: componentized in {:.1} s", started.elapsed().as_secs_f64());
    Ok(out)
}

// --------------------------------------------------------------------- C --

fn c_sources(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "c") && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// A WASI command with Debian's clang-19 and wasi-libc (`$WASI_CC` and
/// `$WASI_SYSROOT` override them; `$CC` is left alone: it usually names a
/// compiler for this machine).
fn c(dir: &Path) -> anyhow::Result<PathBuf> {
    let cc = std::env::var("WASI_CC").unwrap_or_else(|_| "clang-19".into());
    let sysroot = std::env::var("WASI_SYSROOT").unwrap_or_else(|_| "/usr".into());
    if !Path::new(&sysroot).join("lib/wasm32-wasi/libc.a").is_file() {
        return Err(bad(anyhow::anyhow!(
            "wasi-libc is not under {sysroot} (set WASI_SYSROOT, or `apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32`)"
        )));
    }
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "step".into());
    let out = output(dir, &name)?;
    if up_to_date(&out, &[dir.to_path_buf()]) {
        return Ok(out);
    }
    let mut cmd = Command::new(&cc);
    cmd.arg("--target=wasm32-wasi")
        .arg(format!("--sysroot={sysroot}"))
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Wl,--strip-all", "-o"])
        .arg(&out)
        .args(c_sources(dir)?)
        .current_dir(dir);
    run(&mut cmd)?;
    Ok(out)
}

/// What to install when `program` is missing.
fn install_hint(program: &str) -> &'static str {
    if program.starts_with('/') {
        return "a toolchain in weft's cache is incomplete: remove its folder and build again";
    }
    match program {
        "cargo" => "install Rust (https://rustup.rs)",
        "node" | "npm" => "install Node.js 20 or later with npm (https://nodejs.org, or `apt-get install nodejs npm`)",
        "python3" => "install Python 3 (`apt-get install python3 python3-venv`)",
        "sh" => "a POSIX shell is needed",
        _ => "`apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32` (or set WASI_CC)",
    }
}
