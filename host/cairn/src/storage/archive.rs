//! Bounded reads of one conversation's archives: an overview, pages of archived entries in
//! slices, and ranked keyword search. Every answer is clamped to fixed bounds whatever the
//! request asks for, and says when it was clamped. Only archives the conversation's own event
//! log commits are visible, so an archive id from elsewhere is simply not found.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use super::backend::{ArchiveReader, RecordedLine};
use super::ArchiveId;
use crate::record::CompactionEvent;
use crate::transcript::{Entry, Part};

pub const SUMMARY_MAX_CHARS: usize = 20_000;
pub const PAGE_MAX_ENTRIES: usize = 30;
pub const SLICE_MAX_CHARS: usize = 1_500;
pub const SEARCH_MAX_HITS: usize = 20;
pub const QUERY_MAX_CHARS: usize = 500;
const SNIPPET_CHARS: usize = 240;
const QUERY_MAX_TERMS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("archive unreadable: {0}")]
    Unreadable(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub text: String,
    pub truncated: bool,
}

/// Part of one archived entry's text.
#[derive(Debug, Clone, Serialize)]
pub struct EntrySlice {
    pub index: usize,
    pub entry_id: String,
    pub role: String,
    pub text: String,
    pub char_offset: usize,
    pub total_chars: usize,
    /// Where the next slice of this entry starts, if it goes on.
    pub next_char_offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub archive_id: String,
    pub entries: Vec<EntrySlice>,
    pub total: usize,
    pub next_offset: Option<usize>,
    /// Set when the request asked for more than the bounds allow.
    pub clamped: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub archive_id: String,
    pub index: usize,
    pub entry_id: String,
    pub score: f32,
    pub snippet: String,
    /// Character offset of the first match in the entry's text (page from here).
    pub char_offset: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Hits {
    pub hits: Vec<Hit>,
    pub total: usize,
    pub next_offset: Option<usize>,
    pub clamped: Option<String>,
}

/// A read-only view of one conversation's committed archives. Owned, so a plugin call's
/// store can hold it; it reaches the backend only through the conversation's archive reader.
pub struct ArchiveView {
    reader: Arc<dyn ArchiveReader>,
    archives: Vec<CompactionEvent>,
    /// The originals the archives hold as references to the record, by id.
    recorded: HashMap<String, Entry>,
}

impl ArchiveView {
    /// `archives`: the conversation's committed compactions and handovers, oldest first;
    /// `recorded`: the entries the record's snapshots hold under the ids they replaced.
    pub(super) fn new(reader: Arc<dyn ArchiveReader>, archives: Vec<CompactionEvent>, recorded: HashMap<String, Entry>) -> Self {
        ArchiveView { reader, archives, recorded }
    }

    /// An overview of every archive, newest first, with any summary or checkpoint it holds.
    pub fn summary(&self) -> Summary {
        let mut text = format!("{} archived compaction(s) in this conversation, newest first.\n", self.archives.len());
        for a in self.archives.iter().rev() {
            text.push_str(&format!(
                "\n## {} — by {}, {} → {} tokens, {} entries set aside, {} artifacts\n",
                a.archive_id,
                a.committed_by.as_deref().unwrap_or("?"),
                a.tokens_before,
                a.tokens_after,
                a.replaced.len(),
                a.artifacts.len()
            ));
            for entry in a.replacement.iter().filter(|e| e.origin == crate::transcript::Origin::Summary) {
                text.push_str(&render(entry));
                text.push('\n');
            }
            if let Some(sessions) = &a.sessions {
                text.push_str(&format!("Handover from session {} to {}.\n", sessions.source, sessions.target));
            }
            if let Some(retrospective) = &a.retrospective {
                text.push_str("Retrospective:\n");
                text.push_str(retrospective);
                text.push('\n');
            }
            if let Some(checkpoint) = &a.checkpoint {
                text.push_str("Checkpoint: ");
                text.push_str(checkpoint);
                text.push('\n');
            }
        }
        let truncated = text.chars().count() > SUMMARY_MAX_CHARS;
        if truncated {
            text = text.chars().take(SUMMARY_MAX_CHARS).collect();
        }
        Summary { text, truncated }
    }

