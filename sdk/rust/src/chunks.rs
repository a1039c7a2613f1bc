//! Summaries that fit their model: a history too large for the model's context window is sent
//! in chunks, each chunk's summary folded into the next prompt as the previous summary (update
//! mode, as Pi and Codex update an earlier summary), and a "too long" answer is retried once
//! with a smaller chunk.
//!
//! The window comes from the host: a step granted `model` whose model has a known window finds
//! it in its config under the reserved key [`MODEL_CONTEXT_WINDOW_KEY`] ([`model_context_window`]
//! reads it; [`crate::parse_config`] leaves it out, so configs with `deny_unknown_fields` still
//! parse). The host refuses a prompt that does not fit, and a provider's own "too long" answer
//! reaches the plugin the same way: `failed("prompt too long: N tokens, the model's window is
//! M")` ([`too_long`] recognises it).
//!
//! ```no_run
//! use cairn_sdk::chunks::{model_context_window, Summarizer};
//! use cairn_sdk::{ask_model, count_tokens, model_unavailable};
//! # fn f(request: cairn_sdk::types::CompactRequest) -> Result<(), cairn_sdk::types::StrategyError> {
//! let summarizer = Summarizer { system: "You summarise.", max_tokens: 4096, window: model_context_window(&request.config), clamp_chars: 2000 };
//! let prompt = |conversation: &str, previous: Option<&str>| match previous {
//!     None => format!("{conversation}\n\nSummarise the conversation above."),
//!     Some(previous) => format!("Previous summary:\n{previous}\n\nSince then:\n{conversation}\n\nUpdate the summary."),
//! };
//! let done = summarizer.run(&request.entries, None, &prompt, &mut ask_model, &count_tokens).map_err(model_unavailable)?;
//! # let _ = done.reply; Ok(()) }
//! ```

use crate::host::model::ModelError;
use crate::prompt::{clean_reply, entry_lines};
use crate::types::Entry;

/// The config key the host sets, for steps granted `model`, to the model's context window in
/// tokens. Reserved: the host overwrites whatever a policy writes there.
pub const MODEL_CONTEXT_WINDOW_KEY: &str = "model_context_window";

/// The stable start of the message of a prompt that did not fit (`failed(…)`).
pub const TOO_LONG_PREFIX: &str = "prompt too long";

/// Framing tokens per chat message, as the host counts them.
const MESSAGE_OVERHEAD: u32 = 4;
/// The smallest room for conversation a chunk gets, whatever else takes the window.
const MIN_CHUNK_TOKENS: u32 = 256;

/// The model's context window the host put in the step's config, if any.
pub fn model_context_window(config: &str) -> Option<u32> {
    let value: serde_json::Value = serde_json::from_str(config).ok()?;
    value.get(MODEL_CONTEXT_WINDOW_KEY)?.as_u64().and_then(|n| u32::try_from(n).ok()).filter(|&n| n > 0)
}

/// A "too long" answer: the prompt's size and the model's window where the message gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong {
    pub prompt_tokens: Option<u32>,
    pub window: Option<u32>,
}

/// Whether `error` says the prompt did not fit the model's window (the host's refusal, or the
/// provider's answer as the host passes it on): `failed("prompt too long: N tokens, the
/// model's window is M …")`.
pub fn too_long(error: &ModelError) -> Option<TooLong> {
    let ModelError::Failed(message) = error else { return None };
    let rest = message.strip_prefix(TOO_LONG_PREFIX)?;
    let number_after = |marker: &str| -> Option<u32> {
        let start = rest.find(marker)? + marker.len();
        rest[start..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
    };
    Some(TooLong { prompt_tokens: number_after(": "), window: number_after("window is ") })
}

/// For strategies that hold `model` as optional, as [`crate::ask_model_or_fallback`] does for
/// one call: `Some(answer)` when the model answered; `None` when the policy does not grant
/// `model` (logged as `model not granted: {fallback}`); any other model error is the step's
/// error ([`crate::model_unavailable`]).
pub fn model_or_fallback<T>(result: Result<T, ModelError>, fallback: &str) -> Result<Option<T>, crate::types::StrategyError> {
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(ModelError::Denied(_)) => {
            crate::log_info(&format!("model not granted: {fallback}"));
            Ok(None)
        }
        Err(e) => Err(crate::model_unavailable(e)),
    }
}

/// How to ask for a summary of entries that may not fit in one prompt.
#[derive(Debug, Clone, Copy)]
pub struct Summarizer<'a> {
    pub system: &'a str,
    /// The reply budget of each call; with a known window at most a quarter of it.
    pub max_tokens: u32,
    /// The model's context window ([`model_context_window`]); `None`: one prompt with
    /// everything, chunked only if the model answers "too long" with its window.
    pub window: Option<u32>,
    /// Tool output, arguments and thinking are clamped to this many chars first.
    pub clamp_chars: usize,
}

