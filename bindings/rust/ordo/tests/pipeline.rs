//! Pipelines (`EngineRef::pipeline`, `Pipe`, `Pipeflow`, `Pipeline`): tokens flow through the
//! pipes as the header says (serial pipes in order and one at a time), deferral follows the
//! traces of the design notes (pipeline.md §6) exactly, failures and panics fail the run until a
//! reset, pushed runs are ordered through vars, the closures live exactly as long as the library
//! may call them, and misuse is an `Err` with the library's status. Every test body runs under a
//! time limit, so a hanging run fails its test instead of hanging the suite.
mod common;

use std::collections::HashMap;
use std::panic;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{engine, quiet_expected_panics, spin_until, DropCount, KINDS, LIMIT};
use ordo::{Completion, Engine, ErrorKind, Kind, OpError, Pipe, Pipeline, PushOptions, FAILED};

/// Runs `body` on a thread of its own and fails if it takes longer than LIMIT (a hung run), or
/// with its panic.
fn bounded<F: FnOnce() + Send + 'static>(body: F) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        body();
        let _ = tx.send(());
    });
    match rx.recv_timeout(LIMIT) {
        Ok(()) => h.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = h.join() {
                panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("not done within {:?}: a hung run", LIMIT),
    }
}

/// `body` on each engine kind, bounded.
fn each_kind(body: fn(Kind, Engine)) {
    for kind in KINDS {
        bounded(move || body(kind, engine(kind)));
    }
}

/// (token, line, num_deferrals) as a pipe saw them.
type Seen = Arc<Mutex<Vec<(u64, u32, u32)>>>;

fn seen() -> Seen {
    Arc::new(Mutex::new(Vec::new()))
}

fn get(s: &Seen) -> Vec<(u64, u32, u32)> {
    s.lock().unwrap().clone()
}

fn tokens(s: &Seen) -> Vec<u64> {
    get(s).into_iter().map(|(t, _, _)| t).collect()
}

/// A serial pipe that records what it sees.
fn recorder(s: &Seen) -> Pipe {
    let s = s.clone();
    Pipe::serial(move |pf| {
        s.lock()
            .unwrap()
            .push((pf.token(), pf.line(), pf.num_deferrals()));
        Ok(())
    })
}

type Log = Arc<Mutex<Vec<String>>>;

/// Pipe 0 of the design notes' cases: stops on the fresh id `stop`, defers `(token,
/// num_deferrals)` to the script's targets, and logs each invocation as "token/nd@Lline", with
/// " D" when it deferred, or " STOP".
fn source(stop: u64, log: &Log, script: &[((u64, u32), &[u64])]) -> Pipe {
    let log = log.clone();
    let script: HashMap<(u64, u32), Vec<u64>> =
        script.iter().map(|(k, v)| (*k, v.to_vec())).collect();
    Pipe::serial(move |pf| {
        let (t, nd, line) = (pf.token(), pf.num_deferrals(), pf.line());
        if t == stop {
            log.lock()
                .unwrap()
                .push(format!("{}/{}@L{} STOP", t, nd, line));
            return pf.stop().map_err(OpError::from);
        }
        let targets = script.get(&(t, nd)).cloned().unwrap_or_default();
        for x in &targets {
            pf.defer(*x)?;
        }
        let d = if targets.is_empty() { "" } else { " D" };
        log.lock()
            .unwrap()
            .push(format!("{}/{}@L{}{}", t, nd, line, d));
        Ok(())
    })
}

fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn joined(l: &Log) -> String {
    l.lock().unwrap().join(" ")
}

/// Pipe 0 stopping on the fresh id `stop`, nothing else.
fn stopper(stop: u64) -> Pipe {
    Pipe::serial(move |pf| {
        if pf.token() == stop {
            pf.stop()?;
        }
        Ok(())
    })
}

/// A deferred op on `v` whose Completion comes back: the var is held until it is completed.
fn hold(e: &Engine, v: &ordo::Var) -> Completion {
    let (tx, rx) = mpsc::channel();
    e.push(&[], &[v], move |x| {
        tx.send(x.defer()?).unwrap();
        Ok(())
    })
    .unwrap();
    rx.recv_timeout(LIMIT).unwrap()
}

// ----------------------------------------------------------------------------------------------
// Token flow
// ----------------------------------------------------------------------------------------------

