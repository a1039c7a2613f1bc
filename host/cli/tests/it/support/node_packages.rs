//! The Node.js package (`host/node`, `cairn-compaction`) packed as npm would publish it: the
//! addon `.ci/run` builds (debug profile, the same target directory as these tests) in the
//! Linux x86-64 platform package, and the main package without it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

pub const BUILD: &str = "cargo build -p cairn-node && cp target/debug/libcairn_node.so host/node/cairn.linux-x64-gnu.node";
const ADDON: &str = "cairn.linux-x64-gnu.node";

/// The two tarballs, `npm install`ed together.
pub struct Packed {
    pub main: PathBuf,
    pub native: PathBuf,
}

fn newest_source(dir: &Path, newest: &mut SystemTime) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "node_modules" || n == "tests") {
            continue;
        }
        if path.is_dir() {
            newest_source(&path, newest);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "toml") {
            let modified = entry.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            *newest = (*newest).max(modified);
        }
    }
}

/// The addon in `host/node`, if it was built since the Rust sources last changed.
pub fn fresh_addon(root: &Path) -> Result<PathBuf, String> {
    let addon = root.join("host/node").join(ADDON);
    let built = addon.metadata().and_then(|m| m.modified()).map_err(|_| format!("no {} : build it with `{BUILD}`", addon.display()))?;
    let mut newest = SystemTime::UNIX_EPOCH;
    for dir in ["host/cairn/src", "host/cli/src", "host/node"] {
        newest_source(&root.join(dir), &mut newest);
    }
    if newest > built {
        return Err(format!("{} is older than the sources: rebuild it with `{BUILD}`", addon.display()));
    }
    Ok(addon)
}

pub fn run(command: &mut Command) -> String {
    let out = command.env("CAIRN_LOG", "error").output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{command:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// `npm pack` of `dir` into `into`; the tarball's path.
fn pack(dir: &Path, into: &Path) -> PathBuf {
    let name = run(Command::new("npm").args(["pack", "--silent", "--pack-destination"]).arg(into).current_dir(dir));
    into.join(name.lines().last().expect("npm pack names its tarball").trim())
}

/// The repository's top level.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Both packages packed into `dir`; `None` (said on stderr) outside CI when the addon is missing
/// or older than the sources — under CI that fails, since `.ci/run` builds it first.
pub fn packed(dir: &Path) -> Option<Packed> {
    let root = root();
    let addon = match fresh_addon(&root) {
        Ok(addon) => addon,
        Err(why) => {
            assert!(std::env::var_os("CI").is_none(), "CI builds the addon before the tests (.ci/run): {why}");
            eprintln!("skipped outside CI: {why}");
            return None;
        }
    };
    let tarballs = dir.join("tarballs");
    std::fs::create_dir_all(&tarballs).unwrap();
    // The platform package as its folder in the tree describes it, with the addon just built.
    let platform = dir.join("linux-x64-gnu");
    std::fs::create_dir_all(&platform).unwrap();
    std::fs::copy(root.join("host/node/npm/linux-x64-gnu/package.json"), platform.join("package.json")).unwrap();
    std::fs::copy(&addon, platform.join(ADDON)).unwrap();
    Some(Packed { main: pack(&root.join("host/node"), &tarballs), native: pack(&platform, &tarballs) })
}
