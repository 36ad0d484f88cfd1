#!/usr/bin/env bash
# libordo.so must stay loadable inside any runtime (SPEC §11, issue #24): checks the built
# library's static TLS and the newest glibc symbol version it imports.
#   usage: check_so_limits.sh path/to/libordo.so
set -euo pipefail
so=$1

# Static TLS. Because some of its thread-locals use the initial-exec model (base/hot_tls.h), a
# dlopen'ed libordo.so takes its whole PT_TLS segment from glibc's static TLS surplus, which is
# small (1,664 bytes by default, shared by every library loaded that way): loaded after another
# that had taken 384 bytes of it, the 1,317-byte segment of b3514be failed with "cannot allocate
# memory in static TLS block". Measured: 1,344 bytes at 13041b0 (1,024 of them the last-error
# buffer), 320 bytes once that buffer moved to the heap (base/last_error.cpp), 368 with the
# pipeline's and the GPU path's thread-locals, 272 once the lane cache moved to the heap
# (engine/lane_cache.cpp), 280 by 3383493, 264 once two thread-locals numbered by a dynamic
# initializer (each with a guard word in the segment) were numbered at first use instead. The
# largest left is the busy-engine stack (engine/thread_state.h, 64 bytes). The limit keeps that
# with a little room.
tls_limit=288
tls_hex=$(readelf -lW "$so" | awk '$1 == "TLS" { print $6 }')
tls=$((tls_hex))
echo "static TLS: $tls bytes (limit $tls_limit)"
if [ "$tls" -gt "$tls_limit" ]; then
  echo "libordo.so's TLS segment is $tls bytes, more than $tls_limit: move large thread-locals to" \
    "the heap (see base/last_error.cpp)" >&2
  exit 1
fi

# glibc: nothing newer than 2.34 (Ubuntu 22.04 ships 2.35, RHEL 9 2.34). Measured: GLIBC_2.36
# (arc4random, from the static libstdc++'s random_device) at 13041b0; 2.34 after
# base/glibc_compat.cpp.
glibc_limit=2.34
newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
echo "newest glibc symbol version: GLIBC_$newest (limit GLIBC_$glibc_limit)"
if [ "$(printf '%s\n%s\n' "$newest" "$glibc_limit" | sort -V | tail -1)" != "$glibc_limit" ]; then
  echo "libordo.so needs symbols newer than GLIBC_$glibc_limit:" >&2
  objdump -T "$so" | while read -r line; do
    v=$(grep -o 'GLIBC_[0-9][0-9.]*' <<<"$line" | sed 's/GLIBC_//') || continue
    [ "$(printf '%s\n%s\n' "$v" "$glibc_limit" | sort -V | tail -1)" = "$glibc_limit" ] ||
      echo "  $line" >&2
  done
  exit 1
fi