/// How many callbacks of one pipe run at once now, and the most seen.
#[derive(Clone, Default)]
struct Overlap(Arc<(AtomicUsize, AtomicUsize)>);

impl Overlap {
    fn during(&self, f: impl FnOnce()) {
        let now = self.0 .0.fetch_add(1, Ordering::SeqCst) + 1;
        self.0 .1.fetch_max(now, Ordering::SeqCst);
        f();
        thread::yield_now(); // a wider window for a second caller to show up
        self.0 .0.fetch_sub(1, Ordering::SeqCst);
    }
    fn most(&self) -> usize {
        self.0 .1.load(Ordering::SeqCst)
    }
}

#[test]
fn serial_parallel_serial_flow() {
    each_kind(|kind, e| {
        const N: u64 = 40;
        const L: u32 = 4;
        let stop = Arc::new(AtomicU64::new(N));
        let (gen, par, ser) = (seen(), seen(), seen());
        let (first, last) = (Overlap::default(), Overlap::default());
        let pipes = {
            let (stop, gen, par, ser) = (stop.clone(), gen.clone(), par.clone(), ser.clone());
            let (first, last) = (first.clone(), last.clone());
            vec![
                Pipe::serial(move |pf| {
                    assert_eq!(pf.pipe(), 0);
                    first.during(|| gen.lock().unwrap().push((pf.token(), pf.line(), 0)));
                    if pf.token() == stop.load(Ordering::SeqCst) {
                        pf.stop()?;
                    }
                    Ok(())
                }),
                Pipe::parallel(move |pf| {
                    assert_eq!(pf.pipe(), 1);
                    let nd = pf.num_deferrals();
                    par.lock().unwrap().push((pf.token(), pf.line(), nd));
                    Ok(())
                }),
                Pipe::serial(move |pf| {
                    assert_eq!(pf.pipe(), 2);
                    let nd = pf.num_deferrals();
                    last.during(|| ser.lock().unwrap().push((pf.token(), pf.line(), nd)));
                    Ok(())
                }),
            ]
        };
        let mut p = e.pipeline(L, pipes).unwrap();
        assert_eq!((p.num_lines(), p.num_pipes()), (L, 3));
        assert_eq!(p.num_tokens().unwrap(), 0);
        p.run().unwrap();

        // pipe 0 was called on 0 ..= N and stopped on N, which is not counted
        assert_eq!(tokens(&gen), (0..=N).collect::<Vec<_>>(), "{:?}", kind);
        assert_eq!(p.num_tokens().unwrap(), N, "{:?}", kind);
        let expected: Vec<(u64, u32, u32)> =
            (0..N).map(|t| (t, (t % L as u64) as u32, 0)).collect();
        let mut par_sorted = get(&par);
        par_sorted.sort_unstable();
        assert_eq!(
            par_sorted, expected,
            "{:?}: each token once through the parallel pipe",
            kind
        );
        assert_eq!(
            get(&ser),
            expected,
            "{:?}: the serial pipe in token order",
            kind
        );
        assert_eq!(
            (first.most(), last.most()),
            (1, 1),
            "{:?}: a serial pipe ran twice at once",
            kind
        );
        assert_eq!(p.dropped().unwrap(), Vec::<u64>::new());

        // a rerun without reset goes on from token N (and on the line ring where it was)
        ser.lock().unwrap().clear();
        stop.store(N + 6, Ordering::SeqCst);
        p.run().unwrap();
        let again: Vec<(u64, u32, u32)> =
            (N..N + 6).map(|t| (t, (t % L as u64) as u32, 0)).collect();
        assert_eq!(get(&ser), again, "{:?}", kind);
        assert_eq!(p.num_tokens().unwrap(), N + 6);

        // a reset starts from token 0 on line 0
        ser.lock().unwrap().clear();
        stop.store(5, Ordering::SeqCst);
        p.reset().unwrap();
        assert_eq!(p.num_tokens().unwrap(), 0);
        p.run().unwrap();
        assert_eq!(tokens(&ser), [0, 1, 2, 3, 4], "{:?}", kind);
        assert_eq!(p.num_tokens().unwrap(), 5);
    });
}

