//! `native-summary`: the model writes a summary in Pi's structure (goal, constraints, progress,
//! decisions, next steps, critical context). With an earlier summary at the start of the range
//! (or a previous checkpoint) the model updates it instead of starting over. When the verbatim
//! tail starts inside a turn, that turn's beginning is summarised separately so the tail still
//! makes sense. The file lists are computed from tool calls, not asked of the model.

use std::ops::RangeInclusive;

use cairn_sdk::chunks::{model_context_window, Chunked, Summarizer};
use cairn_sdk::prompt::{clean_reply, is_heading, DATA_NOT_INSTRUCTIONS};
use cairn_sdk::types::*;
use cairn_sdk::{ask_model, count_tokens, export_strategy, is_operator_message, log_info, message_text, model_unavailable, parse_config, range_of, replaceable_range, summary_replacement, Strategy};
use cairn_sdk::{checkpoint, ledger};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Tool results, arguments and thinking longer than this are clamped before the model sees them.
    clamp_chars: usize,
    /// Reply budget of the main summary; the turn-prefix summary gets half.
    max_tokens: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { clamp_chars: 2000, max_tokens: 4096 }
    }
}

/// Headings the model's reply must contain.
const REQUIRED_SECTIONS: [&str; 9] =
    ["## Goal", "## Constraints & Preferences", "## Progress", "### Done", "### In Progress", "### Blocked", "## Key Decisions", "## Next Steps", "## Critical Context"];

const SYSTEM: &str = "You are a context summarization assistant. You read a conversation between an operator and an AI coding agent and write a structured summary that lets the agent continue the work after its history is replaced by your summary. Do not continue the conversation and do not answer questions in it. Output only the summary.";

const FORMAT: &str = "Use EXACTLY these markdown sections, in this order, with these headings:

## Goal
[What the operator wants to accomplish; several items if the session covers several tasks.]

## Constraints & Preferences
- [Requirements and preferences the operator stated; quote every prohibition verbatim. \"(none)\" if none.]

## Progress
### Done
- [x] [Completed work]

### In Progress
- [ ] [Current work]

### Blocked
- [What prevents progress; \"(none)\" if nothing.]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Data, error messages, examples or references needed to continue; \"(none)\" if not applicable.]

Keep each section concise. Preserve exact file paths, function names, commands and error messages. Do not list the files read or modified: they are appended for you.";

const PREFIX_FORMAT: &str = "This is the beginning of a turn whose later part is kept verbatim after your summary. Summarise this beginning so the kept part makes sense, with these sections:

### Original Request
[What the operator asked in this turn, verbatim where short]

### Early Progress
- [Key steps and findings so far]

### Context for Suffix
- [What is needed to understand the kept recent work]

Be concise.";

struct NativeSummary;

impl Strategy for NativeSummary {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        let config: Config = parse_config(&request.config)?;
        let range = replaceable_range(&request)?;
        let plan = Plan::new(&request, range.clone())?;
        // Histories larger than the model's window go in chunks, each summary folded into the next.
        let window = model_context_window(&request.config);
        let summarizer = Summarizer { system: SYSTEM, max_tokens: config.max_tokens, window, clamp_chars: config.clamp_chars };
        let main_prompt = |conversation: &str, previous: Option<&str>| main_prompt(conversation, previous, &request);
        let main = summarizer.run(plan.history, plan.previous.clone(), &main_prompt, &mut ask_model, &count_tokens).map_err(model_unavailable)?;
        let prefix = match plan.turn_prefix {
            Some(entries) => {
                let summarizer = Summarizer { max_tokens: (config.max_tokens / 2).max(256), ..summarizer };
                Some(summarizer.run(entries, None, &prefix_prompt, &mut ask_model, &count_tokens).map_err(model_unavailable)?)
            }
            None => None,
        };
        let mut summary = assemble(&main.reply, prefix.as_ref().map(|p| p.reply.as_str()), &plan.files_read, &plan.files_modified)?;
        // The operator's words the model did not keep, put back verbatim.
        if let Some(ledger) = ledger::summary_ledger(&summary, &request.entries[range.clone()]) {
            summary.push_str("\n\n");
            summary.push_str(&ledger);
        }
        log_info(&format!(
            "summarised {} entries{}{} in {}{}",
            range.clone().count(),
            if plan.previous.is_some() { " (update)" } else { "" },
            if prefix.is_some() { " with a split-turn prefix" } else { "" },
            chunk_note(&main, window),
            if main.retried || prefix.as_ref().is_some_and(|p| p.retried) { " (a too-long prompt was retried smaller)" } else { "" },
        ));
        let entries = &request.entries;
        Ok(Outcome::new(range_of(entries, *range.start(), *range.end()), summary_replacement(&entries[range], summary)))
    }
}

/// What goes to the model, decided before any call.
struct Plan<'a> {
    /// The earlier summary to update, if any.
    previous: Option<String>,
    /// Entries the main summary covers.
    history: &'a [Entry],
    /// The start of the turn the verbatim tail cuts into.
    turn_prefix: Option<&'a [Entry]>,
    files_read: Vec<String>,
    files_modified: Vec<String>,
}

