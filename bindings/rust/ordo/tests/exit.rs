//! A process that ends with work pending neither aborts nor hangs (issue 24 item 6). Each case
//! runs in a child process: this test binary run again with ORDO_RUST_EXIT_CASE set, and the
//! parent checks its exit status, its output and that it ended in bounded time.
mod common;

use std::env;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use ordo::{Engine, Kind};

const CASE_ENV: &str = "ORDO_RUST_EXIT_CASE";

/// Pushes `n` ops of `ms` milliseconds each on one var (so they run one after another).
fn push_slow(e: &Engine, n: usize, ms: u64, done: &Arc<AtomicUsize>) -> ordo::Var {
    let v = e.new_var().unwrap();
    for _ in 0..n {
        let d = done.clone();
        e.push(&[], &[&v], move |_| {
            thread::sleep(Duration::from_millis(ms));
            d.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
    v
}

/// What the child does, by case. Returning from here ends the test, and the harness then ends
/// the process (as `main` returning does).
fn child(case: &str) {
    common::quiet_expected_panics();
    let done = Arc::new(AtomicUsize::new(0));
    let e = Engine::builder()
        .kind(Kind::PerDevice)
        .cpu_threads(2)
        .build()
        .unwrap();
    match case {
        // std::process::exit with 100 s of queued work and the engine alive
        "exit" => {
            let _v = push_slow(&e, 1000, 100, &done);
            thread::sleep(Duration::from_millis(50));
            println!(
                "child: exiting with {} of 1000 done",
                done.load(Ordering::SeqCst)
            );
            std::process::exit(0);
        }
        // the engine leaked (never dropped) with work pending when main returns
        "return_leaked" => {
            let v = push_slow(&e, 1000, 100, &done);
            std::mem::forget(v);
            std::mem::forget(e);
            println!("child: returning with work pending");
        }
        // the engine dropped with work pending: the drop finishes it, then main returns
        "drop" => {
            let _v = push_slow(&e, 20, 5, &done);
            drop(e);
            println!("child: dropped, {} of 20 done", done.load(Ordering::SeqCst));
            assert_eq!(done.load(Ordering::SeqCst), 20);
        }
        // a deferred op whose Completion sits in a thread that never completes it, engine leaked
        "deferred" => {
            let v = e.new_var().unwrap();
            let (tx, rx) = mpsc::channel();
            e.push(&[], &[&v], move |x| {
                tx.send(x.defer()?).unwrap();
                Ok(())
            })
            .unwrap();
            let c = rx.recv().unwrap();
            thread::spawn(move || {
                let _keep = c;
                loop {
                    thread::park();
                }
            });
            std::mem::forget(v);
            std::mem::forget(e);
            println!("child: returning with a deferred op pending");
        }
        // a panicking op and an async wait still pending at exit
        "panic_pending" => {
            let v = push_slow(&e, 50, 100, &done);
            e.push(&[], &[&v], |_| panic!("expected panic at exit"))
                .unwrap();
            let f = e.wait_async(&v);
            std::mem::forget(f);
            std::mem::forget(v);
            std::mem::forget(e);
            println!("child: returning with a panicking op queued");
        }
        other => panic!("unknown case {}", other),
    }
}

fn run_case(case: &str, expect: &str) {
    let exe = env::current_exe().unwrap();
    let started = Instant::now();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "exit_with_work_pending",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE_ENV, case)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let limit = Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            panic!("case {}: the child hung (killed after {:?})", case, limit);
        }
        thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let took = started.elapsed();
    assert!(
        status.success(),
        "case {}: {:?}\nstdout:\n{}\nstderr:\n{}",
        case,
        status,
        out,
        err
    );
    assert!(
        out.contains(expect),
        "case {}: no {:?} in stdout:\n{}\nstderr:\n{}",
        case,
        expect,
        out,
        err
    );
    // the queued work takes 5 s or more: the process must not have waited for it
    assert!(
        took < Duration::from_secs(4),
        "case {}: took {:?}",
        case,
        took
    );
}

#[test]
fn exit_with_work_pending() {
    if let Ok(case) = env::var(CASE_ENV) {
        child(&case);
        return;
    }
    run_case("exit", "child: exiting with");
    run_case("return_leaked", "child: returning with work pending");
    run_case("drop", "child: dropped, 20 of 20 done");
    run_case("deferred", "child: returning with a deferred op pending");
    run_case(
        "panic_pending",
        "child: returning with a panicking op queued",
    );
}
