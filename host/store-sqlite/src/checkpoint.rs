//! Checkpoints off the writer's path.
//!
//! Why: SQLite's automatic checkpoint runs inside the commit that crosses
//! its threshold, on the writer's connection, and syncs the WAL and the
//! database file. On the 2-core VM of performance.md an fsync takes ~0.7
//! ms (p50) to ~3 ms (p90) of wall time, during which no transaction can
//! commit and every run waits: under W3 that was a quarter of the wall
//! time, with both cores idle.
//!
//! Here the writer's connection watches the WAL's size (a WAL hook, which
//! replaces the automatic checkpoint). Past [`WAKE_AT`] frames:
//!
//! - if nobody waits for the writer (this transaction carried one batch
//!   and none is queued: one run at a time, the end of a burst), it
//!   checkpoints itself, as SQLite would: the stall delays no
//!   one else, and the WAL starts over from its beginning at the next
//!   commit, so it stays small (a WAL that grows makes every commit extend
//!   the file, ~30% slower, and at `durability = "full"` every fsync
//!   update the file's size too);
//! - if batches are waiting, it wakes a thread with a connection of its
//!   own, which runs a passive checkpoint concurrently with the writer (WAL
//!   mode allows it: the writer keeps appending meanwhile). The writer's
//!   own checkpoint at the next idle moment then has little left to copy.
//!
//! Should the writer never be idle, it checkpoints itself past
//! [`WRITER_AT`] frames regardless: the WAL stays bounded.
//!
//! Only at `durability = "normal"`: at `"full"` every commit waits for an
//! fsync anyway, and the checkpointer's fsyncs competed with those.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;
use weft_engine::StoreError;

use crate::writer::Writer;
use crate::{Durability, Stats, map_err};

/// Frames in the WAL from which the writer wakes the checkpointer (SQLite's
/// own default threshold); again every half of it while the WAL grows.
pub(crate) const WAKE_AT: i32 = 1000;
/// Frames from which the writer checkpoints itself (~64 MiB of WAL).
pub(crate) const WRITER_AT: i32 = 16_000;

#[derive(Default)]
struct Signal {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    pending: bool,
    stop: bool,
}

/// What the writer does after a commit that left `frames` in the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    Nothing,
    /// Checkpoint on the writer's connection, now.
    Checkpoint,
    /// Wake the checkpointer thread.
    Wake,
}

/// See the module docs. `next_wake`: the WAL size at which to wake the
/// checkpointer next (it is woken again only as the WAL keeps growing).
pub(crate) fn decide(frames: i32, idle: &dyn Fn() -> bool, next_wake: &mut i32) -> Decision {
    if frames < WAKE_AT {
        // Below the threshold, or the WAL started over.
        *next_wake = WAKE_AT;
        Decision::Nothing
    } else if frames >= WRITER_AT || idle() {
        Decision::Checkpoint
    } else if frames >= *next_wake {
        *next_wake = frames + WAKE_AT / 2;
        Decision::Wake
    } else {
        Decision::Nothing
    }
}

/// The checkpointer thread; stopped (after a last checkpoint) by [`Checkpointer::stop`].
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Start the thread (with its own connection to `path`) and hook the
    /// writer's connection to it. The hook holds the writer weakly (the
    /// writer owns the connection that owns the hook).
    pub(crate) fn start(writer: &Arc<Writer>, path: &Path, stats: Arc<Stats>) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open(path).map_err(map_err)?;
        crate::configure(&conn, Durability::Normal)?;
        let signal = Arc::new(Signal::default());
        let s2 = signal.clone();
        let st2 = stats.clone();
        let thread = std::thread::Builder::new()
            .name("weft-store-ckpt".into())
            .spawn(move || run(conn, s2, st2))
            .map_err(|e| StoreError::Io(e.to_string()))?;
        let s3 = signal.clone();
        let w = Arc::downgrade(writer);
        // Idle: this transaction carried one message and none is queued
        // (the queue is often empty for a moment under load too, just
        // after a leader took all of it).
        let idle = move || {
            w.upgrade().is_none_or(|w| {
                let q = w.queue.lock().unwrap_or_else(|p| p.into_inner());
                q.msgs.is_empty() && q.last_group <= 1
            })
        };
        let mut next_wake = WAKE_AT;
        writer
            .conn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, frames: i32| {
                match decide(frames, &idle, &mut next_wake) {
                    Decision::Nothing => {}
                    Decision::Checkpoint => {
                        // An error here would make the commit that called
                        // us report one, though it is durable: never return
                        // it (a checkpoint that could not run is tried
                        // again at the next commit).
                        if wal.checkpoint().is_ok() {
                            stats.writer_checkpoints.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Decision::Wake => {
                        let mut st = s3.state.lock().unwrap_or_else(|p| p.into_inner());
                        if !st.pending {
                            st.pending = true;
                            s3.cv.notify_one();
                        }
                    }
                }
                Ok(())
            }))
            .map_err(map_err)?;
        Ok(Checkpointer { signal, thread: Some(thread) })
    }

    /// Stop the thread and wait for it.
    pub(crate) fn stop(&mut self) {
        {
            let mut st = self.signal.state.lock().unwrap_or_else(|p| p.into_inner());
            st.stop = true;
            self.signal.cv.notify_one();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(conn: Connection, signal: Arc<Signal>, stats: Arc<Stats>) {
    loop {
        {
            let mut st = signal.state.lock().unwrap_or_else(|p| p.into_inner());
            while !st.pending && !st.stop {
                st = signal.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.stop {
                return;
            }
            st.pending = false;
        }
        // Passive: copies what it can without waiting for anyone; the next
        // wake-up copies the rest. A failure (an I/O error) is left to the
        // writer's own checkpoint past WRITER_AT, which reports nothing
        // either: the WAL keeps every commit until a checkpoint succeeds.
        if conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).is_ok() {
            stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
    }
}
