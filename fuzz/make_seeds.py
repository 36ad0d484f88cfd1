#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<harness>/ from the scenarios below.

Each harness reads its input as a byte-coded list of steps (see the decoder at the top of each
harness); the helpers here spell those bytes, so that every seed starts the fuzzer from a
meaningful scenario instead of noise. Any byte string is a valid input, so a seed that goes stale
after a harness change is still harmless; rerun this script after such a change:

    python3 fuzz/make_seeds.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- fuzz_var_queue: step = below(4): 0 push(vars, writes) | 1 arrive next | 2 complete op(k)
#      | 3 complete next link(k). vars: bit v = var v, 0x80 = only the first access arrives now.
#      writes: bit v = var v is written, 0x80 = a wait on the lowest var of vars instead, then a
#      pick byte (0x40: a wait that reserves the var pushes its mark in a later step; 0x10 while
#      the var is reserved: that later step, the mark's push, or with 0x20 its failure; 0x08: a
#      wait handed back (pick) begins again; 0x04: a wait on the var's mark (pick) gives up).
def vq_push(vars_mask, writes_mask, split=False):
    return [0, vars_mask | (0x80 if split else 0), writes_mask]


def vq_mark(var_mask, later=False, again=False, give_up=False, pick=0):
    bits = 0x80 | (0x40 if later else 0) | (0x08 if again else 0) | (0x04 if give_up else 0)
    return [0, var_mask, bits, pick]


def vq_reserved_mark(var_mask, fail=False):
    return [0, var_mask, 0x90 | (0x20 if fail else 0), 0]


def vq_arrive():
    return [1]


def vq_complete(k=0):
    return [2, k]


def vq_complete_link(k=0):
    return [3, k]


VAR_QUEUE = {
    "writer-chain": vq_push(1, 1) * 3 + vq_complete() * 3,
    "readers-writer-readers": vq_push(1, 0) * 2 + vq_push(1, 1) + vq_push(1, 0) * 2
    + vq_complete(1) + vq_complete() * 4,
    "split-push-four-vars": vq_push(0x0F, 0x05, split=True) + vq_push(0x02, 0x02)
    + vq_arrive() * 3 + vq_complete_link() * 4 + vq_complete(),
    "crossing-ops": vq_push(0x03, 0x01) + vq_push(0x06, 0x04) + vq_push(0x05, 0x00)
    + vq_complete_link(1) + vq_complete() * 3,
    "reader-behind-running-writer": vq_push(1, 0) + vq_push(1, 1) + vq_push(1, 0)
    + vq_complete_link() + vq_push(1, 0) + vq_complete() * 3,
    # wait marks among active readers, queued behind a writer, and a second one while busy
    "marks-among-readers": vq_push(1, 0) * 2 + vq_mark(1) + vq_push(1, 0) + vq_mark(1)
    + vq_complete(0) + vq_complete(1) + vq_complete() * 4,
    "mark-queued-behind-writer": vq_push(1, 1) + vq_push(1, 0) + vq_mark(1) + vq_push(1, 0)
    + vq_push(1, 1) + vq_complete() + vq_complete(2) + vq_complete() * 4,
    # waits behind a mark (after a reader), joining a reservation, and a failed mark push
    "wait-behind-a-mark": vq_push(1, 0) + vq_mark(1) + vq_push(1, 0) + vq_mark(1) + vq_mark(1)
    + vq_complete(0) + vq_complete() * 3,
    "waits-join-a-reservation": vq_push(1, 0) + vq_mark(1, later=True) + vq_mark(1)
    + vq_push(1, 0) + vq_mark(1) + vq_reserved_mark(1) + vq_complete() * 4,
    "failed-mark-push": vq_push(1, 0) + vq_mark(1, later=True) + vq_push(1, 0) + vq_mark(1)
    + vq_reserved_mark(1, fail=True) + vq_mark(1) + vq_complete() * 3,
    "wait-begins-again": vq_push(1, 0) + vq_mark(1) + vq_push(1, 0) + vq_mark(1)
    + vq_complete(0) + vq_mark(1, again=True) + vq_complete() * 3,
    "waits-give-up": vq_push(1, 0) + vq_mark(1) + vq_mark(1) + vq_mark(1)
    + vq_mark(1, give_up=True, pick=0) + vq_mark(1, give_up=True, pick=1) + vq_complete() * 2,
}


