//! Recorded Pi sessions (`../shared/transcripts/pi/`) as SDK entries, for the checkpoint tests
//! (`tests/checkpoint_sessions.rs` and the unit tests of `src/checkpoint.rs`).

use std::path::PathBuf;

use crate::types::{Entry, Origin, Part, Role, ToolCall, ToolResult};

/// The recorded sessions this machine has, as (name, entries).
pub fn sessions() -> Vec<(String, Vec<Entry>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts/pi");
    let Ok(list) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: no recorded sessions at {}", dir.display());
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = list.filter_map(|f| f.ok()).map(|f| f.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
    files.sort();
    files.into_iter().map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), pi_entries(&std::fs::read_to_string(&path).unwrap()))).collect()
}

/// A Pi session's messages as entries: enough of Pi's format for extraction (the host's reader
/// is the full one).
fn pi_entries(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let Some(message) = value.get("message").filter(|_| value["type"] == "message") else { continue };
        let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let blocks = || message["content"].as_array().into_iter().flatten();
        let texts = || blocks().filter(|b| b["type"] == "text").map(|b| str_of(&b["text"])).collect::<Vec<_>>().join("\n");
        let (role, origin, parts) = match message["role"].as_str().unwrap_or_default() {
            "user" => (Role::User, Origin::Operator, vec![Part::Text(texts())]),
            "assistant" => {
                let parts = blocks()
                    .filter_map(|b| match b["type"].as_str()? {
                        "text" => Some(Part::Text(str_of(&b["text"]))),
                        "thinking" => Some(Part::Thinking(str_of(&b["thinking"]))),
                        "toolCall" => Some(Part::ToolCall(ToolCall { id: str_of(&b["id"]), name: str_of(&b["name"]), args: b["arguments"].to_string() })),
                        _ => None,
                    })
                    .collect();
                (Role::Assistant, Origin::Agent, parts)
            }
            "toolResult" => {
                let result = ToolResult { call_id: str_of(&message["toolCallId"]), content: texts(), is_error: message["isError"] == true, elided: None };
                (Role::Tool, Origin::Tool, vec![Part::ToolResult(result)])
            }
            "bashExecution" => (Role::User, Origin::Harness, vec![Part::Text(format!("$ {}\n{}", str_of(&message["command"]), str_of(&message["output"])))]),
            _ => continue,
        };
        out.push(Entry { id: format!("e{n}"), role, origin, parts, tokens: 0, turn: 0, pinned: false });
    }
    out
}