#[test]
fn stop_on_the_first_token_runs_nothing_else() {
    each_kind(|kind, e| {
        let later = seen();
        let mut p = e.pipeline(2, vec![stopper(0), recorder(&later)]).unwrap();
        p.run().unwrap();
        assert_eq!(p.num_tokens().unwrap(), 0, "{:?}", kind);
        assert!(get(&later).is_empty(), "{:?}", kind);
    });
}

// ----------------------------------------------------------------------------------------------
// Deferral: the cases of pipeline.md §6, whose pipe-0 traces are deterministic
// ----------------------------------------------------------------------------------------------

#[test]
fn deferral_documentation_example() {
    // T1a: L=4, S-S-S, stop at 11; 2 waits for 8; 5 waits for 2 and 7, then for 9
    each_kind(|kind, e| {
        let (l, p1, p2) = (log(), seen(), seen());
        let script: &[((u64, u32), &[u64])] = &[((2, 0), &[8]), ((5, 0), &[2, 7]), ((5, 1), &[9])];
        let pipes = vec![source(11, &l, script), recorder(&p1), recorder(&p2)];
        let mut p = e.pipeline(4, pipes).unwrap();
        p.run().unwrap();
        assert_eq!(
            joined(&l),
            "0/0@L0 1/0@L1 2/0@L2 D 3/0@L2 4/0@L3 5/0@L0 D 6/0@L0 7/0@L1 8/0@L2 \
             2/1@L3 5/1@L0 D 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP",
            "{:?}",
            kind
        );
        // every serial pipe sees the accepted order, with the lines in turn and the final nd
        let accepted = [0, 1, 3, 4, 6, 7, 8, 2, 9, 5, 10];
        assert_eq!(tokens(&p1), accepted, "{:?}", kind);
        assert_eq!(get(&p2), get(&p1), "{:?}", kind);
        let lines: Vec<u32> = get(&p1).iter().map(|s| s.1).collect();
        assert_eq!(lines, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2], "{:?}", kind);
        let nd: Vec<(u64, u32)> = get(&p1)
            .iter()
            .filter(|s| s.2 != 0)
            .map(|s| (s.0, s.2))
            .collect();
        assert_eq!(nd, [(2, 1), (5, 2)], "{:?}", kind);
        assert_eq!(p.num_tokens().unwrap(), 11);
    });
}

#[test]
fn deferral_chain_reverses_the_order() {
    // T3: L=3, S-S, stop at 5, each of 0..3 waits for the next token
    each_kind(|kind, e| {
        let (l, p1) = (log(), seen());
        let script: &[((u64, u32), &[u64])] = &[
            ((0, 0), &[1]),
            ((1, 0), &[2]),
            ((2, 0), &[3]),
            ((3, 0), &[4]),
        ];
        let mut p = e
            .pipeline(3, vec![source(5, &l, script), recorder(&p1)])
            .unwrap();
        p.run().unwrap();
        assert_eq!(
            joined(&l),
            "0/0@L0 D 1/0@L0 D 2/0@L0 D 3/0@L0 D 4/0@L0 3/1@L1 2/1@L2 1/1@L0 0/1@L1 5/0@L2 STOP",
            "{:?}",
            kind
        );
        assert_eq!(
            get(&p1),
            [(4, 0, 0), (3, 1, 1), (2, 2, 1), (1, 0, 1), (0, 1, 1)],
            "{:?}",
            kind
        );
        assert_eq!(p.num_tokens().unwrap(), 5);
    });
}

#[test]
fn deferral_to_itself_is_ignored_and_retried_at_once() {
    // T2b: L=2, S-S, stop at 5, token 2 defers to itself twice: invoked again at once each time
    each_kind(|kind, e| {
        let (l, p1) = (log(), seen());
        let script: &[((u64, u32), &[u64])] = &[((2, 0), &[2]), ((2, 1), &[2])];
        let mut p = e
            .pipeline(2, vec![source(5, &l, script), recorder(&p1)])
            .unwrap();
        p.run().unwrap();
        assert_eq!(
            joined(&l),
            "0/0@L0 1/0@L1 2/0@L0 D 2/1@L0 D 2/2@L0 3/0@L1 4/0@L0 5/0@L1 STOP",
            "{:?}",
            kind
        );
        assert_eq!(tokens(&p1), [0, 1, 2, 3, 4], "{:?}", kind);
        assert_eq!(get(&p1)[2], (2, 0, 2), "{:?}", kind);
    });
}

