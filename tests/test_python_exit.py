#!/usr/bin/env python3
"""A Python program that exits with ops pending (issue #24): while the interpreter finalizes,
engine workers that call back into Python are ended with pthread_exit by PyGILState_Ensure. With
the old catch-all around callbacks that forced unwind was swallowed and glibc aborted the process
("FATAL: exception not rethrown", 10 runs out of 10 at 13041b0). Now each run must exit 0, print
no FATAL, and not hang. Runs the scenario in fresh interpreters, through ctypes, for each engine
kind with worker threads.

usage: test_python_exit.py LIBORDO_SO [RUNS]
"""
import subprocess
import sys

SCENARIO = r'''
import ctypes, sys, time
lib = ctypes.CDLL(sys.argv[1])
kind = int(sys.argv[2])
FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

@FN
def op(exec_, ud):
    time.sleep(0.0005)
    return 0

@FREE
def free(ud):
    pass

class Config(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32),
                ("cpu_threads", ctypes.c_int32), ("cpu_priority_threads", ctypes.c_int32),
                ("copy_threads", ctypes.c_int32), ("max_pending", ctypes.c_int32),
                ("flags", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("next", ctypes.c_void_p), ("trace_path", ctypes.c_char_p),
                ("gpu_compute_streams", ctypes.c_int32), ("gpu_stream_waits", ctypes.c_int32)]

class PushOpts(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("priority", ctypes.c_int32),
                ("prop", ctypes.c_int32), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("reserved0", ctypes.c_uint32),
                ("free_fn", FREE), ("name", ctypes.c_char_p), ("next", ctypes.c_void_p)]

lib.ordo_struct_size.restype = ctypes.c_size_t
assert lib.ordo_struct_size(1) == ctypes.sizeof(Config)
assert lib.ordo_struct_size(4) == ctypes.sizeof(PushOpts)
cfg = Config()
lib.ordo_engine_config_init_sized(ctypes.byref(cfg), ctypes.c_size_t(ctypes.sizeof(cfg)))
cfg.kind = kind
cfg.cpu_threads = 4
cfg.max_pending = -1
opts = PushOpts()
lib.ordo_push_opts_init_sized(ctypes.byref(opts), ctypes.c_size_t(ctypes.sizeof(opts)))
opts.free_fn = free
e = ctypes.c_void_p()
assert lib.ordo_engine_create(ctypes.byref(cfg), ctypes.byref(e)) == 0
vs = []
for i in range(8):
    v = ctypes.c_uint64()
    assert lib.ordo_var_new(e, ctypes.byref(v)) == 0
    vs.append(v)
for i in range(3000):
    assert lib.ordo_opr_push(e, op, None, None, ctypes.c_size_t(0), ctypes.byref(vs[i % 8]),
                             ctypes.c_size_t(1), ctypes.byref(opts)) == 0
time.sleep(0.02)
print("exiting with ops pending", flush=True)
'''


def main():
    lib = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    failures = 0
    for kind, name in ((2, "pooled"), (3, "per_device")):
        for run in range(runs):
            try:
                p = subprocess.run([sys.executable, "-c", SCENARIO, lib, str(kind)],
                                   capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                print("python-exit: %s run %d hung at exit" % (name, run))
                failures += 1
                continue
            if p.returncode != 0 or "FATAL" in p.stderr or "exiting" not in p.stdout:
                print("python-exit: %s run %d: exit status %d, stderr: %s" %
                      (name, run, p.returncode, p.stderr.strip()[-500:]))
                failures += 1
    print("python-exit: %d of %d runs failed" % (failures, 2 * runs))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
