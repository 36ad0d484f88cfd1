#!/usr/bin/env bash
# Installs the build and test tools ordo needs on Debian 12 when they are missing.
# Runs as root (as on CI); with sudo when not root and sudo exists. Idempotent and quiet when
# everything is present.
set -euo pipefail

need=()
command -v meson >/dev/null 2>&1 || need+=(meson)
command -v ninja >/dev/null 2>&1 || need+=(ninja-build)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v c++ >/dev/null 2>&1 || need+=(g++)
pkg-config --exists criterion 2>/dev/null || need+=(libcriterion-dev)
# The Cholesky demo's kernels: OpenBLAS (BLAS, and LAPACK's dpotrf) and the LAPACKE C interface,
# which Debian ships apart from OpenBLAS.
pkg-config --exists openblas 2>/dev/null || need+=(libopenblas-dev)
[ -f /usr/include/lapacke.h ] || need+=(liblapacke-dev)

command -v python3 >/dev/null 2>&1 || need+=(python3)
# The Go binding's tests (bindings/go, tests/run_go.sh): Debian 12's Go is 1.19, enough for
# runtime/cgo.Handle (1.17); its race detector comes with it.
command -v go >/dev/null 2>&1 || need+=(golang-go)
# tests/with_timeout.sh, the step wrapper of tests/run_all.sh: gdb dumps a hung step's stacks,
# ps (procps, absent from minimal Debian images) finds its processes.
command -v gdb >/dev/null 2>&1 || need+=(gdb)
command -v ps >/dev/null 2>&1 || need+=(procps)
# make abi-check (tools/abi_check.sh): abidw and abidiff.
command -v abidiff >/dev/null 2>&1 || need+=(abigail-tools)

# The Rust binding's tests (tests/run_rust.sh): Debian's cargo and rustc (1.63, enough for the
# binding, which needs no crates.io package) when no cargo is found, rustup's in ~/.cargo/bin
# included.
command -v cargo >/dev/null 2>&1 || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ] ||
  need+=(cargo)

tools=$(cd "$(dirname "$0")" && pwd)
apt_install() { bash "$tools/apt-install.sh" install-deps "$@"; }

[ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"

# tests/test_header_cffi.py reads the public header with cffi, as the Python binding does: from
# PyPI, or from Debian (python3-cffi) when pip is missing or refuses.
if ! python3 -c "import cffi" >/dev/null 2>&1; then
  echo "install-deps: installing cffi (PyPI)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore cffi \
    >/dev/null 2>&1 ||
    python3 -m pip install -q --disable-pip-version-check cffi >/dev/null 2>&1 ||
    apt_install python3-cffi
  python3 -c "import cffi" >/dev/null 2>&1 || {
    echo "install-deps: cffi is still missing for $(command -v python3)" >&2
    exit 1
  }
fi

# The trace timeline picture (tools/trace_png.py) draws with Pillow: from PyPI, or from Debian
# (python3-pil) when pip is missing or refuses (Debian's own python3 is "externally managed").
if ! python3 -c "import PIL" >/dev/null 2>&1; then
  echo "install-deps: installing pillow (PyPI)"
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore pillow \
    >/dev/null 2>&1 ||
    python3 -m pip install -q --disable-pip-version-check pillow >/dev/null 2>&1 ||
    apt_install python3-pil
  python3 -c "import PIL" >/dev/null 2>&1 || {
    echo "install-deps: Pillow is still missing for $(command -v python3)" >&2
    exit 1
  }
fi