# ---- fuzz_api: byte 0 picks the engine (0 naive, 1 pooled, 2 per_device, 3 per_device with
#      pushers helping and a window of 64); then steps, each below(12): 0 var_new | 1 var_delete
#      | 2-4 push | 5 complete | 6 wait_for_var | 7 wait_for_all | 8 clear_error | 9 get_error
#      | 10 misc | 11 burst. A var pick byte t: t % 8 in 0..3 names live var (t >> 3) % live,
#      4 a deleted one, 5 zero, 6 a live var of another engine, 7 made up.
NAIVE, POOLED, PER_DEVICE, HELPING = 0, 1, 2, 3
RETURN, THROW, DEFER_LATER, DEFER_INSIDE, DEFER_TWICE, WAIT_INSIDE, PUSH_CHILD, GET_INFO = range(8)
CODE_OK, CODE_1, CODE_3, CODE_42 = 0, 4, 5, 7  # indices into kCodes
LIVE = lambda i: i << 3  # noqa: E731
DELETED, ZERO, FOREIGN, MADE_UP = 4, 5, 6, 7


def api_var_new():
    return [0]


def api_push(const=(), mutable=(), behaviour=RETURN, code=CODE_OK, variant=12, prop=0,
             priority=0, name=2, child_code=CODE_OK, extra=()):
    out = [2, len(const) | (len(mutable) << 2), variant] + list(const) + list(mutable)
    out += [behaviour, code, 0x80, 0]
    if behaviour == PUSH_CHILD:
        out += [child_code]
    return out + [prop, priority, name] + list(extra)


def api_complete(k=0, code=CODE_OK, msg=2):
    return [5, k, code, msg]


def api_wait_var(pick, how=0):
    return [6, pick, how]


def api_wait_all(how=0):
    return [7, how]


def api_clear(pick):
    return [8, pick]


def api_get_error(pick, how=0x4F):  # cap 600 (how % 5 == 4), code and buffer given
    return [9, pick, how]


def api_delete(pick):
    return [1, pick]


def api_burst(extra_ops=0, behaviour=RETURN, code=CODE_OK, child_code=CODE_OK, reads=0x00):
    """65 + extra_ops pushes; op i uses live var i % live, read when bit i % 8 of reads is set."""
    out = [11, extra_ops, behaviour, code]
    if behaviour == PUSH_CHILD:
        out += [child_code]
    return out + [reads]


API = {
    # wait marks: expired waits on a var a deferred reader holds; a second one joins the first
    # (readers pushed after both still run), one after a reader waits behind the first
    "naive-expired-waits-join": [NAIVE] + api_var_new()
    + api_push(const=[LIVE(0)], behaviour=DEFER_LATER)
    + api_wait_var(LIVE(0), how=0x10) + api_wait_var(LIVE(0), how=0x12)
    + api_push(const=[LIVE(0)]) + api_push(mutable=[LIVE(0)])
    + api_complete() + api_wait_all(),
    "naive-expired-wait-then-reader-then-wait": [NAIVE] + api_var_new()
    + api_push(const=[LIVE(0)], behaviour=DEFER_LATER)
    + api_wait_var(LIVE(0), how=0x10) + api_push(const=[LIVE(0)])
    + api_wait_var(LIVE(0), how=0x10) + api_push(const=[LIVE(0)])
    + api_complete() + api_wait_all(),
    "pooled-expired-waits-join": [POOLED] + api_var_new()
    + api_push(const=[LIVE(0)], behaviour=DEFER_LATER)
    + api_wait_var(LIVE(0), how=0x10) + api_wait_var(LIVE(0), how=0x10)
    + api_push(const=[LIVE(0)], behaviour=GET_INFO) + api_complete() + api_wait_all(),
    "naive-failure-propagates": [NAIVE] + api_var_new() * 2
    + api_push(mutable=[LIVE(0)], code=CODE_42)
    + api_push(const=[LIVE(0)], mutable=[LIVE(1)])
    + api_wait_var(LIVE(1)) + api_get_error(LIVE(1)) + api_clear(LIVE(1))
    + api_push(mutable=[LIVE(1)]) + api_wait_var(LIVE(1)) + api_wait_all(),
    "per-device-defer-later": [PER_DEVICE] + api_var_new()
    + api_push(mutable=[LIVE(0)], behaviour=DEFER_LATER)
    + api_push(const=[LIVE(0)], behaviour=GET_INFO)
    + api_wait_var(LIVE(0), how=0x10) + api_wait_all(how=0x20)
    + api_complete(code=CODE_3) + api_complete() + api_wait_all(),
    "pooled-callbacks": [POOLED] + api_var_new() * 2
    + api_push(mutable=[LIVE(0)], behaviour=PUSH_CHILD, child_code=CODE_1)
    + api_push(const=[LIVE(0), LIVE(0)], mutable=[LIVE(0)], behaviour=WAIT_INSIDE, prop=1)
    + api_push(mutable=[LIVE(1)], behaviour=THROW, prop=2)
    + api_push(const=[LIVE(1)], behaviour=DEFER_INSIDE, code=CODE_1, prop=4)
    + api_push(behaviour=DEFER_TWICE, prop=3) + api_wait_all(),
    "naive-bad-arguments": [NAIVE] + api_var_new()
    + api_push(mutable=[LIVE(0)], variant=0) + api_push(const=[LIVE(0)], variant=1)
    + api_push(variant=3, extra=[1, 7]) + api_push(variant=4, extra=[1])
    + api_push(variant=7) + api_push(variant=9, extra=[3, 9]) + api_push(variant=10)
    + api_push(mutable=[LIVE(0)], variant=11, behaviour=GET_INFO) + api_wait_all(),
    "prepared-ops": [PER_DEVICE] + api_var_new() * 2
    + api_push(mutable=[LIVE(0)], behaviour=DEFER_LATER, variant=13)
    + api_push(const=[LIVE(0)], mutable=[LIVE(1)], variant=13, behaviour=GET_INFO, priority=3)
    + api_push(const=[LIVE(1)], variant=13, code=CODE_42) + api_complete(code=CODE_1)
    + api_wait_var(LIVE(1)) + api_wait_all(),
    "per-device-stale-handles": [PER_DEVICE] + api_var_new() * 2 + api_delete(LIVE(0))
    + api_push(const=[DELETED], mutable=[FOREIGN]) + api_wait_var(DELETED)
    + api_get_error(ZERO) + api_clear(FOREIGN) + api_push(mutable=[MADE_UP, LIVE(0)])
    + api_delete(DELETED) + api_wait_all(),
    "helping-bursts": [HELPING] + api_var_new() * 3
    + api_push(mutable=[LIVE(0)], behaviour=DEFER_LATER)
    + api_push(const=[LIVE(1)], behaviour=WAIT_INSIDE)
    + api_burst(extra_ops=40, behaviour=GET_INFO, reads=0x5A)
    + api_complete() + api_burst(extra_ops=63, behaviour=PUSH_CHILD, code=CODE_1)
    + api_wait_all(),
}