/// The last chunk's reply (the summary of everything) and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunked {
    pub reply: String,
    /// Model calls that answered: one per chunk.
    pub chunks: u32,
    /// Whether a "too long" answer was retried with a smaller chunk.
    pub retried: bool,
}

impl Summarizer<'_> {
    /// The reply budget asked for each call.
    pub fn answer_tokens(&self) -> u32 {
        match self.window {
            Some(window) => self.max_tokens.min(window / 4).max(1),
            None => self.max_tokens,
        }
    }

    /// Summarises `entries`, in chunks when they do not fit. `prompt(conversation, previous)`
    /// writes the user message for one chunk: `conversation` is a `<conversation>` block,
    /// `previous` the summary so far (`previous` as given for the first chunk, then each
    /// chunk's reply, cleaned). `ask(system, user, max_tokens)` calls the model
    /// ([`crate::ask_model`]); `count` counts tokens ([`crate::count_tokens`]).
    ///
    /// Each chunk's prompt leaves room for the answer and a tenth of the window as margin (the
    /// host's tokenizer is not every model's). One "too long" answer is retried with a chunk
    /// half the size (and the window it names, when the step was not told one); a second is
    /// the error.
    pub fn run(
        &self,
        entries: &[Entry],
        previous: Option<String>,
        prompt: &dyn Fn(&str, Option<&str>) -> String,
        ask: &mut dyn FnMut(&str, &str, u32) -> Result<String, ModelError>,
        count: &dyn Fn(&str) -> u32,
    ) -> Result<Chunked, ModelError> {
        let lines = entry_lines(entries, self.clamp_chars);
        // Counted once a bound is known (without a window, one prompt takes everything).
        let mut sizes: Vec<u32> = Vec::new();
        let mut window = self.window;
        let mut cap: Option<u32> = None;
        let mut previous = previous;
        let (mut at, mut chunks, mut retried) = (0, 0, false);
        let system_tokens = count(self.system) + 2 * MESSAGE_OVERHEAD;
        loop {
            let this = Summarizer { window, ..*self };
            let answer = this.answer_tokens();
            // Room for conversation: the window less the answer, the margin, the system prompt
            // and this chunk's prompt around an empty conversation (the previous summary too).
            let room = match window {
                None => u32::MAX,
                Some(window) => {
                    let frame = count(&prompt("<conversation>\n</conversation>", previous.as_deref())) + system_tokens;
                    window.saturating_sub(answer).saturating_sub(window / 10).saturating_sub(frame).max(MIN_CHUNK_TOKENS)
                }
            };
            let room = cap.map_or(room, |cap| cap.min(room));
            if room < u32::MAX && sizes.is_empty() {
                sizes = lines.iter().map(|l| count(l)).collect();
            }
            let size = |i: usize| sizes.get(i).copied().unwrap_or(0);
            // Whole entries while they fit, at least one (clipped when it alone is too big).
            let mut end = at;
            let mut used = 0u32;
            while end < lines.len() && (end == at || used.saturating_add(size(end)) <= room) {
                used = used.saturating_add(size(end));
                end += 1;
            }
            let body: String = if end == at + 1 && size(at) > room { clip_to(&lines[at], room, size(at), count) } else { lines[at..end].concat() };
            let conversation = format!("<conversation>\n{body}</conversation>");
            let user = prompt(&conversation, previous.as_deref());
            match ask(self.system, &user, answer) {
                Ok(reply) => {
                    previous = Some(clean_reply(&reply).to_string());
                    chunks += 1;
                    at = end;
                    if at >= lines.len() {
                        return Ok(Chunked { reply, chunks, retried });
                    }
                }
                Err(error) => match too_long(&error) {
                    Some(told) if !retried => {
                        retried = true;
                        if window.is_none() {
                            window = told.window;
                        }
                        cap = Some((count(&body) / 2).max(MIN_CHUNK_TOKENS / 2));
                    }
                    _ => return Err(error),
                },
            }
        }
    }
}