#[test]
fn unresolvable_deferral_drops_the_token() {
    // T4a: L=2, S-S-S, stop at 6, token 1 waits for 100, never generated: dropped
    each_kind(|kind, e| {
        let (l, p1, p2) = (log(), seen(), seen());
        let script: &[((u64, u32), &[u64])] = &[((1, 0), &[100])];
        let pipes = vec![source(6, &l, script), recorder(&p1), recorder(&p2)];
        let mut p = e.pipeline(2, pipes).unwrap();
        let err = p.run().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::TokensDropped, "{:?}: {}", kind, err);
        assert_eq!(err.status(), ordo::sys::ORDO_ERR_TOKENS_DROPPED);
        assert!(err.message().contains("1 token dropped"), "{}", err);
        assert_eq!(p.dropped().unwrap(), [1], "{:?}", kind);
        assert_eq!(
            joined(&l),
            "0/0@L0 1/0@L1 D 2/0@L1 3/0@L0 4/0@L1 5/0@L0 6/0@L1 STOP",
            "{:?}",
            kind
        );
        assert_eq!(tokens(&p1), [0, 2, 3, 4, 5], "{:?}", kind);
        assert_eq!(get(&p2), get(&p1));
        assert_eq!(p.num_tokens().unwrap(), 6);

        // the rest of the run was intact: it runs again without a reset, with no replay of
        // token 1 (pipe 0 is called on the fresh id 6 only, on the next line of the ring)
        l.lock().unwrap().clear();
        p1.lock().unwrap().clear();
        p.run().unwrap();
        assert_eq!(joined(&l), "6/0@L1 STOP", "{:?}", kind);
        assert!(get(&p1).is_empty());
        assert_eq!(p.dropped().unwrap(), Vec::<u64>::new());
        // from token 0 again after a reset: the same drop
        p.reset().unwrap();
        assert_eq!(p.run().unwrap_err().kind(), ErrorKind::TokensDropped);
        assert_eq!(p.dropped().unwrap(), [1]);
    });
}

// ----------------------------------------------------------------------------------------------
// Failures
// ----------------------------------------------------------------------------------------------

#[test]
fn failing_callback_fails_the_run_until_reset() {
    each_kind(|kind, e| {
        let ok = Arc::new(AtomicUsize::new(0));
        let s = seen();
        let work = {
            let (ok, s) = (ok.clone(), s.clone());
            Pipe::serial(move |pf| {
                if pf.token() == 3 && ok.load(Ordering::SeqCst) == 0 {
                    return Err(OpError::new(7, "bad token"));
                }
                s.lock().unwrap().push((pf.token(), 0, 0));
                Ok(())
            })
        };
        let mut p = e.pipeline(2, vec![stopper(10), work]).unwrap();
        let err = p.run().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}: {}", kind, err);
        assert_eq!(err.op_code(), Some(7), "{}", err);
        let m = err.message();
        assert!(
            m.starts_with("ordo_pipeline_run: pipe 1 failed on token 3 (line 1)"),
            "{}",
            m
        );
        assert!(
            m.contains("(code 7)") && m.ends_with(": bad token"),
            "{}",
            m
        );
        assert_eq!(p.failure(), Some(OpError::new(7, "bad token")));
        let seen_tokens = tokens(&s);
        assert!(
            !seen_tokens.contains(&3) && seen_tokens.len() < 10,
            "{:?}",
            seen_tokens
        );

        // the pipeline needs a reset
        assert_eq!(
            p.run().unwrap_err().kind(),
            ErrorKind::InvalidState,
            "{:?}",
            kind
        );
        assert_eq!(
            p.push(&[], &[]).unwrap_err().kind(),
            ErrorKind::InvalidState
        );
        p.reset().unwrap();
        assert_eq!(p.failure(), None);
        ok.store(1, Ordering::SeqCst);
        s.lock().unwrap().clear();
        p.run().unwrap();
        assert_eq!(tokens(&s), (0..10).collect::<Vec<_>>(), "{:?}", kind);
    });
}

