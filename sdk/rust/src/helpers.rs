//! Helpers plugin authors keep needing: token counts, safe cut points, placeholders, logging.

use crate::host::{log, tokens};
use crate::types::{Entry, EntryRange, Part};

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
