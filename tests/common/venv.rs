//! A Python with a package the tests need: the one an environment variable names, else a venv
//! of the tests' own in the target dir, where `.ci/run` makes it (made here when it lacks it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python in `$var` (it must exist), else `target/NAME/bin/python` with `module`
/// importable, made with `python3 -m venv` and `pip install PACKAGE` when it is not.
pub fn python_with(var: &str, name: &str, module: &str, package: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        assert!(p.exists(), "{var}={} does not exist", p.display());
        return p;
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target dir");
    let venv = target.join(name);
    let py = venv.join("bin/python");
    let has = |py: &PathBuf| {
        Command::new(py)
            .args(["-c", &format!("import {module}")])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has(&py) {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "python3 -m venv failed: install python3 and python3-venv"
        );
        let ok = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", package])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "pip install {package} failed");
    }
    assert!(
        has(&py),
        "the venv at {} has no {module} package",
        venv.display()
    );
    py
}
