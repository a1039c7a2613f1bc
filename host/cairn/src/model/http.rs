//! The HTTP transport shared by both wire formats: per-attempt timeouts clipped to the
//! caller's deadline, bounded retries with exponential backoff on 429/5xx and transport
//! failures, and no retry on other client errors.
//!
//! The key goes to the configured endpoint and nowhere else: redirects are not followed (a
//! 3xx answer is a failure), and every message the provider hands on (HTTP, transport and
//! parse errors, and the completion itself) is clipped and stripped of key material first.

use std::fmt;
use std::time::{Duration, Instant};

use super::redact::{clip, Redactor, MAX_ENDPOINT_BYTES};
use super::{anthropic, openai, ModelError, ModelProvider, ModelRequest, Wire};

const BACKOFF_START: Duration = Duration::from_millis(200);
const MAX_RESPONSE_BYTES: u64 = 8 << 20;
/// The most bytes of any error message the provider hands on.
const MAX_MESSAGE_BYTES: usize = 512;

pub struct HttpProvider {
    wire: Wire,
    base_url: String,
    model: String,
    api_key: Option<Secret>,
    /// Built from the key; `None` without one.
    redactor: Option<Redactor>,
    timeout: Duration,
    max_retries: u32,
    /// The model's context window, if the policy (or the model's name) gives it.
    context_window: Option<u32>,
    agent: ureq::Agent,
}

/// Holds the API key; prints as `***` so it cannot reach a log by accident.
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl HttpProvider {
    pub fn new(wire: Wire, base_url: &str, model: &str, api_key: Option<String>, timeout: Duration, max_retries: u32) -> Self {
        // No redirects: a 3xx comes back as a response, and the key never follows a Location.
        let agent = ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
        HttpProvider {
            redactor: api_key.as_deref().map(Redactor::new),
            wire,
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key: api_key.map(Secret),
            timeout,
            max_retries,
            context_window: None,
            agent,
        }
    }

    /// The model's context window: the host refuses prompts above it, and steps are told it.
    pub fn with_context_window(mut self, window: u32) -> Self {
        self.context_window = Some(window);
        self
    }

    fn attempt(&self, request: &ModelRequest, timeout: Duration) -> Attempt {
        let key = self.api_key.as_ref().map(|s| s.0.as_str());
        let (url, body) = match self.wire {
            Wire::Openai => (format!("{}/chat/completions", self.base_url), openai::body(&self.model, request)),
            Wire::Anthropic => (format!("{}/v1/messages", self.base_url), anthropic::body(&self.model, request)),
        };
        let mut call = self.agent.post(&url).header("content-type", "application/json");
        call = match (self.wire, key) {
            (Wire::Openai, Some(key)) => call.header("authorization", &format!("Bearer {key}")),
            (Wire::Anthropic, Some(key)) => call.header("x-api-key", key).header("anthropic-version", anthropic::VERSION),
            (Wire::Anthropic, None) => call.header("anthropic-version", anthropic::VERSION),
            (Wire::Openai, None) => call,
        };
        let response = call.config().timeout_global(Some(timeout)).build().send_json(&body);
        match response {
            Ok(mut response) => {
                let status = response.status().as_u16();
                match response.body_mut().with_config().limit(MAX_RESPONSE_BYTES).read_to_string() {
                    Ok(text) => Attempt::Answer(status, text),
                    Err(ureq::Error::Timeout(_)) => Attempt::TimedOut,
                    Err(e) => Attempt::Transport(format!("reading the response: {e}")),
                }
            }
            Err(ureq::Error::Timeout(_)) => Attempt::TimedOut,
            Err(e) => Attempt::Transport(e.to_string()),
        }
    }

    /// Endpoints sometimes echo the key, whole, upper-cased or cut short; it must not travel on
    /// to a log, a plugin or the record.
    fn redact(&self, text: &str) -> String {
        match &self.redactor {
            Some(redactor) => redactor.redact(text),
            None => text.to_string(),
        }
    }

    /// What leaves the provider as an error (or goes to the log): bounded, and free of key
    /// material. Clipping comes
    /// first so redaction stays cheap; a key cut by the clip still goes, as a run of it.
    fn sanitize(&self, error: ModelError) -> ModelError {
        let clean = |message: String| self.redact(&clip(&message, MAX_MESSAGE_BYTES));
        match error {
            ModelError::Unavailable(m) => ModelError::Unavailable(clean(m)),
            ModelError::Failed(m) => ModelError::Failed(clean(m)),
            ModelError::Timeout => ModelError::Timeout,
            ModelError::TooLong { prompt_tokens, window, detail } => ModelError::TooLong { prompt_tokens, window, detail: clean(detail) },
        }
    }

    fn call(&self, request: &ModelRequest, deadline: Instant) -> Result<String, ModelError> {
        let mut backoff = BACKOFF_START;
        let mut last = ModelError::Unavailable("no attempt was made".into());
        for attempt in 0..=self.max_retries {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(ModelError::Timeout);
            }
            let retryable = match self.attempt(request, self.timeout.min(remaining)) {
                Attempt::Answer(status, body) if (200..300).contains(&status) => {
                    return match self.wire {
                        Wire::Openai => openai::parse(&body),
                        Wire::Anthropic => anthropic::parse(&body),
                    };
                }
                Attempt::Answer(status, _) if (300..400).contains(&status) => {
                    // The Location is not quoted: it may carry credentials of its own.
                    return Err(ModelError::Failed(format!("HTTP {status}: the endpoint redirected; Cairn does not follow redirects for model calls (set base_url to the final address)")));
                }
                Attempt::Answer(status, body) if (400..500).contains(&status) && too_long(self.wire, &body).is_some() => {
                    // Not retried here: the same prompt would be too long again. The plugin
                    // retries with a smaller one.
                    return Err(too_long(self.wire, &body).expect("checked"));
                }
                Attempt::Answer(status, body) => {
                    let message = format!("HTTP {status}: {}", error_message(&body));
                    if status == 429 || status >= 500 {
                        ModelError::Unavailable(message)
                    } else {
                        return Err(ModelError::Failed(message));
                    }
                }
                Attempt::TimedOut => return Err(ModelError::Timeout),
                Attempt::Transport(why) => ModelError::Unavailable(why),
            };
            tracing::debug!(model = %self.describe(), attempt, "model call failed: {}", self.sanitize(retryable.clone()));
            last = retryable;
            if attempt < self.max_retries {
                std::thread::sleep(backoff.min(deadline.saturating_duration_since(Instant::now())));
                backoff *= 2;
            }
        }
        Err(last)
    }
}

