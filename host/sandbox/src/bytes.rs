//! A guest's bytes, or where to read them. A guest whose compiled artifact
//! is in the cache never needs its `.wasm` at all, and for a JavaScript or
//! Python component (12–19 MB) reading, hashing and copying the bytes cost
//! far more than mapping the artifact: ~25–40 ms in a fresh process on this
//! project's VM, against ~2 ms. So a stored blob is only named here, and
//! read (and checked against its digest) when something needs the bytes:
//! a first compile, a fuel-metered engine without a cached artifact,
//! `weft plugin inspect`'s size.
//!
//! Skipping the check on a cache hit trusts nothing new: the cached
//! artifact, not the blob, is what runs, and it is native code the cache
//! wrote (see [`crate::ArtifactCache`]).

use std::path::PathBuf;

use bytes::Bytes;

use crate::digest::Digest;
use crate::error::{HostError, SandboxError};

/// A guest's bytes: in memory, or a stored blob read on first need.
#[derive(Debug, Clone)]
pub enum GuestBytes {
    /// Already in memory (a file just read, a plugin bundled in the binary).
    Here(Bytes),
    /// A content-addressed blob on disk, not read yet.
    Stored(StoredBlob),
}

/// A blob file whose name is its sha256.
#[derive(Debug, Clone)]
pub struct StoredBlob {
    path: PathBuf,
    digest: Digest,
}

impl StoredBlob {
    /// The blob at `path`, which must hold the bytes of `digest`.
    pub fn new(path: PathBuf, digest: Digest) -> Self {
        StoredBlob { path, digest }
    }

    /// Reads it, checked against its digest: a blob altered on disk is an
    /// error, never run.
    pub fn read(&self) -> Result<Bytes, SandboxError> {
        let io = |what, source| SandboxError::from(HostError::Io { what, path: self.path.clone(), source });
        let bytes = std::fs::read(&self.path).map_err(|e| io("reading", e))?;
        if Digest::of(&bytes) != self.digest {
            return Err(io(
                "verifying",
                std::io::Error::other("the stored bytes do not match their digest (the file was altered)"),
            ));
        }
        Ok(Bytes::from(bytes))
    }
}

impl GuestBytes {
    /// Bytes already in memory, copied once.
    pub fn copy_of(bytes: &[u8]) -> Self {
        GuestBytes::Here(Bytes::copy_from_slice(bytes))
    }

    /// The bytes, read (and checked) if they are a stored blob's.
    pub fn read(&self) -> Result<Bytes, SandboxError> {
        match self {
            GuestBytes::Here(b) => Ok(b.clone()),
            GuestBytes::Stored(blob) => blob.read(),
        }
    }

    /// Their size, without reading a stored blob.
    pub fn size(&self) -> Result<u64, SandboxError> {
        match self {
            GuestBytes::Here(b) => Ok(b.len() as u64),
            GuestBytes::Stored(blob) => std::fs::metadata(&blob.path)
                .map(|m| m.len())
                .map_err(|source| HostError::Io { what: "reading", path: blob.path.clone(), source }.into()),
        }
    }
}

impl From<Vec<u8>> for GuestBytes {
    fn from(v: Vec<u8>) -> Self {
        GuestBytes::Here(Bytes::from(v))
    }
}

impl From<&'static [u8]> for GuestBytes {
    fn from(b: &'static [u8]) -> Self {
        GuestBytes::Here(Bytes::from_static(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_blob_is_read_only_when_asked_and_checked_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob.wasm");
        let good = b"\0asm\x01\0\0\0".to_vec();
        let bytes = GuestBytes::Stored(StoredBlob::new(path.clone(), Digest::of(&good)));
        // Nothing is read until asked: a missing file is no error yet.
        assert!(bytes.size().is_err());
        std::fs::write(&path, &good).unwrap();
        assert_eq!(bytes.size().unwrap(), 8);
        assert_eq!(&bytes.read().unwrap()[..], &good[..]);
        // Altered on disk: refused when read.
        std::fs::write(&path, b"\0asm\x01\0\0\x01").unwrap();
        let err = bytes.read().unwrap_err().to_string();
        assert!(err.contains("do not match their digest"), "{err}");
    }
}
