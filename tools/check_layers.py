#!/usr/bin/env python3
"""Checks that src/ includes run one way: each folder includes only the folders below it (and
the public header), and no two files include each other in a loop.

    base      spin lock, event count, fences, thread-locals, UTF-8, last error: nothing of ordo
              but the public header's types
    core      op blocks, var queues, pools, handles           (base)
    trace     trace buffers and files                         (base)
    device    device discovery                                (base)
    exec      worker groups, ready queues, deques             (base, core, trace)
    engine    the engine's parts and Engine itself            (everything above but api)
    pipeline  pipelines, run as engine work                   (everything above but api)
    graph     capture and replay, beside pipeline             (everything above but api)
    api       the extern "C" entry points                     (everything)

Usage: check_layers.py [SRC_DIR]. Prints every include that breaks the order, and every cycle;
exits 1 when there is any.
"""
import os
import re
import sys

BELOW = {
    "base": set(),
    "core": {"base"},
    "trace": {"base"},
    "device": {"base"},
    "exec": {"base", "core", "trace"},
    "engine": {"base", "core", "trace", "device", "exec"},
    "pipeline": {"base", "core", "trace", "device", "exec", "engine"},
    "graph": {"base", "core", "trace", "device", "exec", "engine"},
    "api": {"base", "core", "trace", "device", "exec", "engine", "pipeline", "graph"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(src):
    for folder, _, files in os.walk(src):
        for name in files:
            if name.endswith((".h", ".cpp", ".cu", ".cuh")):
                path = os.path.join(folder, name)
                yield os.path.relpath(path, src)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    problems = []
    graph = {}
    for rel in sorted(sources(src)):
        folder = rel.split(os.sep)[0]
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            includes = INCLUDE.findall(f.read())
        graph[rel] = [i for i in includes if os.path.exists(os.path.join(src, i))]
        if folder not in BELOW:
            problems.append(f"{rel}: folder '{folder}' has no place in the layer order")
            continue
        for inc in includes:
            top = inc.split("/")[0]
            if top == "ordo" or top == folder:
                continue
            if top not in BELOW[folder]:
                problems.append(f"{rel}: includes {inc} ({top} is not below {folder})")
    # Cycles among files, by depth-first search.
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                loop = stack[stack.index(nxt):] + [nxt]
                problems.append("include loop: " + " -> ".join(loop))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check_layers: {len(graph)} files, every include runs down the layers, no loops")
    return 0


if __name__ == "__main__":
    sys.exit(main())
