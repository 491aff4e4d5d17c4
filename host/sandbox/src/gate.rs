//! Admission of guests: how many compute at once (CPU slots, default the
//! machine's cores) and how much memory all of them may hold (the guest
//! memory budget, default half the machine's memory), granted in priority
//! order.
//!
//! Why: without a bound, every ready step runs at once; forty 600 ms CPU
//! steps on two cores each take twenty times longer than they should and
//! all time out together, and fifty guests of 60 MiB take 3 GB. Here a
//! guest waits for its slot before it starts, and its timeout starts when
//! it does (the wait is the engine's, reported through
//! [`Observer::admitted`](crate::Observer::admitted)).
//!
//! - A guest reserves its whole memory limit (`limits.memory_mb`, at most
//!   the budget) for its whole invocation.
//! - It holds a CPU slot only while it computes: parked in a host call (a
//!   sleep, a socket) it gives the slot back (`Gated`) and takes one
//!   again, before anyone new, when it wakes. A guest that yields (at an
//!   epoch tick, or every slice of fuel) keeps its slot: it is computing.
//!   A yield is told from a park by the wake: a yielding guest wakes its
//!   task before it returns, a parked one later.
//! - Waiters are served by priority (the step's `priority`, higher first),
//!   then in arrival order. One that wants memory the budget does not have
//!   holds back only later waiters that want memory too (so a large guest
//!   is not starved); guests waking from a host call already hold theirs
//!   and pass.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// CPU slots and the memory budget.
pub struct Gate {
    state: Mutex<State>,
    cpus: usize,
    budget_mb: u64,
}

struct State {
    free_cpus: usize,
    free_mb: u64,
    /// Keyed by (class, higher priority first, arrival).
    queue: BTreeMap<(u8, i64, u64), Waiter>,
    seq: u64,
}

struct Waiter {
    mb: u64,
    tx: oneshot::Sender<()>,
}

/// Waiters that already hold memory (woken from a host call) come first.
const RESUMING: u8 = 0;
const STARTING: u8 = 1;

impl Gate {
    /// A gate of `cpus` slots and `budget_mb` MiB (each at least 1).
    pub fn new(cpus: usize, budget_mb: u64) -> Arc<Gate> {
        let (cpus, budget_mb) = (cpus.max(1), budget_mb.max(1));
        Arc::new(Gate {
            state: Mutex::new(State { free_cpus: cpus, free_mb: budget_mb, queue: BTreeMap::new(), seq: 0 }),
            cpus,
            budget_mb,
        })
    }

    /// How many guests may compute at once.
    pub fn cpus(&self) -> usize {
        self.cpus
    }

    /// The memory all guests together may reserve, MiB.
    pub fn budget_mb(&self) -> u64 {
        self.budget_mb
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for a CPU slot and `memory_bytes` of the budget (rounded up to
    /// MiB, at most the whole budget), serving higher `priority` first.
    pub async fn admit(self: &Arc<Self>, priority: i64, memory_bytes: usize) -> Admitted {
        let mb = self.mb_of(memory_bytes);
        self.wait(STARTING, priority, mb).await;
        Admitted { gate: self.clone(), mb, cpu: true }
    }

    /// [`admit`](Self::admit) when a slot and the memory are free now and
    /// nobody waits ahead; `None` otherwise.
    pub fn try_admit(self: &Arc<Self>, memory_bytes: usize) -> Option<Admitted> {
        let mb = self.mb_of(memory_bytes);
        self.lock().take_now(mb).then(|| Admitted { gate: self.clone(), mb, cpu: true })
    }

    /// What a guest of `memory_bytes` reserves: whole MiB, at most the budget.
    fn mb_of(&self, memory_bytes: usize) -> u64 {
        (memory_bytes as u64).div_ceil(1 << 20).clamp(1, self.budget_mb)
    }

    async fn wait(self: &Arc<Self>, class: u8, priority: i64, mb: u64) {
        let rx = {
            let mut st = self.lock();
            // Nobody ahead: take it now.
            if st.take_now(mb) {
                return;
            }
            let (tx, rx) = oneshot::channel();
            st.seq += 1;
            let key = (class, priority.saturating_neg(), st.seq);
            st.queue.insert(key, Waiter { mb, tx });
            // What is free may be enough for it (a guest resuming passes
            // one that waits for memory).
            st.dispatch();
            Pending { gate: self, key, rx, mb }
        };
        rx.await
    }

    /// Gives back a CPU slot and `mb`, and serves the waiters.
    fn release(&self, cpu: bool, mb: u64) {
        let mut st = self.lock();
        st.free_cpus += usize::from(cpu);
        st.free_mb += mb;
        st.dispatch();
    }
}

impl State {
    /// Takes a CPU slot and `mb` when nobody waits ahead and both are free.
    fn take_now(&mut self, mb: u64) -> bool {
        let free = self.queue.is_empty() && self.free_cpus > 0 && self.free_mb >= mb;
        if free {
            self.free_cpus -= 1;
            self.free_mb -= mb;
        }
        free
    }

    fn dispatch(&mut self) {
        let mut memory_blocked = false;
        let keys: Vec<(u8, i64, u64)> = self.queue.keys().copied().collect();
        for key in keys {
            if self.free_cpus == 0 {
                break;
            }
            let mb = self.queue[&key].mb;
            if mb > 0 && (memory_blocked || mb > self.free_mb) {
                memory_blocked = true;
                continue;
            }
            let w = self.queue.remove(&key).expect("listed");
            if w.tx.send(()).is_ok() {
                self.free_cpus -= 1;
                self.free_mb -= mb;
            }
        }
    }
}

/// A place in the queue; dropped before it is served, it leaves the
/// queue, and dropped after, it gives back what it was granted.
struct Pending<'a> {
    gate: &'a Arc<Gate>,
    key: (u8, i64, u64),
    rx: oneshot::Receiver<()>,
    mb: u64,
}

impl Future for Pending<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(())) => {
                self.mb = u64::MAX; // served: nothing to undo
                Poll::Ready(())
            }
            // The sender is only dropped when served or removed by us.
            Poll::Ready(Err(_)) => Poll::Pending,
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.mb == u64::MAX {
            return;
        }
        let mut st = self.gate.lock();
        if st.queue.remove(&self.key).is_none() {
            // Served between our last poll and now: give it back.
            st.free_cpus += 1;
            st.free_mb += self.mb;
            st.dispatch();
        }
    }
}