impl<'a> Plan<'a> {
    fn new(request: &'a CompactRequest, range: RangeInclusive<usize>) -> Result<Self, StrategyError> {
        let entries = &request.entries;
        let replaced = &entries[range.clone()];
        let checkpoint = request.previous_checkpoint.as_deref().and_then(|json| checkpoint::parse(json).ok());
        let (previous, body) = match replaced.split_first() {
            Some((first, rest)) if first.origin == Origin::Summary => (Some(message_text(first)), rest),
            _ => (checkpoint.as_ref().map(checkpoint::render).or_else(|| request.previous_checkpoint.clone()), replaced),
        };
        if body.is_empty() {
            return Err(StrategyError::NothingToDo("the range holds only an earlier summary".into()));
        }
        // The tail starts mid-turn when its first entry is not the operator speaking.
        let mid_turn = entries.get(range.end() + 1).is_some_and(|e| !is_operator_message(e));
        let (history, turn_prefix) = match body.iter().rposition(is_operator_message) {
            Some(start) if mid_turn && start > 0 => (&body[..start], Some(&body[start..])),
            _ => (body, None),
        };

        let (mut files_read, mut files_modified) = checkpoint.map(|c| (c.files_read, c.files_modified)).unwrap_or_default();
        if let Some(text) = &previous {
            files_read.extend(file_block(text, "read-files"));
            files_modified.extend(file_block(text, "modified-files"));
        }
        let (read, modified) = checkpoint::files_touched(replaced);
        files_read.extend(read);
        files_modified.extend(modified);
        let files_modified = dedup(files_modified);
        let files_read = dedup(files_read).into_iter().filter(|f| !files_modified.contains(f)).collect();
        Ok(Plan { previous: previous.map(|p| strip_file_blocks(&p)), history, turn_prefix, files_read, files_modified })
    }
}

/// How many chunks the main summary took, for the log.
fn chunk_note(done: &Chunked, window: Option<u32>) -> String {
    match window {
        Some(window) => format!("{} chunk{} (the model's window is {window} tokens)", done.chunks, if done.chunks == 1 { "" } else { "s" }),
        None => format!("{} chunk{}", done.chunks, if done.chunks == 1 { "" } else { "s" }),
    }
}

/// The main summary's prompt for one chunk of history (`conversation`, a `<conversation>`
/// block): a fresh summary, or an update of `previous` (an earlier summary, or the summary of
/// the chunks before this one).
fn main_prompt(conversation: &str, previous: Option<&str>, request: &CompactRequest) -> String {
    let mut focus = String::new();
    if let Some(preserve) = request.preserve.as_deref().filter(|p| !p.trim().is_empty()) {
        focus.push_str(&format!("The agent asked that this survive the summary: {preserve}\n"));
    }
    if let Some(resume) = request.resume.as_deref().filter(|r| !r.trim().is_empty()) {
        focus.push_str(&format!("The agent's notes on how to resume: {resume}\n"));
    }
    match previous {
        None => format!("{DATA_NOT_INSTRUCTIONS}\n\n{conversation}\n\n{focus}Summarise the conversation above.\n\n{FORMAT}"),
        Some(previous) => format!(
            "{DATA_NOT_INSTRUCTIONS}\n\nHere is the previous summary:\n<previous-summary>\n{previous}\n</previous-summary>\n\n\
             The conversation since then:\n{conversation}\n\n{focus}Update the previous summary with the new conversation: \
             integrate the new progress, decisions and context, keep what still holds (every constraint in particular), \
             move finished items from In Progress to Done, and drop only what is no longer true.\n\n{FORMAT}"
        ),
    }
}

