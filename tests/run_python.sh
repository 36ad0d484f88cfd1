#!/usr/bin/env bash
# The Python binding's tests (bindings/python), against the library just built in BUILD:
#   1. the pytest suite, from the source tree, with ORDO_LIBRARY=BUILD/src/libordo.so.0;
#   2. `pip install bindings/python` into a fresh virtual environment (cffi from the system's
#      site-packages, setuptools fetched by pip's isolated build), then the shared scenarios
#      again through the installed copy.
# Installs pytest (and cffi) when missing: with pip, or from Debian (python3-pytest,
# python3-cffi) where pip refuses (Debian's own python3 is "externally managed"), and Debian's
# python3-venv when the venv cannot be made.
#   bash tests/run_python.sh [BUILD]
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
lib="$build/src/libordo.so.0"
[ -e "$lib" ] || { echo "run_python.sh: $lib is missing: build first (make all)" >&2; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
apt_install() { bash "$root/tools/apt-install.sh" run_python.sh "$@"; }
for mod in cffi pytest; do
  python3 -c "import $mod" 2>/dev/null && continue
  python3 -m pip install -q "$mod" 2>/dev/null || apt_install "python3-$mod"
  python3 -c "import $mod" || { echo "run_python.sh: $mod is still missing" >&2; exit 1; }
done
export ORDO_LIBRARY="$lib"
# no cache folder in the source tree; the exit tests' children read ORDO_EXIT_TIMEOUT themselves
python3 -m pytest -q -p no:cacheprovider "$root/bindings/python/tests"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a clean copy: setuptools builds in the source folder
mkdir "$tmp/src"
(cd "$root/bindings/python" && tar --exclude=build --exclude='*.egg-info' --exclude=__pycache__ \
  --exclude=.pytest_cache -cf - .) | tar -xf - -C "$tmp/src"
python3 -m venv --system-site-packages "$tmp/venv" 2>/dev/null || {
  rm -rf "$tmp/venv" # Debian's python3 makes venvs only with python3-venv (ensurepip)
  apt_install python3-venv
  python3 -m venv --system-site-packages "$tmp/venv"
}
"$tmp/venv/bin/python" -m pip install -q "$tmp/src" ||
  { echo "run_python.sh: pip install bindings/python failed (its isolated build fetches" \
      "setuptools from PyPI)" >&2; exit 1; }
cd "$tmp" # nothing named ordo here: the import must find the installed package
"$tmp/venv/bin/python" -c '
import ordo, sys
where = ordo.__file__
assert "/venv/" in where, where
print("installed:", where, "library", ordo.version(), ordo.library_path)'
ORDO_TEST_INSTALLED=1 "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$tmp/src/tests/test_scenarios.py" "$tmp/src/tests/test_async.py"
