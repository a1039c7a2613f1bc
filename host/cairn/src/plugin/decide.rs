//! Calling trigger and commit-policy plugins: same sandbox as strategies (fresh store,
//! memory cap, deadline), and a plugin that fails to answer is reported, never obeyed.

use std::time::Instant;

use wasmtime::Store;

use super::{Plugin, Pre, StepLimits};
use crate::capabilities::{ArchiveScope, Grants};
use crate::engine::{classify, CallState, Engine};
use crate::lifecycle::{Boundary, CommitDecision, Proposal, TriggerDecision, TriggerInput};
use crate::tokenizer::Tokenizer;
use crate::wit_edge::types as wit;

impl Plugin {
    fn store(&self, engine: &Engine, limits: StepLimits, grants: Grants) -> Store<CallState> {
        let state = CallState::new(self.label(), limits.memory_bytes, grants, Tokenizer::default(), ArchiveScope::new(String::new(), None), None, Instant::now() + limits.timeout);
        engine.store(state, limits.timeout)
    }

    fn failure(&self, error: &wasmtime::Error, store: &Store<CallState>) -> String {
        format!("plugin {} failed: {:?}", self.label(), classify(error, store.data()))
    }

    /// Asks a trigger plugin what to do at this boundary.
    pub fn decide_trigger(&self, engine: &Engine, limits: StepLimits, grants: Grants, input: &TriggerInput, config: &str) -> Result<TriggerDecision, String> {
        let Pre::Trigger(pre) = &self.pre else {
            return Err(format!("plugin {} is a {} plugin, not a trigger", self.label(), self.manifest.kind));
        };
        if let Some(refusal) = self.refusal(&grants) {
            return Err(refusal);
        }
        let mut store = self.store(engine, limits, grants);
        let input = wit::TriggerInput {
            usage: wit::Usage { context_tokens: input.context_tokens, window: input.window, reserve: input.reserve },
            turn: input.turn,
            turns_since_maintenance: input.turns_since_maintenance,
            cooldown_left: input.cooldown_left,
            pending_request: input.pending.as_ref().map(Into::into),
            recent_outcomes: input.recent.iter().map(|c| (*c).into()).collect(),
            config: config.to_string(),
        };
        let answer = pre.instantiate(&mut store).and_then(|i| i.call_decide(&mut store, &input));
        answer.map(Into::into).map_err(|e| self.failure(&e, &store))
    }

    /// Asks a commit-policy plugin whether the swap may happen now.
    pub fn decide_commit(&self, engine: &Engine, limits: StepLimits, grants: Grants, boundary: &Boundary, proposal: &Proposal, config: &str) -> Result<CommitDecision, String> {
        let Pre::CommitPolicy(pre) = &self.pre else {
            return Err(format!("plugin {} is a {} plugin, not a commit policy", self.label(), self.manifest.kind));
        };
        if let Some(refusal) = self.refusal(&grants) {
            return Err(refusal);
        }
        let mut store = self.store(engine, limits, grants);
        let boundary = wit::Boundary {
            turn: boundary.turn,
            turn_complete: boundary.turn_complete,
            tool_call_outstanding: boundary.tool_call_outstanding,
            config: config.to_string(),
        };
        let proposal = wit::Proposal {
            strategy: proposal.strategy.clone(),
            tokens_before: proposal.tokens_before,
            tokens_after: proposal.tokens_after,
            replaced_ids: proposal.replaced_ids.clone(),
            kept_summary_ids: proposal.kept_summary_ids.clone(),
        };
        let answer = pre.instantiate(&mut store).and_then(|i| i.call_decide(&mut store, &boundary, &proposal));
        answer.map(Into::into).map_err(|e| self.failure(&e, &store))
    }
}
