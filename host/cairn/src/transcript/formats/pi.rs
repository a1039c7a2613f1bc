//! Pi coding-agent sessions (badlogic/pi-mono,
//! `packages/coding-agent/src/core/session-manager.ts`), read the way Pi
//! builds the context it sends the model.
//!
//! Pi migrates old files in memory: v1→v2 gives every entry an id and
//! chains each to the previous one (`parentId`), turning a compaction's
//! `firstKeptEntryIndex` (an index into the file's entries, header
//! included) into `firstKeptEntryId`; v2→v3 renames the `hookMessage` role
//! to `custom`. `buildSessionContext` then walks from the leaf (the last
//! entry) to the root, and, if that path holds a compaction, emits the
//! latest one's summary, the path's entries from `firstKeptEntryId` up to
//! that compaction, then everything after it. Only `message`,
//! `custom_message` and `branch_summary` entries become messages.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::{image_reference, TextOr, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript, Unrecognized};

/// Any line of a session file; which fields matter depends on `type`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    parent_id: Option<String>,
    version: Option<u64>,
    message: Option<Message>,
    /// `compaction` and `branch_summary`.
    summary: Option<String>,
    first_kept_entry_id: Option<String>,
    first_kept_entry_index: Option<usize>,
    /// `custom_message`.
    content: Option<TextOr<Block>>,
    /// A line of a kind Pi added after this reader: the text of its message, if it has one.
    #[serde(skip)]
    opaque: Option<String>,
}

/// Line kinds of Pi 0.73 sessions; any other is counted, and kept as text if it has a message.
const KNOWN: &[&str] = &["session", "message", "custom_message", "branch_summary", "compaction", "thinking_level_change", "model_change", "custom", "label", "session_info"];

/// A line of `raw`: strictly read when its kind is known, else only its tree links and the
/// text of its message (a newer Pi's line must not fail the whole session).
fn read_line(raw: &str) -> Result<Line, serde_json::Error> {
    let strict = serde_json::from_str::<Line>(raw);
    if strict.as_ref().is_ok_and(|l| KNOWN.contains(&l.kind.as_str())) {
        return strict;
    }
    // Rare: a kind this reader does not know, or a line it cannot read.
    let value: serde_json::Value = serde_json::from_str(raw)?;
    let kind = value.get("type").and_then(serde_json::Value::as_str).unwrap_or_default().to_string();
    if KNOWN.contains(&kind.as_str()) {
        return strict;
    }
    let field = |k: &str| value.get(k).and_then(serde_json::Value::as_str).map(str::to_string);
    Ok(Line { id: field("id"), parent_id: field("parentId"), opaque: super::message_text(&value), kind, ..Line::default() })
}

/// An `AgentMessage`; which fields matter depends on `role`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    role: String,
    content: Option<TextOr<Block>>,
    tool_call_id: Option<String>,
    #[serde(default)]
    is_error: bool,
    // bashExecution
    #[serde(default)]
    command: String,
    #[serde(default)]
    output: String,
    exit_code: Option<i64>,
    #[serde(default)]
    cancelled: bool,
    #[serde(default)]
    truncated: bool,
    full_output_path: Option<String>,
    #[serde(default)]
    exclude_from_context: bool,
    // assistant
    usage: Option<Usage>,
    stop_reason: Option<String>,
    response_id: Option<String>,
}

/// An assistant reply's billed tokens (pi-ai's `Usage`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Usage {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
    #[serde(default)]
    cache_read: u64,
    #[serde(default)]
    cache_write: u64,
    total_tokens: Option<u64>,
}

