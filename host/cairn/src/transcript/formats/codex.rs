//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`), read as the context
//! Codex sends the model next:
//! - envelope lines (`{timestamp, type, payload}`, since Sept 2025) hold the model-visible items
//!   in `response_item` lines; older files hold the same items as bare lines, after a bare
//!   session meta and between `{"record_type":"state"}` lines;
//! - only what follows the last `compacted` line is context: its `replacement_history` (or, in
//!   files before that field, its summary `message`) stands for everything before it;
//! - items carry no response id, so the items of one model response (reasoning, text, tool
//!   calls) are those between two user messages or tool outputs: merged into one entry;
//! - since 0.169 a `token_usage_record` line follows each response's items and names it
//!   (`response_id`, `usage`): the entry gets that id and the usage; `token_count` events (no
//!   id, the same usage again) are then ignored; in older files the latest `token_count` goes on
//!   the latest response;
//! - the other events repeat the items for the UI, and `turn_context`/`session_meta`/
//!   `world_state` describe settings: skipped;
//! - context Codex injects (developer/system messages such as `<skills_instructions>` and the
//!   base prompt: system; user messages such as `<environment_context>`, AGENTS.md) is harness;
//! - the base prompt (`session_meta.base_instructions`, the `instructions` of every request) is
//!   the first entry, system and harness: counted as the model's context, kept verbatim by every
//!   compaction (instructions), and never written back as an item (Codex sends it itself);
//! - with the built-in OpenAI provider compaction is remote: the `compacted` line has an empty
//!   `message` and its `replacement_history` ends in an encrypted `compaction` item, read as an
//!   opaque summary entry (see [`encrypted_summary`]);
//! - MCP calls name their tool in two fields (`namespace: "mcp__server"`, `name: "tool"`); the
//!   entry keeps the name Codex qualifies them with, `mcp__server__tool`.
//!
//! Shapes: openai/codex `codex-rs/protocol/src/{protocol,models}.rs` (Dec 2025) and, before the
//! envelope (PR #3380), `codex-rs/core/src/rollout.rs`.

use serde_json::{Map, Value};

use super::{describe_url, opaque, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript, Unrecognized, INSTRUCTION_BLOCKS};

const ENVELOPE_TYPES: &[&str] = &["session_meta", "response_item", "turn_context", "event_msg", "compacted", "world_state", "token_usage_record"];

/// How the user messages Codex writes itself begin, besides its instruction blocks
/// ([`INSTRUCTION_BLOCKS`]): context for the model, not the operator's words.
const INJECTED: &[&str] = &["<environment_context>", "<turn_aborted>", "<skill>"];

/// Whether `first` (the first non-blank line, parsed) looks like a Codex rollout line.
pub(super) fn detect(first: &Map<String, Value>) -> bool {
    let kind = first.get("type").and_then(Value::as_str);
    let envelope = first.contains_key("payload") && (kind == Some("session_meta") || first.contains_key("timestamp") && kind.is_some_and(|k| ENVELOPE_TYPES.contains(&k)));
    envelope || legacy_meta(first) || first.contains_key("record_type")
}

/// The bare session meta that opens a pre-envelope file: `{id, timestamp, instructions?, git?}`.
fn legacy_meta(line: &Map<String, Value>) -> bool {
    const KEYS: &[&str] = &["id", "timestamp", "instructions", "git"];
    line.contains_key("id") && line.contains_key("timestamp") && (line.contains_key("instructions") || line.keys().all(|k| KEYS.contains(&k.as_str())))
}

/// The base prompt a `session_meta` line records (`base_instructions`, `{text, provenance}` since
/// 0.169, a string before): the `instructions` of every request Codex sends the model, so part
/// of the context it counts and reports usage for, though no `response_item` holds it.
fn base_instructions(line: &Value) -> Option<&str> {
    let (kind, payload) = envelope(line)?;
    let base = payload.get("base_instructions").filter(|_| kind == "session_meta")?;
    base.as_str().or_else(|| base.get("text")?.as_str()).filter(|t| !t.trim().is_empty())
}

/// The type and payload of an envelope line.
fn envelope(line: &Value) -> Option<(&str, &Value)> {
    Some((line.get("type")?.as_str()?, line.get("payload")?))
}

/// Codex rollout files (only Codex writes them).
pub(super) struct CodexRollout;

