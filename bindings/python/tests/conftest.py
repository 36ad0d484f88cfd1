"""Test setup: the binding under test is the source tree's (bindings/python/ordo) unless
ORDO_TEST_INSTALLED=1 asks for the installed one; the library is whatever the binding finds
(tests/run_all.sh points ORDO_LIBRARY at the freshly built one)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent.parent
if os.environ.get("ORDO_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(SOURCE))

import ordo  # noqa: E402
from ordo import _lib  # noqa: E402

KINDS = ["per_device", "pooled", "naive"]
THREADED_KINDS = ["per_device", "pooled"]

# The library's additions for bindings (ordo_struct_size, ordo_wait_for_var_async, forced
# unwinds passed through, fork detection) came together; ordo_struct_size tells them apart.
ABI_FIXES = _lib.has("ordo_struct_size")


@pytest.fixture(params=KINDS)
def engine(request: pytest.FixtureRequest):
    with ordo.Engine(workers=2, kind=request.param) as e:
        yield e


@pytest.fixture(params=THREADED_KINDS)
def threaded_engine(request: pytest.FixtureRequest):
    with ordo.Engine(workers=2, kind=request.param) as e:
        yield e


def python_env() -> dict[str, str]:
    """The environment for a child interpreter that imports the same ordo and library."""
    env = dict(os.environ)
    pkg_parent = str(Path(ordo.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    env["ORDO_LIBRARY"] = _lib.library_path if os.sep in _lib.library_path else \
        env.get("ORDO_LIBRARY", "")
    if not env["ORDO_LIBRARY"]:
        del env["ORDO_LIBRARY"]
    return env