    /// Entries `[offset, offset + limit)` of an archive, each cut to one slice; `char_offset`
    /// applies to the first entry, to continue reading a long one.
    pub fn page(&self, archive_id: &str, offset: usize, limit: usize, char_offset: usize) -> Result<Page, ReadError> {
        let id = self.committed(archive_id)?;
        let entries = self.entries(&id)?;
        let mut clamped = None;
        let limit = if limit > PAGE_MAX_ENTRIES {
            clamped = Some(format!("limit {limit} clamped to {PAGE_MAX_ENTRIES} entries"));
            PAGE_MAX_ENTRIES
        } else {
            limit.max(1)
        };
        if offset > entries.len() {
            return Err(ReadError::Invalid(format!("offset {offset} is past the archive's {} entries", entries.len())));
        }
        let end = offset.saturating_add(limit).min(entries.len());
        let slices = entries[offset..end].iter().enumerate().map(|(k, e)| slice(offset + k, e, if k == 0 { char_offset } else { 0 })).collect();
        Ok(Page { archive_id: id.to_string(), entries: slices, total: entries.len(), next_offset: (end < entries.len()).then_some(end), clamped })
    }

    /// Ranked keyword search over every archived entry of the conversation.
    pub fn search(&self, query: &str, offset: usize, limit: usize) -> Result<Hits, ReadError> {
        let mut clamped = Vec::new();
        let query: String = if query.chars().count() > QUERY_MAX_CHARS {
            clamped.push(format!("query cut to {QUERY_MAX_CHARS} characters"));
            query.chars().take(QUERY_MAX_CHARS).collect()
        } else {
            query.to_string()
        };
        let mut terms: Vec<String> = lower(&query).split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_string).collect();
        terms.dedup();
        if terms.len() > QUERY_MAX_TERMS {
            clamped.push(format!("query cut to its first {QUERY_MAX_TERMS} terms"));
            terms.truncate(QUERY_MAX_TERMS);
        }
        if terms.is_empty() {
            return Err(ReadError::Invalid("the query has no words to search for".into()));
        }
        let limit = if limit > SEARCH_MAX_HITS {
            clamped.push(format!("limit {limit} clamped to {SEARCH_MAX_HITS} hits"));
            SEARCH_MAX_HITS
        } else {
            limit.max(1)
        };
        let phrase = lower(query.trim());

