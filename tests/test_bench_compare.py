#!/usr/bin/env python3
"""bench/compare.py: one run's lines print as read; several rounds fold into medians, METG is read
off the median efficiencies, and the rounds-won table counts same-round comparisons."""

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import compare  # noqa: E402


def parse(text):
    return compare.parse(text.strip().splitlines())


def rounds_won_table(run):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        compare.print_rounds_won(run)
    return out.getvalue()


ONE_RUN = """
RESULT ordo A 50.0 49.0 52.0
RESULT gomp A 300.0 290.0 310.0
EFF ordo 2000 0.70
EFF ordo 1000 0.55
METG ordo 1000 0.55
CHOL ordo 4096 256 80.0 0.2863
GEMMREF dgemm-2t 100.0
"""

# Round 2 is slow for ordo (a VM's cores moved, say); gomp is steady.
THREE_ROUNDS = """
ROUND 1
RESULT ordo E 50.0 49.0 51.0
RESULT gomp E 60.0 59.0 61.0
EFF ordo 2000 0.70
EFF ordo 1000 0.55
METG ordo 1000 0.55
EFF gomp 2000 0.60
EFF gomp 1000 0.45
METG gomp 2000 0.60
CHOL ordo 4096 256 80.0 0.2863
CHOL gomp 4096 256 78.0 0.2937
GEMMREF dgemm-2t 100.0
ROUND 2
RESULT ordo E 200.0 190.0 240.0
RESULT gomp E 61.0 60.0 62.0
EFF ordo 2000 0.60
EFF ordo 1000 0.40
METG ordo 2000 0.60
EFF gomp 2000 0.61
EFF gomp 1000 0.44
METG gomp 2000 0.61
CHOL ordo 4096 256 70.0 0.3272
CHOL gomp 4096 256 79.0 0.2900
GEMMREF dgemm-2t 90.0
ROUND 3
RESULT ordo E 55.0 54.0 56.0
RESULT gomp E 59.0 58.0 60.0
EFF ordo 2000 0.72
EFF ordo 1000 0.52
METG ordo 1000 0.52
EFF gomp 2000 0.62
EFF gomp 1000 0.46
METG gomp 2000 0.62
CHOL ordo 4096 256 81.0 0.2827
CHOL gomp 4096 256 80.0 0.2862
GEMMREF dgemm-2t 110.0
"""


class OneRun(unittest.TestCase):
    def test_values_are_kept_as_read(self):
        run = parse(ONE_RUN)
        self.assertEqual(run.rounds(), [1])
        self.assertEqual(run.results[("ordo", "A")], (50.0, 49.0, 52.0))
        self.assertEqual(run.metg["ordo"], (1000.0, 0.55))
        self.assertEqual(run.chol, [("ordo", 4096, 256, 80.0, 0.2863)])
        self.assertEqual(run.gemmref, [("dgemm-2t", 100.0)])

    def test_no_rounds_table_for_one_run(self):
        self.assertEqual(rounds_won_table(parse(ONE_RUN)), "")


class SeveralRounds(unittest.TestCase):
    def setUp(self):
        self.run = parse(THREE_ROUNDS)

    def test_a_to_e_take_the_median_of_the_rounds_and_the_full_span(self):
        self.assertEqual(self.run.rounds(), [1, 2, 3])
        self.assertEqual(self.run.results[("ordo", "E")], (55.0, 49.0, 240.0))
        self.assertEqual(self.run.results[("gomp", "E")], (60.0, 58.0, 62.0))

    def test_metg_is_read_off_the_median_efficiencies(self):
        self.assertAlmostEqual(self.run.eff["ordo"][1000.0], 0.52)
        self.assertEqual(self.run.metg["ordo"], (1000.0, 0.52))
        self.assertEqual(self.run.metg["gomp"], (2000.0, 0.61))

    def test_cholesky_and_dgemm_take_medians(self):
        chol = {c[0]: c for c in self.run.chol}
        self.assertAlmostEqual(chol["ordo"][3], 80.0, delta=0.05)
        self.assertEqual(chol["ordo"][4], 0.2863)
        self.assertAlmostEqual(chol["gomp"][3], 79.0, delta=0.05)
        self.assertEqual(chol["gomp"][4], 0.2900)
        self.assertEqual(self.run.gemmref, [("dgemm-2t", 100.0)])

    def test_rounds_won_compares_within_each_round(self):
        table = rounds_won_table(self.run)
        row = next(line for line in table.splitlines() if line.startswith("gomp"))
        # E: ordo wins rounds 1 and 3, loses 2. METG: 1 us beats 2 us in rounds 1 and 3, round 2
        # ties. K: ordo's seconds are lower in rounds 1 and 3.
        self.assertEqual(row.split(), ["gomp", "-", "-", "-", "-", "2/3", "2/3", "(1", "tied)",
                                       "2/3"])


