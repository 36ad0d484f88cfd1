#!/usr/bin/env bash
# Builds the Criterion shim with a small test file (shim_selftest.c) and checks that it passes,
# fails, skips and times out as Criterion would: the TSan and valgrind runs trust its verdict.
#   bash tests/sanitizers/shim_selftest.sh OUT_DIR
set -euo pipefail
out=${1:?usage: shim_selftest.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
bin="$out/shim_selftest"

# The same warnings as the project's C code: the shim header must compile cleanly there too.
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g -pthread \
  -I "$here/criterion_shim" "$here/shim_selftest.c" "$here/criterion_shim/shim_runner.c" \
  -o "$bin"

failures=0
# expect WANT_RC PATTERN|"" ARGS...: runs the shim with ARGS; checks the status and, when
# PATTERN is set, that the output has a line matching it.
expect() {
  local want=$1 pattern=$2
  shift 2
  local got=0
  "$bin" "$@" >"$out/selftest.log" 2>&1 || got=$?
  if [ "$got" != "$want" ]; then
    echo "shim self-test: '$*' exited $got, want $want" >&2
    sed 's/^/  | /' "$out/selftest.log" >&2
    failures=$((failures + 1))
  elif [ -n "$pattern" ] && ! grep -Eq "$pattern" "$out/selftest.log"; then
    echo "shim self-test: '$*' printed no line matching /$pattern/" >&2
    sed 's/^/  | /' "$out/selftest.log" >&2
    failures=$((failures + 1))
  fi
}
# refute PATTERN: the last run's output must not match PATTERN.
refute() {
  if grep -Eq "$1" "$out/selftest.log"; then
    echo "shim self-test: unexpected /$1/ in the last run's output" >&2
    failures=$((failures + 1))
  fi
}

expect 0 'Tested: 7 \| Passing: 6 \| Failing: 0 \| Skipped: 1' --filter 'selftest/*'
expect 0 '^\[SKIP\] selftest/skip_ends_the_test .*skipped on purpose \(42\)' --filter 'selftest/skip*'
expect 1 'right: 2' --filter failing/fatal_assertion
refute 'UNREACHED'
expect 1 'Failing: 1' --filter failing/expectation_lets_the_test_go_on
expect 1 'WENT ON' --filter failing/expectation_lets_the_test_go_on
expect 124 'timeout' --filter failing/timeout
expect 1 'from another thread' --filter failing/assertion_on_another_thread
expect 0 'Tested: 4 .*Not selected: 7' --filter 'selftest/*' --exclude 'selftest/skip*' --exclude '*_b_*'
expect 2 'no test matched' --filter 'no/such_test'
expect 2 'usage' --no-such-option

if [ "$failures" -ne 0 ]; then
  echo "shim self-test: $failures check(s) failed" >&2
  exit 1
fi
echo "shim self-test: ok"
