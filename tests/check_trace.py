#!/usr/bin/env python3
"""Checks a Chrome trace JSON written by ordo (used by tests/test_trace.c).

usage: check_trace.py TRACE.json EXPECTATION...
  events=N              complete ("X") events in all
  name:NAME=N           events with that op name
  outcome:PREFIX=N      events whose args.outcome starts with PREFIX
  worker_rows=N         rows named "... worker K"
  events_on_workers=N   events on worker rows
Always checked: the file parses as JSON; every event has pid, tid, ts, dur >= 0 and args with
device and outcome; no two rows share a thread id; events on one worker row never overlap (a
worker runs one op at a time).
Exit 0 when everything holds, 1 with a message otherwise.
"""
import json
import sys
from collections import Counter, defaultdict


def fail(msg):
    print(f"check_trace: {sys.argv[1]}: {msg}", file=sys.stderr)
    sys.exit(1)


def main():
    path, expectations = sys.argv[1], sys.argv[2:]
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"not readable as JSON: {e}")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    row_names = [e for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"]
    rows = {e["tid"]: e["args"]["name"] for e in row_names}
    for tid, n in Counter(e["tid"] for e in row_names).items():
        if n > 1:
            fail(f"row {tid} is named {n} times: two rows share one thread id")
    ops = [e for e in events if e.get("ph") == "X"]
    for e in ops:
        for key in ("pid", "tid", "ts", "dur", "name", "args"):
            if key not in e:
                fail(f"event without {key}: {e}")
        if e["dur"] < 0 or "device" not in e["args"] or "outcome" not in e["args"]:
            fail(f"malformed event: {e}")
        if e["tid"] not in rows:
            fail(f"event on a row without a name: {e}")
    worker_tids = {t for t, n in rows.items() if " worker " in n}
    by_row = defaultdict(list)
    for e in ops:
        if e["tid"] in worker_tids:
            by_row[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for tid, spans in by_row.items():
        spans.sort()
        for (s0, e0), (s1, _) in zip(spans, spans[1:]):
            if s1 < e0 - 1e-3:
                fail(f"overlapping events on worker row {rows[tid]}: {s0}-{e0} and {s1}")
    names = Counter(e["name"] for e in ops)
    measured = {
        "events": len(ops),
        "worker_rows": len(worker_tids),
        "events_on_workers": sum(1 for e in ops if e["tid"] in worker_tids),
    }
    for exp in expectations:
        key, _, want = exp.rpartition("=")
        want = int(want)
        if key.startswith("name:"):
            got = names[key[5:]]
        elif key.startswith("outcome:"):
            got = sum(1 for e in ops if e["args"]["outcome"].startswith(key[8:]))
        elif key in measured:
            got = measured[key]
        else:
            fail(f"unknown expectation {exp!r}")
        if got != want:
            fail(f"{key}: {got}, want {want} (names: {dict(names)})")


if __name__ == "__main__":
    main()
