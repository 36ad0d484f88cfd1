/* Built with -std=c99 -pedantic -Werror: the public header must stay plain C99. Built twice: as
 * is, and with ORDO_API defined empty and ORDO_NO_INLINE_HELPERS, the way FFI generators
 * (bindgen, cffi, Clang.jl) read it (declarations only). */
#include <ordo/ordo.h>
#include <stdio.h>

int main(void) {
  ordo_push_opts opts;
#ifdef ORDO_NO_INLINE_HELPERS
  ordo_push_opts_init_sized(&opts, ordo_struct_size(ORDO_STRUCT_PUSH_OPTS));
#else
  ordo_push_opts_init(&opts);
#endif
  if (ordo_version() != ORDO_VERSION_NUMBER || opts.struct_size != sizeof opts ||
      ordo_struct_size(ORDO_STRUCT_PUSH_OPTS) != sizeof opts) {
    printf("header-c99: 0 passed, 1 failed\n");
    return 1;
  }
  printf("header-c99: 1 passed, 0 failed\n");
  return 0;
}