class OneWorkloadFailed(unittest.TestCase):
    """bench/run.sh runs each workload in its own process: when one times out, the runtime's other
    workloads stay, and its cell for that workload says FAIL rather than vanishing."""

    LINES = """
RESULT ordo C 60.0 59.0 61.0
RESULT ordo D 90.0 89.0 91.0
RESULT gomp D 500.0 490.0 510.0
FAIL bench_gomp --only C timed out after 900s
"""

    def test_the_failed_cell_is_marked_and_the_others_stay(self):
        run = parse(self.LINES)
        self.assertEqual(run.workload_fails[("gomp", "C")], "--only C timed out after 900s")
        self.assertEqual(run.results[("gomp", "D")], (500.0, 490.0, 510.0))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_workloads(run)
        rows = [line.split() for line in out.getvalue().splitlines()]
        self.assertIn(["gomp", "FAIL", "(see", "notes)"], rows)
        self.assertTrue(any(r[:2] == ["gomp", "500"] for r in rows))

    def test_a_failed_naive_workload_marks_its_cell(self):
        run = parse("RESULT ordo A 50.0 49.0 52.0\n"
                    "FAIL bench_ordo --kind naive --only B timed out after 900s\n")
        self.assertEqual(run.workload_fails[("ordo", "B")],
                         "--kind naive --only B timed out after 900s")

    def test_a_whole_program_failing_marks_no_cell(self):
        run = parse("RESULT ordo A 50.0 49.0 52.0\nFAIL bench_gomp exited with status 1\n")
        self.assertEqual(run.workload_fails, {})



class CholeskyShare(unittest.TestCase):
    """The Cholesky share is of the dgemm reference at the run's thread count (--threads 4 prints
    dgemm-1t and dgemm-4t), not of a fixed dgemm-2t."""

    def test_the_share_uses_the_reference_with_the_most_threads(self):
        run = parse("""
CHOL ordo 4096 256 150.0 0.1527
GEMMREF dgemm-1t 50.0
GEMMREF dgemm-4t 200.0
""")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_cholesky(run)
        text = out.getvalue()
        self.assertIn("% of dgemm-4t", text)
        row = next(line.split() for line in text.splitlines() if line.startswith("ordo"))
        self.assertEqual(row[5], "75%")

class MetgStays(unittest.TestCase):
    """METG is the smallest grain at which efficiency *stays* at 50% or more: a smaller grain that
    happens to reach 50% after a larger one fell below does not count (efficiency rows are not
    monotone on a noisy machine)."""

    LINES = """
ROUND 1
EFF ordo 4000 0.80
EFF ordo 2000 0.45
EFF ordo 1000 0.55
EFF ordo 500 0.20
METG ordo 2000 0.45
ROUND 2
EFF ordo 4000 0.81
EFF ordo 2000 0.44
EFF ordo 1000 0.56
EFF ordo 500 0.21
METG ordo 4000 0.81
"""

    def test_a_grain_after_a_fall_is_not_the_metg(self):
        run = parse(self.LINES)
        self.assertEqual(run.metg["ordo"][0], 4000.0)


class CholeskyMedianIsConsistent(unittest.TestCase):
    """Over an even number of rounds the median GFLOP/s shown is the one of the median seconds
    shown (n^3/3 / seconds), not a separate median that matches no time."""

    def test_gflops_follow_the_median_seconds(self):
        flops = 4096.0 ** 3 / 3
        lines = ["ROUND 1", f"CHOL ordo 4096 256 {flops / 0.30 / 1e9:.4f} 0.30",
                 "ROUND 2", f"CHOL ordo 4096 256 {flops / 0.20 / 1e9:.4f} 0.20"]
        run = parse("\n".join(lines) + "\n")
        _, _, _, gflops, seconds = run.chol[0]
        self.assertAlmostEqual(seconds, 0.25)
        self.assertAlmostEqual(gflops, flops / 0.25 / 1e9, places=2)

    def test_a_run_too_fast_to_time_does_not_break_the_report(self):
        run = parse("CHOL ordo 64 32 2.35 0.0000\nCHOL gomp 64 32 2.00 0.0001\n")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_cholesky(run)
        self.assertIn("gomp", out.getvalue())