#[test]
fn panicking_callback_fails_the_run_until_reset() {
    quiet_expected_panics();
    each_kind(|kind, e| {
        // in a parallel pipe
        let work = Pipe::parallel(|pf| {
            if pf.token() == 2 {
                panic!("expected panic in pipe 1 on token {}", pf.token());
            }
            Ok(())
        });
        let mut p = e.pipeline(3, vec![stopper(6), work]).unwrap();
        let err = p.run().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}: {}", kind, err);
        assert_eq!(err.op_code(), Some(FAILED));
        assert!(
            err.message().contains(": pipe 1 failed on token 2 "),
            "{}",
            err
        );
        assert!(
            err.message()
                .ends_with(": panicked: expected panic in pipe 1 on token 2"),
            "{}",
            err
        );
        assert_eq!(p.run().unwrap_err().kind(), ErrorKind::InvalidState);
        p.reset().unwrap();

        // in pipe 0, and a later run after the reset
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let source = Pipe::serial(move |pf| {
            if c.fetch_add(1, Ordering::SeqCst) == 4 {
                panic!("expected panic in the source");
            }
            if pf.token() == 8 {
                pf.stop()?;
            }
            Ok(())
        });
        p.reset_pipes(None, vec![source, Pipe::serial(|_| Ok(()))])
            .unwrap();
        let err = p.run().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}", kind);
        assert!(
            err.message().contains(": pipe 0 failed on token 4 "),
            "{}",
            err
        );
        assert!(
            err.message()
                .ends_with("panicked: expected panic in the source"),
            "{}",
            err
        );
        assert_eq!(
            p.num_tokens().unwrap(),
            4,
            "the failing fresh token is not counted"
        );
        p.reset().unwrap();
        p.run().unwrap();
        assert_eq!(p.num_tokens().unwrap(), 8);
    });
}

#[test]
fn the_error_names_the_failure_the_library_reports() {
    // Every token fails in a parallel pipe, two at once where the engine has workers (they meet
    // before failing, and the odd one fails 20 ms later): the callback's message appended to
    // the run's error is that of the token the library's message names, not merely the first
    // or the last failure recorded.
    each_kind(|kind, e| {
        let arrived = Arc::new(AtomicUsize::new(0));
        let a = arrived.clone();
        let work = Pipe::parallel(move |pf| {
            if kind != Kind::Naive {
                a.fetch_add(1, Ordering::SeqCst);
                spin_until(Duration::from_millis(500), || a.load(Ordering::SeqCst) >= 2);
                if pf.token() % 2 == 1 {
                    thread::sleep(Duration::from_millis(20));
                }
            }
            Err(OpError::new(5, format!("token {} failed", pf.token())))
        });
        let mut p = e.pipeline(4, vec![stopper(50), work]).unwrap();
        for _ in 0..3 {
            arrived.store(0, Ordering::SeqCst);
            let err = p.run().unwrap_err();
            let m = err.message();
            let t: u64 = m
                .strip_prefix("ordo_pipeline_run: pipe 1 failed on token ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{:?}: {}", kind, m));
            assert!(
                m.ends_with(&format!(": token {} failed", t)),
                "{:?}: {}",
                kind,
                m
            );
            assert_eq!(err.op_code(), Some(5));
            p.reset().unwrap();
        }
    });
}

#[test]
fn stop_and_defer_outside_pipe_0_are_refused() {
    each_kind(|kind, e| {
        let refused = Arc::new(Mutex::new(Vec::new()));
        let r = refused.clone();
        let work = Pipe::serial(move |pf| {
            let a = pf.stop().unwrap_err().kind();
            let b = pf.defer(99).unwrap_err().kind();
            r.lock().unwrap().extend([a, b]);
            Ok(())
        });
        let mut p = e.pipeline(2, vec![stopper(3), work]).unwrap();
        p.run().unwrap(); // refused, nothing changes: the run goes on
        assert_eq!(
            *refused.lock().unwrap(),
            [ErrorKind::InvalidState; 6],
            "{:?}",
            kind
        );
        assert_eq!(p.num_tokens().unwrap(), 3);
    });
}

// ----------------------------------------------------------------------------------------------
// Pushed runs
// ----------------------------------------------------------------------------------------------