# ---- fuzz_handles: steps below(20): 0 create | 1 destroy | 2 retain | 3 release | 4-5 var_new
#      | 6 var delete/clear | 7 get_error | 8 wait_for_var | 9-10, 19 push | 11 opr_new | 12 opr push
#      | 13 opr delete | 14 complete | 15 wait_for_all | 16 queries | 17 exec | 18 bad create.
#      Engine pick byte t: t % 8 == 5 NULL, 6 made up, else engine (t >> 3) % n. Value pick byte t:
#      t % 8 in 0..3 pool item (t >> 3), 4 another kind's pool, 5 zero, 6 random, 7 near miss.
E = lambda i: i << 3  # noqa: E731
V = lambda i: i << 3  # noqa: E731
KIND_NAIVE, KIND_POOLED, KIND_PER_DEVICE = 0, 5, 6


def h_create(kind=KIND_NAIVE, threads=1):
    return [0, kind, threads]


def h_var_new(e=E(0)):
    return [4, e, 1]


def h_push(e=E(0), const=(), mutable=(), defers=False):
    if defers:
        return [9, e, 0]
    return [9, e, 1, len(const) | (len(mutable) << 2)] + list(const) + list(mutable)


HANDLES = {
    "vars-and-prepared": h_create() + h_var_new() * 2 + h_push(const=[V(0)], mutable=[V(1)])
    + [6, E(0), 1, V(0)]                     # delete var 0
    + h_push(const=[V(0)])                   # push with the deleted var
    + [11, E(0), 0x04, V(1)]                 # opr_new(mutable var 1)
    + [12, E(0), V(0), 5] + [6, E(0), 1, V(1)] + [12, E(0), V(0), 5]  # push, delete var, push
    + [13, E(0), V(0)] + [13, E(0), V(0)]    # delete the opr twice
    + [7, E(0), V(1)] + [8, E(0), 0, V(1)] + [15, E(0)],
    "destroy-and-stale-engine": h_create() + h_create(KIND_PER_DEVICE, 2) + h_var_new(E(1))
    + [2, E(0)] + [1, E(0), 0] + [1, E(0), 0]  # retain, destroy, destroy again
    + h_var_new(E(0)) + [16, E(0)] + [3, E(0), 0]  # after destroy; last release
    + [16, E(0)] + [6, E(0), 0, V(0)] + [4, 6, 1, 0] + [16, 5] + [1, E(1), 1],
    "completions": h_create(KIND_POOLED, 2) + h_push(defers=True) + h_push(defers=True)
    + [15, E(0), 3] + [14, V(0), 3] + [14, V(0), 0] + [17, 0] + [15, E(0), 0]
    + h_push(defers=True) + [1, E(0), 1] + [14, V(2), 0],
    "bad-configs": [18, 0, 5] + [18, 2, 7] + [18, 3] + [18, 6, 2] + h_create() + [18, 4, 0],
}