impl Message {
    /// The context size the provider saw, as Pi's `calculateContextTokens` reads it; none for
    /// aborted or failed replies, which Pi's `getLastAssistantUsage` skips.
    fn reported_tokens(&self) -> Option<u64> {
        if matches!(self.stop_reason.as_deref(), Some("aborted" | "error")) {
            return None;
        }
        let u = self.usage.as_ref()?;
        Some(u.total_tokens.unwrap_or(u.input + u.output + u.cache_read + u.cache_write)).filter(|&t| t > 0)
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum Block {
    Text {
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Option<CompactJson>,
    },
    Image {
        #[serde(default)]
        data: String,
        #[serde(rename = "mimeType", default)]
        mime_type: String,
    },
    #[serde(other)]
    Other,
}

/// A session line after migration: its id, parent and payload.
struct Node {
    /// 1-based line in the file, for errors.
    line: usize,
    id: String,
    parent: Option<String>,
    data: Line,
}

/// A fragment of a session (lines appended since the last acknowledged one) as a session Pi's
/// reader takes: the header it lacks is added. Each of its entries must carry its `id` (session
/// version 2 on): ids by line position would restart at the fragment's first line.
pub(super) fn as_session<'a>(text: &'a str, source_name: &str) -> Result<std::borrow::Cow<'a, str>, TranscriptError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).peekable();
    let has_header = lines.peek().and_then(|(_, l)| serde_json::from_str::<serde_json::Value>(l).ok()).is_some_and(|v| v["type"] == "session");
    for (at, line) in lines.skip(usize::from(has_header)) {
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| TranscriptError::in_line(source_name, at + 1, &e))?;
        if !value["id"].is_string() {
            return Err(TranscriptError::new(source_name, Some(at + 1), "this appended Pi entry has no `id`: a Pi fragment needs session version 2 or later (send the whole transcript)"));
        }
    }
    Ok(if has_header { std::borrow::Cow::Borrowed(text) } else { std::borrow::Cow::Owned(format!("{{\"type\":\"session\",\"version\":3,\"id\":\"appended\"}}\n{text}")) })
}

/// Pi coding-agent session files (a `{"type": "session"}` header).
pub(super) struct PiSession;

impl super::TranscriptFormat for PiSession {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn detect(&self, head: Option<&serde_json::Value>, _: &str) -> bool {
        super::transcript_format::object(head).is_some_and(|h| h.get("type").and_then(serde_json::Value::as_str) == Some("session"))
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }

    fn parse_fragment(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(&as_session(text, source_name)?, source_name)
    }

    fn writer(&self) -> Option<fn(&Transcript) -> String> {
        Some(super::pi_writeback::write)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let err = |line, msg: String| TranscriptError::new(source_name, Some(line), msg);

    // Pi skips blank lines, so `firstKeptEntryIndex` counts non-blank lines.
    let mut lines = Vec::new();
    for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line = read_line(raw).map_err(|e| TranscriptError::in_line(source_name, i + 1, &e))?;
        lines.push((i, line));
    }
    let Some((header_index, header)) = lines.first() else {
        return Err(TranscriptError::new(source_name, None, "empty transcript"));
    };
    if header.kind != "session" {
        return Err(err(header_index + 1, "expected a Pi `session` header".into()));
    }
    let version = header.version.unwrap_or(1);

