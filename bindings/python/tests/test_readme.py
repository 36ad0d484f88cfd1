"""The README examples run as written: the binding's own README and the repository's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SOURCE

READMES = [SOURCE / "README.md", SOURCE.parent.parent / "README.md"]


@pytest.mark.parametrize("readme", READMES, ids=["bindings/python/README.md", "README.md"])
def test_readme_python_example_runs(readme: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not readme.exists():
        pytest.skip(f"{readme} is not here (an installed copy)")
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    assert blocks, f"no python example in {readme}"
    exec(compile(blocks[0], str(readme), "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "[1, 2]" in out or "['first', 'second']" in out, out
