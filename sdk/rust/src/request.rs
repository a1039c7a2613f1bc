//! A strategy's request and answer as plugin code sees them: the request with every entry
//! ([`CompactRequest`]), the answer with whole replacement entries ([`Outcome`]). On the wire
//! (contract 0.2.0) the conversation is lent instead and unchanged entries go back as indexes;
//! [`crate::lent`] converts.

use crate::types::{Entry, EntryRange, Replacement, Request, RequestKind, WireOutcome};

/// What a strategy is asked, with the conversation's entries.
#[derive(Debug, Clone)]
pub struct CompactRequest {
    /// `compact` keeps the verbatim tail; `handover` prepares a fresh session (no tail).
    pub purpose: RequestKind,
    /// The archive this attempt writes into: artifact URIs and handover seeds name it.
    pub archive_id: String,
    pub entries: Vec<Entry>,
    /// Entries [0, protected_head) are the protected head (system prompt, pinned prefix).
    pub protected_head: u32,
    /// Entries [tail_start, len) are the verbatim recent tail, already at a safe boundary.
    pub tail_start: u32,
    /// Tokens the host would like the working context to shrink to.
    pub token_target: u64,
    /// Agent-provided instructions: what must survive, how to resume.
    pub preserve: Option<String>,
    pub resume: Option<String>,
    /// The latest checkpoint JSON committed for this conversation, if any.
    pub previous_checkpoint: Option<String>,
    /// The id of the last entry that checkpoint was made from: what follows is new to it.
    pub previous_checkpoint_through: Option<String>,
    /// The plugin's own configuration from the policy, as JSON text.
    pub config: String,
}

impl CompactRequest {
    pub fn new(request: Request, entries: Vec<Entry>) -> Self {
        let Request { purpose, archive_id, protected_head, tail_start, token_target, preserve, resume, previous_checkpoint, previous_checkpoint_through, config } = request;
        CompactRequest { purpose, archive_id, entries, protected_head, tail_start, token_target, preserve, resume, previous_checkpoint, previous_checkpoint_through, config }
    }
}

/// What replaces the range: whole entries, and what else the strategy hands over.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub replaced: EntryRange,
    pub replacement: Vec<Entry>,
    /// Typed continuation state, JSON text valid against `checkpoint.schema.json`.
    pub checkpoint: Option<String>,
    /// For handover: the text that starts the next session.
    pub seed: Option<String>,
    /// For handover: a look back at the session, kept in the archive.
    pub retrospective: Option<String>,
}

impl Outcome {
    /// An outcome replacing `replaced` by `replacement`, with no checkpoint, seed or retrospective.
    pub fn new(replaced: EntryRange, replacement: Vec<Entry>) -> Self {
        Outcome { replaced, replacement, checkpoint: None, seed: None, retrospective: None }
    }

    /// The answer on the wire: each entry `original` knows unchanged goes back as its index.
    pub fn into_wire(self, original: impl Fn(&Entry) -> Option<u32>) -> WireOutcome {
        let replacement = self.replacement.into_iter().map(|entry| original(&entry).map(Replacement::Original).unwrap_or(Replacement::Entry(entry))).collect();
        WireOutcome { replaced: self.replaced, replacement, checkpoint: self.checkpoint, seed: self.seed, retrospective: self.retrospective }
    }
}
