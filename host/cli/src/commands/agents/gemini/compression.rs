//! Whether Gemini CLI is about to compress, decided as Gemini CLI 0.61.0 decides it.
//!
//! `ChatCompressionService.compress` (packages/core/src/context/chatCompressionService.ts)
//! fires `PreCompress` first and only then decides: a manual `/compress` always compresses; an
//! automatic one (before every turn of the model, `GeminiClient.processTurn` in
//! packages/core/src/core/client.ts) only when the chat's last prompt token count reaches
//! `threshold × tokenLimit(model)`:
//! - the threshold is `model.compressionThreshold` of the merged settings (system defaults,
//!   user, trusted workspace, system: packages/cli/src/config/settings.ts `mergeSettings`),
//!   0.5 when unset or 0 (`Config.getCompressionThreshold`, `DEFAULT_COMPRESSION_TOKEN_THRESHOLD`);
//! - the limit is 1,048,576 tokens, 256,000 for the Gemma 4 models
//!   (packages/core/src/core/tokenLimits.ts);
//! - the count (`GeminiChat.lastPromptTokenCount`, packages/core/src/core/geminiChat.ts) is the
//!   `promptTokenCount` of the chat's latest response, which the session file records as that
//!   message's `tokens.input`; whenever the chat is built or its history replaced (a new
//!   session, a resume, after a compression) it is an estimate of the history
//!   (`estimateTokenCountSync`, packages/core/src/utils/tokenCalculation.ts), and the session
//!   file gets the history as a `$set` of `messages` at that moment.
//!
//! Not seen from outside, so not predicted: a remote experiment's threshold (consulted only
//! when the setting is 0, the schema's default being 0.5), the truncation Gemini CLI does
//! instead after a failed compression, a history too short to split, and an empty snapshot
//! (Gemini CLI then keeps the history): Cairn archives then, and nothing is re-injected since
//! the session file shows no new snapshot.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

/// `DEFAULT_COMPRESSION_TOKEN_THRESHOLD`.
const DEFAULT_THRESHOLD: f64 = 0.5;
/// `tokenLimit` of every Gemini model (and `DEFAULT_TOKEN_LIMIT`).
const DEFAULT_TOKEN_LIMIT: u64 = 1_048_576;
/// `GEMMA_4_TOKEN_LIMIT`, for `gemma-4-31b-it` and `gemma-4-26b-a4b-it`.
const GEMMA_4_TOKEN_LIMIT: u64 = 256_000;

/// What the session file and settings say about the next compression check.
#[derive(Debug)]
pub struct Prediction {
    pub prompt_tokens: u64,
    pub threshold: f64,
    pub token_limit: u64,
}

impl Prediction {
    /// Gemini CLI's test, `originalTokenCount < threshold * tokenLimit(model)` meaning no.
    pub fn compresses(&self) -> bool {
        self.prompt_tokens as f64 >= self.threshold * self.token_limit as f64
    }
}

/// The prediction for the session in `transcript`, whose workspace is `cwd`.
pub fn predict(transcript: &Path, cwd: Option<&Path>) -> Result<Prediction> {
    let text = match std::fs::read_to_string(transcript) {
        // Nothing recorded yet: nothing to compress either.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        read => read.with_context(|| format!("reading {}", transcript.display()))?,
    };
    let (prompt_tokens, model) = last_prompt_tokens(&text, &transcript.display().to_string())?;
    let settings = Settings::load(cwd);
    let model = model.or_else(|| settings.string("/model/name"));
    let threshold = settings.number("/model/compressionThreshold").filter(|t| *t > 0.0).unwrap_or(DEFAULT_THRESHOLD);
    let token_limit = match model.as_deref() {
        Some("gemma-4-31b-it" | "gemma-4-26b-a4b-it") => GEMMA_4_TOKEN_LIMIT,
        _ => DEFAULT_TOKEN_LIMIT,
    };
    Ok(Prediction { prompt_tokens, threshold, token_limit })
}

/// The chat's last prompt token count as Gemini CLI holds it, from its session file, and the
/// model of the latest response.
fn last_prompt_tokens(text: &str, name: &str) -> Result<(u64, Option<String>)> {
    let mut count = 0;
    let mut model = None;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).with_context(|| format!("{name}:{}: not JSON", i + 1))?;
        if let Some(messages) = value.pointer("/$set/messages").and_then(Value::as_array) {
            count = estimate_history(messages);
        } else if value.get("id").is_some() && value.get("type").and_then(Value::as_str) == Some("gemini") {
            if let Some(input) = value.pointer("/tokens/input").and_then(Value::as_u64) {
                count = input;
            }
            if let Some(m) = value.get("model").and_then(Value::as_str) {
                model = Some(m.to_string());
            }
        }
    }
    Ok((count, model))
}

/// `estimateTokenCountSync` over every part of the history.
fn estimate_history(messages: &[Value]) -> u64 {
    let parts: Vec<Value> = messages
        .iter()
        .flat_map(|m| match m.get("content") {
            Some(Value::Array(parts)) => parts.clone(),
            Some(Value::String(text)) => vec![serde_json::json!({ "text": text })],
            _ => Vec::new(),
        })
        .collect();
    estimate_parts(&parts, 0).floor() as u64
}