impl super::TranscriptFormat for CodexRollout {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn detect(&self, head: Option<&serde_json::Value>, _: &str) -> bool {
        super::transcript_format::object(head).is_some_and(detect)
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line: Value = serde_json::from_str(raw).map_err(|e| TranscriptError::in_line(source_name, i + 1, &e))?;
        if !line.is_object() {
            return Err(TranscriptError::new(source_name, Some(i + 1), "expected a JSON object"));
        }
        lines.push((i + 1, line));
    }
    let last_compaction = lines.iter().rposition(|(_, l)| envelope(l).is_some_and(|(kind, _)| kind == "compacted"));

    let usage_records = lines.iter().any(|(_, l)| envelope(l).is_some_and(|(kind, _)| kind == "token_usage_record"));
    let mut reader = Reader { source_name, entries: Vec::new(), open: None, unrecognized: Unrecognized::default(), usage_records, compaction_response: None };
    // Codex sends its base prompt first in every request, before and after any compaction.
    if let Some((line_no, text)) = lines.iter().rev().find_map(|(n, l)| Some((*n, base_instructions(l)?))) {
        reader.push(format!("l{line_no}"), Role::System, Origin::Harness, vec![Part::Text { text: text.to_string() }]);
    }
    let base = reader.entries.len();
    if let Some((line_no, payload)) = last_compaction.and_then(|at| Some((lines[at].0, envelope(&lines[at].1)?.1))) {
        reader.compaction(line_no, payload)?;
    }
    for (line_no, line) in lines.iter().skip(last_compaction.map_or(0, |at| at + 1)) {
        reader.line(*line_no, line)?;
    }
    if reader.entries.len() == base {
        return Err(TranscriptError::new(source_name, None, "a Codex rollout with no messages"));
    }
    Ok(Transcript { unrecognized: reader.unrecognized, ..Transcript::new(reader.entries) })
}

struct Reader<'a> {
    source_name: &'a str,
    entries: Vec<Entry>,
    /// The assistant entry the current model response's items go into.
    open: Option<usize>,
    unrecognized: Unrecognized,
    /// The file has `token_usage_record` lines (0.169+): usage goes by response id.
    usage_records: bool,
    /// The response that produced the last compaction: its usage measured the context it
    /// replaced, not any entry read.
    compaction_response: Option<String>,
}

