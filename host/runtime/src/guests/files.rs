//! Guest files: reading one with a cap, its digest remembered by its stamp
//! (so a settled file is not read again), and which files a definition
//! sent by an MCP client may name (`[guests] allow_paths`).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use weft_sandbox::{Digest, FileDigests, GuestBytes, Stamp, StoredBlob};

/// The largest guest file read.
pub const MAX_GUEST_BYTES: u64 = 256 << 20;

/// A guest file's metadata, if it is a regular file (not a device, a FIFO
/// or a folder) of at most [`MAX_GUEST_BYTES`]. The error says what is
/// wrong with the file, never what is in it.
fn checked(path: &Path) -> Result<std::fs::Metadata, String> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("no file {}", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() > MAX_GUEST_BYTES {
        return Err(format!(
            "{} is {} bytes, over the {MAX_GUEST_BYTES}-byte cap on guests",
            path.display(),
            meta.len()
        ));
    }
    Ok(meta)
}

/// A guest's bytes from a file (see `checked`), read through a cap.
pub fn read_guest_file(path: &Path) -> Result<Vec<u8>, String> {
    checked(path)?;
    read_capped(path)
}

/// The bytes of a file [`checked`] already passed, read through the cap
/// (it may have grown since).
fn read_capped(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = vec![];
    file.take(MAX_GUEST_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_GUEST_BYTES {
        return Err(format!("{} grew past the {MAX_GUEST_BYTES}-byte cap on guests", path.display()));
    }
    Ok(bytes)
}

/// A guest file's digest and bytes. With a memo, a file whose stamp it
/// knows is not read (its bytes are read, and checked against the digest,
/// only if something needs them); any other file is read and hashed, and
/// its digest remembered once it has settled (see [`FileDigests`]).
pub fn guest_file(memo: Option<&FileDigests>, path: &Path) -> Result<(Digest, GuestBytes), String> {
    let meta = checked(path)?;
    let Some((memo, before)) = memo.zip(Stamp::of(&meta)) else {
        let bytes = read_capped(path)?;
        return Ok((Digest::of(&bytes), bytes.into()));
    };
    if let Some(digest) = memo.known(path, &before) {
        return Ok((digest, GuestBytes::Stored(StoredBlob::new(path.to_path_buf(), digest))));
    }
    let bytes = read_capped(path)?;
    let digest = Digest::of(&bytes);
    if let Some(after) = std::fs::metadata(path).ok().and_then(|m| Stamp::of(&m)) {
        memo.remember(path, &before, &after, &digest, SystemTime::now());
    }
    Ok((digest, bytes.into()))
}

/// Whether a definition sent by a client may name the file `p`: only
/// under a folder of `[guests] allow_paths`. Checked on the path as
/// written (no file is looked at outside those folders, so a client
/// cannot learn what exists), then on the real path (symlinks resolved).
pub fn client_path_allowed(allowed: &[PathBuf], base_dir: &Path, p: &str) -> Result<(), String> {
    let lexical = |path: &Path| -> PathBuf {
        let mut out = PathBuf::new();
        for c in path.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    let refused = || {
        if allowed.is_empty() {
            "a definition a client sends (over MCP or the HTTP API) cannot name a file as `code.path`: name a \
             plugin (`{\"plugin\": NAME}`: the MCP tool plugin_list, or `weft plugin list`) or a digest \
             (`{\"sha256\": HEX}`); the operator can allow folders with `[guests] allow_paths`"
                .to_string()
        } else {
            "this `code.path` is outside the folders the operator allowed (`[guests] allow_paths`): name a plugin \
             (the MCP tool plugin_list, or `weft plugin list`) or a digest instead"
                .to_string()
        }
    };
    let path = lexical(&resolve_path(base_dir, p));
    let dirs: Vec<PathBuf> = allowed.iter().map(|d| lexical(&resolve_path(base_dir, &d.to_string_lossy()))).collect();
    if !dirs.iter().any(|d| path.starts_with(d)) {
        return Err(refused());
    }
    if let Ok(real) = path.canonicalize() {
        let real_dirs: Vec<PathBuf> = dirs.iter().filter_map(|d| d.canonicalize().ok()).collect();
        if !real_dirs.iter().any(|d| real.starts_with(d)) {
            return Err(refused());
        }
    }
    Ok(())
}

/// `p` as is when absolute, else joined to `base_dir`.
pub fn resolve_path(base_dir: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() { path.to_path_buf() } else { base_dir.join(path) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Bytes this process has read so far (`rchar` of /proc/self/io).
    fn bytes_read() -> u64 {
        let io = std::fs::read_to_string("/proc/self/io").unwrap();
        io.lines().find_map(|l| l.strip_prefix("rchar: ")).unwrap().parse().unwrap()
    }

    /// `guest_file`, and how many bytes it read.
    fn resolve(memo: &FileDigests, path: &Path) -> (Digest, GuestBytes, u64) {
        let before = bytes_read();
        let (digest, bytes) = guest_file(Some(memo), path).unwrap();
        (digest, bytes, bytes_read() - before)
    }

    #[test]
    fn a_settled_guest_file_is_hashed_once_and_read_again_only_when_it_changes() {
        const SIZE: usize = 4 << 20;
        let dir = tempfile::tempdir().unwrap();
        let memo = FileDigests::new(&dir.path().join("memo"));
        let path = dir.path().join("guest.wasm");
        let one = vec![1u8; SIZE];
        std::fs::write(&path, &one).unwrap();

        // Just written: read and hashed every time (a write in the same
        // clock tick could go unseen), so nothing is remembered yet.
        for _ in 0..2 {
            let (digest, _, read) = resolve(&memo, &path);
            assert_eq!(digest, Digest::of(&one));
            assert!(read >= SIZE as u64, "read {read} bytes");
        }

        // Settled: hashed once more, then known without reading.
        std::thread::sleep(weft_sandbox::SETTLED + std::time::Duration::from_millis(100));
        let (digest, _, read) = resolve(&memo, &path);
        assert!(read >= SIZE as u64 && digest == Digest::of(&one));
        let (digest, bytes, read) = resolve(&memo, &path);
        assert_eq!(digest, Digest::of(&one));
        assert!(read < 64 << 10, "a known file was read ({read} bytes)");
        assert!(matches!(bytes, GuestBytes::Stored(_)));
        // The bytes, when something needs them, are the file's, checked.
        assert_eq!(bytes.read().unwrap().as_ref(), one.as_slice());

        // Rewritten with the same size: a new stamp, read and hashed again.
        let two = vec![2u8; SIZE];
        std::fs::write(&path, &two).unwrap();
        let (digest, bytes, read) = resolve(&memo, &path);
        assert_eq!(digest, Digest::of(&two));
        assert!(read >= SIZE as u64);
        assert_eq!(bytes.read().unwrap().as_ref(), two.as_slice());
        // And a remembered stamp whose file changed under it is refused
        // when read, never run as the old bytes.
        assert!(GuestBytes::Stored(StoredBlob::new(path.clone(), Digest::of(&one))).read().is_err());

        // Without a memo every resolve reads.
        let before = bytes_read();
        assert_eq!(guest_file(None, &path).unwrap().0, Digest::of(&two));
        assert!(bytes_read() - before >= SIZE as u64);
    }
}
