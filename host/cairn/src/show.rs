//! What each compaction did, read from the record: a conversation's timeline, and one
//! compaction's parts — kept verbatim, summarized (and into what), elided (with the URIs that
//! recover them), dropped — with tokens per part and each step's outcome. `cairn show` prints
//! it; `cairn ui` draws it.

use anyhow::Result;
use serde::Serialize;

use crate::chain::LAST_RESORT;
use crate::record::{CompactionEvent, Event, Purpose, StepReport};
use crate::storage::ConversationStore;
use crate::transcript::{Entry, Origin, Role};

/// How much of an entry's text a view shows.
const PREVIEW_CHARS: usize = 240;

/// One line of a conversation's history of maintenance.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Moment {
    Compaction {
        at: u64,
        archive_id: String,
        purpose: Purpose,
        status: Status,
        committed_by: Option<String>,
        tokens_before: u64,
        tokens_after: u64,
        /// Entries taken out of the working context.
        forgotten: usize,
    },
    Undo {
        at: u64,
        undone: Vec<String>,
        tokens_before: u64,
        tokens_after: u64,
    },
    Pin {
        at: u64,
        ids: Vec<String>,
        pinned: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Committed,
    /// No step's outcome could be committed; the context stayed as it was.
    Failed,
    /// Committed, then taken back by an undo.
    Undone,
}

/// A conversation's compactions, undos and pins, oldest first.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub conversation: String,
    pub moments: Vec<Moment>,
    /// Ids pinned by the operator now.
    pub pinned: Vec<String>,
}

pub fn timeline(store: &ConversationStore) -> Timeline {
    let undone = store.undone();
    let moments = store
        .events()
        .iter()
        .filter_map(|event| match event {
            Event::Compaction(c) => Some(Moment::Compaction {
                at: c.at,
                archive_id: c.archive_id.clone(),
                purpose: c.purpose,
                status: status(c, &undone),
                committed_by: c.committed_by.clone(),
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
                forgotten: c.forgotten.len(),
            }),
            Event::Undo(u) => Some(Moment::Undo { at: u.at, undone: u.undone.clone(), tokens_before: u.tokens_before, tokens_after: u.tokens_after }),
            Event::Pin { at, ids, pinned } => Some(Moment::Pin { at: *at, ids: ids.clone(), pinned: *pinned }),
            _ => None,
        })
        .collect();
    Timeline { conversation: store.key().to_string(), moments, pinned: store.pinned_ids().into_iter().collect() }
}

fn status(c: &CompactionEvent, undone: &std::collections::HashSet<&str>) -> Status {
    match (&c.committed_by, undone.contains(c.archive_id.as_str())) {
        (None, _) => Status::Failed,
        (Some(_), true) => Status::Undone,
        (Some(_), false) => Status::Committed,
    }
}

/// Entries of one kind in a compaction, and their tokens.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Part {
    pub tokens: u64,
    pub entries: Vec<EntryView>,
}

impl Part {
    fn push(&mut self, entry: &Entry, uris: Vec<String>) {
        self.tokens += entry.tokens as u64;
        self.entries.push(EntryView::of(entry, uris));
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    pub id: String,
    pub role: Role,
    pub origin: Origin,
    pub turn: u32,
    pub tokens: u32,
    /// The start of the entry's text as the model sees it.
    pub preview: String,
    /// `artifact://` URIs that recover what was set aside.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<String>,
}

impl EntryView {
    fn of(entry: &Entry, uris: Vec<String>) -> Self {
        let text = entry.model_text();
        let preview = match text.char_indices().nth(PREVIEW_CHARS) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        };
        EntryView { id: entry.id.clone(), role: entry.role, origin: entry.origin, turn: entry.turn, tokens: entry.tokens, preview, uris }
    }
}

/// One compaction, part by part.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionView {
    pub conversation: String,
    pub archive_id: String,
    pub at: u64,
    pub purpose: Purpose,
    pub status: Status,
    pub committed_by: Option<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Every step that ran, in order: the one that committed is `ok`; each other says why not.
    pub steps: Vec<StepReport>,
    /// Replaced entries that came out unchanged (pinned ones, instructions, what a strategy kept).
    pub kept: Part,
    /// Replaced entries a summary or checkpoint stands for now…
    pub summarized: Part,
    /// …and the entries that took their place.
    pub summaries: Part,
    /// Entries whose content was set aside, with the URIs that recover it.
    pub elided: Part,
    /// Entries taken out with nothing standing for them (the host's last resort).
    pub dropped: Part,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins_refused: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_window: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// Compaction `archive_id` of this conversation, part by part.
pub fn compaction(store: &ConversationStore, archive_id: &str) -> Result<CompactionView> {
    let found = store.events().iter().find_map(|e| match e {
        Event::Compaction(c) if c.archive_id == archive_id => Some(c.as_ref()),
        _ => None,
    });
    let Some(event) = found else {
        return Err(
            crate::error_kinds::NotFound(format!("no compaction {} in conversation {} (`cairn show --conversation {}` lists them)", crate::echo::input(archive_id), store.key(), store.key())).into()
        );
    };
    let mut view = CompactionView {
        conversation: store.key().to_string(),
        archive_id: event.archive_id.clone(),
        at: event.at,
        purpose: event.purpose,
        status: status(event, &store.undone()),
        committed_by: event.committed_by.clone(),
        tokens_before: event.tokens_before,
        tokens_after: event.tokens_after,
        steps: event.steps.clone(),
        kept: Part::default(),
        summarized: Part::default(),
        summaries: Part::default(),
        elided: Part::default(),
        dropped: Part::default(),
        pinned: event.pinned.clone(),
        pins_refused: event.pins_refused.clone(),
        rejected: event.rejected.clone(),
        over_window: event.over_window.clone(),
        artifacts: event.artifacts.clone(),
    };
    if event.committed_by.is_none() {
        return Ok(view);
    }
    let originals = store.archived_originals(archive_id)?;
    let original_ids: std::collections::HashSet<&str> = originals.iter().map(|e| e.id.as_str()).collect();
    for entry in event.replacement.iter().filter(|e| !original_ids.contains(e.id.as_str())) {
        view.summaries.push(entry, Vec::new());
    }
    // What the host's last resort took out is dropped (its marker only says so); other
    // strategies' new entries stand for what they replaced.
    let dropping = event.committed_by.as_deref().is_some_and(|by| by.split(" + ").any(|p| p.starts_with(LAST_RESORT)));
    for original in &originals {
        match event.replacement.iter().find(|r| r.id == original.id) {
            Some(carried) if carried.parts == original.parts => view.kept.push(original, Vec::new()),
            Some(changed) => view.elided.push(original, recover_uris(changed)),
            None if dropping || view.summaries.entries.is_empty() => view.dropped.push(original, Vec::new()),
            None => view.summarized.push(original, Vec::new()),
        }
    }
    Ok(view)
}

/// The URIs that recover what a changed entry set aside: its elided results and placeholders,
/// and the `artifact://` URIs its text names (a fenced block elided inside a message).
fn recover_uris(entry: &Entry) -> Vec<String> {
    let mut uris: Vec<String> = entry.elided_uris().map(str::to_string).collect();
    let text = entry.model_text();
    for (at, _) in text.match_indices("artifact://") {
        let uri: String = text[at..].chars().take_while(|c| !c.is_whitespace() && !matches!(c, ']' | ')' | '"' | '\'' | ',')).collect();
        if !uris.contains(&uri) {
            uris.push(uri);
        }
    }
    uris
}
