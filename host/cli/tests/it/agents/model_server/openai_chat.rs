//! OpenAI chat completions (`POST …/chat/completions`, `stream: true`): what Pi's
//! `openai-completions` provider speaks. A reply is a stream of `data: {chat.completion.chunk}`
//! lines: the assistant's text or tool calls in `choices[0].delta`, a chunk with the
//! `finish_reason`, a last chunk with `usage` (Pi's compaction trigger reads that one), then
//! `data: [DONE]`.

use serde_json::{json, Value};

use super::{Reply, Request};

/// Pi's `SUMMARIZATION_SYSTEM_PROMPT` (0.73.1, `dist/core/compaction/utils.js`) begins with this:
/// a request carrying it is Pi's own LLM compaction, not a turn.
pub const PI_SUMMARIZATION_PROMPT: &str = "You are a context summarization assistant.";

/// The token counts a reply reports.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Usage { prompt_tokens, completion_tokens }
    }

    fn to_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

fn stream(chunks: Vec<Value>) -> Reply {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    Reply { status: 200, content_type: "text/event-stream", body }
}

fn usage_chunk(usage: Usage) -> Value {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "scripted",
        "choices": [],
        "usage": usage.to_json(),
    })
}

/// A streamed text answer (`finish_reason: "stop"`).
pub fn text(content: &str, usage: Usage) -> Reply {
    stream(vec![chunk(json!({"role": "assistant", "content": ""}), None), chunk(json!({"content": content}), None), chunk(json!({}), Some("stop")), usage_chunk(usage)])
}

/// A streamed answer calling tools: `(call id, tool name, arguments)` each
/// (`finish_reason: "tool_calls"`).
pub fn tool_calls(calls: &[(&str, &str, Value)], usage: Usage) -> Reply {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (index, (id, name, args)) in calls.iter().enumerate() {
        chunks.push(chunk(
            json!({"tool_calls": [{
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": args.to_string()},
            }]}),
            None,
        ));
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    chunks.push(usage_chunk(usage));
    stream(chunks)
}

/// The request's `messages`.
pub fn messages(req: &Request) -> &[Value] {
    req.body["messages"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// The text of one message's `content` (a string, or the `text` of its parts).
pub fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// Whether this is Pi's own compaction request (its summarization system prompt).
pub fn is_pi_summarization(req: &Request) -> bool {
    messages(req).iter().filter(|m| matches!(m["role"].as_str(), Some("system" | "developer"))).any(|m| content_text(m).contains(PI_SUMMARIZATION_PROMPT))
}

/// The conversation messages (no system or developer prompt).
pub fn conversation(req: &Request) -> Vec<&Value> {
    messages(req).iter().filter(|m| !matches!(m["role"].as_str(), Some("system" | "developer"))).collect()
}

/// Every message's text, for `contains` checks.
pub fn request_text(req: &Request) -> String {
    let mut out = String::new();
    for m in messages(req) {
        out.push_str(&content_text(m));
        out.push('\n');
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            out.push_str(&call["function"].to_string());
            out.push('\n');
        }
    }
    out
}

/// The role of the last message (`user`, `tool`, …).
pub fn last_role(req: &Request) -> &str {
    messages(req).last().and_then(|m| m["role"].as_str()).unwrap_or("")
}

/// The text of the last user message.
pub fn last_user_text(req: &Request) -> String {
    messages(req).iter().rev().find(|m| m["role"] == "user").map(content_text).unwrap_or_default()
}

/// `(tool_call_id, text)` of every tool result in the request.
pub fn tool_results(req: &Request) -> Vec<(String, String)> {
    messages(req).iter().filter(|m| m["role"] == "tool").map(|m| (m["tool_call_id"].as_str().unwrap_or("").to_string(), content_text(m))).collect()
}

/// Tool call ids of assistant messages without a tool result after them, and tool results
/// without an earlier call (both must be empty in a well-formed request).
pub fn unpaired(req: &Request) -> (Vec<String>, Vec<String>) {
    let mut calls: Vec<String> = Vec::new();
    let mut orphan_results = Vec::new();
    let mut answered = std::collections::HashSet::new();
    for m in messages(req) {
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            calls.push(call["id"].as_str().unwrap_or("").to_string());
        }
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or("").to_string();
            if calls.contains(&id) {
                answered.insert(id);
            } else {
                orphan_results.push(id);
            }
        }
    }
    let unanswered = calls.into_iter().filter(|c| !answered.contains(c)).collect();
    (unanswered, orphan_results)
}

/// OpenCode's compaction agent prompt (1.18.33, `SessionCompaction.process`) begins with this:
/// a request carrying it is OpenCode's summarizer call, not a turn.
pub const OPENCODE_SUMMARIZATION_PROMPT: &str = "You are a context summarization agent.";

/// Whether this is OpenCode's summarizer call (its compaction agent's system prompt).
pub fn is_opencode_summarization(req: &Request) -> bool {
    messages(req).iter().filter(|m| matches!(m["role"].as_str(), Some("system" | "developer"))).any(|m| content_text(m).contains(OPENCODE_SUMMARIZATION_PROMPT))
}

/// Whether this is OpenCode's session-title request (sent with no tools, beside the first turn).
pub fn is_opencode_title(req: &Request) -> bool {
    req.body.get("tools").is_none() && messages(req).iter().any(|m| m["role"] == "user" && content_text(m).starts_with("Generate a title for this conversation"))
}

/// The names of the tools the request offers.
pub fn tool_names(req: &Request) -> Vec<String> {
    req.body["tools"].as_array().into_iter().flatten().filter_map(|t| t["function"]["name"].as_str()).map(str::to_string).collect()
}
