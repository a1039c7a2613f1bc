//! OpenAI-compatible chat completions: request body and reply parsing.

use serde_json::{json, Value};

use super::{ModelError, ModelRequest};

pub fn body(model: &str, request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(|m| json!({ "role": m.role, "content": m.content })).collect();
    json!({ "model": model, "messages": messages, "max_tokens": request.max_tokens })
}

pub fn parse(body: &str) -> Result<String, ModelError> {
    let value: Value = serde_json::from_str(body).map_err(|e| ModelError::Failed(format!("malformed response: {e}")))?;
    value["choices"][0]["message"]["content"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| ModelError::Failed("malformed response: no choices[0].message.content".into()))
}
