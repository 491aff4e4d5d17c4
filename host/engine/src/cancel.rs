//! A cancellation token: fired once, observed by any number of waiters —
//! async ones (`canceled().await`) and synchronous callbacks
//! ([`CancelToken::on_cancel`]), which reach code that holds its thread
//! (a guest running in place) without needing a task to be polled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

type Callback = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Inner {
    fired: AtomicBool,
    notify: Notify,
    /// Registered callbacks by id; taken (and called) by the first cancel.
    callbacks: Mutex<(u64, Vec<(u64, Callback)>)>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("fired", &self.fired).finish_non_exhaustive()
    }
}

/// Unregisters its [`CancelToken::on_cancel`] callback when dropped.
#[must_use = "dropping the guard unregisters the callback"]
pub struct OnCancel {
    inner: Arc<Inner>,
    id: Option<u64>,
}

impl Drop for OnCancel {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let mut cbs = self.inner.callbacks.lock().unwrap_or_else(|p| p.into_inner());
            cbs.1.retain(|(i, _)| *i != id);
        }
    }
}

/// Cloneable; every clone observes the same cancellation.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

impl CancelToken {
    pub fn new() -> Self {
        CancelToken::default()
    }

    pub fn cancel(&self) {
        if !self.inner.fired.swap(true, Ordering::SeqCst) {
            self.inner.notify.notify_waiters();
            let taken = std::mem::take(&mut self.inner.callbacks.lock().unwrap_or_else(|p| p.into_inner()).1);
            for (_, f) in taken {
                f();
            }
        }
    }

    /// Calls `f` on the thread that fires the token (at once, here, if it
    /// already was), unless the returned guard is dropped first. `f` must
    /// be quick: it runs inside [`CancelToken::cancel`].
    pub fn on_cancel(&self, f: impl FnOnce() + Send + 'static) -> OnCancel {
        let mut cbs = self.inner.callbacks.lock().unwrap_or_else(|p| p.into_inner());
        // Checked under the lock `cancel` takes after firing: either it
        // sees the callback or we see the fired flag.
        if self.is_canceled() {
            drop(cbs);
            f();
            return OnCancel { inner: self.inner.clone(), id: None };
        }
        cbs.0 += 1;
        let id = cbs.0;
        cbs.1.push((id, Box::new(f)));
        OnCancel { inner: self.inner.clone(), id: Some(id) }
    }

    pub fn is_canceled(&self) -> bool {
        self.inner.fired.load(Ordering::SeqCst)
    }

    /// Resolves once the token is fired (at once if it already was).
    pub async fn canceled(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            // Register before checking, so a cancel in between is not lost.
            notified.as_mut().enable();
            if self.is_canceled() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_all_waiters_once() {
        let t = CancelToken::new();
        let t2 = t.clone();
        let h = tokio::spawn(async move { t2.canceled().await });
        tokio::task::yield_now().await;
        assert!(!t.is_canceled());
        t.cancel();
        t.cancel();
        h.await.unwrap();
        assert!(t.is_canceled());
        t.canceled().await; // already fired: immediate
    }

    #[test]
    fn callbacks_run_once_unless_unregistered() {
        use std::sync::atomic::AtomicUsize;
        let t = CancelToken::new();
        let hits = Arc::new(AtomicUsize::new(0));
        let (h1, h2, h3) = (hits.clone(), hits.clone(), hits.clone());
        let kept = t.on_cancel(move || {
            h1.fetch_add(1, Ordering::SeqCst);
        });
        let dropped = t.on_cancel(move || {
            h2.fetch_add(100, Ordering::SeqCst);
        });
        drop(dropped);
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        let t2 = t.clone();
        std::thread::spawn(move || t2.cancel()).join().unwrap();
        t.cancel();
        assert_eq!(hits.load(Ordering::SeqCst), 1, "the kept one ran once, the dropped one never");
        drop(kept);
        // Registering on a fired token calls at once.
        let late = t.on_cancel(move || {
            h3.fetch_add(10, Ordering::SeqCst);
        });
        assert_eq!(hits.load(Ordering::SeqCst), 11);
        drop(late);
    }
}
