#!/usr/bin/env python3
"""Turns the bench programs' machine lines into the tables a person reads.

Usage: bench/compare.py [RAW_FILE]   (stdin when no file; bench/run.sh saves BUILD/bench-results.txt)

Input lines (bench/bench_common.h defines the first four; other lines are ignored):
  RESULT <system> <workload> <median> <min> <max>   ns per op, workloads A-E
  REP    <system> <workload> <rep> <ns> <c2c_before> <c2c_after>
                                                    one repetition of A-E, with the core-to-core
                                                    round trip (ns) probed before and after it
  METG   <system> <metg_ns> <efficiency_at_metg>     workload F (-1: no grain reached 50%)
  EFF    <system> <grain_ns> <efficiency> [<c2c_before> <c2c_after>]
                                                    workload F, one per grain (with the round trip
                                                    probed around that grain's runs)
  SKIP   <system> <workload|-> <reason...>
  CHOL   <system> <n> <tile> <gflops> <seconds>      tiled Cholesky
  PIPE   <system> <lines> <median> <min> <max>       workload P, the pipeline: ns per token
                                                     (bench/pipeline_common.h)
  GEMMREF <label> <gflops>                           dgemm reference rates for Cholesky
  FAIL   <program> <reason...>                       written by bench/run.sh (for one workload's
                                                     process: <reason> starts with --only <letter>)
  MACHINE <key> <value...> / ARGS <flags...>         written by bench/run.sh
  ROUND  <n>                                         bench/run.sh --rounds: lines after it
                                                     belong to round n (1 when absent)
Every ratio is system / ordo in time (ns per op, METG, Cholesky seconds): above 1, ordo is
faster. Systems keep their order of appearance, ordo first.

With several rounds, each value in the tables is the median over the rounds (A-E: of each
round's median; F: the efficiency at each grain, METG then read off those medians; K: seconds),
min and max span all rounds, and a last table counts the rounds in which ordo beat each system.

Where the REP lines carry the core-to-core round trip, a further table splits A-E's repetitions
by the machine's phase (FAST_C2C_NS): a VM's vCPUs move between physical cores in spells of
seconds, and a repetition that ran while the round trip was 6x longer measured a different
machine. Every system's repetitions are split by the same rule. A last table reads issue #4's
targets off the tables (NS_CEILINGS, METG_FACTOR, CHOL_DGEMM_SHARE): met or missed, and by whom,
naming the peers that are faster than ordo-naive (NO_HANDOFF), all of ordo's work per op on one
thread.
"""

import statistics

import sys
from collections import OrderedDict

BASELINE = "ordo"
# ordo's naive engine (each op run inside its push), run on A, B and E: all of ordo's work per op
# on the pushing thread, with no hand-off (see faster_than_no_handoff).
NO_HANDOFF = "ordo-naive"
# ordo's capture and replay (bench_ordo --graph, cholesky --graph): one capture, a launch per
# repetition. Issue #26's targets are its own (print_graph_targets).
GRAPH = "ordo-graph"
GRAPH_NS_CEILINGS = {"B": 25.0}
GRAPH_LAUNCH_SHARE = 0.01  # the Cholesky demo's launch overhead, of its run time
# A repetition ran in the machine's fast phase when the round trip probed before it and after it
# were both below this. The development VMs' two phases: about 50-80 ns and about 320-370 ns.
FAST_C2C_NS = 150.0
WORKLOADS = OrderedDict([
    ("A", "A independent"),
    ("B", "B chain"),
    ("C", "C fan-out 1W+8R"),
    ("D", "D random DAG"),
    ("E", "E 2 pushers"),
])


