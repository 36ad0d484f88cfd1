#!/usr/bin/env bash
# The Rust binding's suite (bindings/rust) against the library just built in BUILD_DIR/src,
# installing nothing: `cargo test` of both crates (unit, integration, doc tests), offline (the
# binding has no crates.io dependency), then ordo-sys's build script once more through
# pkg-config, against a temporary install of BUILD_DIR.
# Usage: bash tests/run_rust.sh BUILD_DIR
# Needs cargo: on PATH, in $CARGO_HOME/bin or ~/.cargo/bin; tools/install-deps.sh installs
# Debian's when none is found (the binding builds with Rust 1.63 and later).
# Prints "rust: N passed, 0 failed" at the end on success.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-build}
[[ -f "$build/src/libordo.so" ]] || {
  echo "run_rust: no $build/src/libordo.so: build the library first (make all)" >&2
  exit 2
}
build=$(cd "$build" && pwd)

cargo=$(command -v cargo || true)
for c in "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" /root/.cargo/bin/cargo; do
  [[ -n "$cargo" ]] && break
  [[ -x "$c" ]] && cargo=$c
done
if [[ -z "$cargo" ]]; then
  echo "run_rust: cargo not found (not on PATH, nor in \$CARGO_HOME/bin or ~/.cargo/bin)." >&2
  echo "run_rust: install it with 'bash tools/install-deps.sh' (Debian's cargo) or rustup." >&2
  exit 1
fi
PATH="$(dirname "$cargo"):$PATH"
echo "run_rust: $("$cargo" --version), $(rustc --version 2>/dev/null || echo 'rustc ?')"

export CARGO_NET_OFFLINE=true
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/bindings/rust/target}"
export CARGO_TERM_COLOR=never
export ORDO_LIB_DIR="$build/src"
# the crates' tests carry an rpath to ORDO_LIB_DIR; doc tests may not, on older cargo
export LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# the binding's own tests bound every wait; a child that hangs is their failure, not ours
unset RUST_BACKTRACE

log=$(mktemp "${TMPDIR:-/tmp}/ordo_rust.XXXXXX")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ordo_rust_pc.XXXXXX")
trap 'rm -rf "$log" "$tmp"' EXIT

cd "$root/bindings/rust"
if ! "$cargo" test --workspace --offline --no-fail-fast 2>&1 | tee "$log"; then
  echo "rust: cargo test failed" >&2
  exit 1
fi

# The pkg-config way (no ORDO_LIB_DIR): ordo-sys's tests against a temporary install.
meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; echo "run_rust: meson install failed" >&2; exit 1; }
pc=$(find "$tmp/root" -name ordo.pc -path '*/pkgconfig/*' | head -1)
[[ -n "$pc" ]] || { echo "run_rust: no ordo.pc in the temporary install" >&2; exit 1; }
if ! (
  unset ORDO_LIB_DIR
  export PKG_CONFIG_SYSROOT_DIR="$tmp/root" PKG_CONFIG_LIBDIR PKG_CONFIG_PATH=""
  PKG_CONFIG_LIBDIR=$(dirname "$pc")
  # the installed copy, not the build's (ordo.pc's libdir holds pkgconfig/ordo.pc)
  LD_LIBRARY_PATH=$(dirname "$PKG_CONFIG_LIBDIR")
  export LD_LIBRARY_PATH
  CARGO_TARGET_DIR="$tmp/target" "$cargo" test -p ordo-sys --offline --quiet 2>&1
) | tee -a "$log"; then
  echo "rust: ordo-sys through pkg-config failed" >&2
  exit 1
fi

read -r passed failed < <(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
  END { print p + 0, f + 0 }' "$log")
echo "rust: $passed passed, $failed failed"
[[ "$failed" -eq 0 && "$passed" -gt 0 ]]
