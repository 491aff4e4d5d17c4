//! The plugin registry: guests registered by name in the data directory,
//! plus the plugins bundled into the binary. Blobs are content-addressed
//! (`plugins/blobs/<sha256>.wasm`), so a run can pin a digest and still find
//! the same bytes after the name moves on; each name is one small file
//! (`plugins/names/<name>`, holding a digest) replaced atomically, so two
//! processes adding plugins at once never lose each other's entries.
//! `describe` output is cached beside the blob (`plugins/meta/<sha256>.json`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::cache::write_atomic;
use crate::error::{BadName, HostError, SandboxError};
use crate::{Digest, FileDigests, GuestBytes, Metadata, Sandbox, StoredBlob};

/// A plugin compiled into the binary.
#[derive(Debug, Clone, Copy)]
pub struct Bundled {
    /// Its name.
    pub name: &'static str,
    /// Its bytes.
    pub wasm: &'static [u8],
}

/// The digest of a bundled plugin's bytes, computed once per process (they
/// are in the binary: a `weft serve` pins them at every run it starts).
fn bundled_digest(wasm: &'static [u8]) -> Digest {
    static KNOWN: std::sync::Mutex<Vec<(usize, Digest)>> = std::sync::Mutex::new(Vec::new());
    let key = wasm.as_ptr() as usize;
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, d)) = known.iter().find(|(k, _)| *k == key) {
        return *d;
    }
    let d = Digest::of(wasm);
    known.push((key, d));
    d
}

/// Where a plugin came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// `weft plugin add`.
    Added,
    /// Shipped inside the `weft` binary.
    Bundled,
}

/// A plugin as listed.
#[derive(Debug, Clone, Serialize)]
pub struct PluginEntry {
    /// The name it is used by.
    pub name: String,
    /// The sha256 of its bytes.
    pub digest: String,
    /// Where it came from.
    pub source: Source,
    /// Size in bytes.
    pub size: usize,
    /// What `describe` says (components), or `None` (commands).
    pub metadata: Option<Metadata>,
}

/// A plugin resolved to its digest and bytes (a stored blob's are read
/// only when needed: [`GuestBytes`]).
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The name asked for.
    pub name: String,
    /// The sha256 of the bytes.
    pub digest: Digest,
    /// The bytes (a bundled plugin's are borrowed from the binary).
    pub bytes: GuestBytes,
    /// Where it came from.
    pub source: Source,
}

/// The registry in one data directory.
#[derive(Debug, Clone)]
pub struct Registry {
    root: PathBuf,
    bundled: Vec<Bundled>,
    files: Option<FileDigests>,
}

/// Checks a plugin name.
pub fn check_name(name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok { Ok(()) } else { Err(BadName(name.to_string())) }
}

impl Registry {
    /// The registry under `<data_dir>/plugins`, with `bundled` as fallbacks.
    pub fn new(data_dir: &Path, bundled: Vec<Bundled>) -> Self {
        Registry { root: data_dir.join("plugins"), bundled, files: None }
    }

    /// This registry, remembering the digests of guest files in `dir` (a
    /// cache folder: see [`FileDigests`]).
    pub fn remembering_files_in(self, dir: &Path) -> Self {
        Registry { files: Some(FileDigests::new(dir)), ..self }
    }

    /// The memo of guest files' digests, if this registry keeps one.
    pub fn file_digests(&self) -> Option<&FileDigests> {
        self.files.as_ref()
    }

    fn io(what: &'static str, path: &Path, source: std::io::Error) -> SandboxError {
        HostError::Io { what, path: path.to_path_buf(), source }.into()
    }

    fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.root.join("blobs").join(format!("{digest}.wasm"))
    }

    /// Stores `bytes` content-addressed (no-op when present).
    pub fn put_blob(&self, bytes: &[u8]) -> Result<Digest, SandboxError> {
        let digest = Digest::of(bytes);
        let path = self.blob_path(&digest);
        if !path.exists() {
            write_atomic(&path, bytes)?;
        }
        Ok(digest)
    }

    /// [`put_blob`](Self::put_blob) of bytes whose digest the caller already
    /// has (from [`resolve`](Self::resolve) or [`stored`](Self::stored)):
    /// not hashed again, and not even read when the blob is present.
    pub fn put_blob_known(&self, digest: &Digest, bytes: &GuestBytes) -> Result<(), SandboxError> {
        let path = self.blob_path(digest);
        if !path.exists() {
            write_atomic(&path, &bytes.read()?)?;
        }
        Ok(())
    }

    /// The bytes of `digest`: its stored blob (not read yet: see
    /// [`GuestBytes`]), or a bundled plugin's.
    pub fn stored(&self, digest: &Digest) -> Result<GuestBytes, SandboxError> {
        let path = self.blob_path(digest);
        match std::fs::metadata(&path) {
            Ok(_) => Ok(GuestBytes::Stored(StoredBlob::new(path, *digest))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match self.bundled.iter().find(|b| bundled_digest(b.wasm) == *digest) {
                    Some(b) => Ok(b.wasm.into()),
                    None => Err(SandboxError::UnknownPlugin {
                        name: format!("sha256:{digest}"),
                        hint: " (no module with that digest is stored; `weft plugin add FILE` stores one)".into(),
                    }),
                }
            }
            Err(e) => Err(Self::io("reading", &path, e)),
        }
    }

    /// Registers `bytes` under `name` (or the name its `describe` gives):
    /// validates and prepares it first, so a bad guest changes nothing.
    pub fn add(&self, sandbox: &Sandbox, bytes: &[u8], name: Option<&str>) -> Result<PluginEntry, SandboxError> {
        let guest = sandbox.load(bytes)?;
        let metadata = sandbox.describe(&guest)?;
        let name = match (name, &metadata) {
            (Some(n), _) => n.to_string(),
            (None, Some(m)) => m.name.clone(),
            (None, None) => {
                return Err(BadName("(none)".into()).into());
            }
        };
        check_name(&name)?;
        let digest = self.put_blob(bytes)?;
        if let Some(m) = &metadata {
            let json = serde_json::to_vec_pretty(m).expect("metadata serializes");
            write_atomic(&self.root.join("meta").join(format!("{digest}.json")), &json)?;
        }
        write_atomic(&self.root.join("names").join(&name), digest.hex().as_bytes())?;
        Ok(PluginEntry { name, digest: digest.hex(), source: Source::Added, size: bytes.len(), metadata })
    }

    /// The plugin called `name`: an added one first, else a bundled one.
    pub fn resolve(&self, name: &str) -> Result<Resolved, SandboxError> {
        check_name(name)?;
        let name_file = self.root.join("names").join(name);
        match std::fs::read_to_string(&name_file) {
            Ok(text) => {
                let digest: Digest =
                    text.trim().parse().map_err(|e| Self::io("reading", &name_file, std::io::Error::other(e)))?;
                let bytes = self.stored(&digest)?;
                return Ok(Resolved { name: name.into(), digest, bytes, source: Source::Added });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Self::io("reading", &name_file, e)),
        }
        if let Some(b) = self.bundled.iter().find(|b| b.name == name) {
            return Ok(Resolved {
                name: name.into(),
                digest: bundled_digest(b.wasm),
                bytes: b.wasm.into(),
                source: Source::Bundled,
            });
        }
        let mut known = self.names().unwrap_or_default();
        known.sort();
        Err(SandboxError::UnknownPlugin {
            name: name.into(),
            hint: if known.is_empty() {
                "; add one with `weft plugin add FILE`".into()
            } else {
                format!("; known plugins: {}", known.join(", "))
            },
        })
    }

    /// Every usable name: added ones and bundled ones.
    pub fn names(&self) -> Result<Vec<String>, SandboxError> {
        let dir = self.root.join("names");
        let mut names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| check_name(n).is_ok())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Self::io("listing", &dir, e)),
        };
        for b in &self.bundled {
            if !names.iter().any(|n| n == b.name) {
                names.push(b.name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Changes whenever a plugin name is added or replaced, by this process
    /// or another (names are written by rename into `plugins/names`, which
    /// updates that folder's modification time): what was validated
    /// against the registry stays valid while its stamp holds.
    pub fn stamp(&self) -> Option<std::time::SystemTime> {
        std::fs::metadata(self.root.join("names")).and_then(|m| m.modified()).ok()
    }

    /// The metadata of `resolved`, from the cache beside its blob or by
    /// calling `describe`.
    pub fn metadata(&self, sandbox: &Sandbox, resolved: &Resolved) -> Result<Option<Metadata>, SandboxError> {
        let path = self.root.join("meta").join(format!("{}.json", resolved.digest));
        if let Ok(text) = std::fs::read(&path)
            && let Ok(m) = serde_json::from_slice(&text)
        {
            return Ok(Some(m));
        }
        let guest = sandbox.load_pinned(resolved.digest, resolved.bytes.clone())?;
        let meta = sandbox.describe(&guest)?;
        if let Some(m) = &meta {
            let json = serde_json::to_vec_pretty(m).expect("metadata serializes");
            // Best effort: a read-only data dir still lists plugins.
            let _ = write_atomic(&path, &json);
        }
        Ok(meta)
    }

    /// Every plugin with its metadata.
    pub fn list(&self, sandbox: &Sandbox) -> Result<Vec<PluginEntry>, SandboxError> {
        let mut out = Vec::new();
        for name in self.names()? {
            let r = self.resolve(&name)?;
            let metadata = self.metadata(sandbox, &r)?;
            let size = r.bytes.size()? as usize;
            out.push(PluginEntry { name, digest: r.digest.hex(), source: r.source, size, metadata });
        }
        Ok(out)
    }
}
