//! Links the code that short commands run next to each other (`link/hot_text.ld`, written by
//! `benches/hot_text.sh`), so a short command maps 1.4 MB of the binary's code instead of 6.4 MB
//! (docs/benchmarks.md, "Plain loads at scale"). Release builds on Linux only: debug builds are
//! linked often and do not gain from it.

fn main() {
    println!("cargo:rerun-if-changed=link/hot_text.ld");
    println!("cargo:rerun-if-changed=build.rs");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") == "linux" && var("PROFILE") == "release" {
        let script = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("link/hot_text.ld");
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
    }
}
