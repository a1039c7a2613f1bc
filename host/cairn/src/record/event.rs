//! What the durable record holds: the entries it has seen, every compaction attempt, and the
//! notices for the harness.

use serde::{Deserialize, Serialize};

use super::{Purpose, StepReport};
use crate::transcript::Entry;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Event {
    /// Entries of the input the record had not seen before; or, with `replaces_context`, the
    /// whole input, which replaces the record's context: a harness sent back the record's
    /// context in a format that names entries by content (OpenAI chat), so the model reads
    /// it the same under other ids. Absent in records written before the field.
    Snapshot {
        at: u64,
        source: String,
        entries: Vec<Entry>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        replaces_context: bool,
    },
    /// One compaction attempt, committed or not.
    Compaction(Box<CompactionEvent>),
    /// Committed compactions taken back: their originals restored in place of their outcomes.
    Undo(UndoEvent),
    /// Entries the operator pinned or unpinned by id.
    Pin { at: u64, ids: Vec<String>, pinned: bool },
    /// A kind written by a newer version: kept in the log, skipped when reading.
    #[serde(other)]
    Unknown,
}

/// One compaction or handover attempt.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompactionEvent {
    pub at: u64,
    #[serde(default = "compact")]
    pub purpose: Purpose,
    pub archive_id: String,
    /// The plugin whose outcome was committed; `None` when every step failed.
    pub committed_by: Option<String>,
    /// Ids of the replaced range; their originals are in the archive.
    #[serde(default)]
    pub replaced: Vec<String>,
    /// Ids of entries the working context no longer holds.
    pub forgotten: Vec<String>,
    /// The entries that took the replaced range's place.
    pub replacement: Vec<Entry>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub steps: Vec<StepReport>,
    pub artifacts: Vec<String>,
    pub checkpoint: Option<String>,
    /// The id of the last entry of the conversation the checkpoint was made from: what comes
    /// after it is new to the checkpoint (a later one can start from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_through: Option<String>,
    /// Handover only: the seed of the next session, the retrospective, and which session
    /// was handed over to which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrospective: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// Why the commit policy refused a checked outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// The files the conversation touched, as they were (when the harness named its workspace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::workspace::FileStamp>,
    /// Why the context is still above the usable window after this attempt (the harness named
    /// the window and nothing could make it fit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_window: Option<String>,
    /// Entries pinned for this attempt (by id, marker or policy rule), carried verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    /// Pins refused because they would not fit the pins budget, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pins_refused: Vec<String>,
    /// What each stage of the chain did, in order, on the context the stages before it left
    /// (absent in records written before the field: `cairn show` then reads the compaction as
    /// one stage).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageRecord>,
}

/// What one stage of a compaction did, on the context the stages before it left: the range it
/// replaced, the entries it changed in place (their placeholders) and the ones it added (its
/// summaries, markers). Its tokens chain: a stage's `tokens_before` is the `tokens_after` of the
/// stage before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    pub stage: String,
    /// The plugin whose outcome the stage committed; `None` when it did not run or nothing of
    /// it could be committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_by: Option<String>,
    /// Why the stage did not run (the context was already at its target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Ids of the entries before the range (the protected head, what the stage left alone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head: Vec<String>,
    /// Ids of the stage's replaced range, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced: Vec<String>,
    /// Ids of the range's entries the stage's outcome does not carry on (summarized or dropped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forgotten: Vec<String>,
    /// Replaced entries carried on with their content changed, as the stage left them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<Entry>,
    /// Entries the stage put in its range that were not there before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<Entry>,
    /// Ids of the entries after the range (the verbatim tail), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tail: Vec<String>,
}

impl StageRecord {
    /// A stage that did not run, or ran and committed nothing, at `tokens`.
    pub fn idle(stage: &str, tokens: u64, skipped: Option<String>) -> Self {
        StageRecord {
            stage: stage.to_string(),
            committed_by: None,
            skipped,
            tokens_before: tokens,
            tokens_after: tokens,
            head: Vec::new(),
            replaced: Vec::new(),
            forgotten: Vec::new(),
            changed: Vec::new(),
            added: Vec::new(),
            tail: Vec::new(),
        }
    }

