//! The Anthropic messages API: system prompt apart, text blocks joined.

use serde_json::{json, Value};

use super::{ModelError, ModelRequest};

pub const VERSION: &str = "2023-06-01";

pub fn body(model: &str, request: &ModelRequest) -> Value {
    let system: Vec<&str> = request.messages.iter().filter(|m| m.role == "system").map(|m| m.content.as_str()).collect();
    let messages: Vec<Value> =
        request.messages.iter().filter(|m| m.role != "system").map(|m| json!({ "role": if m.role == "assistant" { "assistant" } else { "user" }, "content": m.content })).collect();
    let mut body = json!({ "model": model, "max_tokens": request.max_tokens, "messages": messages });
    if !system.is_empty() {
        body["system"] = json!(system.join("\n\n"));
    }
    body
}

pub fn parse(body: &str) -> Result<String, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|e| ModelError::Failed(format!("malformed response: {e}")))?;
    let blocks = value["content"].as_array().ok_or_else(|| ModelError::Failed("malformed response: no content blocks".into()))?;
    let text: String = blocks.iter().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str()).collect();
    if text.is_empty() {
        return Err(ModelError::Failed("malformed response: no text block".into()));
    }
    Ok(text)
}

/// Anthropic's "the prompt does not fit" error: `invalid_request_error` with the message
/// "prompt is too long: N tokens > M maximum". The prompt's size and the window, where given.
pub fn too_long(value: &Value) -> Option<(Option<u32>, Option<u32>)> {
    let error = &value["error"];
    let message = error["message"].as_str()?;
    if error["type"] != "invalid_request_error" || !message.to_ascii_lowercase().starts_with("prompt is too long") {
        return None;
    }
    Some((super::error_text::number_after(message, "too long:"), super::error_text::number_after(message, ">")))
}
