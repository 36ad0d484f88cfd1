/* Built with -std=c99 -pedantic -Werror: the public header must stay plain C99. */
#include <ordo/ordo.h>
#include <stdio.h>

int main(void) {
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  if (ordo_version() != ORDO_VERSION_NUMBER || opts.struct_size != sizeof opts) {
    printf("header-c99: 0 passed, 1 failed\n");
    return 1;
  }
  printf("header-c99: 1 passed, 0 failed\n");
  return 0;
}
