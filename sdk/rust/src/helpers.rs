//! Helpers plugin authors keep needing: token counts, safe cut points, placeholders, logging.

use std::ops::RangeInclusive;

use crate::host::{log, model, tokens};
use crate::types::{CompactRequest, Entry, EntryRange, Origin, Part, Role, StrategyError};

/// Exact token count by the host's tokenizer (the `tokens` capability).
pub fn count_tokens(text: &str) -> u32 {
    tokens::count(text)
}

/// Recounts an entry's tokens after its parts changed.
pub fn recount(entry: &mut Entry) {
    entry.tokens = count_tokens(&entry_text(entry));
}

/// The text the model reads in an entry, as the host counts it.
pub fn entry_text(entry: &Entry) -> String {
    let mut out = String::new();
    for part in &entry.parts {
        match part {
            Part::Text(text) | Part::Thinking(text) | Part::Image(text) => out.push_str(text),
            Part::ToolCall(call) => {
                out.push_str(&call.name);
                out.push(' ');
                out.push_str(&call.args);
            }
            Part::ToolResult(result) => out.push_str(&result.content),
            Part::Placeholder(placeholder) => out.push_str(&placeholder.text),
        }
        out.push('\n');
    }
    out
}

pub fn log_info(message: &str) {
    log::log(log::Level::Info, message);
}

pub fn log_warn(message: &str) {
    log::log(log::Level::Warn, message);
}

/// `cuts[i]` is true when history may be cut just before entry `i` without separating a
/// tool call from its result (no call made before `i` is answered at or after `i`).
/// `cuts[entries.len()]` is the end. The host checks the same rule on every outcome.
pub fn safe_cut_points(entries: &[Entry]) -> Vec<bool> {
    let mut answered_at = std::collections::HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for part in &entry.parts {
            if let Part::ToolResult(result) = part {
                answered_at.entry(result.call_id.as_str()).or_insert(i);
            }
        }
    }
    // reach: one past the latest entry answering a call made so far.
    let mut cuts = vec![true; entries.len() + 1];
    let mut reach = 0usize;
    for (i, entry) in entries.iter().enumerate() {
        cuts[i] = reach <= i;
        for part in &entry.parts {
            if let Part::ToolCall(call) = part {
                if let Some(&answer) = answered_at.get(call.id.as_str()) {
                    reach = reach.max(answer + 1);
                }
            }
        }
    }
    cuts[entries.len()] = reach <= entries.len();
    cuts
}

/// Maps each tool call id to the call's name and JSON arguments.
pub fn tool_calls(entries: &[Entry]) -> std::collections::HashMap<String, (String, String)> {
    entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall(call) => Some((call.id.clone(), (call.name.clone(), call.args.clone()))),
            _ => None,
        })
        .collect()
}

/// The placeholder text Cairn uses for elided content, e.g.
/// `[elided ~12,345 tokens — recover: artifact://a-…/3]`.
pub fn placeholder_text(what: &str, tokens: u32, uri: &str) -> String {
    format!("[{what} ~{} tokens — recover: {uri}]", thousands(tokens))
}

/// `12345` → `12,345`.
pub fn thousands(n: u32) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The range covering `entries[first..=last]`.
pub fn range_of(entries: &[Entry], first: usize, last: usize) -> EntryRange {
    EntryRange { first: entries[first].id.clone(), last: entries[last].id.clone() }
}

impl crate::types::Outcome {
    /// An outcome replacing `replaced` by `replacement`, with no checkpoint, seed or retrospective.
    pub fn new(replaced: EntryRange, replacement: Vec<Entry>) -> Self {
        crate::types::Outcome { replaced, replacement, checkpoint: None, seed: None, retrospective: None }
    }
}

/// The text parts of an entry joined by newlines (no thinking, tool traffic or placeholders).
pub fn message_text(entry: &Entry) -> String {
    let texts: Vec<&str> = entry.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect();
    texts.join("\n")
}

/// True for what the operator typed: intent that summaries must keep verbatim.
pub fn is_operator_message(entry: &Entry) -> bool {
    entry.origin == Origin::Operator && entry.role == Role::User
}

/// The first `max` chars of `text` (chars, not bytes).
pub fn clip_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// The last `max` chars of `text`.
pub fn tail_chars(text: &str, max: usize) -> &str {
    let len = text.chars().count();
    match text.char_indices().nth(len.saturating_sub(max)) {
        Some((at, _)) if len > max => &text[at..],
        _ => text,
    }
}

/// `text` clipped to at most `max` chars, ending in `…` when something was cut.
pub fn clip_ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", clip_chars(text, max.saturating_sub(1)).trim_end())
    }
}

/// The plugin's config: empty text means all defaults; unknown keys are an error.
pub fn parse_config<T: serde::de::DeserializeOwned + Default>(text: &str) -> Result<T, StrategyError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(text).map_err(|e| StrategyError::Failed(format!("config: {e}")))
}

/// The entries a strategy replaces: `[protected_head, tail_start - 1]` (for a handover the host
/// sets `tail_start` to the end). Empty → `NothingToDo`.
pub fn replaceable_range(request: &CompactRequest) -> Result<RangeInclusive<usize>, StrategyError> {
    let first = request.protected_head as usize;
    let end = (request.tail_start as usize).min(request.entries.len());
    if end <= first {
        return Err(StrategyError::NothingToDo("no entries between the protected head and the verbatim tail".into()));
    }
    Ok(first..=end - 1)
}

/// A summary entry for the host to number: user role, `summary` origin, one text part.
pub fn summary_entry(text: String) -> Entry {
    Entry { id: String::new(), role: Role::User, origin: Origin::Summary, parts: vec![Part::Text(text)], tokens: 0, turn: 0, pinned: false }
}

/// A replacement for `replaced`: one summary entry, then the range's pinned entries unchanged
/// (the host refuses outcomes that drop or alter a pinned entry).
pub fn summary_replacement(replaced: &[Entry], text: String) -> Vec<Entry> {
    std::iter::once(summary_entry(text)).chain(replaced.iter().filter(|e| e.pinned).cloned()).collect()
}

/// One completion: a system prompt and a user message.
pub fn ask_model(system: &str, user: &str, max_tokens: u32) -> Result<String, model::ModelError> {
    let message = |role: &str, content: &str| model::Message { role: role.into(), content: content.into() };
    model::complete(&model::CompletionRequest { messages: vec![message("system", system), message("user", user)], max_tokens })
}

/// A model error as a strategy error: every kind means "no usable model here" (`unavailable`).
/// Plugins that hold `model` as optional handle `Denied` before, by falling back.
pub fn model_unavailable(error: model::ModelError) -> StrategyError {
    StrategyError::Unavailable(match error {
        model::ModelError::Denied(why) => format!("model denied: {why}"),
        model::ModelError::Unavailable(why) => format!("model unavailable: {why}"),
        model::ModelError::Timeout => "model timed out".into(),
        model::ModelError::Failed(why) => format!("model failed: {why}"),
    })
}
