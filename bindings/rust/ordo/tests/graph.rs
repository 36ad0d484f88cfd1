//! Capture and replay (`EngineRef::capture`, `Graph`): recorded pushes run only when launched,
//! each launch behaves as the pushes made again, the captured closures live until the graph is
//! destroyed and are dropped once, a capture always ends, and misuse is an `Err` with the
//! library's status.
mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{block_on, engine, quiet_expected_panics, spin_until, DropCount, KINDS, LIMIT};
use ordo::{sys, Completion, Engine, Error, ErrorKind, Graph, Kind, OpError, PushOptions};

type Log = Arc<Mutex<Vec<String>>>;

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// An `Fn` op that appends `name` to `log`.
fn append(
    log: &Log,
    name: &str,
) -> impl Fn(&mut ordo::Exec<'_>) -> Result<(), OpError> + Send + Sync + 'static {
    let (log, name) = (log.clone(), name.to_string());
    move |_| {
        log.lock().unwrap().push(name.clone());
        Ok(())
    }
}

/// `names` repeated `n` times.
fn times(names: &[&str], n: usize) -> Vec<String> {
    (0..n)
        .flat_map(|_| names.iter().map(|s| s.to_string()))
        .collect()
}

#[test]
fn launches_replay_the_captured_pushes_in_order() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let seen = log();
        let g = e
            .capture(|cap| {
                for name in ["a", "b", "c"] {
                    cap.push(&[], &[&v], append(&seen, name))?;
                }
                Ok(())
            })
            .unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert!(entries(&seen).is_empty(), "{:?}: recorded ops ran", kind);
        for _ in 0..5 {
            g.launch().unwrap();
        }
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(entries(&seen), times(&["a", "b", "c"], 5), "{:?}", kind);
        let st = e.stats().unwrap();
        assert_eq!(
            st.completed, 15,
            "{:?}: launched ops are counted as pushes",
            kind
        );
        g.destroy().unwrap();
    }
}

#[test]
fn launches_compose_with_pushes_through_vars() {
    for kind in KINDS {
        let e = engine(kind);
        let (x, y) = (e.new_var().unwrap(), e.new_var().unwrap());
        let (xv, ys) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(Mutex::new(Vec::new())),
        );
        // the graph reads x and appends 2 * x to y's list
        let g = {
            let (xv, ys) = (xv.clone(), ys.clone());
            e.capture(|cap| {
                cap.push(&[&x], &[&y], move |_| {
                    ys.lock().unwrap().push(2 * xv.load(Ordering::SeqCst));
                    Ok(())
                })
            })
            .unwrap()
        };
        for value in [1, 10, 100] {
            let xv = xv.clone();
            e.push(&[], &[&x], move |_| {
                thread::sleep(Duration::from_millis(2)); // a launch must not overtake it
                xv.store(value, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            g.launch().unwrap();
        }
        e.wait_timeout(&y, LIMIT).unwrap();
        assert_eq!(*ys.lock().unwrap(), [2, 20, 200], "{:?}", kind);

        // and on one var, interleaved with ordinary pushes in program order
        let seen = log();
        let g2 = e
            .capture(|cap| {
                cap.push(&[], &[&x], append(&seen, "g1"))?;
                cap.push(&[], &[&x], append(&seen, "g2"))
            })
            .unwrap();
        for p in ["p0", "p1", "p2"] {
            let f = append(&seen, p);
            e.push(&[], &[&x], move |x| f(x)).unwrap();
            g2.launch().unwrap();
        }
        e.wait_timeout(&x, LIMIT).unwrap();
        assert_eq!(
            entries(&seen),
            ["p0", "g1", "g2", "p1", "g1", "g2", "p2", "g1", "g2"],
            "{:?}",
            kind
        );
    }
}

#[test]
fn captured_closures_are_dropped_once_at_destroy() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let g = e
            .capture(|cap| {
                for _ in 0..3 {
                    let (t, r) = (drops.token(), runs.clone());
                    cap.push(&[], &[&v], move |_| {
                        let _keep = &t;
                        r.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })?;
                }
                Ok(())
            })
            .unwrap();
        for _ in 0..4 {
            g.launch().unwrap();
        }
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 12, "{:?}", kind);
        assert_eq!(drops.get(), 0, "{:?}: dropped before destroy", kind);
        g.destroy().unwrap();
        assert_eq!(
            drops.get(),
            3,
            "{:?}: not dropped once each at destroy",
            kind
        );

        // dropping the graph destroys it (no launch in flight: at once)
        let t = drops.token();
        let g = e
            .capture(|cap| {
                cap.push(&[], &[&v], move |_| {
                    let _keep = &t;
                    Ok(())
                })
            })
            .unwrap();
        g.launch().unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        drop(g);
        assert_eq!(drops.get(), 4, "{:?}", kind);
    }
}