        // Gather documents, newest archive first, then score with tf saturation × idf. An
        // entry two archives hold alike (compactions of the same original) is one document,
        // found in the newest: a search never returns the same hit twice.
        let mut docs = Vec::new();
        let mut seen: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
        for archive in self.archives.iter().rev() {
            let id: ArchiveId = archive.archive_id.parse().map_err(|e| ReadError::Unreadable(format!("{e}")))?;
            for (index, entry) in self.entries(&id)?.into_iter().enumerate() {
                let text = render(&entry);
                if !seen.insert((entry.id.clone(), text.clone())) {
                    continue;
                }
                let lowered = lower(&text);
                docs.push((id.to_string(), index, entry.id, text, lowered));
            }
        }
        let df: Vec<usize> = terms.iter().map(|t| docs.iter().filter(|d| d.4.contains(t.as_str())).count()).collect();
        let n = docs.len() as f32;
        let mut hits: Vec<Hit> = docs
            .iter()
            .filter_map(|(archive_id, index, entry_id, text, lowered)| {
                let mut score = 0.0f32;
                for (term, df) in terms.iter().zip(&df) {
                    let count = lowered.matches(term.as_str()).take(10).count();
                    if count > 0 {
                        score += (1.0 + (count as f32).ln()) * (1.0 + n / *df as f32).ln();
                    }
                }
                if score == 0.0 {
                    return None;
                }
                if phrase.len() > terms[0].len() && lowered.contains(&phrase) {
                    score *= 2.0;
                }
                let first = terms.iter().filter_map(|t| lowered.find(t.as_str())).min().unwrap_or(0);
                let char_offset = lowered[..first].chars().count();
                let start = char_offset.saturating_sub(SNIPPET_CHARS / 3);
                let snippet = text.chars().skip(start).take(SNIPPET_CHARS).collect();
                Some(Hit { archive_id: archive_id.clone(), index: *index, entry_id: entry_id.clone(), score, snippet, char_offset })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        let total = hits.len();
        let end = offset.saturating_add(limit).min(total);
        let page = if offset < total { hits.drain(offset..end).collect() } else { Vec::new() };
        Ok(Hits { hits: page, total, next_offset: (end < total).then_some(end), clamped: (!clamped.is_empty()).then(|| clamped.join("; ")) })
    }

    /// The archive id, if this conversation committed it.
    fn committed(&self, archive_id: &str) -> Result<ArchiveId, ReadError> {
        let id: ArchiveId = archive_id.parse().map_err(|e| ReadError::Invalid(format!("{e}")))?;
        if !self.archives.iter().any(|a| a.archive_id == id.as_str()) {
            return Err(ReadError::NotFound(format!("archive {id} is not in this conversation")));
        }
        Ok(id)
    }

    fn entries(&self, id: &ArchiveId) -> Result<Vec<Entry>, ReadError> {
        let unreadable = |e: std::io::Error| ReadError::Unreadable(format!("archive {id}: {e}"));
        let Some(bytes) = self.reader.entries(id).map_err(unreadable)? else { return Ok(Vec::new()) };
        parse_lines(id, &bytes, |entry_id| self.recorded.get(entry_id).cloned())
    }
}

/// An archive's JSON lines as entries, each `{"recorded": id}` line resolved by `recorded`.
pub(super) fn parse_lines(id: &ArchiveId, bytes: &[u8], recorded: impl Fn(&str) -> Option<Entry>) -> Result<Vec<Entry>, ReadError> {
    let unreadable = |n: usize, e: &dyn std::fmt::Display| ReadError::Unreadable(format!("archive {id} line {}: {e}", n + 1));
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .enumerate()
        .map(|(n, line)| {
            if !line.starts_with(br#"{"recorded":"#) {
                return serde_json::from_slice(line).map_err(|e| unreadable(n, &e));
            }
            let line: RecordedLine<String> = serde_json::from_slice(line).map_err(|e| unreadable(n, &e))?;
            recorded(&line.recorded).ok_or_else(|| unreadable(n, &format!("entry {:?} is not in the record's snapshots", line.recorded)))
        })
        .collect()
}

/// One entry as the reader sees it; tool output appears verbatim.
pub fn render(entry: &Entry) -> String {
    let mut out = Vec::new();
    for part in &entry.parts {
        out.push(match part {
            Part::Text { text } => text.clone(),
            Part::Thinking { text } => format!("[thinking] {text}"),
            Part::ToolCall { id, name, args } => format!("[tool call {name} {id}] {args}"),
            Part::ToolResult { call_id, content, is_error, .. } => {
                format!("[tool result {call_id}{}]\n{content}", if *is_error { " (error)" } else { "" })
            }
            Part::Image { reference } => format!("[image {reference}]"),
            Part::Placeholder { text, .. } => text.clone(),
        });
    }
    out.join("\n")
}

fn slice(index: usize, entry: &Entry, char_offset: usize) -> EntrySlice {
    let text = render(entry);
    let total_chars = text.chars().count();
    let start = char_offset.min(total_chars);
    let piece: String = text.chars().skip(start).take(SLICE_MAX_CHARS).collect();
    let end = start + piece.chars().count();
    EntrySlice {
        index,
        entry_id: entry.id.clone(),
        role: format!("{:?}", entry.role).to_lowercase(),
        text: piece,
        char_offset: start,
        total_chars,
        next_char_offset: (end < total_chars).then_some(end),
    }
}

/// Lowercases char by char (one char in, one out) so offsets stay comparable.
fn lower(text: &str) -> String {
    text.chars().map(|c| c.to_lowercase().next().unwrap_or(c)).collect()
}
