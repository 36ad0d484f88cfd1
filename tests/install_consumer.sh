#!/usr/bin/env bash
# Installs a built ordo into a temporary DESTDIR and checks what a consumer sees (SPEC §10):
#  - the installed ordo.pc works with pkg-config (under PKG_CONFIG_SYSROOT_DIR),
#  - tests/consumer.c compiles with -std=c99 -pedantic -Wall -Werror against it, links, runs
#    from the installed library and prints the expected line,
#  - the installed library's SONAME is libordo.so.0,
#  - it exports only ordo_* symbols (version nodes such as ORDO_0 aside).
# Usage: bash tests/install_consumer.sh BUILD_DIR
# Prints "install: 1 passed, 0 failed" on success; on failure a message, then
# "install: 0 passed, 1 failed", and exits non-zero.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
if [[ ! -d "$build" ]]; then
  echo "install_consumer: build dir '$build' not found" >&2
  echo "install: 0 passed, 1 failed"
  exit 2
fi
build=$(cd "$build" && pwd)

fail() {
  echo "install_consumer: FAIL: $*" >&2
  echo "install: 0 passed, 1 failed"
  exit 1
}

for tool in meson pkg-config cc readelf nm python3; do
  command -v "$tool" >/dev/null 2>&1 || fail "'$tool' not found on PATH"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The build's real prefix and libdir (libdir may be relative to the prefix or absolute).
read -r prefix libdir version < <(meson introspect "$build" --buildoptions --projectinfo |
  python3 -c '
import json, sys
doc = json.load(sys.stdin)
opts = {}
version = ""
if isinstance(doc, list):
    opts = {o["name"]: o["value"] for o in doc}
else:
    opts = {o["name"]: o["value"] for o in doc.get("buildoptions", [])}
    version = doc.get("projectinfo", {}).get("version", "")
prefix = opts.get("prefix", "/usr/local")
libdir = opts.get("libdir", "lib")
if not libdir.startswith("/"):
    libdir = prefix.rstrip("/") + "/" + libdir
print(prefix, libdir, version or "unknown")
') || fail "could not read the build options with meson introspect"
[[ -n "$prefix" && -n "$libdir" ]] || fail "empty prefix or libdir from meson introspect"

meson install -C "$build" --destdir "$tmp" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install failed"; }

inst_lib="$tmp$libdir"
[[ -f "$inst_lib/pkgconfig/ordo.pc" ]] || fail "ordo.pc not installed in $libdir/pkgconfig"
[[ -f "$tmp$prefix/include/ordo/ordo.h" ]] || fail "ordo/ordo.h not installed in $prefix/include"
[[ -e "$inst_lib/libordo.so" ]] || fail "libordo.so (development link) not installed in $libdir"

export PKG_CONFIG_SYSROOT_DIR="$tmp"
export PKG_CONFIG_PATH="$inst_lib/pkgconfig"
# only the installed ordo.pc, never one from the system
export PKG_CONFIG_LIBDIR="$inst_lib/pkgconfig"

pc_version=$(pkg-config --modversion ordo) || fail "pkg-config cannot find ordo"
[[ "$pc_version" == "$version" ]] ||
  fail "ordo.pc says version '$pc_version', the project is '$version'"
cflags=$(pkg-config --cflags ordo)
libs=$(pkg-config --libs ordo)
[[ "$cflags" == *"$tmp"* ]] || fail "pkg-config --cflags does not point into the install: $cflags"
[[ "$libs" == *"-lordo"* ]] || fail "pkg-config --libs lacks -lordo: $libs"

# shellcheck disable=SC2086  # word splitting of pkg-config output is intended
(cd "$here" && cc -std=c99 -pedantic -Wall -Werror $cflags consumer.c $libs -o "$tmp/consumer") ||
  fail "consumer.c did not compile against the installed ordo ($cflags $libs)"

needed=$(readelf -d "$tmp/consumer" | sed -n 's/.*(NEEDED).*\[\(libordo[^]]*\)\].*/\1/p')
[[ "$needed" == "libordo.so.0" ]] || fail "consumer NEEDs '$needed', expected libordo.so.0"

out=$(LD_LIBRARY_PATH="$inst_lib" "$tmp/consumer") || fail "consumer exited with status $?"
want="consumer: counter=100 version=$version"
[[ "$out" == "$want" ]] || fail "consumer printed '$out', expected '$want'"

# the consumer really loaded the installed copy
loaded=$(LD_LIBRARY_PATH="$inst_lib" ldd "$tmp/consumer" | awk '/libordo/ {print $3}')
[[ "$loaded" == "$inst_lib/"* ]] || fail "consumer loads libordo from '$loaded', not $inst_lib"

# SONAME of the installed library (follow the development link to the real file)
real_so=$(readlink -f "$inst_lib/libordo.so")
[[ "$real_so" == "$inst_lib/"* ]] || fail "libordo.so points outside the install: $real_so"
soname=$(readelf -d "$real_so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
[[ "$soname" == "libordo.so.0" ]] || fail "SONAME is '$soname', expected libordo.so.0"
[[ -e "$inst_lib/libordo.so.0" ]] || fail "libordo.so.0 (SONAME link) not installed"

# exported symbols: only ordo_*; version nodes (absolute symbols like ORDO_0) are fine
syms=$(nm -D --defined-only "$real_so" | awk 'NF >= 2 {print $NF}' | sed 's/@.*//')
[[ -n "$syms" ]] || fail "no dynamic symbols defined in $real_so"
bad=$(printf '%s\n' "$syms" | grep -Ev '^(ordo_[A-Za-z0-9_]+|ORDO_[0-9][0-9.]*)$' || true)
if [[ -n "$bad" ]]; then
  fail "libordo exports symbols outside ordo_*: $(printf '%s\n' "$bad" | head -20 | tr '\n' ' ')"
fi
n_exported=$(printf '%s\n' "$syms" | grep -c '^ordo_' || true)
[[ "$n_exported" -gt 0 ]] || fail "libordo exports no ordo_* function"

echo "$out"
echo "installed: $libdir/$(basename "$real_so") SONAME=$soname, $n_exported ordo_* symbols exported, pkg-config $pc_version"
echo "install: 1 passed, 0 failed"
