//! `commit-turn-boundary`: swap the working context only between turns. A running tool call or
//! an unfinished turn defers the commit; an earlier compaction summary left in the kept range
//! would go stale beside the new one, so that proposal is rejected. Takes no config.

use cairn_sdk::types::*;
use cairn_sdk::{export_commit_policy, CommitPolicy};

/// Ids named in a rejection, at most; the rest are counted.
const MAX_IDS: usize = 10;

struct CommitTurnBoundary;

impl CommitPolicy for CommitTurnBoundary {
    fn decide(boundary: Boundary, proposal: Proposal) -> CommitDecision {
        decide(&boundary, &proposal)
    }
}

/// The whole rule, free of host calls.
fn decide(boundary: &Boundary, proposal: &Proposal) -> CommitDecision {
    if boundary.tool_call_outstanding {
        return CommitDecision::Defer("a tool call is still running".into());
    }
    if !boundary.turn_complete {
        return CommitDecision::Defer("the turn is not complete".into());
    }
    if !proposal.kept_summary_ids.is_empty() {
        return CommitDecision::Reject(format!("a stale compaction entry would stay in the kept range: {}", id_list(&proposal.kept_summary_ids)));
    }
    CommitDecision::Commit
}

/// `a, b, c` or `a, …, j and 3 more`.
fn id_list(ids: &[String]) -> String {
    let shown = ids.iter().take(MAX_IDS).map(String::as_str).collect::<Vec<_>>().join(", ");
    match ids.len().saturating_sub(MAX_IDS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

export_commit_policy!(CommitTurnBoundary);

#[cfg(test)]
mod tests {
    use super::*;

    fn boundary(turn_complete: bool, tool_call_outstanding: bool) -> Boundary {
        Boundary { turn: 12, turn_complete, tool_call_outstanding, config: String::new() }
    }

    fn proposal(kept: &[&str]) -> Proposal {
        Proposal {
            strategy: "shake-elide".into(),
            tokens_before: 100_000,
            tokens_after: 40_000,
            replaced_ids: vec!["e3".into(), "e4".into()],
            kept_summary_ids: kept.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn commits_at_a_clean_boundary() {
        assert!(matches!(decide(&boundary(true, false), &proposal(&[])), CommitDecision::Commit));
    }

    #[test]
    fn defers_while_a_tool_call_runs() {
        // Checked first: even a complete turn or a stale summary defers.
        for (complete, kept) in [(true, &[][..]), (false, &[][..]), (true, &["s1"][..])] {
            match decide(&boundary(complete, true), &proposal(kept)) {
                CommitDecision::Defer(why) => assert_eq!(why, "a tool call is still running"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn defers_an_unfinished_turn() {
        for kept in [&[][..], &["s1"][..]] {
            match decide(&boundary(false, false), &proposal(kept)) {
                CommitDecision::Defer(why) => assert_eq!(why, "the turn is not complete"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn rejects_a_stale_summary_in_the_kept_range() {
        match decide(&boundary(true, false), &proposal(&["s1", "s7"])) {
            CommitDecision::Reject(why) => assert_eq!(why, "a stale compaction entry would stay in the kept range: s1, s7"),
            other => panic!("{other:?}"),
        }
        let many: Vec<String> = (1..=12).map(|i| format!("s{i}")).collect();
        assert_eq!(id_list(&many), "s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 and 2 more");
    }
}