    // Ids: Pi's own from v2, else `e<line index>`; v1 chains entries in file order.
    let id_of = |i: usize, line: &Line| match (&line.id, version) {
        (Some(id), 2..) => id.clone(),
        _ => format!("e{i}"),
    };
    let ids: Vec<String> = lines.iter().map(|(i, l)| id_of(*i, l)).collect();
    let mut unrecognized = Unrecognized::default();
    for (_, line) in lines.iter().filter(|(_, l)| !KNOWN.contains(&l.kind.as_str())) {
        let kind = if line.kind.is_empty() { "(no type)" } else { line.kind.as_str() };
        match line.opaque {
            Some(_) => unrecognized.keep(kind),
            None => unrecognized.skip(kind),
        }
    }
    let is_header: Vec<bool> = lines.iter().map(|(_, l)| l.kind == "session").collect();
    let mut nodes: Vec<Node> = Vec::new();
    for (k, (i, mut data)) in lines.into_iter().enumerate() {
        if data.kind == "session" {
            continue;
        }
        let parent = if version < 2 { nodes.last().map(|n| n.id.clone()) } else { data.parent_id.take() };
        if version < 2 && data.kind == "compaction" {
            if let Some(index) = data.first_kept_entry_index {
                // Pi drops the index, and keeps nothing before the compaction,
                // when it points at a header or past the end.
                data.first_kept_entry_id = ids.get(index).filter(|_| !is_header[index]).cloned();
            }
        }
        nodes.push(Node { line: i + 1, id: ids[k].clone(), parent, data });
    }

    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (k, node) in nodes.iter().enumerate() {
        if let Some(first) = by_id.insert(&node.id, k) {
            let first = nodes[first].line;
            return Err(err(node.line, format!("duplicate entry id `{}` (first at line {first})", node.id)));
        }
    }

    // The leaf's path to the root; Pi stops quietly at a parent it lacks.
    let mut path = Vec::new();
    let mut on_path = HashSet::new();
    let mut current = nodes.len().checked_sub(1);
    while let Some(k) = current {
        if !on_path.insert(k) {
            return Err(err(nodes[k].line, format!("`parentId` cycle through entry `{}`", nodes[k].id)));
        }
        path.push(k);
        current = nodes[k].parent.as_deref().and_then(|p| by_id.get(p).copied());
    }
    path.reverse();

    let mut entries = Vec::new();
    let compaction = path.iter().rposition(|&k| nodes[k].data.kind == "compaction");
    let from = match compaction {
        Some(at) => {
            let node = &nodes[path[at]];
            // Pi sends this wrapped as "The conversation history before this point
            // was compacted into the following summary:\n\n<summary>\n…\n</summary>";
            // kept plain here so strategies see the summary itself.
            let summary = node.data.summary.clone().unwrap_or_default();
            entries.push(Entry::text(&node.id, Role::User, Origin::Summary, summary));
            let kept = node.data.first_kept_entry_id.as_deref();
            let first_kept = path[..at].iter().position(|&k| Some(nodes[k].id.as_str()) == kept);
            for &k in &path[first_kept.unwrap_or(at)..at] {
                // What was billed before the compaction describes the context before it.
                let kept = convert(&nodes[k]).map_err(|m| err(nodes[k].line, m))?;
                entries.extend(kept.map(|e| Entry { reported_tokens: None, ..e }));
            }
            at + 1
        }
        None => 0,
    };
    for &k in &path[from..] {
        entries.extend(convert(&nodes[k]).map_err(|m| err(nodes[k].line, m))?);
    }
    let opaque: HashSet<&str> = nodes.iter().filter(|n| !KNOWN.contains(&n.data.kind.as_str())).map(|n| n.id.as_str()).collect();
    let entries = if opaque.is_empty() { entries } else { super::after_open_calls(entries, |e| opaque.contains(e.id.as_str())) };
    Ok(Transcript { unrecognized, ..Transcript::new(entries) })
}

/// The context entry a session entry contributes, if any (Pi's
/// `appendMessage` then `convertToLlm`).
fn convert(node: &Node) -> Result<Option<Entry>, String> {
    let id = node.id.as_str();
    let line = &node.data;
    Ok(match line.kind.as_str() {
        "message" => {
            let message = line.message.as_ref().ok_or("expected `message` object")?;
            convert_message(id, message)?
        }
        "custom_message" => Some(entry(id, Role::User, Origin::Harness, content_parts(line.content.as_ref()))),
        // Pi wraps this as "The following is a summary of a branch that this
        // conversation came back from:\n\n<summary>\n…</summary>".
        "branch_summary" => match line.summary.as_deref() {
            Some(summary) if !summary.is_empty() => Some(Entry::text(id, Role::User, Origin::Summary, summary)),
            _ => None,
        },
        // A newer Pi's line with a message: its text, said to be opaque.
        kind if !KNOWN.contains(&kind) => line.opaque.as_ref().map(|text| Entry::text(id, Role::User, Origin::Harness, format!("[{kind} line] {text}"))),
        // Settings, labels, extension state and older compactions: not context.
        _ => None,
    })
}

