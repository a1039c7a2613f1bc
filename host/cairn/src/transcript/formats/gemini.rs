//! Gemini CLI session recordings (`~/.gemini/tmp/<project>/chats/session-<date>-<id8>.jsonl`),
//! read as the message list Gemini CLI itself loads on resume (0.61.0,
//! `loadConversationRecord` in its chat recording service):
//! - the first line is the session metadata (`sessionId`, `projectHash`, `startTime`, …);
//!   a resume appends another such line, skipped likewise;
//! - a message record (a line with a string `id`) is appended again whenever it changes: the
//!   last version wins, in the place of its first appearance;
//! - `{"$set": {…}}` updates metadata; a `$set` of `messages` replaces the whole list (Gemini
//!   CLI writes one at every resume and after every compression); other fields are ignored;
//! - `{"$rewindTo": id}` drops that message and everything after it (all, if unknown);
//! - `user` messages hold Gemini API parts (`text`, `functionResponse`, `inlineData`, …);
//!   `gemini` messages hold their text as a string (as recorded live) or as parts (as written
//!   from the history), their thoughts as `thoughts` (`{subject, description}`) or as parts with
//!   `thought: true`, their calls as `toolCalls` (with `result` parts) or `functionCall` parts,
//!   and the response's usage as `tokens`;
//! - a function response is recorded twice (in its call's `result` and as a user message,
//!   which a later `$set` may repeat): each call is answered once, right after its message;
//! - the compression snapshot is a user message starting `<state_snapshot>`, the workspace
//!   context Gemini CLI sends first one starting `<session_context>`;
//! - a `BeforeAgent` hook's context is a `<hook_context>…</hook_context>` part after the
//!   prompt's (the prompt alone is its `displayContent`): read as an entry of its own, the
//!   harness's, not as the operator's words;
//! - `info`, `error` and `warning` messages are Gemini CLI's notices to the user, which it never
//!   sends to the model: not read; any other message type is kept as opaque text and counted.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{describe_url, opaque, TranscriptError};
use crate::transcript::{Entry, Origin, Part, Role, Transcript, Unrecognized};

/// How Gemini CLI wraps the `additionalContext` of a `BeforeAgent` hook, appended to the prompt
/// as a part of its own (packages/core/src/core/client.ts, `sendMessageStream`).
const HOOK_CONTEXT: &str = "<hook_context>";

/// Whether `first` (the first non-blank line, parsed) is a Gemini CLI session's metadata.
pub(super) fn detect(first: &Map<String, Value>) -> bool {
    metadata(first) && !first.contains_key("id")
}

/// A metadata record: the first line, or the one a resume appends.
fn metadata(line: &Map<String, Value>) -> bool {
    line.get("sessionId").is_some_and(Value::is_string) && line.get("projectHash").is_some_and(Value::is_string)
}

/// The message records in the order Gemini CLI loads them, with the line each comes from.
#[derive(Default)]
struct Messages {
    order: Vec<String>,
    by_id: HashMap<String, (usize, Value)>,
}

impl Messages {
    fn put(&mut self, line_no: usize, message: &Value) {
        let Some(id) = message.get("id").and_then(Value::as_str) else { return };
        if self.by_id.insert(id.to_string(), (line_no, message.clone())).is_none() {
            self.order.push(id.to_string());
        }
    }

    fn replace(&mut self, line_no: usize, messages: &[Value]) {
        self.order.clear();
        self.by_id.clear();
        for message in messages {
            self.put(line_no, message);
        }
    }

    fn rewind(&mut self, id: &str) {
        let at = self.order.iter().position(|m| m == id).unwrap_or(0);
        for removed in self.order.drain(at..) {
            self.by_id.remove(&removed);
        }
    }
}

/// Gemini CLI session files (only Gemini CLI writes them).
pub(super) struct GeminiSession;

impl super::TranscriptFormat for GeminiSession {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn detect(&self, head: Option<&serde_json::Value>, _: &str) -> bool {
        super::transcript_format::object(head).is_some_and(detect)
    }

    fn parse(&self, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
        parse(text, source_name)
    }
}

