//! Digests of guest files, remembered by the file's identity. A guest
//! given as a file (`weft step run build/x.wasm`, a definition's
//! `code.path`) is found in the artifact cache by its sha256, and reading
//! and hashing a 12–19 MB JavaScript or Python component costs 10–17 ms on
//! this project's VM, against ~1 ms to map its compiled artifact. So, as
//! git's index and ccache do, the digest is remembered, per real path,
//! beside the file's stamp (device, inode, size, modification and change
//! times, in ns). While the stamp is unchanged the file is not read at
//! all, until something needs its bytes (then they are checked against
//! the digest, as a stored blob's are: see [`crate::GuestBytes`]).
//!
//! A write changes the stamp: it moves the modification and change times
//! (the change time cannot be set back, not even by tools that restore a
//! modification time), or the inode. The one gap is a write within the
//! same clock tick as the stamp was taken, so, like git's "racy" rule, a
//! digest is only remembered for a file left unchanged for
//! [`SETTLED`] before it was read, and only if the stamp did not move while
//! it was read. A memo that cannot be read or written is simply not used.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cache::write_atomic;
use crate::digest::Digest;

/// How long a file must have been left unchanged for its digest to be
/// remembered: far more than a file-system clock tick.
pub const SETTLED: Duration = Duration::from_secs(2);

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Stamp {
    /// The stamp of a file's metadata (None where the platform has no inodes).
    pub fn of(meta: &std::fs::Metadata) -> Option<Stamp> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
            Some(Stamp {
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.size(),
                mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
                ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            None
        }
    }

    /// Whether the file last changed at least [`SETTLED`] before `now`.
    fn settled(&self, now: SystemTime) -> bool {
        let Ok(now) = now.duration_since(SystemTime::UNIX_EPOCH) else { return false };
        let last = self.mtime_ns.max(self.ctime_ns);
        i128::try_from(now.as_nanos()).is_ok_and(|now| now - last >= SETTLED.as_nanos() as i128)
    }

    fn head(&self) -> String {
        format!("{} {} {} {} {}", self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns)
    }
}

/// The memo: one small file per guest file's real path (so rebuilding a
/// guest replaces its entry), in a cache folder.
#[derive(Debug, Clone)]
pub struct FileDigests {
    dir: PathBuf,
}

impl FileDigests {
    /// A memo kept in `dir` (created on first use).
    pub fn new(dir: &Path) -> Self {
        FileDigests { dir: dir.to_path_buf() }
    }

    fn entry(&self, file: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(file).ok()?;
        let key = Digest::of(real.as_os_str().as_encoded_bytes()).hex();
        Some(self.dir.join(&key[..32]))
    }

    /// The digest remembered for `file` if its stamp is still `stamp`.
    pub fn known(&self, file: &Path, stamp: &Stamp) -> Option<Digest> {
        let text = std::fs::read_to_string(self.entry(file)?).ok()?;
        let (head, hex) = text.trim_end().rsplit_once(' ')?;
        if head != stamp.head() {
            return None;
        }
        hex.parse().ok()
    }

    /// Remembers `digest` for `file`, read with stamp `before` (taken
    /// before reading) and `after` (taken after), if the two agree and the
    /// file had settled by `now`.
    pub fn remember(&self, file: &Path, before: &Stamp, after: &Stamp, digest: &Digest, now: SystemTime) {
        if before == after
            && before.settled(now)
            && let Some(entry) = self.entry(file)
        {
            let line = format!("{} {}\n", before.head(), digest.hex());
            let _ = write_atomic(&entry, line.as_bytes());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn stamp_of(path: &Path) -> Stamp {
        Stamp::of(&std::fs::metadata(path).unwrap()).unwrap()
    }

    #[test]
    fn a_settled_file_is_known_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let memo = FileDigests::new(&dir.path().join("memo"));
        let file = dir.path().join("guest.wasm");
        std::fs::write(&file, b"one").unwrap();
        let stamp = stamp_of(&file);
        let digest = Digest::of(b"one");
        let later = SystemTime::now() + SETTLED;

        // Just written: racy, not remembered; stamps that moved: neither.
        memo.remember(&file, &stamp, &stamp, &digest, SystemTime::now());
        assert_eq!(memo.known(&file, &stamp), None);
        let moved = Stamp { size: 4, ..stamp };
        memo.remember(&file, &stamp, &moved, &digest, later);
        assert_eq!(memo.known(&file, &stamp), None);

        memo.remember(&file, &stamp, &stamp, &digest, later);
        assert_eq!(memo.known(&file, &stamp), Some(digest));

        // Rewritten with the same size: another stamp, unknown.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&file, b"two").unwrap();
        let rewritten = stamp_of(&file);
        assert_ne!(rewritten, stamp);
        assert_eq!(memo.known(&file, &rewritten), None);
        // A modification time set back does not bring the old digest back:
        // the change time moved.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap() - Duration::from_millis(20);
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
        assert_eq!(memo.known(&file, &stamp_of(&file)), None);

        // A torn or foreign memo entry is ignored.
        std::fs::write(memo.entry(&file).unwrap(), b"garbage").unwrap();
        assert_eq!(memo.known(&file, &stamp), None);
    }
}
