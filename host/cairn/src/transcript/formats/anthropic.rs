//! Anthropic Messages API JSON: `{system, messages}` whose content is text or blocks
//! (`text`, `thinking`, `tool_use`, `tool_result`, `image`, …). The block conversion is shared
//! with Claude Code sessions, whose messages are Anthropic messages.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::chat::{self, Speaker};
use super::{content_id, describe_url, image_reference, opaque, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript};

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    system: Option<Value>,
    messages: Vec<Message>,
}

#[derive(Deserialize)]
pub(super) struct Message {
    pub role: String,
    pub content: Value,
}

/// One message's content, split the way Cairn's entries are: tool results each become a
/// tool entry (they open a user message), everything else stays with the speaker.
#[derive(Default)]
pub(super) struct Split {
    pub results: Vec<Part>,
    pub parts: Vec<Part>,
}

/// Converts a message's `content` (a string or blocks). Unknown blocks are kept as opaque
/// text; a known block with a wrong shape is an error naming the block.
pub(super) fn split_content(content: &Value) -> Result<Split, String> {
    let mut split = Split::default();
    match content {
        Value::String(s) => split.parts.extend((!s.is_empty()).then(|| Part::Text { text: s.clone() })),
        Value::Array(blocks) => {
            for (n, block) in blocks.iter().enumerate() {
                let kind = block.get("type").and_then(Value::as_str).unwrap_or_default();
                let field = |name: &str| -> Result<&Value, String> { block.get(name).ok_or_else(|| format!("content block {n} ({kind}) has no `{name}`")) };
                let string = |name: &str| -> Result<String, String> { field(name)?.as_str().map(str::to_string).ok_or_else(|| format!("content block {n} ({kind}): `{name}` is not a string")) };
                match kind {
                    "text" => split.parts.push(Part::Text { text: string("text")? }),
                    "thinking" => split.parts.push(Part::Thinking { text: string("thinking")? }),
                    "redacted_thinking" => split.parts.push(Part::Thinking { text: "[redacted thinking]".into() }),
                    "tool_use" => split.parts.push(Part::ToolCall { id: string("id")?, name: string("name")?, args: block.get("input").map_or_else(|| "{}".to_string(), Value::to_string) }),
                    "tool_result" => split.results.push(Part::ToolResult {
                        call_id: string("tool_use_id")?,
                        content: result_text(block.get("content").unwrap_or(&Value::Null)),
                        is_error: block.get("is_error").and_then(Value::as_bool).unwrap_or(false),
                        elided: None,
                    }),
                    "image" => split.parts.push(Part::Image { reference: describe_image(block) }),
                    _ => split.parts.push(opaque(block)),
                }
            }
        }
        Value::Null => {}
        other => return Err(format!("content is neither a string nor a list of blocks: {}", clip(&other.to_string()))),
    }
    Ok(split)
}

/// A tool result's content: a string, or blocks whose text is joined and whose images are
/// described.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).unwrap_or_default().to_string(),
                Some("image") => format!("[image: {}]", describe_image(b)),
                _ => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn describe_image(block: &Value) -> String {
    let source = block.get("source");
    let get = |k: &str| source.and_then(|s| s.get(k)).and_then(Value::as_str);
    // Inline data is described, not kept; a link is kept up to 100 characters.
    match (get("data"), get("url")) {
        (Some(data), _) => image_reference(get("media_type").unwrap_or("unknown"), data.len()),
        (None, Some(url)) => describe_url(url),
        (None, None) => "image".into(),
    }
}

fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Anthropic Messages API bodies: a chat document with a top-level `system` or blocks only Anthropic has.
pub(super) struct AnthropicMessages;

impl super::TranscriptFormat for AnthropicMessages {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn detect(&self, head: Option<&serde_json::Value>, text: &str) -> bool {
        super::chat_document(head, text) && super::probe::is_anthropic(text)
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }

    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        Some(write)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let document: Document = if text.trim_start().starts_with('[') { serde_json::from_str(text).map(|messages| Document { system: None, messages }) } else { serde_json::from_str(text) }
        .map_err(|e| TranscriptError::in_document(source_name, &e))?;

