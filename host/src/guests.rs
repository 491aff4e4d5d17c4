//! Finding a guest from what a user typed: a file path, a plugin name (an
//! added plugin or one bundled into the binary), or `sha256:HEX`. Also
//! builds the sandbox and registry the way every command wants them.

use std::path::{Path, PathBuf};

use weft_sandbox::registry::{Bundled, Registry, Source};
use weft_sandbox::{Digest, Sandbox, SandboxConfig, SandboxError};

use crate::config::Settings;

/// The plugins compiled into this binary.
pub fn bundled() -> Vec<Bundled> {
    weft_bundled::all().iter().map(|p| Bundled { name: p.name, wasm: p.wasm }).collect()
}

/// The registry of the configured data directory.
pub fn registry(settings: &Settings) -> Registry {
    Registry::new(&settings.data_dir, bundled())
}

/// A sandbox with the default engine configuration and the configured cache.
pub fn sandbox(settings: &Settings) -> Result<Sandbox, SandboxError> {
    Sandbox::new(SandboxConfig::default(), Some(&settings.cache_dir))
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

/// A guest's bytes and what to call it.
#[derive(Debug, Clone)]
pub struct Found {
    /// A display name (the plugin name or the file stem).
    pub name: String,
    /// Where it came from.
    pub origin: Origin,
    /// Its digest.
    pub digest: Digest,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Resolves `what`: an existing file, `sha256:HEX`, or a plugin name.
pub fn find(registry: &Registry, what: &str) -> Result<Found, FindError> {
    let path = Path::new(what);
    if path.is_file() {
        let bytes = crate::lookup::read_guest_file(path).map_err(FindError::NotFound)?;
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| what.into());
        return Ok(Found { name, origin: Origin::File(path.to_path_buf()), digest: Digest::of(&bytes), bytes });
    }
    if let Some(hex) = what.strip_prefix("sha256:") {
        let digest: Digest = hex.parse().map_err(|e: weft_sandbox::BadDigest| FindError::NotFound(e.to_string()))?;
        let bytes = registry.blob(&digest).map_err(FindError::Sandbox)?;
        return Ok(Found { name: digest.short(), origin: Origin::Digest, digest, bytes });
    }
    if what.contains('/') || what.contains('.') {
        return Err(FindError::NotFound(format!("no file `{what}` (and it is not a plugin name)")));
    }
    let r = registry.resolve(what).map_err(FindError::Sandbox)?;
    Ok(Found { name: r.name, origin: Origin::Plugin(r.source), digest: r.digest, bytes: r.bytes })
}

/// A guest that cannot be found: bad input (exit code 2) unless the disk
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// Nothing by that name.
    #[error("{0}")]
    NotFound(String),
    /// The file exists but cannot be read.
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    /// The registry said no.
    #[error(transparent)]
    Sandbox(SandboxError),
}
