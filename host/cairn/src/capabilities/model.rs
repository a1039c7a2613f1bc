//! `model`: completions through the policy's endpoint or the embedder's provider, bounded by
//! the step's deadline.

use std::sync::Arc;
use std::time::Instant;

use super::{Capability, Gate, Refusal};
use crate::model::{ModelError, ModelProvider, ModelRequest};

pub struct ModelCapability {
    gate: Gate,
    provider: Option<Arc<dyn ModelProvider>>,
    deadline: Instant,
    /// Set when a model call ran out of time: the step then ends as `timeout`.
    pub timed_out: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionError {
    Denied(Refusal),
    Model(ModelError),
}

impl ModelCapability {
    pub fn new(gate: Gate, provider: Option<Arc<dyn ModelProvider>>, deadline: Instant) -> Self {
        ModelCapability { gate, provider, deadline, timed_out: false }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn complete(&mut self, request: &ModelRequest) -> Result<String, CompletionError> {
        self.gate.check(&[Capability::Model], "call a model").map_err(CompletionError::Denied)?;
        let Some(provider) = self.provider.clone() else {
            return Err(CompletionError::Model(ModelError::Unavailable("no model is configured (add a [model] section to the policy)".into())));
        };
        let started = Instant::now();
        let answer = provider.complete(request, self.deadline);
        tracing::debug!(plugin = %self.gate.plugin(), model = %provider.describe(), millis = started.elapsed().as_millis() as u64, ok = answer.is_ok(), "model call");
        if answer == Err(ModelError::Timeout) {
            self.timed_out = true;
        }
        answer.map_err(CompletionError::Model)
    }
}
