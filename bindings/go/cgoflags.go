//go:build !ordo_nopkgconfig

package ordo

// Finds libordo through pkg-config (the installed ordo.pc, or PKG_CONFIG_PATH). Build with
// -tags ordo_nopkgconfig to give the flags through CGO_CFLAGS and CGO_LDFLAGS instead.

// #cgo pkg-config: ordo
import "C"
