//! `model`: completions through the policy's endpoint or the embedder's provider, bounded by
//! the step's deadline. Not granted → `denied` (only optional importers can get there).

use crate::capabilities::Capability;
use crate::engine::CallState;
use crate::model::{ChatMessage, ModelError as DomainError, ModelRequest};
use crate::wit_edge::model::{CompletionRequest, Host, ModelError};

impl Host for CallState {
    fn complete(&mut self, request: CompletionRequest) -> wasmtime::Result<Result<String, ModelError>> {
        if !self.grants.has(Capability::Model) {
            return Ok(Err(ModelError::Denied("the policy does not grant `model` to this plugin".into())));
        }
        let Some(provider) = self.model.clone() else {
            return Ok(Err(ModelError::Unavailable("no model is configured (add a [model] section to the policy)".into())));
        };
        let request = ModelRequest {
            messages: request.messages.into_iter().map(|m| ChatMessage { role: m.role, content: m.content }).collect(),
            max_tokens: request.max_tokens,
        };
        let started = std::time::Instant::now();
        let answer = provider.complete(&request, self.deadline);
        tracing::debug!(plugin = %self.plugin, model = %provider.describe(), millis = started.elapsed().as_millis() as u64, ok = answer.is_ok(), "model call");
        Ok(answer.map_err(|e| match e {
            DomainError::Unavailable(why) => ModelError::Unavailable(why),
            DomainError::Timeout => {
                self.model_timed_out = true;
                ModelError::Timeout
            }
            DomainError::Failed(why) => ModelError::Failed(why),
        }))
    }
}
