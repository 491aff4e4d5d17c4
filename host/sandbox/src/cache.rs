//! The compiled-artifact cache: compiling a 12 MB JavaScript component
//! takes seconds, loading it precompiled takes milliseconds. Entries live at
//! `<dir>/<engine-hash>/<sha256>.{cwasm,cmod}`; the engine hash covers the
//! wasmtime version and every setting that changes compiled code, so an
//! entry from another version or configuration is never even looked at.
//! Entries are written to a temporary file and renamed into place, so
//! processes sharing the folder never see half an entry.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::component::Component;
use wasmtime::{Engine, Module};

use crate::digest::Digest;
use crate::error::{HostError, LoadError, SandboxError};

/// Guests compiled by this process (not read from the cache), for the
/// `weft_guest_compilations_total` metric.
static COMPILATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many guests this process has compiled (each digest once per
/// engine, cache misses only).
pub fn compilations() -> u64 {
    COMPILATIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where compiled artifacts are kept (or nowhere).
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: Option<PathBuf>,
}

/// Which kind of artifact.
#[derive(Clone, Copy)]
enum Kind {
    Component,
    Module,
}

impl ArtifactCache {
    /// A cache in `root` (created on first write) for `engine`, or no cache.
    pub fn new(root: Option<&Path>, engine: &Engine) -> Self {
        let dir = root.map(|r| {
            let mut h = DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut h);
            r.join(format!("{:016x}", h.finish()))
        });
        ArtifactCache { dir }
    }

    /// The folder entries of this engine configuration go to.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn path(&self, digest: &Digest, kind: Kind) -> Option<PathBuf> {
        let ext = match kind {
            Kind::Component => "cwasm",
            Kind::Module => "cmod",
        };
        self.dir.as_ref().map(|d| d.join(format!("{digest}.{ext}")))
    }

    /// The compiled guest of `digest` if the cache holds it (a component
    /// or a core module: a digest names one or the other), without its
    /// bytes. An entry that does not load (written by a build whose
    /// compatibility hash collided, or damaged) is skipped with a warning
    /// and compiled again.
    pub fn cached(&self, engine: &Engine, digest: &Digest) -> Option<Compiled> {
        if let Some(path) = self.path(digest, Kind::Component).filter(|p| p.exists()) {
            // SAFETY: the file was written by this cache (atomically) from
            // wasmtime's own serialization, and `deserialize_file` checks
            // that it was produced by a compatible engine.
            #[allow(unsafe_code)]
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(c) => return Some(Compiled::Component(c)),
                Err(e) => tracing::warn!(path = %path.display(), "ignoring unusable cache entry: {e}"),
            }
        }
        if let Some(path) = self.path(digest, Kind::Module).filter(|p| p.exists()) {
            // SAFETY: as for components above.
            #[allow(unsafe_code)]
            match unsafe { Module::deserialize_file(engine, &path) } {
                Ok(m) => return Some(Compiled::Module(m)),
                Err(e) => tracing::warn!(path = %path.display(), "ignoring unusable cache entry: {e}"),
            }
        }
        None
    }

    /// Compiles the component `bytes` (of `digest`) and caches it.
    pub fn compile_component(&self, engine: &Engine, digest: &Digest, bytes: &[u8]) -> Result<Component, SandboxError> {
        COMPILATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let component = Component::new(engine, bytes).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        if let Some(path) = self.path(digest, Kind::Component) {
            let bytes = component.serialize().map_err(|e| HostError::Engine(format!("{e:#}")))?;
            write_atomic(&path, &bytes)?;
        }
        Ok(component)
    }

    /// Compiles the core module `bytes` (of `digest`) and caches it.
    pub fn compile_module(&self, engine: &Engine, digest: &Digest, bytes: &[u8]) -> Result<Module, SandboxError> {
        COMPILATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let module = Module::new(engine, bytes).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        if let Some(path) = self.path(digest, Kind::Module) {
            let bytes = module.serialize().map_err(|e| HostError::Engine(format!("{e:#}")))?;
            write_atomic(&path, &bytes)?;
        }
        Ok(module)
    }
}

/// A compiled guest from the cache.
pub enum Compiled {
    /// A component.
    Component(Component),
    /// A core module (a WASI command).
    Module(Module),
}

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename, so readers see the old state or the new one, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), HostError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |what, source| HostError::Io { what, path: path.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(|e| io("creating the folder of", e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io("creating a temporary file for", e))?;
    tmp.write_all(bytes).map_err(|e| io("writing", e))?;
    tmp.as_file().sync_data().map_err(|e| io("syncing", e))?;
    tmp.persist(path).map_err(|e| io("renaming into place", e.error))?;
    Ok(())
}
