//! The report of one compaction or handover: what the record says, plus the new context.

use serde::Serialize;

use super::{CompactionEvent, Purpose, Sessions, StepReport};

/// How the host's last-resort step names itself in the record (`last-resort@<version>`).
const LAST_RESORT_PREFIX: &str = "last-resort@";
use crate::transcript::Transcript;

/// What one compaction or handover did.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionReport {
    pub conversation: String,
    pub purpose: Purpose,
    /// Whether an outcome was committed: the context changed and an archive was written.
    pub committed: bool,
    /// The attempt's id, in the record either way (notices are keyed by it); an archive by
    /// that id exists only when `committed`.
    #[serde(skip)]
    pub archive_id: String,
    /// The archive this compaction wrote: `archive_id` when committed, else none.
    #[serde(rename = "archive_id")]
    pub archive: Option<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub steps: Vec<StepReport>,
    /// The plugin whose outcome was committed, if any.
    pub committed_by: Option<String>,
    /// Set when only the host's last resort could commit: the oldest history was dropped
    /// (recoverable from the archive) rather than condensed.
    pub degraded: bool,
    /// How many entries the committed outcome replaced.
    pub replaced: usize,
    /// Ids the working context no longer holds (they stay in the durable record).
    pub forgotten: Vec<String>,
    /// `artifact://` URIs written for this compaction.
    pub artifacts: Vec<String>,
    /// The structured checkpoint, JSON (written out as an object: scripts decode once).
    #[serde(serialize_with = "checkpoint_as_json")]
    pub checkpoint: Option<String>,
    /// Handover: the text that starts the next session, and the sessions involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
    /// The new working context.
    #[serde(skip)]
    pub transcript: Transcript,
    /// Why the commit policy refused the outcome, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    /// Why nothing was committed, in one line; absent when something was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_committed: Option<String>,
    /// What the budget left out of the checkpoint the context shows, items per section (the
    /// record's checkpoint keeps them).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub left_out: std::collections::BTreeMap<String, u64>,
    /// Why the context is still above the usable window or budget (then `degraded` is set too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_window: Option<String>,
    /// Entries pinned for this run, carried verbatim.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned: Vec<String>,
    /// Pins refused for the budget, each with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pins_refused: Vec<String>,
    /// A dry run: what would have been committed; nothing was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// A dry run's prompt-cache rewrite, per priced model (`crate::pricing`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cache_rewrite: Vec<crate::pricing::CacheRewrite>,
}

impl CompactionReport {
    /// The report of an attempt already in the record (after a crash, for bookkeeping).
    pub fn from_event(conversation: &str, event: &CompactionEvent) -> Self {
        let committed = event.committed_by.is_some();
        CompactionReport {
            conversation: conversation.to_string(),
            purpose: event.purpose,
            committed,
            archive_id: event.archive_id.clone(),
            archive: committed.then(|| event.archive_id.clone()),
            tokens_before: event.tokens_before,
            tokens_after: event.tokens_after,
            steps: event.steps.clone(),
            committed_by: event.committed_by.clone(),
            degraded: event.over_window.is_some() || event.committed_by.as_deref().is_some_and(|by| by.split(" + ").any(|p| p.starts_with(LAST_RESORT_PREFIX))),
            replaced: event.replaced.len(),
            forgotten: event.forgotten.clone(),
            artifacts: event.artifacts.clone(),
            checkpoint: event.checkpoint.clone(),
            seed: event.seed.clone(),
            sessions: event.sessions.clone(),
            transcript: Transcript::default(),
            rejected: event.rejected.clone(),
            not_committed: (!committed).then(|| not_committed(event)),
            left_out: left_out(event.checkpoint.as_deref()),
            over_window: event.over_window.clone(),
            pinned: event.pinned.clone(),
            pins_refused: event.pins_refused.clone(),
            dry_run: false,
            cache_rewrite: Vec::new(),
        }
    }
}

/// The checkpoint's `left_out` counts, if it has any.
fn left_out(checkpoint: Option<&str>) -> std::collections::BTreeMap<String, u64> {
    let value = checkpoint.and_then(|json| serde_json::from_str::<serde_json::Value>(json).ok());
    let counts = value.as_ref().and_then(|v| v.get("left_out")).and_then(|l| l.as_object());
    counts.into_iter().flatten().filter_map(|(section, n)| Some((section.clone(), n.as_u64()?))).collect()
}

/// Why an attempt committed nothing: the commit policy's refusal, else each step's outcome.
fn not_committed(event: &CompactionEvent) -> String {
    if let Some(why) = &event.rejected {
        return format!("the commit policy refused it: {why}");
    }
    let steps: Vec<String> = event
        .steps
        .iter()
        .map(|s| match &s.message {
            Some(m) => format!("{} {}: {m}", s.plugin, s.outcome),
            None => format!("{} {}", s.plugin, s.outcome),
        })
        .collect();
    if steps.is_empty() {
        "no step ran".into()
    } else {
        format!("no step's outcome could be committed ({})", steps.join("; "))
    }
}

/// A checkpoint as the JSON object it is (its text, should it not parse).
fn checkpoint_as_json<S: serde::Serializer>(checkpoint: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    let value = checkpoint.as_deref().map(|text| serde_json::from_str::<serde_json::Value>(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string())));
    value.serialize(serializer)
}
