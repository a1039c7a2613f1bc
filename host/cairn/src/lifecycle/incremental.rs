//! Incremental boundaries: the harness sends only the entries appended since the context the
//! server acknowledged last, naming that context's last entry (`since`); the server rebuilds
//! the whole working context from the durable record. Whatever it cannot rebuild exactly (a
//! rewind, a fork, an edit, a compaction the harness did on its own, a conversation it does
//! not know) is refused as [`Diverged`]: nothing is merged or recorded, and the harness sends
//! its whole transcript once.

use std::collections::HashSet;

use anyhow::Result;

use super::ConversationState;
use crate::record::Event;
use crate::storage::ConversationStore;
use crate::tokenizer::Tokenizer;
use crate::transcript::{Entry, Origin, Transcript};

/// An incremental boundary the server cannot follow. Its message starts with the stable word
/// `diverged`; the harness answers it by sending its whole transcript once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("diverged: {reason}; send the whole transcript once (without `since`)")]
pub struct Diverged {
    pub reason: String,
}

fn diverged<T>(reason: impl Into<String>) -> Result<T> {
    Err(Diverged { reason: reason.into() }.into())
}

/// The whole working context: what the server acknowledged last (rebuilt from the record) with
/// `appended` after it. Only the appended entries are counted; the record's carry their counts.
pub(super) fn rebuild(store: &ConversationStore, state: &ConversationState, since: Option<&str>, appended: Transcript, tokenizer: &Tokenizer) -> Result<Transcript> {
    let mut base = match since {
        None => {
            if store.events().iter().any(|e| matches!(e, Event::Snapshot { .. })) {
                return diverged(format!("conversation {} is already recorded, and no `since` names where the new entries start", store.key()));
            }
            Vec::new()
        }
        Some(since) => {
            if state.acknowledged.is_none() {
                return diverged(format!("conversation {} has no acknowledged context to append to", store.key()));
            }
            let base = if state.held.is_empty() { store.context()? } else { store.recorded_entries(&state.held)? };
            match base.last() {
                Some(last) if last.id == since => {}
                Some(last) => return diverged(format!("`since` names entry {since}, but the last entry acknowledged is {}", last.id)),
                None => return diverged(format!("the recorded context no longer ends with entry {since}")),
            }
            base
        }
    };
    let mut seen: HashSet<&str> = HashSet::new();
    for entry in &appended.entries {
        if store.knows_entry(&entry.id) || !seen.insert(&entry.id) {
            return diverged(format!("entry {} is sent again as new (an edited or repeated entry)", entry.id));
        }
        if entry.origin == Origin::Summary {
            return diverged(format!("entry {} is a summary: the harness compacted on its own", entry.id));
        }
    }
    if !seen.is_empty() && base.iter().any(|e| seen.contains(e.id.as_str())) {
        return diverged("an appended entry is already in the context");
    }
    // Entries recorded before counts were kept are counted now (once).
    for entry in base.iter_mut().filter(|e| e.tokens == 0) {
        tokenizer.count_entry(entry);
    }
    let Transcript { entries, unrecognized } = appended;
    let start = base.len();
    base.extend(entries);
    for entry in &mut base[start..] {
        tokenizer.count_entry(entry);
    }
    let mut transcript = Transcript { entries: base, unrecognized };
    transcript.number_turns();
    Ok(transcript)
}

/// Keeps in `state` what the harness holds after a boundary (`follow`'s answer) and returns
/// the id the harness is told to name as its next `since`. When the harness holds the
/// record's own context, as at nearly every boundary, the state keeps only that it does (the
/// next `since` is checked against the record's tail): a boundary that only appends to the
/// record then leaves the state as it was, and costs one synced write, not three.
pub(super) fn acknowledge(state: &mut ConversationState, (last, held): (Option<String>, Vec<String>)) -> Option<String> {
    let follows_record = |acknowledged: &Option<String>, held: &[String]| acknowledged.is_some() && held.is_empty();
    if !(follows_record(&last, &held) && follows_record(&state.acknowledged, &state.held)) {
        (state.acknowledged, state.held) = (last.clone(), held);
    }
    last
}

/// What the state says the harness holds after a boundary that handed it `entries`: the
/// last entry's id, and the ids in full unless the record's own context is exactly these
/// entries. `(None, [])` when the record cannot rebuild them (an entry rewritten under a
/// recorded id): the next incremental call diverges.
pub(super) fn follow(store: &ConversationStore, entries: &[Entry]) -> Result<(Option<String>, Vec<String>)> {
    let Some(last) = entries.last() else { return Ok((None, Vec::new())) };
    let same = |recorded: &[Entry]| recorded.len() == entries.len() && recorded.iter().zip(entries).all(|(a, b)| a.id == b.id && a.parts == b.parts);
    if store.with_context(same).unwrap_or(false) {
        return Ok((Some(last.id.clone()), Vec::new()));
    }
    let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
    match store.recorded_entries(&ids) {
        Ok(recorded) if same(&recorded) => Ok((Some(last.id.clone()), ids)),
        _ => Ok((None, Vec::new())),
    }
}