enum Attempt {
    Answer(u16, String),
    TimedOut,
    Transport(String),
}

impl ModelProvider for HttpProvider {
    fn complete(&self, request: &ModelRequest, deadline: Instant) -> Result<String, ModelError> {
        match self.call(request, deadline) {
            // A completion that echoes the key must not hand it to the plugin either.
            Ok(text) => Ok(self.redact(&text)),
            Err(e) => Err(self.sanitize(e)),
        }
    }

    fn describe(&self) -> String {
        format!("{:?} {} at {}", self.wire, self.model, self.base_url)
    }

    fn context_window(&self) -> Option<u32> {
        self.context_window
    }
}

/// A provider's "the prompt does not fit" answer, recognised apart from other client errors.
fn too_long(wire: Wire, body: &str) -> Option<ModelError> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    // The wire's own form first; proxies (LiteLLM, OpenRouter) pass the other one's on too.
    let (prompt_tokens, window) = match wire {
        Wire::Openai => openai::too_long(&value).or_else(|| anthropic::too_long(&value))?,
        Wire::Anthropic => anthropic::too_long(&value).or_else(|| openai::too_long(&value))?,
    };
    Some(ModelError::TooLong { prompt_tokens, window, detail: clip(value["error"]["message"].as_str().unwrap_or(""), MAX_ENDPOINT_BYTES) })
}

/// The provider's error message if the body carries one (both APIs use `error.message`),
/// clipped; otherwise only the body's size: raw bytes of an unknown body never go into a
/// message.
fn error_message(body: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(body).ok().as_ref().and_then(|v| v["error"]["message"].as_str()) {
        Some(message) => clip(message, MAX_ENDPOINT_BYTES),
        None if body.is_empty() => "empty body".to_string(),
        None => format!("a body of {} bytes without error.message", body.len()),
    }
}
