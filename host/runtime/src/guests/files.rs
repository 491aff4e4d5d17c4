//! Guest files: reading one with a cap, and which files a definition sent
//! by an MCP client may name (`[guests] allow_paths`).

use std::path::{Path, PathBuf};

/// The largest guest file read.
pub const MAX_GUEST_BYTES: u64 = 256 << 20;

/// A guest's bytes from a file: a regular file (not a device, a FIFO or a
/// folder) of at most [`MAX_GUEST_BYTES`], read through a cap. The error
/// says what is wrong with the file, never what is in it.
pub fn read_guest_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
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
            "a definition sent over MCP cannot name a file as `code.path`: name a plugin (`{\"plugin\": NAME}`, \
             see plugin_list) or a digest (`{\"sha256\": HEX}`); the operator can allow folders with \
             `[guests] allow_paths`"
                .to_string()
        } else {
            "this `code.path` is outside the folders the operator allowed (`[guests] allow_paths`): name a plugin \
             (see plugin_list) or a digest instead"
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