#[test]
fn push_is_ordered_with_ops_through_a_var() {
    each_kind(|kind, e| {
        let v = e.new_var().unwrap();
        let events = Arc::new(Mutex::new(Vec::<String>::new()));
        let s = seen();
        let work = {
            let (events, s) = (events.clone(), s.clone());
            Pipe::serial(move |pf| {
                if pf.token() == 0 {
                    events.lock().unwrap().push("pipeline".into());
                }
                s.lock().unwrap().push((pf.token(), 0, 0));
                Ok(())
            })
        };
        let mut p = e.pipeline(3, vec![stopper(20), work]).unwrap();
        let ev = events.clone();
        e.push(&[], &[&v], move |_| {
            thread::sleep(Duration::from_millis(5)); // the run must not overtake it
            ev.lock().unwrap().push("producer".into());
            Ok(())
        })
        .unwrap();
        p.push_with(&PushOptions::new().name("pipeline run"), &[], &[&v])
            .unwrap();
        let (ev, s2) = (events.clone(), s.clone());
        e.push(&[&v], &[], move |_| {
            ev.lock()
                .unwrap()
                .push(format!("consumer saw {}", tokens(&s2).len()));
            Ok(())
        })
        .unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(
            *events.lock().unwrap(),
            ["producer", "pipeline", "consumer saw 20"],
            "{:?}",
            kind
        );
        assert_eq!(tokens(&s), (0..20).collect::<Vec<_>>());
        assert_eq!(p.num_tokens().unwrap(), 20);

        // a run that reads the var waits for the writer before it, and the writer after it
        // waits for the run
        p.reset().unwrap();
        s.lock().unwrap().clear();
        events.lock().unwrap().clear();
        let ev = events.clone();
        e.push(&[], &[&v], move |_| {
            thread::sleep(Duration::from_millis(5));
            ev.lock().unwrap().push("producer".into());
            Ok(())
        })
        .unwrap();
        p.push(&[&v], &[]).unwrap();
        let (ev, s2) = (events.clone(), s.clone());
        e.push(&[], &[&v], move |_| {
            ev.lock()
                .unwrap()
                .push(format!("writer saw {}", tokens(&s2).len()));
            Ok(())
        })
        .unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(
            *events.lock().unwrap(),
            ["producer", "pipeline", "writer saw 20"],
            "{:?}",
            kind
        );
    });
}

#[test]
fn pushed_run_failure_poisons_the_var() {
    each_kind(|kind, e| {
        let v = e.new_var().unwrap();
        let work = Pipe::serial(|pf| {
            if pf.token() == 1 {
                return Err(OpError::new(9, "pushed failure"));
            }
            Ok(())
        });
        let mut p = e.pipeline(2, vec![stopper(4), work]).unwrap();
        p.push(&[], &[&v]).unwrap();
        let skipped = Arc::new(AtomicUsize::new(0));
        let sk = skipped.clone();
        e.push(&[], &[&v], move |_| {
            sk.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}: {}", kind, err);
        assert_eq!(err.op_code(), Some(9), "{}", err);
        assert!(
            err.message().contains("pipe 1 failed on token 1"),
            "{}",
            err
        );
        assert_eq!(
            skipped.load(Ordering::SeqCst),
            0,
            "the op after the failed run ran"
        );
        assert_eq!(p.failure(), Some(OpError::new(9, "pushed failure")));
        assert_eq!(p.run().unwrap_err().kind(), ErrorKind::InvalidState);

        // dropped tokens fail a pushed run's op with ORDO_ERR_TOKENS_DROPPED
        p.reset().unwrap();
        v.clear_error().unwrap();
        let l = log();
        let script: &[((u64, u32), &[u64])] = &[((0, 0), &[50])];
        p.reset_pipes(None, vec![source(3, &l, script), Pipe::serial(|_| Ok(()))])
            .unwrap();
        p.push(&[], &[&v]).unwrap();
        let err = e.wait_timeout(&v, LIMIT).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::OpFailed, "{:?}", kind);
        assert_eq!(
            err.op_code(),
            Some(ordo::sys::ORDO_ERR_TOKENS_DROPPED),
            "{}",
            err
        );
        assert_eq!(p.dropped().unwrap(), [0]);
        assert_eq!(p.failure(), None, "no callback failed");
    });
}

