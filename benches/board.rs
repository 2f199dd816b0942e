//! Board speed figures (placeholder).
fn main() {}
