//! No size cliff over MCP: a request over `--max-request-bytes` gets a JSON-RPC error naming
//! the limit at once, on stdio (where rmcp alone drops the line and its caller waits forever)
//! as over HTTP (413), and the server goes on; the harness tools read a transcript `path`
//! instead of its text, over stdio only.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve_http::{self, Client, Server};
use crate::support::mcp::Mcp;

const LIMIT: u64 = 32 * 1024 * 1024;

/// A `tools/call` of `compact` whose transcript alone is 32 MiB: over the default limit.
fn oversized_call(id: u64) -> Vec<u8> {
    let huge = "x".repeat(LIMIT as usize);
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "compact", "arguments": {"conversation": "huge", "transcript": huge}}}).to_string().into_bytes()
}

fn assert_over_limit(message: &Value, id: Value, bytes: Option<usize>) {
    assert_eq!(message["jsonrpc"], "2.0", "{message}");
    assert_eq!(message["id"], id, "{message}");
    assert_eq!(message["error"]["code"], -32600, "{message}");
    let text = message["error"]["message"].as_str().unwrap();
    assert!(text.contains(&format!("over this server's limit of {LIMIT} bytes (--max-request-bytes)")), "{text}");
    assert!(text.contains("`since`") && text.contains("`path`"), "{text}");
    if let Some(bytes) = bytes {
        assert!(text.starts_with(&format!("request of {bytes} bytes")), "{text}");
    }
}

#[test]
fn stdio_answers_a_request_over_the_limit_within_a_second_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start(&dir.path().join("home"));
    let line = oversized_call(4242);

    let started = Instant::now();
    mcp.send_line(&line);
    let written = Instant::now();
    let answer = mcp.receive();
    let (after_write, after_start) = (written.elapsed(), started.elapsed());
    eprintln!("{} bytes: written in {:?}, the error {after_write:?} after that ({after_start:?} from the first byte)", line.len(), written - started);
    assert_over_limit(&answer, json!(4242), Some(line.len()));
    assert!(after_write < Duration::from_secs(1), "the error came {after_write:?} after the line was written");

    // The same server serves the next call, and an id that is a string is found too.
    let plugins = mcp.tool("plugins_list", json!({})).unwrap();
    assert!(!plugins["plugins"].as_array().unwrap().is_empty(), "{plugins}");
    let huge = "y".repeat(LIMIT as usize);
    let named = format!(r#"{{"jsonrpc":"2.0","method":"tools/call","id":"big-one","params":{{"name":"compact","arguments":{{"conversation":"huge","transcript":"{huge}"}}}}}}"#);
    mcp.send_line(named.as_bytes());
    assert_over_limit(&mcp.receive(), json!("big-one"), None);
    mcp.tool("plugins_list", json!({})).unwrap();
}

#[test]
fn http_answers_a_body_over_the_limit_with_413_and_a_json_rpc_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let home = home.to_str().unwrap();
    let (_, secret) = serve_http::token(home, "alpha");
    let server = Server::start(home, dir.path(), &[]);
    let mut client = Client::new(&server, Some(&secret));
    client.initialize();

    let body: Value = serde_json::from_slice(&oversized_call(77)).unwrap();
    let started = Instant::now();
    let answer = client.post(&body);
    eprintln!("HTTP: 413 after {:?}", started.elapsed());
    assert_eq!(answer.status, 413, "{}", &answer.body[..answer.body.len().min(300)]);
    assert!(answer.content_type.starts_with("application/json"), "{}", answer.content_type);
    assert_over_limit(&answer.message(), json!(77), Some(body.to_string().len()));

    let compacted = client.ok("compact", json!({"conversation": "after", "transcript": serve_http::session_text(), "include_transcript": false}));
    assert_eq!(compacted["committed"], true, "{compacted}");
}

/// What two runs of the same compaction share: not their archive ids (each run draws its own,
/// named in the artifact URIs), hence not the token counts after, nor the timings.
fn report_of(result: &Value) -> Value {
    let archive = result["archive_id"].as_str().unwrap();
    let unnamed = |text: &Value| text.as_str().unwrap().replace(archive, "ARCHIVE");
    let entries: Vec<Value> = unnamed(&result["transcript"])
        .lines()
        .map(|line| {
            let mut entry: Value = serde_json::from_str(line).unwrap();
            entry.as_object_mut().unwrap().remove("tokens");
            entry
        })
        .collect();
    let steps: Vec<Value> = result["steps"].as_array().unwrap().iter().map(|s| json!([s["plugin"], s["outcome"]])).collect();
    json!({
        "tokens_before": result["tokens_before"], "steps": steps,
        "committed_by": result["committed_by"], "committed": result["committed"], "format": result["format"],
        "entries": entries, "first_kept_entry_id": result["first_kept_entry_id"], "prefix_summary": unnamed(&result["prefix_summary"]),
    })
}

