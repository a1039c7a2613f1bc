//! The Python package as a user meets it: the wheel `.ci/run` builds from `host/python` with
//! maturin (pinned, debug profile, the same target directory as these tests), installed into a
//! fresh virtual environment with nothing else from the tree, and the package's own tests
//! (`host/python/tests`) run there — the `cairn` command from the wheel included — and its
//! types are checked by mypy.

use std::path::Path;
use std::process::Command;

use crate::support::python_wheel::{self, run};

#[test]
fn the_python_wheel_installs_alone_and_its_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // It sees the frameworks .ci/run installed (host/python/tests/requirements.txt), and from
    // this tree only the wheel.
    let Some(python) = python_wheel::venv_with_wheel(dir.path()) else { return };
    // From a folder outside the tree, so that `import cairn` can only find the installed package.
    let tests = root.join("host/python/tests");
    run(Command::new(&python).args(["-m", "unittest", "discover", "-v", "-s"]).arg(&tests).current_dir(dir.path()));

    // The package's types as installed (its stub for the extension module included), and a
    // typed harness's use of them, under mypy --strict (pinned; .ci/run installs it).
    let has_mypy = Command::new("python3").args(["-m", "mypy", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_mypy {
        assert!(std::env::var_os("CI").is_none(), "CI installs mypy (.ci/run)");
        eprintln!("mypy skipped outside CI: python3 -m pip install mypy==2.4.1");
        return;
    }
    run(Command::new("python3").args(["-m", "mypy", "--strict", "--no-incremental", "--python-executable"]).arg(&python).args(["-p", "cairn"]).current_dir(dir.path()));
    run(Command::new("python3").args(["-m", "mypy", "--strict", "--no-incremental", "--python-executable"]).arg(&python).arg(tests.join("typed_use.py")).current_dir(dir.path()));
}
