//! Anthropic's Messages API as Claude Code speaks it: `POST /v1/messages?beta=true` with
//! `"stream": true`, answered by server-sent events (`message_start`, `content_block_start` /
//! `content_block_delta` / `content_block_stop` per block, `message_delta` with the stop reason
//! and output usage, `message_stop`); `POST /v1/messages/count_tokens` answered by a count.
//!
//! What Claude Code 2.1.328 sends (seen here): `system` is a list of text blocks (the first a
//! billing header); `messages` holds `user`, `assistant` and sometimes `system` roles (the
//! environment of a fresh session). After a compaction its reminders, hook context among them
//! ("SessionStart hook additional context: …"), come as `<system-reminder>` text blocks of the
//! user message that also holds the operator's prompt, its last block; consecutive results of one
//! turn are merged into one message. A `400` "prompt is too long" makes it compact ("reactive"
//! automatic compaction, `PreCompact` trigger `auto`) and send the request again.

#![allow(dead_code)]

use serde_json::{json, Value};

use super::{Reply, Request};

/// A Messages request (streamed or not), not a token count.
pub fn is_messages(request: &Request) -> bool {
    request.method == "POST" && request.path.starts_with("/v1/messages") && !is_count_tokens(request)
}

pub fn is_count_tokens(request: &Request) -> bool {
    request.path.starts_with("/v1/messages/count_tokens")
}

/// `{"input_tokens": n}` for `/v1/messages/count_tokens`.
pub fn count_tokens_reply(input_tokens: u64) -> Reply {
    Reply::json(200, json!({"input_tokens": input_tokens}))
}

/// The text of a content value: a string, or the text (and tool results' text) of its blocks.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block["text"].as_str().unwrap_or_default().to_string(),
                Some("tool_result") => content_text(&block["content"]),
                Some("tool_use") => block["input"].to_string(),
                // What ToolSearch answers: the tools it loaded.
                Some("tool_reference") => format!("tool_reference:{}", block["tool_name"].as_str().unwrap_or_default()),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Everything the model is shown: the system prompt and every message, in order.
pub fn full_text(request: &Request) -> String {
    let mut text = content_text(&request.body["system"]);
    for message in messages(request) {
        text.push('\n');
        text.push_str(&content_text(&message["content"]));
    }
    text
}

pub fn messages(request: &Request) -> &[Value] {
    request.body["messages"].as_array().map_or(&[], Vec::as_slice)
}

/// The last message of the `user` role (tool results come back in one).
pub fn last_user(request: &Request) -> Option<&Value> {
    messages(request).iter().rev().find(|m| m["role"] == "user")
}

/// The text of the last user message.
pub fn last_user_text(request: &Request) -> String {
    last_user(request).map(|m| content_text(&m["content"])).unwrap_or_default()
}

/// What the operator typed last: the last text block of the last user message that is not a
/// `<system-reminder>` (Claude Code puts its reminders, and hook context, in the same message).
pub fn last_prompt(request: &Request) -> String {
    match last_user(request).map(|m| &m["content"]) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => {
            blocks.iter().rev().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).find(|t| !t.trim_start().starts_with("<system-reminder>")).unwrap_or_default().to_string()
        }
        _ => String::new(),
    }
}

/// Every text block of the request's messages (and `system`-role messages whole), with its role.
pub fn text_blocks(request: &Request) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for message in messages(request) {
        let role = message["role"].as_str().unwrap_or_default().to_string();
        match &message["content"] {
            Value::String(text) => out.push((role, text.clone())),
            Value::Array(blocks) => out.extend(blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).map(|t| (role.clone(), t.to_string()))),
            _ => {}
        }
    }
    out
}

/// The context SessionStart hooks added ("SessionStart hook additional context: …"), as a
/// system-role message or a `<system-reminder>` block.
pub fn session_start_context(request: &Request) -> Vec<String> {
    text_blocks(request).into_iter().map(|(_, text)| text).filter(|t| t.contains("SessionStart hook additional context")).collect()
}

/// A `400` the API answers a request over the model's window with; Claude Code then compacts
/// and sends the request again.
pub fn prompt_too_long() -> Reply {
    Reply::json(400, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 1050000 tokens > 1000000 maximum"}}))
}

/// The `tool_result` blocks of the last user message: `(tool_use_id, text)`.
pub fn tool_results(request: &Request) -> Vec<(String, String)> {
    let Some(Value::Array(blocks)) = last_user(request).map(|m| &m["content"]) else { return Vec::new() };
    blocks.iter().filter(|b| b["type"] == "tool_result").map(|b| (b["tool_use_id"].as_str().unwrap_or_default().to_string(), content_text(&b["content"]))).collect()
}

/// Every `tool_result` in the request's messages: `(tool_use_id, text)`.
pub fn all_tool_results(request: &Request) -> Vec<(String, String)> {
    messages(request)
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| (b["tool_use_id"].as_str().unwrap_or_default().to_string(), content_text(&b["content"])))
        .collect()
}

/// The names of the tools offered.
pub fn tool_names(request: &Request) -> Vec<String> {
    request.body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str().map(str::to_string)).collect()
}

/// Claude Code's summarization request (manual `/compact` and automatic compaction alike): its
/// last user message asks to "create a detailed summary of the conversation so far".
pub fn is_compaction_request(request: &Request) -> bool {
    is_messages(request) && last_user_text(request).contains("create a detailed summary")
}

/// The `system`-role messages of a request (hook context arrives as one).
pub fn system_messages(request: &Request) -> Vec<String> {
    messages(request).iter().filter(|m| m["role"] == "system").map(|m| content_text(&m["content"])).collect()
}

/// A streamed reply of `blocks` (content blocks as they end up, each sent as a start, its
/// deltas and a stop), stopping for `stop_reason`, billed `input_tokens`.
pub fn stream(blocks: &[Value], stop_reason: &str, input_tokens: u64) -> Reply {
    let mut events: Vec<(&str, Value)> = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{:016x}", rand_id()), "type": "message", "role": "assistant", "model": "claude-scripted",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => {
                events.push(("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
                events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": block["text"]}})));
            }
            Some("tool_use") => {
                events.push((
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}),
                ));
                events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}})));
            }
            other => panic!("no streaming for a {other:?} block"),
        }
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 20}})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    Reply::sse(events)
}

/// A text answer ending the turn.
pub fn text_reply(text: &str, input_tokens: u64) -> Reply {
    stream(&[json!({"type": "text", "text": text})], "end_turn", input_tokens)
}

/// One tool call (`input` a JSON object); the agent runs it and sends the result back.
pub fn tool_use_reply(id: &str, name: &str, input: Value, input_tokens: u64) -> Reply {
    stream(&[json!({"type": "tool_use", "id": id, "name": name, "input": input})], "tool_use", input_tokens)
}

/// A compaction summary in the shape Claude Code asks for.
pub fn summary_reply(summary: &str, input_tokens: u64) -> Reply {
    text_reply(&format!("<analysis>\nThe conversation so far, in order.\n</analysis>\n\n<summary>\n{summary}\n</summary>"), input_tokens)
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
