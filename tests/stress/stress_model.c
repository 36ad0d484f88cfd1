/*
 * The sequential model (see stress_model.h) and the var cells it predicts for.
 */
#include "stress_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress_rng.h"

stress_model g_model = {.mu = PTHREAD_MUTEX_INITIALIZER};

static atomic_long g_cells_alive;

/* ---- var cells ---- */

var_cell* cell_new(void) {
  void* mem = NULL;
  if (posix_memalign(&mem, 64, sizeof(var_cell)) != 0) return NULL;
  var_cell* c = (var_cell*)mem;
  memset(c, 0, sizeof *c);
  atomic_init(&c->data_version, 0);
  atomic_init(&c->writers_in, 0);
  atomic_init(&c->readers_in, 0);
  atomic_init(&c->refs, 1);
  atomic_init(&c->deferred_in, 0);
  atomic_init(&c->waiters_in, 0);
  c->code_known = 1;
  ordo_status st = ordo_var_new(g_engine, &c->handle);
  if (!stress_expect_status(st, ORDO_OK, "ordo_var_new")) {
    free(c);
    return NULL;
  }
  atomic_fetch_add(&g_cells_alive, 1);
  return c;
}

void cell_retain(var_cell* c) {
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void cell_release(var_cell* c) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  atomic_fetch_sub(&g_cells_alive, 1);
  free(c);
}

long cells_alive(void) {
  return atomic_load(&g_cells_alive);
}

int model_init(int nslots) {
  g_model.slot = (var_cell**)calloc((size_t)nslots, sizeof(var_cell*));
  if (!g_model.slot) return -1;
  g_model.nslots = nslots;
  for (int s = 0; s < nslots; s++) {
    g_model.slot[s] = cell_new();
    if (!g_model.slot[s]) return -1;
    g_model.slot[s]->slot = s;
  }
  return 0;
}

void model_release_slots(void) {
  for (int s = 0; s < g_model.nslots; s++) {
    if (g_model.slot[s]) cell_release(g_model.slot[s]);
    g_model.slot[s] = NULL;
  }
  free(g_model.slot);
  g_model.slot = NULL;
}

/* ---- ops ---- */

static void add_var(op_rec* op, var_cell* c, int mut) {
  for (int j = 0; j < op->n; j++) {
    if (op->cell[j] == c) {
      op->is_mut[j] |= (uint8_t)mut; /* both lists: mutable wins (SPEC §2.5) */
      return;
    }
  }
  op->cell[op->n] = c;
  op->is_mut[op->n] = (uint8_t)mut;
  op->n++;
}

/*
 * Whether a var the op touches carries an error, and the error the op would pass on. The
 * engine passes on the record of one of the poisoned vars (which one is its business), so the
 * code is only known when every poisoned var agrees.
 */
static int inherited_error(const op_rec* op, int32_t* code, int* known) {
  int poisoned = 0;
  *code = 0;
  *known = 1;
  for (int i = 0; i < op->n; i++) {
    const var_cell* c = op->cell[i];
    if (!c->poisoned) continue;
    if (!poisoned) {
      *code = c->code;
      *known = c->code_known;
    } else if (!c->code_known || c->code != *code) {
      *known = 0;
    }
    poisoned = 1;
  }
  return poisoned;
}

void model_fill_op(op_rec* op, const int* widx, size_t nw, const int* ridx, size_t nr,
                   ordo_var* writes, ordo_var* reads) {
  op->n = 0;
  op->seq = g_model.next_seq;
  for (size_t i = 0; i < nw; i++) {
    var_cell* c = g_model.slot[widx[i]];
    add_var(op, c, 1);
    writes[i] = c->handle;
  }
  for (size_t i = 0; i < nr; i++) {
    var_cell* c = g_model.slot[ridx[i]];
    add_var(op, c, 0);
    reads[i] = c->handle;
  }
  for (int i = 0; i < op->n; i++) {
    op->expect[i] = op->cell[i]->model_version;
    cell_retain(op->cell[i]);
  }
  int32_t code;
  int known;
  op->predicted_run = (uint8_t)!inherited_error(op, &code, &known);
}

