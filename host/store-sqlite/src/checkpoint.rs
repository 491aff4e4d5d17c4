//! Checkpoints off the writer's path.
//!
//! Why: SQLite's automatic checkpoint runs inside the commit that crosses
//! its threshold, on the writer's connection, and syncs the WAL and the
//! database file. On the 2-core VM of docs/performance.md an fsync takes ~0.7
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

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;
use weft_engine::StoreError;

use crate::writer::Writer;
use crate::{Durability, Stats, map_err};

/// Frames in the WAL (~16 MiB) from which the writer checkpoints when idle
/// or wakes the checkpointer; again every half of it while the WAL grows.
/// SQLite's default is 1,000: with a serial writer (one run's `for_each`,
/// W4: ~2.4 frames per item) that meant a checkpoint, two fsyncs on the
/// writer's path, every ~400 items. At 4,000 the same hot pages are copied
/// once per checkpoint instead of four times, and the stalls are a quarter
/// as many: W4 +17% (A/B, 8 pairs), W1's p95 5.5–7.7 → 2.6–3.3 ms, W3
/// throughput and W6 unchanged. The cost is on a new store only: its WAL
/// file grows to ~16 MiB before it first starts over, and until then
/// every commit extends the file (W1's p50 +15–20% on the bench's new
/// store; SQLite keeps the file at its size afterwards).
pub(crate) const WAKE_AT: i32 = 4000;
/// Frames from which the writer checkpoints itself (~64 MiB of WAL).
pub(crate) const WRITER_AT: i32 = 16_000;

struct Signal {
    state: Mutex<State>,
    cv: Condvar,
    path: PathBuf,
    stats: Arc<Stats>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct State {
    pending: bool,
    stop: bool,
    /// The thread was started (at the first wake-up: a short command that
    /// opens the store never pays for it).
    started: bool,
}

impl Signal {
    /// Ask the thread for a checkpoint, starting it if need be.
    fn wake(self: &Arc<Self>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.stop || st.pending {
            return;
        }
        st.pending = true;
        self.cv.notify_one();
        if !st.started {
            st.started = true;
            let me = self.clone();
            // If the thread cannot start, the writer's own checkpoint past
            // WRITER_AT still bounds the WAL.
            if let Ok(t) = std::thread::Builder::new().name("weft-store-ckpt".into()).spawn(move || run(&me)) {
                *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
            }
        }
    }
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

/// The checkpointer thread (started when first needed); stopped by
/// [`Checkpointer::stop`].
pub(crate) struct Checkpointer {
    signal: Arc<Signal>,
}

impl Checkpointer {
    /// Hook the writer's connection; the thread (with its own connection
    /// to `path`) starts at the first wake-up. The hook holds the writer
    /// weakly (the writer owns the connection that owns the hook).
    pub(crate) fn start(writer: &Arc<Writer>, path: &Path, stats: Arc<Stats>) -> Result<Checkpointer, StoreError> {
        let signal = Arc::new(Signal {
            state: Mutex::default(),
            cv: Condvar::new(),
            path: path.to_path_buf(),
            stats: stats.clone(),
            thread: Mutex::default(),
        });
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
        // The WAL's size after the last commit (it starts over after a
        // checkpoint).
        let mut last = 0;
        writer
            .conn
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, frames: i32| {
                let added = if frames >= last { frames - last } else { frames };
                stats.frames.fetch_add(added.max(0) as u64, Ordering::Relaxed);
                last = frames;
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
                    Decision::Wake => s3.wake(),
                }
                Ok(())
            }))
            .map_err(map_err)?;
        Ok(Checkpointer { signal })
    }

    /// Whether the thread was started.
    #[cfg(test)]
    pub(crate) fn started(&self) -> bool {
        self.signal.state.lock().unwrap_or_else(|p| p.into_inner()).started
    }

    /// Stop the thread and wait for it.
    pub(crate) fn stop(&mut self) {
        {
            let mut st = self.signal.state.lock().unwrap_or_else(|p| p.into_inner());
            st.stop = true;
            self.signal.cv.notify_one();
        }
        let thread = self.signal.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(signal: &Signal) {
    let conn = match Connection::open(&signal.path).map_err(map_err).and_then(|c| {
        crate::configure(&c, Durability::Normal)?;
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => {
            // The writer's own checkpoint past WRITER_AT bounds the WAL.
            tracing::warn!(path = %signal.path.display(), "the checkpoint thread could not open the store: {e}");
            return;
        }
    };
    let stats = &signal.stats;
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
