//! Claude Code session logs (`~/.claude/projects/<project>/<session>.jsonl`), read as the
//! context Claude Code sends the model next:
//! - one line per streamed content block: the blocks of one response (one `message.id`) are
//!   merged into one entry, whatever tool results Claude Code wrote between them;
//! - only what follows the last `compact_boundary` is context; the compaction's summary (the
//!   user line marked `isCompactSummary`) becomes a summary entry;
//! - sidechain lines (subagents) are not the main conversation and are skipped; a subagent's
//!   own file (every line a sidechain) is read as its conversation;
//! - UI and bookkeeping lines (`progress`, `file-history-snapshot`, `queue-operation`, hook
//!   and timing `system` lines) carry no message and are skipped; meta user lines (hook
//!   reminders the model does read) and `attachment` lines with `rendered` text are kept as
//!   harness entries.
//!
//! Line shapes: Claude Code 2.1 as recorded; documented only for `compact_boundary`
//! (https://code.claude.com/docs/en/hooks, "PreCompact"/"SessionStart" and the transcript
//! notes), the rest read off real sessions.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::anthropic::{split_content, Message};
use super::TranscriptError;
use crate::transcript::{Entry, Origin, Part, Role, Transcript, Unrecognized};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    subtype: Option<String>,
    uuid: Option<String>,
    #[serde(default)]
    is_sidechain: bool,
    #[serde(default)]
    is_meta: bool,
    #[serde(default)]
    is_compact_summary: bool,
    message: Option<AnyMessage>,
    /// `system` lines that reach the model (`local_command` output).
    content: Option<Value>,
}

#[derive(Deserialize)]
struct AnyMessage {
    #[serde(flatten)]
    message: Message,
    id: Option<String>,
    usage: Option<Usage>,
}

/// What the provider billed for the response; the context it saw is the sum.
#[derive(Deserialize, Clone, Copy)]
pub(super) struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

impl Usage {
    pub(super) fn context_tokens(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens + self.output_tokens
    }
}

/// Line kinds that are the conversation.
const CONVERSATION: &[&str] = &["user", "assistant", "system"];

/// Line kinds that carry no message for the model (UI state, titles, file backups, modes).
const BOOKKEEPING: &[&str] = &[
    "progress",
    "file-history-snapshot",
    "file-history-delta",
    "queue-operation",
    "summary",
    "custom-title",
    "ai-title",
    "tag",
    "agent-name",
    "agent-color",
    "agent-setting",
    "last-prompt",
    "mode",
    "permission-mode",
    "cost-state",
    "worktree-state",
    "pr-link",
    "frame-link",
    "bridge-session",
    "relocated",
    "continued-in",
    "ended-by-model",
    "attribution-snapshot",
    "history-suppression",
    "isolation-latch",
    "atis-latch",
    "dev-mods",
    "memory-mode",
    "content-replacement",
    "fork-context-ref",
    "observer-ref",
    "artifact-comment-monitor",
    "artifact-autoreact-ledger",
    "tools-used",
];

/// `attachment` lines (2.1.32x): context Claude Code attaches to the next request (environment,
/// date, MCP server instructions, a hook's `additionalContext`…). Those with `rendered` text
/// reach the model as `<system-reminder>` blocks and are kept as harness entries; the others
/// (`prompt_snapshot`, `hook_success`, `session_context`…) are bookkeeping.
const ATTACHMENT: &str = "attachment";

