//! The Python wheel (`host/python`, `cairn-compaction`) `.ci/run` builds with maturin (debug
//! profile) into `target/wheels`, installed into a fresh virtual environment.

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

pub fn run(command: &mut Command) {
    let out = command.env("CAIRN_LOG", "error").output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// A virtual environment in `dir/venv` holding the wheel alone (nothing from an index; it sees
/// the packages `.ci/run` installed system-wide); its `bin/python`. `None` (said on stderr)
/// outside CI when the wheel is missing or older than the sources — under CI that fails, since
/// `.ci/run` builds it first.
pub fn venv_with_wheel(dir: &Path) -> Option<PathBuf> {
    let root = super::node_packages::root();
    let wheel = match fresh_wheel(&root) {
        Ok(wheel) => wheel,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "CI builds the wheel before the tests (.ci/run): {why}");
            eprintln!("skipped outside CI: {why}");
            return None;
        }
    };
    let venv = dir.join("venv");
    run(Command::new("python3").args(["-m", "venv", "--system-site-packages"]).arg(&venv));
    run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "--no-index", "--disable-pip-version-check"]).arg(&wheel));
    Some(venv.join("bin/python"))
}
