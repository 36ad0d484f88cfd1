#!/usr/bin/env python3
"""tools/check_layers.py passes on src/ and fails on a tree with an include that runs up a layer
or two files that include each other."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "check_layers.py")


def run(src):
    return subprocess.run([sys.executable, TOOL, src], capture_output=True, text=True)


def tree(files):
    root = tempfile.mkdtemp()
    for rel, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as f:
            f.write(text)
    return root


def main():
    ok = run(os.path.join(HERE, "..", "src"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    up = run(tree({"core/a.h": '#include "engine/b.h"\n', "engine/b.h": "\n"}))
    assert up.returncode == 1 and "core/a.h: includes engine/b.h" in up.stdout, up.stdout
    beside = run(tree({"graph/a.h": '#include "pipeline/b.h"\n', "pipeline/b.h": "\n"}))
    assert beside.returncode == 1 and "graph/a.h: includes pipeline/b.h" in beside.stdout, beside.stdout
    loop = run(tree({"core/a.h": '#include "core/b.h"\n', "core/b.h": '#include "core/a.h"\n'}))
    assert loop.returncode == 1 and "include loop" in loop.stdout, loop.stdout
    print("test_check_layers: PASS")


if __name__ == "__main__":
    main()
