//! OpenAI Chat Completions messages: a JSON array of messages, or an object
//! with a `messages` array (e.g. OpenHands runs).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::chat::{self, Speaker};
use super::{content_id, describe_url, opaque, TextOr, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript};

#[derive(Deserialize)]
struct Document {
    messages: Vec<Message>,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ChatRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

#[derive(Deserialize)]
struct Message {
    role: ChatRole,
    content: Option<TextOr<KnownOr<ContentPart>>>,
    tool_calls: Option<Vec<ToolCall>>,
    tool_call_id: Option<String>,
    refusal: Option<String>,
    /// Reasoning as some OpenAI-compatible servers return it.
    reasoning_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
    Refusal { refusal: String },
}

/// A content part this reader knows, or any other JSON, kept as opaque text: a reader never
/// drops what it does not understand.
#[derive(Deserialize)]
#[serde(untagged)]
enum KnownOr<T> {
    Known(T),
    Other(serde_json::Value),
}

#[derive(Deserialize)]
struct ImageUrl {
    url: String,
}

#[derive(Deserialize)]
struct ToolCall {
    id: String,
    function: Function,
}

#[derive(Deserialize)]
struct Function {
    name: String,
    #[serde(default)]
    arguments: String,
}

/// OpenAI Chat Completions messages (an array, or `{messages}`).
pub(super) struct OpenAiChat;

impl super::TranscriptFormat for OpenAiChat {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn detect(&self, head: Option<&serde_json::Value>, text: &str) -> bool {
        super::chat_document(head, text) && !super::probe::is_anthropic(text)
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }

    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        Some(write)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let messages = if text.trim_start().starts_with('[') { serde_json::from_str::<Vec<Message>>(text) } else { serde_json::from_str::<Document>(text).map(|d| d.messages) }
        .map_err(|e| TranscriptError::in_document(source_name, &e))?;

    let mut entries = Vec::with_capacity(messages.len());
    let mut seen = HashMap::new();
    for (index, m) in messages.into_iter().enumerate() {
        let mut parts = Vec::new();
        if let Some(reasoning) = m.reasoning_content.filter(|r| !r.is_empty()) {
            parts.push(Part::Thinking { text: reasoning });
        }
        parts.extend(content_parts(m.content));
        parts.extend(m.refusal.map(|text| Part::Text { text }));
        let (role, origin) = match m.role {
            ChatRole::System | ChatRole::Developer => (Role::System, Origin::Harness),
            ChatRole::User => (Role::User, Origin::Operator),
            ChatRole::Assistant => (Role::Assistant, Origin::Agent),
            ChatRole::Tool => (Role::Tool, Origin::Tool),
        };
        if role == Role::Tool {
            let call_id = m.tool_call_id.ok_or_else(|| TranscriptError::new(source_name, None, format!("message {index}: tool message without `tool_call_id`")))?;
            // The text becomes the result; images stay beside it.
            let (texts, images): (Vec<Part>, Vec<Part>) = parts.into_iter().partition(|p| matches!(p, Part::Text { .. }));
            let content: Vec<String> = texts
                .into_iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text),
                    _ => None,
                })
                .collect();
            parts = vec![Part::ToolResult { call_id, content: content.join("\n"), is_error: false, elided: None }];
            parts.extend(images);
        }
        for call in m.tool_calls.into_iter().flatten() {
            parts.push(Part::ToolCall { id: call.id, name: call.function.name, args: call.function.arguments });
        }
        let id = content_id(role, &parts, &mut seen);
        entries.push(Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") });
    }
    Ok(Transcript::new(entries))
}

