//! OpenAI-compatible chat completions: request body and reply parsing.

use serde_json::{json, Value};

use super::{ModelError, ModelRequest};

pub fn body(model: &str, request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(|m| json!({ "role": m.role, "content": m.content })).collect();
    json!({ "model": model, "messages": messages, "max_tokens": request.max_tokens })
}

pub fn parse(body: &str) -> Result<String, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|e| ModelError::Failed(format!("malformed response: {e}")))?;
    value["choices"][0]["message"]["content"].as_str().map(str::to_string).ok_or_else(|| ModelError::Failed("malformed response: no choices[0].message.content".into()))
}

/// OpenAI's (and vLLM's, and llama.cpp's) "the prompt does not fit" error: code
/// `context_length_exceeded`, or the message "This model's maximum context length is M tokens.
/// However, your messages resulted in N tokens …" (vLLM and older APIs say "you requested N
/// tokens"), or llama.cpp's `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`.
/// The prompt's size and the window, where the error gives them.
pub fn too_long(value: &Value) -> Option<(Option<u32>, Option<u32>)> {
    let error = &value["error"];
    let message = error["message"].as_str().unwrap_or("");
    if error["type"] == "exceed_context_size_error" {
        let number = |key: &str| error[key].as_u64().and_then(|n| u32::try_from(n).ok());
        return Some((number("n_prompt_tokens"), number("n_ctx")));
    }
    if error["code"] != "context_length_exceeded" && !message.contains("maximum context length") {
        return None;
    }
    let window = super::error_text::number_after(message, "maximum context length is");
    let tokens = super::error_text::number_after(message, "resulted in").or_else(|| super::error_text::number_after(message, "you requested"));
    Some((tokens, window))
}
