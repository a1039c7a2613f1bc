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
    pub archive_id: String,
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
}

impl CompactionReport {
    /// The report of an attempt already in the record (after a crash, for bookkeeping).
    pub fn from_event(conversation: &str, event: &CompactionEvent) -> Self {
        CompactionReport {
            conversation: conversation.to_string(),
            purpose: event.purpose,
            archive_id: event.archive_id.clone(),
            tokens_before: event.tokens_before,
            tokens_after: event.tokens_after,
            steps: event.steps.clone(),
            committed_by: event.committed_by.clone(),
            degraded: event.committed_by.as_deref().is_some_and(|by| by.split(" + ").any(|p| p.starts_with(LAST_RESORT_PREFIX))),
            replaced: event.replaced.len(),
            forgotten: event.forgotten.clone(),
            artifacts: event.artifacts.clone(),
            checkpoint: event.checkpoint.clone(),
            seed: event.seed.clone(),
            sessions: event.sessions.clone(),
            transcript: Transcript::default(),
            rejected: event.rejected.clone(),
        }
    }
}