class Run:
    """Everything one raw file says, keyed by system in order of first appearance."""

    def __init__(self):
        self.systems = []
        self.results = {}  # (system, workload) -> (median, min, max)
        self.metg = {}  # system -> (metg_ns, efficiency)
        self.eff = {}  # system -> {grain_ns: efficiency}
        self.skips = []  # (system, workload, reason)
        self.fails = []  # (program, reason)
        self.workload_fails = {}  # (family, workload) -> reason: one workload's process failed
        self.chol = []  # (system, n, tile, gflops, seconds)
        self.gemmref = []  # (label, gflops)
        self.graph_launch = {}  # (n, tile) -> [share per round]: cholesky --graph's worst launch
        self.machine = []  # (key, value)
        self.args = ""
        self.round = 1  # the round the lines being read belong to
        self.per_round = {}  # (system, workload) -> {round: (median, min, max)}
        self.eff_rounds = {}  # system -> {grain_ns: {round: efficiency}}
        self.metg_rounds = {}  # system -> {round: metg_ns}
        self.chol_rounds = {}  # (system, n, tile) -> {round: (seconds, gflops)}
        self.pipe = {}  # (system, lines) -> (median, min, max) ns per token
        self.pipe_rounds = {}  # (system, lines) -> {round: (median, min, max)}
        self.gemm_rounds = {}  # label -> [gflops, ...]
        self.reps = {}  # (system, workload) -> [(ns, c2c_before, c2c_after), ...], all rounds
        self.eff_phases = {}  # system -> [phase_of(...) of each probed grain], all rounds

    def rounds(self):
        seen = {r for d in self.per_round.values() for r in d}
        seen |= {r for d in self.metg_rounds.values() for r in d}
        seen |= {r for d in self.chol_rounds.values() for r in d}
        seen |= {r for d in self.pipe_rounds.values() for r in d}
        return sorted(seen)

    def aggregate(self):
        """Folds the rounds into the single values the tables print (one round: as read)."""
        for key, by_round in self.per_round.items():
            v = list(by_round.values())
            self.results[key] = (statistics.median(x[0] for x in v), min(x[1] for x in v),
                                 max(x[2] for x in v))
        for key, by_round in self.pipe_rounds.items():
            v = list(by_round.values())
            self.pipe[key] = (statistics.median(x[0] for x in v), min(x[1] for x in v),
                              max(x[2] for x in v))
        for system, grains in self.eff_rounds.items():
            self.eff[system] = {g: statistics.median(r.values()) for g, r in grains.items()}
            if len(self.metg_rounds.get(system, {})) > 1:  # several rounds: read off the medians
                self.metg[system] = metg_of(self.eff[system])
        self.chol = []
        for (s, n, t), r in self.chol_rounds.items():
            # GFLOP/s of the median time (the flops are the same every round), so that the two
            # columns shown agree even when the median of an even count averages two rounds.
            seconds = statistics.median(x[0] for x in r.values())
            if len(r) == 1:  # one round: as the program printed it (from the unrounded time)
                gflops = next(iter(r.values()))[1]
            else:  # n^3/3 from the key: the printed fields are rounded
                gflops = n ** 3 / 3 / seconds / 1e9 if seconds > 0 else float("inf")
            self.chol.append((s, n, t, gflops, seconds))
        self.gemmref = [(label, statistics.median(g)) for label, g in self.gemm_rounds.items()]

    def saw(self, system):
        if system not in self.systems:
            self.systems.append(system)

    def ordered_systems(self, present):
        """ordo, then ordo's other modes, then the peers, each group in order of appearance."""
        names = [s for s in self.systems if s in present]
        first = [s for s in names if s == BASELINE]
        modes = [s for s in names if s.startswith(BASELINE + "-")]
        return first + modes + [s for s in names if s not in first and s not in modes]


def metg_of(eff):
    """(grain, efficiency) of the smallest grain at which efficiency stays >= 50%: walking down
    from the largest grain, the last one before the first below 50% (as bench_metg_sweep does);
    (-1, 0) when even the largest misses."""
    metg = (-1.0, 0.0)
    for grain in sorted(eff, reverse=True):
        if eff[grain] < 0.5:
            break
        metg = (grain, eff[grain])
    return metg