fn convert_message(id: &str, m: &Message) -> Result<Option<Entry>, String> {
    let content = m.content.as_ref();
    Ok(Some(match m.role.as_str() {
        "user" => entry(id, Role::User, Origin::Operator, content_parts(content)),
        // Aborted or failed replies are kept even when empty; Pi leaves them
        // out of requests, but they are part of the record.
        "assistant" => Entry { response: m.response_id.clone(), reported_tokens: m.reported_tokens(), ..entry(id, Role::Assistant, Origin::Agent, content_parts(content)) },
        "toolResult" => {
            let call_id = m.tool_call_id.clone().ok_or("`toolResult` message without `toolCallId`")?;
            let (texts, images): (Vec<Part>, Vec<Part>) = content_parts(content).into_iter().partition(|p| matches!(p, Part::Text { .. }));
            let text: Vec<String> = texts
                .into_iter()
                .filter_map(|p| match p {
                    Part::Text { text } => Some(text),
                    _ => None,
                })
                .collect();
            let mut parts = vec![Part::ToolResult { call_id, content: text.join("\n"), is_error: m.is_error, elided: None }];
            parts.extend(images);
            entry(id, Role::Tool, Origin::Tool, parts)
        }
        // A command the operator ran with `!`; `!!` keeps it out of context.
        "bashExecution" if m.exclude_from_context => return Ok(None),
        "bashExecution" => Entry::text(id, Role::User, Origin::Harness, bash_execution_text(m)),
        // Extension messages (`hookMessage` before v3) and roles Pi may add later.
        role => {
            let parts = content_parts(content);
            if parts.is_empty() && role != "custom" && role != "hookMessage" {
                Entry::text(id, Role::User, Origin::Harness, format!("[{role} message]"))
            } else {
                entry(id, Role::User, Origin::Harness, parts)
            }
        }
    }))
}

fn entry(id: &str, role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
    Entry { parts: parts.into(), ..Entry::text(id, role, origin, "") }
}

fn content_parts(content: Option<&TextOr<Block>>) -> Vec<Part> {
    let blocks = match content {
        None => return Vec::new(),
        Some(TextOr::Text(text)) => return vec![Part::Text { text: text.clone() }],
        Some(TextOr::Items(blocks)) => blocks,
    };
    blocks
        .iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(Part::Text { text: text.clone() }),
            // Empty thinking carries only an opaque signature Cairn cannot replay.
            Block::Thinking { thinking } if thinking.trim().is_empty() => None,
            Block::Thinking { thinking } => Some(Part::Thinking { text: thinking.clone() }),
            Block::ToolCall { id, name, arguments } => Some(Part::ToolCall { id: id.clone(), name: name.clone(), args: arguments.as_ref().map_or_else(|| "{}".to_string(), |a| a.0.clone()) }),
            Block::Image { data, mime_type } => Some(Part::Image { reference: image_reference(mime_type, data.len()) }),
            Block::Other => None,
        })
        .collect()
}

/// Pi's `bashExecutionToText`.
fn bash_execution_text(m: &Message) -> String {
    let mut text = format!("Ran `{}`\n", m.command);
    if m.output.is_empty() {
        text.push_str("(no output)");
    } else {
        let _ = write!(text, "```\n{}\n```", m.output);
    }
    if m.cancelled {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m.exit_code.filter(|&c| c != 0) {
        let _ = write!(text, "\n\nCommand exited with code {code}");
    }
    if let (true, Some(path)) = (m.truncated, &m.full_output_path) {
        let _ = write!(text, "\n\n[Output truncated. Full output: {path}]");
    }
    text
}

/// Any JSON value re-serialized compactly in source key order (a
/// `serde_json::Value` would sort keys: `preserve_order` is off).
struct CompactJson(String);

impl<'de> Deserialize<'de> for CompactJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = String::new();
        JsonWriter(&mut out).deserialize(d)?;
        Ok(CompactJson(out))
    }
}

