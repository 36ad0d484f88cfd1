/* A small, fast PRNG (xorshift64*): each thread owns its state, seeded from --seed. */
#ifndef ORDO_TESTS_STRESS_STRESS_RNG_H
#define ORDO_TESTS_STRESS_STRESS_RNG_H

#include <stdint.h>

static inline uint64_t rng_next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 2685821657736338717ULL;
}

/* Uniform in [0, n). */
static inline uint32_t rng_below(uint64_t* s, uint32_t n) {
  return (uint32_t)((rng_next(s) >> 33) % n);
}

/* A non-zero state derived from a seed and a stream number. */
static inline uint64_t rng_seed(uint64_t seed, uint64_t stream) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + (stream + 1) * 0xD1B54A32D192ED03ULL;
  x ^= x >> 31;
  return x ? x : 0x2545F4914F6CDD1DULL;
}

#endif /* ORDO_TESTS_STRESS_STRESS_RNG_H */
