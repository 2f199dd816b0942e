//! Every example in `examples/` runs its story end to end through the built binary: each
//! `run.sh` checks its own outcomes and exits non-zero when its story did not happen.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::venv;

/// A Python with scikit-learn for auto-research: `LOOPX_EXAMPLES_PYTHON`, else the venv
/// `target/examples-venv` (`.ci/run` makes it; so does this test, when run alone).
fn python() -> &'static PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        venv::python_with(
            "LOOPX_EXAMPLES_PYTHON",
            "examples-venv",
            "sklearn",
            "scikit-learn==1.9.1",
        )
    })
}

/// Runs `bash examples/NAME/run.sh` with the built binary as `LOOPX`; asserts it succeeded,
/// printing what it said when it did not.
fn run_example(name: &str, python: Option<&PathBuf>) {
    let script = format!("{}/examples/{name}/run.sh", env!("CARGO_MANIFEST_DIR"));
    let mut c = Command::new("bash");
    c.arg(&script)
        .env("LOOPX", env!("CARGO_BIN_EXE_loopx"))
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_OWNER_KEY");
    if let Some(py) = python {
        c.env("LOOPX_EXAMPLES_PYTHON", py);
    }
    let out = c.output().expect("run bash");
    assert!(
        out.status.success(),
        "examples/{name}/run.sh failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn auto_research() {
    run_example("auto-research", Some(python()));
}

#[test]
fn issue_fix() {
    run_example("issue-fix", None);
}

#[test]
fn monitor() {
    run_example("monitor", None);
}

#[test]
fn gated_release() {
    run_example("gated-release", None);
}

#[test]
fn handoff() {
    run_example("handoff", None);
}

/// Real Claude Code and Codex CLI (`LOOPX_HOSTS_BIN`, from `.ci/run`); skipped without them.
#[test]
fn cross_runtime() {
    if common::hosts::clis("cross_runtime").is_none() {
        return;
    }
    run_example("cross-runtime", None);
}
