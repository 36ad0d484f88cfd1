//! The scenarios every binding tests (issue 24 item 6), and the Rust-specific promises: panics
//! become op errors, closures are dropped exactly once, handles outlive the engine safely.
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{engine, quiet_expected_panics, spin_until, DropCount, KINDS, LIMIT};
use ordo::{Engine, ErrorKind, Kind, OpError, Prop, PushOptions};

#[test]
fn writes_run_in_push_order() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        for i in 0..1000 {
            let s = seen.clone();
            e.push(&[], &[&v], move |_| {
                s.lock().unwrap().push(i);
                Ok(())
            })
            .unwrap();
        }
        e.wait_timeout(&v, LIMIT).unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(*seen, (0..1000).collect::<Vec<_>>(), "{:?}", kind);
    }
}

#[test]
fn readers_of_one_var_overlap() {
    for kind in [Kind::Pooled, Kind::PerDevice] {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let arrived = Arc::new(AtomicUsize::new(0));
        // Each reader waits (bounded) for the other to be running too: they must overlap.
        for _ in 0..2 {
            let a = arrived.clone();
            e.push(&[&v], &[], move |_| {
                a.fetch_add(1, Ordering::SeqCst);
                if spin_until(Duration::from_secs(10), || a.load(Ordering::SeqCst) == 2) {
                    Ok(())
                } else {
                    Err(OpError::msg("the other reader never ran beside this one"))
                }
            })
            .unwrap();
        }
        e.wait_timeout(&v, LIMIT).unwrap();
    }
}

#[test]
fn failing_op_skips_its_dependent_and_surfaces_as_err() {
    for kind in KINDS {
        let e = engine(kind);
        let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
        let drops = DropCount::default();
        let ran = Arc::new(AtomicBool::new(false));
        let opts = PushOptions::new().name("load");
        e.push_with(&opts, &[], &[&a], |_| Err(OpError::new(42, "disk full")))
            .unwrap();
        let (r, t) = (ran.clone(), drops.token());
        e.push(&[&a], &[&b], move |_| {
            let _t = t;
            r.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        let err = e.wait_timeout(&b, LIMIT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}", kind);
        assert_eq!(err.op_code(), Some(42));
        assert!(
            err.message().contains("load") && err.message().contains("disk full"),
            "{}",
            err
        );
        assert!(!ran.load(Ordering::SeqCst), "the dependent ran");
        assert_eq!(drops.get(), 1, "the skipped closure is dropped once");
        let st = e.stats().unwrap();
        assert_eq!((st.failed, st.skipped), (2, 1));
        // the error stays on the vars until cleared
        assert_eq!(b.error().unwrap().unwrap().code(), 42);
        b.clear_error().unwrap();
        e.wait_timeout(&b, LIMIT).unwrap();
        assert_eq!(b.error().unwrap(), None);
        let all = e.wait_all().unwrap_err();
        assert_eq!(all.kind(), ErrorKind::OpFailed);
        e.wait_all().unwrap(); // the record is cleared
    }
}

#[test]
fn deferred_op_completed_from_another_thread() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let (tx, rx) = mpsc::channel();
        let done = Arc::new(AtomicBool::new(false));
        e.push(&[], &[&v], move |x| {
            tx.send(x.defer()?).unwrap();
            Ok(())
        })
        .unwrap();
        let d = done.clone();
        let th = thread::spawn(move || {
            let c = rx.recv().unwrap();
            thread::sleep(Duration::from_millis(20));
            d.store(true, Ordering::SeqCst);
            c.complete().unwrap();
        });
        e.wait_timeout(&v, LIMIT).unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "the wait returned before the completion"
        );
        th.join().unwrap();

        // a failure passed through the completion
        let (tx, rx) = mpsc::channel();
        e.push(&[], &[&v], move |x| {
            tx.send(x.defer()?).unwrap();
            Ok(())
        })
        .unwrap();
        thread::spawn(move || rx.recv().unwrap().fail(9, "remote failure").unwrap())
            .join()
            .unwrap();
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert_eq!(err.op_code(), Some(9));
        assert!(err.message().contains("remote failure"), "{}", err);
    }
}

