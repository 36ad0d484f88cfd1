#!/usr/bin/env python3
"""Checks a bench table from the smoke run in tests/run_all.sh: every A-E workload has a number
for ordo and ordo-help (each ran in a process of its own), F has its efficiency table, and
nothing failed. Usage: check_bench_table.py TABLE"""

import re
import sys

WORKLOADS = ["A independent", "B chain", "C fan-out 1W+8R", "D random DAG", "E 2 pushers"]
NUMBER = re.compile(r"^[0-9][0-9,.]*$")


def a_to_e_cells(text):
    """(workload, system) -> the median column, from the A-E table's rows."""
    cells = {}
    workload = None
    for line in text.splitlines():
        title = next((w for w in WORKLOADS if line.startswith(w)), None)
        if title:
            workload = title
            rest = line[len(title):].split()
        elif workload and line.startswith(" ") and line.strip():
            rest = line.split()
        else:
            workload = None if not line.strip() else workload
            continue
        if len(rest) >= 2:
            cells[(workload, rest[0])] = rest[1]
    return cells


def main(path):
    text = open(path).read()
    cells = a_to_e_cells(text)
    problems = []
    for workload in WORKLOADS:
        for system in ("ordo", "ordo-help"):
            value = cells.get((workload, system))
            if value is None or not NUMBER.match(value):
                problems.append(f"{workload}: {system} has {value or 'no row'}, not a number")
    if "efficiency at each task duration" not in text:
        problems.append("no METG efficiency table")
    if "FAIL" in text:
        problems.append("a program failed (see Notes)")
    if problems:
        print(f"check_bench_table: {path}:", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        print(text, file=sys.stderr)
        return 1
    print("bench smoke: every workload ran for ordo and ordo-help; the table is complete")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]) if len(sys.argv) == 2 else 2)