struct JsonWriter<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for JsonWriter<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JsonWriter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.push_str(&v.to_string());
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.push_str(&v.to_string());
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.push_str(&serde_json::to_string(&v).map_err(E::custom)?);
        Ok(())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(&serde_json::to_string(v).map_err(E::custom)?);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.push_str("null");
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push('[');
        let mut first = true;
        loop {
            let mark = self.0.len();
            if !first {
                self.0.push(',');
            }
            if seq.next_element_seed(JsonWriter(self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            first = false;
        }
        self.0.push(']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push('{');
        let mut first = true;
        while let Some(key) = map.next_key::<String>()? {
            if !first {
                self.0.push(',');
            }
            first = false;
            self.0.push_str(&serde_json::to_string(&key).map_err(de::Error::custom)?);
            self.0.push(':');
            map.next_value_seed(JsonWriter(self.0))?;
        }
        self.0.push('}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::real_files;
    use super::super::{parse as parse_any, Format};
    use super::*;

    fn texts(t: &Transcript) -> Vec<String> {
        t.entries.iter().map(|e| e.model_text().trim_end().to_string()).collect()
    }

    const V1: &str = r#"{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/w"}
{"type":"message","message":{"role":"user","content":[{"type":"text","text":"first"}]}}
{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}
{"type":"thinking_level_change","thinkingLevel":"high"}
{"type":"message","message":{"role":"user","content":"second"}}
{"type":"message","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"zeta":1,"alpha":[true,null,2.5,"x\"y"],"mid":{"b":1,"a":2}}}],"stopReason":"toolUse"}}
{"type":"message","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"out1"},{"type":"image","data":"QUJD","mimeType":"image/png"},{"type":"text","text":"out2"}],"isError":true}}
{"type":"compaction","summary":"did things","firstKeptEntryIndex":4,"tokensBefore":1000}
{"type":"message","message":{"role":"bashExecution","command":"ls","output":"a\nb","exitCode":2,"cancelled":false,"truncated":false}}
{"type":"message","message":{"role":"bashExecution","command":"secret","output":"","exitCode":0,"cancelled":false,"truncated":false,"excludeFromContext":true}}
{"type":"message","message":{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted"}}
{"type":"model_change","provider":"anthropic","modelId":"claude"}
"#;

    #[test]
    fn v1_compaction_gives_summary_then_kept_entries() {
        let (t, format) = parse_any(V1, "v1.jsonl").unwrap();
        assert_eq!(format, Format::Pi);
        let ids: Vec<_> = t.entries.iter().map(|e| e.id.as_str()).collect();
        // Summary, then kept from file entry 4 ("second"), then after the compaction.
        assert_eq!(ids, ["e7", "e4", "e5", "e6", "e8", "e10"]);
        assert_eq!((t.entries[0].role, t.entries[0].origin), (Role::User, Origin::Summary));
        assert_eq!(t.entries[0].parts, vec![Part::Text { text: "did things".into() }]);
        assert_eq!(t.entries[1].origin, Origin::Operator);
        assert_eq!(t.entries[1].turn, 1);
        assert_eq!(
            t.entries[2].parts,
            vec![Part::Thinking { text: "hm".into() }, Part::ToolCall { id: "c1".into(), name: "bash".into(), args: r#"{"zeta":1,"alpha":[true,null,2.5,"x\"y"],"mid":{"b":1,"a":2}}"#.into() },]
        );
        assert_eq!(
            t.entries[3].parts,
            vec![Part::ToolResult { call_id: "c1".into(), content: "out1\nout2".into(), is_error: true, elided: None }, Part::Image { reference: "image/png image, 4 bytes base64".into() },]
        );
        assert_eq!((t.entries[4].role, t.entries[4].origin), (Role::User, Origin::Harness));
        assert_eq!(texts(&t)[4], "Ran `ls`\n```\na\nb\n```\n\nCommand exited with code 2");
        // The aborted, empty reply stays as an entry without parts.
        assert_eq!((t.entries[5].role, t.entries[5].parts.len()), (Role::Assistant, 0));
    }

    #[test]
    fn v1_without_compaction_keeps_everything() {
        let text: String = V1.lines().take(7).map(|l| format!("{l}\n")).collect();
        let t = parse(&text, "v1.jsonl").unwrap();
        let ids: Vec<_> = t.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["e1", "e2", "e4", "e5", "e6"]);
    }

    /// Two branches from `a1`; the leaf `u3` is on the second, which was
    /// compacted keeping `u2` onward. A label at the end is the file's leaf.
    const V3_TREE: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/w"}
{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":"root"}}
{"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}
{"type":"message","id":"x1","parentId":"a1","message":{"role":"user","content":"abandoned branch"}}
{"type":"message","id":"x2","parentId":"x1","message":{"role":"assistant","content":[{"type":"text","text":"abandoned reply"}]}}
{"type":"branch_summary","id":"b1","parentId":"a1","fromId":"x2","summary":"tried x, gave up"}
{"type":"message","id":"u2","parentId":"b1","message":{"role":"user","content":"other way"}}
{"type":"message","id":"h1","parentId":"u2","message":{"role":"hookMessage","customType":"note","content":"from an extension","display":true}}
{"type":"compaction","id":"c1","parentId":"h1","summary":"sum","firstKeptEntryId":"u2","tokensBefore":5}
{"type":"custom","id":"k1","parentId":"c1","customType":"state","data":{"n":1}}
{"type":"custom_message","id":"m1","parentId":"k1","customType":"ctx","content":[{"type":"text","text":"injected"}],"display":false}
{"type":"message","id":"u3","parentId":"m1","message":{"role":"user","content":"go on"}}
{"type":"label","id":"l1","parentId":"u3","targetId":"u2","label":"here"}
"#;

    #[test]
    fn v3_tree_follows_the_leafs_path() {
        let t = parse(V3_TREE, "tree.jsonl").unwrap();
        let ids: Vec<_> = t.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["c1", "u2", "h1", "m1", "u3"]);
        assert_eq!(texts(&t), ["sum", "other way", "from an extension", "injected", "go on"]);
        assert_eq!(t.entries[2].origin, Origin::Harness);

        // Without the compaction the branch summary shows, the abandoned branch does not.
        let text = V3_TREE.replace(r#""type":"compaction""#, r#""type":"compaction_disabled""#);
        let t = parse(&text, "tree.jsonl").unwrap();
        let ids: Vec<_> = t.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["u1", "a1", "b1", "u2", "h1", "m1", "u3"]);
        assert_eq!(t.entries[2].origin, Origin::Summary);
    }

    #[test]
    fn unknown_roles_become_harness_text() {
        let text = r#"{"type":"session","version":3,"id":"s"}
{"type":"message","id":"a","parentId":null,"message":{"role":"futureThing","detail":1}}
{"type":"message","id":"b","parentId":"a","message":{"role":"otherThing","content":"said"}}
"#;
        let t = parse(text, "s.jsonl").unwrap();
        assert_eq!(texts(&t), ["[futureThing message]", "said"]);
        assert!(t.entries.iter().all(|e| e.origin == Origin::Harness && e.role == Role::User));
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\"}\n", 2, "expected `message` object"),
            ("{\"type\":\"session\",\"id\":\"s\"}\n\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\n", 3, "EOF"),
            ("{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n", 1, "`session` header"),
            ("{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"toolResult\",\"content\":[]}}\n", 2, "without `toolCallId`"),
            ("{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"assistant\",\"content\":[{\"type\":\"toolCall\",\"name\":\"x\"}]}}\n", 2, "missing field `id`"),
            (
                "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n{\"type\":\"label\",\"id\":\"a\",\"parentId\":null}\n{\"type\":\"label\",\"id\":\"a\",\"parentId\":null}\n",
                3,
                "duplicate entry id `a` (first at line 2)",
            ),
            ("{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n{\"type\":\"label\",\"id\":\"a\",\"parentId\":\"b\"}\n{\"type\":\"label\",\"id\":\"b\",\"parentId\":\"a\"}\n", 3, "cycle"),
        ];
        for (text, line, needle) in cases {
            let e = parse(text, "session.jsonl").unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.message.contains(needle), "{e}");
            assert!(e.to_string().starts_with(&format!("session.jsonl:{line}: ")), "{e}");
        }
    }

    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_large_session() {
        let files = real_files("pi", "jsonl");
        let (name, text) = files.iter().find(|(n, _)| n == "pi-mono__large-session.jsonl").expect("large session");
        let (t, format) = parse_any(text, name).unwrap();
        assert_eq!(format, Format::Pi);
        assert!(t.entries.len() >= 900, "{} entries", t.entries.len());
        let mut calls = HashSet::new();
        for e in &t.entries {
            calls.extend(e.tool_call_ids());
            for id in e.tool_result_ids() {
                assert!(calls.contains(id), "result {id} in {} has no earlier call", e.id);
            }
        }
    }

    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_session_with_compactions() {
        let files = real_files("pi", "jsonl");
        let (name, text) = files.iter().find(|(n, _)| n == "pi-mono__before-compaction.jsonl").expect("session");
        let t = parse(text, name).unwrap();
        // The later of the two compactions (line index 628) keeps from entry 551.
        assert_eq!((t.entries[0].id.as_str(), t.entries[0].origin), ("e628", Origin::Summary));
        assert_eq!(t.entries[1].id, "e551");
        assert_eq!(t.entries.iter().filter(|e| e.origin == Origin::Summary).count(), 1);
        assert_eq!(t.entries.iter().filter(|e| e.origin == Origin::Harness).count(), 3, "bash executions");
    }

    /// Billed usage counts only after the latest compaction: a kept reply's bill describes
    /// the context before it (Pi's trigger skips it too); aborted replies bill nothing.
    #[test]
    fn billed_usage_after_the_compaction_only() {
        let reply = |id: &str, parent: &str, total: u64, stop: &str| {
            format!(
                r#"{{"type":"message","id":"{id}","parentId":"{parent}","message":{{"role":"assistant","content":[{{"type":"text","text":"ok"}}],"usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":{total}}},"stopReason":"{stop}"}}}}"#
            )
        };
        let user = |id: &str, parent: &str| format!(r#"{{"type":"message","id":"{id}","parentId":"{parent}","message":{{"role":"user","content":"go"}}}}"#);
        let head = r#"{"type":"session","version":3,"id":"s"}"#;
        let compaction = r#"{"type":"compaction","id":"c","parentId":"a1","summary":"before","firstKeptEntryId":"u1"}"#;
        let kept_only = [head.to_string(), user("u1", "null"), reply("a1", "u1", 150_000, "stop"), compaction.to_string()].join("\n");
        let t = parse(&kept_only, "s.jsonl").unwrap();
        assert_eq!(crate::transcript::reported_usage(&t.entries), None);
        let later = [kept_only, user("u2", "c"), reply("a2", "u2", 20_000, "stop"), user("u3", "a2"), reply("a3", "u3", 999, "aborted")].join("\n");
        let t = parse(&later, "s.jsonl").unwrap();
        assert_eq!(crate::transcript::reported_usage(&t.entries), Some((20_000, 2)));
    }
}
