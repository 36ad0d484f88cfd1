//! Gives this crate's tests and examples the rpath of the libordo that ordo-sys found
//! (DEP_ORDO_LIB_DIR), so `cargo test` runs without LD_LIBRARY_PATH. Dependents of `ordo` link
//! the same way but find the library at run time as any program does (installed, or
//! LD_LIBRARY_PATH).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_ORDO_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_ORDO_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
