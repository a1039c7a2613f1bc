//! `cairn opencode install` / `uninstall`: the plugin file and the MCP server entry they add
//! to a project, and the project's files given back byte for byte.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn ok(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failing(args: &[&str]) -> String {
    let out = cairn(args);
    assert!(!out.status.success(), "cairn {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir` with its bytes, for before/after comparisons.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                out.push((format!("{name}/"), Vec::new()));
                walk(root, &path, out);
            } else {
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A config as a user writes it: tabs, a provider, an MCP server of their own, no final newline.
const CONFIG: &str = "{\n\t\"$schema\": \"https://opencode.ai/config.json\",\n\t\"model\": \"mock/m\",\n\t\"mcp\": {\n\t\t\"docs\": {\"type\": \"remote\", \"url\": \"https://docs.example/mcp\"}\n\t},\n\t\"provider\": {}\n}";

const PLUGIN: &str = include_str!("../../../../examples/opencode-plugin/src/cairn.ts");

#[test]
fn install_adds_plugin_and_server_and_uninstall_gives_the_bytes_back() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("my-app");
    std::fs::create_dir(&project).unwrap();
    let dir = project.to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(project.as_path().join("opencode.json"), CONFIG).unwrap();
    let before = tree(project.as_path());

    ok(&["opencode", "install", "--project", dir, "--home", home.path().to_str().unwrap()]);
    let plugin = std::fs::read_to_string(project.as_path().join(".opencode/plugin/cairn.ts")).unwrap();
    assert_eq!(plugin, PLUGIN, "the plugin written is the one in examples/opencode-plugin");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(project.as_path().join("opencode.json")).unwrap()).unwrap();
    let command: Vec<&str> = config["mcp"]["cairn"]["command"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(command[0], env!("CARGO_BIN_EXE_cairn"));
    assert_eq!(command[1..], ["serve", "--expose", "recall", "--conversation", "my-app", "--home", home.path().to_str().unwrap()]);
    assert_eq!(config["mcp"]["cairn"]["type"], "local");
    // The user's own entries stay.
    assert_eq!(config["mcp"]["docs"]["url"], "https://docs.example/mcp");
    assert_eq!(config["model"], "mock/m");

    // Again: nothing changes.
    let installed = tree(project.as_path());
    let out = ok(&["opencode", "install", "--project", dir, "--home", home.path().to_str().unwrap()]);
    assert!(out.contains("already"), "{out}");
    assert_eq!(tree(project.as_path()), installed);

    // OpenCode adds files of its own to `.opencode/` when it loads the plugin; they stay.
    std::fs::write(project.as_path().join(".opencode/package.json"), "{}").unwrap();
    ok(&["opencode", "uninstall", "--project", dir]);
    let mut expected = before.clone();
    expected.extend([(".opencode/".to_string(), Vec::new()), (".opencode/package.json".to_string(), b"{}".to_vec())]);
    expected.sort();
    assert_eq!(tree(project.as_path()), expected);
    std::fs::remove_file(project.as_path().join(".opencode/package.json")).unwrap();
    std::fs::remove_dir(project.as_path().join(".opencode")).unwrap();

    // Once more after uninstall: the same install, and uninstall leaves nothing.
    ok(&["opencode", "install", "--project", dir]);
    ok(&["opencode", "uninstall", "--project", dir]);
    assert_eq!(tree(project.as_path()), before);
    let out = ok(&["opencode", "uninstall", "--project", dir]);
    assert!(out.contains("No Cairn plugin or MCP server"), "{out}");
}

#[test]
fn a_project_without_config_is_left_as_it_was() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("README.md"), "hi\n").unwrap();
    let before = tree(project.path());
    let out = ok(&["opencode", "install", "--project", project.path().to_str().unwrap()]);
    assert!(out.contains("opencode.json"), "{out}");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(project.path().join("opencode.json")).unwrap()).unwrap();
    assert_eq!(config["mcp"]["cairn"]["command"][1], "serve");
    ok(&["opencode", "uninstall", "--project", project.path().to_str().unwrap()]);
    assert_eq!(tree(project.path()), before);
}

#[test]
fn what_is_not_cairns_is_refused_and_nothing_written() {
    let project = tempfile::tempdir().unwrap();
    let dir = project.path().to_str().unwrap();
    let theirs = "{\n  \"mcp\": {\n    \"cairn\": {\"type\": \"remote\", \"url\": \"https://cairn.example\"}\n  }\n}\n";
    std::fs::write(project.path().join("opencode.json"), theirs).unwrap();
    let before = tree(project.path());
    let e = failing(&["opencode", "install", "--project", dir]);
    assert!(e.contains("not Cairn's"), "{e}");
    assert_eq!(tree(project.path()), before);
    // Uninstall leaves someone else's `cairn` server alone.
    ok(&["opencode", "uninstall", "--project", dir]);
    assert_eq!(tree(project.path()), before);

    std::fs::write(project.path().join("opencode.json"), "{}\n").unwrap();
    std::fs::create_dir_all(project.path().join(".opencode/plugin")).unwrap();
    std::fs::write(project.path().join(".opencode/plugin/cairn.ts"), "export const Mine = async () => ({})\n").unwrap();
    let before = tree(project.path());
    let e = failing(&["opencode", "install", "--project", dir]);
    assert!(e.contains("is not Cairn's plugin"), "{e}");
    assert_eq!(tree(project.path()), before);

    std::fs::remove_file(project.path().join(".opencode/plugin/cairn.ts")).unwrap();
    std::fs::write(project.path().join("opencode.json"), "{\n  // a comment\n}\n").unwrap();
    let e = failing(&["opencode", "install", "--project", dir]);
    assert!(e.contains("opencode.json:2:"), "{e}");
}
