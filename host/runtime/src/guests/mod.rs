//! Finding a guest: a plugin name (an added plugin or one bundled into the
//! binary), a file, or a digest of a stored module — the one resolver of
//! every command, tool and runner. Also the process's one [`Sandbox`] (one
//! wasmtime engine per process) and the registry of the data directory.

mod files;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use weft_model::CodeRef;
use weft_sandbox::registry::{Bundled, Registry, Source};
use weft_sandbox::{Digest, GuestBytes, Sandbox, SandboxConfig, SandboxError};

pub use files::{MAX_GUEST_BYTES, client_path_allowed, guest_file, read_guest_file, resolve_path};

use crate::config::Settings;

/// The plugins compiled into this binary.
pub fn bundled() -> Vec<Bundled> {
    weft_bundled::all().iter().map(|p| Bundled { name: p.name, wasm: p.wasm }).collect()
}

/// The registry of the configured data directory.
pub fn registry(settings: &Settings) -> Registry {
    Registry::new(&settings.data_dir, bundled()).remembering_files_in(&settings.cache_dir.join("file-digests"))
}

/// The sandbox of this process, with the default engine configuration and
/// the configured cache: built on first use and shared by everything that
/// validates definitions or runs guests (a wasmtime engine is costly to
/// build and its compiled guests are kept per engine).
pub fn sandbox(settings: &Settings) -> Result<Arc<Sandbox>, SandboxError> {
    static ONE: Mutex<Option<(PathBuf, Arc<Sandbox>)>> = Mutex::new(None);
    let mut one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    match &*one {
        Some((cache, s)) if *cache == settings.cache_dir => Ok(s.clone()),
        _ => {
            let l = &settings.file.limits;
            let sandbox = Sandbox::new(SandboxConfig::default(), Some(&settings.cache_dir))?.with_admission(
                l.max_running_guests.unwrap_or_else(weft_sandbox::gate::default_cpus),
                l.guest_memory_budget_mb.unwrap_or_else(weft_sandbox::gate::default_budget_mb),
            );
            let s = Arc::new(sandbox);
            *one = Some((settings.cache_dir.clone(), s.clone()));
            Ok(s)
        }
    }
}

/// Where a guest's bytes came from.
#[derive(Debug, Clone)]
pub enum Origin {
    /// A file on disk.
    File(PathBuf),
    /// A registered or bundled plugin.
    Plugin(Source),
    /// A stored blob named by its digest.
    Digest,
}

/// A guest's digest, its bytes (a stored blob's read only when needed)
/// and what to call it.
#[derive(Debug, Clone)]
pub struct Found {
    /// A display name (the plugin name, the file stem or a short digest).
    pub name: String,
    /// Where it came from.
    pub origin: Origin,
    /// The sha256 of `bytes`.
    pub digest: Digest,
    /// The module or component: a file's as read, a bundled plugin's
    /// borrowed from the binary, a stored blob not read yet.
    pub bytes: GuestBytes,
}

/// A guest that cannot be found: bad input unless the disk failed.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// Nothing by that name, or a file that cannot be used.
    #[error("{0}")]
    NotFound(String),
    /// The registry said no.
    #[error(transparent)]
    Sandbox(SandboxError),
}

/// Finds a guest: a plugin by name (added or bundled), a file
/// (relative paths against `base_dir`, the definition file's folder), or a
/// stored module by digest.
pub fn resolve(registry: &Registry, base_dir: &Path, code: &CodeRef) -> Result<Found, FindError> {
    match code {
        CodeRef::Plugin(name) => {
            let r = registry.resolve(name).map_err(FindError::Sandbox)?;
            Ok(Found { name: r.name, origin: Origin::Plugin(r.source), digest: r.digest, bytes: r.bytes })
        }
        CodeRef::Path(p) => {
            let path = resolve_path(base_dir, p);
            let (digest, bytes) = guest_file(registry.file_digests(), &path).map_err(FindError::NotFound)?;
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| p.clone());
            Ok(Found { name, origin: Origin::File(path), digest, bytes })
        }
        CodeRef::Sha256(hex) => {
            let digest: Digest =
                hex.parse().map_err(|e: weft_sandbox::BadDigest| FindError::NotFound(e.to_string()))?;
            let bytes = registry.stored(&digest).map_err(FindError::Sandbox)?;
            Ok(Found { name: digest.short(), origin: Origin::Digest, digest, bytes })
        }
    }
}

/// [`resolve`] for a definition's code step, the error as a sentence for a
/// person (a file's names the path as written).
pub fn resolve_code(registry: &Registry, base_dir: &Path, code: &CodeRef) -> Result<Found, String> {
    resolve(registry, base_dir, code).map_err(|e| match code {
        CodeRef::Path(p) => format!("`{p}`: {e}"),
        _ => e.to_string(),
    })
}

/// What a user typed on the command line as a guest: an existing file,
/// `sha256:HEX`, or a plugin name.
pub fn find(registry: &Registry, what: &str) -> Result<Found, FindError> {
    let code = if Path::new(what).is_file() {
        CodeRef::Path(what.to_string())
    } else if let Some(hex) = what.strip_prefix("sha256:") {
        CodeRef::Sha256(hex.to_string())
    } else if what.contains('/') || what.contains('.') {
        return Err(FindError::NotFound(format!("no file `{what}` (and it is not a plugin name)")));
    } else {
        CodeRef::Plugin(what.to_string())
    };
    resolve(registry, Path::new(""), &code)
}
