//! `cairn serve` driven by the official MCP clients: the Python harness example and its tests
//! (`mcp` from PyPI: every tool, two servers on one conversation, a policy swap under load),
//! and the Pi extension tested with Pi's own code from npm.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::shared;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name).canonicalize().unwrap()
}

fn run(command: &mut Command) {
    let out = command.env("CAIRN_BIN", env!("CARGO_BIN_EXE_cairn")).env("CAIRN_SHARED", shared("")).env("CAIRN_LOG", "warn").output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(out.status.success(), "{command:?} failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_python_mcp, ignore = "needs the `mcp` Python package (pip install -r examples/python-harness/requirements.txt)")]
fn the_python_mcp_client_drives_every_tool_across_servers_and_policy_swaps() {
    run(Command::new("python3").args(["-m", "unittest", "-v"]).current_dir(example("python-harness")));
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
#[cfg_attr(no_npm, ignore = "needs Node.js 20+ with npm")]
fn the_pi_extension_compacts_pi_sessions_that_pis_own_code_accepts() {
    let dir = example("pi-extension");
    if !dir.join("node_modules").is_dir() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir));
    }
    run(Command::new("npm").args(["test"]).current_dir(&dir));
}
