use super::super::bindings::model::{CompletionRequest, Host, ModelError};
use super::super::convert;
use crate::capabilities::{CompletionError, ModelCapability};

impl Host for ModelCapability {
    fn complete(&mut self, request: CompletionRequest) -> wasmtime::Result<Result<String, ModelError>> {
        Ok(ModelCapability::complete(self, &convert::model_request(request)).map_err(|e| match e {
            CompletionError::Denied(refusal) => ModelError::Denied(refusal.to_string()),
            CompletionError::Model(error) => error.into(),
        }))
    }
}
