//! The scheduler ownership lock: one process drives a store's runs at a
//! time. An exclusive `flock` on `<db>.lock` (std's `File::try_lock`),
//! held for the life of [`SchedulerLock`]; the file holds the owner's pid
//! so a refused process can say who owns it. The OS drops the lock when
//! the owner dies, even by SIGKILL.
//!
//! Some commands own the store for a moment only (`weft signal` answering
//! a run in the store when no worker runs): they mark the file `brief`,
//! and a worker that starts meanwhile waits for them instead of refusing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use weft_engine::StoreError;

/// How a short command marks the lock file after its pid.
const BRIEF: &str = "brief";

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
        Self::take(db, false)
    }

    /// Take the lock for a moment (a short command): marked so that an
    /// owner starting meanwhile waits for it (see [`acquire_patiently`]).
    ///
    /// [`acquire_patiently`]: Self::acquire_patiently
    pub fn acquire_briefly(db: &Path) -> Result<SchedulerLock, StoreError> {
        Self::take(db, true)
    }

    /// Take the lock as a long-lived owner (a worker, a server): while a
    /// short command holds it, wait for it (at most `patience`); another
    /// owner is refused at once.
    pub fn acquire_patiently(db: &Path, patience: std::time::Duration) -> Result<SchedulerLock, StoreError> {
        let start = std::time::Instant::now();
        loop {
            match Self::take(db, false) {
                Err(StoreError::Locked { .. }) if start.elapsed() < patience && Self::held_briefly(db) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => return r,
            }
        }
    }

    /// The holder is a short command, or has just taken the lock and not
    /// yet said who it is: the file is empty, or still names an owner that
    /// is gone (killed, so it could not clear the file).
    fn held_briefly(db: &Path) -> bool {
        let s = std::fs::read_to_string(Self::path_for(db)).unwrap_or_default();
        let gone = |pid: &str| Path::new("/proc/self").exists() && !Path::new("/proc").join(pid).exists();
        match s.split_whitespace().next() {
            None => true,
            Some(pid) => s.trim_end().ends_with(BRIEF) || gone(pid),
        }
    }

    fn take(db: &Path, brief: bool) -> Result<SchedulerLock, StoreError> {
        let path = Self::path_for(db);
        let io = |e: std::io::Error| StoreError::Io(format!("{}: {e}", path.display()));
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut s = String::new();
                let _ = file.read_to_string(&mut s);
                let pid = s.split_whitespace().next().and_then(|p| p.parse().ok());
                return Err(StoreError::Locked { path: db.display().to_string(), pid });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        match brief {
            true => write!(file, "{} {BRIEF}", std::process::id()),
            false => write!(file, "{}", std::process::id()),
        }
        .map_err(io)?;
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