#[test]
fn a_pushed_run_in_flight_refuses_run_reset_and_destroy() {
    each_kind(|kind, e| {
        let v = e.new_var().unwrap();
        let held = hold(&e, &v);
        let s = seen();
        let mut p = e.pipeline(2, vec![stopper(3), recorder(&s)]).unwrap();
        p.push(&[&v], &[]).unwrap(); // waits for the held op: in flight from now on
        let state = |r: ordo::Result<()>| r.unwrap_err().kind();
        assert_eq!(state(p.run()), ErrorKind::InvalidState, "{:?}", kind);
        assert_eq!(state(p.push(&[], &[])), ErrorKind::InvalidState);
        assert_eq!(state(p.reset()), ErrorKind::InvalidState);
        assert_eq!(
            state(p.reset_pipes(None, vec![stopper(1)])),
            ErrorKind::InvalidState
        );
        assert_eq!(p.dropped().unwrap_err().kind(), ErrorKind::InvalidState);
        let refused = p.destroy().unwrap_err();
        assert_eq!(refused.error.kind(), ErrorKind::InvalidState, "{:?}", kind);
        let p = refused.pipeline;
        assert!(get(&s).is_empty(), "{:?}: the run started early", kind);
        held.complete().unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(
            tokens(&s),
            [0, 1, 2],
            "{:?}: the refused reset_pipes changed the pipes",
            kind
        );
        p.destroy().unwrap();
    });
}

// ----------------------------------------------------------------------------------------------
// Lifetimes of the closures
// ----------------------------------------------------------------------------------------------

/// A serial pipe that owns a drop token of `count` and records into `s`.
fn counted(count: &DropCount, s: &Seen) -> Pipe {
    let (t, s) = (count.token(), s.clone());
    Pipe::serial(move |pf| {
        let _owned = &t;
        s.lock().unwrap().push((pf.token(), 0, 0));
        Ok(())
    })
}