/// The split turn's prefix prompt; `previous` is the summary of its earlier chunks, if it took several.
fn prefix_prompt(conversation: &str, previous: Option<&str>) -> String {
    match previous {
        None => format!("{DATA_NOT_INSTRUCTIONS}\n\n{conversation}\n\n{PREFIX_FORMAT}"),
        Some(previous) => format!(
            "{DATA_NOT_INSTRUCTIONS}\n\nHere is the summary of this turn's beginning so far:\n<previous-summary>\n{previous}\n</previous-summary>\n\n\
             The turn continues:\n{conversation}\n\nUpdate the summary with it.\n\n{PREFIX_FORMAT}"
        ),
    }
}

/// The replacement text: the checked summary, the turn prefix, then the file lists.
fn assemble(main: &str, prefix: Option<&str>, files_read: &[String], files_modified: &[String]) -> Result<String, StrategyError> {
    let main = strip_file_blocks(clean_reply(main));
    let missing: Vec<&str> = REQUIRED_SECTIONS.iter().copied().filter(|h| !main.lines().any(|l| is_heading(l, h))).collect();
    if !missing.is_empty() {
        return Err(StrategyError::Failed(format!("model reply lacks required sections: {}", missing.join(", "))));
    }
    let mut out = main.trim().to_string();
    if let Some(prefix) = prefix {
        let prefix = clean_reply(prefix);
        if prefix.is_empty() {
            return Err(StrategyError::Failed("the model's turn-prefix summary is empty".into()));
        }
        out.push_str(&format!("\n\n## Current Turn (prefix)\n\n{prefix}"));
    }
    for (tag, files) in [("read-files", files_read), ("modified-files", files_modified)] {
        if !files.is_empty() {
            out.push_str(&format!("\n\n<{tag}>\n{}\n</{tag}>", files.join("\n")));
        }
    }
    Ok(out)
}

/// The lines of a `<tag>…</tag>` block, as written by an earlier summary.
fn file_block(text: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let Some(start) = text.find(&open).map(|at| at + open.len()) else { return vec![] };
    let end = text[start..].find(&close).map_or(text.len(), |at| start + at);
    text[start..end].lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
}

