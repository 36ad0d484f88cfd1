#!/usr/bin/env bash
# The ABI gate (issue #24): compares the built libordo.so with the baseline under abi/.
#   tools/abi_check.sh BUILD          check (make abi-check, and a step of make test)
#   tools/abi_check.sh BUILD dump     write the baseline from BUILD (make abi-dump)
#
# abi/libordo.abi is abidw's description of the library's exported functions and the types
# they reach (--exported-interfaces-only), limited to the public header (--headers-dir). The
# check dumps the built library the same way and fails when abidiff reports any change between
# the two: a function removed or changed, a public struct changed. Only new functions pass
# (--no-added-syms). abidiff 2.2 marks only removed symbols as "incompatible" (exit bit 8); a
# moved field or a new struct size is merely an "ABI change" (bit 4), so both fail here. A change
# that is compatible by ordo's own rules (a field added at the end of a struct that starts with
# struct_size) is taken into the baseline on purpose, after review, with make abi-dump; anything
# else needs a new soversion (src/meson.build). Checked by hand against a field inserted, a field
# added at the end, a member's type changed (uint64_t to uint32_t: same size, the struct padded),
# a parameter's type changed and a function removed: each fails. Two abidiff 2.2 traps avoided:
# its suppression has_data_members_inserted_at = end also hid a field inserted in the middle, and
# comparing the baseline with the binary itself (--headers-dir2) hid the member's type change.
#
# abi/constants.txt lists the header's integer macros (status codes, kinds, flags, struct kinds):
# abidiff cannot see them, and every binding copies them. Each must keep its value; new ones pass.
#
# Only meaningful for the plain build (src/meson.build's gcc LTO, static libstdc++): run it on
# build/, not on a sanitizer build.
set -euo pipefail
build=${1:?usage: abi_check.sh BUILD [dump]}
mode=${2:-check}
root=$(cd "$(dirname "$0")/.." && pwd)
lib=$build/src/libordo.so
headers=$root/include/ordo
baseline=$root/abi/libordo.abi
constants=$root/abi/constants.txt

command -v abidw >/dev/null 2>&1 || bash "$root/tools/apt-install.sh" abi-check abigail-tools
[ -f "$lib" ] || { echo "abi-check: $lib is not built (make all)" >&2; exit 2; }

export LC_ALL=C # sort and comm agree on the order

# Integer macros of the public header, "NAME VALUE", sorted; not the version, which must change.
header_constants() {
  cc -E -dM -DORDO_API= -DORDO_NO_INLINE_HELPERS "$headers/ordo.h" |
    awk '$1 == "#define" && $2 ~ /^ORDO_/ && $2 !~ /^ORDO_VERSION_/ &&
         $3 ~ /^(0x[0-9a-fA-F]+|[0-9]+)[uUlL]*$/ { print $2, $3 }' | sort
}

# The library's ABI as abixml: the exported functions and the types they reach, limited to the
# public header; hashed type ids and file names without paths, so that the baseline changes
# little unless the ABI does (the locations must stay: they tell which types the header declares).
dump_abi() {
  abidw --exported-interfaces-only --headers-dir "$headers" --drop-private-types \
    --drop-undefined-syms --no-corpus-path --no-comp-dir-path --short-locs --type-id-style hash \
    --out-file "$1" "$lib"
}

if [ "$mode" = dump ]; then
  mkdir -p "$root/abi"
  dump_abi "$baseline"
  header_constants >"$constants"
  echo "abi-check: baseline written: $baseline ($(grep -c '<elf-symbol ' "$baseline") functions)," \
    "$constants ($(wc -l <"$constants") constants)"
  exit 0
fi

[ -f "$baseline" ] || { echo "abi-check: no baseline $baseline (make abi-dump)" >&2; exit 2; }
# abixml against abixml: compared with the binary itself (--headers-dir2), abidiff 2.2 hid a
# member whose type changed to one the header does not define (uint64_t to uint32_t).
current=$(mktemp)
trap 'rm -f "$current"' EXIT
dump_abi "$current"
status=0
report=$(abidiff --no-added-syms "$baseline" "$current") || status=$?
if [ "$status" -ne 0 ]; then
  echo "$report"
  if [ $((status & 3)) -ne 0 ]; then
    echo "abi-check: abidiff failed (exit status $status)" >&2
  elif [ $((status & 8)) -ne 0 ]; then
    echo "abi-check: INCOMPATIBLE change against abi/libordo.abi (functions removed): bump the" \
      "soversion, or restore them" >&2
  else
    echo "abi-check: the ABI changed against abi/libordo.abi (above). Incompatible (a field moved," \
      "a size or signature changed): restore it, or bump the soversion. Compatible by ordo's" \
      "rules (a field added at the end of a struct_size struct): make abi-dump, and commit" \
      "the new baseline" >&2
  fi
  exit 1
fi

missing=$(comm -23 "$constants" <(header_constants))
if [ -n "$missing" ]; then
  echo "abi-check: header constants changed or removed (baseline value shown):" >&2
  echo "$missing" >&2
  exit 1
fi
echo "abi-check: libordo.so matches abi/libordo.abi ($(grep -c '<elf-symbol ' "$baseline")" \
  "functions; new ones allowed), $(wc -l <"$constants") header constants unchanged"