#[test]
fn a_panicking_capture_ends_it_and_runs_nothing() {
    quiet_expected_panics();
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let ran = Arc::new(AtomicBool::new(false));
        let r = catch_unwind(AssertUnwindSafe(|| {
            e.capture(|cap| {
                let (t, ran) = (drops.token(), ran.clone());
                cap.push(&[], &[&v], move |_| {
                    let _keep = &t;
                    ran.store(true, Ordering::SeqCst);
                    Ok(())
                })?;
                panic!("expected panic inside a capture");
            })
        }));
        assert!(r.is_err(), "the panic went on");
        assert_eq!(
            drops.get(),
            1,
            "{:?}: the recording was not destroyed",
            kind
        );
        // the capture is over: waits work again, and nothing recorded ran
        e.wait_timeout(&v, LIMIT).unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        assert!(!ran.load(Ordering::SeqCst), "{:?}", kind);
        assert_eq!(e.stats().unwrap().pushed, 0);
        // and a later capture works
        let seen = log();
        let g = e
            .capture(|cap| cap.push(&[], &[&v], append(&seen, "later")))
            .unwrap();
        g.launch().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(entries(&seen), ["later"]);
    }
}

#[test]
fn an_err_from_the_capture_closure_drops_the_recording() {
    for kind in KINDS {
        let e = engine(kind);
        let other = engine(kind);
        let (v, foreign) = (e.new_var().unwrap(), other.new_var().unwrap());
        let drops = DropCount::default();
        let ran = Arc::new(AtomicBool::new(false));
        let err = e
            .capture(|cap| {
                for vars in [[&v], [&foreign]] {
                    let (t, ran) = (drops.token(), ran.clone());
                    cap.push(&[], &vars, move |_| {
                        let _keep = &t;
                        ran.store(true, Ordering::SeqCst);
                        Ok(())
                    })?; // the second push fails: a var of another engine
                }
                unreachable!("the foreign var was accepted");
            })
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidHandle, "{}", err);
        assert!(err.message().contains("another engine"), "{}", err);
        assert_eq!(drops.get(), 2, "{:?}: both closures are dropped", kind);
        e.wait_timeout(&v, LIMIT).unwrap(); // not capturing any more
        assert!(!ran.load(Ordering::SeqCst));

        // an error of the caller's own, through `?`
        let err = e
            .capture(|cap| {
                let t = drops.token();
                cap.push(&[], &[&v], move |_| {
                    let _keep = &t;
                    Ok(())
                })?;
                Err(Error::new(
                    sys::ORDO_ERR_INVALID_ARGUMENT,
                    "the caller's own",
                ))
            })
            .unwrap_err();
        assert_eq!(err.message(), "the caller's own");
        assert_eq!(drops.get(), 3);
        e.wait_all_timeout(LIMIT).unwrap();
    }
}

#[test]
fn misuse_inside_a_capture_is_invalid_state() {
    for kind in KINDS {
        let e = engine(kind);
        let other = engine(kind);
        let v = e.new_var().unwrap();
        let seen = log();
        let earlier = e.capture(|_| Ok(())).unwrap();
        let g = e
            .capture(|cap| {
                let state = |r: ordo::Result<()>, what: &str| {
                    let err = r.expect_err(what);
                    assert_eq!(err.kind(), ErrorKind::InvalidState, "{}: {}", what, err);
                    err
                };
                let err = state(e.wait(&v), "wait");
                assert!(err.message().contains("capturing"), "{}", err);
                state(e.wait_timeout(&v, Duration::ZERO), "wait_timeout");
                state(e.wait_all(), "wait_all");
                state(e.wait_all_timeout(Duration::ZERO), "wait_all_timeout");
                state(v.clear_error(), "clear_error");
                state(block_on(e.wait_async(&v)), "wait_async");
                state(earlier.launch(), "launch inside a capture");
                state(e.capture(|_| Ok(())).map(drop), "nested capture");
                state(other.capture(|_| Ok(())).map(drop), "a second capture");
                let err = state(e.push(&[], &[&v], |_| Ok(())), "FnOnce push");
                assert!(err.message().contains("Capture::push"), "{}", err);
                // none of that was recorded; what is recorded still is
                cap.push(&[], &[&v], append(&seen, "recorded"))
            })
            .unwrap();
        // the other engine and other threads are not captured
        assert_eq!(other.stats().unwrap().pushed, 0);
        g.launch().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(entries(&seen), ["recorded"], "{:?}", kind);
        // pushes of another engine, or by another thread, during a capture are made as usual
        let made = log();
        let g = e
            .capture(|cap| {
                let w = other.new_var().unwrap();
                other.push(&[], &[&w], {
                    let f = append(&made, "other engine");
                    move |x| f(x)
                })?;
                other.wait_timeout(&w, LIMIT)?;
                thread::scope(|s| {
                    s.spawn(|| {
                        let f = append(&made, "other thread");
                        e.push(&[], &[&v], move |x| f(x)).unwrap();
                        e.wait_timeout(&v, LIMIT).unwrap();
                    });
                });
                cap.push(&[], &[&v], append(&made, "recorded"))
            })
            .unwrap();
        assert_eq!(entries(&made), ["other engine", "other thread"]);
        g.launch().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(entries(&made), ["other engine", "other thread", "recorded"]);
    }
}

