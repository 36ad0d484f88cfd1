#!/usr/bin/env python3
"""tools/trace_png.py: bars land where the ops ran, coloured by kind, one row per worker.

usage: test_trace_png.py [TRACE.json]   (with a trace: also renders it and checks every worker row
has bars; run_all.sh passes the Cholesky demo's)
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import trace_png  # noqa: E402

WIDTH = 600


def trace(events):
    meta = [{"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "cpu worker 0"}},
            {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "cpu worker 1"}},
            {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "callers"}}]
    ops = [{"ph": "X", "pid": 1, "tid": tid, "name": name, "ts": ts, "dur": dur,
            "args": {"device": "cpu:0", "stream": -1, "outcome": "ok"}}
           for tid, name, ts, dur in events]
    return {"traceEvents": meta + ops}


def render(doc):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        rows = trace_png.load(path)
        return rows, trace_png.render(rows, WIDTH, "test")


def pixel_at(img, row, fraction):
    """The colour in the middle of `row` at `fraction` of the time span."""
    x = trace_png.LABEL_WIDTH + fraction * (WIDTH - trace_png.LABEL_WIDTH - 10)
    y = trace_png.TOP + row * trace_png.ROW_HEIGHT + trace_png.ROW_HEIGHT // 2
    return img.getpixel((int(x), y))


class Timeline(unittest.TestCase):
    def setUp(self):
        # worker 0 runs gemm(1,0) in the first half; worker 1 runs potrf(0) in the second half
        self.rows, self.img = render(trace([(1, "gemm(1,0)", 1000.0, 50.0),
                                            (2, "potrf(0)", 1050.0, 50.0)]))

    def test_one_row_per_worker_and_no_empty_callers_row(self):
        self.assertEqual([label for label, _ in self.rows], ["cpu worker 0", "cpu worker 1"])

    def test_bars_sit_where_and_when_the_ops_ran(self):
        gemm, potrf = trace_png.PALETTE[0], trace_png.PALETTE[1]  # kinds coloured in start order
        self.assertEqual(pixel_at(self.img, 0, 0.25), gemm)
        self.assertEqual(pixel_at(self.img, 1, 0.75), potrf)
        self.assertNotIn(pixel_at(self.img, 0, 0.75), (gemm, potrf))
        self.assertNotIn(pixel_at(self.img, 1, 0.25), (gemm, potrf))

    def test_ops_of_one_kind_share_a_colour(self):
        _, img = render(trace([(1, "trsm(1,0)", 0.0, 40.0), (2, "trsm(2,0)", 60.0, 40.0)]))
        self.assertEqual(pixel_at(img, 0, 0.2), pixel_at(img, 1, 0.8))

    def test_a_trace_without_ops_is_refused(self):
        with self.assertRaises(SystemExit):
            render(trace([]))


def check_real_trace(path):
    rows = trace_png.load(path)
    img = trace_png.render(rows, 1400, path)
    shades = {trace_png.BACKGROUND, trace_png.ROW_SHADE, trace_png.INK}
    for i, (label, ops) in enumerate(rows):
        y = trace_png.TOP + i * trace_png.ROW_HEIGHT + trace_png.ROW_HEIGHT // 2
        bar = sum(img.getpixel((x, y)) not in shades for x in range(trace_png.LABEL_WIDTH, 1390))
        if ops and bar == 0:
            sys.exit(f"test_trace_png: {path}: row '{label}' has {len(ops)} ops and no bar")
    print(f"test_trace_png: {path}: {sum(len(o) for _, o in rows)} ops drawn on {len(rows)} rows")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        check_real_trace(sys.argv.pop(1))
    unittest.main(verbosity=1)
