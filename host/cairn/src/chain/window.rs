//! The part of the context a strategy may touch: after the protected head, before the
//! verbatim tail, both computed by the host.

use crate::transcript::{Entry, Role};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Entries `[0, protected_head)` are never replaced (leading system prompt, pinned prefix).
    pub protected_head: usize,
    /// Entries `[tail_start, len)` stay verbatim; `tail_start` is a safe cut point.
    pub tail_start: usize,
    pub token_target: u64,
}

impl Window {
    /// Keeps at least `keep_recent_tokens` verbatim at the end, moved back to a safe cut.
    pub fn compute(entries: &[Entry], keep_recent_tokens: u64, token_target: u64) -> Self {
        let protected_head = protected_head(entries);
        let cuts = safe_cuts(entries);
        let mut tail_tokens = 0u64;
        let mut tail_start = entries.len();
        while tail_start > protected_head && tail_tokens < keep_recent_tokens {
            tail_start -= 1;
            tail_tokens += entries[tail_start].tokens as u64;
        }
        while tail_start > protected_head && !cuts[tail_start] {
            tail_start -= 1;
        }
        Window { protected_head, tail_start, token_target }
    }
}

impl Window {
    /// A handover replaces everything after the protected head: no verbatim tail.
    pub fn handover(entries: &[Entry]) -> Self {
        Window { protected_head: protected_head(entries), tail_start: entries.len(), token_target: 0 }
    }
}

/// The leading system prompt and pinned prefix, never replaced.
fn protected_head(entries: &[Entry]) -> usize {
    entries.iter().take_while(|e| e.role == Role::System || e.pinned).count()
}

/// `cuts[i]`: history may be cut just before entry `i` without separating any tool call
/// from its result (the rule plugins get from the SDK, written once in `cairn-rules`), nor
/// two entries of one provider response (which plugins do not see).
pub fn safe_cuts(entries: &[Entry]) -> Vec<bool> {
    let mut cuts = cairn_rules::safe_cuts(entries);
    for i in 1..entries.len() {
        if same_response(&entries[i - 1], &entries[i]) {
            cuts[i] = false;
        }
    }
    cuts
}

pub fn same_response(a: &Entry, b: &Entry) -> bool {
    a.response.is_some() && a.response == b.response
}
