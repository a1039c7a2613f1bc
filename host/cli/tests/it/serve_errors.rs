//! Every failed MCP tool call carries a machine code (`_meta["cairn/error"].code`) beside its
//! message, so a client matches on the kind of failure (resend the whole history on
//! `diverged`) instead of on the text; the text keeps its first word for older clients.

use serde_json::{json, Value};

use crate::support::mcp::Mcp;

/// A failed call's code and text.
fn failure(mcp: &mut Mcp, tool: &str, arguments: Value) -> (String, String) {
    let result = mcp.call("tools/call", json!({"name": tool, "arguments": arguments}));
    assert_eq!(result["isError"], true, "{tool} should fail: {result:#}");
    assert!(result.get("structuredContent").is_none(), "an error result holds no structured content (clients check it against the output schema): {result:#}");
    let code = result["_meta"]["cairn/error"]["code"].as_str().unwrap_or_else(|| panic!("{tool}: no code in {result:#}")).to_string();
    (code, result["content"][0]["text"].as_str().unwrap_or_default().to_string())
}

#[test]
fn every_failed_tool_call_carries_the_code_of_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut mcp = Mcp::start(&home);
    let chat = json!([{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}]).to_string();
    let first = mcp.tool("boundary", json!({"conversation": "k", "turn": 1, "window": 100000, "transcript": chat})).unwrap();
    assert!(first["acknowledged"].is_string(), "{first:#}");

    let (code, text) = failure(&mut mcp, "boundary", json!({"conversation": "k", "turn": 2, "window": 100000, "transcript": chat, "since": "not-the-last"}));
    assert_eq!(code, "diverged", "{text}");
    assert!(text.starts_with("diverged:"), "{text}");

    let (code, text) = failure(&mut mcp, "show", json!({"conversation": "nobody"}));
    assert_eq!(code, "not-found", "{text}");
    let (code, text) = failure(&mut mcp, "undo", json!({"conversation": "k"}));
    assert_eq!(code, "refused", "nothing to undo: {text}");
    let (code, text) = failure(&mut mcp, "compact", json!({"conversation": "BAD KEY", "transcript": chat}));
    assert_eq!(code, "invalid-request", "{text}");
    assert!(text.starts_with("conversation:"), "{text}");
    let (code, text) = failure(&mut mcp, "compact", json!({"conversation": "k", "transcript": "{\"cairn\":\"transcript\",\"version\":1}\n{oops"}));
    assert_eq!(code, "transcript-invalid", "{text}");
    let (code, text) = failure(&mut mcp, "unpin", json!({"conversation": "k", "ids": ["nope"]}));
    assert_eq!(code, "refused", "{text}");
    let (code, text) = failure(&mut mcp, "artifact_get", json!({"uri": "artifact://nothing"}));
    assert_eq!(code, "invalid-request", "{text}");
}

/// The recall tool's failures are what the model reads (`{"error": …}`), with the code beside.
#[test]
fn a_failed_recall_call_carries_its_code_and_tells_the_model_why() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut mcp = Mcp::start_with(&home, &["--expose", "all", "--conversation", "k"]);
    let result = mcp.call("tools/call", json!({"name": "session_history", "arguments": {"action": "page", "archive_id": "x", "path": "/etc"}}));
    assert_eq!(result["isError"], true, "{result:#}");
    assert_eq!(result["_meta"]["cairn/error"]["code"], "invalid-request", "{result:#}");
    assert!(result["structuredContent"]["error"].as_str().unwrap().contains("unknown field"), "{result:#}");
}