#[test]
fn dropped_completion_fails_the_op_instead_of_hanging() {
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    e.push(&[], &[&v], |x| {
        let c = x.defer()?;
        thread::spawn(move || drop(c));
        Ok(())
    })
    .unwrap();
    let err = e.wait_timeout(&v, LIMIT).unwrap_err();
    assert_eq!(err.op_code(), Some(ordo::FAILED));
    assert!(
        err.message().contains("dropped without complete"),
        "{}",
        err
    );
}

#[test]
fn completion_is_consumed_once_and_a_second_defer_is_refused() {
    let e = engine(Kind::Pooled);
    let v = e.new_var().unwrap();
    let (tx, rx) = mpsc::channel();
    e.push(&[], &[&v], move |x| {
        let c = x.defer()?;
        let second = x.defer().unwrap_err();
        tx.send(second.kind()).unwrap();
        c.complete()?;
        Ok(())
    })
    .unwrap();
    e.wait_timeout(&v, LIMIT).unwrap();
    assert_eq!(rx.recv().unwrap(), ErrorKind::InvalidState);
}

#[test]
fn panic_in_a_closure_becomes_an_op_error() {
    quiet_expected_panics();
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let t = drops.token();
        e.push_with(&PushOptions::new().name("boom"), &[], &[&v], move |_| {
            let _t = t;
            panic!("expected panic {}", 7)
        })
        .unwrap();
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed);
        assert_eq!(err.op_code(), Some(ordo::FAILED));
        assert!(
            err.message().contains("panicked: expected panic 7"),
            "{}",
            err
        );
        assert_eq!(drops.get(), 1);
        // the engine keeps working
        v.clear_error().unwrap();
        e.push(&[], &[&v], |_| Ok(())).unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
    }
}

#[test]
fn panic_after_defer_fails_through_the_dropped_completion() {
    quiet_expected_panics();
    let e = engine(Kind::Pooled);
    let v = e.new_var().unwrap();
    e.push(&[], &[&v], |x| {
        let _c = x.defer()?;
        panic!("expected panic, late")
    })
    .unwrap();
    let err = e.wait_timeout(&v, LIMIT).unwrap_err();
    assert!(err.message().contains("dropped during a panic"), "{}", err);
}

#[test]
fn closures_are_dropped_once_however_the_op_ends() {
    let drops = DropCount::default();
    {
        let e = engine(Kind::PerDevice);
        let v = e.new_var().unwrap();
        for i in 0..100 {
            let t = drops.token();
            e.push(&[], &[&v], move |_| {
                let _t = t;
                if i % 10 == 3 {
                    Err(OpError::msg("fail"))
                } else {
                    Ok(())
                }
            })
            .unwrap();
        }
        let _ = e.wait_timeout(&v, LIMIT);
        assert_eq!(drops.get(), 100);
        // a refused push drops its closure at once
        let other = engine(Kind::Pooled);
        let w = other.new_var().unwrap();
        let t = drops.token();
        let err = e.push(&[&w], &[], move |_| {
            let _t = t;
            Ok(())
        });
        assert_eq!(err.unwrap_err().kind(), ErrorKind::InvalidHandle);
        assert_eq!(drops.get(), 101);
        let handle = e.handle();
        drop(e);
        let t = drops.token();
        let err = handle.push(&[], &[], move |_| {
            let _t = t;
            Ok(())
        });
        assert_eq!(err.unwrap_err().kind(), ErrorKind::Shutdown);
        assert_eq!(drops.get(), 102);
    }
}

