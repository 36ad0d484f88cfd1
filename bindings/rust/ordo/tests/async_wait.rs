//! Waits as futures (`EngineRef::wait_async`, over `ordo_wait_for_var_async`), polled by the tiny
//! executor in common/ (no async runtime).
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{block_on, engine, KINDS, LIMIT};
use ordo::{ErrorKind, Kind, OpError, PushOptions};

#[test]
fn async_wait_resolves_without_blocking_a_thread() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        if kind == Kind::Naive {
            // the naive engine runs each op inside its push: nothing is pending, and the
            // callback runs inside wait_async
            e.push(&[], &[&v], |_| Ok(())).unwrap();
            let f = e.wait_async(&v);
            assert!(f.is_ready());
            block_on(f).unwrap();
            continue;
        }
        let (tx, rx) = mpsc::channel::<()>();
        e.push(&[], &[&v], move |_| {
            rx.recv_timeout(LIMIT)
                .map_err(|_| OpError::msg("never released"))?;
            Ok(())
        })
        .unwrap();
        let f = e.wait_async(&v);
        assert!(!f.is_ready(), "{:?}", kind);
        let releaser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            tx.send(()).unwrap();
        });
        block_on(f).unwrap();
        releaser.join().unwrap();

        // a failure arrives as the same error a blocking wait gives
        e.push_with(&PushOptions::new().name("bad"), &[], &[&v], |_| {
            Err(OpError::new(5, "nope"))
        })
        .unwrap();
        let err = block_on(e.wait_async(&v)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed);
        assert_eq!(err.op_code(), Some(5));
        assert!(err.message().contains("bad"), "{}", err);
    }
}

#[test]
fn async_waits_from_many_threads_and_dropped_futures() {
    let e = Arc::new(engine(Kind::PerDevice));
    let v = Arc::new(e.new_var().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for _ in 0..4 {
        let (e, v, count) = (e.clone(), v.clone(), count.clone());
        threads.push(thread::spawn(move || {
            for _ in 0..200 {
                let c = count.clone();
                e.push(&[], &[&v], move |_| {
                    c.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
                drop(e.wait_async(&v)); // dropped before it resolves: must not leak into UB
                block_on(e.wait_async(&v)).unwrap();
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(count.load(Ordering::SeqCst), 800);
}

#[test]
fn async_wait_on_a_foreign_var_is_an_error() {
    let (e1, e2) = (engine(Kind::Pooled), engine(Kind::Pooled));
    let v = e2.new_var().unwrap();
    assert_eq!(
        block_on(e1.wait_async(&v)).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
}

#[test]
fn async_wait_after_shutdown_is_an_error() {
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    let r = e.handle();
    drop(e);
    assert_eq!(
        block_on(r.wait_async(&v)).unwrap_err().kind(),
        ErrorKind::Shutdown
    );
}
