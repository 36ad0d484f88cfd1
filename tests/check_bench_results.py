#!/usr/bin/env python3
"""Checks the raw lines of the bench smoke run in tests/run_all.sh, read by bench/compare.py's own
parser: every A-E workload has a result for ordo and ordo-help (each ran in a process of its
own) and REP lines, A, B and E have one for ordo-naive (which the targets table compares
the peers with), F has efficiencies for ordo and ordo-help, and no program failed.
Usage: check_bench_results.py RAW_FILE"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import compare  # noqa: E402

SYSTEMS = ("ordo", "ordo-help")
NO_HANDOFF_WORKLOADS = "ABE"


def problems_in(run):
    found = [f"{w}: no result for {s}" for w in compare.WORKLOADS for s in SYSTEMS
             if (s, w) not in run.results]
    found += [f"{w}: no REP lines for {s}" for w in compare.WORKLOADS for s in SYSTEMS
              if (s, w) in run.results and not run.reps.get((s, w))]
    found += [f"{w}: no result for {compare.NO_HANDOFF}" for w in NO_HANDOFF_WORKLOADS
              if (compare.NO_HANDOFF, w) not in run.results]
    found += [f"F: no efficiencies for {s}" for s in SYSTEMS if not run.eff.get(s)]
    found += [f"P: no result for ordo on {lines} lines" for lines in (2, 4)
              if ("ordo", lines) not in run.pipe]
    found += [f"FAIL {program}: {reason}" for program, reason in run.fails]
    return found


def main(path):
    with open(path) as f:
        problems = problems_in(compare.parse(f.readlines()))
    if problems:
        print(f"check_bench_results: {path}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print("bench smoke: every workload ran for ordo and ordo-help, A, B and E for ordo-naive, "
          "P (the pipeline) for ordo, and nothing failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else 2)
