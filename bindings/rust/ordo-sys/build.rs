//! Finds libordo without any crates.io helper:
//!  1. `ORDO_LIB_DIR=dir`: links `dir/libordo.so` (a meson build's `build/src`, or an install's
//!     `lib`).
//!  2. otherwise the `pkg-config` binary (or the one `$PKG_CONFIG` names): `--libs ordo`.
//!
//! The directory is passed on to dependent build scripts as `DEP_ORDO_LIB_DIR`, and this crate's
//! own tests get it as an rpath, so they run without LD_LIBRARY_PATH.
use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    for var in [
        "ORDO_LIB_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("ORDO_LIB_DIR").filter(|d| !d.is_empty()) {
        let dir = Path::new(&dir);
        let dir = dir.canonicalize().unwrap_or_else(|e| {
            panic!(
                "ORDO_LIB_DIR={}: {} (it must name the folder holding libordo.so)",
                dir.display(),
                e
            )
        });
        if !dir.join("libordo.so").exists() {
            panic!(
                "ORDO_LIB_DIR={}: no libordo.so there (build the C library first: `make all`, \
                    then ORDO_LIB_DIR=build/src)",
                dir.display()
            );
        }
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-lib=dylib=ordo");
        rpath(&dir);
        println!("cargo:lib_dir={}", dir.display());
        return;
    }

    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&pkg_config)
        .args(["--libs", "ordo >= 0.1"])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => panic!(
            "`{} --libs ordo` failed: {}\nInstall ordo (`make install PREFIX=...` and point \
             PKG_CONFIG_PATH at PREFIX/lib/pkgconfig) or set ORDO_LIB_DIR to the folder that \
             holds libordo.so.",
            pkg_config,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run `{}` ({}): install pkg-config, or set ORDO_LIB_DIR to the folder that \
             holds libordo.so",
            pkg_config, e
        ),
    };
    let libs = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lib_dir = None;
    for flag in libs.split_whitespace() {
        if let Some(d) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", d);
            lib_dir.get_or_insert_with(|| d.to_string());
        } else if let Some(l) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", l);
        }
    }
    if let Some(d) = lib_dir {
        rpath(Path::new(&d));
        println!("cargo:lib_dir={}", d);
    }
}

/// The library's folder as an rpath of this crate's tests and examples (not of dependents:
/// cargo forwards no link arguments; the ordo crate's build script reads DEP_ORDO_LIB_DIR).
fn rpath(dir: &Path) {
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}