/// Gemini CLI's heuristic: a quarter token per ASCII UTF-16 unit, 1.5 per other unit (a
/// quarter per unit past 100,000), responses and other parts by their JSON's length, 3,000 per
/// image and 25,800 per PDF.
fn estimate_parts(parts: &[Value], depth: usize) -> f64 {
    if depth > 3 {
        return 0.0;
    }
    let mut tokens = 0.0;
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            tokens += estimate_text(text);
        } else if let Some(response) = part.get("functionResponse") {
            let name = response.get("name").and_then(Value::as_str).map_or(0, utf16_len);
            tokens += name as f64 / 4.0;
            match response.get("response") {
                Some(Value::String(s)) => tokens += utf16_len(s) as f64 / 4.0,
                Some(Value::Null) | None => {}
                Some(other) => tokens += utf16_len(&other.to_string()) as f64 / 4.0,
            }
            if let Some(nested) = response.get("parts").and_then(Value::as_array).filter(|p| !p.is_empty()) {
                tokens += estimate_parts(nested, depth + 1).floor();
            }
        } else {
            let mime = ["inlineData", "fileData"].iter().find_map(|k| part.get(*k)?.get("mimeType")?.as_str()).unwrap_or_default();
            tokens += if mime.starts_with("image/") {
                3000.0
            } else if mime.starts_with("application/pdf") {
                25_800.0
            } else {
                utf16_len(&part.to_string()) as f64 / 4.0
            };
        }
    }
    tokens
}

fn estimate_text(text: &str) -> f64 {
    let units = utf16_len(text);
    if units > 100_000 {
        return units as f64 / 4.0;
    }
    text.encode_utf16().map(|u| if u <= 127 { 0.25 } else { 1.5 }).sum()
}

fn utf16_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Gemini CLI's settings files, lowest precedence first.
struct Settings(Vec<Value>);

impl Settings {
    fn load(cwd: Option<&Path>) -> Self {
        let system = std::env::var_os("GEMINI_CLI_SYSTEM_SETTINGS_PATH").map_or_else(|| PathBuf::from("/etc/gemini-cli/settings.json"), PathBuf::from);
        let defaults = std::env::var_os("GEMINI_CLI_SYSTEM_DEFAULTS_PATH").map_or_else(|| system.with_file_name("system-defaults.json"), PathBuf::from);
        let home = std::env::var_os("GEMINI_CLI_HOME").or_else(|| std::env::var_os("HOME")).map(PathBuf::from);
        let user = home.as_ref().map(|h| h.join(".gemini/settings.json"));
        // The workspace's file counts only in a trusted folder; hooks run only in one too.
        let workspace = cwd.map(|d| d.join(".gemini/settings.json")).filter(|w| Some(w) != user.as_ref());
        let files = [Some(defaults), user, workspace, Some(system)];
        Settings(files.into_iter().flatten().filter_map(|f| std::fs::read_to_string(f).ok()).filter_map(|t| serde_json::from_str(&strip_comments(&t)).ok()).collect())
    }

    fn value(&self, pointer: &str) -> Option<&Value> {
        self.0.iter().rev().find_map(|s| s.pointer(pointer))
    }

    fn number(&self, pointer: &str) -> Option<f64> {
        self.value(pointer).and_then(Value::as_f64)
    }

    fn string(&self, pointer: &str) -> Option<String> {
        self.value(pointer).and_then(Value::as_str).map(str::to_string)
    }
}

/// JSON with `//` and `/* */` comments (Gemini CLI reads its settings through
/// strip-json-comments) as plain JSON; comments become spaces, strings are kept.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_latest_response_counts_and_a_new_history_is_estimated() {
        let history = json!({"$set": {"messages": [{"id": "a", "type": "user", "content": [{"text": "x".repeat(4000)}]}]}});
        let response = json!({"id": "b", "type": "gemini", "content": "", "tokens": {"input": 900000}, "model": "gemini-2.5-pro"});
        let text = format!("{{\"sessionId\":\"s\",\"projectHash\":\"p\"}}\n{history}\n{response}\n");
        assert_eq!(last_prompt_tokens(&text, "f").unwrap(), (900000, Some("gemini-2.5-pro".into())));
        // A compression (or a resume) sets the history again: its estimate counts from then on.
        let text = format!("{text}{history}\n");
        assert_eq!(last_prompt_tokens(&text, "f").unwrap().0, 1000);
    }

    #[test]
    fn estimates_as_gemini_cli_does() {
        assert_eq!(estimate_text("abcd"), 1.0);
        assert_eq!(estimate_text("é"), 1.5);
        let response = json!({"functionResponse": {"name": "read", "response": {"output": "xy"}}});
        // "read" (1) + {"output":"xy"} (15 units / 4).
        assert_eq!(estimate_parts(&[response], 0), 1.0 + 15.0 / 4.0);
    }

    #[test]
    fn comments_are_stripped_but_not_inside_strings() {
        let text = "{\n  // the model\n  \"model\": {\"name\": \"a//b\", /* x */ \"compressionThreshold\": 0.2}\n}\n";
        let value: Value = serde_json::from_str(&strip_comments(text)).unwrap();
        assert_eq!(value["model"]["name"], "a//b");
        assert_eq!(value["model"]["compressionThreshold"], 0.2);
    }
}
