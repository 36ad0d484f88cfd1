/* Loads libordo.so on a machine without a GPU (tests/check_cuda_static.sh runs it with the CUDA
 * toolkit's libraries out of the loader's path): the device count must be 0 and a GPU push
 * ORDO_ERR_NO_DEVICE with a message saying why. Prints "devices=N" and the message. */
#include <stdio.h>

#include "ordo/ordo.h"

static int32_t op(ordo_exec* exec, void* ud) {
  (void)exec;
  (void)ud;
  return 0;
}

int main(void) {
  int32_t n = -1;
  if (ordo_device_count(&n) != ORDO_OK) return 2;
  ordo_engine* e = NULL;
  if (ordo_engine_create(NULL, &e) != ORDO_OK) return 3;
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.device_type = ORDO_DEVICE_GPU;
  ordo_status s = ordo_opr_push(e, op, NULL, NULL, 0, NULL, 0, &o);
  printf("devices=%d\npush=%s\nmessage=%s\n", (int)n, ordo_status_string(s),
         ordo_last_error_message());
  ordo_engine_destroy(e);
  if (n == 0 && s != ORDO_ERR_NO_DEVICE) return 4;
  return 0;
}