impl Reader<'_> {
    fn line(&mut self, line_no: usize, line: &Value) -> Result<(), TranscriptError> {
        let id = format!("l{line_no}");
        match envelope(line) {
            Some(("response_item", item)) => self.item(item, id, line_no)?,
            Some(("event_msg", event)) => self.event(event),
            Some(("token_usage_record", record)) => self.usage_record(record),
            Some(("session_meta" | "turn_context" | "world_state", _)) => {}
            Some((kind, _)) => self.unrecognized.skip(kind),
            // Pre-envelope bookkeeping: state lines and the session meta carry no message.
            None if line.get("record_type").is_some() || line.as_object().is_some_and(legacy_meta) => {}
            None => self.item(line, id, line_no)?,
        }
        Ok(())
    }

    /// The last compaction: the history it replaced everything before with, or its summary.
    fn compaction(&mut self, line_no: usize, payload: &Value) -> Result<(), TranscriptError> {
        self.compaction_response = payload.get("compaction_response_id").and_then(Value::as_str).map(str::to_string);
        let message = payload.get("message").and_then(Value::as_str).unwrap_or_default();
        let Some(history) = payload.get("replacement_history").and_then(Value::as_array) else {
            if !message.is_empty() {
                let summary = vec![Part::Text { text: message.to_string() }];
                self.push(format!("l{line_no}"), Role::User, Origin::Summary, summary);
            }
            return Ok(());
        };
        for (k, item) in history.iter().enumerate() {
            let before = self.entries.len();
            self.item(item, format!("l{line_no}-h{k}"), line_no)?;
            // The summary is in the history as a user message with the compaction's text.
            if let Some(entry) = self.entries.get_mut(before) {
                let is_summary = matches!(entry.parts.as_slice(), [Part::Text { text }] if !message.is_empty() && text == message);
                if entry.role == Role::User && is_summary {
                    entry.origin = Origin::Summary;
                }
                if entry.origin == Origin::Summary {
                    entry.response.clone_from(&self.compaction_response);
                }
            }
        }
        self.open = None;
        Ok(())
    }

    /// One ResponseItem: an envelope's payload, a legacy line or a replacement-history item.
    fn item(&mut self, item: &Value, id: String, line_no: usize) -> Result<(), TranscriptError> {
        let source_name = self.source_name;
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        let missing = |field: &str| TranscriptError::new(source_name, Some(line_no), format!("a {kind} item without `{field}`"));
        let string = |field: &str| item.get(field).and_then(Value::as_str).map(str::to_string).ok_or_else(|| missing(field));
        match kind {
            "message" => {
                let role = string("role")?;
                let parts = content_parts(item.get("content").ok_or_else(|| missing("content"))?);
                match role.as_str() {
                    "assistant" => self.respond(id, parts),
                    "user" => {
                        let injected = matches!(parts.first(), Some(Part::Text { text }) if INJECTED.iter().chain(INSTRUCTION_BLOCKS).any(|p| text.trim_start().starts_with(p)));
                        self.push(id, Role::User, if injected { Origin::Harness } else { Origin::Operator }, parts);
                    }
                    "developer" | "system" => self.push(id, Role::System, Origin::Harness, parts),
                    _ => self.respond(id, vec![opaque(item)]),
                }
            }
            "reasoning" => {
                let texts: Vec<&str> = ["summary", "content"]
                    .iter()
                    .filter_map(|k| item.get(*k).and_then(Value::as_array))
                    .flatten()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .filter(|t| !t.is_empty())
                    .collect();
                // Encrypted reasoning is still sent back to the model: keep a trace of it.
                let text = if !texts.is_empty() {
                    texts.join("\n\n")
                } else if item.get("encrypted_content").is_some_and(Value::is_string) {
                    "[encrypted reasoning]".to_string()
                } else {
                    return Ok(());
                };
                self.respond(id, vec![Part::Thinking { text }]);
            }
            "function_call" => {
                let name = match item.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                    Some(namespace) => qualified(namespace, &string("name")?),
                    None => string("name")?,
                };
                let call = Part::ToolCall { id: string("call_id")?, name, args: string("arguments")? };
                self.respond(id, vec![call]);
            }
            "custom_tool_call" => {
                let call = Part::ToolCall { id: string("call_id")?, name: string("name")?, args: string("input")? };
                self.respond(id, vec![call]);
            }
            "local_shell_call" => {
                // `call_id` may be null; its output then answers the item's own id.
                let call_id = ["call_id", "id"].iter().find_map(|k| item.get(*k).and_then(Value::as_str)).map_or_else(|| id.clone(), str::to_string);
                let args = item.get("action").map_or_else(|| "{}".to_string(), Value::to_string);
                self.respond(id, vec![Part::ToolCall { id: call_id, name: "local_shell".into(), args }]);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let call_id = string("call_id")?;
                let parts = tool_result(call_id, item.get("output").ok_or_else(|| missing("output"))?);
                self.push(id, Role::Tool, Origin::Tool, parts);
            }
            // Codex's undo bookkeeping (a local git commit); never sent to the model.
            "ghost_snapshot" => {}
            // The model's own searches: kept as written.
            "web_search_call" => self.respond(id, vec![opaque(item)]),
            // A remote compaction's summary: opaque, in the user's place Codex sends it back in.
            "compaction" => self.push(id, Role::User, Origin::Summary, vec![encrypted_summary(item)]),
            // Newer items: the model's, kept as written, and counted.
            _ => {
                self.unrecognized.keep(if kind.is_empty() { "(no type)" } else { kind });
                self.respond(id, vec![opaque(item)]);
            }
        }
        Ok(())
    }

    /// `token_count`: the latest call's context size, on the response it produced.
    fn event(&mut self, payload: &Value) {
        if self.usage_records || payload.get("type").and_then(Value::as_str) != Some("token_count") {
            return;
        }
        let Some(usage) = payload.pointer("/info/last_token_usage") else { return };
        let count = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
        // Cached tokens are part of `input_tokens` in Codex.
        let tokens = count("input_tokens") + count("output_tokens");
        if tokens == 0 {
            return;
        }
        if let Some(entry) = self.entries.iter_mut().rev().find(|e| e.role == Role::Assistant) {
            entry.reported_tokens = Some(tokens);
        }
    }

    /// `token_usage_record` (0.169+): one response's usage, by id, right after its items. It
    /// goes on the latest response entry unless that one already belongs to another response
    /// (this response left no entry); the compaction call's record is not any entry's.
    fn usage_record(&mut self, record: &Value) {
        let Some(response) = record.get("response_id").and_then(Value::as_str) else { return };
        if self.compaction_response.as_deref() == Some(response) {
            return;
        }
        let count = |k: &str| record.pointer(&format!("/usage/{k}")).and_then(Value::as_u64).unwrap_or(0);
        // Cached tokens are part of `input_tokens` in Codex.
        let tokens = count("input_tokens") + count("output_tokens");
        let Some(entry) = self.entries.iter_mut().rev().find(|e| e.role == Role::Assistant) else { return };
        if entry.response.as_deref().is_some_and(|r| r != response) {
            return;
        }
        entry.response = Some(response.to_string());
        if tokens > 0 {
            entry.reported_tokens = Some(tokens);
        }
    }

    /// Parts of the current model response: into its open entry, or opening one.
    fn respond(&mut self, id: String, parts: Vec<Part>) {
        match self.open {
            Some(at) => self.entries[at].parts.extend(parts),
            None if parts.is_empty() => {}
            None => {
                self.open = Some(self.entries.len());
                self.entries.push(Entry { parts: parts.into(), ..Entry::text(id, Role::Assistant, Origin::Agent, "") });
            }
        }
    }

    /// An entry outside any model response; it ends the open one.
    fn push(&mut self, id: String, role: Role, origin: Origin, parts: Vec<Part>) {
        self.open = None;
        if !parts.is_empty() {
            self.entries.push(Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") });
        }
    }
}