pub(super) fn parse(text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let mut unrecognized = Unrecognized::default();
    let mut messages = Messages::default();
    for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let line_no = i + 1;
        let value: Value = serde_json::from_str(raw).map_err(|e| TranscriptError::in_line(source_name, line_no, &e))?;
        let Some(line) = value.as_object() else {
            return Err(TranscriptError::new(source_name, Some(line_no), "expected a JSON object"));
        };
        if line.get("id").is_some_and(Value::is_string) {
            messages.put(line_no, &value);
        } else if let Some(id) = line.get("$rewindTo").and_then(Value::as_str) {
            messages.rewind(id);
        } else if let Some(set) = line.get("$set").and_then(Value::as_object) {
            if let Some(list) = set.get("messages").and_then(Value::as_array) {
                messages.replace(line_no, list);
            }
        } else if metadata(line) {
            // A whole record rewritten as one line carries its messages.
            for message in line.get("messages").and_then(Value::as_array).into_iter().flatten() {
                messages.put(line_no, message);
            }
        } else {
            let kind = line.keys().find(|k| k.starts_with('$')).map_or("(no id)", String::as_str);
            unrecognized.skip(kind);
        }
    }

    let list: Vec<&Value> = messages.order.iter().map(|id| &messages.by_id[id].1).collect();
    // What each call got back, from the user messages (what the model read) first.
    let mut answers: HashMap<String, (String, bool)> = HashMap::new();
    for message in list.iter().filter(|m| kind(m) == "user") {
        for response in parts_of(message).iter().filter_map(|p| p.get("functionResponse")) {
            if let Some(id) = response.get("id").and_then(Value::as_str) {
                answers.entry(id.to_string()).or_insert_with(|| response_content(response));
            }
        }
    }
    for call in list.iter().filter_map(|m| m.get("toolCalls")?.as_array()).flatten() {
        let Some(id) = call.get("id").and_then(Value::as_str) else { continue };
        if let Some(response) = call.get("result").and_then(Value::as_array).into_iter().flatten().find_map(|p| p.get("functionResponse")) {
            answers.entry(id.to_string()).or_insert_with(|| response_content(response));
        }
    }

    let mut entries = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for message in list {
        let id = message.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        match kind(message) {
            "gemini" => {
                let (parts, calls) = model_parts(message, &id);
                if parts.is_empty() {
                    continue;
                }
                entries.push(Entry { parts: parts.into(), reported_tokens: message.get("tokens").and_then(reported_tokens), ..Entry::text(id.clone(), Role::Assistant, Origin::Agent, "") });
                // Each call answered at once, in call order.
                for (call_id, status) in calls {
                    let (content, is_error) = answers.get(&call_id).cloned().unwrap_or_else(|| (format!("[no result recorded; status: {}]", status.as_deref().unwrap_or("unknown")), true));
                    let result = Part::ToolResult { call_id: call_id.clone(), content, is_error, elided: None };
                    entries.push(Entry { parts: vec![result].into(), ..Entry::text(format!("{id}/{call_id}"), Role::Tool, Origin::Tool, "") });
                    answered.insert(call_id);
                }
            }
            "user" => {
                let parts = parts_of(message);
                let responses = parts.iter().any(|p| p.get("functionResponse").is_some());
                let mut kept = Vec::new();
                for part in &parts {
                    match part.get("functionResponse") {
                        // Answered after its call already (or a repeat of an answer).
                        Some(r) if r.get("id").and_then(Value::as_str).is_some_and(|c| answered.contains(c)) => {}
                        // A response whose call is not in the list: its text, not a dangling result.
                        Some(r) => {
                            let name = r.get("name").and_then(Value::as_str).unwrap_or("unknown");
                            kept.push(Part::Text { text: format!("[function response {name}] {}", response_content(r).0) });
                        }
                        None => kept.extend(content_part(part)),
                    }
                }
                // What a BeforeAgent hook added to the prompt is not the operator's: its own entry.
                let (hooked, kept): (Vec<Part>, Vec<Part>) = kept.into_iter().partition(|p| matches!(p, Part::Text { text } if text.starts_with(HOOK_CONTEXT)));
                if !kept.is_empty() {
                    let origin = match kept.first() {
                        _ if responses => Origin::Tool,
                        Some(Part::Text { text }) if text.trim_start().starts_with("<state_snapshot>") => Origin::Summary,
                        Some(Part::Text { text }) if text.trim_start().starts_with("<session_context>") => Origin::Harness,
                        _ => Origin::Operator,
                    };
                    entries.push(Entry { parts: kept.into(), ..Entry::text(id.clone(), Role::User, origin, "") });
                }
                if !hooked.is_empty() {
                    entries.push(Entry { parts: hooked.into(), ..Entry::text(format!("{id}/hook_context"), Role::User, Origin::Harness, "") });
                }
            }
            // Gemini CLI's notices to the user (`/compress`'s "Chat history compressed", an empty
            // one the TUI records): it never sends them to the model (`convertSessionToClientHistory`
            // skips them on resume), so neither entries nor unrecognized.
            "info" | "error" | "warning" => {}
            other => {
                let other = if other.is_empty() { "(no type)" } else { other };
                let text: Vec<String> = parts_of(message).iter().filter_map(|p| p.get("text")?.as_str()).map(str::to_string).collect();
                let text = text.join("\n");
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
        return Err(TranscriptError::new(source_name, None, "a Gemini CLI session with no messages"));
    }
    Ok(Transcript { unrecognized, ..Transcript::new(entries) })
}

fn kind(message: &Value) -> &str {
    message.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// A message's `content` as parts: a string is one text part.
fn parts_of(message: &Value) -> Vec<Value> {
    match message.get("content") {
        Some(Value::String(text)) if !text.is_empty() => vec![serde_json::json!({ "text": text })],
        Some(Value::Array(parts)) => parts.clone(),
        Some(Value::Object(part)) => vec![Value::Object(part.clone())],
        _ => Vec::new(),
    }
}

/// One Gemini API part that is no function call or response.
fn content_part(part: &Value) -> Option<Part> {
    let field = |k: &str| part.get(k).and_then(Value::as_str);
    if let Some(text) = field("text") {
        return (!text.is_empty()).then(|| Part::Text { text: text.to_string() });
    }
    if let Some(data) = part.get("inlineData") {
        let mime = data.get("mimeType").and_then(Value::as_str).unwrap_or("unknown");
        let len = data.get("data").and_then(Value::as_str).map_or(0, str::len);
        return Some(Part::Image { reference: super::image_reference(mime, len) });
    }
    if let Some(uri) = part.get("fileData").and_then(|d| d.get("fileUri")).and_then(Value::as_str) {
        return Some(Part::Image { reference: describe_url(uri) });
    }
    let key = part.as_object().and_then(|o| o.keys().find(|k| !k.starts_with("thought")).cloned()).unwrap_or_default();
    Some(opaque(&serde_json::json!({ "type": key, "part": part })))
}

/// A model message's parts (thinking, text, calls) and its calls with their status.
fn model_parts(message: &Value, id: &str) -> (Vec<Part>, Vec<(String, Option<String>)>) {
    let mut parts = Vec::new();
    for thought in message.get("thoughts").and_then(Value::as_array).into_iter().flatten() {
        let field = |k: &str| thought.get(k).and_then(Value::as_str).unwrap_or_default().trim();
        let text = match (field("subject"), field("description")) {
            ("", d) => d.to_string(),
            (s, "") => format!("**{s}**"),
            (s, d) => format!("**{s}**\n{d}"),
        };
        if !text.is_empty() {
            parts.push(Part::Thinking { text });
        }
    }
    let mut calls: Vec<(String, Option<String>)> = Vec::new();
    let mut call = |parts: &mut Vec<Part>, call_id: String, name: &str, args: Option<&Value>, status: Option<&str>| {
        if calls.iter().any(|(c, _)| *c == call_id) {
            return;
        }
        let args = args.map_or_else(|| "{}".to_string(), Value::to_string);
        parts.push(Part::ToolCall { id: call_id.clone(), name: name.to_string(), args });
        calls.push((call_id, status.map(str::to_string)));
    };
    for (k, part) in parts_of(message).iter().enumerate() {
        if let Some(fc) = part.get("functionCall") {
            let call_id = fc.get("id").and_then(Value::as_str).map_or_else(|| format!("{id}-call{k}"), str::to_string);
            let name = fc.get("name").and_then(Value::as_str).unwrap_or("unknown");
            call(&mut parts, call_id, name, fc.get("args"), None);
        } else if part.get("thought").and_then(Value::as_bool) == Some(true) {
            if let Some(text) = part.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                parts.push(Part::Thinking { text: text.to_string() });
            }
        } else {
            parts.extend(content_part(part));
        }
    }
    for (k, tc) in message.get("toolCalls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let call_id = tc.get("id").and_then(Value::as_str).map_or_else(|| format!("{id}-tool{k}"), str::to_string);
        let name = tc.get("name").and_then(Value::as_str).unwrap_or("unknown");
        call(&mut parts, call_id, name, tc.get("args"), tc.get("status").and_then(Value::as_str));
    }
    (parts, calls)
}

/// A function response as the model reads it: its `output` (or `error`) string, else the
/// response as JSON; whether it is an error.
fn response_content(response: &Value) -> (String, bool) {
    let body = response.get("response").unwrap_or(&Value::Null);
    let only = |k: &str| body.as_object().filter(|o| o.len() == 1).and_then(|o| o.get(k)).and_then(Value::as_str);
    match (only("output"), body.get("error")) {
        (Some(output), _) => (output.to_string(), false),
        (None, Some(error)) => (error.as_str().map_or_else(|| body.to_string(), str::to_string), true),
        (None, None) => (body.to_string(), false),
    }
}

/// The context the response's call billed: `total` (prompt, which includes the cached
/// tokens, plus output, thoughts and tool-use prompt), else those summed.
fn reported_tokens(tokens: &Value) -> Option<u64> {
    let n = |k: &str| tokens.get(k).and_then(Value::as_u64).unwrap_or(0);
    let total = match n("total") {
        0 => n("input") + n("output") + n("thoughts") + n("tool"),
        total => total,
    };
    (total > 0).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::assert_calls_answered_in_place;
    use super::*;

    /// A real recording (Gemini CLI 0.61.0 against a scripted model): a `read_file` call, then
    /// a resume (`--resume latest`) whose turn runs a shell command and compresses the history
    /// (`model.compressionThreshold` 0.001). Paths neutralised to /home/user.
    const SESSION: &str = include_str!("testdata/gemini/session-2026-12-01T16-53-b1a3c3f2.jsonl");

    fn parse(text: &str) -> Transcript {
        super::parse(text, "session.jsonl").unwrap()
    }
    fn shape(t: &Transcript) -> Vec<(&str, Role, Origin)> {
        t.entries.iter().map(|e| (e.id.as_str(), e.role, e.origin)).collect()
    }
    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    #[test]
    fn real_session_is_the_list_after_the_last_set() {
        let t = parse(SESSION);
        const SHELL: &str = "run_shell_command__run_shell_command_1796143993003_0";
        let tool_id = format!("60397ca6-4ae3-4e3e-88ab-432fb0d85b47/{SHELL}");
        assert_eq!(
            shape(&t),
            [
                ("d04923d38bb0f6017037e74183378ef4", Role::User, Origin::Harness),
                ("cafc73f5-dcd2-4c17-bd12-d8ca6dbf867e", Role::User, Origin::Summary),
                ("9bd357b9-d20e-411d-bce7-b9ca9d886f86", Role::Assistant, Origin::Agent),
                ("b0867d7f-d13a-4dd5-8a35-9f7b99e5df42", Role::User, Origin::Operator),
                ("60397ca6-4ae3-4e3e-88ab-432fb0d85b47", Role::Assistant, Origin::Agent),
                (tool_id.as_str(), Role::Tool, Origin::Tool),
                ("6d31567d-8911-421b-9117-f432b4e1abd0", Role::Assistant, Origin::Agent),
            ]
        );
        assert!(matches!(&t.entries[1].parts[..], [Part::Text { text }] if text.starts_with("<state_snapshot>\n<overall_goal>")));
        assert_eq!(t.entries[3].parts, [text("now run a shell echo")]);
        assert_eq!(t.entries[4].parts, [Part::ToolCall { id: SHELL.into(), name: "run_shell_command".into(), args: r#"{"command":"echo hi from shell","description":"echo"}"#.into() }]);
        let [Part::ToolResult { call_id, content, is_error: false, .. }] = &t.entries[5].parts[..] else { panic!("{:?}", t.entries[5]) };
        assert_eq!(call_id, SHELL);
        assert!(content.contains("Output: hi from shell"), "{content}");
        assert_eq!(t.entries[6].parts, [text("The file notes.txt says: hello from notes.")]);
        // Messages from the history carry no usage; the live one does.
        let reported: Vec<_> = t.entries.iter().map(|e| e.reported_tokens).collect();
        assert_eq!(reported, [None, None, None, None, None, None, Some(1235)]);
        assert_calls_answered_in_place(&t, "real session");
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
    }

    #[test]
    fn real_session_before_resume_reads_live_records() {
        // The first run alone: its message records re-appended by id, its first `$set`.
        let first_run: String = SESSION.lines().take(11).map(|l| format!("{l}\n")).collect();
        let t = parse(&first_run);
        const READ: &str = "read_file__read_file_1796143984493_0";
        assert_eq!(
            shape(&t).iter().map(|(_, r, o)| (*r, *o)).collect::<Vec<_>>(),
            [(Role::User, Origin::Harness), (Role::User, Origin::Operator), (Role::Assistant, Origin::Agent), (Role::Tool, Origin::Tool), (Role::Assistant, Origin::Agent),]
        );
        // The re-appended version (with its tool call) replaced the first, in its place.
        assert_eq!(
            t.entries[2].parts,
            [Part::Thinking { text: "Reading the file first.".into() }, Part::ToolCall { id: READ.into(), name: "read_file".into(), args: r#"{"file_path":"notes.txt"}"#.into() },]
        );
        assert_eq!(t.entries[2].reported_tokens, Some(1235));
        // Recorded twice (the call's result and a user message): answered once.
        assert_eq!(t.entries[3].parts, [Part::ToolResult { call_id: READ.into(), content: "hello from notes\n".into(), is_error: false, elided: None }]);
        assert_calls_answered_in_place(&t, "first run");
    }

    #[test]
    fn real_session_mid_resume_dedupes_the_repeated_response() {
        // Up to the resume's first `$set` of messages: the history form (thought and call
        // parts) and the function response written twice, once under `<id>_response`.
        let at = SESSION.lines().position(|l| l.contains("\"now run a shell echo\"")).unwrap();
        let head: String = SESSION.lines().take(at).map(|l| format!("{l}\n")).collect();
        let t = parse(&head);
        assert_eq!(t.entries.len(), 5);
        assert!(matches!(&t.entries[2].parts[..], [Part::Thinking { .. }, Part::ToolCall { .. }]));
        assert_eq!(t.entries.iter().filter(|e| e.role == Role::Tool).count(), 1);
        assert_eq!(t.entries[2].reported_tokens, None);
        assert_calls_answered_in_place(&t, "resumed");
    }

    /// A second real recording: a `read_file` of a missing file (status `error`, an `error`
    /// response) after a thought with a subject.
    const FAILED_READ: &str = include_str!("testdata/gemini/session-2026-12-01T16-54-c340972c.jsonl");

    #[test]
    fn real_failed_call_is_an_error_result() {
        let t = parse(FAILED_READ);
        const READ: &str = "read_file__read_file_1796144076632_0";
        assert_eq!(t.entries.len(), 5);
        assert_eq!(
            t.entries[2].parts,
            [Part::Thinking { text: "**Checking the file**\nIt may not exist.".into() }, Part::ToolCall { id: READ.into(), name: "read_file".into(), args: r#"{"file_path":"missing.txt"}"#.into() },]
        );
        assert_eq!(t.entries[3].parts, [Part::ToolResult { call_id: READ.into(), content: "File not found: /home/user/proj/missing.txt".into(), is_error: true, elided: None }]);
        assert_calls_answered_in_place(&t, "failed read");
    }

    #[test]
    fn detects_the_metadata_line_only() {
        let first = SESSION.lines().next().unwrap();
        let (_, format) = super::super::parse(SESSION, "s.jsonl").unwrap();
        assert_eq!(format, super::super::Format::Gemini);
        let map = |s: &str| serde_json::from_str::<Map<String, Value>>(s).unwrap();
        assert!(detect(&map(first)));
        assert!(!super::super::claude_code::detect(&map(first)));
        assert!(!super::super::codex::detect(&map(first)));
        assert!(!detect(&map(r#"{"type":"user","sessionId":"s","uuid":"u","timestamp":"t","message":{}}"#)));
        assert!(!detect(&map(r#"{"id":"s","timestamp":"t","instructions":null}"#)));
        assert!(!detect(&map(r#"{"type":"session","id":"s"}"#)));
    }

    const META: &str = r#"{"sessionId":"s","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}"#;

    #[test]
    fn set_replaces_the_list_and_rewind_truncates() {
        let t = parse(&format!(
            r#"{META}
{{"id":"a","type":"user","content":[{{"text":"one"}}]}}
{{"id":"b","type":"gemini","content":"two"}}
{{"$set":{{"summary":"ignored","lastUpdated":"t"}}}}
{{"$set":{{"messages":[{{"id":"b","type":"gemini","content":[{{"text":"two"}}]}},{{"id":"a","type":"user","content":[{{"text":"one"}}]}}]}}}}
{{"id":"c","type":"user","content":[{{"text":"three"}}]}}
{{"id":"d","type":"gemini","content":"four"}}
{{"$rewindTo":"d"}}
{{"id":"a","type":"user","content":[{{"text":"one, edited"}}]}}
"#
        ));
        assert_eq!(shape(&t).iter().map(|(id, _, _)| *id).collect::<Vec<_>>(), ["b", "a", "c"]);
        assert_eq!(t.entries[1].parts, [text("one, edited")]);
    }

    #[test]
    fn unknown_kinds_are_counted_and_text_kept_notices_to_the_user_are_not_read() {
        let t = parse(&format!(
            r#"{META}
{{"id":"a","type":"user","content":[{{"text":"hi"}},{{"inlineData":{{"mimeType":"image/png","data":"QUJD"}}}}]}}
{{"id":"i","type":"info","content":"Binary content received"}}
{{"id":"e","type":"info","content":""}}
{{"id":"w","type":"warning","content":""}}
{{"id":"n","type":"note","content":"a future kind"}}
{{"id":"m","type":"memo","content":""}}
{{"$future":{{}}}}
{{"id":"g","type":"gemini","content":"","toolCalls":[{{"id":"c1","name":"ls","args":{{}},"status":"cancelled"}}],"tokens":{{"input":10,"output":2,"cached":0,"thoughts":0,"tool":0,"total":0}}}}
"#
        ));
        assert_eq!(t.entries[0].parts, [text("hi"), Part::Image { reference: "image/png image, 4 bytes base64".into() }]);
        // Gemini CLI's own notices (an empty `info` the TUI records among them) are a known kind.
        assert_eq!(shape(&t)[1], ("n", Role::User, Origin::Harness));
        assert_eq!(t.entries[1].parts, [text("[note message] a future kind")]);
        assert_eq!(t.unrecognized.kept.keys().collect::<Vec<_>>(), ["note"]);
        assert_eq!(t.unrecognized.skipped.keys().collect::<Vec<_>>(), ["$future", "memo"]);
        assert_eq!(t.entries[2].reported_tokens, Some(12));
        // A call with no recorded result is still answered, as a failure.
        assert_eq!(t.entries[3].parts, [Part::ToolResult { call_id: "c1".into(), content: "[no result recorded; status: cancelled]".into(), is_error: true, elided: None }]);
        assert_calls_answered_in_place(&t, "unknown kinds");
    }

    /// Gemini CLI 0.61.0 with a BeforeAgent hook answering `additionalContext` (seen live): the
    /// prompt's parts, then the hook's, with `<` and `>` escaped.
    #[test]
    fn hook_context_is_the_harnesss_not_the_operators() {
        let t = parse(&format!(
            r#"{META}
{{"id":"u","type":"user","content":[{{"text":"Next step please"}},{{"text":"<hook_context>RULE &lt;x&gt;</hook_context>"}}],"displayContent":[{{"text":"Next step please"}}]}}
{{"id":"g","type":"gemini","content":"ok"}}
"#
        ));
        assert_eq!(shape(&t), [("u", Role::User, Origin::Operator), ("u/hook_context", Role::User, Origin::Harness), ("g", Role::Assistant, Origin::Agent)]);
        assert_eq!(t.entries[0].parts, [text("Next step please")]);
        assert_eq!(t.entries[1].parts, [text("<hook_context>RULE &lt;x&gt;</hook_context>")]);
    }

    #[test]
    fn errors_name_the_line() {
        let e = super::parse(&format!("{META}\n\n{{\"id\":\n"), "s.jsonl").unwrap_err();
        assert_eq!(e.line, Some(3));
        let e = super::parse(&format!("{META}\n[1]\n"), "s.jsonl").unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (Some(2), "expected a JSON object"));
        let e = super::parse(META, "s.jsonl").unwrap_err();
        assert_eq!(e.message, "a Gemini CLI session with no messages");
    }
}
