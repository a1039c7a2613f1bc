//! `cairn codex compact ROLLOUT`: Cairn's compaction in place of Codex's, for a session Codex
//! is not running. Cairn's chain compacts the rollout (archiving it in the project's
//! conversation, as `pre-compact` does), then one `compacted` line is appended, the record
//! Codex writes for its own compactions: `message` (the summary) and `replacement_history` (the
//! items that stand for everything before). `codex exec resume` (0.169.0) rebuilds the context
//! from the last such line: its base instructions, then exactly these items, then its
//! environment context again, then the new prompt (checked with the real binary by
//! `agents::codex`). Since 0.169 every line carries an `ordinal` one above the previous line's;
//! Codex refuses to resume a file whose last line has none.
//!
//! Only while the session is idle: Codex keeps a running session's history in memory and would
//! neither see the line nor keep it consistent, so a rollout whose last turn started and did not
//! finish is refused.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cairn::transcript::{Entry, Origin, Part, Role, Transcript};
use serde_json::{json, Value};

use crate::setup;

#[derive(clap::Args)]
pub struct Args {
    /// The session's rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    rollout: PathBuf,
    /// Cairn's home (default: $CAIRN_HOME, else ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// Policy file (TOML): the compaction chain; the embedded default when absent.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Print one JSON object for scripts.
    #[arg(long)]
    json: bool,
}

/// The rollout's lines, parsed, with their numbers (1-based).
fn lines(text: &str, path: &Path) -> Result<Vec<(usize, Value)>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map(|v| (i + 1, v)).with_context(|| format!("{}:{}: not JSON", path.display(), i + 1)))
        .collect()
}

/// The line of a turn Codex started and did not finish, if the last turn is one.
fn open_turn(lines: &[(usize, Value)]) -> Option<usize> {
    let kind = |v: &Value| (v["type"] == "event_msg").then(|| v["payload"]["type"].as_str()).flatten().map(str::to_string);
    let (line, last) = lines.iter().rev().find_map(|(n, v)| kind(v).filter(|k| ["task_started", "task_complete", "turn_aborted"].contains(&k.as_str())).map(|k| (*n, k)))?;
    (last == "task_started").then_some(line)
}

/// A message item with one text part of the kind Codex writes for `role`.
fn message(role: &str, text: &str) -> Value {
    let kind = if role == "assistant" { "output_text" } else { "input_text" };
    json!({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})
}

/// A call item: an MCP tool's qualified name (`mcp__server__tool`) goes back into Codex's two
/// fields (`namespace: "mcp__server"`, `name: "tool"`).
fn call(id: &str, name: &str, args: &str) -> Value {
    let split = name.strip_prefix("mcp__").and_then(|rest| rest.split_once("__"));
    match split {
        Some((server, tool)) => json!({"type": "function_call", "call_id": id, "namespace": format!("mcp__{server}"), "name": tool, "arguments": args}),
        None => json!({"type": "function_call", "call_id": id, "name": name, "arguments": args}),
    }
}

/// An entry's text as Codex's message shows it: its text parts, joined.
fn text(entry: &Entry) -> Option<String> {
    let parts: Vec<String> = entry
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } | Part::Placeholder { text, .. } => Some(text.clone()),
            Part::Image { reference } => Some(format!("[image: {reference}]")),
            // Reasoning Codex replays must be its own (encrypted): the text would not do.
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// Codex's items for one entry: its text as a message, then its calls or results.
fn items(entry: &Entry) -> Vec<Value> {
    let role = if entry.role == Role::Assistant { "assistant" } else { "user" };
    let mut out: Vec<Value> = text(entry).map(|t| message(role, &t)).into_iter().collect();
    for part in &entry.parts {
        match part {
            Part::ToolCall { id, name, args } => out.push(call(id, name, args)),
            Part::ToolResult { call_id, content, .. } => out.push(json!({"type": "function_call_output", "call_id": call_id, "output": content})),
            _ => {}
        }
    }
    out
}

/// The replacement history for `transcript`, and its summary's text. Codex's own context
/// (instructions, environment) is left out: Codex adds it again on resume.
fn replacement(transcript: &Transcript) -> (Vec<Value>, String) {
    let own = |e: &&Entry| e.role != Role::System && e.origin != Origin::Harness;
    let history = transcript.entries.iter().filter(own).flat_map(items).collect();
    // The same text as the summary's message: Codex's reader (and Cairn's) tell it by that.
    let summary = transcript.entries.iter().find(|e| e.origin == Origin::Summary).and_then(text).unwrap_or_default();
    (history, summary)
}

