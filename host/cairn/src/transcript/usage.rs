//! How the harness knows the context's size: below the host and the lifecycle, which both use it.

use super::Entry;

/// How the harness knows the context's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// Nothing known: no automatic action (agent requests still run).
    Unknown,
    /// The provider reported `tokens` for the context up to its last call; the last
    /// `entries_after` entries came later and are counted by the host.
    Reported { tokens: u64, entries_after: usize },
    /// The host counts the whole context itself.
    Counted,
}

impl Usage {
    /// What the transcript itself records (Pi, Claude Code and Codex keep each reply's billed
    /// usage): the last billed figure plus the host's count of what came after, as Pi and
    /// Claude Code trigger; the host's count where nothing is recorded.
    pub fn recorded_or_counted(entries: &[Entry]) -> Usage {
        match super::reported_usage(entries) {
            Some((tokens, entries_after)) => Usage::Reported { tokens, entries_after },
            None => Usage::Counted,
        }
    }

    /// The context's size in tokens by this measure, `entries` counted by the host (None:
    /// unknown).
    pub fn context_tokens(&self, entries: &[Entry]) -> Option<u64> {
        let counted = |entries: &[Entry]| entries.iter().map(|e| e.tokens as u64).sum::<u64>();
        match *self {
            Usage::Unknown => None,
            Usage::Counted => Some(counted(entries)),
            Usage::Reported { tokens, entries_after } => Some(tokens.saturating_add(counted(&entries[entries.len().saturating_sub(entries_after)..]))),
        }
    }
}
