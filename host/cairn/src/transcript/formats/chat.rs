//! The messages a chat API receives, before any provider's shape: what both the OpenAI and
//! the Anthropic writers render. Written once, so both answer every tool call right after it.

use std::collections::{HashMap, HashSet};

use crate::transcript::{Origin, Part, Role, Transcript};

/// Stands in for the result of a call that has none, so the output stays valid.
pub(super) const NO_RESULT: &str = "[no result recorded]";

pub(super) enum Speaker<'a> {
    System,
    User,
    Assistant,
    /// The answer to one call, placed right after the message that made it.
    Tool {
        call_id: &'a str,
        is_error: bool,
    },
}

pub(super) struct Call<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub args: &'a str,
}

pub(super) struct Message<'a> {
    pub speaker: Speaker<'a>,
    pub texts: Vec<String>,
    pub calls: Vec<Call<'a>>,
}

/// (entry index, part index) in a transcript.
type Position = (usize, usize);

/// The transcript as chat messages: summaries speak as the user, thinking is left out (no
/// provider accepts another's reasoning back), each call's first unclaimed later result
/// follows it (a synthetic one when there is none), and results no earlier call took become
/// user text.
pub(super) fn messages(t: &Transcript) -> Vec<Message<'_>> {
    // Each call's results with their position, in transcript order.
    let mut results: HashMap<&str, Vec<(Position, &str, bool)>> = HashMap::new();
    for (i, entry) in t.entries.iter().enumerate() {
        for (j, part) in entry.parts.iter().enumerate() {
            if let Part::ToolResult { call_id, content, is_error, .. } = part {
                results.entry(call_id).or_default().push(((i, j), content, *is_error));
            }
        }
    }
    let mut claimed: HashSet<Position> = HashSet::new();
    let mut out = Vec::new();

    for (i, entry) in t.entries.iter().enumerate() {
        let speaks_as_agent = entry.role == Role::Assistant && entry.origin != Origin::Summary;
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        for (j, part) in entry.parts.iter().enumerate() {
            match part {
                Part::Text { text } | Part::Placeholder { text, .. } => texts.push(text.clone()),
                Part::Image { reference } => texts.push(format!("[image: {reference}]")),
                Part::ToolCall { id, name, args } if speaks_as_agent => calls.push((j, Call { id, name, args })),
                Part::ToolCall { id, name, args } => texts.push(format!("[tool call {id}: {name} {args}]")),
                Part::Thinking { .. } | Part::ToolResult { .. } => {}
            }
        }

        if !texts.is_empty() || !calls.is_empty() {
            let speaker = match (entry.origin, entry.role) {
                (Origin::Summary, _) => Speaker::User,
                (_, Role::System) => Speaker::System,
                (_, Role::Assistant) => Speaker::Assistant,
                (_, Role::User | Role::Tool) => Speaker::User,
            };
            let answers: Vec<Message> = calls
                .iter()
                .map(|(j, call)| {
                    let found = results.get(call.id).and_then(|rs| rs.iter().find(|(pos, ..)| *pos > (i, *j) && !claimed.contains(pos)));
                    let (content, is_error) = match found {
                        Some(&(pos, content, is_error)) => {
                            claimed.insert(pos);
                            (content.to_string(), is_error)
                        }
                        None => (NO_RESULT.to_string(), false),
                    };
                    Message { speaker: Speaker::Tool { call_id: call.id, is_error }, texts: vec![content], calls: Vec::new() }
                })
                .collect();
            out.push(Message { speaker, texts, calls: calls.into_iter().map(|(_, c)| c).collect() });
            out.extend(answers);
        }

        // Results no earlier call took cannot be tool messages.
        for (j, part) in entry.parts.iter().enumerate() {
            if let Part::ToolResult { call_id, content, .. } = part {
                if !claimed.contains(&(i, j)) {
                    out.push(Message { speaker: Speaker::User, texts: vec![format!("[tool result for unknown call {call_id}]\n{content}")], calls: Vec::new() });
                }
            }
        }
    }
    out
}
