/*
 * A Criterion-compatible shim: just the part of Criterion 2.4's API that ordo's suite uses, so
 * that the same tests/test_*.c build into one plain, in-process runner (shim_runner.c).
 *
 * Why: Criterion cannot start under ThreadSanitizer (its boxfort arena is mapped at a random
 * address in 0x2000'0000'0000..0x6000'0000'0000, which TSan reserves for its shadow: "Could not
 * initialize inheritable arena"), and under valgrind it forks and execs a worker per test. This
 * shim runs every test in one process, one after another, so TSan and memcheck see all of it.
 *
 * Supported, because the suite uses exactly these (tests/sanitizers/README.md lists the check):
 * Test(suite, name[, .timeout = s]), TestSuite(suite[, .timeout = s]), cr_assert,
 * cr_assert_{eq,neq,lt,gt,geq,null,not_null,str_eq,fail}, cr_expect_{eq,gt}, cr_skip_test. Any
 * other Criterion feature fails to compile here on purpose, so the shim cannot silently drift.
 *
 * Semantics kept from Criterion: a cr_assert* failure ends the test (here: the whole run, at
 * once, because a test stopped half-way may leave worker threads using its stack); a cr_expect*
 * failure marks the test failed and lets it go on; cr_skip_test ends the test as skipped. Each
 * operand is evaluated once.
 */
#ifndef ORDO_CRITERION_SHIM_H
#define ORDO_CRITERION_SHIM_H

/* Criterion's own header pulls these in; the tests rely on some of them transitively. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-test and per-suite options: only .timeout (seconds; 0 = none) is used by the suite. The
 * leading member lets `{0, __VA_ARGS__}` compile with and without options. */
struct shim_opts {
  int shim_unused_;
  double timeout;
};

struct shim_test {
  const char* suite;
  const char* name;
  const char* file;
  void (*fn)(void);
  struct shim_opts opts;
};

struct shim_suite {
  const char* name;
  struct shim_opts opts;
};

void shim_register_test(struct shim_test* t);
void shim_register_suite(struct shim_suite* s);

/* Reports a failed check. fatal: print and end the run; else mark the current test failed. */
void shim_check_failed(bool fatal, const char* file, int line, const char* what, const char* lhs,
                       const char* rhs, const char* fmt, ...) __attribute__((format(printf, 7, 8)));
/* Ends the current test as skipped (longjmp back to the runner). */
void shim_skip(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define Test(suite, name, ...)                                               \
  static void suite##_##name##_impl(void);                                   \
  static struct shim_test suite##_##name##_shim = {                          \
      #suite, #name, __FILE__, suite##_##name##_impl, {0, __VA_ARGS__}};     \
  __attribute__((constructor)) static void suite##_##name##_register(void) { \
    shim_register_test(&suite##_##name##_shim);                              \
  }                                                                          \
  static void suite##_##name##_impl(void)

#define TestSuite(suite, ...)                                                  \
  static struct shim_suite suite##_shim_suite = {#suite, {0, __VA_ARGS__}};    \
  __attribute__((constructor)) static void suite##_shim_suite_register(void) { \
    shim_register_suite(&suite##_shim_suite);                                  \
  }                                                                            \
  struct shim_suite_declared_##suite /* swallows the caller's ';' */

/* Formats one compared value into buf (64 bytes) by its type, for failure messages. */
void shim_fmt_ll(long long v, char* buf);
void shim_fmt_ull(unsigned long long v, char* buf);
void shim_fmt_double(double v, char* buf);
void shim_fmt_ptr(const volatile void* v, char* buf);
/* clang-format off */
#define SHIM_FMT(v, buf)                                                                           \
  _Generic((v),                                                                                    \
           _Bool: shim_fmt_ull, char: shim_fmt_ll, signed char: shim_fmt_ll,                       \
           unsigned char: shim_fmt_ull, short: shim_fmt_ll, unsigned short: shim_fmt_ull,          \
           int: shim_fmt_ll, unsigned: shim_fmt_ull, long: shim_fmt_ll,                            \
           unsigned long: shim_fmt_ull, long long: shim_fmt_ll,                                    \
           unsigned long long: shim_fmt_ull, float: shim_fmt_double, double: shim_fmt_double,      \
           default: shim_fmt_ptr)((v), (buf))
/* clang-format on */

/* Each operand is evaluated once into a copy of its own type (__auto_type). Comparing the copies
 * can raise -Wsign-compare where comparing a literal would not (an int 0 is then a variable): the
 * result is the same, and the real Criterion build keeps those warnings checked. */
#define SHIM_CMP(fatal, a, op, b, ...)                                                      \
  do {                                                                                      \
    _Pragma("GCC diagnostic push")                                                          \
        _Pragma("GCC diagnostic ignored \"-Wsign-compare\"") __auto_type shim_a_ = (a);     \
    __auto_type shim_b_ = (b);                                                              \
    if (!(shim_a_ op shim_b_)) {                                                            \
      char shim_sa_[64], shim_sb_[64];                                                      \
      SHIM_FMT(shim_a_, shim_sa_);                                                          \
      SHIM_FMT(shim_b_, shim_sb_);                                                          \
      shim_check_failed((fatal), __FILE__, __LINE__, #a " " #op " " #b, shim_sa_, shim_sb_, \
                        " " __VA_ARGS__);                                                   \
    }                                                                                       \
    _Pragma("GCC diagnostic pop")                                                           \
  } while (0)

#define SHIM_TRUE(fatal, cond, text, ...)                                                \
  do {                                                                                   \
    if (!(cond))                                                                         \
      shim_check_failed((fatal), __FILE__, __LINE__, text, NULL, NULL, " " __VA_ARGS__); \
  } while (0)

#define cr_assert(cond, ...) SHIM_TRUE(true, cond, #cond, __VA_ARGS__)
#define cr_assert_eq(a, b, ...) SHIM_CMP(true, a, ==, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) SHIM_CMP(true, a, !=, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) SHIM_CMP(true, a, <, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) SHIM_CMP(true, a, >, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) SHIM_CMP(true, a, >=, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) SHIM_CMP(true, a, <=, b, __VA_ARGS__)
#define cr_assert_null(p, ...) SHIM_TRUE(true, (p) == NULL, #p " is NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) SHIM_TRUE(true, (p) != NULL, #p " is not NULL", __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...)                                                                \
  do {                                                                                             \
    const char* shim_sa_ = (a);                                                                    \
    const char* shim_sb_ = (b);                                                                    \
    if (strcmp(shim_sa_, shim_sb_) != 0)                                                           \
      shim_check_failed(true, __FILE__, __LINE__, #a " equals the string " #b, shim_sa_, shim_sb_, \
                        " " __VA_ARGS__);                                                          \
  } while (0)
#define cr_assert_fail(...) \
  shim_check_failed(true, __FILE__, __LINE__, "cr_assert_fail", NULL, NULL, " " __VA_ARGS__)
#define cr_expect_eq(a, b, ...) SHIM_CMP(false, a, ==, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) SHIM_CMP(false, a, >, b, __VA_ARGS__)
#define cr_expect(cond, ...) SHIM_TRUE(false, cond, #cond, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) SHIM_CMP(false, a, !=, b, __VA_ARGS__)
#define cr_expect_null(p, ...) SHIM_TRUE(false, (p) == NULL, #p " is NULL", __VA_ARGS__)
#define cr_skip_test(...) shim_skip(" " __VA_ARGS__)

#endif /* ORDO_CRITERION_SHIM_H */
