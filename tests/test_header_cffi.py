#!/usr/bin/env python3
"""The public header as an FFI reads it: cffi's cdef parses it once preprocessed with ORDO_API
defined empty and ORDO_NO_INLINE_HELPERS (no attribute, no function body, as bindgen and Clang.jl
want it too), and the library then agrees with it: struct sizes (ordo_struct_size), the reserved
fields' offsets, a push, an error, and an async wait, all through cffi in ABI mode.

usage: test_header_cffi.py HEADER LIBORDO_SO
"""
import os
import re
import subprocess
import sys
import tempfile
import threading

import cffi

INT_DEFINE = re.compile(r"#define\s+(ORDO_\w+)\s+(0x[0-9a-fA-F]+|\d+)[uUlL]*\s*$")


def cdef_text(header):
    """The header preprocessed for cffi: the system headers it includes stubbed out (cffi knows
    the fixed-width types, size_t and FILE), every #define dropped except integer constants."""
    with tempfile.TemporaryDirectory() as stubs:
        for name in ("stddef.h", "stdint.h", "stdio.h"):
            open(os.path.join(stubs, name), "w").close()
        out = subprocess.run(
            ["cc", "-E", "-P", "-dD", "-undef", "-nostdinc", "-I", stubs, "-DORDO_API=",
             "-DORDO_NO_INLINE_HELPERS", header],
            check=True, capture_output=True, text=True).stdout
    lines = []
    for line in out.splitlines():
        if line.startswith("#"):
            m = INT_DEFINE.match(line)
            if m:
                lines.append("#define %s %d" % (m.group(1), int(m.group(2), 0)))
            continue
        lines.append(line)
    text = "\n".join(lines)
    for bad in ("__attribute__", "__declspec", "static inline", "{\n  ordo_"):
        assert bad not in text, "the preprocessed header still has %r" % bad
    return text


def main():
    header, lib = sys.argv[1], sys.argv[2]
    ffi = cffi.FFI()
    ffi.cdef(cdef_text(header))
    ordo = ffi.dlopen(lib)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    check(ordo.ordo_version() == ordo.ORDO_VERSION_MAJOR * 10000 + ordo.ORDO_VERSION_MINOR * 100 +
          ordo.ORDO_VERSION_PATCH, "ordo_version")
    for kind, name in ((ordo.ORDO_STRUCT_ENGINE_CONFIG, "ordo_engine_config"),
                       (ordo.ORDO_STRUCT_STATS, "ordo_stats"),
                       (ordo.ORDO_STRUCT_QUEUE_STATS, "ordo_queue_stats"),
                       (ordo.ORDO_STRUCT_PUSH_OPTS, "ordo_push_opts"),
                       (ordo.ORDO_STRUCT_EXEC_INFO, "ordo_exec_info")):
        check(ordo.ordo_struct_size(kind) == ffi.sizeof(name),
              "%s: library %d, cffi %d" % (name, ordo.ordo_struct_size(kind), ffi.sizeof(name)))
    check(ordo.ordo_struct_size(99) == 0, "unknown kind")
    check(ffi.offsetof("ordo_engine_config", "next") == 32, "ordo_engine_config.next")
    check(ffi.offsetof("ordo_push_opts", "free_fn") == 24, "ordo_push_opts.free_fn")

    # An engine driven from Python: a failing op, an async wait that sees it.
    cfg = ffi.new("ordo_engine_config*")
    ordo.ordo_engine_config_init_sized(cfg, ffi.sizeof("ordo_engine_config"))
    cfg.kind = ordo.ORDO_ENGINE_POOLED
    cfg.cpu_threads = 2
    engine = ffi.new("ordo_engine**")
    check(ordo.ordo_engine_create(cfg, engine) == ordo.ORDO_OK, "create")
    e = engine[0]
    var = ffi.new("ordo_var*")
    check(ordo.ordo_var_new(e, var) == ordo.ORDO_OK, "var_new")

    ran = []

    @ffi.callback("int32_t(ordo_exec*, void*)", error=ordo.ORDO_ERR_OP_FAILED,
                  onerror=lambda *exc: None)
    def op(exec_, user_data):
        ran.append(ffi.from_handle(user_data))
        raise RuntimeError("fails on purpose")  # cffi returns `error`: the op fails

    done = threading.Event()
    statuses = []

    @ffi.callback("void(void*, ordo_status)")
    def on_done(user_data, status):
        statuses.append((ffi.from_handle(user_data), status))
        done.set()

    tag = ffi.new_handle("op-1")
    waited = ffi.new_handle("wait-1")
    opts = ffi.new("ordo_push_opts*")
    ordo.ordo_push_opts_init_sized(opts, ffi.sizeof("ordo_push_opts"))
    name = ffi.new("char[]", b"python op")
    opts.name = name
    check(ordo.ordo_opr_push(e, op, tag, ffi.NULL, 0, var, 1, opts) == ordo.ORDO_OK, "push")
    check(ordo.ordo_wait_for_var_async(e, var[0], on_done, waited) == ordo.ORDO_OK, "async")
    check(done.wait(10), "the async wait never called back")
    check(statuses == [("wait-1", ordo.ORDO_ERR_OP_FAILED)], "async status %r" % statuses)
    check(ran == ["op-1"], "op ran %r" % ran)
    check(ordo.ordo_wait_for_var(e, var[0]) == ordo.ORDO_ERR_OP_FAILED, "wait")
    msg = ffi.string(ordo.ordo_last_error_message()).decode()
    check("python op" in msg, "message %r" % msg)
    check(ordo.ordo_engine_destroy(e) == ordo.ORDO_OK, "destroy")

    for f in failures:
        print("header-cffi: FAILED: %s" % f)
    print("header-cffi: %d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