# ---- fuzz_pipeline_defer: engine (0 naive, 1 per_device 1 worker, 2 per_device 2, 3 pooled 3),
#      lines - 1, pipes - 1, a byte whose bit f makes pipe f parallel; then steps: below(6):
#      0-2 run, 3 pushed run, 4 reset, 5 reset_pipes(lines 0-8 (0: keep), pipes - 1, kinds).
#      A run's script: stop = N + byte, rules (count, then per rule: token = N + byte, nd,
#      b: b % 4 targets, stop after them when b & 0xC0 == 0xC0), then a failure byte (below(12):
#      0 pipe 0 at (N + token, nd); 1 a later pipe (1 + byte % (P - 1)) at N + token; else none).
#      Targets: 0 back k (t - 1 - k), 1 ahead k (t + 1 + k), 2 self, 3 never generated,
#      4 UINT64_MAX, 5 N + k.
def pl_header(engine=2, lines=4, pipes=3, parallel_mask=0):
    return [engine, lines - 1, pipes - 1, parallel_mask]


def pl_target(kind, k=0):
    return [kind, k] if kind in (0, 1, 5) else [kind]


def pl_rule(token, nd, targets, then_stop=False):
    b = len(targets) | (0xC0 if then_stop else 0)
    return [token, nd, b] + [x for t in targets for x in t]


def pl_run(stop, rules=(), fail=(2,), pushed=False):
    return [3 if pushed else 0, stop, len(rules)] + [x for r in rules for x in r] + list(fail)


PL_DOC_RULES = [pl_rule(2, 0, [pl_target(5, 8)]),
                pl_rule(5, 0, [pl_target(5, 2), pl_target(5, 7)]),
                pl_rule(5, 1, [pl_target(5, 9)])]

PIPELINE = {
    # pipeline.md §3.5: the documentation example, S-S-S and S-P-S, then pushed, then reset
    "doc-example": pl_header() + pl_run(11, PL_DOC_RULES) + [4] + pl_run(11, PL_DOC_RULES),
    "doc-example-sps-pushed": pl_header(parallel_mask=0x02) + pl_run(11, PL_DOC_RULES, pushed=True),
    # T3: each token defers to the next one (order reversal, line release)
    "chain-to-next": pl_header(engine=1, lines=3, pipes=2)
    + pl_run(5, [pl_rule(t, 0, [pl_target(1, 0)]) for t in range(4)]),
    # T2: already accepted, self; T5: several targets, duplicates
    "invalid-targets": pl_header(engine=3, lines=2, pipes=2)
    + pl_run(9, [pl_rule(1, 0, [pl_target(0, 0)]), pl_rule(2, 0, [pl_target(2)]),
                 pl_rule(3, 0, [pl_target(5, 1), pl_target(5, 5), pl_target(5, 6)]),
                 pl_rule(3, 1, [pl_target(5, 7), pl_target(5, 7)])]),
    # T4 and a cycle: dropped tokens, then a rerun without reset (TF-BUG 3)
    "dropped-then-rerun": pl_header(engine=2, lines=3, pipes=3, parallel_mask=0x02)
    + pl_run(6, [pl_rule(1, 0, [pl_target(3)]), pl_rule(2, 0, [pl_target(4)]),
                 pl_rule(3, 0, [pl_target(5, 4)]), pl_rule(4, 0, [pl_target(5, 3)])])
    + pl_run(9) + pl_run(4),
    # TF-BUG 1: stop on a resumed token while others are ready; TF-BUG 2: defer then stop
    "stop-on-resumed": pl_header(engine=2, lines=2, pipes=2)
    + pl_run(20, [pl_rule(0, 0, [pl_target(5, 3)]), pl_rule(1, 0, [pl_target(5, 3)]),
                  pl_rule(2, 0, [pl_target(5, 3)]), pl_rule(0, 1, [], then_stop=True)])
    + pl_run(5, [pl_rule(3, 0, [pl_target(5, 5)], then_stop=True)]) + pl_run(6),
    # failures: pipe 0 at (4, 0), then a later pipe at token 3, each followed by a run
    "failures": pl_header(engine=2, lines=2, pipes=3) + pl_run(10, fail=(0, 4, 0)) + pl_run(10)
    + pl_run(10, fail=(1, 0, 3), pushed=True) + pl_run(10),
    # ScalablePipeline: new pipes and lines between runs
    "reset-pipes": pl_header(engine=0, lines=4, pipes=2) + pl_run(11, PL_DOC_RULES)
    + [5, 3, 2, 0x04] + pl_run(11, PL_DOC_RULES) + [5, 0, 0, 0] + pl_run(11, PL_DOC_RULES),
}


def write(harness, seeds):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        assert all(0 <= b < 256 for b in data), name
        with open(os.path.join(d, name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    write("fuzz_var_queue", VAR_QUEUE)
    write("fuzz_api", API)
    write("fuzz_handles", HANDLES)
    write("fuzz_pipeline_defer", PIPELINE)
