#!/usr/bin/env bash
# Runs one CI step under a time limit. A hang must fail CI in minutes and say where it hung: when
# the step runs past its limit, this names the step, lists its processes and dumps every thread
# of each with gdb (`thread apply all bt`), then kills them all and exits 124.
#
#   bash tests/with_timeout.sh NAME SECONDS COMMAND [ARG...]
#
# Exit status: the command's own, or 124 when it ran out of time (as timeout(1)).
# The command runs in a session of its own; "its processes" are every descendant of it and every
# process left in that session (a daemonized child too). Environment:
#   WITH_TIMEOUT_SCALE=N   multiply every limit by N (a slow machine); default 1
#   WITH_TIMEOUT_DUMPS=N   dump at most N processes (programs first, shells last); default 12
#   WITH_TIMEOUT_GDB_S=N   give each gdb attach at most N seconds; default 60
#   WITH_TIMEOUT_GDB=path  the gdb to use; default gdb
# gdb comes from tools/install-deps.sh; where it is missing or cannot attach, each thread's
# state, wait channel and kernel stack are printed instead.
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: with_timeout.sh NAME SECONDS COMMAND [ARG...]" >&2
  exit 2
fi
name=$1
seconds=$2
shift 2
case $seconds in
  '' | *[!0-9]*)
    echo "with_timeout.sh: SECONDS must be a whole number, got '$seconds'" >&2
    exit 2
    ;;
esac
scale=${WITH_TIMEOUT_SCALE:-1}
max_dumps=${WITH_TIMEOUT_DUMPS:-12}
gdb_s=${WITH_TIMEOUT_GDB_S:-60}
gdb=${WITH_TIMEOUT_GDB:-gdb}
limit=$((seconds * scale))

say() { echo "with_timeout: $*" >&2; }

# A job started by a script is not a process group leader, so setsid(1) execs the command in a
# new session at once instead of forking: $! is the command itself and the session's id.
setsid "$@" &
cmd=$!
sleep "$limit" &
timer=$!

# Every live process of the step: cmd's descendants, and whatever is left in cmd's session
# (zombies only link the tree: they have no stacks and ignore signals).
step_pids() {
  ps -e -o pid=,ppid=,sid=,stat= | awk -v root="$cmd" '
    { pid[NR] = $1; parent[$1] = $2; sid[$1] = $3; zombie[$1] = $4 ~ /^Z/ }
    END {
      keep[root] = 1
      for (changed = 1; changed;) {
        changed = 0
        for (i = 1; i <= NR; i++) {
          p = pid[i]
          if (!(p in keep) && ((parent[p] in keep) || sid[p] == root)) { keep[p] = 1; changed = 1 }
        }
      }
      for (p in keep) if ((p in parent) && !zombie[p]) print p
    }' | sort -n
}

kill_step() {
  local sig=$1 pids
  pids=$(step_pids)
  # shellcheck disable=SC2086 # one pid per word
  [ -n "$pids" ] && kill "-$sig" $pids 2>/dev/null
  return 0
}

# shellcheck disable=SC2317 # called by the trap
on_signal() {
  kill_step TERM
  kill "$timer" 2>/dev/null
  exit 130
}
trap on_signal INT TERM

# Threads of one process without gdb: state, wait channel, kernel stack (root only).
proc_threads() {
  local pid=$1 t
  for t in /proc/"$pid"/task/*; do
    [ -d "$t" ] || continue
    printf '  thread %s (%s): state %s, wchan %s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" \
      "$(awk '{print $3}' "$t/stat" 2>/dev/null)" "$(cat "$t/wchan" 2>/dev/null)"
    sed 's/^/      /' "$t/stack" 2>/dev/null | head -20
  done
}

dump_process() {
  local pid=$1 out
  echo "---- stacks of process $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | cut -c1-300)"
  if command -v "$gdb" >/dev/null 2>&1; then
    out=$(timeout -k 5 "$gdb_s" "$gdb" -nx -batch -p "$pid" -iex 'set debuginfod enabled off' \
      -iex 'set auto-load python-scripts off' -ex 'set pagination off' \
      -ex 'set print thread-events off' -ex 'info threads' -ex 'thread apply all bt' \
      </dev/null 2>&1)
    if grep -q '^#0 ' <<<"$out"; then
      # gdb's chatter on attach: thread library, the stop location's source line
      grep -v -E '^(\[New LWP|\[Thread debugging|Using host libthread_db|[0-9]+\s)' <<<"$out" |
        grep -v 'No such file or directory\.$'
      return 0
    fi
    echo "  gdb could not read its stacks:"
    tail -5 <<<"$out" | sed 's/^/    /'
  else
    echo "  (no gdb: bash tools/install-deps.sh installs it)"
  fi
  proc_threads "$pid"
}

dump_step() {
  local pids programs=() shells=() p comm n=0
  pids=$(step_pids)
  echo "---- processes of '$name':"
  [ -n "$pids" ] && ps -o pid,ppid,stat,etime,args -p "$(tr '\n' ',' <<<"$pids" | sed 's/,$//')"
  for p in $pids; do
    comm=$(cat /proc/"$p"/comm 2>/dev/null) || continue
    case $comm in
      bash | sh | dash | make | ninja | setsid | timeout | tee) shells+=("$p") ;;
      *) programs+=("$p") ;;
    esac
  done
  for p in "${programs[@]}" "${shells[@]}"; do
    if [ "$n" -ge "$max_dumps" ]; then
      echo "---- (further processes not dumped: WITH_TIMEOUT_DUMPS=$max_dumps)"
      break
    fi
    dump_process "$p"
    n=$((n + 1))
  done
}

# wait -n returns early when a trapped signal arrives; then on_signal exits.
while :; do
  wait -n -p done_pid "$cmd" "$timer"
  rc=$?
  [ -n "${done_pid:-}" ] && break
done

if [ "$done_pid" = "$cmd" ]; then
  kill "$timer" 2>/dev/null
  wait "$timer" 2>/dev/null
  exit "$rc"
fi

say "'$name' did not finish in $limit s: its processes and all their threads' stacks follow" \
  "(then it is killed)"
dump_step >&2
kill_step TERM
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -z "$(step_pids)" ] && break
  sleep 1
done
kill_step KILL
wait "$cmd" 2>/dev/null
say "FAILED: '$name' timed out after $limit s and was killed"
exit 124
