//! The engine builder's settings as the engine reports them back (`EngineRef::config`), and
//! values the library refuses.
mod common;

use common::KINDS;
use ordo::{Engine, ErrorKind};

#[test]
fn gpu_fields_round_trip_through_the_effective_config() {
    for kind in KINDS {
        for (streams, waits) in [(1, false), (7, true), (64, false)] {
            let e = Engine::builder()
                .kind(kind)
                .cpu_threads(2)
                .gpu_compute_streams(streams)
                .gpu_stream_waits(waits)
                .build()
                .unwrap();
            let c = e.config().unwrap();
            assert_eq!(c.kind, Some(kind));
            assert_eq!(c.gpu_compute_streams, streams as i32, "{:?}", kind);
            assert_eq!(c.gpu_stream_waits, waits, "{:?}", kind);
        }
    }
}

#[test]
fn gpu_fields_left_unset_take_a_valid_value() {
    let e = Engine::builder().cpu_threads(2).build().unwrap();
    let c = e.config().unwrap();
    assert!(
        (1..=64).contains(&c.gpu_compute_streams),
        "{}",
        c.gpu_compute_streams
    );
    // 0 means what leaving it unset means
    let z = Engine::builder()
        .cpu_threads(2)
        .gpu_compute_streams(0)
        .build()
        .unwrap();
    assert_eq!(
        z.config().unwrap().gpu_compute_streams,
        c.gpu_compute_streams
    );
}

#[test]
fn gpu_compute_streams_out_of_range_is_invalid_argument() {
    for n in [65, 1000, u32::MAX] {
        let err = Engine::builder()
            .cpu_threads(2)
            .gpu_compute_streams(n)
            .build()
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{}: {}", n, err);
        assert!(err.message().contains("gpu_compute_streams"), "{}", err);
    }
}

#[test]
fn other_settings_round_trip_too() {
    let e = Engine::builder()
        .kind(ordo::Kind::PerDevice)
        .cpu_threads(3)
        .cpu_priority_threads(2)
        .copy_threads(2)
        .max_pending(Some(128))
        .pushers_help(true)
        .build()
        .unwrap();
    let c = e.config().unwrap();
    assert_eq!(
        (
            c.cpu_threads,
            c.cpu_priority_threads,
            c.copy_threads,
            c.max_pending
        ),
        (3, 2, 2, 128)
    );
    assert!(c.pushers_help);
}
