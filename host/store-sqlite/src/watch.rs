//! Writes of other processes, told by the kernel: a [`StoreWatch`] that
//! wakes when the database or its write-ahead log is written (by any
//! process), so a store owner, a `weft run` following a run another
//! process drives, or `weft runs events --follow` wait without reading the
//! database in a loop. Linux (inotify on the database's folder, filtered by
//! the database's file names); elsewhere there is no watch and callers
//! poll.

use std::ffi::OsString;
use std::path::Path;

use futures::{FutureExt as _, StreamExt as _};
use inotify::{EventStream, Inotify, WatchMask};
use weft_engine::store::StoreWatch;

/// A watch on one SQLite database (see the module docs).
pub struct Watch {
    events: EventStream<Vec<u8>>,
    /// `weft.db` and `weft.db-wal`.
    names: [OsString; 2],
}

impl Watch {
    /// Watches the database at `path`; `None` when the kernel refuses, or
    /// outside a tokio runtime (the watch registers with its reactor).
    pub fn new(path: &Path) -> Option<Watch> {
        tokio::runtime::Handle::try_current().ok()?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name()?.to_os_string();
        let mut wal = name.clone();
        wal.push("-wal");
        let inotify = Inotify::init().ok()?;
        inotify.watches().add(dir, WatchMask::MODIFY | WatchMask::CREATE | WatchMask::MOVED_TO).ok()?;
        let events = inotify.into_event_stream(vec![0; 4096]).ok()?;
        Some(Watch { events, names: [name, wal] })
    }
}

#[async_trait::async_trait]
impl StoreWatch for Watch {
    async fn changed(&mut self) -> bool {
        loop {
            match self.events.next().await {
                Some(Ok(e)) if e.name.as_ref().is_some_and(|n| self.names.contains(n)) => {
                    // Writes come in bursts: take the ones already queued.
                    while let Some(Some(Ok(_))) = self.events.next().now_or_never() {}
                    return true;
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return false,
            }
        }
    }
}
