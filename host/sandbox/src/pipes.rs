//! Capped in-memory pipes for a guest's stdout and stderr. Unlike
//! wasmtime-wasi's `MemoryOutputPipe`, a capped pipe never fails a write:
//! bytes past the cap are dropped and the overflow is remembered, so the
//! host decides what a flood means (`output_too_large` for stdout, a
//! truncation marker for logs) instead of the guest seeing odd I/O errors.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

#[derive(Default)]
struct Inner {
    buf: Vec<u8>,
    overflowed: bool,
}

/// An output pipe that keeps at most `cap` bytes.
#[derive(Clone)]
pub(crate) struct CappedPipe {
    cap: usize,
    inner: Arc<Mutex<Inner>>,
}

impl CappedPipe {
    pub(crate) fn new(cap: usize) -> Self {
        CappedPipe { cap, inner: Arc::default() }
    }

    fn push(&self, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = self.cap.saturating_sub(inner.buf.len());
        if bytes.len() > room {
            inner.overflowed = true;
        }
        let take = bytes.len().min(room);
        inner.buf.extend_from_slice(&bytes[..take]);
    }

    /// The bytes kept, and whether any were dropped.
    pub(crate) fn take(&self) -> (Vec<u8>, bool) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (std::mem::take(&mut inner.buf), inner.overflowed)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_the_cap_and_remembers_overflow() {
        let p = CappedPipe::new(5);
        p.push(b"abc");
        assert_eq!(p.take(), (b"abc".to_vec(), false));
        let p = CappedPipe::new(5);
        p.push(b"abc");
        p.push(b"defg");
        assert_eq!(p.take(), (b"abcde".to_vec(), true));
    }
}
