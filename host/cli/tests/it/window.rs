//! Every committed context fits its window, through the real binary: a recorded OpenAI chat
//! session (`../shared/transcripts`) with a 3.6 MB log as the newest tool output or as its
//! first one, under `cairn boundary --window`, `cairn compact --window` and the MCP `compact`
//! tool of `cairn serve`; and a compaction that commits nothing says so (`cairn compact` exits
//! 3, `"committed": false`, `"archive_id": null`). Each case prints its tokens before → after.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::support::mcp::Mcp;
use crate::support::shared;

const WINDOW: u64 = 128_000;
const GIANT_CALL: &str = "call_cairn_giant_log";

fn cairn(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cairn")).args(args).env("CAIRN_LOG", "error").output().expect("running cairn")
}

fn ok_json(args: &[&str]) -> Value {
    let out = cairn(args);
    assert!(out.status.success(), "cairn {args:?} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("cairn {args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A ~3.6 MB build log, every line different.
fn giant_log() -> String {
    let mut log = String::with_capacity(3_700_000);
    let mut n = 0u64;
    while log.len() < 3_600_000 {
        let x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        log.push_str(&format!(
            "2026-12-01T16:{:02}:{:02}.{:03}Z INFO worker-{} compiled crate_{n}/src/module_{}.rs in {}ms (cache {:08x})\n",
            (n / 60_000) % 60,
            (n / 1_000) % 60,
            n % 1_000,
            x % 16,
            (x >> 8) % 400,
            (x >> 20) % 5_000,
            (x >> 32) as u32
        ));
        n += 1;
    }
    log
}

/// The recorded mypy session (OpenAI chat JSON), its trailing unanswered `finish` call taken off.
fn mypy_session() -> Value {
    let file = shared("openai-chat").join("adp__swegym-openhands__python__mypy-15976_0.json");
    let mut session: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let messages = session["messages"].as_array_mut().unwrap();
    while messages.last().is_some_and(|m| m["tool_calls"].is_array()) {
        messages.pop();
    }
    session
}

/// (a) the session, then one more tool call whose output is the log.
fn with_recent_giant(log: &str) -> Value {
    let mut session = mypy_session();
    let messages = session["messages"].as_array_mut().unwrap();
    messages.push(json!({"role": "assistant", "content": "Let me read the whole build log.", "tool_calls": [
        {"id": GIANT_CALL, "type": "function", "function": {"name": "execute_bash", "arguments": "{\"command\":\"cat /workspace/build.log\"}"}}
    ]}));
    messages.push(json!({"role": "tool", "tool_call_id": GIANT_CALL, "name": "execute_bash", "content": log}));
    session
}

/// (b) the session with the log as its first tool result; returns that call's id too.
fn with_first_giant(log: &str) -> (Value, String) {
    let mut session = mypy_session();
    let messages = session["messages"].as_array_mut().unwrap();
    let first = messages.iter_mut().find(|m| m["role"] == "tool").unwrap();
    first["content"] = json!(log);
    let id = first["tool_call_id"].as_str().unwrap().to_string();
    (session, id)
}

struct Case {
    _dir: tempfile::TempDir,
    file: PathBuf,
    home: PathBuf,
}

fn case(session: &Value) -> Case {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.json");
    std::fs::write(&file, serde_json::to_string(session).unwrap()).unwrap();
    let home = dir.path().join("home");
    Case { _dir: dir, file, home }
}

/// The giant's call is in the context, its result clipped to a pointer at the log, which
/// `cairn artifact` returns byte for byte.
fn check_giant_recoverable(label: &str, messages: &[Value], call: &str, home: &Path, conversation: &str, log: &str) {
    let at = messages.iter().position(|m| m["tool_calls"].as_array().is_some_and(|calls| calls.iter().any(|c| c["id"] == call))).unwrap_or_else(|| panic!("{label}: the call {call} is gone"));
    let result = messages[at + 1..].iter().take_while(|m| m["role"] == "tool").find(|m| m["tool_call_id"] == call).unwrap_or_else(|| panic!("{label}: {call} has no result after it"));
    let content = result["content"].as_str().unwrap();
    assert!(content.len() < 200_000, "{label}: the output is still {} bytes", content.len());
    let uri = content.split("artifact://").nth(1).map(|rest| format!("artifact://{}", rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '/')).next().unwrap()));
    let uri = uri.unwrap_or_else(|| panic!("{label}: no artifact URI in {}", &content[..content.len().min(500)]));
    let uri = uri.trim_end_matches('/');
    let out = cairn(&["artifact", uri, "--home", s(home), "--conversation", conversation]);
    assert!(out.status.success(), "{label}: cairn artifact {uri}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == log.as_bytes(), "{label}: {uri} is not the log byte for byte ({} bytes)", out.stdout.len());
}

/// `cairn compact FILE --window W --json --out`: committed, fits, the log recoverable.
fn compact_fits(label: &str, c: &Case, call: &str, log: &str) -> (u64, u64) {
    let out = c.file.with_file_name("out.json");
    let report = ok_json(&["compact", s(&c.file), "--window", &WINDOW.to_string(), "--json", "--home", s(&c.home), "--conversation", "window", "--out", s(&out), "--out-format", "openai"]);
    let (before, after) = (report["tokens_before"].as_u64().unwrap(), report["tokens_after"].as_u64().unwrap());
    eprintln!("{label}: cairn compact --window {WINDOW}: {before} → {after} tokens (committed by {})", report["committed_by"]);
    assert_eq!(report["committed"], true, "{label}: {report:#}");
    assert!(report["archive_id"].is_string(), "{label}: {report:#}");
    assert!(after <= WINDOW, "{label}: {before} → {after} tokens: {report:#}");
    assert!(report.get("over_window").is_none(), "{label}: {report:#}");
    let messages: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    check_giant_recoverable(label, &messages, call, &c.home, "window", log);
    (before, after)
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_recent_three_megabyte_tool_output_is_held_to_the_window_at_the_boundary_and_by_compact() {
    let log = giant_log();
    let c = case(&with_recent_giant(&log));

    // The lifecycle: the usable window is the window less the reserve.
    let outcome = ok_json(&["boundary", s(&c.file), "--turn", "3", "--window", &WINDOW.to_string(), "--count", "--home", s(&c.home), "--conversation", "boundary", "--json"]);
    let report = &outcome["report"];
    let usage = outcome["usage"].as_u64().unwrap();
    let (before, after) = (report["tokens_before"].as_u64().unwrap(), report["tokens_after"].as_u64().unwrap());
    eprintln!("(a) cairn boundary --window {WINDOW} --count: usage {usage}; {before} → {after} tokens (action {}, committed by {})", outcome["action"], report["committed_by"]);
    assert_eq!(outcome["action"]["kind"], "compacted", "{outcome:#}");
    assert_eq!(report["committed"], true, "{outcome:#}");
    assert!(usage > WINDOW, "the log alone is over the window: {usage}");
    assert!(after <= WINDOW - 16_384, "{before} → {after}: over the usable window: {outcome:#}");
    assert!(report.get("over_window").is_none(), "{outcome:#}");

    let (before, after) = compact_fits("(a) recent output", &c, GIANT_CALL, &log);
    assert!(before > WINDOW && after <= WINDOW);
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn a_three_megabyte_first_tool_output_is_clipped_and_the_context_fits() {
    let log = giant_log();
    let (session, call) = with_first_giant(&log);
    let c = case(&session);
    let (before, after) = compact_fits("(b) first output", &c, &call, &log);
    assert!(before > WINDOW && after <= WINDOW);
}

#[test]
fn a_compaction_that_commits_nothing_exits_3_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small.json");
    std::fs::write(&file, json!([{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing test."}]).to_string()).unwrap();
    let home = dir.path().join("home");

    let out = cairn(&["compact", s(&file), "--json", "--home", s(&home), "--conversation", "small", "--window", &WINDOW.to_string()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("(c) cairn compact (nothing to do): {} → {} tokens, committed {}", report["tokens_before"], report["tokens_after"], report["committed"]);
    assert_eq!(report["committed"], false, "{report:#}");
    assert!(report["archive_id"].is_null(), "{report:#}");
    assert!(report["not_committed"].as_str().unwrap().contains("last-resort"), "{report:#}");
    assert_eq!(report["tokens_after"], report["tokens_before"]);
    let archives = home.join("conversations/small/archives");
    assert!(std::fs::read_dir(&archives).map_or(true, |mut d| d.next().is_none()), "no archive written");

    // The human-readable report says it too, with the same status.
    let out = cairn(&["compact", s(&file), "--home", s(&home), "--conversation", "small"]);
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("nothing committed, no archive written"), "{stdout}");
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn the_mcp_compact_tool_holds_the_result_to_its_window_and_reports_nothing_committed() {
    let log = giant_log();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let mut mcp = Mcp::start(&home);

    let result = mcp.tool("compact", json!({"conversation": "mcp-window", "transcript": serde_json::to_string(&with_recent_giant(&log)).unwrap(), "window": WINDOW})).unwrap();
    let (before, after) = (result["tokens_before"].as_u64().unwrap(), result["tokens_after"].as_u64().unwrap());
    eprintln!("(d) MCP compact window {WINDOW}: {before} → {after} tokens (committed by {})", result["committed_by"]);
    assert_eq!(result["committed"], true, "{}", result["not_committed"]);
    assert!(result["archive_id"].is_string());
    assert!(before > WINDOW && after <= WINDOW, "{before} → {after}");
    assert!(result.get("over_window").is_none(), "{}", result["over_window"]);
    let messages: Vec<Value> = serde_json::from_str(result["transcript"].as_str().unwrap()).unwrap();
    check_giant_recoverable("(d) MCP", &messages, GIANT_CALL, &home, "mcp-window", &log);

    let small = json!([{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing test."}]).to_string();
    let result = mcp.tool("compact", json!({"conversation": "mcp-small", "transcript": small, "window": WINDOW})).unwrap();
    eprintln!("(d) MCP compact (nothing to do): {} → {} tokens, committed {}", result["tokens_before"], result["tokens_after"], result["committed"]);
    assert_eq!(result["committed"], false, "{result:#}");
    assert!(result["archive_id"].is_null(), "{result:#}");
    assert!(result["not_committed"].is_string(), "{result:#}");
    assert!(result["first_kept_entry_id"].is_null(), "{result:#}");
}