def parse(lines):
    run = Run()
    for line in lines:
        f = line.split()
        if not f:
            continue
        try:
            kind = f[0]
            if kind == "RESULT" and len(f) >= 6:
                run.saw(f[1])
                value = tuple(float(x) for x in f[3:6])
                run.per_round.setdefault((f[1], f[2]), {})[run.round] = value
            elif kind == "REP" and len(f) >= 7:
                rep = (float(f[4]), float(f[5]), float(f[6]))
                run.reps.setdefault((f[1], f[2]), []).append(rep)
            elif kind == "METG" and len(f) >= 4:
                run.saw(f[1])
                run.metg[f[1]] = (float(f[2]), float(f[3]))
                run.metg_rounds.setdefault(f[1], {})[run.round] = float(f[2])
            elif kind == "EFF" and len(f) >= 4:
                run.saw(f[1])
                grains = run.eff_rounds.setdefault(f[1], {})
                grains.setdefault(float(f[2]), {})[run.round] = float(f[3])
                if len(f) >= 6:
                    phase = phase_of(float(f[4]), float(f[5]))
                    run.eff_phases.setdefault(f[1], []).append(phase)
            elif kind == "ROUND" and len(f) >= 2:
                run.round = int(f[1])
            elif kind == "SKIP" and len(f) >= 3:
                run.skips.append((f[1], f[2], " ".join(f[3:]) or "(no reason given)"))
            elif kind == "CHOL" and len(f) >= 6:
                run.saw(f[1])
                key = (f[1], int(f[2]), int(f[3]))
                run.chol_rounds.setdefault(key, {})[run.round] = (float(f[5]), float(f[4]))
            elif kind == "PIPE" and len(f) >= 6:
                run.saw(f[1])
                value = tuple(float(x) for x in f[3:6])
                run.pipe_rounds.setdefault((f[1], int(f[2])), {})[run.round] = value
            elif kind == "GRAPHLAUNCH" and len(f) >= 5:
                run.graph_launch.setdefault((int(f[2]), int(f[3])), []).append(float(f[4]))
            elif kind == "GEMMREF" and len(f) >= 3:
                run.gemm_rounds.setdefault(f[1], []).append(float(f[2]))
            elif kind == "FAIL" and len(f) >= 2:
                run.fails.append((f[1], " ".join(f[2:])))
                failed = workload_of_failure(f[1], f[2:])
                if failed:
                    run.workload_fails[failed] = " ".join(f[2:])
            elif kind == "MACHINE" and len(f) >= 2:
                run.machine.append((f[1], " ".join(f[2:])))
            elif kind == "ARGS":
                run.args = effective_flags(f[1:])
        except ValueError:
            print(f"compare.py: ignoring malformed line: {line.rstrip()}", file=sys.stderr)
    run.aggregate()
    return run


def effective_flags(words):
    """bench/run.sh passes its defaults, then the caller's flags (every flag takes one value):
    the last value of each flag is the one the programs used."""
    flags = OrderedDict()
    for i in range(0, len(words) - 1, 2):
        flags.pop(words[i], None)
        flags[words[i]] = words[i + 1]
    return " ".join(f"{k} {v}" for k, v in flags.items())


def local_machine():
    """The machine facts when the raw lines carry none (a file from an older run)."""
    import os
    import platform
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return [("cpu", cpu), ("cores", f"{os.cpu_count()}"),
            ("kernel", f"{platform.system()} {platform.release()} {platform.machine()}"),
            ("note", "read from this machine, not recorded by the run")]


def ns(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def ratio(v, base):
    if base is None or base <= 0 or v is None or v <= 0:
        return "-"
    r = v / base
    return f"{r:.2f}" if r < 100 else f"{r:,.0f}"


def table(rows, header, align):
    """Plain text table; align is a string of 'l'/'r' per column."""
    cells = [header] + rows
    width = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def fmt(r):
        out = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, width, align)]
        return "  ".join(out).rstrip()

    return "\n".join([fmt(header), "  ".join("-" * w for w in width)] + [fmt(r) for r in rows])


def print_header(run):
    n = len(run.rounds())
    print("ordo bench suite: ordo against its peers, same workloads, same machine, "
          + (f"{n} interleaved rounds" if n > 1 else "one run"))
    for key, value in run.machine or local_machine():
        print(f"  {key:8} {value}")
    if run.args:
        print(f"  flags    {run.args}")
    print()


def workload_of_failure(program, words):
    """bench/run.sh runs each A-F program once per workload ("FAIL bench_gomp --only C timed out
    ..."): the runtime family and the workload whose cells that failure leaves empty."""
    if not program.startswith("bench_"):
        return None
    words = [w for w in words if w != "--pushers-help"]
    if len(words) >= 2 and words[0] == "--kind":  # ordo's naive engine (ordo-naive)
        words = words[2:]
    if len(words) >= 2 and words[0] == "--only" and len(words[1]) == 1:
        return (program[len("bench_"):], words[1])
    return None


