#!/usr/bin/env bash
# Tests tests/with_timeout.sh, the wrapper every CI step runs under: it passes a command's exit
# status through, and a step that hangs (two processes of BUILD/tests/ordo_hang_helper, stuck in
# ordo_wait_for_var, under a shell) ends with exit 124, the step's name, each process's threads'
# stacks (gdb), and no process of the step left. About 5 s (gdb may take half a minute on a
# loaded machine).
#
#   bash tests/test_with_timeout.sh BUILD
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
wrap="$here/with_timeout.sh"
helper="$build/tests/ordo_hang_helper"
[ -x "$helper" ] || { echo "test_with_timeout: $helper not built" >&2; exit 1; }
helper=$(cd "$(dirname "$helper")" && pwd)/$(basename "$helper")

fail() {
  echo "test_with_timeout: FAIL: $*" >&2
  exit 1
}

rc=0
bash "$wrap" passes 30 true || rc=$?
[ $rc -eq 0 ] || fail "a command that succeeds gave exit $rc"
rc=0
bash "$wrap" fails 30 bash -c 'exit 3' || rc=$?
[ $rc -eq 3 ] || fail "a command that exits 3 gave exit $rc"

out=$(mktemp)
pids=$(mktemp)
trap 'rm -f "$out" "$pids"' EXIT
t0=$(date +%s)
rc=0
# A shell with two hung children: the dump must reach a step's descendants, not only its root.
bash "$wrap" "deliberate hang" 2 bash -c '"$0" "$1" & "$0" "$1"; wait' "$helper" "$pids" \
  >"$out" 2>&1 || rc=$?
took=$(($(date +%s) - t0))
show() {
  sed 's/^/  | /' "$out" | head -80 >&2
  fail "$*"
}
[ $rc -eq 124 ] || show "a hung step gave exit $rc, expected 124"
# gdb may crawl on a loaded machine: the point is minutes, not the step's whole limit
[ $took -lt 200 ] || show "a hung step with a 2 s limit took $took s to end"
grep -q "'deliberate hang' did not finish in 2 s" "$out" ||
  show "the step's name is not in the report"
dumped=$(grep -c -E "^---- stacks of process [0-9]+: [^ ]*ordo_hang_helper " "$out" || true)
[ "$dumped" -eq 2 ] || show "$dumped hang_helper processes dumped, expected 2"
frames=$(grep -c -E '^#[0-9]+ .*ordo_wait_for_var' "$out" || true)
# each helper: main and its second thread both wait
[ "$frames" -ge 4 ] || show "$frames stack frames in ordo_wait_for_var, expected at least 4"
grep -q "FAILED: 'deliberate hang' timed out" "$out" || show "no final FAILED line"
survivors=()
while read -r pid; do
  # a zombie is dead (its parent, killed too, left it to init, which may reap it later)
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
  if [ -n "$state" ] && [ "$state" != Z ]; then survivors+=("$pid"); fi
done <"$pids"
if [ ${#survivors[@]} -gt 0 ]; then
  kill -KILL "${survivors[@]}" 2>/dev/null || true
  show "hang_helper processes ${survivors[*]} survived the timeout"
fi
[ "$(wc -l <"$pids")" -eq 2 ] || show "$(wc -l <"$pids") hang_helper processes started, expected 2"
echo "test_with_timeout: ok (passes statuses through; a hang is named, dumped ($dumped processes," \
  "$frames frames in ordo_wait_for_var) and killed in $took s)"
