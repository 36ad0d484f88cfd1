//! Raw declarations of libordo's C ABI, one for one with `include/ordo/ordo.h` and
//! `include/ordo/pipeline.h` (written by hand: no bindgen, no crates.io). Every function here is
//! `unsafe`; the safe API is the `ordo` crate.
//!
//! The header's comments are the contract; they are not repeated here. Struct layouts are pinned
//! by tests that compare `size_of` and field offsets with what the loaded library reports
//! through `ordo_struct_size` (and, for `ordo_pipe`, which it does not report, with the C
//! header alone).
#![allow(non_camel_case_types)]
use std::marker::{PhantomData, PhantomPinned};
use std::os::raw::{c_char, c_void};

// ----------------------------------------------------------------------------------------------
// Version
// ----------------------------------------------------------------------------------------------

pub const ORDO_VERSION_MAJOR: u32 = 0;
pub const ORDO_VERSION_MINOR: u32 = 1;
pub const ORDO_VERSION_PATCH: u32 = 0;
/// The version these declarations describe: major * 10000 + minor * 100 + patch.
pub const ORDO_VERSION_NUMBER: u32 =
    ORDO_VERSION_MAJOR * 10000 + ORDO_VERSION_MINOR * 100 + ORDO_VERSION_PATCH;

// ----------------------------------------------------------------------------------------------
// Types and status codes
// ----------------------------------------------------------------------------------------------