def skip_reason(run, system, workload):
    for s, w, reason in run.skips:
        if s == system and w in (workload, "-"):
            return reason
    return None


def print_workloads(run):
    present = {s for (s, _w) in run.results}
    systems = run.ordered_systems(present)
    if not systems:
        return
    what = ("median over the rounds of each round's median [min - max over all]"
            if len(run.rounds()) > 1 else "median of the repetitions [min - max]")
    print(f"A-E: ns per op, {what}; ratio = system / ordo (above 1: ordo is faster)")
    rows = []
    for w, title in WORKLOADS.items():
        base = run.results.get((BASELINE, w), (None,))[0]
        first = True
        for s in systems:
            r = run.results.get((s, w))
            label = title if first else ""
            if r:
                rows.append([label, s, ns(r[0]), f"[{ns(r[1])} - {ns(r[2])}]", ratio(r[0], base)])
            elif skip_reason(run, s, w) is not None:
                rows.append([label, s, "SKIP", "(see notes)", ""])
            elif (family(s), w) in run.workload_fails:
                rows.append([label, s, "FAIL", "(see notes)", ""])
            else:
                continue
            first = False
    print(table(rows, ["workload", "system", "median", "[min - max]", "ratio"], "llrrr"))
    print()
    print_summary(run, systems)


def family(system):
    return system.split("-", 1)[0]


def print_summary(run, systems):
    """One row per system: the ratios only, '*' marking each runtime's best mode."""
    cols = list(WORKLOADS) + ["METG"]

    def value(s, c):
        if c == "METG":
            m = run.metg.get(s)
            return m[0] if m and m[0] > 0 else None
        r = run.results.get((s, c))
        return r[0] if r else None

    best = {}
    for c in cols:
        for s in systems + [s for s in run.metg if s not in systems]:
            if s.endswith("-prebuilt"):
                continue  # the graph is built before timing: a lower bound, not a mode to pick
            v = value(s, c)
            k = (family(s), c)
            if v is not None and (k not in best or v < value(best[k], c)):
                best[k] = s
    all_systems = run.ordered_systems(set(systems) | set(run.metg))
    multi = {family(s) for s in all_systems if sum(family(t) == family(s) for t in all_systems) > 1}
    rows = []
    for s in all_systems:
        row = [s]
        for c in cols:
            cell = ratio(value(s, c), value(BASELINE, c))
            if family(s) in multi and best.get((family(s), c)) == s and cell != "-":
                cell += "*"
            row.append(cell)
        rows.append(row)
    print("Summary: ratio system / ordo per workload (above 1: ordo is faster)"
          + ("; * = that runtime's best mode" if multi else ""))
    print(table(rows, ["system"] + cols, "l" + "r" * len(cols)))
    print()


def us(v):
    v /= 1000.0
    return f"{v:g} us" if v >= 1 else f"{v:.2g} us"


def print_metg(run):
    systems = run.ordered_systems(set(run.metg) | set(run.eff))
    if not systems:
        return
    print("F METG (Task Bench 1-D stencil, width 2 x threads, 3 dependencies per task): the "
          "smallest task duration\n  still run at >= 50% efficiency; ratio = system / ordo "
          "(above 1: ordo reaches finer grains)")
    base = run.metg.get(BASELINE, (None,))[0]
    base = base if base and base > 0 else None
    rows = []
    probed = any(run.eff_phases.values())
    for s in systems:
        m = run.metg.get(s)
        if m is None:
            row = [s, "(no METG line)", "", ""]
        elif m[0] <= 0:
            row = [s, "none >= 50%", "", ""]
        else:
            row = [s, us(m[0]), f"{m[1]:.0%}", ratio(m[0], base)]
        if probed:
            phases = [p for p in run.eff_phases.get(s, []) if p]
            row.append(f"{phases.count('slow')} of {len(phases)}" if phases else "-")
        rows.append(row)
    header = ["system", "METG", "eff at METG", "ratio"]
    if probed:
        header.append("grains in the slow phase")
    print(table(rows, header, "lrrr" + ("r" if probed else "")))
    grains = sorted({g for e in run.eff.values() for g in e}, reverse=True)
    if grains:
        print("\n  efficiency at each task duration (us)")
        header = ["system"] + [f"{g / 1000:g}" for g in grains]
        rows = [[s] + [f"{run.eff[s][g]:.2f}" if g in run.eff.get(s, {}) else "" for g in grains]
                for s in systems]
        print(table(rows, header, "l" + "r" * len(grains)))
    print()


