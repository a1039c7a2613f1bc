//! A cold compiled-code cache (a fresh machine, or a `cairn` updated since the cache was
//! filled): `cairn serve` answers at once while its plugins compile in the background, every
//! `cairn <agent> install` compiles them ahead, and `cairn doctor` says when the cache is cold.
//! Each test has a cache of its own, empty at first.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use serde_json::json;

use crate::support::mcp::Mcp;

const EXE: &str = env!("CARGO_BIN_EXE_cairn");

/// How many compiled components the cache at `dir` holds.
fn cached(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |listing| listing.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".cwasm")).count())
}

fn bundled() -> usize {
    cairn_bundle::BUNDLED.len()
}

/// `cairn ARGS` with HOME and the cache in `dir` (a fresh user), nothing else of the caller's
/// setup.
fn cairn(dir: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("HOME", dir.join("user"))
        .env("CAIRN_CACHE_DIR", dir.join("cache"))
        .env("CAIRN_LOG", "error")
        .env_remove("CODEX_HOME")
        .env_remove("CAIRN_HOME")
        .env_remove("XDG_DATA_HOME")
        .output()
        .expect("running cairn")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A short OpenAI-format session with enough tool output to compact.
fn session() -> String {
    let mut messages = vec![json!({"role": "system", "content": "You are a coding agent."}), json!({"role": "user", "content": "Fix the failing build."})];
    for i in 0..12 {
        let call = format!("call_{i}");
        let output: String = (0..80).map(|j| format!("line {j} of src/module_{i}.rs: fn item_{i}_{j}() {{}}\n")).collect();
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function", "function": {"name": "read", "arguments": json!({"path": format!("src/module_{i}.rs")}).to_string()}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": call, "content": output}));
        messages.push(json!({"role": "assistant", "content": format!("Read module {i}.")}));
    }
    serde_json::to_string(&messages).unwrap()
}

/// The handshake and the tool list come back while the cache is still being filled (before,
/// the server compiled every plugin first: seconds, and Codex gave up on it); recall, which
/// reads only storage, answers too; a call that runs the plugins waits for them and succeeds.
#[test]
fn serve_answers_at_once_from_a_cold_cache_and_a_call_that_runs_the_plugins_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let (home, cache) = (dir.path().join("home"), dir.path().join("cache"));
    let started = Instant::now();
    let mut mcp = Mcp::start_with_env(&home, &["--expose", "all"], &[("CAIRN_CACHE_DIR", &cache)]);
    let tools = mcp.call("tools/list", json!({}));
    let answered = started.elapsed();
    let when_answered = cached(&cache);
    assert!(when_answered < bundled(), "initialize and tools/list were answered only after all {} plugins were compiled ({answered:?})", bundled());
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"session_history") && names.contains(&"compact"), "{names:?}");

    let recall = mcp.tool("session_history", json!({"action": "summary"})).unwrap();
    assert!(recall["text"].as_str().unwrap().contains("no history"), "{recall:#}");

    let compacted = mcp.tool("compact", json!({"conversation": "cold", "transcript": session(), "include_transcript": false})).unwrap();
    assert_eq!(compacted["committed"], true, "{compacted:#}");
    assert_eq!(cached(&cache), bundled(), "the plugins the call waited for are in the cache");
    eprintln!("answered after {answered:?} with {when_answered} of {} plugins cached; compacted after {:?}", bundled(), started.elapsed());
}

/// A plugin that does not load no longer stops the server: it starts, recall works, and each
/// call that runs the plugins answers with the load's error, naming the plugin.
#[test]
fn a_plugin_that_does_not_load_fails_the_calls_that_need_it_naming_it_and_recall_still_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (home, plugins) = (dir.path().join("home"), dir.path().join("plugins"));
    std::fs::create_dir(&plugins).unwrap();
    std::fs::write(plugins.join("broken.toml"), "name = \"broken-strategy\"\nkind = \"strategy\"\nversion = \"0.1.0\"\n").unwrap();
    std::fs::write(plugins.join("broken.wasm"), b"\0asm not a component").unwrap();
    let mut mcp = Mcp::start_with_env(&home, &["--expose", "all", "--plugin-dir", plugins.to_str().unwrap()], &[("CAIRN_CACHE_DIR", &crate::support::shared_cache())]);
    assert!(mcp.tool("session_history", json!({"action": "summary"})).is_ok());
    let refused = mcp.tool("compact", json!({"conversation": "broken", "transcript": session()})).unwrap_err();
    assert!(refused.contains("broken-strategy"), "{refused}");
    let listed = mcp.tool("plugins_list", json!({})).unwrap_err();
    assert!(listed.contains("broken-strategy"), "{listed}");
}

/// A new user's install leaves the cache warm and says so.
#[test]
fn codex_install_compiles_the_bundled_plugins_into_an_empty_cache() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("user")).unwrap();
    let out = cairn(dir.path(), &["codex", "install"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cache = dir.path().join("cache");
    assert_eq!(cached(&cache), bundled(), "{}", stdout(&out));
    let said = format!("Compiled {} bundled plugins into the cache at {}", bundled(), cache.display());
    assert!(stdout(&out).contains(&said), "{}", stdout(&out));

    let again = cairn(dir.path(), &["codex", "install"]);
    assert!(stdout(&again).contains(&format!("The {} bundled plugins are already compiled in the cache at {}", bundled(), cache.display())), "{}", stdout(&again));
}

/// A cold cache is a warning with its fix; once warmed by the fix, the check passes.
#[test]
fn doctor_warns_on_a_cold_cache_with_the_fix_and_not_on_a_warm_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("user")).unwrap();
    let cache_line = |out: &Output| stdout(out).lines().find(|l| l.contains("  cache: ")).unwrap_or_else(|| panic!("no cache check:\n{}", stdout(out))).to_string();

    let cold = cache_line(&cairn(dir.path(), &["doctor"]));
    assert!(cold.starts_with("warn  cache: "), "{cold}");
    assert!(cold.contains(&format!("{} of the {} bundled plugins are not compiled", bundled(), bundled())) && cold.contains("`cairn plugins list`"), "{cold}");
    assert_eq!(cached(&dir.path().join("cache")), 0, "doctor compiles nothing");

    assert!(cairn(dir.path(), &["plugins", "list"]).status.success());
    let warm = cache_line(&cairn(dir.path(), &["doctor"]));
    assert!(warm.starts_with("ok    cache: "), "{warm}");
}