/// An engine (opaque; reference counted with `ordo_engine_retain` / `ordo_engine_release`).
#[repr(C)]
pub struct ordo_engine {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// The execution context of a running op (opaque; valid only inside its callback).
#[repr(C)]
pub struct ordo_exec {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// A captured graph of ops (opaque; a handle, not a pointer to read: `ordo_graph_begin_capture`,
/// `ordo_graph_end_capture`, `ordo_graph_launch`, `ordo_graph_destroy`).
#[repr(C)]
pub struct ordo_graph {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// C's `FILE` (opaque), for `ordo_engine_dump`.
#[repr(C)]
pub struct FILE {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

pub type ordo_var = u64;
pub type ordo_completion = u64;
pub type ordo_opr = u64;
pub type ordo_status = i32;

pub type ordo_fn =
    Option<unsafe extern "C" fn(exec: *mut ordo_exec, user_data: *mut c_void) -> i32>;
pub type ordo_free_fn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;
pub type ordo_wait_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, status: ordo_status)>;

pub const ORDO_OK: ordo_status = 0;
pub const ORDO_ERR_INVALID_ARGUMENT: ordo_status = 1;
pub const ORDO_ERR_INVALID_HANDLE: ordo_status = 2;
pub const ORDO_ERR_OP_FAILED: ordo_status = 3;
pub const ORDO_ERR_TIMEOUT: ordo_status = 4;
pub const ORDO_ERR_NO_DEVICE: ordo_status = 5;
pub const ORDO_ERR_SHUTDOWN: ordo_status = 6;
pub const ORDO_ERR_NO_MEMORY: ordo_status = 7;
pub const ORDO_ERR_INVALID_STATE: ordo_status = 8;
pub const ORDO_ERR_WOULD_DEADLOCK: ordo_status = 9;
pub const ORDO_ERR_UNSUPPORTED: ordo_status = 10;
pub const ORDO_ERR_INTERNAL: ordo_status = 11;
pub const ORDO_ERR_TOKENS_DROPPED: ordo_status = 12;

// ----------------------------------------------------------------------------------------------
// Struct sizes
// ----------------------------------------------------------------------------------------------

pub const ORDO_STRUCT_ENGINE_CONFIG: i32 = 1;
pub const ORDO_STRUCT_STATS: i32 = 2;
pub const ORDO_STRUCT_QUEUE_STATS: i32 = 3;
pub const ORDO_STRUCT_PUSH_OPTS: i32 = 4;
pub const ORDO_STRUCT_EXEC_INFO: i32 = 5;

// ----------------------------------------------------------------------------------------------
// Engine
// ----------------------------------------------------------------------------------------------

pub const ORDO_ENGINE_DEFAULT: i32 = 0;
pub const ORDO_ENGINE_NAIVE: i32 = 1;
pub const ORDO_ENGINE_POOLED: i32 = 2;
pub const ORDO_ENGINE_PER_DEVICE: i32 = 3;

pub const ORDO_ENGINE_FLAG_PUSHERS_HELP: u32 = 0x1;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_engine_config {
    pub struct_size: u32,
    pub kind: i32,
    pub cpu_threads: i32,
    pub cpu_priority_threads: i32,
    pub copy_threads: i32,
    pub max_pending: i32,
    pub flags: u32,
    pub reserved0: u32,
    pub next: *const c_void,
    pub trace_path: *const c_char,
    pub gpu_compute_streams: i32,
    pub gpu_stream_waits: i32,
}

pub const ORDO_STATS_QUEUES: usize = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_stats {
    pub struct_size: u32,
    pub workers: u32,
    pub pushed: u64,
    pub completed: u64,
    pub failed: u64,
    pub skipped: u64,
    pub pending: u64,
    pub ready: u64,
    pub trace_records: u64,
    pub trace_dropped: u64,
    pub queue_ready: [u64; ORDO_STATS_QUEUES],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_queue_stats {
    pub struct_size: u32,
    pub queues: u32,
    pub device_type: i32,
    pub device_id: i32,
    pub prop: i32,
    pub workers: u32,
    pub ready: u64,
    pub name: *const c_char,
}

// ----------------------------------------------------------------------------------------------
// Pushing ops
// ----------------------------------------------------------------------------------------------

pub const ORDO_PROP_NORMAL: i32 = 0;
pub const ORDO_PROP_CPU_PRIORITIZED: i32 = 1;
pub const ORDO_PROP_COPY_TO_DEVICE: i32 = 2;
pub const ORDO_PROP_COPY_FROM_DEVICE: i32 = 3;
pub const ORDO_PROP_ASYNC: i32 = 4;

pub const ORDO_DEVICE_CPU: i32 = 0;
pub const ORDO_DEVICE_GPU: i32 = 1;

pub const ORDO_NAME_MAX: usize = 47;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_push_opts {
    pub struct_size: u32,
    pub priority: i32,
    pub prop: i32,
    pub device_type: i32,
    pub device_id: i32,
    pub reserved0: u32,
    pub free_fn: ordo_free_fn,
    pub name: *const c_char,
    pub next: *const c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_exec_info {
    pub struct_size: u32,
    pub device_type: i32,
    pub device_id: i32,
    pub worker_index: i32,
    pub priority: i32,
    pub prop: i32,
    pub stream: *mut c_void,
    pub engine: *mut ordo_engine,
    pub name: *const c_char,
}

extern "C" {
    pub fn ordo_version() -> u32;
    pub fn ordo_version_string() -> *const c_char;

    pub fn ordo_status_string(s: ordo_status) -> *const c_char;
    pub fn ordo_last_error_message() -> *const c_char;
    pub fn ordo_last_error_copy(buf: *mut c_char, cap: usize) -> usize;

    pub fn ordo_struct_size(kind: i32) -> usize;

    pub fn ordo_engine_config_init_sized(cfg: *mut ordo_engine_config, size: usize);
    pub fn ordo_engine_create(
        cfg: *const ordo_engine_config,
        out: *mut *mut ordo_engine,
    ) -> ordo_status;
    pub fn ordo_engine_destroy(e: *mut ordo_engine) -> ordo_status;
    pub fn ordo_engine_retain(e: *mut ordo_engine) -> ordo_status;
    pub fn ordo_engine_release(e: *mut ordo_engine) -> ordo_status;
    pub fn ordo_engine_get_config(e: *mut ordo_engine, out: *mut ordo_engine_config)
        -> ordo_status;
    pub fn ordo_engine_stats(e: *mut ordo_engine, out: *mut ordo_stats) -> ordo_status;
    pub fn ordo_engine_queue_stats(
        e: *mut ordo_engine,
        index: u32,
        out: *mut ordo_queue_stats,
    ) -> ordo_status;
    pub fn ordo_engine_queue_count(e: *mut ordo_engine, out: *mut u32) -> ordo_status;
    pub fn ordo_engine_write_trace(e: *mut ordo_engine, path: *const c_char) -> ordo_status;
    pub fn ordo_engine_dump(e: *mut ordo_engine, out: *mut FILE) -> ordo_status;
    pub fn ordo_device_count(out: *mut i32) -> ordo_status;

    pub fn ordo_var_new(e: *mut ordo_engine, out: *mut ordo_var) -> ordo_status;
    pub fn ordo_var_delete(e: *mut ordo_engine, v: ordo_var) -> ordo_status;
    pub fn ordo_var_clear_error(e: *mut ordo_engine, v: ordo_var) -> ordo_status;
    pub fn ordo_var_get_error(
        e: *mut ordo_engine,
        v: ordo_var,
        code: *mut i32,
        buf: *mut c_char,
        cap: usize,
    ) -> ordo_status;

    pub fn ordo_push_opts_init_sized(opts: *mut ordo_push_opts, size: usize);
    pub fn ordo_opr_push(
        e: *mut ordo_engine,
        fn_: ordo_fn,
        user_data: *mut c_void,
        const_vars: *const ordo_var,
        num_const: usize,
        mutable_vars: *const ordo_var,
        num_mutable: usize,
        opts: *const ordo_push_opts,
    ) -> ordo_status;
    pub fn ordo_opr_new(
        e: *mut ordo_engine,
        fn_: ordo_fn,
        user_data: *mut c_void,
        const_vars: *const ordo_var,
        num_const: usize,
        mutable_vars: *const ordo_var,
        num_mutable: usize,
        opts: *const ordo_push_opts,
        out: *mut ordo_opr,
    ) -> ordo_status;
    pub fn ordo_opr_push_prepared(e: *mut ordo_engine, opr: ordo_opr, priority: i32)
        -> ordo_status;
    pub fn ordo_opr_delete(e: *mut ordo_engine, opr: ordo_opr) -> ordo_status;

    pub fn ordo_exec_defer(exec: *mut ordo_exec, out: *mut ordo_completion) -> ordo_status;
    pub fn ordo_complete(c: ordo_completion, code: i32, message: *const c_char) -> ordo_status;
    pub fn ordo_exec_get_info(exec: *const ordo_exec, info: *mut ordo_exec_info) -> ordo_status;

    pub fn ordo_wait_for_var(e: *mut ordo_engine, v: ordo_var) -> ordo_status;
    pub fn ordo_wait_for_var_timeout(
        e: *mut ordo_engine,
        v: ordo_var,
        timeout_ns: u64,
    ) -> ordo_status;
    pub fn ordo_wait_for_all(e: *mut ordo_engine) -> ordo_status;
    pub fn ordo_wait_for_all_timeout(e: *mut ordo_engine, timeout_ns: u64) -> ordo_status;
    pub fn ordo_wait_for_var_async(
        e: *mut ordo_engine,
        v: ordo_var,
        fn_: ordo_wait_fn,
        user_data: *mut c_void,
    ) -> ordo_status;

    // Capture and replay (graphs)
    pub fn ordo_graph_begin_capture(e: *mut ordo_engine) -> ordo_status;
    pub fn ordo_graph_end_capture(e: *mut ordo_engine, out: *mut *mut ordo_graph) -> ordo_status;
    pub fn ordo_graph_launch(g: *mut ordo_graph) -> ordo_status;
    pub fn ordo_graph_destroy(g: *mut ordo_graph) -> ordo_status;
}

// ----------------------------------------------------------------------------------------------
// Pipelines (include/ordo/pipeline.h)
// ----------------------------------------------------------------------------------------------

/// A pipeline (opaque; a handle, not a pointer to read: `ordo_pipeline_create` ..
/// `ordo_pipeline_destroy`).
#[repr(C)]
pub struct ordo_pipeline {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// What a pipe callback learns about its token (opaque; valid only inside that callback, on
/// its thread).
#[repr(C)]
pub struct ordo_pipeflow {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `ordo_pipe.type`: a pipe that runs up to `num_lines` tokens at once, in any order.
pub const ORDO_PIPE_PARALLEL: i64 = 1;
/// `ordo_pipe.type`: a pipe that sees the tokens one at a time, in accepted order (the first
/// pipe must be serial).
pub const ORDO_PIPE_SERIAL: i64 = 2;

pub type ordo_pipe_fn =
    Option<unsafe extern "C" fn(pf: *mut ordo_pipeflow, user_data: *mut c_void) -> i32>;

/// One pipe (C's `{type, fn, user_data}`; `type` and `fn` are Rust keywords, hence `type_` and
/// `fn_`). No `ordo_struct_size` kind: copied by the library, never extended.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ordo_pipe {
    pub type_: i64,
    pub fn_: ordo_pipe_fn,
    pub user_data: *mut c_void,
}

extern "C" {
    pub fn ordo_pipeline_create(
        e: *mut ordo_engine,
        num_lines: u32,
        pipes: *const ordo_pipe,
        num_pipes: usize,
        out: *mut *mut ordo_pipeline,
    ) -> ordo_status;
    pub fn ordo_pipeline_run(p: *mut ordo_pipeline) -> ordo_status;
    pub fn ordo_pipeline_push(
        p: *mut ordo_pipeline,
        const_vars: *const ordo_var,
        num_const: usize,
        mutable_vars: *const ordo_var,
        num_mutable: usize,
        opts: *const ordo_push_opts,
    ) -> ordo_status;
    pub fn ordo_pipeline_reset(p: *mut ordo_pipeline) -> ordo_status;
    pub fn ordo_pipeline_reset_pipes(
        p: *mut ordo_pipeline,
        num_lines: u32,
        pipes: *const ordo_pipe,
        num_pipes: usize,
    ) -> ordo_status;
    pub fn ordo_pipeline_num_tokens(p: *const ordo_pipeline, out: *mut u64) -> ordo_status;
    pub fn ordo_pipeline_dropped(
        p: *const ordo_pipeline,
        count: *mut u64,
        ids: *mut u64,
        cap: usize,
    ) -> ordo_status;
    pub fn ordo_pipeline_destroy(p: *mut ordo_pipeline) -> ordo_status;

    pub fn ordo_pipeflow_token(pf: *const ordo_pipeflow) -> u64;
    pub fn ordo_pipeflow_line(pf: *const ordo_pipeflow) -> u32;
    pub fn ordo_pipeflow_pipe(pf: *const ordo_pipeflow) -> u32;
    pub fn ordo_pipeflow_num_deferrals(pf: *const ordo_pipeflow) -> u32;
    pub fn ordo_pipeflow_stop(pf: *mut ordo_pipeflow) -> ordo_status;
    pub fn ordo_pipeflow_defer(pf: *mut ordo_pipeflow, token: u64) -> ordo_status;
}

#[cfg(test)]
mod layout {
    //! Each struct as declared here against the library: its size equals ordo_struct_size(kind),
    //! and its fields tile it with no gap (the header promises no padding inside any public
    //! struct), so every field sits where C puts it.
    use super::*;
    use std::mem::{size_of, MaybeUninit};

    fn size<T>(_: *const T) -> usize {
        size_of::<T>()
    }

    /// The C name of a field: its Rust name, or the one given after `=` (`type_ = "type"`).
    macro_rules! c_name {
        ($f:ident) => {
            stringify!($f)
        };
        ($f:ident $c:literal) => {
            $c
        };
    }

    /// (C name, offset, size) of each named field of a struct value.
    macro_rules! fields {
        ($t:ty: $($f:ident $(= $c:literal)?),+) => {{
            let u = MaybeUninit::<$t>::uninit();
            let base = u.as_ptr() as usize;
            // SAFETY: addresses only, nothing read.
            vec![$( unsafe {
                let p = std::ptr::addr_of!((*u.as_ptr()).$f);
                (c_name!($f $($c)?), p as usize - base, size(p))
            } ),+]
        }};
    }

    /// `kind` 0: a struct that `ordo_struct_size` does not report (`ordo_pipe`): its fields are
    /// checked here and against the C header only.
    fn check(name: &str, kind: i32, total: usize, fields: Vec<(&str, usize, usize)>) {
        if kind != 0 {
            let lib = unsafe { ordo_struct_size(kind) };
            assert_eq!(
                total, lib,
                "{}: size_of here {} but the library's sizeof is {}",
                name, total, lib
            );
        }
        let mut at = 0;
        for (f, off, sz) in &fields {
            assert_eq!(
                *off, at,
                "{}.{} at offset {}, expected {} (a gap or a reordered field)",
                name, f, off, at
            );
            at += sz;
        }
        assert_eq!(
            at, total,
            "{}: fields end at {}, struct size {} (tail padding)",
            name, at, total
        );
    }

    type Fields = Vec<(&'static str, usize, usize)>;

    /// Every struct of the header: its C name, ordo_struct_size kind, size here and fields.
    fn structs() -> Vec<(&'static str, i32, usize, Fields)> {
        vec![
            (
                "ordo_engine_config",
                ORDO_STRUCT_ENGINE_CONFIG,
                size_of::<ordo_engine_config>(),
                fields!(ordo_engine_config: struct_size, kind, cpu_threads, cpu_priority_threads,
                    copy_threads, max_pending, flags, reserved0, next, trace_path, gpu_compute_streams,
                    gpu_stream_waits),
            ),
            (
                "ordo_stats",
                ORDO_STRUCT_STATS,
                size_of::<ordo_stats>(),
                fields!(ordo_stats: struct_size, workers, pushed, completed, failed, skipped,
                    pending, ready, trace_records, trace_dropped, queue_ready),
            ),
            (
                "ordo_queue_stats",
                ORDO_STRUCT_QUEUE_STATS,
                size_of::<ordo_queue_stats>(),
                fields!(ordo_queue_stats: struct_size, queues, device_type, device_id, prop,
                    workers, ready, name),
            ),
            (
                "ordo_push_opts",
                ORDO_STRUCT_PUSH_OPTS,
                size_of::<ordo_push_opts>(),
                fields!(ordo_push_opts: struct_size, priority, prop, device_type, device_id,
                    reserved0, free_fn, name, next),
            ),
            (
                "ordo_exec_info",
                ORDO_STRUCT_EXEC_INFO,
                size_of::<ordo_exec_info>(),
                fields!(ordo_exec_info: struct_size, device_type, device_id, worker_index,
                    priority, prop, stream, engine, name),
            ),
            (
                "ordo_pipe",
                0,
                size_of::<ordo_pipe>(),
                fields!(ordo_pipe: type_ = "type", fn_ = "fn", user_data),
            ),
        ]
    }

    fn check_one(name: &str) {
        let (n, kind, total, f) = structs().into_iter().find(|s| s.0 == name).unwrap();
        check(n, kind, total, f);
    }

    #[test]
    fn engine_config() {
        check_one("ordo_engine_config");
    }

    #[test]
    fn stats() {
        check_one("ordo_stats");
    }

    #[test]
    fn queue_stats() {
        check_one("ordo_queue_stats");
    }

    #[test]
    fn push_opts() {
        check_one("ordo_push_opts");
    }

    #[test]
    fn exec_info() {
        check_one("ordo_exec_info");
    }

    #[test]
    fn pipe() {
        check_one("ordo_pipe");
        // {int64 type, fn, user_data}: no hole on either side of the 64-bit type
        assert_eq!(size_of::<ordo_pipe>(), 8 + 2 * size_of::<*const c_void>());
    }

    /// The same fields against the C header itself, field by field (offset and size, which
    /// catches two same-sized fields swapped): compiles a small C program with `cc` (or `$CC`)
    /// against `$ORDO_INCLUDE_DIR` or the repository's include/. Skipped, saying so, when
    /// neither the header nor a C compiler is there (a crate used outside the repository).
    #[test]
    fn offsets_match_the_c_header() {
        use std::path::PathBuf;
        use std::process::Command;
        let include = std::env::var_os("ORDO_INCLUDE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../include"));
        if !include.join("ordo/ordo.h").exists() {
            std::eprintln!(
                "offsets_match_the_c_header: skipped, no ordo/ordo.h in {:?}",
                include
            );
            return;
        }
        let mut src = String::from(
            "#include <ordo/ordo.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void) {\n",
        );
        let mut want = String::new();
        for (n, _, total, fields) in structs() {
            src += &std::format!("  printf(\"{n} %zu\\n\", sizeof({n}));\n", n = n);
            want += &std::format!("{} {}\n", n, total);
            for (f, off, sz) in fields {
                src += &std::format!(
                    "  printf(\"{n}.{f} %zu %zu\\n\", offsetof({n}, {f}), sizeof((({n}*)0)->{f}));\n",
                    n = n,
                    f = f
                );
                want += &std::format!("{}.{} {} {}\n", n, f, off, sz);
            }
        }
        src += "  return 0;\n}\n";
        let dir = std::env::temp_dir().join(std::format!("ordo_sys_layout_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, exe) = (dir.join("layout.c"), dir.join("layout"));
        std::fs::write(&c, src).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let built = Command::new(&cc)
            .arg("-std=c99")
            .arg("-I")
            .arg(&include)
            .arg(&c)
            .arg("-o")
            .arg(&exe)
            .status();
        match built {
            Err(e) => {
                std::eprintln!(
                    "offsets_match_the_c_header: skipped, cannot run {}: {}",
                    cc,
                    e
                );
                let _ = std::fs::remove_dir_all(&dir);
                return;
            }
            Ok(st) => assert!(st.success(), "{} could not compile the layout probe", cc),
        }
        let out = Command::new(&exe).output().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let got = String::from_utf8(out.stdout).unwrap();
        let diff: Vec<String> = got
            .lines()
            .zip(want.lines())
            .filter(|(g, w)| g != w)
            .map(|(g, w)| std::format!("C: {}  here: {}", g, w))
            .collect();
        assert!(
            diff.is_empty() && got.lines().count() == want.lines().count(),
            "the C header and these declarations differ:\n{}",
            diff.join("\n")
        );
    }

    #[test]
    fn unknown_kind_is_zero() {
        assert_eq!(unsafe { ordo_struct_size(0) }, 0);
        assert_eq!(unsafe { ordo_struct_size(999) }, 0);
    }

    #[test]
    fn init_writes_the_callers_size() {
        unsafe {
            let mut o = MaybeUninit::<ordo_push_opts>::zeroed().assume_init();
            ordo_push_opts_init_sized(&mut o, size_of::<ordo_push_opts>());
            assert_eq!(o.struct_size as usize, size_of::<ordo_push_opts>());
            assert!(
                o.free_fn.is_none() && o.name.is_null() && o.next.is_null() && o.reserved0 == 0
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::mem::{size_of, MaybeUninit};

    #[test]
    fn library_is_at_least_this_version() {
        let v = unsafe { ordo_version() };
        assert!(
            v >= ORDO_VERSION_NUMBER,
            "libordo {} older than these declarations",
            v
        );
        let s = unsafe { CStr::from_ptr(ordo_version_string()) };
        assert!(!s.to_bytes().is_empty());
    }

    #[test]
    fn status_strings() {
        let s = unsafe { CStr::from_ptr(ordo_status_string(ORDO_ERR_TIMEOUT)) };
        assert_eq!(s.to_str().unwrap(), "ORDO_ERR_TIMEOUT");
    }

    #[test]
    fn raw_round_trip() {
        unsafe {
            let mut cfg = MaybeUninit::<ordo_engine_config>::zeroed().assume_init();
            ordo_engine_config_init_sized(&mut cfg, size_of::<ordo_engine_config>());
            assert_eq!(cfg.struct_size as usize, size_of::<ordo_engine_config>());
            cfg.kind = ORDO_ENGINE_POOLED;
            cfg.cpu_threads = 2;
            let mut e = std::ptr::null_mut();
            assert_eq!(ordo_engine_create(&cfg, &mut e), ORDO_OK);
            let mut v = 0;
            assert_eq!(ordo_var_new(e, &mut v), ORDO_OK);
            assert_eq!(ordo_wait_for_var(e, v), ORDO_OK);
            assert_eq!(ordo_var_delete(e, v), ORDO_OK);
            assert_eq!(ordo_var_delete(e, v), ORDO_ERR_INVALID_HANDLE);
            let msg = CStr::from_ptr(ordo_last_error_message());
            assert!(
                msg.to_str().unwrap().starts_with("ordo_var_delete"),
                "{:?}",
                msg
            );
            assert_eq!(ordo_engine_destroy(e), ORDO_OK);
        }
    }

    /// user_data of the graph test's ops: how often the op ran, how often its free_fn ran.
    struct Counts {
        runs: std::sync::atomic::AtomicUsize,
        frees: std::sync::atomic::AtomicUsize,
    }

    unsafe extern "C" fn count_run(_: *mut ordo_exec, ud: *mut c_void) -> i32 {
        (*(ud as *const Counts))
            .runs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        0
    }

    unsafe extern "C" fn count_free(ud: *mut c_void) {
        (*(ud as *const Counts))
            .frees
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn graph_capture_launch_destroy() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let counts = Counts {
            runs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
        };
        let ud = &counts as *const Counts as *mut c_void;
        unsafe {
            let mut cfg = MaybeUninit::<ordo_engine_config>::zeroed().assume_init();
            ordo_engine_config_init_sized(&mut cfg, size_of::<ordo_engine_config>());
            cfg.kind = ORDO_ENGINE_POOLED;
            cfg.cpu_threads = 2;
            let mut e = std::ptr::null_mut();
            assert_eq!(ordo_engine_create(&cfg, &mut e), ORDO_OK);
            let mut v = 0;
            assert_eq!(ordo_var_new(e, &mut v), ORDO_OK);
            let mut opts = MaybeUninit::<ordo_push_opts>::zeroed().assume_init();
            ordo_push_opts_init_sized(&mut opts, size_of::<ordo_push_opts>());
            opts.free_fn = Some(count_free);

            assert_eq!(ordo_graph_begin_capture(e), ORDO_OK);
            assert_eq!(ordo_graph_begin_capture(e), ORDO_ERR_INVALID_STATE);
            for _ in 0..2 {
                let s = ordo_opr_push(e, Some(count_run), ud, &v, 0, &v, 1, &opts);
                assert_eq!(s, ORDO_OK);
            }
            assert_eq!(ordo_wait_for_all(e), ORDO_ERR_INVALID_STATE);
            let mut g = std::ptr::null_mut();
            assert_eq!(ordo_graph_end_capture(e, &mut g), ORDO_OK);
            assert!(!g.is_null());
            let mut none = std::ptr::null_mut();
            assert_eq!(ordo_graph_end_capture(e, &mut none), ORDO_ERR_INVALID_STATE);
            assert!(none.is_null(), "*out is NULL on failure");
            assert_eq!(ordo_wait_for_all(e), ORDO_OK);
            assert_eq!(counts.runs.load(SeqCst), 0, "recorded, not run");

            for _ in 0..3 {
                assert_eq!(ordo_graph_launch(g), ORDO_OK);
            }
            assert_eq!(ordo_wait_for_var(e, v), ORDO_OK);
            assert_eq!(counts.runs.load(SeqCst), 6);
            assert_eq!(counts.frees.load(SeqCst), 0, "free_fns wait for destroy");
            assert_eq!(ordo_graph_destroy(g), ORDO_OK);
            assert_eq!(counts.frees.load(SeqCst), 2);
            assert_eq!(ordo_graph_destroy(g), ORDO_ERR_INVALID_HANDLE);
            assert_eq!(ordo_graph_launch(g), ORDO_ERR_INVALID_HANDLE);
            assert_eq!(ordo_engine_destroy(e), ORDO_OK);
        }
    }

    /// user_data of the pipeline test's pipes: pipe 0 stops at `stop` and token 1 defers to
    /// `defer_to` (when not 0); the later pipe counts its calls and sums the token ids.
    struct PipeState {
        stop: u64,
        defer_to: u64,
        calls: std::sync::atomic::AtomicU64,
        sum: std::sync::atomic::AtomicU64,
    }

    unsafe extern "C" fn source(pf: *mut ordo_pipeflow, ud: *mut c_void) -> i32 {
        let st = &*(ud as *const PipeState);
        let t = ordo_pipeflow_token(pf);
        if ordo_pipeflow_pipe(pf) != 0 || ordo_pipeflow_line(pf) == u32::MAX {
            return 100;
        }
        if t == st.stop {
            return ordo_pipeflow_stop(pf);
        }
        if t == 1 && st.defer_to != 0 && ordo_pipeflow_num_deferrals(pf) == 0 {
            return ordo_pipeflow_defer(pf, st.defer_to);
        }
        0
    }

    unsafe extern "C" fn sink(pf: *mut ordo_pipeflow, ud: *mut c_void) -> i32 {
        use std::sync::atomic::Ordering::SeqCst;
        let st = &*(ud as *const PipeState);
        if ordo_pipeflow_stop(pf) != ORDO_ERR_INVALID_STATE {
            return 101; // stop() is for pipe 0 only
        }
        st.calls.fetch_add(1, SeqCst);
        st.sum.fetch_add(ordo_pipeflow_token(pf), SeqCst);
        0
    }

    #[test]
    fn pipeline_create_run_reset_destroy() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        let st = PipeState {
            stop: 10,
            defer_to: 0,
            calls: AtomicU64::new(0),
            sum: AtomicU64::new(0),
        };
        let ud = &st as *const PipeState as *mut c_void;
        let pipe = |type_: i64, fn_: ordo_pipe_fn| ordo_pipe {
            type_,
            fn_,
            user_data: ud,
        };
        unsafe {
            let mut cfg = MaybeUninit::<ordo_engine_config>::zeroed().assume_init();
            ordo_engine_config_init_sized(&mut cfg, size_of::<ordo_engine_config>());
            cfg.kind = ORDO_ENGINE_POOLED;
            cfg.cpu_threads = 2;
            let mut e = std::ptr::null_mut();
            assert_eq!(ordo_engine_create(&cfg, &mut e), ORDO_OK);

            let bad = [pipe(ORDO_PIPE_PARALLEL, Some(source))];
            let mut p = 1 as *mut ordo_pipeline;
            assert_eq!(
                ordo_pipeline_create(e, 2, bad.as_ptr(), 1, &mut p),
                ORDO_ERR_INVALID_ARGUMENT
            );
            assert!(p.is_null(), "*out is NULL on failure");

            let pipes = [
                pipe(ORDO_PIPE_SERIAL, Some(source)),
                pipe(ORDO_PIPE_PARALLEL, Some(sink)),
            ];
            assert_eq!(
                ordo_pipeline_create(e, 3, pipes.as_ptr(), 2, &mut p),
                ORDO_OK
            );
            assert_eq!(ordo_pipeline_run(p), ORDO_OK);
            assert_eq!((st.calls.load(SeqCst), st.sum.load(SeqCst)), (10, 45));
            let (mut n, mut count) = (0u64, 99u64);
            assert_eq!(ordo_pipeline_num_tokens(p, &mut n), ORDO_OK);
            assert_eq!(n, 10);
            assert_eq!(
                ordo_pipeline_dropped(p, &mut count, std::ptr::null_mut(), 0),
                ORDO_OK
            );
            assert_eq!(count, 0);

            // token 1 waits for 100, never generated: dropped, and the run says so
            let st2 = PipeState {
                stop: 4,
                defer_to: 100,
                calls: AtomicU64::new(0),
                sum: AtomicU64::new(0),
            };
            let ud2 = &st2 as *const PipeState as *mut c_void;
            let pipes2 = [
                ordo_pipe {
                    type_: ORDO_PIPE_SERIAL,
                    fn_: Some(source),
                    user_data: ud2,
                },
                ordo_pipe {
                    type_: ORDO_PIPE_SERIAL,
                    fn_: Some(sink),
                    user_data: ud2,
                },
            ];
            assert_eq!(ordo_pipeline_reset_pipes(p, 0, pipes2.as_ptr(), 2), ORDO_OK);
            assert_eq!(ordo_pipeline_num_tokens(p, &mut n), ORDO_OK);
            assert_eq!(n, 0, "reset_pipes resets");
            assert_eq!(ordo_pipeline_run(p), ORDO_ERR_TOKENS_DROPPED);
            let msg = CStr::from_ptr(ordo_last_error_message());
            assert!(
                msg.to_str().unwrap().contains("1 token dropped"),
                "{:?}",
                msg
            );
            let mut ids = [0u64; 4];
            assert_eq!(
                ordo_pipeline_dropped(p, &mut count, ids.as_mut_ptr(), 4),
                ORDO_OK
            );
            assert_eq!((count, ids[0]), (1, 1));
            assert_eq!((st2.calls.load(SeqCst), st2.sum.load(SeqCst)), (3, 5));
            assert_eq!(ordo_pipeline_reset(p), ORDO_OK);

            // a pipeflow is valid only inside its callback
            assert_eq!(ordo_pipeflow_token(std::ptr::null()), u64::MAX);
            assert_eq!(ordo_pipeflow_line(std::ptr::null()), u32::MAX);
            assert_eq!(
                ordo_pipeflow_stop(std::ptr::null_mut()),
                ORDO_ERR_INVALID_ARGUMENT
            );

            assert_eq!(ordo_pipeline_destroy(p), ORDO_OK);
            assert_eq!(ordo_pipeline_destroy(p), ORDO_ERR_INVALID_HANDLE);
            assert_eq!(ordo_pipeline_run(p), ORDO_ERR_INVALID_HANDLE);
            assert_eq!(ordo_engine_destroy(e), ORDO_OK);
        }
    }
}
