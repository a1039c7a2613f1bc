//! `model`: completions through the policy's endpoint or the embedder's provider, bounded by
//! the step's deadline and by the model's own context window: a prompt that does not fit is
//! refused here (`prompt too long: N tokens, the model's window is M`) instead of being sent.

use std::sync::Arc;
use std::time::Instant;

use super::{Capability, Gate, Refusal};
use crate::model::{ModelError, ModelProvider, ModelRequest};
use crate::record::ModelUse;
use crate::tokenizer::Tokenizer;

/// Framing tokens counted per chat message (role and separators), as the chat formats add them.
const MESSAGE_OVERHEAD: u32 = 4;

pub struct ModelCapability {
    gate: Gate,
    provider: Option<Arc<dyn ModelProvider>>,
    tokenizer: Tokenizer,
    deadline: Instant,
    /// Set when a model call ran out of time: the step then ends as `timeout`.
    pub timed_out: bool,
    /// What the step asked of the model, for its record.
    pub used: ModelUse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionError {
    Denied(Refusal),
    Model(ModelError),
}

impl ModelCapability {
    pub fn new(gate: Gate, provider: Option<Arc<dyn ModelProvider>>, tokenizer: Tokenizer, deadline: Instant) -> Self {
        ModelCapability { gate, provider, tokenizer, deadline, timed_out: false, used: ModelUse::default() }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn complete(&mut self, request: &ModelRequest) -> Result<String, CompletionError> {
        self.gate.check(&[Capability::Model], "call a model").map_err(CompletionError::Denied)?;
        let Some(provider) = self.provider.clone() else {
            return Err(CompletionError::Model(ModelError::Unavailable("no model is configured (add a [model] section to the policy)".into())));
        };
        self.used.calls += 1;
        if let Some(window) = provider.context_window() {
            let Some(prompt) = self.prompt_tokens(request) else {
                self.timed_out = true;
                return Err(CompletionError::Model(ModelError::Timeout));
            };
            self.used.largest_prompt_tokens = self.used.largest_prompt_tokens.max(prompt);
            // The answer needs room in the same window.
            if prompt.saturating_add(request.max_tokens) > window {
                self.used.too_long += 1;
                let detail = format!("not sent: {} more tokens are asked for the answer", request.max_tokens);
                tracing::info!(plugin = %self.gate.plugin(), prompt, window, max_tokens = request.max_tokens, "model call refused: the prompt does not fit the model's window");
                return Err(CompletionError::Model(ModelError::TooLong { prompt_tokens: Some(prompt), window: Some(window), detail }));
            }
        }
        let started = Instant::now();
        let answer = provider.complete(request, self.deadline);
        tracing::debug!(plugin = %self.gate.plugin(), model = %provider.describe(), millis = started.elapsed().as_millis() as u64, ok = answer.is_ok(), "model call");
        match &answer {
            Err(ModelError::Timeout) => self.timed_out = true,
            Err(ModelError::TooLong { .. }) => self.used.too_long += 1,
            _ => {}
        }
        answer.map_err(CompletionError::Model)
    }

    /// The prompt's size as the host counts it: every message's text plus its framing.
    /// `None` once the step's deadline passes.
    fn prompt_tokens(&self, request: &ModelRequest) -> Option<u32> {
        request.messages.iter().try_fold(0u32, |sum, m| Some(sum.saturating_add(self.tokenizer.count_until(&m.content, self.deadline)?).saturating_add(MESSAGE_OVERHEAD)))
    }
}
