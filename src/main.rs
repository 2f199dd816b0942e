//! The `loopx` binary: parses the command line and hands it to the CLI face.

fn main() {
    // SAFETY: the first thing the process does: no other thread runs yet. The owner key's
    // variable is read here and wiped, so nothing loopx starts can read it (docs/security.md).
    unsafe { loopx::cli::owner_env::take_at_start() };
    // COMPLETE=SHELL: answer the shell's completion request and exit (unset: one env lookup).
    loopx::cli::complete::hook();
    std::process::exit(loopx::cli::main());
}