    /// What a stage committed: `plugin`'s outcome on `context`, replacing `context[first..=last]`
    /// with `replacement`.
    pub fn committed(stage: &str, plugin: &str, context: &[Entry], first: usize, last: usize, replacement: &[Entry], tokens_after: u64) -> Self {
        let range = &context[first..=last];
        let before: std::collections::HashMap<&str, &Entry> = range.iter().map(|e| (e.id.as_str(), e)).collect();
        let (mut changed, mut added) = (Vec::new(), Vec::new());
        let carried: std::collections::HashSet<&str> = replacement.iter().map(|e| e.id.as_str()).collect();
        for entry in replacement {
            match before.get(entry.id.as_str()) {
                Some(original) if original.parts == entry.parts => {}
                Some(_) => changed.push(entry.clone()),
                None => added.push(entry.clone()),
            }
        }
        StageRecord {
            stage: stage.to_string(),
            committed_by: Some(plugin.to_string()),
            skipped: None,
            tokens_before: context.iter().map(|e| e.tokens as u64).sum(),
            tokens_after,
            head: context[..first].iter().map(|e| e.id.clone()).collect(),
            replaced: range.iter().map(|e| e.id.clone()).collect(),
            forgotten: range.iter().filter(|e| !carried.contains(e.id.as_str())).map(|e| e.id.clone()).collect(),
            changed,
            added,
            tail: context[last + 1..].iter().map(|e| e.id.clone()).collect(),
        }
    }
}

/// Committed compactions taken back, latest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoEvent {
    pub at: u64,
    /// The archive ids of the compactions undone, latest first.
    pub undone: Vec<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    pub source: String,
    pub target: String,
}

impl CompactionEvent {
    /// `entries` with this event's outcome applied: the replaced range swapped for the
    /// replacement (unchanged if the range is not found there).
    pub fn applied_to(&self, entries: &[Entry]) -> Vec<Entry> {
        let find = |id: Option<&String>| id.and_then(|id| entries.iter().position(|e| &e.id == id));
        match (find(self.replaced.first()), find(self.replaced.last())) {
            (Some(first), Some(last)) if first <= last && self.committed_by.is_some() => entries[..first].iter().chain(&self.replacement).chain(&entries[last + 1..]).cloned().collect(),
            _ => entries.to_vec(),
        }
    }

    /// An attempt that committed nothing yet; the caller fills in what was committed.
    pub fn new(purpose: Purpose, archive_id: &str, tokens_before: u64, steps: Vec<StepReport>) -> Self {
        CompactionEvent {
            at: now_millis(),
            purpose,
            archive_id: archive_id.to_string(),
            committed_by: None,
            replaced: Vec::new(),
            forgotten: Vec::new(),
            replacement: Vec::new(),
            tokens_before,
            tokens_after: tokens_before,
            steps,
            artifacts: Vec::new(),
            checkpoint: None,
            checkpoint_through: None,
            seed: None,
            retrospective: None,
            sessions: None,
            rejected: None,
            files: Vec::new(),
            over_window: None,
            pinned: Vec::new(),
            pins_refused: Vec::new(),
            stages: Vec::new(),
        }
    }
}

fn compact() -> Purpose {
    Purpose::Compact
}

/// A message for the harness after a maintenance; its id is stable across retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    pub id: String,
    /// `compacted`, `handed-over`, `failed`, `paused`, `resumed`, `degraded` or `low-headroom`.
    pub kind: String,
    pub text: String,
    pub at: u64,
}

impl Notice {
    /// A notice stamped now.
    pub fn new(id: String, kind: &str, text: String) -> Self {
        Notice { id, kind: kind.to_string(), text, at: now_millis() }
    }
}

pub fn now_millis() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
