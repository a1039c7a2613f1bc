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
    /// Where the policy writes that config (`file:line:column`), if it does.
    pub config_at: Option<String>,
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
        let output = output.map_err(|error| match self.plugin.explain_sandbox(error) {
            StepError::Invalid(message) => StepError::Invalid(place_config_failure(&message, self.config_at.as_deref())),
            other => other,
        });
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

/// A plugin's complaint about its config (`config: unknown field … at line 1 column 12`, as the
/// SDKs word it) placed in the policy: the line and column it gives count in the JSON the host
/// made of the step's config table, so they are dropped for where the policy writes that table.
fn place_config_failure(message: &str, config_at: Option<&str>) -> String {
    if !message.contains("config:") {
        return message.to_string();
    }
    let mut placed = message.to_string();
    if let Some(start) = placed.rfind(" at line ") {
        let rest = &placed[start + " at line ".len()..];
        let digits = |text: &str| text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let line = digits(rest);
        if line > 0 && rest[line..].starts_with(" column ") {
            let column = digits(&rest[line + " column ".len()..]);
            if column > 0 {
                let end = start + " at line ".len() + line + " column ".len() + column;
                placed.replace_range(start..end, "");
            }
        }
    }
    match config_at {
        Some(at) => format!("{placed} (the step's config at {at}; a `config_schema` in the plugin's manifest would have refused it when the policy loaded)"),
        None => placed,
    }
}

#[cfg(test)]
mod tests {
    use super::place_config_failure;

    #[test]
    fn a_config_complaint_is_placed_in_the_policy_not_the_json() {
        let said = "plugin reported failure: config: unknown field `min_tokns`, expected one of `min_tokens`, `read_tools` at line 1 column 12";
        assert_eq!(
            place_config_failure(said, Some("p.toml:4:10")),
            "plugin reported failure: config: unknown field `min_tokns`, expected one of `min_tokens`, `read_tools` (the step's config at p.toml:4:10; a `config_schema` in the plugin's manifest would have refused it when the policy loaded)"
        );
        assert_eq!(place_config_failure("plugin reported failure: boom at line 3 column 4", Some("p.toml:4:10")), "plugin reported failure: boom at line 3 column 4", "not about config");
        assert_eq!(place_config_failure("plugin reported failure: config: bad at line 1 column 2", None), "plugin reported failure: config: bad");
    }
}