static void poison(var_cell* c, int32_t code, int known) {
  c->poisoned = 1;
  c->code = code;
  c->code_known = known;
}

void model_commit_op(const op_rec* op) {
  int32_t inh_code;
  int inh_known;
  inherited_error(op, &inh_code, &inh_known);
  g_model.next_seq++;
  if (op->predicted_run) {
    g_model.pred_runs++;
    if (op->code) {
      g_model.pred_fails++;
      g_model.failures_since_wait_all++;
    }
    for (int i = 0; i < op->n; i++) {
      if (!op->is_mut[i]) continue;
      op->cell[i]->events++;
      op->cell[i]->model_version++;
      if (op->code) poison(op->cell[i], op->code, 1);
    }
  } else {
    /* skipped: counted as failed, passes the error on to what it mutates (SPEC §3) */
    g_model.pred_skips++;
    g_model.failures_since_wait_all++;
    for (int i = 0; i < op->n; i++) {
      if (!op->is_mut[i]) continue;
      op->cell[i]->events++;
      poison(op->cell[i], inh_code, inh_known);
    }
  }
}

void model_abandon_op(op_rec* op) {
  for (int i = 0; i < op->n; i++) cell_release(op->cell[i]);
  op->n = 0;
}

/* ---- clears, deletes, waits ---- */

void model_clear(int slot) {
  var_cell* c = g_model.slot[slot];
  ordo_status st = ordo_var_clear_error(g_engine, c->handle);
  if (!stress_expect_status(st, ORDO_OK, "ordo_var_clear_error")) return;
  c->poisoned = 0;
  c->code = 0;
  c->code_known = 1;
  c->events++;
  g_model.clears++;
}

/* A push naming a handle deleted a moment ago must be refused (SPEC §5). */
static void expect_dead_at_once(ordo_var dead) {
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = stress_probe_free;
  ordo_status st = ordo_opr_push(g_engine, stress_probe_fn, NULL, NULL, 0, &dead, 1, &opts);
  stress_expect_status(st, ORDO_ERR_INVALID_HANDLE, "push on a var just deleted");
}

void model_replace(int slot) {
  var_cell* old = g_model.slot[slot];
  ordo_status st = ordo_var_delete(g_engine, old->handle);
  if (!stress_expect_status(st, ORDO_OK, "ordo_var_delete")) return;
  expect_dead_at_once(old->handle);
  old->deleted = 1;
  var_cell* fresh = cell_new();
  if (!fresh) {
    fprintf(stderr, "ordo_stress: cannot create a var to replace a deleted one\n");
    exit(1);
  }
  fresh->slot = slot;
  if (fresh->handle == old->handle) {
    stress_api_error("ordo_var_new returned the handle 0x%llx just deleted",
                     (unsigned long long)old->handle);
  }
  g_model.dead[g_model.dead_total % DEAD_RING] = old->handle;
  g_model.dead_total++;
  g_model.slot[slot] = fresh;
  cell_release(old); /* the slot's reference; pending ops on it keep theirs */
  g_model.deletes++;
}

