//! The `loopx` binary: parses the command line and hands it to the CLI face.

fn main() {
    std::process::exit(loopx::cli::main());
}
