//! The plugins' and the SDK's own unit tests (trigger rules, checkpoint extraction, summary
//! validation, seed assembly) run natively, so the README's one test command covers them.

use std::path::Path;
use std::process::Command;

fn cargo_test(manifest: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-unit-tests");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(&root).args(["test", "--workspace", "--manifest-path", manifest]).env("CARGO_TARGET_DIR", &target);
    for (key, _) in std::env::vars() {
        if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_TARGET_DIR" || key.ends_with("RUSTFLAGS") {
            cmd.env_remove(&key);
        }
    }
    let out = cmd.output().expect("running cargo test for the guests");
    assert!(out.status.success(), "{manifest}:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn plugin_unit_tests_pass() {
    cargo_test("plugins/Cargo.toml");
}

#[test]
fn sdk_unit_tests_pass() {
    cargo_test("sdk/rust/Cargo.toml");
}
