//! A strategy plugin as a step of the chain, with the grants, limits and config its policy
//! step gave it (checked when the policy was loaded).

use std::sync::Arc;
use std::time::Instant;

use super::{Plugin, StepLimits};
use crate::capabilities::archive::Originals;
use crate::capabilities::{Capability, Grants};
use crate::chain::{Step, StepAnswer, StepError, StepInput};
use crate::engine::{Engine, Services};
use crate::model::ModelProvider;
use crate::record::TOO_LONG_MESSAGE_PREFIX;
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
            // Shared, not copied: an Arc each.
            originals: match self.grants.has(Capability::ArchiveWrite) {
                true => Originals::new(input.entries.iter().map(|e| e.parts.clone()).collect()),
                false => Originals::default(),
            },
        };
        let config = self.config_for_call(input.budget);
        let (answer, state) = self.plugin.call(&self.engine, self.limits.memory_bytes, timeout, &self.grants, services, |pre, store| pre.compact(store, input, &config));
        let refusals = state.refusals();
        let refused: Vec<String> = refusals.iter().map(|r| r.capability.to_string()).collect();
        if state.log.dropped > 0 {
            tracing::warn!(plugin = %self.plugin.label(), dropped = state.log.dropped, "log lines over the per-call budget were dropped");
        }
        // A plugin failing after its model ran out of time, or after being refused a
        // capability: that is the cause. One failing after a "too long" it could not get
        // around says so first, in words harnesses can match (`too long: `).
        let used = state.model.used;
        let output = answer.and_then(|answer| {
            answer.map_err(|error| match (refusals.first(), error) {
                (_, error) if state.model.timed_out => StepError::Timeout(self.plugin.says(format!("its model call ran out of time ({})", error.message()))),
                (Some(refusal), _) => StepError::Denied(refusal.to_string()),
                (None, StepError::Unavailable(why)) if used.too_long > 0 => StepError::Unavailable(format!("{TOO_LONG_MESSAGE_PREFIX}{why}")),
                (None, error) => error,
            })
        });
        let output = output.map_err(|error| self.plugin.explain_sandbox(error));
        let artifacts = if output.is_ok() { state.archive.into_pending() } else { Vec::new() };
        StepAnswer { output, artifacts, refused, model: (used.calls > 0).then_some(used) }
    }
}

/// The reserved config key through which a step granted `model` learns the model's context
/// window (the contract has no field for it; `cairn_sdk::chunks` reads it).
pub const MODEL_CONTEXT_WINDOW_KEY: &str = "model_context_window";
/// The reserved config key through which a step learns the run's token budget: `token_target`
/// says where to shrink to, this that the target is a budget to fill by value (the contract
/// has no field for it; `cairn_sdk::ledger::budget` reads it).
pub const BUDGET_KEY: &str = "context_budget_tokens";

impl WasmStrategy {
    /// The plugin's config as the call gets it: for a step granted `model` whose model has a
    /// known window, with `model_context_window` set to it, and with the run's budget as
    /// `context_budget_tokens` (whatever the policy wrote there). A config that is not a JSON
    /// object is passed on as it is.
    fn config_for_call(&self, budget: Option<u64>) -> String {
        let window = match (&self.model, self.grants.has(Capability::Model)) {
            (Some(model), true) => model.context_window(),
            _ => None,
        };
        if window.is_none() && budget.is_none() {
            return self.config.clone();
        }
        let mut object = match self.config.trim() {
            "" => serde_json::Map::new(),
            text => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Object(object)) => object,
                _ => return self.config.clone(),
            },
        };
        if let Some(window) = window {
            object.insert(MODEL_CONTEXT_WINDOW_KEY.into(), window.into());
        }
        if let Some(budget) = budget {
            object.insert(BUDGET_KEY.into(), budget.into());
        }
        serde_json::Value::Object(object).to_string()
    }
}
