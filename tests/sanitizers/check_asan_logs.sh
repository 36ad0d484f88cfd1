#!/usr/bin/env bash
# Reads the ASan/UBSan/LSan report files of one Criterion run (log_path=LOG_DIR/asan, one file
# per process that reported) and fails on any report, with one exception that it checks
# precisely rather than suppresses:
#
#   Criterion's runner process (not a test: tests run in boxfort worker processes) leaks the
#   48-byte timeout requests of boxfort's watchdog (bxfi_push_timeout's calloc in
#   timeout-posix.c, statically linked into libcriterion.so.3 without symbols, so the frame
#   reads "libcriterion.so.3+0x1a332"). It happens only with --jobs > 1 and suites that set
#   .timeout, a different number each run. An LSan suppression for it would have to name
#   libcriterion.so, which every test's stack also contains (criterion_internal_test_main), so
#   it would hide ordo's leaks as well.
#
# So: a report from the runner (RUNNER_PID) is accepted only when it is a leak report whose every
# leaked object is 48 bytes, allocated by calloc/malloc called directly from libcriterion, with
# no ordo or test frame. Any report from any other process (a test), or anything else, fails.
#   bash check_asan_logs.sh LOG_DIR RUNNER_PID
set -euo pipefail
log_dir=${1:?usage: check_asan_logs.sh LOG_DIR RUNNER_PID}
runner_pid=${2:?usage: check_asan_logs.sh LOG_DIR RUNNER_PID}

# Succeeds when the file is only the known leak of Criterion's runner.
is_criterion_runner_leak() {
  awk '
    /ERROR: LeakSanitizer: detected memory leaks/ { lsan = 1; next }
    /ERROR:|runtime error:|WARNING:/ { bad = 1 }
    /^Indirect leak of/ { bad = 1 }
    /^Direct leak of/ {
      # "Direct leak of 144 byte(s) in 3 object(s) allocated from:"
      if ($7 * 48 != $4) bad = 1
      blocks++; in_block = 1; saw_caller = 0; next
    }
    in_block && /^ *#[0-9]+ / {
      n = substr($1, 2) + 0
      if (n == 0 && $0 !~ /__interceptor_(calloc|malloc)/) bad = 1
      if (n == 1) { if ($0 ~ /libcriterion\.so/) saw_caller = 1; else bad = 1 }
      if ($0 ~ /libordo|\/tests\//) bad = 1
      next
    }
    in_block && /^ *$/ { if (!saw_caller) bad = 1; in_block = 0 }
    END { exit (lsan && blocks > 0 && !bad && !in_block) ? 0 : 1 }
  ' "$1"
}

status=0
shopt -s nullglob
for f in "$log_dir"/*; do
  pid=${f##*.}
  if [ "$pid" = "$runner_pid" ] && is_criterion_runner_leak "$f"; then
    echo "asan: accepted the known leak of Criterion's runner (boxfort timeout requests):"
    grep -E '^(Direct leak|SUMMARY)' "$f" | sed 's/^/  /'
    continue
  fi
  echo "asan: sanitizer report from process $pid ($([ "$pid" = "$runner_pid" ] && echo "Criterion's runner" || echo 'a test')):" >&2
  cat "$f" >&2
  status=1
done
exit $status
