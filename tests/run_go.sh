#!/usr/bin/env bash
# The Go binding's tests (bindings/go) against this build's libordo.so: go vet, go test -race
# (the binding finds the library through pkg-config, here an ordo.pc written for the build tree),
# then a build that takes the flags from CGO_CFLAGS/CGO_LDFLAGS instead (-tags ordo_nopkgconfig).
# Offline: GOPROXY=off, the build cache under BUILD_DIR/go.
# Usage: bash tests/run_go.sh BUILD_DIR [go test flags...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-build}" && pwd)
shift || true

command -v go >/dev/null 2>&1 || {
  echo "run_go: no Go toolchain on PATH (make deps installs Debian's golang-go)" >&2
  exit 1
}
[[ -f "$build/src/libordo.so" ]] || { echo "run_go: $build/src/libordo.so not built" >&2; exit 1; }

gobuild="$build/go"
mkdir -p "$gobuild/pkgconfig" "$gobuild/cache" "$gobuild/path" "$gobuild/tmp"
cat >"$gobuild/pkgconfig/ordo.pc" <<PC
libdir=$build/src
includedir=$root/include

Name: ordo
Description: ordo from the build tree $build
Version: 0
Libs: -L\${libdir} -lordo
Cflags: -I\${includedir}
PC

export PKG_CONFIG_PATH="$gobuild/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GOCACHE="$gobuild/cache" GOPATH="$gobuild/path" GOTMPDIR="$gobuild/tmp"
export GOPROXY=off GOFLAGS=-buildvcs=false GO111MODULE=on GOTOOLCHAIN=local CGO_ENABLED=1
unset GOOS GOARCH

cd "$root/bindings/go"
echo "go: $(go version)"
go vet ./...
go test -race -count=1 "$@" ./...
CGO_CFLAGS="-I$root/include" CGO_LDFLAGS="-L$build/src -lordo" \
  go build -tags ordo_nopkgconfig ./...
echo "go: the build with -tags ordo_nopkgconfig (CGO_CFLAGS/CGO_LDFLAGS) works"
