//! Incremental `boundary` calls over MCP (stdio): after one whole call the harness sends only
//! what it appended, with `since` the `acknowledged` entry; a history that is no longer the
//! acknowledged one fails with `diverged:` and is sent whole once.

use serde_json::{json, Value};

use crate::support::mcp::Mcp;
use crate::support::shared;

const WINDOW: u64 = 10_000_000;

fn boundary(mcp: &mut Mcp, arguments: Value) -> Result<Value, String> {
    let mut arguments = arguments;
    arguments["window"] = json!(WINDOW);
    arguments["reserve"] = json!(0);
    mcp.tool("boundary", arguments)
}

/// A version 1 Pi session as Pi migrates it (version 3: each entry has an id and its parent),
/// with the ids version 1 gives by position, so both read alike.
fn migrated(v1: &str) -> Vec<String> {
    let mut previous: Option<String> = None;
    v1.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if value["type"] == "session" {
                value["version"] = json!(3);
            } else {
                let id = format!("e{i}");
                value["id"] = json!(id);
                value["parentId"] = json!(previous.replace(id));
            }
            value.to_string()
        })
        .collect()
}

#[test]
#[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
fn incremental_boundaries_on_a_recorded_pi_session_then_a_diverged_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let text = std::fs::read_to_string(shared("pi").join("pi-mono__large-session.jsonl")).unwrap();
    let lines = migrated(&text);
    // A turn ends before each user message.
    let mut cuts: Vec<usize> = (2..lines.len()).filter(|&i| lines[i].contains(r#""role":"user""#)).collect();
    cuts.push(lines.len());
    let mut mcp = Mcp::start(&home);
    let k = "pi-incremental";

    let first = boundary(&mut mcp, json!({"conversation": k, "turn": 1, "transcript": lines[..cuts[0]].join("\n"), "include_transcript": false})).unwrap();
    let mut since = first["acknowledged"].as_str().expect("acknowledged").to_string();
    let (mut whole_bytes, mut sent_bytes) = (lines[..cuts[0]].join("\n").len(), lines[..cuts[0]].join("\n").len());
    let mut last = first;
    for (n, pair) in cuts.windows(2).enumerate() {
        let fragment = lines[pair[0]..pair[1]].join("\n");
        sent_bytes += fragment.len();
        whole_bytes += lines[..pair[1]].join("\n").len();
        let out = boundary(&mut mcp, json!({"conversation": k, "turn": n + 2, "transcript": fragment, "since": since, "format": "pi"})).unwrap();
        assert_eq!(out["action"]["kind"], "none", "{out:#}");
        assert_eq!(out["transcript"], "", "nothing changed: no context comes back");
        since = out["acknowledged"].as_str().expect("acknowledged").to_string();
        last = out;
    }
    eprintln!("bytes sent over {} boundaries: {whole_bytes} whole, {sent_bytes} incremental", cuts.len());
    assert!(sent_bytes * 20 < whole_bytes, "{sent_bytes} incremental, {whole_bytes} whole");

    // The whole session in one call decides alike and counts the same context.
    let whole = boundary(&mut mcp, json!({"conversation": "pi-whole", "turn": cuts.len(), "transcript": text, "include_transcript": false})).unwrap();
    assert_eq!(whole["usage"], last["usage"], "{whole:#}\n{last:#}");
    assert_eq!(whole["acknowledged"], last["acknowledged"]);

    // The harness rewinds: `since` names an entry that is no longer the last.
    let earlier = format!("e{}", cuts[cuts.len() - 2] - 1);
    let extra = json!({"type": "message", "id": "x1", "parentId": earlier, "message": {"role": "user", "content": [{"type": "text", "text": "Start over from here."}], "timestamp": 1}}).to_string();
    let error = boundary(&mut mcp, json!({"conversation": k, "turn": cuts.len() + 1, "transcript": extra, "since": earlier, "format": "pi"})).unwrap_err();
    assert!(error.starts_with("diverged:") && error.contains("send the whole transcript once"), "{error}");
    // An entry without its id cannot be followed.
    let bare = json!({"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 1}}).to_string();
    let error = boundary(&mut mcp, json!({"conversation": k, "turn": cuts.len() + 1, "transcript": bare, "since": since, "format": "pi"})).unwrap_err();
    assert!(error.contains("no `id`"), "{error}");
    // Whole once, then incremental again from the rewound history.
    let rewound = format!("{}\n{extra}", lines[..cuts[cuts.len() - 2]].join("\n"));
    let again = boundary(&mut mcp, json!({"conversation": k, "turn": cuts.len() + 1, "transcript": rewound, "include_transcript": false})).unwrap();
    assert_eq!(again["acknowledged"], "x1", "{again:#}");
    let next = json!({"type": "message", "id": "x2", "parentId": "x1", "message": {"role": "assistant", "content": [{"type": "text", "text": "Starting over."}], "timestamp": 2}}).to_string();
    let out = boundary(&mut mcp, json!({"conversation": k, "turn": cuts.len() + 2, "transcript": next, "since": "x1", "format": "pi", "include_transcript": true})).unwrap();
    assert_eq!(out["acknowledged"], "x2", "{out:#}");
    let context = cairn::transcript::formats::parse(out["transcript"].as_str().unwrap(), "context").unwrap().0;
    let ids: Vec<&str> = context.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(&ids[ids.len() - 2..], ["x1", "x2"]);
    let abandoned: Vec<String> = (cuts[cuts.len() - 2]..cuts[cuts.len() - 1]).map(|i| format!("e{i}")).collect();
    assert!(!ids.iter().any(|id| abandoned.iter().any(|a| a == id)), "the abandoned turn is not in the context");
}

#[test]
fn incremental_boundaries_in_openai_chat() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut mcp = Mcp::start(&home);
    let k = "chat-incremental";
    let m = |role: &str, text: &str| json!({"role": role, "content": text});
    let first = json!([m("system", "You are terse."), m("user", "What is 2+2?"), m("assistant", "4.")]);
    let out = boundary(&mut mcp, json!({"conversation": k, "turn": 1, "transcript": first.to_string()})).unwrap();
    let since = out["acknowledged"].as_str().unwrap().to_string();
    let fragment = json!([m("user", "And 3+3?"), m("assistant", "6.")]);
    let out = boundary(&mut mcp, json!({"conversation": k, "turn": 2, "transcript": fragment.to_string(), "since": since, "include_transcript": true})).unwrap();
    assert_eq!(out["format"], "openai", "{out:#}");
    let context: Value = serde_json::from_str(out["transcript"].as_str().unwrap()).unwrap();
    let texts: Vec<&str> = context.as_array().or_else(|| context["messages"].as_array()).unwrap().iter().map(|m| m["content"].as_str().unwrap_or_default()).collect();
    assert_eq!(texts, ["You are terse.", "What is 2+2?", "4.", "And 3+3?", "6."]);
    // The same fragment again: its entries are known, so the history is not the acknowledged one.
    let error = boundary(&mut mcp, json!({"conversation": k, "turn": 3, "transcript": fragment.to_string(), "since": out["acknowledged"]})).unwrap_err();
    assert!(error.starts_with("diverged:"), "{error}");
}