fn content_parts(content: Option<TextOr<KnownOr<ContentPart>>>) -> Vec<Part> {
    let text = |text: String| (!text.is_empty()).then_some(Part::Text { text });
    match content {
        None => Vec::new(),
        Some(TextOr::Text(s)) => text(s).into_iter().collect(),
        Some(TextOr::Items(items)) => items
            .into_iter()
            .filter_map(|part| match part {
                KnownOr::Known(ContentPart::Text { text: t } | ContentPart::Refusal { refusal: t }) => text(t),
                KnownOr::Known(ContentPart::ImageUrl { image_url }) => Some(Part::Image { reference: describe_url(&image_url.url) }),
                KnownOr::Other(value) => Some(opaque(&value)),
            })
            .collect(),
    }
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    content: Option<OutContent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutCall<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum OutContent {
    Text(String),
    Parts(Vec<OutText>),
}

#[derive(Serialize)]
struct OutText {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

#[derive(Serialize)]
struct OutCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

pub(super) fn write(t: &Transcript) -> String {
    let out: Vec<OutMessage> = chat::messages(t)
        .into_iter()
        .map(|m| {
            let (role, tool_call_id) = match m.speaker {
                Speaker::System => ("system", None),
                Speaker::User => ("user", None),
                Speaker::Assistant => ("assistant", None),
                Speaker::Tool { call_id, .. } => ("tool", Some(call_id)),
            };
            let mut texts = m.texts;
            let content = match texts.len() {
                0 => None,
                1 => texts.pop().map(OutContent::Text),
                _ => Some(OutContent::Parts(texts.into_iter().map(|text| OutText { kind: "text", text }).collect())),
            };
            let tool_calls = m.calls.iter().map(|c| OutCall { id: c.id, kind: "function", function: OutFunction { name: c.name, arguments: c.args } }).collect();
            OutMessage { role, tool_call_id, content, tool_calls }
        })
        .collect();
    serde_json::to_string_pretty(&out).expect("plain structs always serialize")
}

#[cfg(test)]
mod tests {
    use super::super::chat::NO_RESULT;
    use super::super::test_support::{assert_calls_answered_in_place, real_files};
    use super::super::{parse as parse_any, Format};
    use super::*;

    fn entry(id: &str, role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") }
    }
    fn call(id: &str) -> Part {
        Part::ToolCall { id: id.into(), name: "run".into(), args: format!("{{\"n\":\"{id}\"}}") }
    }
    fn result(id: &str) -> Part {
        Part::ToolResult { call_id: id.into(), content: format!("out {id}"), is_error: false, elided: None }
    }
    fn written(entries: Vec<Entry>) -> serde_json::Value {
        serde_json::from_str(&write(&Transcript::new(entries))).unwrap()
    }

    const CHAT: &str = r#"[
  {"role": "system", "content": "be useful"},
  {"role": "developer", "content": [{"type": "text", "text": "dev note"}]},
  {"role": "user", "content": [
    {"type": "text", "text": "look"},
    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJDRA=="}},
    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
  ]},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"b\":1, \"a\":2}"}},
    {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
  ]},
  {"role": "tool", "tool_call_id": "c1", "content": "x y"},
  {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "l1"}, {"type": "text", "text": "l2"}]},
  {"role": "assistant", "content": null, "reasoning_content": "thought", "refusal": "no"}
]"#;

    /// Ids come from content: the same messages read again keep theirs, whatever moved.
    #[test]
    fn ids_follow_content_not_position() {
        let doc = |messages: &[&str]| format!("[{}]", messages.join(","));
        let (a, b, c) = (r#"{"role":"user","content":"fix it"}"#, r#"{"role":"assistant","content":"done"}"#, r#"{"role":"user","content":"thanks"}"#);
        let ids = |text: String| parse(&text, "t.json").unwrap().entries.into_iter().map(|e| e.id).collect::<Vec<_>>();
        let full = ids(doc(&[a, b, c]));
        assert_eq!(ids(doc(&[a, b, c])), full, "stable across reads");
        assert_eq!(ids(doc(&[b, c])), full[1..], "dropping the first message renames nothing else");
        let repeated = ids(doc(&[a, a, b]));
        assert_eq!(repeated[0], full[0]);
        assert_eq!(repeated[1], format!("{}-2", full[0]), "a repeated message gets its own id");
        assert!(full.iter().all(|id| id.starts_with("m-") && id.len() == 14), "{full:?}");
    }

    #[test]
    fn parses_messages() {
        let (t, format) = parse_any(CHAT, "chat.json").unwrap();
        assert_eq!(format, Format::OpenAi);
        let roles: Vec<_> = t.entries.iter().map(|e| (e.role, e.origin)).collect();
        assert_eq!(
            roles,
            [
                (Role::System, Origin::Harness),
                (Role::System, Origin::Harness),
                (Role::User, Origin::Operator),
                (Role::Assistant, Origin::Agent),
                (Role::Tool, Origin::Tool),
                (Role::Tool, Origin::Tool),
                (Role::Assistant, Origin::Agent),
            ]
        );
        assert_eq!(
            t.entries[2].parts,
            vec![Part::Text { text: "look".into() }, Part::Image { reference: "image/jpeg image, 8 bytes base64".into() }, Part::Image { reference: "https://example.com/a.png".into() },]
        );
        assert_eq!(t.entries[3].parts[0], Part::ToolCall { id: "c1".into(), name: "ls".into(), args: "{\"b\":1, \"a\":2}".into() });
        assert_eq!(t.entries[5].parts, vec![Part::ToolResult { call_id: "c2".into(), content: "l1\nl2".into(), is_error: false, elided: None }]);
        assert_eq!(t.entries[6].parts, vec![Part::Thinking { text: "thought".into() }, Part::Text { text: "no".into() }]);
        assert_eq!(t.entries[2].turn, 1);
    }

    #[test]
    fn long_links_are_cut_and_object_form_is_read() {
        let url = format!("https://example.com/{}", "a".repeat(200));
        let text = format!(r#"{{"instance_id": "x", "messages": [{{"role": "user", "content": [{{"type": "image_url", "image_url": {{"url": "{url}"}}}}]}}]}}"#);
        let (t, format) = parse_any(&text, "run.json").unwrap();
        assert_eq!(format, Format::OpenAi);
        assert_eq!(t.entries[0].parts, vec![Part::Image { reference: url[..100].to_string() }]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("[\n  {\"role\": \"user\", \"content\": \"a\"},\n  {\"role\": \"user\" \"content\": 1}\n]", "c.json").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().starts_with("c.json:3: "), "{e}");
        let e = parse("[\n {\"role\": \"robot\"}\n]", "c.json").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("unknown variant `robot`"), "{e}");
        let e = parse("{\n \"runs\": []\n}", "c.json").unwrap_err();
        assert!(e.message.contains("missing field `messages`"), "{e}");
        let e = parse("[{\"role\": \"tool\", \"content\": \"x\"}]", "c.json").unwrap_err();
        assert_eq!(e.to_string(), "c.json: message 0: tool message without `tool_call_id`");
    }

    #[test]
    fn write_round_trips_a_well_formed_chat() {
        let t = parse(CHAT, "chat.json").unwrap();
        let back = parse(&write(&t), "out.json").unwrap();
        // Reasoning is not sent, and images travel as their description.
        let mut want = t.clone();
        want.entries[6].parts.remove(0);
        for part in &mut want.entries[2].parts {
            if let Part::Image { reference } = part {
                *part = Part::Text { text: format!("[image: {reference}]") };
            }
        }
        // Ids follow content: the two messages that changed on the way have new ones.
        for changed in [2, 6] {
            assert_ne!(back.entries[changed].id, t.entries[changed].id);
            want.entries[changed].id = back.entries[changed].id.clone();
        }
        assert_eq!(back, want);
    }

    #[test]
    fn orphan_call_gets_a_synthetic_result() {
        let out = written(vec![
            entry("a", Role::Assistant, Origin::Agent, vec![Part::Text { text: "try".into() }, call("c1"), call("c2")]),
            entry("r2", Role::Tool, Origin::Tool, vec![result("c2")]),
            Entry::text("u", Role::User, Origin::Operator, "next"),
        ]);
        assert_eq!(
            out,
            serde_json::json!([
                {"role": "assistant", "content": "try", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{\"n\":\"c1\"}"}},
                    {"id": "c2", "type": "function", "function": {"name": "run", "arguments": "{\"n\":\"c2\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": NO_RESULT},
                {"role": "tool", "tool_call_id": "c2", "content": "out c2"},
                {"role": "user", "content": "next"}
            ])
        );
    }

    #[test]
    fn late_result_moves_up_to_its_call() {
        let out = written(vec![
            entry("a", Role::Assistant, Origin::Agent, vec![call("c1")]),
            Entry::text("u", Role::User, Origin::Operator, "meanwhile"),
            entry("r", Role::Tool, Origin::Tool, vec![result("c1")]),
            entry("a2", Role::Assistant, Origin::Agent, vec![Part::Text { text: "done".into() }]),
        ]);
        let roles: Vec<_> = out.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["assistant", "tool", "user", "assistant"]);
        assert_eq!(out[1]["content"], "out c1");
    }

    #[test]
    fn unknown_results_placeholders_summaries_and_empty_replies() {
        let out = written(vec![
            entry("s", Role::User, Origin::Summary, vec![Part::Text { text: "so far".into() }]),
            entry("r0", Role::Tool, Origin::Tool, vec![result("early")]),
            entry("a", Role::Assistant, Origin::Agent, vec![Part::Thinking { text: "hidden".into() }, call("early")]),
            entry("x", Role::Tool, Origin::Tool, vec![result("early"), result("early")]),
            entry("empty", Role::Assistant, Origin::Agent, vec![]),
            entry("thought", Role::Assistant, Origin::Agent, vec![Part::Thinking { text: "only".into() }]),
            entry("p", Role::Tool, Origin::Tool, vec![Part::Placeholder { text: "[42 lines set aside]".into(), uri: Some("artifact://1".into()) }]),
        ]);
        assert_eq!(
            out,
            serde_json::json!([
                {"role": "user", "content": "so far"},
                {"role": "user", "content": "[tool result for unknown call early]\nout early"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "early", "type": "function", "function": {"name": "run", "arguments": "{\"n\":\"early\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "early", "content": "out early"},
                {"role": "user", "content": "[tool result for unknown call early]\nout early"},
                {"role": "user", "content": "[42 lines set aside]"}
            ])
        );
    }

    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_openai_chats() {
        let files = real_files("openai-chat", "json");
        for (name, text) in files {
            let (t, format) = parse_any(&text, &name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format, Format::OpenAi, "{name}");
            assert!(t.entries.iter().any(|e| e.tool_call_ids().next().is_some()), "{name}: has tool calls");
            let (back, _) = parse_any(&write(&t), &name).unwrap_or_else(|e| panic!("{e}"));
            assert_calls_answered_in_place(&back, &name);
        }
    }
}
