//! Models strategies may call through the `model` capability: OpenAI-compatible chat
//! completions and the Anthropic messages API over HTTP, or a provider the embedding harness
//! supplies. The API key is read from an environment variable the policy names; it is never
//! logged and never reaches a plugin.

mod anthropic;
mod error_text;
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
    /// The prompt does not fit the model's context window: refused by the host before it was
    /// sent, or answered so by the provider (OpenAI's `context_length_exceeded`, Anthropic's
    /// "prompt is too long"). Reaches plugins as `failed` with the stable text
    /// [`too_long_text`]: `prompt too long: N tokens, the model's window is M`.
    #[error("{}", too_long_text(*.prompt_tokens, *.window, detail))]
    TooLong {
        /// The prompt's size, when known (the host's count, or the provider's).
        prompt_tokens: Option<u32>,
        /// The model's window, when known.
        window: Option<u32>,
        /// Anything more (the provider's own words, clipped), or empty.
        detail: String,
    },
}

/// The stable prefix of every "too long" message, whoever noticed it.
pub const TOO_LONG_PREFIX: &str = "prompt too long";

/// `prompt too long: N tokens, the model's window is M` (parts that are unknown left out),
/// then ` (detail)` when there is one. Plugins parse this text (`cairn_sdk::chunks::too_long`).
pub fn too_long_text(prompt_tokens: Option<u32>, window: Option<u32>, detail: &str) -> String {
    let mut text = TOO_LONG_PREFIX.to_string();
    match (prompt_tokens, window) {
        (Some(n), Some(m)) => text.push_str(&format!(": {n} tokens, the model's window is {m}")),
        (Some(n), None) => text.push_str(&format!(": {n} tokens")),
        (None, Some(m)) => text.push_str(&format!(": the model's window is {m}")),
        (None, None) => {}
    }
    if !detail.is_empty() {
        text.push_str(&format!(" ({detail})"));
    }
    text
}

/// A model a strategy can call. Implement it to hand Cairn your harness's own model.
pub trait ModelProvider: Send + Sync {
    /// One completion, finished by `deadline` or `Err(Timeout)`.
    fn complete(&self, request: &ModelRequest, deadline: Instant) -> Result<String, ModelError>;
    /// For logs: which model this is (never a secret).
    fn describe(&self) -> String;
    /// The model's context window in tokens, if known. With a window the host refuses
    /// prompts that do not fit (`ModelError::TooLong`) and tells each step granted `model`
    /// the window (the reserved config key `model_context_window`), so the bundled
    /// summarizers send the history in chunks that fit. `None` (the default): neither.
    fn context_window(&self) -> Option<u32> {
        None
    }
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
    /// The model's own context window in tokens; prompts above it are never sent. Default:
    /// from the model's name ([`known_context_window`]), else [`UNKNOWN_CONTEXT_WINDOW`].
    #[serde(default)]
    pub context_window: Option<u32>,
}

/// The window assumed for a model whose name the host does not know (and the policy does not
/// give `context_window` for): small enough for most models served today.
pub const UNKNOWN_CONTEXT_WINDOW: u32 = 32_768;

/// The context window of well-known models, by name (case-insensitive; a provider prefix such
/// as `openai/` and a date or variant suffix are allowed). `None` for names not in the table.
pub fn known_context_window(model: &str) -> Option<u32> {
    let name = model.to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name);
    // Longest prefixes first: "gpt-4o" before "gpt-4", "gpt-4.1" before "gpt-4".
    const TABLE: &[(&str, u32)] = &[
        ("gpt-5", 400_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-32k", 32_768),
        ("gpt-4", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("o1-mini", 128_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("claude-", 200_000),
        ("gemini-", 1_048_576),
        ("deepseek-", 128_000),
        ("mistral-large", 128_000),
        ("llama-3", 128_000),
        ("qwen2.5", 32_768),
        ("qwen3", 32_768),
    ];
    TABLE.iter().find(|(prefix, _)| name.starts_with(prefix)).map(|&(_, window)| window)
}

fn default_timeout_ms() -> u64 {
    60_000
}

fn default_retries() -> u32 {
    2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_models_have_their_windows_and_others_a_conservative_one() {
        assert_eq!(known_context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_context_window("openai/gpt-4.1-2025-04-14"), Some(1_047_576));
        assert_eq!(known_context_window("gpt-4"), Some(8_192));
        assert_eq!(known_context_window("Claude-Sonnet-4-5"), Some(200_000));
        assert_eq!(known_context_window("o3-mini"), Some(200_000));
        assert_eq!(known_context_window("my-local-model"), None);
        let settings = |extra: &str| -> ModelSettings { toml::from_str(&format!("provider = \"openai\"\nbase_url = \"http://x\"\nmodel = \"my-local-model\"\n{extra}")).unwrap() };
        assert_eq!(settings("").context_window(), UNKNOWN_CONTEXT_WINDOW);
        assert_eq!(settings("context_window = 8192").context_window(), 8192);
    }

    #[test]
    fn too_long_has_one_stable_text() {
        let e = ModelError::TooLong { prompt_tokens: Some(9000), window: Some(8192), detail: String::new() };
        assert_eq!(e.to_string(), "prompt too long: 9000 tokens, the model's window is 8192");
        let e = ModelError::TooLong { prompt_tokens: None, window: None, detail: "HTTP 400".into() };
        assert_eq!(e.to_string(), "prompt too long (HTTP 400)");
    }
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
        let provider = HttpProvider::new(self.provider, &self.base_url, &self.model, api_key, Duration::from_millis(self.timeout_ms), self.max_retries);
        Ok(Arc::new(provider.with_context_window(self.context_window())))
    }

    /// The window prompts must fit: `context_window` if the policy gives it, else the known
    /// window of the model's name, else [`UNKNOWN_CONTEXT_WINDOW`] (logged, so the operator
    /// knows to set it).
    pub fn context_window(&self) -> u32 {
        if let Some(window) = self.context_window {
            return window;
        }
        known_context_window(&self.model).unwrap_or_else(|| {
            tracing::info!(
                model = %self.model,
                "the model's context window is not known; assuming {UNKNOWN_CONTEXT_WINDOW} tokens (set context_window in [model])"
            );
            UNKNOWN_CONTEXT_WINDOW
        })
    }
}