def print_cholesky(run):
    if not run.chol:
        return
    print("K tiled Cholesky (same kernels and tiling): GFLOP/s = n^3/3 / seconds; "
          "ratio = system seconds / ordo seconds\n  (above 1: ordo is faster), against ordo "
          "at the same n and tile")
    # The reference at the run's thread count: the dgemm-<N>t line with the most threads.
    ref_label, ref2 = dgemm_reference(run)
    ref_label = ref_label or "dgemm-2t"
    order = run.ordered_systems({c[0] for c in run.chol})
    rows = []
    for s in order:
        for sys_, n, tile, gflops, seconds in run.chol:
            if sys_ != s:
                continue
            base = next((c[4] for c in run.chol if c[0] == BASELINE and c[1] == n and c[2] == tile),
                        None)
            share = f"{gflops / ref2:.0%}" if ref2 else "-"
            rows.append([s, str(n), str(tile), f"{gflops:.1f}", f"{seconds:.3f}", share,
                         ratio(seconds, base)])
    print(table(rows, ["system", "n", "tile", "GFLOP/s", "seconds", f"% of {ref_label}", "ratio"],
                "lrrrrrr"))
    if run.gemmref:
        print("  OpenBLAS dgemm reference: "
              + ", ".join(f"{label} {g:.1f} GFLOP/s" for label, g in run.gemmref))
    print()


def print_pipeline(run):
    """Workload P: a 3-pipe serial-parallel-serial pipeline with empty stages."""
    if not run.pipe:
        return
    what = ("median over the rounds of each round's median [min - max over all]"
            if len(run.rounds()) > 1 else "median of the repetitions [min - max]")
    print(f"P pipeline, 3 pipes serial / parallel / serial, empty stages: ns per token, {what};\n"
          "  tokens/s = 1e9 / ns per token; ratio = system / ordo in time (above 1: ordo is "
          "faster)")
    order = run.ordered_systems({s for (s, _l) in run.pipe})
    rows = []
    for lines in sorted({l for (_s, l) in run.pipe}):
        base = run.pipe.get((BASELINE, lines), (None,))[0]
        first = True
        for s in order:
            r = run.pipe.get((s, lines))
            if not r:
                continue
            rate = f"{1e9 / r[0]:,.0f}" if r[0] > 0 else "-"
            rows.append([str(lines) if first else "", s, ns(r[0]), f"[{ns(r[1])} - {ns(r[2])}]",
                         rate, ratio(r[0], base)])
            first = False
    print(table(rows, ["lines", "system", "ns/token", "[min - max]", "tokens/s", "ratio"],
                "llrrrr"))
    print()


def print_rounds_won(run, base=BASELINE):
    """Several rounds: in how many did `base` (ordo, or ordo-graph against the peers) beat each
    system (same round, so same machine state)."""
    rounds = run.rounds()
    if len(rounds) < 2 or base not in run.systems:
        return
    pipe_cols = [f"P{lines}" for lines in sorted({l for (_s, l) in run.pipe_rounds})]
    cols = list(WORKLOADS) + ["METG", "K"] + pipe_cols

    def per_round(s, c):
        if c in pipe_cols:
            return {r: v[0] for r, v in run.pipe_rounds.get((s, int(c[1:])), {}).items()}
        if c == "METG":
            return {r: (v if v > 0 else float("inf")) for r, v in run.metg_rounds.get(s, {}).items()}
        if c == "K":
            found = {}
            for (sys_, _n, _t), by_round in run.chol_rounds.items():
                if sys_ == s:
                    found.update({r: v[0] for r, v in by_round.items()})
            return found
        return {r: v[0] for r, v in run.per_round.get((s, c), {}).items()}

    rows = []
    systems = [s for s in run.ordered_systems(set(run.systems))
               if s != base and (base == BASELINE or family(s) != BASELINE)]
    for s in systems:
        row = [s]
        for c in cols:
            mine, theirs = per_round(base, c), per_round(s, c)
            both = [r for r in rounds if r in mine and r in theirs]
            if not both:
                row.append("-")
                continue
            won = sum(mine[r] < theirs[r] for r in both)
            tied = sum(mine[r] == theirs[r] for r in both)
            row.append(f"{won}/{len(both)}" + (f" ({tied} tied)" if tied else ""))
        rows.append(row)
    print(f"Rounds won by {base}: rounds in which {base}'s value beat the system's in that same "
          "round (A-E ns/op, METG, K seconds,\n  P<lines> ns per token; lower wins)")
    print(table(rows, ["system"] + cols, "l" + "r" * len(cols)))
    print()