fn rendered(line: &Value) -> Option<String> {
    let texts: Vec<&str> = line.get("rendered")?.as_array()?.iter().filter_map(|r| r.get("content").and_then(Value::as_str)).filter(|t| !t.is_empty()).collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// Claude Code's record of each API request (2.1.28x on): its shape, and each message blob it
/// sent, deduplicated. The `message` of an `api-request-blob` is a request parameter, a copy
/// of a turn already in the log, not a turn of its own.
const REQUEST_CAPTURE: &[&str] = &["api-request", "api-request-shape", "api-request-blob"];

/// Text Claude Code itself writes as a user message: background task notices, hook
/// reminders, local command output, interruption markers. Not operator intent.
/// Slash commands (`<command-name>/compact</command-name>…`) are the harness's record of a
/// command, not something the operator said to the model.
const INJECTED_PREFIXES: &[&str] =
    &["<task-notification>", "<system-reminder>", "<local-command-", "<bash-stdout>", "<bash-stderr>", "[Request interrupted by user", "<command-name>", "<command-message>", "<command-args>"];

fn injected(parts: &[Part]) -> bool {
    matches!(parts.first(), Some(Part::Text { text }) if INJECTED_PREFIXES.iter().any(|p| text.trim_start().starts_with(p)))
}

/// Whether `first` (the first non-blank line, parsed) looks like a Claude Code session line.
pub(super) fn detect(first: &serde_json::Map<String, Value>) -> bool {
    let kind = first.get("type").and_then(Value::as_str).unwrap_or_default();
    first.contains_key("sessionId") && (first.contains_key("uuid") || BOOKKEEPING.contains(&kind) || REQUEST_CAPTURE.contains(&kind))
        || kind == "file-history-snapshot"
        || kind == "summary" && first.contains_key("leafUuid")
        || kind == "queue-operation"
}

/// Claude Code's session log (only Claude Code writes it).
pub(super) struct ClaudeCodeLog;

impl super::TranscriptFormat for ClaudeCodeLog {
    fn name(&self) -> &'static str {
        "claude-code"
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
    // Kinds this reader does not know, each counted; one carrying a message is kept as text.
    let mut unrecognized = Unrecognized::default();
    let mut opaque: Vec<(usize, Entry)> = Vec::new();
    let known = |kind: &str| BOOKKEEPING.contains(&kind) || REQUEST_CAPTURE.contains(&kind);
    for (i, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let strict = match serde_json::from_str::<Line>(raw) {
            Ok(line) if CONVERSATION.contains(&line.kind.as_str()) => {
                lines.push((i + 1, line));
                continue;
            }
            Ok(line) if known(&line.kind) => continue,
            strict => strict,
        };
        // Rare: a kind this reader does not know, or a line it cannot read.
        let value: Value = serde_json::from_str(raw).map_err(|e| TranscriptError::in_line(source_name, i + 1, &e))?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or_default();
        if CONVERSATION.contains(&kind) {
            // A user, assistant or system line without their shape.
            if let Err(e) = strict {
                return Err(TranscriptError::in_line(source_name, i + 1, &e));
            }
        } else if known(kind) {
        } else if kind == ATTACHMENT {
            if let Some(text) = rendered(&value) {
                let id = value.get("uuid").and_then(Value::as_str).map_or_else(|| format!("l{}", i + 1), str::to_string);
                opaque.push((i + 1, Entry::text(id, Role::User, Origin::Harness, text)));
            }
        } else if let Some(text) = super::message_text(&value) {
            unrecognized.keep(kind);
            let id = value.get("uuid").and_then(Value::as_str).map_or_else(|| format!("l{}", i + 1), str::to_string);
            opaque.push((i + 1, Entry::text(id, Role::User, Origin::Harness, format!("[{kind} line] {text}"))));
        } else {
            unrecognized.skip(if kind.is_empty() { "(no type)" } else { kind });
        }
    }
    // A subagent's own file holds only sidechain lines: then they are the conversation.
    let all_sidechain = lines.iter().filter(|(_, l)| l.uuid.is_some()).all(|(_, l)| l.is_sidechain);
    let start = lines.iter().rposition(|(_, l)| l.subtype.as_deref() == Some("compact_boundary")).map_or(0, |p| p + 1);
    // Opaque entries from before the last compaction are not in the context either.
    let first_line = start.checked_sub(1).map_or(0, |b| lines[b].0);
    let opaque: Vec<(usize, Entry)> = opaque.into_iter().filter(|(at, _)| *at > first_line).collect();
    let opaque_ids: HashSet<String> = opaque.iter().map(|(_, e)| e.id.clone()).collect();
    let mut opaque = opaque.into_iter().peekable();

    let mut entries: Vec<Entry> = Vec::new();
    // Where each response's entry sits, to merge its later blocks into it.
    let mut response_at: HashMap<String, usize> = HashMap::new();
    for (line_no, line) in lines.into_iter().skip(start) {
        while opaque.peek().is_some_and(|(at, _)| *at < line_no) {
            entries.extend(opaque.next().map(|(_, e)| e));
        }
        if line.is_sidechain && !all_sidechain {
            continue;
        }
        let err = |m: String| TranscriptError::new(source_name, Some(line_no), m);
        let id = || line.uuid.clone().unwrap_or_else(|| format!("l{line_no}"));
        match (line.kind.as_str(), line.message) {
            ("assistant", Some(m)) => {
                let split = split_content(&m.message.content).map_err(err)?;
                if !split.results.is_empty() {
                    return Err(err("an assistant message carries a tool_result".into()));
                }
                let tokens = m.usage.map(|u| u.context_tokens());
                match m.id.as_ref().and_then(|r| response_at.get(r)) {
                    Some(&at) => {
                        let entry = &mut entries[at];
                        entry.parts.extend(split.parts);
                        // Every streamed line repeats the usage; the last is final.
                        entry.reported_tokens = tokens.or(entry.reported_tokens);
                    }
                    None => {
                        if let Some(r) = &m.id {
                            response_at.insert(r.clone(), entries.len());
                        }
                        entries.push(Entry { parts: split.parts.into(), response: m.id, reported_tokens: tokens, ..Entry::text(id(), Role::Assistant, Origin::Agent, "") });
                    }
                }
            }
            ("user", Some(m)) => {
                let split = split_content(&m.message.content).map_err(err)?;
                let base = id();
                let results = split.results.len();
                for (k, result) in split.results.into_iter().enumerate() {
                    let rid = if k == 0 { base.clone() } else { format!("{base}-{}", k + 1) };
                    entries.push(Entry { parts: vec![result].into(), ..Entry::text(rid, Role::Tool, Origin::Tool, "") });
                }
                if !split.parts.is_empty() {
                    let origin = match (line.is_compact_summary, line.is_meta || injected(&split.parts)) {
                        (true, _) => Origin::Summary,
                        (_, true) => Origin::Harness,
                        _ => Origin::Operator,
                    };
                    // The line's id went to its first result, if it had any.
                    let id = if results > 0 { format!("{base}-text") } else { base };
                    entries.push(Entry { parts: split.parts.into(), ..Entry::text(id, Role::User, origin, "") });
                }
            }
            ("system", _) if line.subtype.as_deref() == Some("local_command") => {
                if let Some(Value::String(text)) = line.content.filter(|c| c.as_str().is_some_and(|s| !s.is_empty())) {
                    entries.push(Entry::text(id(), Role::User, Origin::Harness, text));
                }
            }
            // Hook summaries, timings, boundaries: shown to the user, never sent to the model.
            ("system", _) => {}
            (kind, _) => return Err(err(format!("a {kind:?} line where a user or assistant message was expected"))),
        }
    }
    entries.extend(opaque.map(|(_, e)| e));
    // In file order an opaque entry may come between a call and its result (or inside a
    // response merged from later lines): it moves past them.
    let entries = if opaque_ids.is_empty() { entries } else { super::after_open_calls(entries, |e| opaque_ids.contains(&e.id)) };
    if entries.is_empty() {
        return Err(TranscriptError::new(source_name, None, "a Claude Code session with no messages"));
    }
    Ok(Transcript { unrecognized, ..Transcript::new(entries) })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{assert_calls_answered_in_place, real_files};
    use super::super::{parse as parse_any, Format};
    use super::*;
    use crate::transcript::Part;

    const SESSION: &str = r#"{"type":"file-history-snapshot","messageId":"m0","snapshot":{}}
{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"Never edit files in /config."},"uuid":"u1"}
{"parentUuid":"u1","isSidechain":false,"sessionId":"s","type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"b1","compactMetadata":{"trigger":"auto","preTokens":1000}}
{"parentUuid":"b1","isSidechain":false,"sessionId":"s","type":"user","isCompactSummary":true,"message":{"role":"user","content":"Summary: the operator forbade edits in /config."},"uuid":"u2"}
{"parentUuid":"u2","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"Now run the tests."},"uuid":"u3"}
{"parentUuid":"u3","isSidechain":false,"sessionId":"s","type":"progress","data":{"type":"hook_progress"},"uuid":"p1"}
{"parentUuid":"u3","isSidechain":false,"sessionId":"s","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"thinking","thinking":"run both"}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":900,"output_tokens":1}},"uuid":"a1"}
{"parentUuid":"a1","isSidechain":false,"sessionId":"s","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make test"}}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":900,"output_tokens":1}},"uuid":"a2"}
{"parentUuid":"a2","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"2 failed","is_error":true}]},"uuid":"r1"}
{"parentUuid":"r1","isSidechain":false,"sessionId":"s","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"a.rs"}}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":900,"output_tokens":57}},"uuid":"a3"}
{"parentUuid":"a3","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"fn main() {}"}]}]},"uuid":"r2"}
{"parentUuid":"r2","isSidechain":true,"sessionId":"s","type":"user","message":{"role":"user","content":"subagent prompt"},"uuid":"x1"}
{"parentUuid":"r2","isSidechain":false,"sessionId":"s","type":"user","isMeta":true,"message":{"role":"user","content":"<system-reminder>hook says hi</system-reminder>"},"uuid":"m1"}
{"parentUuid":"m1","isSidechain":false,"sessionId":"s","type":"system","subtype":"turn_duration","durationMs":5,"uuid":"d1"}
{"parentUuid":"d1","isSidechain":false,"sessionId":"s","type":"assistant","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"Two tests fail."},{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}],"usage":{"input_tokens":5,"cache_read_input_tokens":1200,"output_tokens":9}},"uuid":"a4"}
"#;

    #[test]
    fn reads_the_context_after_the_last_compaction_with_responses_merged() {
        let (t, format) = parse_any(SESSION, "s.jsonl").unwrap();
        assert_eq!(format, Format::ClaudeCode);
        let shape: Vec<(&str, Role, Origin)> = t.entries.iter().map(|e| (e.id.as_str(), e.role, e.origin)).collect();
        assert_eq!(
            shape,
            [
                ("u2", Role::User, Origin::Summary),
                ("u3", Role::User, Origin::Operator),
                ("a1", Role::Assistant, Origin::Agent),
                ("r1", Role::Tool, Origin::Tool),
                ("r2", Role::Tool, Origin::Tool),
                ("m1", Role::User, Origin::Harness),
                ("a4", Role::Assistant, Origin::Agent),
            ]
        );
        // One response, three streamed lines, results written between them: one entry.
        let a1 = &t.entries[2];
        assert_eq!(a1.tool_call_ids().collect::<Vec<_>>(), ["t1", "t2"]);
        assert_eq!(a1.response.as_deref(), Some("msg_1"));
        assert_eq!(a1.reported_tokens, Some(3 + 100 + 900 + 57), "the last streamed line's usage is final");
        assert!(matches!(&t.entries[3].parts[0], Part::ToolResult { is_error: true, content, .. } if content == "2 failed"));
        assert!(matches!(&t.entries[4].parts[0], Part::ToolResult { content, .. } if content == "fn main() {}"));
        // An unknown block is kept as text, not dropped.
        assert!(matches!(&t.entries[6].parts[1], Part::Text { text } if text.starts_with("[server_tool_use block]") && text.contains("web_search")));
        assert_eq!(crate::transcript::reported_usage(&t.entries), Some((1214, 0)));
        assert_calls_answered_in_place(&t, "s.jsonl");
    }

    /// One user line answering two calls and adding words: three entries, three ids.
    #[test]
    fn results_and_text_of_one_line_get_ids_of_their_own() {
        let text = r#"{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}},{"type":"tool_use","id":"t2","name":"Read","input":{}}]},"uuid":"a1"}
{"parentUuid":"a1","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"one"},{"type":"tool_result","tool_use_id":"t2","content":"two"},{"type":"text","text":"and stop there"}]},"uuid":"u1"}
"#;
        let (t, _) = parse_any(text, "s.jsonl").unwrap();
        let ids: Vec<&str> = t.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["a1", "u1", "u1-2", "u1-text"]);
    }

    #[test]
    fn a_subagent_file_is_its_own_conversation() {
        let text = r#"{"parentUuid":null,"isSidechain":true,"sessionId":"s","agentId":"x","type":"user","message":{"role":"user","content":"Summarize."},"uuid":"x1"}
{"parentUuid":"x1","isSidechain":true,"sessionId":"s","agentId":"x","type":"assistant","message":{"id":"msg_9","role":"assistant","content":[{"type":"text","text":"Done."}]},"uuid":"x2"}
"#;
        let (t, _) = parse_any(text, "agent.jsonl").unwrap();
        assert_eq!(t.entries.len(), 2);
    }

    #[test]
    fn errors_name_the_line() {
        let broken = SESSION.replacen(r#""uuid":"u3"}"#, r#""uuid":"u3""#, 1);
        let e = parse_any(&broken, "s.jsonl").unwrap_err();
        assert_eq!(e.line, Some(5), "{e}");
        let bad_block = SESSION.replacen(r#"{"type":"tool_use","id":"t1","name":"Bash""#, r#"{"type":"tool_use","name":"Bash""#, 1);
        let e = parse_any(&bad_block, "s.jsonl").unwrap_err();
        assert_eq!(e.line, Some(8), "{e}");
        assert!(e.message.contains("has no `id`"), "{e}");
    }

    /// Claude Code 2.1.328 records each API request: its message blobs are copies of turns.
    /// A kind nobody knows yet is counted; with a message, its text stays as an opaque entry,
    /// after the open call is answered, never between a call and its result.
    #[test]
    fn new_line_kinds_are_counted_never_fatal_and_never_lose_text() {
        let blob = r#"{"type":"api-request-blob","sessionId":"s","hash":"h1","message":{"role":"user","content":"Now run the tests."}}"#;
        let mystery = r#"{"type":"mystery","sessionId":"s","uuid":"z","message":{"role":"user","content":[{"type":"text","text":"a note"}]}}"#;
        let quiet = r#"{"type":"hologram","sessionId":"s","state":{"x":1}}"#;
        let mut lines: Vec<&str> = SESSION.lines().collect();
        // After the call t1 (line 8), before its result: the opaque entry must wait.
        lines.insert(8, mystery);
        lines.insert(5, blob);
        lines.push(quiet);
        let (t, _) = parse_any(&lines.join("\n"), "s.jsonl").unwrap();
        assert_eq!(t.unrecognized.skipped.get("hologram"), Some(&1));
        assert_eq!(t.unrecognized.kept.get("mystery"), Some(&1));
        assert!(!t.unrecognized.skipped.contains_key("api-request-blob"), "a known kind");
        let texts: Vec<String> = t.entries.iter().map(|e| e.model_text()).collect();
        assert_eq!(texts.iter().filter(|t| t.contains("Now run the tests.")).count(), 1, "the blob is not a turn");
        let note = t.entries.iter().position(|e| e.model_text().contains("[mystery line] a note")).expect("the note's text is kept");
        assert_eq!(t.entries[note].origin, Origin::Harness);
        assert_calls_answered_in_place(&t, "s.jsonl");
        assert!(t.unrecognized.to_string().contains("1 skipped (hologram)"), "{}", t.unrecognized);
    }

    /// Claude Code 2.1.328's `attachment` lines: rendered ones reach the model (a hook's
    /// additional context among them), the others are bookkeeping; neither is unrecognized.
    #[test]
    fn rendered_attachments_are_harness_context_and_the_rest_bookkeeping() {
        let text = r#"{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"Fix the parser."},"uuid":"u1"}
{"parentUuid":"u1","isSidechain":false,"attachment":{"type":"hook_additional_context","content":["keep the port"]},"type":"attachment","uuid":"at1","rendered":[{"content":"<system-reminder>\nSessionStart hook additional context: keep the port\n</system-reminder>"}],"renderedRole":"system","sessionId":"s"}
{"parentUuid":"at1","isSidechain":false,"attachment":{"type":"prompt_snapshot","systemPrompt":["You are an agent"]},"type":"attachment","uuid":"at2","sessionId":"s"}
{"type":"tools-used","tools":["Bash"],"sessionId":"s"}
"#;
        let (t, _) = parse_any(text, "s.jsonl").unwrap();
        assert!(t.unrecognized.is_empty(), "{}", t.unrecognized);
        assert_eq!(t.entries.len(), 2);
        assert_eq!((t.entries[1].id.as_str(), t.entries[1].origin), ("at1", Origin::Harness));
        assert!(t.entries[1].model_text().contains("SessionStart hook additional context: keep the port"));
    }

    #[test]
    fn a_slash_command_is_not_the_operator_speaking() {
        let text = r#"{"parentUuid":null,"isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"Fix the parser."},"uuid":"u1"}
{"parentUuid":"u1","isSidechain":false,"sessionId":"s","type":"user","message":{"role":"user","content":"<command-name>/compact</command-name>\n<command-message>compact</command-message>\n<command-args>keep the port</command-args>"},"uuid":"u2"}
"#;
        let (t, _) = parse_any(text, "s.jsonl").unwrap();
        assert_eq!(t.entries[0].origin, Origin::Operator);
        assert_eq!(t.entries[1].origin, Origin::Harness);
    }

    /// Every recorded Claude Code session: read by this reader, every call answered right after
    /// it (parallel calls complete in any order, which the APIs accept),
    /// Claude Code's own summary as the first entry where it compacted, usage recorded.
    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_claude_code_sessions() {
        for (name, text) in real_files("claude-code", "jsonl") {
            let (t, format) = parse_any(&text, &name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(format, Format::ClaudeCode, "{name}");
            let problems = crate::chain::invariants::pairing_problems(&t.entries);
            assert!(problems.is_empty(), "{name}: {problems:?}");
            if text.contains("\"compact_boundary\"") {
                assert_eq!(t.entries[0].origin, Origin::Summary, "{name}");
                assert!(t.entries[0].model_text().contains("continued from a previous conversation"), "{name}");
            }
            if !name.contains("agent-") {
                assert!(crate::transcript::reported_usage(&t.entries).is_some(), "{name}: no usage read");
            }
        }
    }
}
