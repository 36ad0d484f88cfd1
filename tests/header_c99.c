/* Built with -std=c99 -pedantic -Werror: the public headers must stay plain C99. pipeline.h
 * comes first: it must stand on its own (it includes ordo.h). Built twice: as is, and with
 * ORDO_API defined empty and ORDO_NO_INLINE_HELPERS, the way FFI generators (bindgen, cffi,
 * Clang.jl) read the headers (declarations only). */
#include <ordo/ordo.h>
#include <ordo/pipeline.h>
#include <stdio.h>

static int32_t source(ordo_pipeflow* pf, void* user_data) {
  (void)user_data;
  return ordo_pipeflow_token(pf) == 3 ? ordo_pipeflow_stop(pf) : 0;
}

int main(void) {
  ordo_push_opts opts;
#ifdef ORDO_NO_INLINE_HELPERS
  ordo_push_opts_init_sized(&opts, ordo_struct_size(ORDO_STRUCT_PUSH_OPTS));
#else
  ordo_push_opts_init(&opts);
#endif
  ordo_pipe pipes[1];
  pipes[0].type = ORDO_PIPE_SERIAL;
  pipes[0].fn = source;
  pipes[0].user_data = NULL;
  if (ordo_version() != ORDO_VERSION_NUMBER || opts.struct_size != sizeof opts ||
      ordo_struct_size(ORDO_STRUCT_PUSH_OPTS) != sizeof opts || ORDO_ERR_TOKENS_DROPPED != 12 ||
      pipes[0].type == ORDO_PIPE_PARALLEL) {
    printf("header-c99: 0 passed, 1 failed\n");
    return 1;
  }
  printf("header-c99: 1 passed, 0 failed\n");
  return 0;
}
