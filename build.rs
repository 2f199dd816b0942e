//! Links the code that every command runs into one place (hot_text.ld), so a short command maps fewer pages.
fn main() {
    println!("cargo:rerun-if-changed=link/hot_text.ld");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
        println!("cargo:rustc-link-arg-bins=-Wl,-T,{dir}/link/hot_text.ld");
    }
}