def phase_of(c2c_before, c2c_after):
    """'fast', 'slow', or None when a probe could not measure (-1)."""
    if c2c_before < 0 or c2c_after < 0:
        return None
    return "fast" if max(c2c_before, c2c_after) < FAST_C2C_NS else "slow"


def phase_medians(run):
    """(system, workload) -> {'fast': (median, count), 'slow': (median, count)}, from REP lines."""
    out = {}
    for key, reps in run.reps.items():
        by_phase = {}
        for ns_, before, after in reps:
            phase = phase_of(before, after)
            if phase:
                by_phase.setdefault(phase, []).append(ns_)
        out[key] = {ph: (statistics.median(v), len(v)) for ph, v in by_phase.items()}
    return out


def print_phases(run):
    medians = phase_medians(run)
    if not any(medians.values()):
        return
    systems = run.ordered_systems({s for (s, _w) in medians})
    fast = sum(m.get("fast", (0, 0))[1] for m in medians.values())
    slow = sum(m.get("slow", (0, 0))[1] for m in medians.values())
    print(f"A-E by the machine's phase: median ns/op of the repetitions during which the core-to-"
          f"core round trip\n  stayed under {FAST_C2C_NS:.0f} ns (fast) or did not (slow), "
          f"probed before and after each; [n] repetitions\n  ({fast} fast and {slow} slow in "
          f"all); ratio = system / ordo in the fast phase")

    def cell(m, phase):
        return f"{ns(m[phase][0])} [{m[phase][1]}]" if phase in m else "-"

    rows = []
    for w, title in WORKLOADS.items():
        base = medians.get((BASELINE, w), {}).get("fast", (None,))[0]
        first = True
        for s in systems:
            m = medians.get((s, w))
            if not m:
                continue
            fast_value = m.get("fast", (None,))[0]
            rows.append([title if first else "", s, cell(m, "fast"), cell(m, "slow"),
                         ratio(fast_value, base)])
            first = False
    print(table(rows, ["workload", "system", "fast phase", "slow phase", "ratio"], "llrrr"))
    print()


# Issue #4's targets: ordo's ns/op ceilings on A-D, METG at least this many times smaller than the
# best peer's, and Cholesky at least this share of the 2-thread dgemm rate.
NS_CEILINGS = OrderedDict([("A", 80.0), ("B", 70.0), ("C", 100.0), ("D", 100.0)])
METG_FACTOR = 2.0
CHOL_DGEMM_SHARE = 0.85


def peers_of(systems):
    return [s for s in systems if family(s) != BASELINE]


def target_rows(run):
    """[target, measured, status] for each of issue #4's targets the run measured (a workload,
    METG or Cholesky any system has a line for): the values are the tables' (medians over rounds).
    A target ordo has no value for is missed; "faster" is strict (a tie is not faster)."""
    rows = []
    fast = phase_medians(run)
    measured_workloads = [w for w in WORKLOADS
                          if any(k[1] == w for k in run.results)
                          or any(k[1] == w for k in run.workload_fails)]
    for w in measured_workloads:
        if w in NS_CEILINGS:
            rows.append(ceiling_row(run, w, NS_CEILINGS[w], fast))
    for w in measured_workloads:
        rows.append(peers_row(run, w))
    if run.metg:
        rows.append(metg_row(run))
    for n, tile in OrderedDict(((c[1], c[2]), None) for c in run.chol):
        rows.extend(cholesky_rows(run, n, tile))
    return rows