/// A graph of one deferred op on `v` that sends its completion to the returned receiver.
fn deferring_graph(
    e: &Engine,
    v: &ordo::Var,
    drops: &DropCount,
) -> (Graph, mpsc::Receiver<Completion>) {
    let (tx, rx) = mpsc::channel();
    let (tx, t) = (Mutex::new(tx), drops.token());
    let g = e
        .capture(|cap| {
            cap.push(&[], &[v], move |x| {
                let _keep = &t;
                tx.lock().unwrap().send(x.defer()?).unwrap();
                Ok(())
            })
        })
        .unwrap();
    (g, rx)
}

#[test]
fn destroy_is_refused_while_a_launch_is_in_flight() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let (g, rx) = deferring_graph(&e, &v, &drops);
        g.launch().unwrap();
        let c = rx.recv_timeout(LIMIT).expect("the launched op did not run");
        let refused = g.destroy().unwrap_err();
        assert_eq!(refused.error.kind(), ErrorKind::InvalidState, "{}", refused);
        assert!(refused.to_string().contains("in flight"), "{}", refused);
        assert_eq!(drops.get(), 0);
        let g = refused.graph; // given back, still usable once its op completes
        c.complete().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        g.launch().unwrap();
        rx.recv_timeout(LIMIT).unwrap().complete().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        g.destroy().unwrap();
        assert_eq!(drops.get(), 1, "{:?}", kind);

        // `?` makes it an ordo::Error
        let (g, rx) = deferring_graph(&e, &v, &drops);
        g.launch().unwrap();
        let c = rx.recv_timeout(LIMIT).unwrap();
        let as_error = || -> ordo::Result<()> {
            g.destroy()?;
            Ok(())
        };
        assert_eq!(as_error().unwrap_err().kind(), ErrorKind::InvalidState);
        // the graph went with the error: its drop waits for the op before destroying it
        assert_eq!(drops.get(), 1);
        c.complete().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert!(spin_until(LIMIT, || drops.get() == 2), "{:?}", kind);
    }
}

#[test]
fn dropping_a_graph_in_flight_destroys_it_once_its_ops_finish() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let (g, rx) = deferring_graph(&e, &v, &drops);
        for _ in 0..2 {
            g.launch().unwrap();
        }
        let c1 = rx.recv_timeout(LIMIT).unwrap();
        drop(g); // does not block, though the launches are in flight
        thread::sleep(Duration::from_millis(20));
        assert_eq!(drops.get(), 0, "{:?}: dropped while its op runs", kind);
        c1.complete().unwrap();
        let c2 = rx.recv_timeout(LIMIT).unwrap();
        thread::sleep(Duration::from_millis(20));
        assert_eq!(drops.get(), 0, "{:?}: dropped while its op runs", kind);
        c2.complete().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert!(
            spin_until(LIMIT, || drops.get() == 1),
            "{:?}: never destroyed",
            kind
        );
        thread::sleep(Duration::from_millis(20));
        assert_eq!(drops.get(), 1, "{:?}: dropped twice", kind);
    }
}

#[test]
fn launch_after_shutdown_is_shutdown_and_destroy_still_works() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let t = drops.token();
        let g = e
            .capture(|cap| {
                cap.push(&[], &[&v], move |_| {
                    let _keep = &t;
                    Ok(())
                })
            })
            .unwrap();
        g.launch().unwrap();
        e.shutdown().unwrap();
        assert_eq!(g.launch().unwrap_err().kind(), ErrorKind::Shutdown);
        assert_eq!(drops.get(), 0);
        g.destroy().unwrap();
        assert_eq!(drops.get(), 1, "{:?}", kind);
    }
}