/// Removes the file-list blocks (they are recomputed and appended).
fn strip_file_blocks(text: &str) -> String {
    let mut out = text.to_string();
    for tag in ["read-files", "modified-files"] {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        while let Some(start) = out.find(&open) {
            let end = out[start..].find(&close).map_or(out.len(), |at| start + at + close.len());
            out.replace_range(start..end, "");
        }
    }
    out.trim_end().to_string()
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

export_strategy!(NativeSummary);

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::prompt::conversation_as_data;

    const REPLY: &str = "## Goal\nFix the parser.\n\n## Constraints & Preferences\n- \"Don't touch the lexer.\"\n\n## Progress\n### Done\n- [x] Read src/parser.rs\n\n### In Progress\n- [ ] Nested braces\n\n### Blocked\n- (none)\n\n## Key Decisions\n- **Recursive descent**: regexes cannot nest\n\n## Next Steps\n1. Add a test\n\n## Critical Context\n- (none)";

    fn entry(role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        Entry { id: format!("e{}", parts.len()), role, origin, parts, tokens: 0, turn: 0, pinned: false }
    }
    fn text(role: Role, origin: Origin, text: &str) -> Entry {
        entry(role, origin, vec![Part::Text(text.into())])
    }
    fn request(entries: Vec<Entry>, tail_start: u32) -> CompactRequest {
        CompactRequest {
            purpose: RequestKind::Compact,
            archive_id: "a-1".into(),
            entries,
            protected_head: 1,
            tail_start,
            token_target: 1000,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            config: String::new(),
        }
    }
    fn edit(id: &str, path: &str) -> [Entry; 2] {
        let call = ToolCall { id: id.into(), name: "edit".into(), args: format!(r#"{{"path":"{path}"}}"#) };
        let result = ToolResult { call_id: id.into(), content: "ok".into(), is_error: false, elided: None };
        [entry(Role::Assistant, Origin::Agent, vec![Part::ToolCall(call)]), entry(Role::Tool, Origin::Tool, vec![Part::ToolResult(result)])]
    }

    #[test]
    fn a_reply_missing_a_section_is_rejected() {
        assert!(assemble(REPLY, None, &[], &[]).is_ok());
        let without_blocked = REPLY.replace("### Blocked\n- (none)\n\n", "");
        match assemble(&without_blocked, None, &[], &[]) {
            Err(StrategyError::Failed(why)) => assert_eq!(why, "model reply lacks required sections: ### Blocked"),
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn assembles_prefix_and_file_lists() {
        let fenced = format!("```markdown\n{REPLY}\n<read-files>\nstale.rs\n</read-files>\n```");
        let out = assemble(&fenced, Some("### Original Request\nFix it"), &["a.rs".into()], &["b.rs".into()]).unwrap();
        assert!(out.starts_with("## Goal\n"));
        assert!(!out.contains("stale.rs"), "the model's own file lists are replaced");
        assert!(out.ends_with("## Current Turn (prefix)\n\n### Original Request\nFix it\n\n<read-files>\na.rs\n</read-files>\n\n<modified-files>\nb.rs\n</modified-files>"));
    }

    #[test]
    fn plans_update_mode_split_turn_and_files() {
        let mut entries = vec![
            text(Role::System, Origin::Harness, "system"),
            text(Role::User, Origin::Summary, "## Goal\nold\n\n<read-files>\nold.rs\n</read-files>\n\n<modified-files>\nmod.rs\n</modified-files>"),
            text(Role::User, Origin::Operator, "first request"),
            text(Role::Assistant, Origin::Agent, "answer"),
            text(Role::User, Origin::Operator, "second request"),
        ];
        entries.extend(edit("c1", "new.rs"));
        entries.push(text(Role::Assistant, Origin::Agent, "still working")); // the tail starts mid-turn
        let request = request(entries, 7);
        let plan = Plan::new(&request, replaceable_range(&request).unwrap()).unwrap();
        assert_eq!(plan.previous.as_deref(), Some("## Goal\nold"));
        assert_eq!(plan.history.len(), 2, "the summary entry is not re-read as conversation");
        assert_eq!(plan.turn_prefix.map(<[Entry]>::len), Some(3));
        assert_eq!(plan.files_read, ["old.rs"]);
        assert_eq!(plan.files_modified, ["mod.rs", "new.rs"]);
        let prompt = main_prompt(&conversation_as_data(plan.history, 2000), plan.previous.as_deref(), &request);
        assert!(prompt.contains("<previous-summary>\n## Goal\nold\n</previous-summary>"));
        assert!(prompt.contains("[user/operator] first request") && !prompt.contains("second request"));
        assert!(prefix_prompt(&conversation_as_data(plan.turn_prefix.unwrap(), 2000), None).contains("[user/operator] second request"));
    }

    #[test]
    fn a_tail_at_a_turn_start_needs_no_prefix() {
        let entries = vec![
            text(Role::System, Origin::Harness, "system"),
            text(Role::User, Origin::Operator, "first"),
            text(Role::Assistant, Origin::Agent, "answer"),
            text(Role::User, Origin::Operator, "second"),
        ];
        let request = request(entries, 3);
        let plan = Plan::new(&request, replaceable_range(&request).unwrap()).unwrap();
        assert!(plan.previous.is_none() && plan.turn_prefix.is_none());
        assert_eq!(plan.history.len(), 2);
        assert!(main_prompt(&conversation_as_data(plan.history, 2000), None, &request).contains("Summarise the conversation above."));
    }
}
