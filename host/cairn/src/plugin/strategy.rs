//! A strategy plugin as a step of the chain, with the grants, limits and config its policy
//! step gave it (checked when the policy was loaded).

use std::sync::Arc;
use std::time::Instant;

use super::{Plugin, StepLimits};
use crate::capabilities::Grants;
use crate::chain::{Step, StepAnswer, StepError, StepInput};
use crate::engine::{Engine, Services};
use crate::model::ModelProvider;
use crate::tokenizer::Tokenizer;

pub struct WasmStrategy {
    pub engine: Engine,
    pub plugin: Arc<Plugin>,
    pub grants: Grants,
    pub limits: StepLimits,
    /// The plugin's config from the policy, as JSON text.
    pub config: String,
    pub tokenizer: Tokenizer,
    pub model: Option<Arc<dyn ModelProvider>>,
}

impl Step for WasmStrategy {
    fn name(&self) -> String {
        self.plugin.label().to_string()
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        // The step's own limit, cut short by what is left of the whole chain's budget.
        let timeout = self.limits.timeout.min(input.deadline.saturating_duration_since(Instant::now()));
        let services = Services {
            tokenizer: self.tokenizer,
            archive_id: input.archive_id.to_string(),
            artifacts_before: input.artifacts_before as u32,
            archive: input.archive.clone(),
            model: self.model.clone(),
            deadline: Instant::now() + timeout,
        };
        let (answer, state) = self.plugin.call(&self.engine, self.limits.memory_bytes, timeout, &self.grants, services, |pre, store| pre.compact(store, input, &self.config));
        let refusals = state.refusals();
        let refused: Vec<String> = refusals.iter().map(|r| r.capability.to_string()).collect();
        if state.log.dropped > 0 {
            tracing::warn!(plugin = %self.plugin.label(), dropped = state.log.dropped, "log lines over the per-call budget were dropped");
        }
        // A plugin failing after its model ran out of time, or after being refused a
        // capability: that is the cause.
        let output = answer.and_then(|answer| {
            answer.map_err(|error| match refusals.first() {
                _ if state.model.timed_out => StepError::Timeout(self.plugin.says(format!("its model call ran out of time ({})", error.message()))),
                Some(refusal) => StepError::Denied(refusal.to_string()),
                None => error,
            })
        });
        let artifacts = if output.is_ok() { state.archive.into_pending() } else { Vec::new() };
        StepAnswer { output, artifacts, refused }
    }
}
