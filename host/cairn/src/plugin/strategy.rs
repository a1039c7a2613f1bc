//! A strategy plugin as a step of the chain: a fresh `Store` per call with the step's memory
//! cap, deadline and grants; whatever happens inside becomes a typed step outcome.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Plugin, Pre};
use crate::capabilities::{ArchiveScope, Grants};
use crate::chain::{Purpose, Step, StepAnswer, StepError, StepInput};
use crate::engine::{classify, CallFailure, CallState, Engine, World};
use crate::model::ModelProvider;
use crate::tokenizer::Tokenizer;
use crate::wit_edge::{convert, types as wit};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepLimits {
    pub memory_bytes: usize,
    pub timeout: Duration,
}

pub struct WasmStrategy {
    engine: Engine,
    model: Option<Arc<dyn ModelProvider>>,
    plugin: Arc<Plugin>,
    grants: Grants,
    limits: StepLimits,
    /// The plugin's config from the policy, as JSON text.
    config: String,
    tokenizer: Tokenizer,
    /// Why this step may not run at all (a world or capability mismatch found at load).
    refusal: Option<StepError>,
}

impl WasmStrategy {
    pub fn new(
        engine: Engine,
        plugin: Arc<Plugin>,
        grants: Grants,
        limits: StepLimits,
        config: String,
        tokenizer: Tokenizer,
        model: Option<Arc<dyn ModelProvider>>,
    ) -> Self {
        let label = plugin.label();
        let refusal = if plugin.manifest.kind != World::Strategy {
            Some(StepError::Invalid(format!("plugin {label} is a {} plugin, not a strategy", plugin.manifest.kind)))
        } else {
            plugin.refusal(&grants).map(StepError::Denied)
        };
        if let Some(refusal) = &refusal {
            tracing::warn!(plugin = %label, "{}", refusal.message());
        }
        WasmStrategy { engine, model, plugin, grants, limits, config, tokenizer, refusal }
    }

    fn call(&self, input: &StepInput<'_>) -> StepAnswer {
        let Pre::Strategy(pre) = &self.plugin.pre else {
            unreachable!("refused at construction unless the plugin is a strategy")
        };
        let label = self.plugin.label();
        // The step's own limit, cut short by what is left of the whole chain's budget.
        let timeout = self.limits.timeout.min(input.deadline.saturating_duration_since(Instant::now()));
        let state = CallState::new(
            label.clone(),
            self.limits.memory_bytes,
            self.grants.clone(),
            self.tokenizer,
            ArchiveScope::new(input.archive_id.to_string(), input.archive.clone()),
            self.model.clone(),
            Instant::now() + timeout,
        );
        let mut store = self.engine.store(state, timeout);

        let request = wit::CompactRequest {
            purpose: match input.purpose {
                Purpose::Compact => wit::RequestKind::Compact,
                Purpose::Handover => wit::RequestKind::Handover,
            },
            archive_id: input.archive_id.to_string(),
            entries: input.entries.iter().map(wit::Entry::from).collect(),
            protected_head: input.window.protected_head as u32,
            tail_start: input.window.tail_start as u32,
            token_target: input.window.token_target,
            preserve: input.preserve.map(str::to_string),
            resume: input.resume.map(str::to_string),
            previous_checkpoint: input.previous_checkpoint.map(str::to_string),
            config: self.config.clone(),
        };
        let result = pre.instantiate(&mut store).and_then(|instance| instance.call_compact(&mut store, &request));
        match result {
            Ok(answer) => {
                let state = store.into_data();
                // A plugin failing after its model ran out of time, or after being refused a
                // capability: that is the cause.
                let output = convert::strategy_result(answer).map_err(|error| {
                    if state.model_timed_out {
                        StepError::Timeout(format!("plugin {label}: its model call ran out of time ({})", error.message()))
                    } else if let Some(denied) = state.denied {
                        StepError::Denied(denied)
                    } else {
                        error
                    }
                });
                StepAnswer { output, artifacts: state.archive.pending }
            }
            Err(error) => {
                let failure = classify(&error, store.data());
                let error = match failure {
                    CallFailure::Trap(why) => StepError::Trap(format!("plugin {label} trapped: {why}")),
                    CallFailure::Timeout => StepError::Timeout(format!("plugin {label} timed out after {timeout:?}")),
                    CallFailure::Oom(why) => StepError::Oom(format!("plugin {label} {why}")),
                    CallFailure::Denied(why) => StepError::Denied(why),
                };
                StepAnswer { output: Err(error), artifacts: Vec::new() }
            }
        }
    }
}

impl Step for WasmStrategy {
    fn name(&self) -> String {
        self.plugin.label()
    }

    fn run(&self, input: &StepInput<'_>) -> StepAnswer {
        match &self.refusal {
            Some(refusal) => StepAnswer { output: Err(refusal.clone()), artifacts: Vec::new() },
            None => self.call(input),
        }
    }
}