/* A var with nothing pending must show exactly the model's state. */
static void check_settled_cell(const var_cell* c, const char* where) {
  int32_t code = -1;
  char buf[256] = {0};
  ordo_status st = ordo_var_get_error(g_engine, c->handle, &code, buf, sizeof buf);
  if (!stress_expect_status(st, ORDO_OK, "ordo_var_get_error")) return;
  if ((code != 0) != (c->poisoned != 0)) {
    stress_mismatch("%s: var 0x%llx has error code %d, model says %s", where,
                    (unsigned long long)c->handle, (int)code, c->poisoned ? "poisoned" : "clean");
  } else if (c->poisoned && c->code_known && code != c->code) {
    stress_mismatch("%s: var 0x%llx has error code %d, model says %d (%s)", where,
                    (unsigned long long)c->handle, (int)code, (int)c->code, buf);
  } else if (c->poisoned) {
    char want[32];
    snprintf(want, sizeof want, "(code %d)", (int)code);
    if (!strstr(buf, want)) {
      stress_mismatch("%s: error message \"%s\" lacks \"%s\"", where, buf, want);
    }
  }
  uint32_t ver = atomic_load(&c->data_version);
  if (ver != c->model_version) {
    stress_mismatch("%s: var 0x%llx at version %u, model says %u", where,
                    (unsigned long long)c->handle, ver, c->model_version);
  }
  int w = atomic_load(&c->writers_in), r = atomic_load(&c->readers_in);
  if (w != 0 || r != 0) {
    stress_mismatch("%s: var 0x%llx still has %d writers and %d readers inside", where,
                    (unsigned long long)c->handle, w, r);
  }
  stress_count_checks(4);
}

static void wait_and_check(var_cell* c, const char* where) {
  atomic_fetch_add(&c->waiters_in, 1); /* concurrent waiters see they share the var with this */
  ordo_status st = ordo_wait_for_var(g_engine, c->handle);
  atomic_fetch_sub(&c->waiters_in, 1);
  ordo_status want = c->poisoned ? ORDO_ERR_OP_FAILED : ORDO_OK;
  stress_count_checks(1);
  if (st != want) {
    stress_mismatch("%s: ordo_wait_for_var returned %s, model says %s (%s)", where,
                    ordo_status_string(st), ordo_status_string(want), ordo_last_error_message());
  }
  check_settled_cell(c, where);
}

void model_ordered_wait(int slot) {
  /* Under the push lock nothing can be pushed after the wait, so once it returns every op on
     the var has finished and nothing new has started. */
  wait_and_check(g_model.slot[slot], "ordered wait");
  g_model.var_waits++;
}

int model_check_quiescent(void) {
  for (int s = 0; s < g_model.nslots; s++) wait_and_check(g_model.slot[s], "round end");
  return g_model.nslots;
}

/* Long enough that only a lost wake-up makes it time out on an idle var, even on a loaded
 * machine (after the first such time-out the others are skipped, so a bug costs one period). */
static const uint64_t IDLE_WAIT_NS = 2ull * 1000 * 1000 * 1000;

/* Once the engine is idle (every abandoned timed wait's ops long finished), a poll and a timed
 * wait on each var must see its settled state at once, never time out. */
int model_check_idle_polls(void) {
  static int timed_broken;
  for (int s = 0; s < g_model.nslots; s++) {
    const var_cell* c = g_model.slot[s];
    ordo_status want = c->poisoned ? ORDO_ERR_OP_FAILED : ORDO_OK;
    ordo_status poll = ordo_wait_for_var_timeout(g_engine, c->handle, 0);
    ordo_status timed =
        timed_broken ? want : ordo_wait_for_var_timeout(g_engine, c->handle, IDLE_WAIT_NS);
    stress_count_checks(timed_broken ? 1 : 2);
    if (timed == ORDO_ERR_TIMEOUT) timed_broken = 1;
    if (poll != want || timed != want) {
      stress_mismatch(
          "round end: var 0x%llx is idle, yet a poll returned %s and a timed wait "
          "%s; model says %s",
          (unsigned long long)c->handle, ordo_status_string(poll), ordo_status_string(timed),
          ordo_status_string(want));
    }
  }
  return g_model.nslots;
}

ordo_var model_dead_handle(uint64_t r) {
  if (g_model.dead_total == 0) return 0;
  unsigned long n = g_model.dead_total < DEAD_RING ? g_model.dead_total : DEAD_RING;
  return g_model.dead[r % n];
}

int model_clean_slot(uint64_t* rng) {
  for (int tries = 0; tries < 8; tries++) {
    int s = (int)rng_below(rng, (uint32_t)g_model.nslots);
    if (!g_model.slot[s]->poisoned) return s;
  }
  return -1;
}