    let mut entries = Vec::new();
    let mut seen = HashMap::new();
    let mut push = |entries: &mut Vec<Entry>, role: Role, origin: Origin, parts: Vec<Part>| {
        let id = content_id(role, &parts, &mut seen);
        entries.push(Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") });
    };
    if let Some(system) = &document.system {
        let split = split_content(system).map_err(|m| TranscriptError::new(source_name, None, format!("system: {m}")))?;
        if !split.parts.is_empty() {
            push(&mut entries, Role::System, Origin::Harness, split.parts);
        }
    }
    for (index, m) in document.messages.iter().enumerate() {
        let split = split_content(&m.content).map_err(|msg| TranscriptError::new(source_name, None, format!("message {index}: {msg}")))?;
        match m.role.as_str() {
            "user" => {
                for result in split.results {
                    push(&mut entries, Role::Tool, Origin::Tool, vec![result]);
                }
                if !split.parts.is_empty() {
                    push(&mut entries, Role::User, Origin::Operator, split.parts);
                }
            }
            "assistant" if split.results.is_empty() => push(&mut entries, Role::Assistant, Origin::Agent, split.parts),
            "assistant" => return Err(TranscriptError::new(source_name, None, format!("message {index}: an assistant message carries a tool_result"))),
            other => return Err(TranscriptError::new(source_name, None, format!("message {index}: unknown role {other:?} (expected user or assistant)"))),
        }
    }
    Ok(Transcript::new(entries))
}

#[derive(Serialize)]
struct OutDocument {
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Vec<OutMessage>,
}

#[derive(Serialize)]
struct OutMessage {
    role: &'static str,
    content: Vec<Value>,
}

/// A Messages API request body's `system` and `messages`: roles alternate, the first message
/// is the user's, each `tool_use` is answered by a `tool_result` at the head of the next user
/// message. Thinking is left out: the API accepts it back only with its signature.
pub(super) fn write(t: &Transcript) -> String {
    let mut system = Vec::new();
    let mut messages: Vec<OutMessage> = Vec::new();
    for m in chat::messages(t) {
        let (role, blocks): (&'static str, Vec<Value>) = match m.speaker {
            Speaker::System => {
                system.extend(m.texts);
                continue;
            }
            Speaker::User => ("user", m.texts.into_iter().map(text_block).collect()),
            Speaker::Assistant => {
                let mut blocks: Vec<Value> = m.texts.into_iter().map(text_block).collect();
                blocks.extend(m.calls.iter().map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c.args)})));
                ("assistant", blocks)
            }
            Speaker::Tool { call_id, is_error } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": call_id, "content": m.texts.concat()});
                if is_error {
                    block["is_error"] = Value::Bool(true);
                }
                ("user", vec![block])
            }
        };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(OutMessage { role, content: blocks }),
        }
    }
    if messages.first().is_some_and(|m| m.role == "assistant") {
        messages.insert(0, OutMessage { role: "user", content: vec![text_block("[earlier conversation not included]".into())] });
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    serde_json::to_string_pretty(&OutDocument { system, messages }).expect("plain values always serialize")
}

fn text_block(text: String) -> Value {
    json!({"type": "text", "text": text})
}