def ordo_missing(run, w):
    """Why ordo has no value for workload w."""
    if (BASELINE, w) in run.workload_fails:
        return "missed (ordo's program failed: see notes)"
    if skip_reason(run, BASELINE, w) is not None:
        return "missed (ordo skipped it)"
    return "missed (no result for ordo)"


def ceiling_row(run, w, ceiling, fast):
    target = f"{w} <= {ceiling:g} ns/op"
    r = run.results.get((BASELINE, w))
    if not r:
        return [target, "-", ordo_missing(run, w)]
    measured = ns(r[0])
    f = fast.get((BASELINE, w), {}).get("fast")
    if f:
        measured += f" (fast phase {ns(f[0])})"
    status = "met" if r[0] <= ceiling else "missed"
    if status == "missed" and f and f[0] <= ceiling:
        status += " (met in the fast phase)"
    return [target, measured, status]


def peers_row(run, w):
    target = f"{w}: ordo faster than every peer"
    mine = run.results.get((BASELINE, w))
    if not mine:
        return [target, "-", ordo_missing(run, w)]
    peers = peers_of(run.systems)
    valued = [s for s in peers if (s, w) in run.results]
    unmeasured = [s for s in peers if (s, w) not in run.results
                  and (skip_reason(run, s, w) is not None or (family(s), w) in run.workload_fails)]
    if not valued:
        status = "no peer data"
    else:
        not_beaten = sorted((run.results[(s, w)][0], s) for s in valued
                            if run.results[(s, w)][0] <= mine[0])
        status = ("met" if not not_beaten else
                  "missed: " + ", ".join(f"{s} {ns(v)}" for v, s in not_beaten))
        status += faster_than_no_handoff(run, w, not_beaten)
    if unmeasured:
        status += "; no value: " + ", ".join(unmeasured)
    return [target, ns(mine[0]), status]


def faster_than_no_handoff(run, w, not_beaten):
    """Names the peers among `not_beaten` ((value, system) pairs) that are faster than
    ordo-naive on w. The naive engine runs each op inside its push: all of ordo's work per op on
    one thread, with no hand-off between threads. A peer faster than that does less work per op
    than ordo does, so moving ops between threads cannot catch it up; at most, with one pushing
    thread, the default engine overlaps the pusher's share of the work with the worker's."""
    inline = run.results.get((NO_HANDOFF, w))
    if not inline:
        return ""
    faster = [s for v, s in not_beaten if v < inline[0]]
    if not faster:
        return ""
    return (f"; {', '.join(faster)} faster than all of ordo's work per op on one thread "
            f"({NO_HANDOFF} {ns(inline[0])})")


def metg_row(run):
    target = f"METG at least {METG_FACTOR:g}x smaller than the best peer's"
    m = run.metg.get(BASELINE)
    best = min(((v[0], s) for s, v in run.metg.items() if family(s) != BASELINE and v[0] > 0),
               default=None)
    if not m:
        return [target, "-", "missed (no METG for ordo)"]
    if m[0] <= 0:
        return [target, "none >= 50%", "missed (no grain at 50% efficiency or more)"]
    if not best:
        return [target, us(m[0]), "no peer data"]
    return [target, f"{us(m[0])} against {best[1]} {us(best[0])}",
            "met" if m[0] * METG_FACTOR <= best[0] else "missed"]


def dgemm_reference(run):
    """(label, GFLOP/s) of the dgemm-<N>t reference line with the most threads, the rate at the
    run's thread count; (None, None) when there is none."""
    multi = [(int(label[6:-1]), label, g) for label, g in run.gemmref
             if label.startswith("dgemm-") and label.endswith("t") and label[6:-1].isdigit()]
    if not multi:
        return None, None
    _, label, g = max(multi)
    return label, g


