//! One sandboxed call into a plugin: a fresh `Store` with the step's memory cap, deadline,
//! grants and services; whatever goes wrong inside becomes a typed failure that names the
//! plugin. Triggers and commit policies are called here; strategies through `WasmStrategy`.

use std::time::{Duration, Instant};

use super::Plugin;
use crate::capabilities::Grants;
use crate::chain::StepError;
use crate::engine::{classify, CallFailure, CallState, Engine, Services};
use crate::record::{Boundary, CommitDecision, Proposal, TriggerDecision, TriggerInput};
use crate::wit_edge::PluginPre;

/// The longest advice or reason a trigger or commit policy may answer with: it ends up in a
/// turn, a log line and the record.
pub const MAX_DECISION_CHARS: usize = 4_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepLimits {
    pub memory_bytes: usize,
    pub timeout: Duration,
}

impl Plugin {
    /// Runs `f` in a fresh store. `timeout` is the call's whole budget; `services.deadline`
    /// should match it. Returns the answer (or the classified failure) and the call's state.
    pub(crate) fn call<T>(
        &self,
        engine: &Engine,
        memory_bytes: usize,
        timeout: Duration,
        grants: &Grants,
        services: Services,
        f: impl FnOnce(&PluginPre, &mut wasmtime::Store<CallState>) -> wasmtime::Result<T>,
    ) -> (Result<T, StepError>, CallState) {
        let state = CallState::new(self.label(), memory_bytes, grants, services);
        let mut store = engine.store(state, timeout);
        let answer = match f(&self.pre, &mut store) {
            Err(error) => Err(self.failure(classify(&error, store.data()), timeout)),
            // An answer that comes after the deadline (a host call held it back) is too late.
            Ok(_) if std::time::Instant::now() > store.data().deadline => Err(self.failure(CallFailure::Timeout, timeout)),
            Ok(answer) => Ok(answer),
        };
        (answer, store.into_data())
    }

    /// A call failure as a step error whose message names the plugin.
    pub(crate) fn failure(&self, failure: CallFailure, timeout: Duration) -> StepError {
        match failure {
            CallFailure::Trap(why) => self.explain_sandbox(StepError::Trap(self.says(format!("trapped: {why}")))),
            CallFailure::Timeout => StepError::Timeout(self.says(format!("timed out after {timeout:?}"))),
            CallFailure::Oom(why) => StepError::Oom(self.says(why)),
            CallFailure::Denied(why) => StepError::Denied(why),
        }
    }

    /// Asks a trigger plugin what to do at this boundary.
    pub fn decide_trigger(&self, engine: &Engine, limits: StepLimits, grants: &Grants, input: &TriggerInput, config: &str) -> Result<TriggerDecision, StepError> {
        let services = Services::none(Instant::now() + limits.timeout);
        let decision = self.call(engine, limits.memory_bytes, limits.timeout, grants, services, |pre, store| pre.decide_trigger(store, input, config)).0?;
        match &decision {
            TriggerDecision::Advise(text) | TriggerDecision::Compact(text) | TriggerDecision::Handover(text) => self.bounded(text)?,
            TriggerDecision::None => {}
        }
        Ok(decision)
    }

    /// Asks a commit-policy plugin whether the swap may happen now.
    pub fn decide_commit(&self, engine: &Engine, limits: StepLimits, grants: &Grants, boundary: &Boundary, proposal: &Proposal, config: &str) -> Result<CommitDecision, StepError> {
        let services = Services::none(Instant::now() + limits.timeout);
        let decision = self.call(engine, limits.memory_bytes, limits.timeout, grants, services, |pre, store| pre.decide_commit(store, boundary, proposal, config)).0?;
        if let CommitDecision::Defer(text) | CommitDecision::Reject(text) = &decision {
            self.bounded(text)?;
        }
        Ok(decision)
    }

    fn bounded(&self, text: &str) -> Result<(), StepError> {
        if text.len() > MAX_DECISION_CHARS {
            return Err(StepError::Invalid(self.says(format!("answered with {} bytes of text; at most {MAX_DECISION_CHARS} are accepted", text.len()))));
        }
        Ok(())
    }
}
