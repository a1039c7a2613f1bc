//! What the lifecycle does when its trigger or commit-policy plugin fails to answer (trap,
//! timeout, oom, denied, or skipped by the circuit breaker): it never silently stops
//! maintaining, and never defers forever.
//! - A failing **trigger** fails open to the host's reserve rule (Pi's: act when the context
//!   leaves less than the reserve free; agent requests run once the cooldown allows).
//! - A failing **commit policy** falls back to the host's boundary rule (commit only at a
//!   completed turn with no tool call outstanding).
//!
//! Either way one notice says so when the plugin starts failing, and the circuit breaker
//! keeps a plugin that fails repeatedly from being called for a while.

use super::ConversationState;
use crate::chain::StepError;
use crate::host::Cairn;
use crate::policy::{CheckedPolicy, PolicyStep};
use crate::record::{now_millis, Boundary, CommitDecision, Notice, Proposal, RequestKind, TriggerDecision, TriggerInput};

/// The reserve the host's rule keeps free when the harness reports none.
const DEFAULT_RESERVE: u64 = 16_384;

/// The policy's trigger decision (none configured: never act automatically).
pub fn trigger(cairn: &Cairn, policy: &CheckedPolicy, state: &mut ConversationState, input: &TriggerInput) -> TriggerDecision {
    let Some(step) = &policy.trigger else { return TriggerDecision::None };
    let answer = cairn.ask_trigger(step, input, policy.compaction.breaker());
    or_fallback(state, step, answer, "the host's reserve rule decides when to compact until it recovers", || reserve_rule(input))
}

/// The commit policy's verdict (none configured: commit), with the boundary rule as fallback.
pub fn commit(cairn: &Cairn, policy: &CheckedPolicy, state: &mut ConversationState, boundary: &Boundary, proposal: &Proposal) -> CommitDecision {
    let Some(step) = &policy.commit else { return CommitDecision::Commit };
    let answer = cairn.ask_commit(step, boundary, proposal, policy.compaction.breaker());
    or_fallback(state, step, answer, "the host commits only at completed turns with no tool call running until it recovers", || boundary_rule(boundary))
}

/// The plugin's answer, or the host's rule in its place; a failure streak starts with one
/// notice and ends when the plugin answers again.
fn or_fallback<T>(state: &mut ConversationState, step: &PolicyStep, answer: Result<T, StepError>, fallback: &str, rule: impl FnOnce() -> T) -> T {
    match answer {
        Ok(decision) => {
            state.failing_plugins.retain(|l| l != step.plugin.label());
            decision
        }
        Err(error) => {
            failing(state, step, error.class(), fallback);
            tracing::warn!("{}; {fallback}", error.message());
            rule()
        }
    }
}

/// The commit policy's verdict, or `None` when it failed to give one.
pub fn ask_commit(cairn: &Cairn, policy: &CheckedPolicy, boundary: &Boundary, proposal: &Proposal) -> Option<CommitDecision> {
    let step = policy.commit.as_ref()?;
    cairn.ask_commit(step, boundary, proposal, policy.compaction.breaker()).inspect_err(|e| tracing::warn!("{}", e.message())).ok()
}

/// Pi's rule: compact once the context leaves less than the reserve free.
pub fn reserve_rule(input: &TriggerInput) -> TriggerDecision {
    if input.cooldown_left > 0 {
        return TriggerDecision::None;
    }
    if let Some(request) = &input.pending {
        return match request.kind {
            RequestKind::Compact => TriggerDecision::Compact("compaction requested by the agent".into()),
            RequestKind::Handover => TriggerDecision::Handover("handover requested by the agent".into()),
        };
    }
    let reserve = if input.reserve > 0 { input.reserve } else { DEFAULT_RESERVE };
    match input.context_tokens {
        Some(tokens) if input.window > 0 && tokens > input.window.saturating_sub(reserve) => {
            TriggerDecision::Compact(format!("host reserve rule: {tokens} tokens leave less than {reserve} of the {} window free", input.window))
        }
        _ => TriggerDecision::None,
    }
}

/// Commit only at a completed turn with no tool call outstanding.
pub fn boundary_rule(boundary: &Boundary) -> CommitDecision {
    if boundary.tool_call_outstanding {
        CommitDecision::Defer("a tool call is outstanding".into())
    } else if !boundary.turn_complete {
        CommitDecision::Defer("the turn is not complete".into())
    } else {
        CommitDecision::Commit
    }
}

/// Records that a plugin failed; the first failure of a streak owes one notice.
fn failing(state: &mut ConversationState, step: &PolicyStep, class: crate::record::OutcomeClass, fallback: &str) {
    let label = step.plugin.label().to_string();
    if state.failing_plugins.contains(&label) {
        return;
    }
    state.owed_notices.push(Notice::new(
        format!("plugin-failed-{}-{}", step.plugin.manifest.name, now_millis()),
        "plugin-failed",
        format!("The {} plugin {label} failed ({class}); {fallback}.", step.plugin.manifest.kind),
    ));
    state.failing_plugins.push(label);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::AgentRequest;

    fn input(tokens: Option<u64>) -> TriggerInput {
        TriggerInput { context_tokens: tokens, window: 100_000, reserve: 10_000, turn: 9, turns_since_maintenance: None, cooldown_left: 0, pending: None, recent: vec![] }
    }

    #[test]
    fn the_reserve_rule_acts_only_past_the_reserve_and_never_on_unknown_usage() {
        assert_eq!(reserve_rule(&input(Some(80_000))), TriggerDecision::None);
        assert!(matches!(reserve_rule(&input(Some(95_000))), TriggerDecision::Compact(_)));
        assert_eq!(reserve_rule(&input(None)), TriggerDecision::None);
        let cooling = TriggerInput { cooldown_left: 2, ..input(Some(99_000)) };
        assert_eq!(reserve_rule(&cooling), TriggerDecision::None);
        let asked = TriggerInput { pending: Some(AgentRequest { kind: RequestKind::Handover, preserve: String::new(), resume: String::new() }), ..input(None) };
        assert!(matches!(reserve_rule(&asked), TriggerDecision::Handover(_)));
    }

    #[test]
    fn the_boundary_rule_commits_only_at_a_quiet_completed_turn() {
        assert_eq!(boundary_rule(&Boundary { turn: 1, turn_complete: true, tool_call_outstanding: false }), CommitDecision::Commit);
        assert!(matches!(boundary_rule(&Boundary { turn: 1, turn_complete: true, tool_call_outstanding: true }), CommitDecision::Defer(_)));
        assert!(matches!(boundary_rule(&Boundary { turn: 1, turn_complete: false, tool_call_outstanding: false }), CommitDecision::Defer(_)));
    }
}