#[test]
fn a_deleted_var_stops_a_launch_with_invalid_handle() {
    for kind in KINDS {
        let e = engine(kind);
        let (v, w) = (e.new_var().unwrap(), e.new_var().unwrap());
        let seen = log();
        let g = e
            .capture(|cap| {
                cap.push(&[], &[&v], append(&seen, "on v"))?;
                cap.push(&[], &[&w], append(&seen, "on w"))
            })
            .unwrap();
        w.delete().unwrap();
        let err = g.launch().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidHandle, "{}", err);
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(
            entries(&seen),
            ["on v"],
            "{:?}: the ops before it are pushed",
            kind
        );
    }
}

#[test]
fn a_var_dropped_inside_the_capture_is_deleted_when_it_ends() {
    for kind in KINDS {
        let e = engine(kind);
        let seen = log();
        let g = e
            .capture(|cap| {
                let tmp = e.new_var()?;
                cap.push(&[], &[&tmp], append(&seen, "on tmp"))?;
                Ok(()) // tmp is dropped here, while the capture is open
            })
            .unwrap();
        let err = g.launch().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidHandle, "{:?}: {}", kind, err);
        e.wait_all_timeout(LIMIT).unwrap();
        assert!(entries(&seen).is_empty());
    }
}

#[test]
fn graphs_launch_from_many_threads_at_once() {
    for kind in [Kind::Pooled, Kind::PerDevice] {
        let e = engine(kind);
        let count = Arc::new(AtomicUsize::new(0));
        let g = {
            let count = count.clone();
            e.capture(|cap| {
                // no var: the launches' ops may run at once, calling the closure concurrently
                cap.push(&[], &[], move |_| {
                    count.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
            .unwrap()
        };
        let g = Arc::new(g);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let g = g.clone();
                thread::spawn(move || {
                    for _ in 0..50 {
                        g.launch().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 200, "{:?}", kind);
        Arc::try_unwrap(g).unwrap().destroy().unwrap();
    }
}

#[test]
fn launched_ops_fail_skip_and_push_follow_ups_as_pushed_ones_do() {
    quiet_expected_panics();
    for kind in KINDS {
        let e = engine(kind);
        let (a, b) = (e.new_var().unwrap(), e.new_var().unwrap());
        let seen = log();
        let opts = PushOptions::new().name("boom");
        let g = e
            .capture(|cap| {
                cap.push_with(&opts, &[], &[&a], |_| Err(OpError::new(7, "replayed")))?;
                cap.push(&[&a], &[&b], append(&seen, "skipped"))?;
                cap.push(&[], &[], |_| panic!("expected panic in a launched op"))
            })
            .unwrap();
        g.launch().unwrap();
        let err = e.wait_timeout(&b, LIMIT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed);
        assert_eq!(err.op_code(), Some(7), "{}", err);
        assert!(err.message().contains("boom"), "{}", err);
        assert!(entries(&seen).is_empty(), "{:?}: the dependent ran", kind);
        let _ = e.wait_all_timeout(LIMIT);
        let st = e.stats().unwrap();
        assert_eq!((st.failed, st.skipped), (3, 1), "{:?}", kind);

        // the same inside a chain (ops that only run one after another on one var, which a
        // launch runs back to back as one engine op): a failure stops the chain there
        let c = e.new_var().unwrap();
        let chain = log();
        let g = e
            .capture(|cap| {
                cap.push(&[], &[&c], append(&chain, "first"))?;
                cap.push(&[], &[&c], |_| Err(OpError::new(5, "mid-chain")))?;
                cap.push(&[], &[&c], append(&chain, "third"))
            })
            .unwrap();
        for _ in 0..2 {
            g.launch().unwrap();
        }
        let err = e.wait_timeout(&c, LIMIT).unwrap_err();
        assert_eq!(err.op_code(), Some(5), "{:?}: {}", kind, err);
        assert_eq!(
            entries(&chain),
            ["first"],
            "{:?}: ran past the failure",
            kind
        );
        let _ = e.wait_all_timeout(LIMIT);

        // a launched op pushes follow-ups as usual (launches are not captures)
        let c = e.new_var().unwrap();
        let follow = log();
        let g = {
            let follow = follow.clone();
            e.capture(|cap| {
                cap.push(&[], &[&c], move |x| {
                    let f = follow.clone();
                    x.engine().push(&[], &[], move |_| {
                        f.lock().unwrap().push("follow-up".into());
                        Ok(())
                    })?;
                    Ok(())
                })
            })
            .unwrap()
        };
        g.launch().unwrap();
        g.launch().unwrap();
        e.wait_timeout(&c, LIMIT).unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(entries(&follow), times(&["follow-up"], 2), "{:?}", kind);
    }
}

#[test]
fn an_op_run_inline_during_a_capture_pushes_as_usual() {
    // The naive engine runs an op inside the call that makes it ready: here a completion made
    // by the capturing thread. Pushes from inside that op are not recorded (the library's rule),
    // so a FnOnce push from it is made, not refused.
    let e = engine(Kind::Naive);
    let v = e.new_var().unwrap();
    let (tx, rx) = mpsc::channel();
    e.push(&[], &[&v], move |x| {
        tx.send(x.defer()?).unwrap();
        Ok(())
    })
    .unwrap();
    let seen = log();
    let pushed = Arc::new(Mutex::new(None));
    {
        let (seen, pushed) = (seen.clone(), pushed.clone());
        e.push(&[], &[&v], move |x| {
            seen.lock().unwrap().push("inline".into());
            let s = seen.clone();
            let r = x.engine().push(&[], &[], move |_| {
                s.lock().unwrap().push("follow-up".into());
                Ok(())
            });
            *pushed.lock().unwrap() = Some(r);
            Ok(())
        })
        .unwrap();
    }
    let c = rx.recv_timeout(LIMIT).unwrap();
    let g = e
        .capture(|cap| {
            c.complete()?; // runs the second op, and its follow-up, here and now
            cap.push(&[], &[&v], append(&seen, "recorded"))
        })
        .unwrap();
    let pushed = pushed
        .lock()
        .unwrap()
        .take()
        .expect("the inline op did not run");
    assert_eq!(pushed, Ok(()), "the push from inside the op was refused");
    assert_eq!(entries(&seen), ["inline", "follow-up"]);
    g.launch().unwrap();
    e.wait_timeout(&v, LIMIT).unwrap();
    assert_eq!(entries(&seen), ["inline", "follow-up", "recorded"]);
}

#[test]
fn a_prepared_push_is_recorded_and_kept_alive_by_the_graph() {
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let p = {
            let (t, runs) = (drops.token(), runs.clone());
            e.prepare(&PushOptions::new(), &[], &[&v], move |_| {
                let _keep = &t;
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap()
        };
        let g = e
            .capture(|_| {
                p.push()?;
                p.push()
            })
            .unwrap();
        p.delete().unwrap(); // the graph keeps it alive
        assert_eq!(drops.get(), 0);
        for _ in 0..3 {
            g.launch().unwrap();
        }
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 6, "{:?}", kind);
        assert_eq!(drops.get(), 0);
        g.destroy().unwrap();
        assert_eq!(drops.get(), 1, "{:?}", kind);
    }
}

#[test]
fn a_fn_once_push_recorded_through_ordo_sys_runs_once_and_is_dropped_once() {
    // A capture begun through the raw API records the safe crate's FnOnce push: its closure may
    // run once; later launches fail that op instead of calling it again.
    for kind in KINDS {
        let e = engine(kind);
        let v = e.new_var().unwrap();
        let drops = DropCount::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let (t, r) = (drops.token(), runs.clone());
        let mut g = std::ptr::null_mut();
        unsafe {
            assert_eq!(sys::ordo_graph_begin_capture(e.as_ptr()), sys::ORDO_OK);
            e.push(&[], &[&v], move |_| {
                drop(t);
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
            assert_eq!(
                sys::ordo_graph_end_capture(e.as_ptr(), &mut g),
                sys::ORDO_OK
            );
        }
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        for _ in 0..3 {
            assert_eq!(unsafe { sys::ordo_graph_launch(g) }, sys::ORDO_OK);
        }
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert!(err.message().contains("already ran"), "{}", err);
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{:?}", kind);
        assert_eq!(drops.get(), 1, "the closure is dropped when it runs");
        let _ = e.wait_all_timeout(LIMIT);
        assert_eq!(e.stats().unwrap().failed, 2, "{:?}", kind);
        assert_eq!(unsafe { sys::ordo_graph_destroy(g) }, sys::ORDO_OK);
        assert_eq!(drops.get(), 1);
    }
}