class ByPhase(unittest.TestCase):
    """REP lines split A-E's repetitions by the core-to-core round trip probed around each: a
    repetition is fast only when both probes were under FAST_C2C_NS, and every round's
    repetitions count."""

    LINES = """
ROUND 1
REP ordo B 1 50.0 60 62
REP ordo B 2 52.0 62 340
REP ordo B 3 48.0 340 70
RESULT ordo B 50.0 48.0 52.0
REP gomp B 1 400.0 70 65
REP gomp B 2 900.0 355 360
RESULT gomp B 650.0 400.0 900.0
ROUND 2
REP ordo B 1 150.0 350 360
REP ordo B 2 46.0 61 60
REP ordo B 3 47.0 -1 60
RESULT ordo B 47.0 46.0 150.0
"""

    def setUp(self):
        self.run = parse(self.LINES)
        self.medians = compare.phase_medians(self.run)

    def test_a_repetition_is_fast_only_when_both_probes_were(self):
        # fast: 50 (round 1) and 46 (round 2); slow: 52, 48 (one probe each) and 150
        self.assertEqual(self.medians[("ordo", "B")], {"fast": (48.0, 2), "slow": (52.0, 3)})
        self.assertEqual(self.medians[("gomp", "B")], {"fast": (400.0, 1), "slow": (900.0, 1)})

    def test_a_repetition_without_a_probe_is_left_out(self):
        counts = sum(c for _m, c in self.medians[("ordo", "B")].values())
        self.assertEqual(counts, 5)  # of 6: the one with -1 before it

    def test_the_table_gives_the_fast_phase_ratio(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_phases(self.run)
        text = out.getvalue()
        self.assertIn("3 fast and 4 slow in all", text)
        row = next(line for line in text.splitlines() if line.strip().startswith("gomp"))
        self.assertEqual(row.split(), ["gomp", "400", "[1]", "900", "[1]", "8.33"])

    def test_metg_counts_the_grains_measured_in_the_slow_phase(self):
        run = parse("EFF ordo 2000 0.70 60 61\nEFF ordo 1000 0.55 61 350\n"
                    "EFF ordo 500 0.40 -1 60\nMETG ordo 1000 0.55\n"
                    "EFF gomp 2000 0.60\nMETG gomp 2000 0.60\n")
        self.assertEqual(run.eff_phases["ordo"], ["fast", "slow", None])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_metg(run)
        metg_table = out.getvalue().split("efficiency at each task duration")[0]
        rows = {line.split()[0]: line.split() for line in metg_table.splitlines()
                if line.startswith(("ordo ", "gomp "))}
        self.assertEqual(rows["ordo"][-3:], ["1", "of", "2"])
        self.assertEqual(rows["gomp"][-1], "-")  # an older program's EFF lines: no probes

    def test_no_table_without_rep_lines(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_phases(parse(ONE_RUN))
        self.assertEqual(out.getvalue(), "")


class Targets(unittest.TestCase):
    """The targets table reads issue #4's targets off the same medians the other tables print:
    ordo's own other modes are not peers, a ceiling missed overall but met by the fast-phase
    repetitions says so, and METG's 2x holds at the line."""

    LINES = """
REP ordo A 1 60.0 60 60
REP ordo A 2 300.0 60 350
REP ordo A 3 310.0 350 340
RESULT ordo A 300.0 60.0 310.0
RESULT ordo B 60.0 59.0 61.0
RESULT ordo-help B 40.0 39.0 41.0
RESULT gomp B 400.0 390.0 410.0
RESULT tbb-flow-prebuilt B 30.0 29.0 31.0
METG ordo 1000 0.55
METG ordo-help 500 0.60
METG tbb-flow 2000 0.60
CHOL ordo 4096 256 90.0 0.2545
CHOL gomp 4096 256 91.0 0.2517
GEMMREF dgemm-2t 105.0
"""

    def setUp(self):
        self.rows = {r[0]: r for r in compare.target_rows(parse(self.LINES))}

    def test_a_ceiling_met_only_in_the_fast_phase_says_so(self):
        self.assertEqual(self.rows["A <= 80 ns/op"][1:],
                         ["300 (fast phase 60.0)", "missed (met in the fast phase)"])
        self.assertEqual(self.rows["B <= 70 ns/op"][1:], ["60.0", "met"])
        self.assertNotIn("C <= 100 ns/op", self.rows)

    def test_peers_that_beat_ordo_are_named_and_ordo_help_is_not_a_peer(self):
        self.assertEqual(self.rows["B: ordo faster than every peer"][2],
                         "missed: tbb-flow-prebuilt 30.0")
        self.assertEqual(self.rows["A: ordo faster than every peer"][2], "no peer data")

    def test_metg_at_exactly_twice_finer_is_met(self):
        row = self.rows["METG at least 2x smaller than the best peer's"]
        self.assertEqual(row[1:], ["1 us against tbb-flow 2 us", "met"])

    def test_cholesky_against_peers_and_the_dgemm_share(self):
        self.assertEqual(self.rows["K (n 4096, tile 256): faster than every peer"][2],
                         "missed: gomp 91.0")
        self.assertEqual(self.rows["K (n 4096, tile 256): >= 85% of dgemm-2t"][1:],
                         ["85.7% of 105.0", "met"])

    def test_a_target_ordo_has_no_value_for_is_missed_not_dropped(self):
        rows = {r[0]: r for r in compare.target_rows(parse("""
RESULT ordo A 50.0 49.0 51.0
RESULT gomp B 400.0 390.0 410.0
FAIL bench_ordo --only B timed out after 900s
METG ordo -1 0
METG gomp 64000 0.6
"""))}
        self.assertEqual(rows["B <= 70 ns/op"][2], "missed (ordo's program failed: see notes)")
        self.assertEqual(rows["B: ordo faster than every peer"][2],
                         "missed (ordo's program failed: see notes)")
        self.assertEqual(rows["METG at least 2x smaller than the best peer's"][2],
                         "missed (no grain at 50% efficiency or more)")
        self.assertNotIn("C <= 100 ns/op", rows)  # nobody measured C

    def test_a_tie_is_not_faster_and_unmeasured_peers_are_named(self):
        rows = {r[0]: r for r in compare.target_rows(parse("""
RESULT ordo A 50.0 49.0 51.0
RESULT gomp A 50.0 49.0 51.0
RESULT ordo B 50.0 49.0 51.0
RESULT gomp B 60.0 59.0 61.0
SKIP tbb-tg B task_group has no way to state data dependencies
RESULT tbb-tg A 90.0 89.0 91.0
CHOL ordo 4096 256 90.0 0.2545
CHOL gomp 4096 256 90.0 0.2545
GEMMREF dgemm-1t 50.0
GEMMREF dgemm-4t 200.0
"""))}
        self.assertEqual(rows["A: ordo faster than every peer"][2], "missed: gomp 50.0")
        self.assertEqual(rows["B: ordo faster than every peer"][2], "met; no value: tbb-tg")
        self.assertEqual(rows["K (n 4096, tile 256): faster than every peer"][2],
                         "missed: gomp 90.0")
        # the share uses the reference the K table uses: the one with the most threads
        self.assertEqual(rows["K (n 4096, tile 256): >= 85% of dgemm-4t"][1:],
                         ["45.0% of 200.0", "missed"])


class FasterThanNoHandoff(unittest.TestCase):
    """ordo-naive (each op run inside its push) is all of ordo's work per op on one thread: a peer
    faster than that is named as such; one that beats ordo but not ordo-naive is not."""

    LINES = """
RESULT ordo A 55.0 50.0 60.0
RESULT ordo-naive A 46.0 45.0 47.0
RESULT gomp A 41.0 40.0 43.0
RESULT tbb-tg A 50.0 49.0 51.0
RESULT ordo B 52.0 51.0 53.0
RESULT ordo-naive B 49.0 48.0 50.0
RESULT tbb-flow-prebuilt B 28.0 27.0 29.0
RESULT ordo C 60.0 59.0 61.0
RESULT gomp C 400.0 390.0 410.0
"""

    def setUp(self):
        self.rows = {r[0]: r for r in compare.target_rows(parse(self.LINES))}

    def test_peers_faster_than_ordo_naive_are_named_as_such(self):
        self.assertEqual(self.rows["A: ordo faster than every peer"][2],
                         "missed: gomp 41.0, tbb-tg 50.0; gomp faster than all of ordo's work "
                         "per op on one thread (ordo-naive 46.0)")
        self.assertEqual(self.rows["B: ordo faster than every peer"][2],
                         "missed: tbb-flow-prebuilt 28.0; tbb-flow-prebuilt faster than all of "
                         "ordo's work per op on one thread (ordo-naive 49.0)")

    def test_ordo_naive_is_not_a_peer_and_needs_no_run_of_its_own(self):
        self.assertEqual(self.rows["C: ordo faster than every peer"][2], "met")
        self.assertEqual(compare.peers_of(["ordo", "ordo-naive", "gomp"]), ["gomp"])


class Pipeline(unittest.TestCase):
    """Workload P: PIPE lines per system and line count, medians over rounds, tokens per second
    and the ratio to ordo in the table."""

    LINES = """
ROUND 1
PIPE ordo 2 40.0 39.0 41.0
PIPE tbb 2 60.0 59.0 61.0
PIPE ordo 4 42.0 41.0 43.0
ROUND 2
PIPE ordo 2 50.0 48.0 52.0
PIPE tbb 2 62.0 61.0 70.0
PIPE ordo 4 44.0 40.0 45.0
ROUND 3
PIPE ordo 2 45.0 44.0 46.0
PIPE tbb 2 64.0 63.0 65.0
"""

    def test_rounds_fold_into_medians(self):
        run = parse(self.LINES)
        self.assertEqual(run.pipe[("ordo", 2)], (45.0, 39.0, 52.0))
        self.assertEqual(run.pipe[("tbb", 2)], (62.0, 59.0, 70.0))
        self.assertEqual(run.pipe[("ordo", 4)], (43.0, 40.0, 45.0))
        self.assertEqual(run.rounds(), [1, 2, 3])

    def test_table_gives_tokens_per_second_and_ratio(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_pipeline(parse(self.LINES))
        rows = [line.split() for line in out.getvalue().splitlines()]
        self.assertIn(["2", "ordo", "45.0", "[39.0", "-", "52.0]", "22,222,222", "1.00"], rows)
        self.assertIn(["tbb", "62.0", "[59.0", "-", "70.0]", "16,129,032", "1.38"], rows)
        self.assertIn(["4", "ordo", "43.0", "[40.0", "-", "45.0]", "23,255,814", "1.00"], rows)

    def test_rounds_won_count_the_pipeline(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_rounds_won(parse(self.LINES))
        row = next(line.split() for line in out.getvalue().splitlines() if line.startswith("tbb"))
        self.assertEqual(row[-2:], ["3/3", "-"])  # P2: ordo won all 3; P4: tbb has no run


class GraphTargets(unittest.TestCase):
    """Issue #26: ordo-graph against every peer's best mode, B's ceiling, E against tbb-tg,
    the Cholesky demo's launch overhead (worst over rounds), and rounds won by ordo-graph."""
    LINES = """
ROUND 1
RESULT ordo B 50.0 49.0 51.0
RESULT ordo-graph B 24.0 23.0 25.0
RESULT tbb-flow B 300.0 290.0 310.0
RESULT tbb-flow-prebuilt B 26.0 25.0 27.0
RESULT ordo-graph E 40.0 39.0 41.0
RESULT tbb-tg E 30.0 29.0 31.0
GRAPHLAUNCH ordo-graph 4096 256 0.002
ROUND 2
RESULT ordo B 52.0 49.0 53.0
RESULT ordo-graph B 26.0 23.0 27.0
RESULT tbb-flow B 300.0 290.0 310.0
RESULT tbb-flow-prebuilt B 24.0 24.0 26.0
RESULT ordo-graph E 40.0 39.0 41.0
RESULT tbb-tg E 30.0 29.0 31.0
GRAPHLAUNCH ordo-graph 4096 256 0.02
"""

    def test_rows(self):
        rows = {r[0]: r[2] for r in compare.graph_rows(parse(self.LINES))}
        self.assertTrue(rows["B: ordo-graph faster than every peer's best mode"].startswith(
            "missed: tbb-flow-prebuilt"))  # median 25.0 against ordo-graph's 25.0: a tie
        self.assertEqual(rows["B: ordo-graph <= 25 ns/op"], "met")
        self.assertTrue(rows["E: ordo-graph under tbb-tg"].startswith("missed"))
        self.assertEqual(rows["K (n 4096, tile 256): launch overhead < 1% of the run"], "missed")

    def test_rounds_won_by_ordo_graph_leave_ordo_out(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            compare.print_rounds_won(parse(self.LINES), compare.GRAPH)
        text = out.getvalue()
        self.assertIn("Rounds won by ordo-graph", text)
        row = next(line.split() for line in text.splitlines() if line.startswith("tbb-flow "))
        self.assertEqual(row[2], "2/2")
        self.assertFalse(any(line.startswith("ordo ") for line in text.splitlines()))


if __name__ == "__main__":
    unittest.main(verbosity=1)
