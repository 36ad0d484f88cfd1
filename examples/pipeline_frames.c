/*
 * pipeline_frames: token deferral as a video decoder needs it (`make pipeline-demo`).
 *
 * The frames arrive in display order, I B B P B B P ... A B-frame is predicted from the
 * reference frames on both sides of it, so it cannot be decoded before the *next* reference
 * frame (a P, later in display order). Pipe 0 ("decode", serial) therefore defers each B-frame
 * to its future reference the first time it sees it; ordo invokes it again once that reference
 * has been decoded. The accepted order is the decode order: I0 P3 B1 B2 P6 B4 B5 ...
 * Pipe 1 ("filter", parallel) works on several frames at once, each on its line's buffer.
 * Pipe 2 ("output", serial) sees the frames in decode order and puts them back into display
 * order with a small reorder buffer, as a player does.
 *
 * Per-frame state that must survive a deferral lives in frames[], keyed by token id; what a
 * line works on lives in lines[], written only when pipe 0 accepts a frame (pipeline.h and
 * docs/ARCHITECTURE.md say why).
 *
 *   pipeline_frames [FRAMES] [LINES] [THREADS]      defaults: 16 frames, 4 lines, 2 threads
 */
#include <ordo/ordo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_FRAMES = 3000 };

typedef struct frame {
  char type;      /* 'I', 'P' or 'B' */
  int value;      /* the "picture": made from its references */
  int filtered;   /* pipe 1's result */
  int out;        /* pipe 2 has received it (only pipe 2, which is serial, touches this) */
  int decoded;    /* pipe 0 accepted it */
  uint32_t line;  /* where it ran */
  uint32_t nd;    /* how many times pipe 0 deferred it */
} frame;

typedef struct line_buffer {
  uint64_t frame;
  char pad[56]; /* one cache line per line: parallel lines write side by side */
} line_buffer;

typedef struct decoder {
  uint64_t num_frames;
  frame frames[MAX_FRAMES];
  line_buffer lines[64];
  uint64_t decode_order[MAX_FRAMES];
  size_t decoded;
  uint64_t display_order[MAX_FRAMES];
  size_t displayed;
} decoder;

static char type_of(uint64_t i) {
  return i == 0 ? 'I' : i % 3 == 0 ? 'P' : 'B';
}

/* The reference frame after B-frame i (the next multiple of 3). */
static uint64_t next_reference(uint64_t i) {
  return (i / 3 + 1) * 3;
}

/* Pipe 0: decode. Runs one frame at a time, in the order the frames become decodable. */
static int32_t decode(ordo_pipeflow* pf, void* user_data) {
  decoder* d = user_data;
  uint64_t i = ordo_pipeflow_token(pf);
  if (i == d->num_frames) return ordo_pipeflow_stop(pf);
  frame* f = &d->frames[i];
  f->type = type_of(i);
  if (f->type == 'B' && ordo_pipeflow_num_deferrals(pf) == 0) {
    /* Wait until the reference after it is decoded; this line takes the next frame meanwhile. */
    return ordo_pipeflow_defer(pf, next_reference(i));
  }
  if (f->type == 'I') {
    f->value = 100;
  } else if (f->type == 'P') {
    f->value = d->frames[i - 3].value + 30; /* predicted from the previous reference */
  } else {                                  /* both references are decoded by now */
    uint64_t before = i / 3 * 3, after = next_reference(i);
    f->value = d->frames[before].value +
               (d->frames[after].value - d->frames[before].value) * (int)(i - before) / 3;
  }
  f->decoded = 1;
  f->nd = ordo_pipeflow_num_deferrals(pf);
  f->line = ordo_pipeflow_line(pf);
  d->lines[f->line].frame = i; /* the line's buffer: written on acceptance only */
  d->decode_order[d->decoded++] = i;
  return 0;
}

/* Pipe 1: a filter on the line's frame; several lines at once. */
static int32_t filter(ordo_pipeflow* pf, void* user_data) {
  decoder* d = user_data;
  frame* f = &d->frames[d->lines[ordo_pipeflow_line(pf)].frame];
  int v = f->value;
  for (int k = 0; k < 1000; k++) v = (v * 31 + k) % 1000003; /* some work */
  f->filtered = v;
  return 0;
}

/* Pipe 2: output. Frames come in decode order; those whose turn in display order has come
 * leave the reorder buffer. */
static int32_t output(ordo_pipeflow* pf, void* user_data) {
  decoder* d = user_data;
  d->frames[d->lines[ordo_pipeflow_line(pf)].frame].out = 1;
  while (d->displayed < d->num_frames && d->frames[d->displayed].out) {
    d->display_order[d->displayed] = d->displayed;
    d->displayed++;
  }
  return 0;
}

static void print_order(const char* title, const decoder* d, const uint64_t* order, size_t n) {
  printf("%-14s", title);
  for (size_t k = 0; k < n; k++) {
    if (k == 24) {
      printf(" ... (%zu frames)", n);
      break;
    }
    printf(" %c%llu", d->frames[order[k]].type, (unsigned long long)order[k]);
  }
  printf("\n");
}

int main(int argc, char** argv) {
  uint64_t frames = argc > 1 ? strtoull(argv[1], NULL, 10) : 16;
  uint32_t lines = argc > 2 ? (uint32_t)atoi(argv[2]) : 4;
  int threads = argc > 3 ? atoi(argv[3]) : 2;
  if (frames < 1 || frames > MAX_FRAMES - 3 || lines < 1 || lines > 64 || threads < 1) {
    fprintf(stderr, "usage: %s [FRAMES 1..%d] [LINES 1..64] [THREADS]\n", argv[0],
            MAX_FRAMES - 3);
    return 2;
  }
  /* A stream ends on a reference frame, so every B-frame has one after it. */
  while (type_of(frames - 1) == 'B') frames++;

  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.cpu_threads = threads;
  ordo_engine* e = NULL;
  ordo_status s = ordo_engine_create(&cfg, &e);
  if (s != ORDO_OK) {
    fprintf(stderr, "ordo_engine_create: %s\n", ordo_last_error_message());
    return 1;
  }
  decoder* d = calloc(1, sizeof *d);
  d->num_frames = frames;
  ordo_pipe pipes[3] = {
      {ORDO_PIPE_SERIAL, decode, d},
      {ORDO_PIPE_PARALLEL, filter, d},
      {ORDO_PIPE_SERIAL, output, d},
  };
  ordo_pipeline* p = NULL;
  s = ordo_pipeline_create(e, lines, pipes, 3, &p);
  if (s == ORDO_OK) s = ordo_pipeline_run(p);
  if (s != ORDO_OK) {
    fprintf(stderr, "pipeline: %s\n", ordo_last_error_message());
    return 1;
  }
  printf("%llu frames, %u lines, %d worker threads\n", (unsigned long long)frames, lines, threads);
  print_order("decode order", d, d->decode_order, d->decoded);
  print_order("display order", d, d->display_order, d->displayed);
  printf("B-frames deferred once each: %s; lines of the first frames decoded:",
         d->frames[1].nd == 1 ? "yes" : "no");
  for (size_t k = 0; k < d->decoded && k < 8; k++) {
    printf(" %u", d->frames[d->decode_order[k]].line);
  }
  printf("\n");
  int ok = d->decoded == frames && d->displayed == frames;
  ordo_pipeline_destroy(p);
  ordo_engine_destroy(e);
  free(d);
  return ok ? 0 : 1;
}