#[test]
fn closures_live_until_destroy_or_replaced() {
    each_kind(|kind, e| {
        let (old, new, refused) = (
            DropCount::default(),
            DropCount::default(),
            DropCount::default(),
        );
        let s = seen();
        let mut p = e.pipeline(2, vec![stopper(3), counted(&old, &s)]).unwrap();
        p.run().unwrap();
        assert_eq!(old.get(), 0, "{:?}", kind);

        // a refused replacement drops the new closures at once and keeps the old ones in use
        let bad = vec![Pipe::parallel(|_| Ok(())), counted(&refused, &s)];
        assert_eq!(
            p.reset_pipes(None, bad).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!((refused.get(), old.get()), (1, 0), "{:?}", kind);
        p.reset().unwrap();
        s.lock().unwrap().clear();
        p.run().unwrap();
        assert_eq!(tokens(&s), [0, 1, 2], "{:?}", kind);

        // a replacement lets go of the old closures once it succeeded
        p.reset_pipes(Some(3), vec![stopper(2), counted(&new, &s)])
            .unwrap();
        assert_eq!((old.get(), new.get()), (1, 0), "{:?}", kind);
        assert_eq!((p.num_lines(), p.num_pipes()), (3, 2));
        s.lock().unwrap().clear();
        p.run().unwrap();
        assert_eq!(tokens(&s), [0, 1]);
        p.destroy().unwrap();
        assert_eq!(new.get(), 1, "{:?}: destroy drops the closures", kind);

        // a refused creation drops them at once
        let gone = DropCount::default();
        let err = e.pipeline(0, vec![counted(&gone, &s)]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(gone.get(), 1);
    });
}

#[test]
fn dropping_a_pipeline_with_a_pushed_run_in_flight() {
    each_kind(|kind, e| {
        let v = e.new_var().unwrap();
        let held = hold(&e, &v);
        let (count, s) = (DropCount::default(), seen());
        let p = e
            .pipeline(2, vec![stopper(4), counted(&count, &s)])
            .unwrap();
        p.push(&[&v], &[]).unwrap();
        drop(p); // returns at once; the closures stay until the run is over
        assert_eq!(
            count.get(),
            0,
            "{:?}: a closure dropped under a run in flight",
            kind
        );
        held.complete().unwrap();
        e.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(tokens(&s), [0, 1, 2, 3], "{:?}", kind);
        assert!(
            spin_until(LIMIT, || count.get() == 1),
            "{:?}: the closures were not dropped after the run",
            kind
        );
    });
}

#[test]
fn dropping_a_pipeline_inside_its_own_pushed_run() {
    // the last owner of the pipeline is dropped by one of its own callbacks: the drop neither
    // blocks nor frees the closures under the run, which goes on to the end
    each_kind(|kind, e| {
        let v = e.new_var().unwrap();
        let held = hold(&e, &v);
        let (count, s) = (DropCount::default(), seen());
        let slot: Arc<Mutex<Option<Pipeline>>> = Arc::new(Mutex::new(None));
        let dropper = {
            let (slot, t) = (slot.clone(), count.token());
            Pipe::serial(move |pf| {
                let _owned = &t;
                if pf.token() == 2 {
                    let p = slot.lock().unwrap().take();
                    assert!(p.is_some(), "the pipeline is in the slot");
                    drop(p);
                }
                Ok(())
            })
        };
        let p = e
            .pipeline(2, vec![stopper(6), dropper, counted(&count, &s)])
            .unwrap();
        p.push(&[], &[&v]).unwrap();
        *slot.lock().unwrap() = Some(p);
        held.complete().unwrap();
        e.wait_timeout(&v, LIMIT).unwrap();
        assert_eq!(tokens(&s), [0, 1, 2, 3, 4, 5], "{:?}", kind);
        assert!(
            spin_until(LIMIT, || count.get() == 2),
            "{:?}: the closures were not dropped after the run",
            kind
        );
    });
}

// ----------------------------------------------------------------------------------------------
// Misuse
// ----------------------------------------------------------------------------------------------

#[test]
fn bad_arguments_are_invalid_argument() {
    each_kind(|kind, e| {
        let invalid = |r: ordo::Result<Pipeline>| r.unwrap_err().kind();
        let noop = || Pipe::serial(|_| Ok(()));
        assert_eq!(
            invalid(e.pipeline(0, vec![noop()])),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            invalid(e.pipeline(65_537, vec![noop()])),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            invalid(e.pipeline(2, Vec::new())),
            ErrorKind::InvalidArgument
        );
        let err = e
            .pipeline(2, vec![Pipe::parallel(|_| Ok(())), noop()])
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{:?}", kind);
        assert!(!err.message().is_empty());

        let s = seen();
        let mut p = e.pipeline(2, [stopper(2), recorder(&s)]).unwrap();
        for (lines, pipes) in [
            (Some(0), vec![noop()]),
            (None, vec![]),
            (Some(2), vec![Pipe::parallel(|_| Ok(()))]),
        ] {
            assert_eq!(
                p.reset_pipes(lines, pipes).unwrap_err().kind(),
                ErrorKind::InvalidArgument,
                "{:?}",
                kind
            );
        }
        assert_eq!((p.num_lines(), p.num_pipes()), (2, 2), "nothing changed");
        p.run().unwrap();
        assert_eq!(tokens(&s), [0, 1], "{:?}", kind);

        // a var of another engine
        let other = engine(Kind::Naive);
        let foreign = other.new_var().unwrap();
        assert_eq!(
            p.push(&[&foreign], &[]).unwrap_err().kind(),
            ErrorKind::InvalidHandle
        );
    });
}

#[test]
fn run_after_the_engine_shut_down() {
    for kind in KINDS {
        bounded(move || {
            let e = engine(kind);
            let mut p = e.pipeline(1, vec![stopper(1)]).unwrap();
            p.run().unwrap();
            drop(e); // shuts the engine down; the pipeline keeps its memory
            let err = p.run().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Shutdown, "{:?}: {}", kind, err);
            assert_eq!(p.push(&[], &[]).unwrap_err().kind(), ErrorKind::Shutdown);
            assert_eq!(p.num_tokens().unwrap(), 1, "queries still answer");
            p.destroy().unwrap();
        });
    }
}

#[test]
fn running_a_pipeline_of_the_same_engine_inside_a_callback_would_deadlock() {
    each_kind(|kind, e| {
        let inner = Arc::new(Mutex::new(e.pipeline(1, vec![stopper(1)]).unwrap()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (i, g) = (inner.clone(), got.clone());
        let source = Pipe::serial(move |pf| {
            g.lock()
                .unwrap()
                .push(i.lock().unwrap().run().unwrap_err().kind());
            pf.stop()?;
            Ok(())
        });
        let mut p = e.pipeline(1, vec![source]).unwrap();
        p.run().unwrap();
        assert_eq!(
            *got.lock().unwrap(),
            [ErrorKind::WouldDeadlock],
            "{:?}",
            kind
        );
        // from outside, it runs
        inner.lock().unwrap().run().unwrap();
    });
}
