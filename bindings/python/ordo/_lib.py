"""Loads libordo.so.0 through cffi in ABI mode (no compiler needed at install or import).

The declarations are ``_cdef.h``, generated from the public header by ``gen_cdef.py`` and
checked against it by the tests. The library is looked for, in order:

1. ``ORDO_LIBRARY``: a path to the library file (or to a folder holding ``libordo.so.0``);
2. the dynamic loader's own search (``LD_LIBRARY_PATH``, the ld.so cache, the default folders);
3. ``pkg-config --variable=libdir ordo`` (``PKG_CONFIG_PATH`` is honoured).

At import the binding checks that the library's version has the header's major number and is not
older than the header, and, where the library can say (``ordo_struct_size``), that no struct the
binding passes is larger than the library's own (a larger one would carry fields the library
does not know).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import cffi

SONAME = "libordo.so.0"

ffi = cffi.FFI()
ffi.cdef((Path(__file__).with_name("_cdef.h")).read_text())


def _candidates() -> list[tuple[str, str]]:
    """(what to dlopen, where it came from), in the order they are tried."""
    out: list[tuple[str, str]] = []
    env = os.environ.get("ORDO_LIBRARY")
    if env:
        p = Path(env)
        out.append((str(p / SONAME) if p.is_dir() else env, "ORDO_LIBRARY"))
        return out  # an explicit choice: never fall back to another library silently
    out.append((SONAME, "the dynamic loader's path"))
    if shutil.which("pkg-config"):
        try:
            libdir = subprocess.run(
                ["pkg-config", "--variable=libdir", "ordo"],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            libdir = ""
        if libdir:
            out.append((str(Path(libdir) / SONAME), "pkg-config's libdir"))
    return out


def _load() -> tuple[Any, str]:
    errors = []
    for name, source in _candidates():
        try:
            return ffi.dlopen(name), name
        except OSError as exc:
            errors.append(f"  {name} ({source}): {exc}")
    raise ImportError(
        "ordo: cannot load the ordo C library (" + SONAME + "); tried:\n" + "\n".join(errors)
        + "\nSet ORDO_LIBRARY to the library's path, add its folder to LD_LIBRARY_PATH, or"
        " install it where pkg-config finds ordo.pc (make install PREFIX=...)."
    )


lib, library_path = _load()


def has(name: str) -> bool:
    """Whether the loaded library exports the declared function `name` (a newer call that an
    older library may lack)."""
    try:
        getattr(lib, name)
    except (AttributeError, NotImplementedError):
        return False
    return True


def _check_version() -> None:
    have = int(lib.ordo_version())
    want = int(lib.ORDO_VERSION_NUMBER)
    if have // 10000 != want // 10000 or have < want:
        raise ImportError(
            f"ordo: the library {library_path} is version "
            f"{ffi.string(lib.ordo_version_string()).decode()}, but this binding was generated "
            f"from the header of version {want // 10000}.{want // 100 % 100}.{want % 100}"
        )


# ordo_struct_size kinds (ORDO_STRUCT_*) and the cdef's name for each struct.
STRUCT_KINDS = {
    "ORDO_STRUCT_ENGINE_CONFIG": "ordo_engine_config",
    "ORDO_STRUCT_STATS": "ordo_stats",
    "ORDO_STRUCT_QUEUE_STATS": "ordo_queue_stats",
    "ORDO_STRUCT_PUSH_OPTS": "ordo_push_opts",
    "ORDO_STRUCT_EXEC_INFO": "ordo_exec_info",
}


def struct_sizes() -> dict[str, tuple[int, int]]:
    """{struct: (the binding's size, the library's size)}; empty when the library cannot say."""
    if not has("ordo_struct_size"):
        return {}
    out = {}
    for kind, struct in STRUCT_KINDS.items():
        out[struct] = (ffi.sizeof(struct), int(lib.ordo_struct_size(getattr(lib, kind))))
    return out


def _check_struct_sizes() -> None:
    bad = [f"{s}: binding {mine} bytes, library {theirs}"
           for s, (mine, theirs) in struct_sizes().items() if mine > theirs]
    if bad:
        raise ImportError(
            f"ordo: the library {library_path} is older than this binding's header (its structs"
            " are smaller): " + "; ".join(bad)
        )


_check_version()
_check_struct_sizes()
