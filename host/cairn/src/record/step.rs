//! How each step of a chain ended, and what a chain was for.

use serde::{Deserialize, Serialize};

/// How a step ended. Stable words: harnesses and tests match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeClass {
    Ok,
    Trap,
    Timeout,
    Oom,
    Denied,
    Invalid,
    Invariant,
    NoProgress,
    Unavailable,
    /// The outcome passed the host's checks; the commit policy refused it.
    Rejected,
}

impl std::fmt::Display for OutcomeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        f.write_str(&word)
    }
}

/// What the chain is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// Shrink the working context; the verbatim tail stays.
    Compact,
    /// Prepare a fresh session seeded from this one.
    Handover,
}

/// The record of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub plugin: String,
    pub outcome: OutcomeClass,
    pub millis: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// Capabilities the plugin called without a grant (each refused with `denied`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// The pipeline stage the step ran in (policies with `[[stage]]`s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// What the step asked of the model, as the host saw it (steps that called one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelUse>,
    /// What the host's fact-check found in the step's model-written summary or checkpoint
    /// (steps that called the model and produced a checked outcome): at most
    /// [`MAX_FACT_FLAGS`], the stale ones first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<FactFlag>,
}

/// The most fact-check flags one step's record carries; the check stops counting there.
pub const MAX_FACT_FLAGS: usize = 20;

/// What kind of doubt a fact-check flag raises. Stable words: `cairn show` and tests match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagKind {
    /// A URL, path, command, identifier or number the summary names that appears nowhere in
    /// the history it replaces (nor in the preserve instructions or the previous checkpoint).
    Unverified,
    /// An item the summary calls pending, active or next that the history shows finished.
    Stale,
}

impl std::fmt::Display for FlagKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FlagKind::Unverified => "unverified",
            FlagKind::Stale => "stale",
        })
    }
}

/// One claim of a model-written summary that the history does not back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactFlag {
    pub kind: FlagKind,
    /// The claim, as the summary wrote it.
    pub item: String,
    /// Why it was flagged, naming the evidence (an entry id) where there is some.
    pub why: String,
}

impl FactFlag {
    pub fn new(kind: FlagKind, item: &str, why: &str) -> Self {
        FactFlag { kind, item: clip_message(item), why: clip_message(why) }
    }
}

/// A step's model calls, counted by the host: a summarizer that sends an oversized history in
/// chunks makes one call per chunk (plus, for `native-summary`, one for a split turn's prefix,
/// and one more for a chunk retried smaller after a "too long" answer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUse {
    /// Completions asked for (refused ones included).
    pub calls: u32,
    /// The largest prompt, in the host's tokens (counted when the model's window is known).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub largest_prompt_tokens: u32,
    /// Prompts that did not fit the model's window: refused by the host, or answered "too
    /// long" by the provider.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub too_long: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How a step's message starts when its model said (or the host found) that a prompt did not
/// fit the model's window and the step could not make do: `too long: …`.
pub const TOO_LONG_MESSAGE_PREFIX: &str = "too long: ";

impl StepReport {
    pub fn failed(plugin: String, outcome: OutcomeClass, message: &str, millis: u64, refused: Vec<String>) -> Self {
        StepReport { plugin, outcome, millis, message: Some(clip_message(message)), tokens_after: None, refused, stage: None, model: None, flags: Vec::new() }
    }
}

/// The longest message from a plugin or an endpoint that reaches the record, a log line or
/// the terminal.
pub const MAX_MESSAGE_CHARS: usize = 2_000;

/// Room for what the host adds around a clipped message (a prefix naming the plugin), so
/// clipping again changes nothing.
const CLIP_SLACK: usize = 256;

/// `text` cut to [`MAX_MESSAGE_CHARS`], saying how long it was; text up to that length plus a
/// little slack is left alone.
pub fn clip_message(text: &str) -> String {
    if text.len() <= MAX_MESSAGE_CHARS + CLIP_SLACK {
        return text.to_string();
    }
    format!("{}… ({} bytes in all)", cairn_rules::clip_chars(text, MAX_MESSAGE_CHARS), text.len())
}
