//! `{{name}}`: swap the working context only between turns with no tool call running, and
//! only when the proposal frees at least `min_freed` of the context (a swap costs the prompt
//! cache, so a small one is not worth it).

use cairn_sdk::types::*;
use cairn_sdk::{export_commit_policy, trigger_config, CommitPolicy};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Smallest share of the context a swap must free.
    min_freed: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { min_freed: 0.2 }
    }
}

struct Plugin;

impl CommitPolicy for Plugin {
    fn decide(boundary: Boundary, proposal: Proposal) -> CommitDecision {
        decide(&boundary, &proposal, &trigger_config(&boundary.config))
    }
}

/// The whole rule, free of host calls (so `cargo test` runs it natively).
fn decide(boundary: &Boundary, proposal: &Proposal, config: &Config) -> CommitDecision {
    if boundary.tool_call_outstanding {
        return CommitDecision::Defer("a tool call is still running".into());
    }
    if !boundary.turn_complete {
        return CommitDecision::Defer("the turn is not complete".into());
    }
    let freed = proposal.tokens_before.saturating_sub(proposal.tokens_after) as f64 / proposal.tokens_before.max(1) as f64;
    if freed < config.min_freed {
        return CommitDecision::Reject(format!("frees {:.0}% of the context, less than {:.0}%", freed * 100.0, config.min_freed * 100.0));
    }
    CommitDecision::Commit
}

export_commit_policy!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    fn boundary(turn_complete: bool, tool_call_outstanding: bool) -> Boundary {
        Boundary { turn: 3, turn_complete, tool_call_outstanding, config: String::new() }
    }

    fn proposal(tokens_after: u64) -> Proposal {
        Proposal { strategy: "shake-elide".into(), tokens_before: 100_000, tokens_after, replaced_ids: vec![], kept_summary_ids: vec![] }
    }

    #[test]
    fn commits_a_large_swap_between_turns() {
        assert!(matches!(decide(&boundary(true, false), &proposal(40_000), &Config::default()), CommitDecision::Commit));
    }

    #[test]
    fn defers_while_a_tool_runs_and_rejects_small_swaps() {
        assert!(matches!(decide(&boundary(true, true), &proposal(40_000), &Config::default()), CommitDecision::Defer(_)));
        assert!(matches!(decide(&boundary(true, false), &proposal(95_000), &Config::default()), CommitDecision::Reject(_)));
    }
}
