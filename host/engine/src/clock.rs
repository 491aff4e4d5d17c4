//! Time, injected: the engine never reads the system clock directly.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Milliseconds since the Unix epoch, and a way to wait for a moment.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
    /// Resolves once `now_ms() >= at_ms`.
    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()>;
}

/// The system's time, ms since the Unix epoch: what [`SystemClock`] reads,
/// for the front ends that stamp what they store (templates, journals).
pub fn system_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The system clock, sleeping with tokio timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        system_now_ms()
    }

    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()> {
        let delay = at_ms.saturating_sub(self.now_ms());
        Box::pin(async move {
            if delay > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay as u64)).await;
            }
        })
    }
}

/// A clock that moves only when told (`advance`, `set`): timers fire
/// deterministically in tests.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<tokio::sync::watch::Sender<i64>>,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock { now: Arc::new(tokio::sync::watch::Sender::new(start_ms)) }
    }

    pub fn advance(&self, ms: i64) {
        self.now.send_modify(|t| *t += ms);
    }

    /// Moves the clock to `at_ms` (never backwards).
    pub fn set(&self, at_ms: i64) {
        self.now.send_modify(|t| *t = (*t).max(at_ms));
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'static, ()> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as any clone of the clock; if every
            // clone is gone no one can move time, so never resolve.
            if rx.wait_for(|t| *t >= at_ms).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// RFC 3339 (UTC, millisecond precision) for a time in ms since epoch.
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z", sod / 3600, (sod % 3600) / 60, sod % 60)
}

// Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_795_305_600_000), "2026-11-22T00:00:00.000Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }

    #[tokio::test]
    async fn manual_clock_sleeps_until_advanced() {
        let c = ManualClock::new(100);
        assert_eq!(c.now_ms(), 100);
        let mut fut = c.sleep_until(150);
        // not yet
        assert!(futures_poll_once(&mut fut).await.is_none());
        c.advance(49);
        assert!(futures_poll_once(&mut fut).await.is_none());
        c.advance(1);
        fut.await;
        // past times resolve at once
        c.sleep_until(10).await;
        c.set(20); // never backwards
        assert_eq!(c.now_ms(), 150);
    }

    async fn futures_poll_once(f: &mut BoxFuture<'static, ()>) -> Option<()> {
        tokio::time::timeout(std::time::Duration::from_millis(5), f).await.ok()
    }

    #[tokio::test]
    async fn system_clock_sleep() {
        let c = SystemClock;
        let t0 = c.now_ms();
        c.sleep_until(t0 + 5).await;
        assert!(c.now_ms() >= t0 + 5);
    }
}