#[test]
fn harness_tools_read_a_transcript_path_over_stdio_only() {
    let dir = tempfile::tempdir().unwrap();
    let text = serve_http::session_text();
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, &text).unwrap();
    let path = file.to_str().unwrap();
    let mut mcp = Mcp::start(&dir.path().join("home"));

    // The same report either way (dry runs: both see the same conversation).
    let by_text = mcp.tool("compact", json!({"conversation": "by-path", "transcript": text, "dry_run": true})).unwrap();
    let by_path = mcp.tool("compact", json!({"conversation": "by-path", "path": path, "dry_run": true})).unwrap();
    assert_eq!(by_path["committed"], true, "{by_path}");
    assert!(report_of(&by_path) == report_of(&by_text), "by path and by text differ");
    let by_path = mcp.tool("compact", json!({"conversation": "by-path", "path": path})).unwrap();
    assert_eq!(by_path["committed"], true, "{by_path}");

    // boundary (a dry run) and undo take a path too.
    let boundary = mcp.tool("boundary", json!({"conversation": "by-path", "turn": 13, "path": path, "window": 200000, "dry_run": true, "include_transcript": false})).unwrap();
    assert_eq!(boundary["dry_run"], true, "{boundary}");
    let undone = mcp.tool("undo", json!({"conversation": "by-path", "path": path})).unwrap();
    assert_eq!(undone["undone"], json!([by_path["archive_id"]]), "{undone}");

    // Exactly one of them; a file that is not there is named.
    let both = mcp.tool("compact", json!({"conversation": "by-path", "transcript": text, "path": path})).unwrap_err();
    assert!(both.contains("not both"), "{both}");
    let neither = mcp.tool("compact", json!({"conversation": "by-path"})).unwrap_err();
    assert!(neither.contains("no transcript"), "{neither}");
    let missing = dir.path().join("missing.jsonl");
    let absent = mcp.tool("handover", json!({"conversation": "by-path", "path": missing})).unwrap_err();
    assert!(absent.contains("missing.jsonl"), "{absent}");

    // Over HTTP a path is refused before anything is read: a remote client never makes the
    // server read its files.
    let home = dir.path().join("http-home");
    let home = home.to_str().unwrap();
    let (_, secret) = serve_http::token(home, "alpha");
    let server = Server::start(home, dir.path(), &[]);
    let mut client = Client::new(&server, Some(&secret));
    client.initialize();
    for (tool, arguments) in [
        ("compact", json!({"conversation": "remote", "path": path})),
        ("handover", json!({"conversation": "remote", "path": path})),
        ("boundary", json!({"conversation": "remote", "turn": 1, "path": path, "window": 200000})),
        ("undo", json!({"conversation": "remote", "path": path})),
    ] {
        let refused = client.call(tool, arguments).unwrap_err();
        assert!(refused.contains("`path` is only accepted over stdio, where harness and server share a disk"), "{tool}: {refused}");
    }
    assert_eq!(serve_http::conversations(home, "alpha"), Vec::<String>::new());
}

#[test]
fn the_harness_tools_that_take_a_transcript_say_so_in_their_schema_and_no_agent_tool_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = Mcp::start_with(&dir.path().join("home"), &["--expose", "all"]);
    let tools = mcp.call("tools/list", json!({}));
    for tool in tools["tools"].as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        let path = &tool["inputSchema"]["properties"]["path"];
        if ["compact", "handover", "boundary", "undo"].contains(&name) {
            let doc = path["description"].as_str().unwrap_or_else(|| panic!("{name}: {tool:#}"));
            assert!(doc.contains("stdio") && doc.contains("refused over HTTP"), "{name}: {doc}");
            let required = tool["inputSchema"]["required"].as_array().unwrap();
            assert!(!required.contains(&json!("transcript")), "{name}: {required:?}");
        } else {
            assert!(path.is_null(), "{name} takes a path: {tool:#}");
        }
    }
}
