//! OpenCode sessions, as `opencode export SESSION_ID` prints them (1.18.33): one JSON document
//! `{info, messages: [{info, parts}]}` (a plugin's `client.session.messages` list under
//! `messages` reads the same). Read as the history OpenCode sends the model
//! (`filterCompacted` in its message module):
//! - after a finished compaction (a user message with a `compaction` part, answered by an
//!   assistant message with `summary: true`), only the summary, the kept tail (from the
//!   compaction part's `tail_start_id`) and what follows; the summary is one `Origin::Summary`
//!   entry;
//! - a user message's `text` parts (a `synthetic` one is the harness's, an `ignored` one never
//!   reaches the model), media `file` parts as images; its other `file` and `agent` parts were
//!   expanded by OpenCode into synthetic text already;
//! - an assistant message's `text`, `reasoning` and `tool` parts, each tool call answered right
//!   after the message by its `state` (`output`, `error`, or interrupted while `pending` or
//!   `running`; an output pruned by OpenCode reads as it does for the model);
//! - `step-start`, `step-finish`, `snapshot`, `patch` and `retry` parts carry nothing for the
//!   model; unknown part kinds are kept as opaque text and counted.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{describe_url, opaque, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript, Unrecognized};

/// Whether a parsed document is an OpenCode export: a session `info` and `messages` whose
/// items are `{info, parts}`.
pub(super) fn detect(doc: &Map<String, Value>) -> bool {
    let Some(messages) = doc.get("messages").and_then(Value::as_array) else { return false };
    doc.get("info").is_some_and(Value::is_object) && messages.first().is_none_or(|m| m.get("info").is_some_and(Value::is_object) && m.get("parts").is_some_and(Value::is_array))
}

/// `detect` for a document spread over lines (`opencode export` pretty-prints).
pub(super) fn detect_text(text: &str) -> bool {
    matches!(super::probe::reduced(text), Ok(Value::Object(doc)) if detect(&doc))
}

#[derive(Deserialize)]
struct Export {
    messages: Vec<Message>,
}

#[derive(Deserialize)]
struct Message {
    info: Info,
    #[serde(default)]
    parts: Vec<Value>,
}

#[derive(Deserialize)]
struct Info {
    id: String,
    role: String,
    /// `true` on a compaction's summary; an object (diffs) on user messages.
    #[serde(default)]
    summary: Value,
    #[serde(default)]
    finish: Option<String>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, rename = "parentID")]
    parent_id: Option<String>,
    #[serde(default)]
    tokens: Option<Value>,
}

impl Message {
    fn compaction_part(&self) -> Option<&Value> {
        self.parts.iter().find(|p| p.get("type").and_then(Value::as_str) == Some("compaction"))
    }

    /// A finished compaction summary (OpenCode ignores one that failed or never finished).
    fn is_summary(&self) -> bool {
        self.info.role == "assistant" && self.info.summary == Value::Bool(true) && self.info.finish.is_some() && self.info.error.is_none()
    }
}

/// Parts that carry nothing for the model.
const SILENT: &[&str] = &["step-start", "step-finish", "snapshot", "patch", "retry", "compaction", "agent"];

/// `opencode export` documents (only OpenCode writes them).
pub(super) struct OpenCodeExport;

