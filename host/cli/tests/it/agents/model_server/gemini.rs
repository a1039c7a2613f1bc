//! The Gemini API as Gemini CLI 0.61.0 speaks it (`GOOGLE_GEMINI_BASE_URL` pointed here):
//! `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` for the agent's turns, answered by
//! server-sent events (`data: GenerateContentResponse`), and `POST …:generateContent` for its
//! utility calls (the compression's two requests among them), answered by one JSON response.
//! Both carry `usageMetadata`: Gemini CLI takes the streamed `promptTokenCount` as the chat's
//! size, the number its compression threshold is checked against.
//!
//! What Gemini CLI sends (seen here): `contents` of `user` and `model` turns, the workspace's
//! `<session_context>` first; a tool's answer as a `user` turn of `functionResponse` parts (`{name,
//! response: {output}}`); the tools as `tools[].functionDeclarations`, MCP tools named
//! `mcp_SERVER_TOOL`; a BeforeAgent hook's context as a `<hook_context>…</hook_context>` text
//! part after the prompt's. A compression sends the history with "Generate a new
//! <state_snapshot>…" (or "A previous <state_snapshot> exists…") as the last user text, then the
//! history, the snapshot and "Critically evaluate the <state_snapshot>…"; the compressed history
//! starts with the snapshot as a user turn, then "Got it. Thanks for the additional context!".

#![allow(dead_code)]

use serde_json::{json, Value};

use super::{Reply, Request};

/// How Gemini CLI wraps a BeforeAgent hook's `additionalContext`.
pub const HOOK_CONTEXT: &str = "<hook_context>";

/// A `generateContent` request, streamed or not.
pub fn is_generate(request: &Request) -> bool {
    request.method == "POST" && (request.path.contains(":generateContent") || request.path.contains(":streamGenerateContent"))
}

/// A streamed request (`alt=sse`): the agent's own turns.
pub fn is_stream(request: &Request) -> bool {
    request.path.contains(":streamGenerateContent")
}

pub fn contents(request: &Request) -> &[Value] {
    request.body["contents"].as_array().map_or(&[], Vec::as_slice)
}

fn parts(content: &Value) -> &[Value] {
    content["parts"].as_array().map_or(&[], Vec::as_slice)
}

/// The text of a turn: its text parts, calls as JSON, responses' output.
pub fn content_text(content: &Value) -> String {
    parts(content)
        .iter()
        .map(|p| {
            if let Some(text) = p["text"].as_str() {
                text.to_string()
            } else if p.get("functionCall").is_some() {
                p["functionCall"].to_string()
            } else if p.get("functionResponse").is_some() {
                response_text(&p["functionResponse"])
            } else {
                String::new()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn response_text(response: &Value) -> String {
    response["response"]["output"].as_str().map_or_else(|| response["response"].to_string(), str::to_string)
}

/// The last `user` turn.
pub fn last_user(request: &Request) -> Option<&Value> {
    contents(request).iter().rev().find(|c| c["role"] == "user")
}

/// What the operator typed last: the last text part of the last user turn that is no hook
/// context (a session's first prompt shares its turn with the `<session_context>`).
pub fn last_prompt(request: &Request) -> String {
    last_user(request).and_then(|c| parts(c).iter().filter_map(|p| p["text"].as_str()).rfind(|t| !t.starts_with(HOOK_CONTEXT))).unwrap_or_default().to_string()
}

/// The hook context parts of the last user turn.
pub fn last_hook_context(request: &Request) -> Vec<String> {
    last_user(request).map(|c| parts(c).iter().filter_map(|p| p["text"].as_str()).filter(|t| t.starts_with(HOOK_CONTEXT)).map(str::to_string).collect()).unwrap_or_default()
}

/// Every text part of every turn, with its role.
pub fn text_parts(request: &Request) -> Vec<(String, String)> {
    contents(request)
        .iter()
        .flat_map(|c| {
            let role = c["role"].as_str().unwrap_or_default().to_string();
            parts(c).iter().filter_map(|p| p["text"].as_str()).map(move |t| (role.clone(), t.to_string())).collect::<Vec<_>>()
        })
        .collect()
}

/// The `functionResponse` parts of the last user turn: `(name, output)`.
pub fn function_responses(request: &Request) -> Vec<(String, String)> {
    last_user(request).map(|c| parts(c).iter().filter_map(|p| p.get("functionResponse")).map(|r| (r["name"].as_str().unwrap_or_default().to_string(), response_text(r))).collect()).unwrap_or_default()
}

/// The names of the functions offered.
pub fn tool_names(request: &Request) -> Vec<String> {
    request.body["tools"].as_array().into_iter().flatten().filter_map(|t| t["functionDeclarations"].as_array()).flatten().filter_map(|d| d["name"].as_str().map(str::to_string)).collect()
}

/// The compression's first request: the snapshot asked for.
pub fn is_snapshot_request(request: &Request) -> bool {
    is_generate(request) && !is_stream(request) && last_prompt(request).contains("<state_snapshot>") && !is_verification_request(request)
}

/// The compression's second request: the snapshot checked.
pub fn is_verification_request(request: &Request) -> bool {
    is_generate(request) && !is_stream(request) && last_prompt(request).contains("Critically evaluate the <state_snapshot>")
}

/// A response of `parts` reporting `prompt_tokens`, streamed when the request was.
pub fn reply(request: &Request, parts: Value, prompt_tokens: u64) -> Reply {
    let response = json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": prompt_tokens, "candidatesTokenCount": 12, "totalTokenCount": prompt_tokens + 12},
        "modelVersion": request.path.split("/models/").nth(1).and_then(|m| m.split(':').next()).unwrap_or("gemini"),
    });
    if is_stream(request) {
        Reply::sse([("", response)])
    } else {
        Reply::json(200, response)
    }
}

pub fn text_reply(request: &Request, text: &str, prompt_tokens: u64) -> Reply {
    reply(request, json!([{"text": text}]), prompt_tokens)
}

/// A call of function `name`; Gemini CLI gives it an id of its own.
pub fn call_reply(request: &Request, name: &str, args: Value, prompt_tokens: u64) -> Reply {
    reply(request, json!([{"functionCall": {"name": name, "args": args}}]), prompt_tokens)
}
