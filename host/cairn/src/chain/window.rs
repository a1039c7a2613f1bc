//! The part of the context a strategy may touch: after the protected head, before the
//! verbatim tail, both computed by the host.

use crate::transcript::{Entry, Origin};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Entries `[0, protected_head)` are never replaced (leading system prompt, pinned prefix).
    pub protected_head: usize,
    /// Entries `[tail_start, len)` stay verbatim; `tail_start` is a safe cut point.
    pub tail_start: usize,
    pub token_target: u64,
}

impl Window {
    /// Keeps at least `keep_recent_tokens` verbatim at the end, moved back to a safe cut; but
    /// never an earlier summary (Cairn's, or the agent's own after it compacted by itself): the
    /// tail then starts at the first safe cut after it, so the new summary replaces it instead
    /// of leaving it stale beside the new one.
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
        Window { protected_head, tail_start: past_earlier_summary(entries, &cuts, tail_start), token_target }
    }
}

impl Window {
    /// Under a budget: the verbatim tail holds *at most* `at_most` tokens (the entries at the
    /// end that fit, then forward to a safe cut), so one large entry at the end — a 27k-token
    /// command output — is the strategies' to condense, not a floor the budget cannot go below.
    pub fn within(entries: &[Entry], at_most: u64, token_target: u64) -> Self {
        let protected_head = protected_head(entries);
        let cuts = safe_cuts(entries);
        let (mut tail_start, mut tail_tokens) = (entries.len(), 0u64);
        while tail_start > protected_head && tail_tokens + entries[tail_start - 1].tokens as u64 <= at_most {
            tail_start -= 1;
            tail_tokens += entries[tail_start].tokens as u64;
        }
        while tail_start < entries.len() && !cuts[tail_start] {
            tail_start += 1;
        }
        Window { protected_head, tail_start: past_earlier_summary(entries, &cuts, tail_start), token_target }
    }

    /// A handover replaces everything after the protected head: no verbatim tail.
    pub fn handover(entries: &[Entry]) -> Self {
        Window { protected_head: protected_head(entries), tail_start: entries.len(), token_target: 0 }
    }
}

/// `tail_start`, or the first safe cut after the last earlier summary in the tail: a new
/// summary replaces an old one instead of leaving it stale in the verbatim tail.
fn past_earlier_summary(entries: &[Entry], cuts: &[bool], tail_start: usize) -> usize {
    match entries[tail_start..].iter().rposition(|e| e.origin == Origin::Summary && !e.pinned) {
        Some(summary) => (tail_start + summary + 1..entries.len()).find(|&i| cuts[i]).unwrap_or(entries.len()),
        None => tail_start,
    }
}

/// The leading system prompt, instructions and pinned prefix, never replaced.
pub(crate) fn protected_head(entries: &[Entry]) -> usize {
    entries.iter().take_while(|e| e.is_instructions() || e.pinned).count()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Role;

    fn entry(id: &str, role: Role, origin: Origin, tokens: u32) -> Entry {
        Entry { tokens, ..Entry::text(id, role, origin, id) }
    }

    #[test]
    fn an_earlier_summary_is_never_left_in_the_verbatim_tail() {
        // After the agent compacted by itself: its summary, then a short new turn.
        let entries = vec![
            entry("sys", Role::System, Origin::Harness, 10),
            entry("u1", Role::User, Origin::Operator, 100),
            entry("s", Role::User, Origin::Summary, 100),
            entry("u2", Role::User, Origin::Operator, 100),
            entry("a2", Role::Assistant, Origin::Agent, 100),
        ];
        let window = Window::compute(&entries, 300, 0);
        assert_eq!((window.protected_head, window.tail_start), (1, 3), "the summary is in reach, the turn after it verbatim");
        // A summary at the very end: nothing is kept verbatim rather than keeping it stale.
        let window = Window::compute(&entries[..3], 300, 0);
        assert_eq!(window.tail_start, 3);
    }

    #[test]
    fn leading_instruction_blocks_are_protected_like_the_system_prompt() {
        let entries = vec![
            entry("sys", Role::System, Origin::Harness, 10),
            Entry::text("agents", Role::User, Origin::Harness, "# AGENTS.md instructions for /w"),
            entry("u1", Role::User, Origin::Operator, 100),
            entry("a1", Role::Assistant, Origin::Agent, 100),
        ];
        assert_eq!(Window::compute(&entries, 0, 0).protected_head, 2);
    }

    #[test]
    fn under_a_budget_the_tail_holds_at_most_its_share() {
        let entries = vec![
            entry("sys", Role::System, Origin::Harness, 10),
            entry("u1", Role::User, Origin::Operator, 100),
            entry("a1", Role::Assistant, Origin::Agent, 100),
            entry("u2", Role::User, Origin::Operator, 50),
            entry("big", Role::User, Origin::Harness, 27_000),
        ];
        assert_eq!(Window::within(&entries, 500, 0).tail_start, 5, "the large last entry is not a floor");
        assert_eq!(Window::compute(&entries, 500, 0).tail_start, 4, "where the tail's share is a minimum it is");
        let small = &entries[..4];
        assert_eq!(Window::within(small, 160, 0).tail_start, 2);
        assert_eq!(Window::within(small, 120, 0).tail_start, 3);
        assert_eq!(Window::within(small, 0, 0).tail_start, 4);
    }
}
