//! What each compaction did, read from the record: a conversation's timeline, and one
//! compaction stage by stage. Each stage's parts — elided (with the placeholder that took the
//! content's place and the URI that recovers it), summarized (and into what), dropped, kept
//! verbatim (the verbatim tail listed as such) — carry tokens that add up: a stage's
//! `tokens_before` is the sum of its parts as they were, its `tokens_after` the sum as they
//! are now, and each stage starts where the one before it ended. `cairn show` prints it;
//! `cairn ui` draws it.
//!
//! One vocabulary (the glossary in the book's concepts chapter): a compaction **replaces** a
//! range of entries; of those, each is **elided**, **summarized**, **dropped** or **kept
//! verbatim**; the archive holds what was **set aside** (the originals and the artifacts).

use anyhow::Result;
use serde::Serialize;

use crate::chain::LAST_RESORT;
use std::collections::HashMap;

use crate::record::{CompactionEvent, Event, OutcomeClass, Purpose, StageRecord, StepReport};
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
        /// Entries of the range the compaction replaced.
        replaced: usize,
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
                replaced: c.replaced.len(),
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

/// Entries of one kind in a stage, and their tokens.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Part {
    /// How many entries (`entries` lists each, unless the record could not show them).
    pub count: usize,
    /// Their tokens as the stage found them.
    pub tokens: u64,
    /// Elided only: their tokens with the placeholders in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    pub entries: Vec<EntryView>,
}

