#!/usr/bin/env python3
"""Renders an ordo Chrome trace (ordo_engine_write_trace, ORDO_TRACE) as a PNG timeline.

usage: trace_png.py TRACE.json OUT.png [--width PIXELS]

One row per trace row (each worker, then the callers' row if it has ops), one bar per op from
its start to its end, coloured by the op's kind: its name up to the first '(' (so potrf(3) and
potrf(4) share a colour), or "(unnamed)". A time axis runs along the top and a legend of the kinds
(with their op counts and busy time) along the bottom. For people who would rather look than
open Perfetto; Perfetto (https://ui.perfetto.dev) shows the same file with zoom and op names.
Needs Pillow (tools/install-deps.sh installs it). Exit 0 on success, 1 with a message otherwise.
"""

import json
import sys
from collections import OrderedDict

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
           (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
BACKGROUND = (255, 255, 255)
ROW_SHADE = (242, 242, 242)
INK = (0, 0, 0)
LABEL_WIDTH = 130
ROW_HEIGHT = 24
TOP = 40
LEGEND_LINE = 18


def fail(msg):
    print(f"trace_png: {msg}", file=sys.stderr)
    sys.exit(1)


def kind_of(name):
    kind = name.split("(", 1)[0].strip()
    return kind or "(unnamed)"


def load(path):
    """Rows in display order as (label, [ops]), each op (start_us, dur_us, kind)."""
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not an ordo trace: {e}")
    names, order = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            order[e["tid"]] = e["args"]["sort_index"]
    rows = {}
    for e in events:
        if e.get("ph") == "X":
            rows.setdefault(e["tid"], []).append((float(e["ts"]), float(e["dur"]),
                                                  kind_of(e.get("name", ""))))
    tids = sorted(set(names) | set(rows), key=lambda t: (order.get(t, 1 << 30), t))
    # A row without ops is drawn only if it is a worker's (an idle worker is worth seeing).
    return [(names.get(t, f"row {t}"), rows.get(t, [])) for t in tids
            if rows.get(t) or "worker" in names.get(t, "")]


def nice_step(span_us, ticks):
    raw = span_us / ticks
    step = 1.0
    while step * 10 <= raw:
        step *= 10
    for m in (1, 2, 5, 10):
        if step * m >= raw:
            return step * m
    return step * 10


def render(rows, width, title):
    from PIL import Image, ImageDraw, ImageFont

    ops = [op for _, r in rows for op in r]
    if not ops:
        fail("the trace has no ops to draw")
    t0 = min(s for s, _, _ in ops)
    t1 = max(s + d for s, d, _ in ops)
    span = max(t1 - t0, 1e-3)
    kinds = OrderedDict()
    for _, d, k in sorted(ops):
        count, busy = kinds.get(k, (0, 0.0))
        kinds[k] = (count + 1, busy + d)
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(kinds)}
    legend_lines = (len(kinds) + 2) // 3
    height = TOP + len(rows) * ROW_HEIGHT + 16 + legend_lines * LEGEND_LINE + 8
    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()
    plot_w = width - LABEL_WIDTH - 10

    def x_of(t):
        return LABEL_WIDTH + (t - t0) / span * plot_w

    draw.text((6, 4), title, fill=INK, font=font)
    step = nice_step(span, 8)
    unit, scale = ("ms", 1000.0) if span >= 2000 else ("us", 1.0)
    t = 0.0
    while t <= span:
        x = x_of(t0 + t)
        draw.line([(x, TOP - 6), (x, TOP + len(rows) * ROW_HEIGHT)], fill=(210, 210, 210))
        draw.text((x + 2, TOP - 18), f"{t / scale:g} {unit}", fill=INK, font=font)
        t += step
    for i, (label, row_ops) in enumerate(rows):
        y = TOP + i * ROW_HEIGHT
        if i % 2 == 0:
            draw.rectangle([LABEL_WIDTH, y, width - 10, y + ROW_HEIGHT - 1], fill=ROW_SHADE)
        draw.text((6, y + 6), label, fill=INK, font=font)
        for start, dur, kind in row_ops:
            x0, x1 = x_of(start), x_of(start + dur)
            draw.rectangle([x0, y + 3, max(x1, x0 + 1), y + ROW_HEIGHT - 4], fill=colour[kind])
    y = TOP + len(rows) * ROW_HEIGHT + 12
    col_w = (width - 12) // 3
    for i, (kind, (count, busy)) in enumerate(kinds.items()):
        x = 6 + (i % 3) * col_w
        yy = y + (i // 3) * LEGEND_LINE
        draw.rectangle([x, yy + 2, x + 12, yy + 12], fill=colour[kind])
        draw.text((x + 18, yy + 1), f"{kind}: {count} ops, {busy / 1000:.1f} ms busy", fill=INK,
                  font=font)
    return img


def main(argv):
    args = argv[1:]
    width = 1400
    if "--width" in args:
        i = args.index("--width")
        try:
            width = int(args[i + 1])
        except (IndexError, ValueError):
            fail("--width takes a number of pixels")
        if width < LABEL_WIDTH + 100:
            fail(f"--width must be at least {LABEL_WIDTH + 100}")
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    src, out = args
    try:
        import PIL  # noqa: F401
    except ImportError:
        fail("Pillow is missing (python3 -m pip install pillow, or run tools/install-deps.sh)")
    rows = load(src)
    n = sum(len(r) for _, r in rows)
    render(rows, width, f"{src}: {n} ops on {len(rows)} rows").save(out)
    print(f"trace_png: {n} ops on {len(rows)} rows drawn to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