/// A guest's admission: its memory for the whole invocation, and a CPU
/// slot while it computes. Dropped, it gives back what it holds.
pub struct Admitted {
    gate: Arc<Gate>,
    mb: u64,
    cpu: bool,
}

impl Admitted {
    /// Parked in a host call: the CPU slot goes to another guest.
    fn park(&mut self) {
        if self.cpu {
            self.cpu = false;
            self.gate.release(true, 0);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.gate.release(self.cpu, self.mb);
    }
}

thread_local! {
    /// While a guest is polled: how long it has waited to get its CPU slot
    /// back after host calls; its deadline moves by as much.
    static EXTENSION: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Sets [`extension`] for one poll.
struct Extension(Duration);

impl Extension {
    fn enter(d: Duration) -> Extension {
        Extension(EXTENSION.with(|e| e.replace(d)))
    }
}

impl Drop for Extension {
    fn drop(&mut self) {
        EXTENSION.with(|e| e.set(self.0));
    }
}

/// How far the deadline of the guest polled on this thread has moved (the
/// time it waited for its CPU slot after host calls; zero elsewhere).
pub(crate) fn extension() -> Duration {
    EXTENSION.with(|e| e.get())
}

/// The waker a guest is polled with: it passes wakes on to the task's
/// waker and notes whether one came during the poll (a yield: the guest
/// wants to go on at once) or not (a park: it waits for a host call).
#[derive(Default)]
struct WakeSeen {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for WakeSeen {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if let Some(w) = self.task.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            w.wake_by_ref();
        }
    }
}

/// Runs an invocation's future under its [`Admitted`]: the CPU slot is
/// given back while the guest is parked in a host call and taken again
/// (ahead of guests not yet started) when it wakes. `waited` adds up the
/// time spent getting it back.
pub(crate) struct Gated<F> {
    inner: Pin<Box<F>>,
    admitted: Admitted,
    priority: i64,
    resume: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    resume_from: Option<Instant>,
    pub(crate) waited: Arc<Mutex<Duration>>,
    /// wasmtime's lines about this guest go here while it is polled.
    host_lines: Arc<crate::host_log::HostLines>,
    /// Told when the guest waits for its slot again, and gets it.
    observer: Option<Arc<dyn crate::Observer>>,
    /// The waker the guest is polled with, and what it saw.
    seen: Arc<WakeSeen>,
    waker: Waker,
}

impl<F: Future> Gated<F> {
    pub(crate) fn new(
        inner: F,
        admitted: Admitted,
        priority: i64,
        host_lines: Arc<crate::host_log::HostLines>,
        observer: Option<Arc<dyn crate::Observer>>,
    ) -> Self {
        let seen = Arc::new(WakeSeen::default());
        Gated {
            inner: Box::pin(inner),
            admitted,
            priority,
            resume: None,
            resume_from: None,
            waited: Arc::default(),
            host_lines,
            observer,
            seen: seen.clone(),
            waker: Waker::from(seen),
        }
    }
}

impl<F: Future> Future for Gated<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if !this.admitted.cpu {
            let gate = this.admitted.gate.clone();
            let priority = this.priority;
            let resume =
                this.resume.get_or_insert_with(|| Box::pin(async move { gate.wait(RESUMING, priority, 0).await }));
            match resume.as_mut().poll(cx) {
                Poll::Pending => {
                    if this.resume_from.is_none() {
                        // It waits: its timeouts pause until it resumes.
                        this.resume_from = Some(Instant::now());
                        if let Some(o) = &this.observer {
                            o.queued();
                        }
                    }
                    return Poll::Pending;
                }
                Poll::Ready(()) => {
                    this.resume = None;
                    this.admitted.cpu = true;
                    if let Some(from) = this.resume_from.take() {
                        let waited = from.elapsed();
                        *this.waited.lock().unwrap_or_else(|p| p.into_inner()) += waited;
                        if let Some(o) = &this.observer {
                            o.admitted(waited);
                        }
                    }
                }
            }
        }
        {
            let mut task = this.seen.task.lock().unwrap_or_else(|p| p.into_inner());
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        this.seen.woken.store(false, Ordering::SeqCst);
        let extension = *this.waited.lock().unwrap_or_else(|p| p.into_inner());
        let out = {
            let _lines = crate::host_log::Scope::enter(&this.host_lines);
            let _extension = Extension::enter(extension);
            this.inner.as_mut().poll(&mut Context::from_waker(&this.waker))
        };
        if out.is_pending() && !this.seen.woken.load(Ordering::SeqCst) {
            this.admitted.park();
        }
        out
    }
}