#[test]
fn vars_and_refs_outlive_the_engine_safely() {
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    let r = e.handle();
    let slow = Arc::new(AtomicUsize::new(0));
    for _ in 0..20 {
        let s = slow.clone();
        e.push(&[], &[&v], move |_| {
            thread::sleep(Duration::from_millis(2));
            s.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
    drop(e); // drains: every pushed op runs
    assert_eq!(slow.load(Ordering::SeqCst), 20);
    assert_eq!(v.wait().unwrap_err().kind(), ErrorKind::Shutdown);
    assert_eq!(r.new_var().unwrap_err().kind(), ErrorKind::Shutdown);
    assert!(r.stats().is_ok(), "read-only queries still answer");
    assert_eq!(v.delete().unwrap_err().kind(), ErrorKind::Shutdown);
    drop(r); // the last reference frees the engine
}

#[test]
fn ops_push_follow_ups_and_a_wait_inside_an_op_is_refused() {
    for kind in KINDS {
        let e = engine(kind);
        let v = Arc::new(e.new_var().unwrap());
        let (tx, rx) = mpsc::channel();
        let v2 = v.clone();
        e.push(&[], &[], move |x| {
            tx.send(x.engine().wait(&v2).unwrap_err().kind()).unwrap();
            let inner = v2.clone();
            x.engine().push(&[], &[&v2], move |_| {
                drop(inner);
                Ok(())
            })?;
            Ok(())
        })
        .unwrap();
        assert_eq!(rx.recv_timeout(LIMIT).unwrap(), ErrorKind::WouldDeadlock);
        e.wait_all_timeout(LIMIT).unwrap();
    }
}

#[test]
fn engine_dropped_inside_its_own_op_shuts_down_without_deadlock() {
    let e = Arc::new(engine(Kind::PerDevice));
    let v = e.new_var().unwrap();
    let e2 = e.clone();
    let (tx, rx) = mpsc::channel();
    e.push(&[], &[], move |_| {
        rx.recv_timeout(LIMIT).unwrap(); // hold until the test thread let go of its Arc
        drop(e2); // the last Engine: its shutdown moves to another thread
        Ok(())
    })
    .unwrap();
    drop(e);
    tx.send(()).unwrap();
    assert!(
        spin_until(LIMIT, || v
            .engine()
            .new_var()
            .map(drop)
            .err()
            .map(|e| e.kind())
            == Some(ErrorKind::Shutdown)),
        "the engine was never shut down"
    );
}

#[test]
fn foreign_vars_are_refused() {
    let (e1, e2) = (engine(Kind::Pooled), engine(Kind::Pooled));
    let v = e2.new_var().unwrap();
    assert_eq!(e1.wait(&v).unwrap_err().kind(), ErrorKind::InvalidHandle);
    assert_eq!(
        e1.push(&[], &[&v], |_| Ok(())).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
}

#[test]
fn timed_waits_time_out_with_the_librarys_message() {
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    e.push_with(&PushOptions::new().name("stuck"), &[], &[&v], move |_| {
        rx.recv_timeout(LIMIT).ok();
        Ok(())
    })
    .unwrap();
    let err = e.wait_timeout(&v, Duration::from_millis(20)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert!(err.message().contains("stuck"), "{}", err);
    assert_eq!(
        e.wait_timeout(&v, Duration::ZERO).unwrap_err().kind(),
        ErrorKind::Timeout
    );
    assert_eq!(
        e.wait_all_timeout(Duration::from_millis(5))
            .unwrap_err()
            .kind(),
        ErrorKind::Timeout
    );
    tx.send(()).unwrap();
    e.wait_timeout(&v, LIMIT).unwrap();
}

#[test]
fn many_threads_push_and_wait_concurrently() {
    let e = Arc::new(engine(Kind::PerDevice));
    let shared = Arc::new(e.new_var().unwrap());
    let total = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (e, shared, total) = (e.clone(), shared.clone(), total.clone());
            thread::spawn(move || {
                let own = e.new_var().unwrap();
                let seen = Arc::new(Mutex::new(Vec::new()));
                for i in 0..500 {
                    let (s, tot) = (seen.clone(), total.clone());
                    e.push(&[&shared], &[&own], move |_| {
                        s.lock().unwrap().push(i);
                        tot.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    })
                    .unwrap();
                }
                e.wait_timeout(&own, LIMIT).unwrap();
                assert_eq!(
                    *seen.lock().unwrap(),
                    (0..500).collect::<Vec<_>>(),
                    "thread {}",
                    t
                );
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    e.wait_all_timeout(LIMIT).unwrap();
    assert_eq!(total.load(Ordering::SeqCst), 2000);
}

#[test]
fn priority_orders_ready_ops_on_one_worker() {
    let e = Engine::builder()
        .kind(Kind::PerDevice)
        .cpu_threads(1)
        .build()
        .unwrap();
    let gate = e.new_var().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    // hold the only CPU worker
    e.push(&[], &[&gate], move |_| {
        rx.recv_timeout(LIMIT).ok();
        Ok(())
    })
    .unwrap();
    assert!(spin_until(LIMIT, || e.stats().unwrap().ready == 0));
    let order = Arc::new(Mutex::new(Vec::new()));
    for p in [1, 5, 3] {
        let o = order.clone();
        e.push_with(&PushOptions::new().priority(p), &[], &[], move |x| {
            o.lock().unwrap().push(x.info()?.priority);
            Ok(())
        })
        .unwrap();
    }
    assert!(spin_until(LIMIT, || e.stats().unwrap().ready == 3));
    tx.send(()).unwrap();
    e.wait_all_timeout(LIMIT).unwrap();
    assert_eq!(*order.lock().unwrap(), [5, 3, 1]);
}

#[test]
fn exec_info_reports_name_prop_and_worker() {
    let e = engine(Kind::PerDevice);
    let (tx, rx) = mpsc::channel();
    let opts = PushOptions::new()
        .name("inspect")
        .priority(4)
        .prop(Prop::CpuPrioritized);
    e.push_with(&opts, &[], &[], move |x| {
        tx.send(x.info()?).unwrap();
        Ok(())
    })
    .unwrap();
    let info = rx.recv_timeout(LIMIT).unwrap();
    assert_eq!(info.name, "inspect");
    assert_eq!(info.priority, 4);
    assert_eq!(info.prop, Prop::CpuPrioritized);
    assert!(info.worker_index.is_some());
    let e = engine(Kind::Naive);
    let (tx, rx) = mpsc::channel();
    e.push(&[], &[], move |x| {
        tx.send(x.info()?.worker_index).unwrap();
        Ok(())
    })
    .unwrap();
    assert_eq!(rx.recv().unwrap(), None);
}

// GPU device_count() is one past the last on any machine.
#[test]
fn gpu_pushes_report_no_device() {
    let e = engine(Kind::PerDevice);
    let err = e
        .push_with(
            &PushOptions::new().device(ordo::Device::Gpu(ordo::device_count())),
            &[],
            &[],
            |_| Ok(()),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NoDevice);
    assert!(!err.message().is_empty());
}

#[test]
fn prepared_ops_run_once_per_push() {
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    let n = Arc::new(AtomicUsize::new(0));
    let drops = DropCount::default();
    let (c, t) = (n.clone(), drops.token());
    let p = e
        .prepare(&PushOptions::new().name("tick"), &[], &[&v], move |_| {
            let _ = &t;
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    for _ in 0..50 {
        p.push().unwrap();
    }
    e.wait_timeout(&v, LIMIT).unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 50);
    p.delete().unwrap();
    assert!(
        spin_until(LIMIT, || drops.get() == 1),
        "the prepared closure is dropped after delete"
    );
}

#[test]
fn config_and_stats_read_back() {
    let e = Engine::builder()
        .kind(Kind::Pooled)
        .cpu_threads(3)
        .max_pending(Some(128))
        .build()
        .unwrap();
    let c = e.config().unwrap();
    assert_eq!(c.kind, Some(Kind::Pooled));
    assert_eq!(c.cpu_threads, 3);
    assert_eq!(c.max_pending, 128);
    let v = e.new_var().unwrap();
    for _ in 0..10 {
        e.push(&[], &[&v], |_| Ok(())).unwrap();
    }
    e.wait_all_timeout(LIMIT).unwrap();
    let s = e.stats().unwrap();
    assert_eq!((s.pushed, s.completed, s.pending), (10, 10, 0));
}

#[test]
fn a_closure_may_own_the_last_handle_of_its_own_var() {
    for kind in KINDS {
        let e = engine(kind);
        let gate = e.new_var().unwrap();
        // one op that runs, one that is skipped (its var carries an error): each owns the last
        // Arc of the var it writes, so the var is deleted from inside the op or its free_fn
        e.push(&[], &[&gate], |_| Err(OpError::msg("gate failed")))
            .unwrap();
        for skipped in [false, true] {
            let v = Arc::new(e.new_var().unwrap());
            let v2 = v.clone();
            let reads: Vec<&ordo::Var> = if skipped { vec![&gate] } else { vec![] };
            e.push(&reads, &[&v], move |x| {
                x.engine().push(&[], &[&v2], |_| Ok(()))?;
                drop(v2);
                Ok(())
            })
            .unwrap();
            drop(v);
        }
        let _ = e.wait_all_timeout(LIMIT);
        assert_eq!(e.stats().unwrap().pending, 0);
    }
}

#[test]
fn a_panic_while_dropping_a_closure_never_reaches_c() {
    quiet_expected_panics();
    struct PanicOnDrop;
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            panic!("expected panic in a captured value's drop");
        }
    }
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        // run: the closure is consumed by its call, so the drop's panic fails the op
        let p = PanicOnDrop;
        e.push(&[], &[&v], move |_| {
            let _p = &p;
            Ok(())
        })
        .unwrap();
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert!(
            err.message()
                .contains("panicked: expected panic in a captured"),
            "{}",
            err
        );
        // skipped (v carries that error): dropped unrun by the free_fn, the panic swallowed
        let w = e.new_var().unwrap();
        let p = PanicOnDrop;
        e.push(&[&v], &[&w], move |_| {
            let _p = &p;
            Ok(())
        })
        .unwrap();
        assert_eq!(
            e.wait_timeout(&w, LIMIT).unwrap_err().kind(),
            ErrorKind::OpFailed
        );
        v.clear_error().unwrap();
        e.push(&[], &[&v], |_| Ok(())).unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
    }
}

// A CPU op's stream is null; with a GPU, a GPU op gets its GPU and a stream, and compute ops go
// round robin over the compute streams.
#[test]
fn gpu_ops_get_a_stream() {
    type Seen = Arc<Mutex<Vec<(ordo::Device, usize)>>>;
    // An op that records where it ran and its stream.
    fn recorder(seen: &Seen) -> impl FnOnce(&mut ordo::Exec<'_>) -> Result<(), OpError> {
        let s = seen.clone();
        move |x| {
            let place = (x.info()?.device, x.stream()? as usize);
            s.lock().unwrap().push(place);
            Ok(())
        }
    }
    let e = engine(Kind::PerDevice);
    let v = e.new_var().unwrap();
    let seen: Seen = Arc::default();
    e.push(&[], &[&v], recorder(&seen)).unwrap();
    e.wait(&v).unwrap();
    assert_eq!(seen.lock().unwrap().as_slice(), &[(ordo::Device::Cpu, 0)]);
    if ordo::device_count() == 0 {
        eprintln!("no GPU: the GPU half of gpu_ops_get_a_stream is skipped");
        return;
    }
    seen.lock().unwrap().clear();
    let on_gpu = PushOptions::new().device(ordo::Device::Gpu(0));
    for _ in 0..8 {
        e.push_with(&on_gpu, &[], &[&v], recorder(&seen)).unwrap();
    }
    e.wait(&v).unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen
        .iter()
        .all(|&(d, s)| d == ordo::Device::Gpu(0) && s != 0));
    let streams: std::collections::HashSet<usize> = seen.iter().map(|&(_, s)| s).collect();
    assert!(streams.len() > 1, "8 ops on {} stream(s)", streams.len());
}