/// One entry's text cut to about `room` tokens (head and tail kept), saying how much went.
fn clip_to(line: &str, room: u32, tokens: u32, count: &dyn Fn(&str) -> u32) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut keep = (chars.len() as u64 * room as u64 / tokens.max(1) as u64) as usize;
    loop {
        let head: String = chars[..keep / 2].iter().collect();
        let tail: String = chars[chars.len() - keep / 2..].iter().collect();
        let text = format!("{head}\n[… {} chars left out to fit the model's window]\n{tail}\n", chars.len() - 2 * (keep / 2));
        if keep == 0 || count(&text) <= room {
            return text;
        }
        keep = keep * 9 / 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Origin, Part, Role};

    fn quarter(text: &str) -> u32 {
        text.chars().count().div_ceil(4) as u32
    }
    fn entries(n: usize, chars: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| Entry { id: format!("e{i}"), role: Role::User, origin: Origin::Operator, parts: vec![Part::Text(format!("{i}:{}", "x".repeat(chars)))], tokens: 0, turn: 0, pinned: false })
            .collect()
    }
    fn prompt(conversation: &str, previous: Option<&str>) -> String {
        match previous {
            None => format!("{conversation}\nSummarise."),
            Some(p) => format!("<previous-summary>{p}</previous-summary>\n{conversation}\nUpdate."),
        }
    }

    #[test]
    fn reads_the_window_and_recognises_too_long() {
        assert_eq!(model_context_window(r#"{"clamp_chars":10,"model_context_window":8192}"#), Some(8192));
        assert_eq!(model_context_window(""), None);
        let e = ModelError::Failed("prompt too long: 9000 tokens, the model's window is 8192 (This model's maximum…)".into());
        assert_eq!(too_long(&e), Some(TooLong { prompt_tokens: Some(9000), window: Some(8192) }));
        assert_eq!(too_long(&ModelError::Failed("prompt too long".into())), Some(TooLong { prompt_tokens: None, window: None }));
        assert_eq!(too_long(&ModelError::Failed("HTTP 400: bad".into())), None);
        assert_eq!(too_long(&ModelError::Unavailable("prompt too long".into())), None);
    }

    #[test]
    fn an_oversized_history_goes_in_chunks_that_fit_and_each_summary_is_folded_in() {
        let s = Summarizer { system: "sys", max_tokens: 4096, window: Some(8192), clamp_chars: 2000 };
        let mut sent = Vec::new();
        let mut ask = |system: &str, user: &str, max: u32| -> Result<String, ModelError> {
            assert_eq!(max, 2048);
            sent.push(quarter(system) + quarter(user) + 8);
            Ok(format!("summary {}", sent.len()))
        };
        let done = s.run(&entries(100, 1000), Some("old".into()), &prompt, &mut ask, &quarter).unwrap();
        assert!(done.chunks >= 4, "{done:?}");
        assert_eq!(done.reply, format!("summary {}", done.chunks));
        assert!(!done.retried);
        assert!(sent.iter().all(|&n| n + 2048 <= 8192), "{sent:?}");
        assert_eq!(sent.len() as u32, done.chunks);
    }

    #[test]
    fn one_too_long_answer_is_retried_smaller_and_a_second_is_the_error() {
        let s = Summarizer { system: "sys", max_tokens: 1000, window: None, clamp_chars: 2000 };
        let mut sizes = Vec::new();
        let mut ask = |_: &str, user: &str, _: u32| -> Result<String, ModelError> {
            sizes.push(quarter(user));
            if quarter(user) > 3000 {
                return Err(ModelError::Failed(format!("prompt too long: {} tokens, the model's window is 4000", quarter(user))));
            }
            Ok("ok".into())
        };
        let done = s.run(&entries(40, 1000), None, &prompt, &mut ask, &quarter).unwrap();
        assert!(done.retried && done.chunks >= 4, "{done:?} {sizes:?}");
        assert!(sizes[0] > 3000 && sizes[1..].iter().all(|&n| n <= 3000), "{sizes:?}");

        let always = |_: &str, _: &str, _: u32| -> Result<String, ModelError> { Err(ModelError::Failed("prompt too long".into())) };
        let mut calls = 0;
        let mut counted = |a: &str, b: &str, c: u32| {
            calls += 1;
            always(a, b, c)
        };
        assert!(too_long(&s.run(&entries(5, 100), None, &prompt, &mut counted, &quarter).unwrap_err()).is_some());
        assert_eq!(calls, 2, "one retry, no more");
    }

    #[test]
    fn one_entry_larger_than_the_room_is_clipped() {
        let s = Summarizer { system: "sys", max_tokens: 1000, window: Some(4000), clamp_chars: 2000 };
        let mut biggest = 0;
        let mut ask = |_: &str, user: &str, _: u32| -> Result<String, ModelError> {
            biggest = biggest.max(quarter(user));
            assert!(user.contains("left out to fit the model's window") || !user.contains(&"x".repeat(20_000)));
            Ok("ok".into())
        };
        let done = s.run(&entries(1, 50_000), None, &prompt, &mut ask, &quarter).unwrap();
        assert_eq!(done.chunks, 1);
        assert!(biggest + 1000 <= 4000, "{biggest}");
    }
}
