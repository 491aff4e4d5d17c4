//! A cancellation token: fired once, observed by any number of waiters.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

#[derive(Debug, Default)]
struct Inner {
    fired: AtomicBool,
    notify: Notify,
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
        }
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
}
