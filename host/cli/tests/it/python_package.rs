//! The Python package as a user meets it: the wheel `.ci/run` builds from `host/python` with
//! maturin (pinned, debug profile, the same target directory as these tests), installed into a
//! fresh virtual environment with nothing else from the tree, and the package's own tests
//! (`host/python/tests`) run there — the `cairn` command from the wheel included — and its
//! types are checked by mypy.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

const BUILD: &str = "python3 -m maturin build --profile dev -m host/python/Cargo.toml -o target/wheels";

fn newest_source(dir: &Path, newest: &mut SystemTime) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            newest_source(&path, newest);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "py" || e == "toml") {
            let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            *newest = (*newest).max(modified);
        }
    }
}

/// The wheel in `target/wheels`, if one was built since the sources last changed.
fn fresh_wheel(root: &Path) -> Result<PathBuf, String> {
    let wheels = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("wheels");
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|_| format!("no wheel in {}: build it with `{BUILD}`", wheels.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("cairn_compaction-")) && p.extension().is_some_and(|e| e == "whl"))
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH))
        .ok_or_else(|| format!("no cairn_compaction wheel in {}: build it with `{BUILD}`", wheels.display()))?;
    let built = wheel.metadata().and_then(|m| m.modified()).map_err(|e| e.to_string())?;
    let mut newest = SystemTime::UNIX_EPOCH;
    for dir in ["host/cairn/src", "host/cli/src", "host/python"] {
        newest_source(&root.join(dir), &mut newest);
    }
    if newest > built {
        return Err(format!("{} is older than the sources: rebuild it with `{BUILD}`", wheel.display()));
    }
    Ok(wheel)
}

fn run(command: &mut Command) {
    let out = command.env("CAIRN_LOG", "error").output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_python_wheel_installs_alone_and_its_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let wheel = match fresh_wheel(&root) {
        Ok(wheel) => wheel,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "CI builds the wheel before the tests (.ci/run): {why}");
            eprintln!("skipped outside CI: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    // It sees the frameworks .ci/run installed (host/python/tests/requirements.txt), and from
    // this tree only the wheel.
    run(Command::new("python3").args(["-m", "venv", "--system-site-packages"]).arg(&venv));
    // Nothing from an index: the wheel alone.
    run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-index", "--disable-pip-version-check"]).arg(&wheel));
    // From a folder outside the tree, so that `import cairn` can only find the installed package.
    let tests = root.join("host/python/tests");
    run(Command::new(venv.join("bin/python")).args(["-m", "unittest", "discover", "-v", "-s"]).arg(&tests).current_dir(dir.path()));

    // The package's types as installed (its stub for the extension module included), and a
    // typed harness's use of them, under mypy --strict (pinned; .ci/run installs it).
    let has_mypy = Command::new("python3").args(["-m", "mypy", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_mypy {
        assert!(std::env::var_os("CI").is_none(), "CI installs mypy (.ci/run)");
        eprintln!("mypy skipped outside CI: python3 -m pip install mypy==2.4.1");
        return;
    }
    let python = venv.join("bin/python");
    run(Command::new("python3").args(["-m", "mypy", "--strict", "--no-incremental", "--python-executable"]).arg(&python).args(["-p", "cairn"]).current_dir(dir.path()));
    run(Command::new("python3").args(["-m", "mypy", "--strict", "--no-incremental", "--python-executable"]).arg(&python).arg(tests.join("typed_use.py")).current_dir(dir.path()));
}
