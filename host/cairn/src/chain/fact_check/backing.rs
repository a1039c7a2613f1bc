//! What backs a claim: the text of the history the summary replaces (every part of every
//! entry, the notes and ids the step was handed), indexed for the common claims.

use std::collections::HashSet;

use super::claims::{collapse, is_identifier, Claim, Kind};
use super::History;
use crate::transcript::{Entry, Part};

/// The text of one entry, every part: text, thinking, tool calls (name, arguments as written
/// and decoded), results, placeholders and their URIs.
pub(super) fn entry_text(entry: &Entry, out: &mut String) {
    for part in &entry.parts {
        match part {
            Part::Text { text } | Part::Thinking { text } | Part::Image { reference: text } => out.push_str(text),
            Part::ToolCall { name, args, .. } => {
                out.push_str(name);
                out.push(' ');
                out.push_str(args);
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(args) {
                    json_strings(&value, &mut |s| {
                        out.push('\n');
                        out.push_str(s);
                    });
                }
            }
            Part::ToolResult { content, elided, .. } => {
                out.push_str(content);
                if let Some(uri) = elided {
                    out.push('\n');
                    out.push_str(uri);
                }
            }
            Part::Placeholder { text, uri } => {
                out.push_str(text);
                if let Some(uri) = uri {
                    out.push('\n');
                    out.push_str(uri);
                }
            }
        }
        out.push('\n');
    }
}

pub(super) fn json_strings<'v>(value: &'v serde_json::Value, each: &mut impl FnMut(&'v str)) {
    match value {
        serde_json::Value::String(s) => each(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, each)),
        serde_json::Value::Object(map) => map.values().for_each(|v| json_strings(v, each)),
        _ => {}
    }
}

/// Everything that may back a claim, whitespace collapsed.
pub(super) fn corpus(history: &History<'_>) -> String {
    let mut raw = String::new();
    for entry in history.entries {
        entry_text(entry, &mut raw);
    }
    for extra in history.extra {
        raw.push_str(extra);
        raw.push('\n');
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(extra) {
            json_strings(&value, &mut |s| {
                raw.push_str(s);
                raw.push('\n');
            });
        }
    }
    collapse(&raw)
}

/// The corpus, with its words and digit runs at hand for the common claims.
pub(super) struct Index<'a> {
    text: &'a str,
    words: HashSet<&'a str>,
    /// The words lower-cased, for a dotted name's receiver (`Range.intersectsNode` for
    /// `range.intersectsNode`).
    lower_words: HashSet<String>,
    digits: HashSet<&'a str>,
}

impl<'a> Index<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let words: HashSet<&str> = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        let lower_words = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let digits = text.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).collect();
        Index { text, words, lower_words, digits }
    }

    pub(super) fn backs(&self, claim: &Claim) -> bool {
        let text = claim.text.as_str();
        match claim.kind {
            Kind::Number if !text.contains('.') => self.digits.contains(text),
            Kind::Number => occurs(self.text, text, |c| c.is_ascii_digit()),
            Kind::Identifier if is_identifier(text) => self.words.contains(text),
            Kind::Flag => occurs(self.text, text, |c| is_word_char(c) || c == '-'),
            Kind::Url => occurs(self.text, text.trim_end_matches('/'), is_word_char),
            Kind::Path => [text, text.trim_start_matches("./")].iter().any(|t| occurs(self.text, t, is_word_char)),
            // A dotted name also stands when its member is there as written and its receivers
            // in any case.
            Kind::Identifier => {
                occurs(self.text, text, is_word_char)
                    || text
                        .rsplit_once('.')
                        .is_some_and(|(receivers, member)| !text.contains("::") && self.words.contains(member) && receivers.split('.').all(|r| self.lower_words.contains(&r.to_ascii_lowercase())))
            }
            // `cargo test … --lib`: each part quoted must be there.
            Kind::Command => text.split(['…']).flat_map(|t| t.split("...")).map(str::trim).filter(|t| !t.is_empty()).all(|t| occurs(self.text, t, is_word_char)),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `text` without running on into a neighbour: at an end of the
/// needle that is itself `joins`, the character beyond must not be.
fn occurs(text: &str, needle: &str, joins: impl Fn(char) -> bool) -> bool {
    if needle.is_empty() {
        return false;
    }
    let (first, last) = (needle.chars().next().unwrap(), needle.chars().next_back().unwrap());
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        let runs_on = (joins(first) && before.is_some_and(&joins)) || (joins(last) && after.is_some_and(&joins));
        !runs_on
    })
}