impl Part {
    fn push(&mut self, view: EntryView) {
        self.count += 1;
        self.tokens += view.tokens as u64;
        if let Some(after) = view.tokens_after {
            *self.tokens_after.get_or_insert(0) += after as u64;
        }
        self.entries.push(view);
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryView {
    pub id: String,
    pub role: Role,
    pub origin: Origin,
    pub turn: u32,
    pub tokens: u32,
    /// The start of the entry's text as the model saw it before the stage.
    pub preview: String,
    /// Elided only: the start of the entry's text as the model sees it now, placeholders in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    /// Elided only: its tokens now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u32>,
    /// `artifact://` URIs that recover what was set aside.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<String>,
}

fn preview(entry: &Entry) -> String {
    let text = entry.model_text();
    match text.char_indices().nth(PREVIEW_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

impl EntryView {
    fn of(entry: &Entry) -> Self {
        EntryView {
            id: entry.id.clone(),
            role: entry.role,
            origin: entry.origin,
            turn: entry.turn,
            tokens: entry.tokens,
            preview: preview(entry),
            placeholder: None,
            tokens_after: None,
            uris: Vec::new(),
        }
    }

    /// `original`, elided into `now`: the placeholder text and the URIs that recover it.
    fn elided(original: &Entry, now: &Entry) -> Self {
        EntryView { placeholder: Some(placeholder_preview(original, now)), tokens_after: Some(now.tokens), uris: recover_uris(now), ..EntryView::of(original) }
    }
}

/// The start of `now`'s text from where it first differs from `original`'s (the placeholder,
/// not the unchanged words before it).
fn placeholder_preview(original: &Entry, now: &Entry) -> String {
    let (was, is) = (original.model_text(), now.model_text());
    let same = was.char_indices().zip(is.chars()).find(|((_, a), b)| a != b).map_or(was.len().min(is.len()), |((at, _), _)| at);
    let from = is[..same.min(is.len())].rfind(char::is_whitespace).map_or(0, |at| at + 1);
    let from = if is.is_char_boundary(from) { from } else { 0 };
    let rest = &is[from..];
    let shown: String = rest.chars().take(PREVIEW_CHARS).collect();
    let lead = if from > 0 { "…" } else { "" };
    if shown.len() < rest.len() {
        format!("{lead}{shown}…")
    } else {
        format!("{lead}{shown}")
    }
}

/// How a stage ended. Stable words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageStatus {
    /// Its outcome is part of the compaction.
    Committed,
    /// It did not run: the context was already at its target.
    Skipped,
    /// It ran and no step's outcome could be committed; the stages after it start from the
    /// same context.
    NothingCommitted,
}

/// One stage of a compaction: its parts on the context the stages before it left.
#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    pub stage: String,
    pub status: StageStatus,
    pub committed_by: Option<String>,
    /// Why the stage did not run, or what else to know about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `kept.tokens + tail.tokens + elided.tokens + summarized.tokens + dropped.tokens`.
    pub tokens_before: u64,
    /// `kept.tokens + tail.tokens + elided.tokens_after + summaries.tokens`.
    pub tokens_after: u64,
    /// Replaced entries whose content now sits in an artifact, a placeholder in its place.
    pub elided: Part,
    /// Replaced entries a summary or checkpoint stands for now…
    pub summarized: Part,
    /// …and the entries the stage put in their place (a summary, a checkpoint; the last
    /// resort's marker).
    pub summaries: Part,
    /// Replaced entries taken out with nothing standing for them (the host's last resort).
    pub dropped: Part,
    /// Kept verbatim before the verbatim tail: the protected head and what the stage's range
    /// carried unchanged (counted, and listed in `--json` only).
    pub kept: Part,
    /// Kept verbatim: the verbatim tail after the stage's range.
    pub tail: Part,
    /// The steps that ran in this stage, in order.
    pub steps: Vec<StepView>,
}

impl StageView {
    /// Whether the parts add up to the stage's tokens before and after.
    pub fn adds_up(&self) -> bool {
        let kept = self.kept.tokens + self.tail.tokens;
        let before = kept + self.elided.tokens + self.summarized.tokens + self.dropped.tokens;
        let after = kept + self.elided.tokens_after.unwrap_or(0) + self.summaries.tokens;
        before == self.tokens_before && after == self.tokens_after
    }
}

/// A step as `show` tells it: the record's report, with capabilities the policy chose not to
/// grant (and the step ran without) told apart from a refusal.
#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    #[serde(flatten)]
    pub report: StepReport,
    /// Optional capabilities the policy does not grant this step; it ran without them (for
    /// `model`: offline by policy). Not an error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_granted: Vec<String>,
    /// What the step's figures mean, in one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl StepView {
    /// `report` as `show` tells it (`cairn compact` prints its note too).
    pub fn of(report: &StepReport) -> Self {
        let mut report = report.clone();
        let mut not_granted = Vec::new();
        let mut notes = Vec::new();
        if report.outcome == OutcomeClass::Ok && !report.refused.is_empty() {
            not_granted = std::mem::take(&mut report.refused);
            notes.push(
                not_granted
                    .iter()
                    .map(|c| if c == "model" { "offline by policy (`model` not granted)".to_string() } else { format!("ran without `{c}` (not granted by the policy)") })
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        if report.outcome != OutcomeClass::Ok && report.tokens_after.is_some() {
            notes.push("its tokens after were not committed".into());
        }
        StepView { report, not_granted, note: (!notes.is_empty()).then(|| notes.join("; ")) }
    }
}

/// Tokens between the last stage and the total: what the host added after the stages (the
/// root objective, the agent's preserved notes) or took away (the harness's pins let go).
#[derive(Debug, Clone, Serialize)]
pub struct Adjustment {
    pub tokens: i64,
    pub why: String,
}

/// One compaction, stage by stage.
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
    /// Entries of the range the compaction replaced (their originals are set aside in the archive).
    pub replaced: usize,
    /// Every stage, in order: the first starts at `tokens_before`, each next at the one
    /// before's `tokens_after`; the last ends at `tokens_after` less `adjusted`.
    pub stages: Vec<StageView>,
    /// Where the total differs from the last stage's `tokens_after`, by how much and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<Adjustment>,
    /// Every step that ran, in order: the one that committed is `ok`; each other says why not.
    pub steps: Vec<StepView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins_refused: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_window: Option<String>,
    /// The artifacts set aside in the archive (the originals of what was elided).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// Compaction `archive_id` of this conversation, stage by stage.
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
    let steps: Vec<StepView> = event.steps.iter().map(StepView::of).collect();
    let mut view = CompactionView {
        conversation: store.key().to_string(),
        archive_id: event.archive_id.clone(),
        at: event.at,
        purpose: event.purpose,
        status: status(event, &store.undone()),
        committed_by: event.committed_by.clone(),
        tokens_before: event.tokens_before,
        tokens_after: event.tokens_after,
        replaced: event.replaced.len(),
        stages: Vec::new(),
        adjusted: None,
        steps: steps.clone(),
        pinned: event.pinned.clone(),
        pins_refused: event.pins_refused.clone(),
        rejected: event.rejected.clone(),
        over_window: event.over_window.clone(),
        artifacts: event.artifacts.clone(),
    };
    let originals = if event.committed_by.is_some() { store.archived_originals(archive_id)? } else { Vec::new() };
    let records = match (&event.stages[..], &event.committed_by) {
        ([], Some(by)) => vec![legacy_stage(event, by, &originals)],
        ([], None) => Vec::new(),
        (stages, _) => stages.to_vec(),
    };
    let mut versions: HashMap<String, Entry> = originals.iter().map(|e| (e.id.clone(), e.clone())).collect();
    let one_stage = records.len() == 1;
    for record in &records {
        let ids: Vec<String> = record.head.iter().chain(&record.replaced).chain(&record.tail).filter(|id| !versions.contains_key(*id)).cloned().collect();
        let recorded = store.recorded_by_id(&ids);
        for id in &ids {
            if let Some(entry) = recorded.get(id.as_str()) {
                versions.insert(id.clone(), (*entry).clone());
            }
        }
        let stage_steps = steps.iter().filter(|s| one_stage || s.report.stage.as_deref() == Some(record.stage.as_str())).cloned().collect();
        view.stages.push(stage(record, &versions, stage_steps));
        for entry in record.changed.iter().chain(&record.added) {
            versions.insert(entry.id.clone(), entry.clone());
        }
    }
    let last = view.stages.iter().rev().find(|s| s.status == StageStatus::Committed).map(|s| s.tokens_after);
    if let (Some(last), Some(_)) = (last, &event.committed_by) {
        let tokens = event.tokens_after as i64 - last as i64;
        if tokens != 0 {
            let why = if tokens > 0 {
                "the host put in after the stages what must survive: the conversation's first request (root objective) and the agent's preserve notes"
            } else {
                "the host let go of what the harness pinned only for this run"
            };
            view.adjusted = Some(Adjustment { tokens, why: why.into() });
        }
    }
    Ok(view)
}

/// A record written before stages were recorded: the compaction as one stage, its head and
/// verbatim tail counted by what the totals leave (not listed).
fn legacy_stage(event: &CompactionEvent, by: &str, originals: &[Entry]) -> StageRecord {
    let mut record =
        StageRecord::committed(event.steps.iter().find_map(|s| s.stage.as_deref()).unwrap_or("compact"), by, originals, 0, originals.len().saturating_sub(1), &event.replacement, event.tokens_after);
    record.tokens_before = event.tokens_before;
    if originals.is_empty() {
        record.replaced.clear();
    }
    record
}

fn stage(record: &StageRecord, versions: &HashMap<String, Entry>, steps: Vec<StepView>) -> StageView {
    let mut view = StageView {
        stage: record.stage.clone(),
        status: match (&record.committed_by, &record.skipped) {
            (Some(_), _) => StageStatus::Committed,
            (None, Some(_)) => StageStatus::Skipped,
            (None, None) => StageStatus::NothingCommitted,
        },
        committed_by: record.committed_by.clone(),
        note: record.skipped.clone(),
        tokens_before: record.tokens_before,
        tokens_after: record.tokens_after,
        elided: Part::default(),
        summarized: Part::default(),
        summaries: Part::default(),
        dropped: Part::default(),
        kept: Part::default(),
        tail: Part::default(),
        steps,
    };
    if record.committed_by.is_none() {
        // Nothing changed: the whole context is kept verbatim.
        view.kept.tokens = record.tokens_before;
        return view;
    }
    let changed: HashMap<&str, &Entry> = record.changed.iter().map(|e| (e.id.as_str(), e)).collect();
    let dropping = record.committed_by.as_deref().is_some_and(|by| by.starts_with(LAST_RESORT)) || record.added.is_empty();
    for entry in &record.added {
        view.summaries.push(EntryView::of(entry));
    }
    let mut unlisted = record.tokens_before as i64;
    for id in &record.head {
        if let Some(entry) = versions.get(id) {
            view.kept.push(EntryView::of(entry));
            unlisted -= entry.tokens as i64;
        }
    }
    let gone: std::collections::HashSet<&str> = record.forgotten.iter().map(String::as_str).collect();
    for id in &record.replaced {
        let Some(entry) = versions.get(id) else { continue };
        unlisted -= entry.tokens as i64;
        if let Some(now) = changed.get(id.as_str()) {
            view.elided.push(EntryView::elided(entry, now));
        } else if !gone.contains(id.as_str()) {
            view.kept.push(EntryView::of(entry));
        } else if dropping {
            view.dropped.push(EntryView::of(entry));
        } else {
            view.summarized.push(EntryView::of(entry));
        }
    }
    for id in &record.tail {
        if let Some(entry) = versions.get(id) {
            view.tail.push(EntryView::of(entry));
            unlisted -= entry.tokens as i64;
        }
    }
    if unlisted != 0 {
        // Entries the record could not show one by one (a record from before stages were
        // recorded): counted with what was kept verbatim.
        view.kept.tokens = (view.kept.tokens as i64 + unlisted).max(0) as u64;
        view.note = Some(format!("{unlisted} tokens kept verbatim outside the replaced range are counted, not listed"));
    }
    view
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
