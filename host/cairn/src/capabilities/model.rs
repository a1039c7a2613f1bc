//! `model`: completions. No provider is wired yet, so every call answers `unavailable`
//! and strategies fall through to model-free steps.

use crate::capabilities::Capability;
use crate::engine::CallState;
use crate::wit_edge::model::{CompletionRequest, Host, ModelError};

impl Host for CallState {
    fn complete(&mut self, _request: CompletionRequest) -> wasmtime::Result<Result<String, ModelError>> {
        if !self.grants.has(Capability::Model) {
            self.denied = Some(format!("plugin {} called `model` without a grant", self.plugin));
            return Ok(Err(ModelError::Unavailable("the policy does not grant `model` to this plugin".into())));
        }
        Ok(Err(ModelError::Unavailable("no model provider is configured in this host".into())))
    }
}
