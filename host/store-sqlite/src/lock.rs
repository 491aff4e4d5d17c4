//! The scheduler ownership lock: one process drives a store's runs at a
//! time. An exclusive `flock` on `<db>.lock` (std's `File::try_lock`),
//! held for the life of [`SchedulerLock`]; the file holds the owner's pid
//! so a refused process can say who owns it. The OS drops the lock when
//! the owner dies, even by SIGKILL.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use weft_engine::StoreError;

/// Held while this process owns the scheduler of a store.
#[derive(Debug)]
pub struct SchedulerLock {
    file: File,
    path: PathBuf,
}

impl SchedulerLock {
    /// The lock file of a database file.
    pub fn path_for(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".lock");
        PathBuf::from(p)
    }

    /// Take the lock, or fail with [`StoreError::Locked`] naming the owner.
    pub fn acquire(db: &Path) -> Result<SchedulerLock, StoreError> {
        let path = Self::path_for(db);
        let io = |e: std::io::Error| StoreError::Io(format!("{}: {e}", path.display()));
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut s = String::new();
                let _ = file.read_to_string(&mut s);
                return Err(StoreError::Locked { path: db.display().to_string(), pid: s.trim().parse().ok() });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(SchedulerLock { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SchedulerLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}