/// The tool name Codex shows the model for a namespaced call: MCP tools are offered as one
/// namespace tool `mcp__<server>` holding the server's tools, and Codex's own prompts call
/// them by "standard MCP identifiers such as mcp__server__tool" (0.169.0's binary).
fn qualified(namespace: &str, name: &str) -> String {
    if name.starts_with(&format!("{namespace}__")) {
        name.to_string()
    } else {
        format!("{namespace}__{name}")
    }
}

/// A remote compaction's summary (`{"type":"compaction","encrypted_content":…}`): Codex's
/// encrypted summary of everything before it, written by the OpenAI Responses API. Only that
/// API can read it; no other provider can, and neither can Cairn. It is kept as is (the whole
/// item, so a writer can send it back to OpenAI), with a note saying so, as a summary entry.
fn encrypted_summary(item: &Value) -> Part {
    Part::Text {
        text: format!("[Codex's encrypted summary of the earlier conversation (a remote compaction by the OpenAI Responses API), kept as is: only OpenAI can read it, no other provider can] {item}"),
    }
}

/// A message's `content`: text, images described, anything else opaque.
fn content_parts(content: &Value) -> Vec<Part> {
    match content {
        Value::Array(items) => items.iter().filter_map(content_part).collect(),
        Value::String(text) if text.is_empty() => Vec::new(),
        Value::String(text) => vec![Part::Text { text: text.clone() }],
        Value::Null => Vec::new(),
        other => vec![opaque(other)],
    }
}

fn content_part(item: &Value) -> Option<Part> {
    let field = |k: &str| item.get(k).and_then(Value::as_str);
    match (field("type"), field("text"), field("image_url")) {
        (Some("input_text" | "output_text"), Some(text), _) => (!text.is_empty()).then(|| Part::Text { text: text.to_string() }),
        (Some("input_image"), _, Some(url)) => Some(Part::Image { reference: describe_url(url) }),
        _ => Some(opaque(item)),
    }
}