def cholesky_rows(run, n, tile):
    target = f"K (n {n}, tile {tile}): faster than every peer"
    mine = next((c for c in run.chol if c[0] == BASELINE and c[1] == n and c[2] == tile), None)
    if not mine:
        return [[target, "-", "missed (no result for ordo)"]]
    gflops = mine[3]
    peers = [c for c in run.chol if family(c[0]) != BASELINE and c[1] == n and c[2] == tile]
    not_beaten = sorted(((c[3], c[0]) for c in peers if c[3] >= gflops), reverse=True)
    status = ("no peer data" if not peers else "met" if not not_beaten else
              "missed: " + ", ".join(f"{s} {g:.1f}" for g, s in not_beaten))
    rows = [[target, f"{gflops:.1f} GFLOP/s", status]]
    label, ref = dgemm_reference(run)
    if ref:
        share = gflops / ref
        rows.append([f"K (n {n}, tile {tile}): >= {CHOL_DGEMM_SHARE:.0%} of {label}",
                     f"{share:.1%} of {ref:.1f}",
                     "met" if share >= CHOL_DGEMM_SHARE else "missed"])
    return rows


def print_targets(run):
    rows = target_rows(run)
    if not rows:
        return
    print("Issue #4's targets, read off the tables above (medians over rounds; every other "
          "system counts as a peer,\n  tbb-flow-prebuilt and tbb-tg included; ordo's own modes "
          "do not; ordo-naive runs each op inside its\n  push: all of ordo's work per op "
          "on one thread, with no hand-off)")
    print(table(rows, ["target", "ordo", "status"], "lll"))
    print()


def graph_rows(run):
    """[target, measured, status] for issue #26's targets: ordo-graph on A-E against every
    peer's best mode (every system outside ordo's family, -prebuilt ones included), B's ceiling,
    E against tbb-tg, and the Cholesky demo's launch overhead."""
    rows = []
    for w in WORKLOADS:
        mine = run.results.get((GRAPH, w))
        if not mine:
            continue
        best = {}
        for (s, w2), r in run.results.items():
            if w2 == w and family(s) != BASELINE and (family(s) not in best
                                                      or r[0] < best[family(s)][0]):
                best[family(s)] = (r[0], s)
        slower = sorted(v for v in best.values() if v[0] <= mine[0])
        status = "no peer data" if not best else (
            "met" if not slower else "missed: " + ", ".join(f"{s} {ns(v)}" for v, s in slower))
        rows.append([f"{w}: ordo-graph faster than every peer's best mode", ns(mine[0]), status])
        if w in GRAPH_NS_CEILINGS:
            c = GRAPH_NS_CEILINGS[w]
            rows.append([f"{w}: ordo-graph <= {c:g} ns/op", ns(mine[0]),
                         "met" if mine[0] <= c else "missed"])
        tg = run.results.get(("tbb-tg", w))
        if w == "E" and tg:
            rows.append(["E: ordo-graph under tbb-tg", ns(mine[0]),
                         "met" if mine[0] < tg[0] else f"missed: tbb-tg {ns(tg[0])}"])
    for (n, tile), shares in run.graph_launch.items():
        share = max(shares)  # the worst launch of every round
        rows.append([f"K (n {n}, tile {tile}): launch overhead < {GRAPH_LAUNCH_SHARE:.0%} of the run",
                     f"{share:.2%} (worst)", "met" if share < GRAPH_LAUNCH_SHARE else "missed"])
    return rows


def print_graph_targets(run):
    rows = graph_rows(run)
    if not rows:
        return
    print("Issue #26's targets for capture and replay (ordo-graph), read off the tables above "
          "(medians over rounds)")
    print(table(rows, ["target", "ordo-graph", "status"], "lll"))
    print()


def print_notes(run):
    if not run.skips and not run.fails:
        return
    print("Notes")
    for program, reason in run.fails:
        print(f"  FAIL {program}: {reason}")
    seen = set()
    for s, w, reason in run.skips:
        if (s, w, reason) in seen:
            continue
        seen.add((s, w, reason))
        what = "all workloads" if w == "-" else f"workload {w}"
        print(f"  SKIP {s}, {what}: {reason}")
    print()


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__, file=sys.stderr)
        return 2
    if len(argv) == 2:
        with open(argv[1]) as f:
            run = parse(f)
    else:
        run = parse(sys.stdin)
    print_header(run)
    print_workloads(run)
    print_phases(run)
    print_metg(run)
    print_cholesky(run)
    print_pipeline(run)
    print_rounds_won(run)
    print_rounds_won(run, GRAPH)
    print_targets(run)
    print_graph_targets(run)
    print_notes(run)
    if not run.results and not run.metg and not run.chol and not run.pipe:
        print("no results: did any benchmark program run? (see the messages above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
