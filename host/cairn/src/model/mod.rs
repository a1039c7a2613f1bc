//! Models strategies may call through the `model` capability: OpenAI-compatible chat
//! completions and the Anthropic messages API over HTTP, or a provider the embedding harness
//! supplies. The API key is read from an environment variable the policy names; it is never
//! logged and never reaches a plugin.

mod anthropic;
mod http;
mod openai;
mod redact;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

pub use http::HttpProvider;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
}

/// Why a completion produced no text. Messages never contain the API key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// No endpoint, connection refused, or the service kept failing.
    #[error("model unavailable: {0}")]
    Unavailable(String),
    #[error("model timed out")]
    Timeout,
    /// The endpoint answered but not usefully (bad request, malformed body).
    #[error("model failed: {0}")]
    Failed(String),
}

/// A model a strategy can call. Implement it to hand Cairn your harness's own model.
pub trait ModelProvider: Send + Sync {
    /// One completion, finished by `deadline` or `Err(Timeout)`.
    fn complete(&self, request: &ModelRequest, deadline: Instant) -> Result<String, ModelError>;
    /// For logs: which model this is (never a secret).
    fn describe(&self) -> String;
}

/// The `[model]` section of a policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    pub provider: Wire,
    /// E.g. `https://api.openai.com/v1` or `https://api.anthropic.com`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_retries")]
    pub max_retries: u32,
}

fn default_timeout_ms() -> u64 {
    60_000
}

fn default_retries() -> u32 {
    2
}

/// The HTTP API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wire {
    /// OpenAI-compatible `POST {base_url}/chat/completions`.
    Openai,
    /// Anthropic `POST {base_url}/v1/messages`.
    Anthropic,
}

impl ModelSettings {
    /// Builds the provider. A named key variable that is unset is an error now rather than a
    /// 401 later.
    pub fn provider(&self) -> anyhow::Result<Arc<dyn ModelProvider>> {
        let api_key = match &self.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| anyhow::anyhow!("the model's API key variable {var} is not set"))?),
            None => None,
        };
        Ok(Arc::new(HttpProvider::new(self.provider, &self.base_url, &self.model, api_key, Duration::from_millis(self.timeout_ms), self.max_retries)))
    }
}