impl super::TranscriptFormat for OpenCodeExport {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn detect(&self, head: Option<&serde_json::Value>, text: &str) -> bool {
        match head {
            Some(head) => head.as_object().is_some_and(detect),
            // Pretty-printed, as `opencode export` writes it.
            None => text.trim_start().starts_with('{') && detect_text(text),
        }
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let export: Export = serde_json::from_str(text).map_err(|e| TranscriptError::in_document(source_name, &e))?;
    let messages = visible(&export.messages);
    let mut unrecognized = Unrecognized::default();
    let mut entries = Vec::new();
    for message in messages {
        let id = message.info.id.clone();
        if message.is_summary() {
            let text = texts(message).join("\n");
            if !text.trim().is_empty() {
                entries.push(Entry::text(id, Role::User, Origin::Summary, text));
            }
            continue;
        }
        match message.info.role.as_str() {
            "user" => {
                let mut parts = Vec::new();
                let mut operator = false;
                for part in &message.parts {
                    let kind = part.get("type").and_then(Value::as_str).unwrap_or("untyped");
                    match kind {
                        "text" if part.get("ignored").and_then(Value::as_bool) == Some(true) => {}
                        "text" => {
                            let text = part.get("text").and_then(Value::as_str).unwrap_or_default();
                            if !text.is_empty() {
                                operator |= part.get("synthetic").and_then(Value::as_bool) != Some(true);
                                parts.push(Part::Text { text: text.to_string() });
                            }
                        }
                        "file" => parts.extend(media(part)),
                        "subtask" => parts.push(opaque(part)),
                        _ if SILENT.contains(&kind) => {}
                        _ => {
                            unrecognized.keep(kind);
                            parts.push(opaque(part));
                        }
                    }
                }
                if !parts.is_empty() {
                    let origin = if operator { Origin::Operator } else { Origin::Harness };
                    entries.push(Entry { parts: parts.into(), ..Entry::text(id, Role::User, origin, "") });
                }
            }
            "assistant" => {
                let mut parts = Vec::new();
                let mut results = Vec::new();
                for part in &message.parts {
                    let kind = part.get("type").and_then(Value::as_str).unwrap_or("untyped");
                    let field = |k: &str| part.get(k).and_then(Value::as_str).unwrap_or_default();
                    match kind {
                        "text" if !field("text").is_empty() => parts.push(Part::Text { text: field("text").to_string() }),
                        "reasoning" if !field("text").trim().is_empty() => parts.push(Part::Thinking { text: field("text").to_string() }),
                        "text" | "reasoning" => {}
                        "tool" => {
                            let call_id = match field("callID") {
                                "" => format!("{id}-{}", field("id")),
                                call => call.to_string(),
                            };
                            let state = part.get("state").unwrap_or(&Value::Null);
                            let args = state.get("input").map_or_else(|| "{}".to_string(), Value::to_string);
                            parts.push(Part::ToolCall { id: call_id.clone(), name: field("tool").to_string(), args });
                            let (content, is_error) = result(state);
                            results.push(Entry {
                                parts: vec![Part::ToolResult { call_id: call_id.clone(), content, is_error, elided: None }].into(),
                                ..Entry::text(format!("{id}/{call_id}"), Role::Tool, Origin::Tool, "")
                            });
                        }
                        "file" => parts.extend(media(part)),
                        _ if SILENT.contains(&kind) => {}
                        _ => {
                            unrecognized.keep(kind);
                            parts.push(opaque(part));
                        }
                    }
                }
                if parts.is_empty() {
                    continue;
                }
                entries.push(Entry { parts: parts.into(), reported_tokens: message.info.tokens.as_ref().and_then(reported_tokens), ..Entry::text(id, Role::Assistant, Origin::Agent, "") });
                entries.extend(results);
            }
            other => {
                let text = texts(message).join("\n");
                if text.trim().is_empty() {
                    unrecognized.skip(other);
                } else {
                    unrecognized.keep(other);
                    entries.push(Entry::text(id, Role::User, Origin::Harness, format!("[{other} message] {text}")));
                }
            }
        }
    }
    if entries.is_empty() {
        return Err(TranscriptError::new(source_name, None, "an OpenCode session with no messages"));
    }
    Ok(Transcript { unrecognized, ..Transcript::new(entries) })
}

/// The messages OpenCode sends the model: after the last finished compaction, its summary,
/// the tail it kept, then what came after.
fn visible(messages: &[Message]) -> Vec<&Message> {
    let index: HashMap<&str, usize> = messages.iter().enumerate().map(|(i, m)| (m.info.id.as_str(), i)).collect();
    let last = messages.iter().enumerate().rev().find_map(|(j, m)| {
        let parent = *index.get(m.info.parent_id.as_deref()?)?;
        (m.is_summary() && messages[parent].compaction_part().is_some()).then_some((parent, j))
    });
    let Some((compaction, summary)) = last else {
        return messages.iter().collect();
    };
    let tail = messages[compaction].compaction_part().and_then(|p| p.get("tail_start_id")?.as_str()).and_then(|id| index.get(id).copied()).filter(|&t| t < compaction).unwrap_or(compaction);
    let after = messages[summary + 1..].iter().filter(|m| !(m.compaction_part().is_some() || m.info.summary == Value::Bool(true)));
    std::iter::once(&messages[summary]).chain(&messages[tail..compaction]).chain(after).collect()
}

fn texts(message: &Message) -> Vec<&str> {
    message.parts.iter().filter(|p| p.get("type").and_then(Value::as_str) == Some("text")).filter_map(|p| p.get("text")?.as_str()).filter(|t| !t.is_empty()).collect()
}

/// A `file` part the model sees as media; other files OpenCode already inlined as text.
fn media(part: &Value) -> Option<Part> {
    let mime = part.get("mime").and_then(Value::as_str).unwrap_or_default();
    let url = part.get("url").and_then(Value::as_str).unwrap_or_default();
    (mime.starts_with("image/") || mime == "application/pdf").then(|| Part::Image { reference: describe_url(url) })
}

/// What a tool call's state gives the model back, and whether it failed.
fn result(state: &Value) -> (String, bool) {
    let field = |k: &str| state.get(k).and_then(Value::as_str);
    match field("status").unwrap_or("unknown") {
        // OpenCode's own wording for a pruned output.
        "completed" if state.get("time").and_then(|t| t.get("compacted")).is_some_and(|c| !c.is_null()) => ("[Old tool result content cleared]".to_string(), false),
        "completed" => (field("output").unwrap_or_default().to_string(), false),
        "error" => (field("error").unwrap_or("[tool failed]").to_string(), true),
        status => (format!("[Tool execution was interrupted; status: {status}]"), true),
    }
}

/// The context the message's call billed: `total`, else input, output, reasoning and cache summed.
fn reported_tokens(tokens: &Value) -> Option<u64> {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cache = tokens.get("cache");
    let total = match n(tokens.get("total")) {
        0 => ["input", "output", "reasoning"].iter().map(|k| n(tokens.get(*k))).sum::<u64>() + n(cache.and_then(|c| c.get("read"))) + n(cache.and_then(|c| c.get("write"))),
        total => total,
    };
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::assert_calls_answered_in_place;
    use super::*;

    /// A real export (OpenCode 1.18.33 against a scripted model): a `bash` call, then a turn
    /// with a `read` call whose usage triggered automatic compaction (OpenCode's own summarizer)
    /// and the synthetic "Continue…" turn after it. Paths neutralised to /home/user.
    const AUTO: &str = include_str!("testdata/opencode/auto-compaction-1.18.33.json");

    fn parse(text: &str) -> Transcript {
        super::parse(text, "session.json").unwrap_or_else(|e| panic!("{e}"))
    }
    fn shape(t: &Transcript) -> Vec<(&str, Role, Origin)> {
        t.entries.iter().map(|e| (e.id.as_str(), e.role, e.origin)).collect()
    }
    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    #[test]
    fn real_export_after_compaction_is_the_summary_and_what_follows() {
        let t = parse(AUTO);
        assert_eq!(
            shape(&t),
            [
                ("msg_232eca177001PIe0Vh66kHHppH", Role::User, Origin::Summary),
                ("msg_232eca349001mYxihvWoPqVNIO", Role::User, Origin::Harness),
                ("msg_232eca354001NkwhGagNXF3xDf", Role::Assistant, Origin::Agent),
            ]
        );
        assert_eq!(t.entries[0].parts, [text("SCRIPTED SUMMARY")]);
        assert!(matches!(&t.entries[1].parts[..], [Part::Text { text }] if text.starts_with("Continue if you have next steps")));
        assert_eq!(t.entries[2].reported_tokens, Some(3020));
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
    }

    /// The export up to the compaction request (the compaction's messages cut off): every
    /// message, each call answered right after it.
    fn before_compaction() -> String {
        let mut doc: Value = serde_json::from_str(AUTO).unwrap();
        let messages = doc["messages"].as_array_mut().unwrap();
        let at = messages.iter().position(|m| m["parts"].to_string().contains("\"compaction\"")).unwrap();
        messages.truncate(at);
        doc.to_string()
    }

    #[test]
    fn real_export_before_compaction_pairs_every_call() {
        let t = parse(&before_compaction());
        let roles: Vec<_> = t.entries.iter().map(|e| (e.role, e.origin)).collect();
        let (user, agent, tool) = ((Role::User, Origin::Operator), (Role::Assistant, Origin::Agent), (Role::Tool, Origin::Tool));
        assert_eq!(roles, [user, agent, tool, agent, user, agent, tool, agent]);
        assert_eq!(t.entries[0].parts, [text("RUN1 show me the notes")]);
        assert_eq!(t.entries[1].parts, [Part::ToolCall { id: "call_1".into(), name: "bash".into(), args: r#"{"command":"cat notes.txt","description":"show notes"}"#.into() }]);
        assert_eq!(t.entries[2].id, "msg_232ec59dd001OKc08L02XMUgUV/call_1");
        assert_eq!(t.entries[2].parts, [Part::ToolResult { call_id: "call_1".into(), content: "Notes: port 8431\n".into(), is_error: false, elided: None }]);
        let [Part::ToolResult { call_id, content, .. }] = &t.entries[6].parts[..] else { panic!("{:?}", t.entries[6]) };
        assert_eq!(call_id, "call_2");
        assert!(content.contains("<path>/home/user/proj/notes.txt</path>"), "{content}");
        assert_eq!(t.entries[7].reported_tokens, Some(31020));
        assert_calls_answered_in_place(&t, "before compaction");
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
    }

    /// A real export with Cairn's plugin: Cairn's summary replaced OpenCode's, OpenCode kept a
    /// tail (`tail_start_id`: the `read` call's message), and a later turn called
    /// `cairn_session_history`. Long tool outputs trimmed, paths neutralised.
    const CAIRN: &str = include_str!("testdata/opencode/cairn-compaction-1.18.33.json");

    #[test]
    fn real_export_keeps_the_tail_after_cairns_summary() {
        let t = parse(CAIRN);
        let ids: Vec<&str> = t.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids[..3], ["msg_232f08f1d001DTJ0HNS0vZnnqn", "msg_232f058a8001aPOrIziXB3yg2I", "msg_232f058a8001aPOrIziXB3yg2I/call_r1_read"]);
        assert_eq!(t.entries[0].origin, Origin::Summary);
        let summary = t.entries[0].model_text();
        assert!(summary.starts_with("The earlier part of this conversation, condensed by Cairn"), "{summary}");
        assert!(summary.contains("never touch vendor/"), "{summary}");
        // Only the kept tail and what follows: RUN1's prompt and bash call are in the summary.
        assert!(!t.entries[1..].iter().any(|e| e.model_text().contains("RUN1: the rule")));
        let history = t.entries.iter().flat_map(|e| &e.parts).find_map(|p| match p {
            Part::ToolCall { id, name, .. } if id == "call_r3_history" => Some(name.as_str()),
            _ => None,
        });
        assert_eq!(history, Some("cairn_session_history"));
        let calls = t.entries.iter().flat_map(|e| e.tool_call_ids()).count();
        assert_eq!(calls, 3, "read, bash (RUN2), session_history");
        assert_calls_answered_in_place(&t, "cairn compaction");
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
    }

    /// What Cairn writes from the real exports (its JSONL, OpenAI, Anthropic) reads back with
    /// every call kept and answered in place.
    #[test]
    fn real_exports_write_and_reparse() {
        for (name, text) in [("auto", AUTO.to_string()), ("cairn", CAIRN.to_string()), ("before", before_compaction())] {
            let (t, _) = super::super::parse(&text, name).unwrap();
            let (back, _) = super::super::parse(&super::super::write_cairn(&t), name).unwrap();
            assert_eq!(back, t, "{name}: cairn round trip");
            let calls = |t: &Transcript| t.entries.iter().flat_map(|e| e.tool_call_ids()).count();
            for written in [super::super::write_openai(&t), super::super::write_anthropic(&t)] {
                let (chat, _) = super::super::parse(&written, name).unwrap();
                assert_calls_answered_in_place(&chat, name);
                assert_eq!(calls(&chat), calls(&t), "{name}");
            }
        }
    }

    #[test]
    fn detected_pretty_and_on_one_line() {
        for text in [AUTO.to_string(), before_compaction()] {
            let (t, format) = super::super::parse(&text, "s.json").unwrap();
            assert_eq!(format, super::super::Format::OpenCode);
            assert!(!t.entries.is_empty());
        }
        let map = |s: &str| serde_json::from_str::<Map<String, Value>>(s).unwrap();
        assert!(!detect(&map(r#"{"messages":[{"role":"user","content":"hi"}]}"#)));
        assert!(!detect(&map(r#"{"info":{},"messages":[{"role":"user","content":"hi"}]}"#)));
        assert!(detect(&map(r#"{"info":{"id":"ses_1"},"messages":[]}"#)));
    }

    const HEAD: &str = r#"{"info":{"id":"ses_x"},"messages":["#;

    fn doc(messages: &str) -> String {
        format!("{HEAD}{messages}]}}")
    }

    #[test]
    fn kept_tail_follows_the_summary() {
        let t = parse(&doc(r#"
{"info":{"id":"u1","role":"user"},"parts":[{"type":"text","text":"first"}]},
{"info":{"id":"a1","role":"assistant","parentID":"u1","finish":"stop"},"parts":[{"type":"text","text":"one"}]},
{"info":{"id":"u2","role":"user"},"parts":[{"type":"text","text":"second"}]},
{"info":{"id":"a2","role":"assistant","parentID":"u2","finish":"stop"},"parts":[{"type":"text","text":"two"}]},
{"info":{"id":"c","role":"user"},"parts":[{"type":"compaction","auto":false,"tail_start_id":"u2"}]},
{"info":{"id":"s","role":"assistant","parentID":"c","summary":true,"finish":"stop"},"parts":[{"type":"text","text":"SUMMARY"}]},
{"info":{"id":"u3","role":"user"},"parts":[{"type":"text","text":"third"}]}"#));
        assert_eq!(shape(&t).iter().map(|(id, _, _)| *id).collect::<Vec<_>>(), ["s", "u2", "a2", "u3"]);
        assert_eq!(t.entries[0].origin, Origin::Summary);
    }

    #[test]
    fn failed_compaction_is_not_a_summary() {
        let t = parse(&doc(r#"
{"info":{"id":"u1","role":"user"},"parts":[{"type":"text","text":"first"}]},
{"info":{"id":"c","role":"user"},"parts":[{"type":"compaction","auto":true}]},
{"info":{"id":"s","role":"assistant","parentID":"c","summary":true,"error":{"name":"X"}},"parts":[]}"#));
        assert_eq!(shape(&t), [("u1", Role::User, Origin::Operator)]);
    }

    #[test]
    fn parts_of_every_kind() {
        let t = parse(&doc(r#"
{"info":{"id":"u","role":"user"},"parts":[{"type":"text","text":"look"},{"type":"text","text":"hidden","ignored":true},
  {"type":"file","mime":"image/png","url":"data:image/png;base64,QUJD"},{"type":"file","mime":"text/plain","url":"file:///a.txt"},{"type":"hologram","x":1}]},
{"info":{"id":"a","role":"assistant","parentID":"u","finish":"tool-calls","tokens":{"input":10,"output":2,"reasoning":1,"cache":{"read":5,"write":0}}},"parts":[
  {"type":"step-start"},{"type":"reasoning","text":"hmm"},{"type":"text","text":""},
  {"type":"tool","tool":"bash","callID":"c1","state":{"status":"error","input":{"command":"x"},"error":"boom"}},
  {"type":"tool","tool":"read","callID":"c2","state":{"status":"running","input":{}}},
  {"type":"tool","tool":"grep","callID":"c3","state":{"status":"completed","input":{},"output":"big","time":{"start":1,"end":2,"compacted":3}}},
  {"type":"step-finish","reason":"tool-calls"}]},
{"info":{"id":"w","role":"system"},"parts":[{"type":"text","text":""}]}"#));
        assert_eq!(t.entries[0].parts[..2], [text("look"), Part::Image { reference: "image/png image, 4 bytes base64".into() }]);
        assert!(matches!(&t.entries[0].parts[2], Part::Text { text } if text.starts_with("[hologram block]")));
        assert_eq!(t.unrecognized.kept.get("hologram"), Some(&1));
        assert_eq!(t.unrecognized.skipped.get("system"), Some(&1));
        assert_eq!(t.entries[1].parts[0], Part::Thinking { text: "hmm".into() });
        assert_eq!(t.entries[1].reported_tokens, Some(18));
        let results: Vec<_> = t.entries[2..].iter().map(|e| e.parts[0].clone()).collect();
        assert_eq!(
            results,
            [
                Part::ToolResult { call_id: "c1".into(), content: "boom".into(), is_error: true, elided: None },
                Part::ToolResult { call_id: "c2".into(), content: "[Tool execution was interrupted; status: running]".into(), is_error: true, elided: None },
                Part::ToolResult { call_id: "c3".into(), content: "[Old tool result content cleared]".into(), is_error: false, elided: None },
            ]
        );
        assert_calls_answered_in_place(&t, "kinds");
    }

    /// Mutated exports (bytes dropped, swapped, duplicated; ids renamed) are read or refused,
    /// never a panic; a compaction pointing anywhere still yields calls answered in place.
    #[test]
    fn mutated_exports_never_panic() {
        let mut seed = 0x0c0d_e5e1_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let compact: String = serde_json::to_string(&serde_json::from_str::<Value>(CAIRN).unwrap()).unwrap();
        let mut read = 0;
        for round in 0..600 {
            let mut text = compact.clone().into_bytes();
            for _ in 0..1 + next(4) {
                let (at, other) = (next(text.len()), next(text.len()));
                match next(4) {
                    0 => drop(text.remove(at)),
                    1 => text.insert(at, text[other]),
                    2 => text.swap(at, other),
                    _ => text.truncate(at.max(1)),
                }
            }
            let mut text = String::from_utf8_lossy(&text).into_owned();
            if round % 3 == 0 {
                // A compaction's tail or parent naming another message.
                text = text.replacen("msg_232f058a8001aPOrIziXB3yg2I", "msg_232f0c08e001uDDDQgDyLr9O05", 1 + next(2));
            }
            if let Ok(t) = super::parse(&text, "mutated.json") {
                assert_calls_answered_in_place(&t, "mutated");
                read += 1;
            }
        }
        assert!(read > 0 && read < 600, "the mutations reach both outcomes ({read} of 600 read)");
    }

    #[test]
    fn errors_name_the_line() {
        let e = super::parse(&format!("{HEAD}\n{{\"info\":{{\"role\":\"user\"}},\"parts\":[]}}\n]}}"), "s.json").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("missing field `id`"), "{}", e.message);
        let e = super::parse(&format!("{HEAD}\n{{\"info\":\n"), "s.json").unwrap_err();
        assert_eq!((e.source_name.as_str(), e.line), ("s.json", Some(3)));
        let e = super::parse(&doc(""), "s.json").unwrap_err();
        assert_eq!(e.message, "an OpenCode session with no messages");
    }
}
