"""The cffi declarations are the C header's: regenerated from include/ordo/ordo.h they must equal
the checked-in ordo/_cdef.h, and the structs must have the library's sizes."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ordo
from ordo import _lib

from conftest import SOURCE

HEADER = SOURCE.parent.parent / "include" / "ordo" / "ordo.h"


@pytest.mark.skipif(not HEADER.exists() or shutil.which("cc") is None,
                    reason="needs the repository's header and a C preprocessor")
def test_cdef_is_generated_from_the_header() -> None:
    p = subprocess.run([sys.executable, str(SOURCE / "gen_cdef.py"), str(HEADER), "--check",
                        "-o", str(Path(_lib.__file__).with_name("_cdef.h"))],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.skipif(not _lib.has("ordo_struct_size"), reason="no ordo_struct_size")
def test_struct_sizes_match_the_library() -> None:
    sizes = _lib.struct_sizes()
    assert set(sizes) == set(_lib.STRUCT_KINDS.values())
    for struct, (mine, theirs) in sizes.items():
        assert mine == theirs, struct


def test_constants() -> None:
    assert (_lib.lib.ORDO_OK, _lib.lib.ORDO_ERR_OP_FAILED, _lib.lib.ORDO_ERR_TIMEOUT) == (0, 3, 4)
    assert ordo.OpFailed.status == 3 and ordo.Timeout.status == 4
    assert ordo.InvalidHandle.status == 2
    for cls in (ordo.OpFailed, ordo.Timeout, ordo.InvalidHandle, ordo.Shutdown):
        assert issubclass(cls, ordo.Error)
