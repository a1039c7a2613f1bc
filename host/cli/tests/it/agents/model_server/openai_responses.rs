//! The OpenAI Responses API (`POST …/responses`, `stream: true`): what Codex speaks
//! (`wire_api = "responses"`). A reply is a stream of named server-sent events:
//! `response.created`, then per output item `response.output_item.added`, for text
//! `response.output_text.delta`, `response.output_item.done` (Codex records the item from this
//! one), and `response.completed` with the `usage` Codex's automatic compaction reads.
//! A request's `input` is the whole context Codex sends: messages (`role` user, developer,
//! assistant; content parts with `text`), `function_call`s (MCP tools carry their server's
//! namespace, `mcp__<server>`, beside the tool's `name`) and `function_call_output`s.

use serde_json::{json, Value};

use super::{Reply, Request};

/// How Codex's own compaction prompt begins (0.169.0, `codex-rs/core/templates/compact/
/// prompt.md`): a request whose last user message starts so is the summary request.
pub const COMPACTION_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION";

/// How Codex introduces the summary in the history it keeps after a local compaction.
pub const SUMMARY_PREFIX: &str = "Another language model started to solve this problem";

pub fn is_responses(request: &Request) -> bool {
    request.method == "POST" && request.path.ends_with("/responses")
}

/// The request's `input` items.
pub fn input(request: &Request) -> Vec<Value> {
    request.body["input"].as_array().cloned().unwrap_or_default()
}

/// The text of a message item (its content parts' `text`, joined).
pub fn text_of(item: &Value) -> String {
    match &item["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
        _ => String::new(),
    }
}

/// `(role, text)` of every message in the input, in order.
pub fn messages(request: &Request) -> Vec<(String, String)> {
    input(request).iter().filter(|i| i["type"] == "message" || i.get("role").is_some() && i.get("type").is_none()).map(|i| (i["role"].as_str().unwrap_or("?").to_string(), text_of(i))).collect()
}

/// The newest user message's text (Codex adds developer messages after it, hook contexts).
pub fn last_user_text(request: &Request) -> String {
    messages(request).into_iter().rev().find(|(role, _)| role == "user").map(|(_, text)| text).unwrap_or_default()
}

/// The operator's newest prompt: the newest user message that is neither Codex's summary nor
/// context Codex injects (`<environment_context>`, …).
pub fn last_prompt(request: &Request) -> String {
    messages(request).into_iter().rev().find(|(role, text)| role == "user" && !text.starts_with(SUMMARY_PREFIX) && !text.starts_with('<')).map(|(_, text)| text).unwrap_or_default()
}

pub fn is_compaction_request(request: &Request) -> bool {
    is_responses(request) && last_user_text(request).starts_with(COMPACTION_PROMPT)
}

/// The last input item when it is a tool result: `(call id, output text)`.
pub fn last_tool_output(request: &Request) -> Option<(String, String)> {
    let last = input(request).pop()?;
    (last["type"] == "function_call_output").then(|| (last["call_id"].as_str().unwrap_or("").to_string(), output_text(&last["output"])))
}

/// Every tool result in the input: `(call id, output text)`.
pub fn tool_outputs(request: &Request) -> Vec<(String, String)> {
    input(request).iter().filter(|i| i["type"] == "function_call_output").map(|i| (i["call_id"].as_str().unwrap_or("").to_string(), output_text(&i["output"]))).collect()
}

/// A tool output is a string, or (when it carries several parts) a list of content parts.
fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    }
}

/// Every tool call in the input: `(call id, namespace or "", name, arguments)`.
pub fn tool_calls(request: &Request) -> Vec<(String, String, String, String)> {
    input(request)
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| {
            let field = |k: &str| i[k].as_str().unwrap_or("").to_string();
            (field("call_id"), field("namespace"), field("name"), field("arguments"))
        })
        .collect()
}

/// Names of the tools offered (a namespace tool, such as an MCP server's `mcp__cairn`, by its
/// own name).
pub fn tool_names(request: &Request) -> Vec<String> {
    request.body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str().map(String::from)).collect()
}

/// The tools one namespace tool offers (`mcp__cairn` → `["session_history"]`).
pub fn namespace_tools(request: &Request, namespace: &str) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["name"] == namespace)
        .flat_map(|t| t["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect()
}

/// Calls without a result and results without a call in the input.
pub fn unpaired(request: &Request) -> (Vec<String>, Vec<String>) {
    let calls: Vec<String> = tool_calls(request).into_iter().map(|(id, ..)| id).collect();
    let results: Vec<String> = tool_outputs(request).into_iter().map(|(id, _)| id).collect();
    (calls.iter().filter(|c| !results.contains(c)).cloned().collect(), results.iter().filter(|r| !calls.contains(r)).cloned().collect())
}

/// The token counts a reply reports; Codex compacts before its next turn once `input + output`
/// reaches `model_auto_compact_token_limit`.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage { input_tokens, output_tokens }
    }
}

/// A whole response holding `item` (without its `id`, which is added).
fn response(item: Value, usage: Usage) -> Reply {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = format!("resp_scripted_{n}");
    let mut item = item;
    item["id"] = json!(format!("item_scripted_{n}"));
    let mut events = vec![
        ("response.created", json!({"type": "response.created", "response": {"id": id}})),
        ("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0, "item": item})),
    ];
    if item["type"] == "message" {
        let text = text_of(&item);
        events.push(("response.output_text.delta", json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": item["id"], "delta": text})));
    }
    events.push(("response.output_item.done", json!({"type": "response.output_item.done", "output_index": 0, "item": item})));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }}}),
    ));
    Reply::sse(events)
}

/// A text answer.
pub fn text(content: &str, usage: Usage) -> Reply {
    response(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": content, "annotations": []}]}), usage)
}

/// A call of a built-in tool (`exec_command`, …).
pub fn function_call(call_id: &str, name: &str, args: Value, usage: Usage) -> Reply {
    response(json!({"type": "function_call", "call_id": call_id, "name": name, "arguments": args.to_string()}), usage)
}

/// A call of an MCP tool: `namespace` is `mcp__<server>`, `name` the server's tool name.
pub fn namespaced_call(call_id: &str, namespace: &str, name: &str, args: Value, usage: Usage) -> Reply {
    response(json!({"type": "function_call", "call_id": call_id, "namespace": namespace, "name": name, "arguments": args.to_string()}), usage)
}