pub fn compact(args: Args) -> Result<()> {
    let path = &args.rollout;
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let lines = lines(&text, path)?;
    if let Some(line) = open_turn(&lines) {
        bail!("{}:{line}: Codex started a turn there and has not finished it; compact once the session is idle", path.display());
    }
    // The project's conversation, as the hooks and the MCP server name it: the session's cwd.
    let cwd = lines.iter().find(|(_, v)| v["type"] == "session_meta").and_then(|(_, v)| v["payload"]["cwd"].as_str()).map(PathBuf::from);
    let Some(cwd) = cwd else { bail!("{}: no session_meta line naming the session's folder: not a Codex rollout", path.display()) };
    let session = setup::SessionArgs { file: path.clone(), policy: args.policy, home: args.home, conversation: Some(setup::project_conversation(&cwd).to_string()), plugin_dir: Vec::new() }.open()?;
    let setup::Session { name, transcript, cairn, policy, mut store, .. } = session;
    let report = cairn.compact_with(&policy, &mut store, &transcript, &name, cairn::RunOptions::default())?;
    if !report.committed {
        eprintln!("cairn: {name}: no compaction committed; the rollout is unchanged");
        return Err(crate::commands::NothingCommitted.into());
    }
    let (history, summary) = replacement(&report.transcript);
    let (_, last) = lines.last().context("an empty rollout")?;
    let mut line = json!({"timestamp": last["timestamp"], "type": "compacted", "payload": {"message": summary, "replacement_history": history}});
    if let Some(ordinal) = last["ordinal"].as_u64() {
        line["ordinal"] = json!(ordinal + 1);
    }
    let mut file = std::fs::OpenOptions::new().append(true).open(path).with_context(|| format!("opening {}", path.display()))?;
    let separator = if text.ends_with('\n') { "" } else { "\n" };
    std::io::Write::write_all(&mut file, format!("{separator}{line}\n").as_bytes()).with_context(|| format!("appending to {}", path.display()))?;
    if args.json {
        let value = json!({"rollout": path.display().to_string(), "conversation": report.conversation, "tokens_before": report.tokens_before, "tokens_after": report.tokens_after, "committed_by": report.committed_by, "archive_id": report.archive_id});
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("Compacted {} ({} → {} tokens, archive {}): Codex resumes it from Cairn's context", path.display(), report.tokens_before, report.tokens_after, report.archive_id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        let mut e = Entry::text("e", role, origin, "");
        e.parts = parts.into();
        e
    }

    #[test]
    fn entries_become_codex_items_and_its_own_context_is_left_to_codex() {
        let text = |t: &str| Part::Text { text: t.into() };
        let transcript = Transcript {
            entries: vec![
                entry(Role::System, Origin::Harness, vec![text("<skills_instructions>…")]),
                entry(Role::User, Origin::Harness, vec![text("<environment_context>…")]),
                entry(Role::User, Origin::Summary, vec![text("SUMMARY")]),
                entry(
                    Role::Assistant,
                    Origin::Agent,
                    vec![
                        Part::Thinking { text: "hmm".into() },
                        text("Looking."),
                        Part::ToolCall { id: "c1".into(), name: "mcp__cairn__session_history".into(), args: "{}".into() },
                        Part::ToolCall { id: "c2".into(), name: "exec_command".into(), args: "{\"cmd\":\"ls\"}".into() },
                    ],
                ),
                entry(
                    Role::Tool,
                    Origin::Tool,
                    vec![
                        Part::ToolResult { call_id: "c1".into(), content: "found".into(), is_error: false, elided: None },
                        Part::ToolResult { call_id: "c2".into(), content: "a b".into(), is_error: false, elided: None },
                    ],
                ),
            ],
            ..Default::default()
        };
        let (history, summary) = replacement(&transcript);
        assert_eq!(summary, "SUMMARY");
        assert_eq!(
            history,
            vec![
                message("user", "SUMMARY"),
                message("assistant", "Looking."),
                json!({"type": "function_call", "call_id": "c1", "namespace": "mcp__cairn", "name": "session_history", "arguments": "{}"}),
                json!({"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"}),
                json!({"type": "function_call_output", "call_id": "c1", "output": "found"}),
                json!({"type": "function_call_output", "call_id": "c2", "output": "a b"}),
            ]
        );
    }

    #[test]
    fn a_turn_still_running_is_found() {
        let event = |kind: &str| (0, json!({"type": "event_msg", "payload": {"type": kind}}));
        assert_eq!(open_turn(&[event("task_started"), event("task_complete")]), None);
        let mut lines = vec![event("task_complete"), event("task_started")];
        lines[1].0 = 7;
        lines.push((8, json!({"type": "response_item", "payload": {}})));
        assert_eq!(open_turn(&lines), Some(7));
    }
}
