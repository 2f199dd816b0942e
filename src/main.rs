//! The `loopx` binary: parses the command line and hands it to the CLI face.

fn main() {
    // COMPLETE=SHELL: answer the shell's completion request and exit (unset: one env lookup).
    loopx::cli::complete::hook();
    std::process::exit(loopx::cli::main());
}