/// The machine's cores (what `std` says this process may use).
pub fn default_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Half the memory this process may use: the machine's, or its cgroup's
/// limit when lower; 1 GiB when neither can be read.
pub fn default_budget_mb() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb / 1024)
    });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .map(|b| b >> 20);
    let total = match (machine, cgroup) {
        (Some(m), Some(c)) => m.min(c),
        (a, b) => a.or(b).unwrap_or(2048),
    };
    (total / 2).max(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_most_cpus_at_once_then_by_priority() {
        let gate = Gate::new(1, 1024);
        let first = gate.admit(0, 1 << 20).await;
        let order = Arc::new(Mutex::new(vec![]));
        let mut tasks = vec![];
        for (name, prio) in [("low", 0), ("high", 5), ("mid", 1)] {
            let (g, o) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let a = g.admit(prio, 1 << 20).await;
                o.lock().unwrap().push(name);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(a);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(order.lock().unwrap().is_empty(), "one CPU slot, held");
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["high", "mid", "low"]);
    }

    #[tokio::test]
    async fn memory_is_reserved_and_a_large_waiter_is_not_passed_by_later_ones() {
        let gate = Gate::new(8, 100);
        let a = gate.admit(0, 60 << 20).await;
        let big = tokio::spawn({
            let g = gate.clone();
            async move { g.admit(0, 50 << 20).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        // 40 MiB are free, but the 50 MiB waiter came first.
        let small = tokio::time::timeout(Duration::from_millis(50), gate.admit(0, 10 << 20)).await;
        assert!(small.is_err(), "a later small guest must not pass a waiting large one");
        drop(a);
        let b = big.await.unwrap();
        assert_eq!(gate.lock().free_mb, 50);
        drop(b);
        assert_eq!(gate.lock().free_mb, 100);
    }

    #[tokio::test]
    async fn a_dropped_waiter_leaves_the_queue_and_gives_back_a_grant() {
        let gate = Gate::new(1, 10);
        let a = gate.admit(0, 1).await;
        let waiting = tokio::time::timeout(Duration::from_millis(20), gate.admit(0, 1)).await;
        assert!(waiting.is_err());
        assert!(gate.lock().queue.is_empty(), "the timed-out waiter left the queue");
        drop(a);
        let st = gate.lock();
        assert_eq!((st.free_cpus, st.free_mb), (1, 10));
    }

    /// A guest that yields as wasmtime makes it (at an epoch tick, or a
    /// slice of fuel: its task woken before the poll returns) is computing
    /// and keeps its slot; one that waits to be woken later gives it back.
    #[tokio::test]
    async fn a_yielding_guest_keeps_its_slot() {
        let gate = Gate::new(1, 10);
        let admitted = gate.admit(0, 1).await;
        let g = gate.clone();
        let yields = async move {
            for _ in 0..20 {
                let mut once = false;
                std::future::poll_fn(|cx| {
                    if std::mem::replace(&mut once, true) {
                        Poll::Ready(())
                    } else {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                })
                .await;
                assert_eq!(g.lock().free_cpus, 0, "a yield keeps the slot");
            }
        };
        let lines = crate::host_log::HostLines::new(0);
        tokio::spawn(Gated::new(yields, admitted, 0, lines, None)).await.unwrap();
        assert_eq!(gate.lock().free_cpus, 1);
    }

    #[tokio::test]
    async fn a_parked_guest_gives_its_slot_and_takes_it_back_first() {
        let gate = Gate::new(1, 10);
        let admitted = gate.admit(0, 1).await;
        let (tx, rx) = oneshot::channel::<()>();
        let lines = crate::host_log::HostLines::new(0);
        let parked = tokio::spawn(Gated::new(async move { rx.await.unwrap() }, admitted, 0, lines, None));
        tokio::time::sleep(Duration::from_millis(10)).await;
        // Its slot is free while it waits in its "host call".
        let other = tokio::time::timeout(Duration::from_millis(100), gate.admit(0, 1)).await.expect("slot given back");
        tx.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!parked.is_finished(), "it waits for a slot to resume");
        drop(other);
        parked.await.unwrap();
        let st = gate.lock();
        assert_eq!((st.free_cpus, st.free_mb), (1, 10));
    }
}
