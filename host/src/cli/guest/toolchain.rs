//! The pinned toolchains `weft guest build` needs for JavaScript/TypeScript
//! (esbuild and componentize-js, locked in `guest-sdk/js/toolchain`) and
//! Python (componentize-py, pinned in `guest-sdk/python/toolchain.txt`),
//! installed once into weft's cache: `$WEFT_TOOLCHAIN_DIR`, else
//! `$XDG_CACHE_HOME/weft/toolchains`, else `~/.cache/weft/toolchains`. Each
//! toolchain lives in a folder named after the digest of its pins, so moving
//! a pin installs the new set beside the old. An install runs under a file
//! lock (two builds at once install once) and counts only once its
//! `.weft-ready` marker is written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};
use sha2::{Digest, Sha256};

use super::Sdk;

/// The cache folder toolchains are installed into.
fn cache_root() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("WEFT_TOOLCHAIN_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("weft/toolchains"));
    }
    match std::env::var_os("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".cache/weft/toolchains")),
        None => bail!("no cache folder for the guest toolchains: set WEFT_TOOLCHAIN_DIR (or HOME)"),
    }
}

/// `<cache>/<kind>-<digest of the pins>`, installed by `install(dir)` when
/// missing; `what` names the toolchain in the progress line.
fn ensure(
    kind: &str,
    pins: &[&Path],
    what: &str,
    install: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let mut digest = Sha256::new();
    for pin in pins {
        digest.update(std::fs::read(pin).with_context(|| format!("cannot read {}", pin.display()))?);
    }
    let digest = hex::encode(digest.finalize());
    let root = cache_root()?;
    let dir = root.join(format!("{kind}-{}", &digest[..12]));
    let ready = dir.join(".weft-ready");
    if ready.is_file() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let lock_path = root.join(format!("{kind}.lock"));
    let lock = std::fs::File::create(&lock_path).with_context(|| format!("cannot create {}", lock_path.display()))?;
    lock.lock().with_context(|| format!("cannot lock {}", lock_path.display()))?;
    if ready.is_file() {
        return Ok(dir); // another build installed it while we waited
    }
    eprintln!("weft guest build: installing {what} into {} (once; this takes a minute)", dir.display());
    let started = Instant::now();
    // In place (a virtual environment cannot move), under the lock; ready
    // only once `.weft-ready` is written.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if let Err(e) = install(&dir) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e.context(format!("installing {what} failed")));
    }
    std::fs::write(&ready, &digest)?;
    eprintln!("weft guest build: installed {what} in {:.0} s", started.elapsed().as_secs_f64());
    Ok(dir)
}

/// esbuild and componentize-js, from `guest-sdk/js/toolchain`'s lock file.
pub fn js(sdk: &Sdk) -> anyhow::Result<PathBuf> {
    let pins = sdk.js().join("toolchain");
    let (manifest, lock) = (pins.join("package.json"), pins.join("package-lock.json"));
    ensure("js", &[manifest.as_path(), lock.as_path()], "the JavaScript toolchain (esbuild, componentize-js)", |dir| {
        std::fs::copy(&manifest, dir.join("package.json"))?;
        std::fs::copy(&lock, dir.join("package-lock.json"))?;
        // `npm ci` refuses a lock file that lacks another platform's optional
        // binaries; `npm install --no-save` then installs the same locked versions.
        let ci = npm(dir, &["ci"]);
        if ci.is_err() {
            npm(dir, &["install", "--no-save"])?;
        }
        Ok(())
    })
}

/// The project's own dependencies (`weft-guest` and what it brings): installed
/// when missing, and again when the SDK's files changed since (npm copies a
/// `file:` folder once and would keep the old copy).
pub fn npm_install(project: &Path, sdk: &Sdk) -> anyhow::Result<()> {
    let copy = project.join("node_modules/weft-guest");
    if copy.join("package.json").is_file() {
        if !sdk_copy_is_current(&sdk.js(), &copy)? {
            eprintln!("weft guest build: the SDK in {} changed: reinstalling weft-guest", sdk.js().display());
            std::fs::remove_dir_all(&copy).with_context(|| format!("cannot remove {}", copy.display()))?;
            npm(project, &["install"])?;
        }
        return Ok(());
    }
    eprintln!("weft guest build: installing the project's dependencies (npm install)");
    npm(project, &["install"])
}

/// Whether `copy` (`<project>/node_modules/weft-guest`) holds the SDK's
/// package.json and `files`; a project whose package.json names another
/// SDK folder is left as it is.
fn sdk_copy_is_current(sdk_js: &Path, copy: &Path) -> anyhow::Result<bool> {
    let project = copy.parent().and_then(Path::parent).unwrap_or(copy);
    if !names_sdk(project, sdk_js) {
        return Ok(true);
    }
    let manifest = std::fs::read(sdk_js.join("package.json")).context("the SDK's package.json")?;
    let pkg: serde_json::Value = serde_json::from_slice(&manifest).context("the SDK's package.json")?;
    let files = pkg["files"].as_array().into_iter().flatten().filter_map(|f| f.as_str());
    Ok(files.chain(["package.json"]).all(|f| std::fs::read(sdk_js.join(f)).ok() == std::fs::read(copy.join(f)).ok()))
}

/// Whether the project's package.json depends on `weft-guest` from `sdk_js` (`file:...`).
fn names_sdk(project: &Path, sdk_js: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(project.join("package.json")) else { return false };
    let Ok(pkg) = serde_json::from_str::<serde_json::Value>(&text) else { return false };
    let Some(spec) = pkg["dependencies"]["weft-guest"].as_str().and_then(|s| s.strip_prefix("file:")) else {
        return false;
    };
    let named = std::fs::canonicalize(project.join(spec)).ok();
    named.is_some() && named == std::fs::canonicalize(sdk_js).ok()
}

fn npm(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let mut cmd = Command::new("npm");
    cmd.args(args).args(["--no-audit", "--no-fund", "--loglevel=error"]).current_dir(dir);
    run_quietly(&mut cmd, "npm", "Node.js 20 or later with npm (https://nodejs.org, or `apt-get install nodejs npm`)")
}

/// A virtual environment with componentize-py, from `guest-sdk/python/toolchain.txt`.
pub fn python(sdk: &Sdk) -> anyhow::Result<PathBuf> {
    let pins = sdk.python().join("toolchain.txt");
    let dir = ensure("python", &[pins.as_path()], "the Python toolchain (componentize-py)", |dir| {
        let mut venv = Command::new("python3");
        venv.args(["-m", "venv"]).arg(dir);
        run_quietly(&mut venv, "python3", "Python 3 with venv (`apt-get install python3 python3-venv`)")?;
        let mut pip = Command::new(dir.join("bin/pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check", "-r"]).arg(&pins);
        run_quietly(&mut pip, "pip", "pip in the toolchain's virtual environment")
    })?;
    Ok(dir.join("bin/componentize-py"))
}

/// Runs `cmd`, showing its output only when it fails; `missing` says what
/// to install when `program` is not there.
pub fn run_quietly(cmd: &mut Command, program: &str, missing: &str) -> anyhow::Result<()> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow::anyhow!("`{program}` is not on PATH: install {missing}"),
        _ => anyhow::anyhow!("cannot start `{program}`: {e}"),
    })?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}):\n{}{}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `program arg arg` for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}
