//! Helpers shared by the integration tests: engines of each kind, a bounded wait, a tiny
//! block_on executor, a drop counter.
#![allow(dead_code)]

use std::future::Future;
use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use ordo::{Engine, Kind};

/// Every blocking wait in the tests is bounded: a bug fails the test instead of hanging it.
pub const LIMIT: Duration = Duration::from_secs(30);

pub fn engine(kind: Kind) -> Engine {
    Engine::builder()
        .kind(kind)
        .cpu_threads(2)
        .build()
        .expect("engine")
}

pub const KINDS: [Kind; 3] = [Kind::Naive, Kind::Pooled, Kind::PerDevice];

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread: polls, parks until woken (bounded by LIMIT).
pub fn block_on<F: Future>(f: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = Box::pin(f);
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let now = Instant::now();
        assert!(now < deadline, "block_on: the future was never woken");
        thread::park_timeout(deadline - now);
    }
}

/// Counts drops of the values it hands out (to check that each closure is dropped once).
#[derive(Clone, Default)]
pub struct DropCount(Arc<AtomicUsize>);

pub struct Token(Arc<AtomicUsize>);

impl Drop for Token {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl DropCount {
    pub fn token(&self) -> Token {
        Token(self.0.clone())
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Spins until `cond` holds or `limit` passes; returns whether it held.
pub fn spin_until(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_micros(200));
    }
    true
}

/// Keeps the panics that tests provoke on purpose (their message starts with "expected panic") out
/// of the output; every other panic is reported as usual.
pub fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned());
            if !msg.map_or(false, |m| m.starts_with("expected panic")) {
                prev(info);
            }
        }));
    });
}
