//! The agent probe (`cairn eval --probe`). The scenarios' checks are deterministic: is the rule,
//! the port, the test name still in the context? Where the policy names a model, the probe also
//! asks it the scenario's question over exactly that context, as the agent would be asked, and
//! grades the answer by what it must mention. It reports apart from the verdict: a model that
//! misses what the context holds is a finding about the context's shape, not a lost fact.

use std::time::{Duration, Instant};

use cairn::model::{ChatMessage, ModelProvider, ModelRequest};
use cairn::transcript::Transcript;
use serde::Serialize;

/// A scenario's question, what a right answer mentions, and the context it is asked over.
pub struct Probe {
    pub question: &'static str,
    /// Each must appear in the answer (case aside).
    pub expect: Vec<String>,
    pub context: Transcript,
}

#[derive(Debug, Serialize)]
pub struct Answer {
    pub question: &'static str,
    pub passed: bool,
    /// The model's answer, clipped; or why there is none.
    pub answer: String,
    /// What the answer did not mention.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

const SYSTEM: &str = "You are a coding agent resuming work. Below is your working context as it stands after your history was compacted. Answer the question from that context alone, in one or two sentences. If the context does not say, answer \"not in my context\".";
/// The context is sent up to this many chars (the scenarios' contexts are well under it).
const MAX_CONTEXT_CHARS: usize = 600_000;
const ANSWER_CHARS: usize = 400;

pub fn ask(model: &dyn ModelProvider, probe: &Probe) -> Answer {
    let context: String = probe.context.entries.iter().map(|e| format!("[{:?}/{:?}] {}\n", e.role, e.origin, e.model_text())).collect::<String>().chars().take(MAX_CONTEXT_CHARS).collect();
    let request = ModelRequest {
        messages: vec![
            ChatMessage { role: "system".into(), content: SYSTEM.into() },
            ChatMessage { role: "user".into(), content: format!("<context>\n{context}</context>\n\nQuestion: {}", probe.question) },
        ],
        max_tokens: 300,
    };
    match model.complete(&request, Instant::now() + Duration::from_secs(120)) {
        Ok(answer) => {
            let lower = answer.to_lowercase();
            let missing: Vec<String> = probe.expect.iter().filter(|e| !lower.contains(&e.to_lowercase())).cloned().collect();
            Answer { question: probe.question, passed: missing.is_empty(), answer: answer.chars().take(ANSWER_CHARS).collect(), missing }
        }
        Err(e) => Answer { question: probe.question, passed: false, answer: format!("no answer: {e}"), missing: probe.expect.clone() },
    }
}
