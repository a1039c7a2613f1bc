//! Undo: the operator takes committed compactions back. The context before a compaction is
//! rebuilt from the record and its archive (the originals exactly as they were recorded), with
//! whatever was appended since kept after them. Undo is itself an event: the record stays
//! append-only, and the lifecycle sees it (a new undo starts the cooldown again).

use anyhow::Result;
use serde::Serialize;

use crate::error_kinds::{NotFound, Refused};
use crate::record::{Purpose, UndoEvent};
use crate::storage::ConversationStore;
use crate::tokenizer::Tokenizer;
use crate::transcript::Transcript;

/// What an undo did.
#[derive(Debug, Clone, Serialize)]
pub struct Undone {
    pub conversation: String,
    /// Archive ids of the compactions taken back, latest first.
    pub undone: Vec<String>,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// The restored context.
    #[serde(skip)]
    pub transcript: Transcript,
}

/// Takes back compaction `archive` (by default the latest standing one) and every standing
/// compaction after it, in `current` (the caller's context; `None`: the context the record
/// knows). A handover cannot be undone: its session has moved on (read the old one through
/// `session_history`).
pub fn undo(store: &mut ConversationStore, tokenizer: &Tokenizer, current: Option<&Transcript>, archive: Option<&str>) -> Result<Undone> {
    let key = store.key().clone();
    let standing = store.standing();
    let from = match archive {
        None => standing.len().checked_sub(1).ok_or_else(|| Refused(format!("conversation {key} has no compaction to undo")))?,
        Some(id) => match standing.iter().position(|c| c.archive_id == id) {
            Some(at) => at,
            None if store.undone().contains(id) => return Err(Refused(format!("compaction {} of conversation {key} was undone already", crate::echo::input(id))).into()),
            None => return Err(NotFound(format!("no committed compaction with archive {} in conversation {key} (`cairn show --conversation {key}` lists them)", crate::echo::input(id))).into()),
        },
    };
    let targets: Vec<_> = standing[from..].iter().rev().map(|c| (*c).clone()).collect();
    if let Some(handover) = targets.iter().find(|c| c.purpose == Purpose::Handover) {
        return Err(Refused(format!("{} is a handover: the session started over from its seed and cannot be rolled back; read the old session through session_history", handover.archive_id)).into());
    }
    if let Some(current) = current {
        store.record_snapshot("undo", &current.entries)?;
    }
    let mut before = Transcript::new(match current {
        Some(current) => current.entries.clone(),
        None => store.context()?,
    });
    tokenizer.count_transcript(&mut before);
    let tokens_before = before.total_tokens();
    let mut context = before.entries;
    for target in &targets {
        let originals = store.archived_originals(&target.archive_id)?;
        context = crate::storage::restore(&context, target, originals)?;
    }
    let mut transcript = Transcript::new(context);
    tokenizer.count_transcript(&mut transcript);
    let event = UndoEvent { at: crate::record::now_millis(), undone: targets.iter().map(|c| c.archive_id.clone()).collect(), tokens_before, tokens_after: transcript.total_tokens() };
    store.record_undo(event.clone())?;
    tracing::info!(conversation = %key, undone = ?event.undone, "undo");
    Ok(Undone { conversation: key.to_string(), undone: event.undone, tokens_before, tokens_after: event.tokens_after, transcript })
}