/// A tool output: a string, content items (text joined, images kept beside the result), or,
/// in old versions, `{content, success}`.
fn tool_result(call_id: String, output: &Value) -> Vec<Part> {
    let as_text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
    let mut images = Vec::new();
    let (content, is_error) = match output {
        Value::Array(items) => {
            let mut texts = Vec::new();
            for part in items.iter().filter_map(content_part) {
                match part {
                    Part::Text { text } => texts.push(text),
                    image => images.push(image),
                }
            }
            (texts.join("\n"), false)
        }
        Value::Object(o) if o.contains_key("content") => {
            let content = o.get("content").map(as_text).unwrap_or_default();
            (content, o.get("success").and_then(Value::as_bool) == Some(false))
        }
        other => (as_text(other), false),
    };
    let mut parts = vec![Part::ToolResult { call_id, content, is_error, elided: None }];
    parts.extend(images);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Transcript {
        super::parse(text, "rollout.jsonl").unwrap()
    }
    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }
    fn result(call_id: &str, content: &str) -> Part {
        Part::ToolResult { call_id: call_id.into(), content: content.into(), is_error: false, elided: None }
    }
    fn shape(t: &Transcript) -> Vec<(&str, Role, Origin)> {
        t.entries.iter().map(|e| (e.id.as_str(), e.role, e.origin)).collect()
    }

    const ENVELOPE: &str = r#"{"timestamp":"2025-10-14T09:12:03.481Z","type":"session_meta","payload":{"id":"0199e1a2","timestamp":"2025-10-14T09:12:03.455Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.46.0","instructions":null}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>sandboxed</permissions instructions>"}]}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}]}}
{"timestamp":"t","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5-codex"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the test"}]}}
{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"Fix the test","images":[]}}
{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":null}}
{"timestamp":"t","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"**Looking**"},{"type":"summary_text","text":"at tests"}],"content":null,"encrypted_content":"gAAA"}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"cargo\",\"test\"]}","call_id":"call_1"}}
{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50,"reasoning_output_tokens":10,"total_tokens":1050}}}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"ok: 1 passed"}}
{"timestamp":"t","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"gAAB"}}
{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call","status":"completed","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch\n"}}
{"timestamp":"t","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_2","output":"Success"}}

{"timestamp":"t","type":"response_item","payload":{"type":"web_search_call","status":"completed","action":{"type":"search","query":"rust"}}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}}
{"timestamp":"t","type":"event_msg","payload":{"type":"agent_message","message":"Fixed."}}
{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":1200,"output_tokens":30}}}}
{"timestamp":"t","type":"response_item","payload":{"type":"ghost_snapshot","ghost_commit":{"id":"abc"}}}
{"timestamp":"t","type":"world_state","payload":{}}
"#;

    #[test]
    fn envelope_merges_each_response_and_answers_its_calls() {
        let t = parse(ENVELOPE);
        assert_eq!(
            shape(&t),
            [
                ("l2", Role::System, Origin::Harness),
                ("l3", Role::User, Origin::Harness),
                ("l5", Role::User, Origin::Operator),
                ("l8", Role::Assistant, Origin::Agent),
                ("l11", Role::Tool, Origin::Tool),
                ("l12", Role::Assistant, Origin::Agent),
                ("l14", Role::Tool, Origin::Tool),
                ("l16", Role::Assistant, Origin::Agent),
            ]
        );
        assert_eq!(t.entries[2].parts, [text("Fix the test")]);
        assert_eq!(
            t.entries[3].parts,
            [Part::Thinking { text: "**Looking**\n\nat tests".into() }, Part::ToolCall { id: "call_1".into(), name: "shell".into(), args: r#"{"command":["cargo","test"]}"#.into() },]
        );
        assert_eq!(t.entries[4].parts, [result("call_1", "ok: 1 passed")]);
        assert_eq!(
            t.entries[5].parts,
            [Part::Thinking { text: "[encrypted reasoning]".into() }, Part::ToolCall { id: "call_2".into(), name: "apply_patch".into(), args: "*** Begin Patch\n*** End Patch\n".into() },]
        );
        assert_eq!(t.entries[6].parts, [result("call_2", "Success")]);
        // The web search is kept, opaque, in the response it belongs to.
        assert!(matches!(&t.entries[7].parts[0], Part::Text { text } if text.starts_with("[web_search_call block]")));
        assert_eq!(t.entries[7].parts[1], text("Fixed."));
    }

    #[test]
    fn token_count_reports_the_latest_call_on_its_response() {
        let t = parse(ENVELOPE);
        let reported: Vec<_> = t.entries.iter().map(|e| e.reported_tokens).collect();
        assert_eq!(reported, [None, None, None, Some(1050), None, None, None, Some(1230)]);
        assert_eq!(crate::transcript::reported_usage(&t.entries), Some((1230, 0)));
    }

    #[test]
    fn legacy_bare_items() {
        let legacy = r#"{"id":"5973b6c0","timestamp":"2025-07-21T17:24:21.123Z","instructions":null}
{"record_type":"state"}
{"type":"message","id":null,"role":"user","content":[{"type":"input_text","text":"<user_instructions>\nbe brief\n</user_instructions>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"add a flag"},{"type":"input_image","image_url":"data:image/png;base64,QUJD"}]}
{"type":"local_shell_call","id":"ls_1","call_id":null,"status":"completed","action":{"type":"exec","command":["ls"]}}
{"type":"function_call_output","call_id":"ls_1","output":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://example.com/x.png"},{"type":"input_text","text":"b"}]}
{"record_type":"state"}
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Added."}]}
"#;
        let t = parse(legacy);
        assert_eq!(
            shape(&t),
            [
                ("l3", Role::User, Origin::Harness),
                ("l4", Role::User, Origin::Operator),
                ("l5", Role::Assistant, Origin::Agent),
                ("l6", Role::Tool, Origin::Tool),
                ("l8", Role::Assistant, Origin::Agent),
            ]
        );
        assert_eq!(t.entries[1].parts, [text("add a flag"), Part::Image { reference: "image/png image, 4 bytes base64".into() }]);
        let [Part::ToolCall { id, name, args }] = t.entries[2].parts.as_slice() else { panic!("{:?}", t.entries[2]) };
        assert_eq!((id.as_str(), name.as_str()), ("ls_1", "local_shell"));
        assert_eq!(serde_json::from_str::<Value>(args).unwrap(), serde_json::json!({"type": "exec", "command": ["ls"]}));
        assert_eq!(t.entries[3].parts, [result("ls_1", "a\nb"), Part::Image { reference: "https://example.com/x.png".into() }]);
    }

    #[test]
    fn old_object_output_keeps_its_failure() {
        let t = parse(
            r#"{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}
{"type":"function_call_output","call_id":"c","output":{"content":"boom","success":false}}
"#,
        );
        assert_eq!(t.entries[1].parts, [Part::ToolResult { call_id: "c".into(), content: "boom".into(), is_error: true, elided: None }]);
    }

    #[test]
    fn the_last_compaction_replaces_what_came_before() {
        let t = parse(
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"old prompt"}]}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"old answer"}]}}
{"timestamp":"t","type":"compacted","payload":{"message":"first summary"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"between"}]}}
{"timestamp":"t","type":"compacted","payload":{"message":"SUMMARY","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"kept prompt"}]},{"type":"ghost_snapshot","ghost_commit":{"id":"abc"}},{"type":"message","role":"user","content":[{"type":"input_text","text":"SUMMARY"}]}]}}
{"timestamp":"t","type":"event_msg","payload":{"type":"context_compacted"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"next"}]}}
"#,
        );
        assert_eq!(shape(&t), [("l6-h0", Role::User, Origin::Operator), ("l6-h2", Role::User, Origin::Summary), ("l8", Role::User, Origin::Operator)]);
        assert_eq!(t.entries[0].parts, [text("kept prompt")]);
        assert_eq!(t.entries[1].parts, [text("SUMMARY")]);
    }

    #[test]
    fn a_compaction_without_history_is_its_summary() {
        let t = parse(
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]}}
{"timestamp":"t","type":"compacted","payload":{"message":"the summary"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"after"}]}}
"#,
        );
        assert_eq!(shape(&t), [("l2", Role::User, Origin::Summary), ("l3", Role::Assistant, Origin::Agent)]);
        assert_eq!(t.entries[0].parts, [text("the summary")]);
    }

    #[test]
    fn injected_user_messages_are_harness() {
        let t = parse(
            r##"{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"  <environment_context><cwd>/w</cwd></environment_context>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"<INSTRUCTIONS>x</INSTRUCTIONS>"}]}
{"type":"message","role":"user","content":[{"type":"input_text","text":"please read <environment_context>"}]}
{"type":"message","role":"system","content":[{"type":"input_text","text":"sys"}]}
"##,
        );
        let origins: Vec<_> = t.entries.iter().map(|e| (e.role, e.origin)).collect();
        assert_eq!(origins, [(Role::User, Origin::Harness), (Role::User, Origin::Harness), (Role::User, Origin::Harness), (Role::User, Origin::Operator), (Role::System, Origin::Harness),]);
    }

    #[test]
    fn unknown_items_are_kept_as_opaque_text() {
        let t = parse(
            r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"draw"},{"type":"input_audio","data":"x"}]}}
{"timestamp":"t","type":"response_item","payload":{"type":"image_generation_call","status":"completed","result":"x"}}
"#,
        );
        let item = serde_json::json!({"type": "input_audio", "data": "x"});
        assert_eq!(t.entries[0].parts, [text("draw"), opaque(&item)]);
        assert_eq!(shape(&t)[1], ("l2", Role::Assistant, Origin::Agent));
        assert!(matches!(&t.entries[1].parts[..], [Part::Text { text }] if text.starts_with("[image_generation_call block] ")));
    }

    #[test]
    fn errors_name_the_line() {
        let broken = "{\"timestamp\":\"t\",\"type\":\"session_meta\",\"payload\":{}}\n\n{\"type\":\"response_item\",\n";
        let e = super::parse(broken, "r.jsonl").unwrap_err();
        assert_eq!(e.line, Some(3));

        let no_call_id = r#"{"timestamp":"t","type":"session_meta","payload":{}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}"}}
"#;
        let e = super::parse(no_call_id, "r.jsonl").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert_eq!(e.message, "a function_call item without `call_id`");

        let empty = r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}"#;
        let e = super::parse(empty, "r.jsonl").unwrap_err();
        assert_eq!(e.message, "a Codex rollout with no messages");
    }

    /// A real `codex exec` rollout (0.169.0, the built-in OpenAI provider against a mock
    /// Responses API; paths made neutral, long texts trimmed): an MCP call and a remote
    /// compaction, then `exec resume` compacting remotely again before a second namespaced call.
    const REMOTE_MCP: &str = include_str!("testdata/codex/remote-compaction-mcp-0.169.0.jsonl");

    #[test]
    fn real_remote_compaction_is_one_opaque_summary() {
        let t = parse(REMOTE_MCP);
        // The base prompt (line 1), then line 32, the last `compacted`; its history:
        // instructions, environment, prompt, then the encrypted summary.
        assert_eq!(
            shape(&t),
            [
                ("l1", Role::System, Origin::Harness),
                ("l32-h0", Role::System, Origin::Harness),
                ("l32-h1", Role::User, Origin::Harness),
                ("l32-h2", Role::User, Origin::Operator),
                ("l32-h3", Role::User, Origin::Summary),
                ("l38", Role::User, Origin::Operator),
                ("l41", Role::Assistant, Origin::Agent),
                ("l45", Role::Tool, Origin::Tool),
                ("l48", Role::Assistant, Origin::Agent),
            ]
        );
        let summaries: Vec<_> = t.entries.iter().filter(|e| e.origin == Origin::Summary).collect();
        assert_eq!(summaries.len(), 1);
        let [Part::Text { text }] = summaries[0].parts.as_slice() else { panic!("{:?}", summaries[0]) };
        assert!(text.starts_with("[Codex's encrypted summary"), "{text}");
        assert!(text.contains("no other provider can"), "{text}");
        // Kept as is: the whole item follows the note.
        let item: Value = serde_json::from_str(&text[text.find("] {").unwrap() + 2..]).unwrap();
        assert_eq!(item["type"], "compaction");
        assert!(item["encrypted_content"].as_str().is_some_and(|c| c.starts_with("gAAAA")));
        // It came from the compaction call, whose usage is no entry's.
        assert_eq!(summaries[0].response.as_deref(), Some("resp_mock005"));
        assert_eq!(summaries[0].reported_tokens, None);
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
    }

    #[test]
    fn real_instructions_are_system_and_harness() {
        let t = parse(REMOTE_MCP);
        let first_text = |e: &Entry| match e.parts.first() {
            Some(Part::Text { text }) => text.clone(),
            other => panic!("{other:?}"),
        };
        assert!(first_text(&t.entries[0]).starts_with("You are a coding agent running in the Codex CLI"));
        assert!(first_text(&t.entries[1]).starts_with("<skills_instructions>"));
        for e in &t.entries[..2] {
            assert_eq!((e.role, e.origin, e.is_instructions()), (Role::System, Origin::Harness, true));
        }
        assert!(first_text(&t.entries[2]).starts_with("<environment_context>"));
        assert_eq!(t.entries[2].origin, Origin::Harness);
        // Nothing else is harness or system: the operator's prompts stay the operator's.
        let harness = t.entries.iter().filter(|e| e.origin == Origin::Harness || e.role == Role::System).count();
        assert_eq!(harness, 3);
    }

    #[test]
    fn real_namespaced_mcp_call_has_its_full_name_and_is_answered() {
        let t = parse(REMOTE_MCP);
        let calls: Vec<_> = t
            .entries
            .iter()
            .flat_map(|e| &e.parts)
            .filter_map(|p| match p {
                Part::ToolCall { id, name, args } => Some((id.as_str(), name.as_str(), args.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(calls, [("call_mock6", "mcp__cairn__session_history", r#"{"action":"summary"}"#)]);
        let Part::ToolResult { call_id, content, is_error, .. } = &t.entries[7].parts[0] else { panic!("{:?}", t.entries[7]) };
        assert_eq!((call_id.as_str(), *is_error), ("call_mock6", false));
        assert!(content.starts_with("Wall time: ") && content.contains("\nOutput:\n"), "{content}");
        super::super::test_support::assert_calls_answered_in_place(&t, "remote-compaction-mcp-0.169.0");
    }

    #[test]
    fn real_usage_records_go_on_their_response() {
        let t = parse(REMOTE_MCP);
        let usage: Vec<_> = t.entries.iter().map(|e| (e.id.as_str(), e.response.as_deref(), e.reported_tokens)).collect();
        assert_eq!(
            usage,
            [
                ("l1", None, None),
                ("l32-h0", None, None),
                ("l32-h1", None, None),
                ("l32-h2", None, None),
                ("l32-h3", Some("resp_mock005"), None),
                ("l38", None, None),
                ("l41", Some("resp_mock006"), Some(1040)),
                ("l45", None, None),
                ("l48", Some("resp_mock007"), Some(1040)),
            ]
        );
    }

    #[test]
    fn real_local_compaction_is_a_readable_summary() {
        // The same prompt against a custom provider (`model_provider = "mock"`): Codex compacts
        // locally, and its summary is plain text in the message and the history.
        let t = parse(include_str!("testdata/codex/local-compaction-0.169.0.jsonl"));
        assert_eq!(
            shape(&t),
            [
                ("l1", Role::System, Origin::Harness),
                ("l21-h0", Role::System, Origin::Harness),
                ("l21-h1", Role::User, Origin::Harness),
                ("l21-h2", Role::User, Origin::Operator),
                ("l21-h3", Role::User, Origin::Summary),
                ("l28", Role::Assistant, Origin::Agent),
            ]
        );
        assert!(matches!(&t.entries[4].parts[..], [Part::Text { text }] if text.starts_with("Another language model started")));
        assert!(t.entries[5].response.is_some() && t.entries[5].reported_tokens.is_some());
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
        super::super::test_support::assert_calls_answered_in_place(&t, "local-compaction-0.169.0");
    }

    /// The base prompt Codex sends as every request's `instructions` is in no `response_item`:
    /// without it Cairn counted a few hundred tokens where the model read thousands.
    #[test]
    fn the_base_prompt_is_counted_as_the_first_instructions() {
        let prompt = "You are a coding agent running in the Codex CLI. ".repeat(40);
        let meta = |base: Value| serde_json::json!({"timestamp": "t", "type": "session_meta", "payload": {"id": "s", "base_instructions": base}}).to_string();
        let message = r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}"#;
        for base in [serde_json::json!({"text": prompt, "provenance": {"type": "model"}}), serde_json::json!(prompt)] {
            let mut t = parse(&format!("{}\n{message}\n", meta(base)));
            assert_eq!(shape(&t), [("l1", Role::System, Origin::Harness), ("l2", Role::User, Origin::Operator)]);
            assert!(t.entries[0].is_instructions());
            assert_eq!(t.entries[0].parts, [text(&prompt)]);
            crate::tokenizer::Tokenizer::default().count_transcript(&mut t);
            assert!(t.total_tokens() > 300, "the base prompt counts: {}", t.total_tokens());
        }
        // A rollout that holds only its base prompt has no messages.
        let e = super::parse(&format!("{}\n", meta(serde_json::json!({"text": prompt}))), "rollout.jsonl").unwrap_err();
        assert_eq!(e.message, "a Codex rollout with no messages");
    }

    #[test]
    fn namespaced_calls_and_usage_records_by_id() {
        let t = parse(
            r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}
{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"mcp__x__find","namespace":"mcp__x","arguments":"{}","call_id":"a"}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"b"}}
{"timestamp":"t","type":"token_usage_record","payload":{"response_id":"r1","usage":{"input_tokens":100,"cached_input_tokens":50,"output_tokens":7}}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"a","output":"x"}}
{"timestamp":"t","type":"response_item","payload":{"type":"function_call_output","call_id":"b","output":"y"}}
{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":999,"output_tokens":1}}}}
{"timestamp":"t","type":"token_usage_record","payload":{"response_id":"r2","usage":{"input_tokens":200,"output_tokens":0}}}
"#,
        );
        let [Part::ToolCall { name: first, .. }, Part::ToolCall { name: second, .. }] = t.entries[1].parts.as_slice() else { panic!() };
        // Already qualified names are not qualified twice; calls without a namespace keep theirs.
        assert_eq!((first.as_str(), second.as_str()), ("mcp__x__find", "exec_command"));
        // r1 is the response's; r2 left no entry (the latest response is r1's); token_count is ignored.
        assert_eq!((t.entries[1].response.as_deref(), t.entries[1].reported_tokens), (Some("r1"), Some(107)));
        assert!(t.unrecognized.is_empty());
    }

    #[test]
    fn detects_envelope_and_legacy_first_lines() {
        let first = |s: &str| detect(&serde_json::from_str::<Map<String, Value>>(s).unwrap());
        assert!(first(r#"{"timestamp":"t","type":"session_meta","payload":{"id":"s"}}"#));
        assert!(first(r#"{"type":"session_meta","payload":{"id":"s"}}"#));
        assert!(first(r#"{"timestamp":"t","type":"response_item","payload":{"type":"message"}}"#));
        assert!(first(r#"{"id":"s","timestamp":"t","instructions":null}"#));
        assert!(first(r#"{"id":"s","timestamp":"t"}"#));
        assert!(first(r#"{"record_type":"state"}"#));
        assert!(!first(r#"{"type":"session","id":"s","timestamp":"t"}"#));
        assert!(!first(r#"{"cairn":"transcript","version":1}"#));
        assert!(!first(r#"{"type":"user","sessionId":"s","uuid":"u","timestamp":"t","message":{}}"#));
    }
}