/// `tool_use.input` must be an object: arguments that are not one travel under `arguments`.
fn tool_input(args: &str) -> Value {
    match serde_json::from_str::<Value>(args) {
        Ok(object @ Value::Object(_)) => object,
        _ => json!({ "arguments": args }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{assert_calls_answered_in_place, real_files};
    use super::super::{parse as parse_any, write_openai, Format};
    use super::*;
    use crate::tokenizer::Tokenizer;

    const REQUEST: &str = r#"{
  "model": "claude-sonnet-4-5",
  "system": [{"type": "text", "text": "You are a coding agent."}],
  "messages": [
    {"role": "user", "content": "Never edit files in /config. Fix the parser."},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "look first", "signature": "sig"},
      {"type": "text", "text": "Reading it."},
      {"type": "tool_use", "id": "tu1", "name": "read", "input": {"path": "src/parser.rs"}},
      {"type": "tool_use", "id": "tu2", "name": "bash", "input": {"command": "cargo test"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "tu1", "content": [{"type": "text", "text": "fn parse() {}"}]},
      {"type": "tool_result", "tool_use_id": "tu2", "content": "1 failed", "is_error": true},
      {"type": "text", "text": "Also keep the API stable."},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    ]},
    {"role": "assistant", "content": [{"type": "web_search_tool_result", "tool_use_id": "s1", "content": []}]}
  ]
}"#;

    #[test]
    fn reads_system_blocks_and_keeps_what_it_does_not_know() {
        let (t, format) = parse_any(REQUEST, "req.json").unwrap();
        assert_eq!(format, Format::Anthropic);
        let shape: Vec<(Role, Origin)> = t.entries.iter().map(|e| (e.role, e.origin)).collect();
        use {Origin as O, Role as R};
        assert_eq!(shape, [(R::System, O::Harness), (R::User, O::Operator), (R::Assistant, O::Agent), (R::Tool, O::Tool), (R::Tool, O::Tool), (R::User, O::Operator), (R::Assistant, O::Agent)]);
        assert_eq!(t.entries[2].parts[0], Part::Thinking { text: "look first".into() });
        assert_eq!(t.entries[2].tool_call_ids().collect::<Vec<_>>(), ["tu1", "tu2"]);
        assert!(matches!(&t.entries[4].parts[0], Part::ToolResult { is_error: true, .. }));
        assert!(matches!(&t.entries[5].parts[1], Part::Image { reference } if reference.starts_with("image/png")));
        assert!(matches!(&t.entries[6].parts[0], Part::Text { text } if text.starts_with("[web_search_tool_result block]")));
    }

    #[test]
    fn writes_a_valid_request_body() {
        let (t, _) = parse_any(REQUEST, "req.json").unwrap();
        let body: Value = serde_json::from_str(&write(&t)).unwrap();
        assert_eq!(body["system"], "You are a coding agent.");
        let messages = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant"], "roles alternate, user first");
        // Results open the next user message, then the user's own words.
        let blocks: Vec<&str> = messages[2]["content"].as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(blocks, ["tool_result", "tool_result", "text", "text"]);
        assert_eq!(messages[2]["content"][1]["is_error"], true);
        assert_eq!(messages[1]["content"][1]["input"], serde_json::json!({"path": "src/parser.rs"}));
        // Thinking has no signature to send back, so it is left out.
        assert!(!messages[1].to_string().contains("look first"));
    }

    #[test]
    fn an_orphan_call_is_answered_and_the_first_message_is_the_users() {
        let t = Transcript::new(vec![
            Entry { parts: vec![Part::ToolCall { id: "c1".into(), name: "ls".into(), args: "not json".into() }].into(), ..Entry::text("a", Role::Assistant, Origin::Agent, "") },
            Entry::text("u", Role::User, Origin::Operator, "next"),
        ]);
        let body: Value = serde_json::from_str(&write(&t)).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "user");
        assert_eq!(messages[1]["content"][0]["input"], serde_json::json!({"arguments": "not json"}));
        assert_eq!(messages[2]["content"][0]["tool_use_id"], "c1");
        assert_eq!(messages[2]["content"][0]["content"], chat::NO_RESULT);
        assert_eq!(messages[2]["content"][1]["text"], "next");
    }

    /// The shape that was once taken for OpenAI chat and lost its blocks: an OpenHands session
    /// written as an Anthropic request reads back with the same calls and nearly the same tokens.
    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn an_openhands_session_in_anthropic_shape_loses_nothing() {
        let tokenizer = Tokenizer::default();
        for (name, text) in real_files("openai-chat", "json") {
            let (mut original, _) = parse_any(&text, &name).unwrap();
            let (mut back, format) = parse_any(&write(&original), &name).unwrap();
            assert_eq!(format, Format::Anthropic);
            assert_calls_answered_in_place(&back, &name);
            tokenizer.count_transcript(&mut original);
            tokenizer.count_transcript(&mut back);
            let (before, after) = (original.total_tokens(), back.total_tokens());
            assert!(after * 100 >= before * 97, "{name}: {before} tokens read as {after}");
            // And it converts on to OpenAI chat with every call still answered.
            let (chat, _) = parse_any(&write_openai(&back), &name).unwrap();
            assert_calls_answered_in_place(&chat, &name);
        }
    }
}
