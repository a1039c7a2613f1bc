//! `shake-elide`: compaction without a model. Old tool outputs, superseded file reads, old
//! thinking and large fenced blocks are replaced by placeholders that name a recover URI; the
//! originals go to the archive. Tool calls are never touched, so call/result pairing survives,
//! and nothing in the host's protected head or verbatim tail is changed.

use std::collections::HashMap;

use cairn_sdk::types::*;
use cairn_sdk::{count_tokens, log_info, parse_config, placeholder_text, range_of, recount, store_artifact, tool_calls, Strategy};
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    /// Tool outputs smaller than this stay.
    min_tokens: u32,
    /// Fenced blocks in agent text smaller than this stay.
    fence_min_tokens: u32,
    /// Tools whose outputs are never elided (e.g. a todo list the agent relies on).
    protected_tools: Vec<String>,
    /// Tools that read a file; a read followed by a later read or edit of the same path is stale.
    read_tools: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config { min_tokens: 200, fence_min_tokens: 400, protected_tools: Vec::new(), read_tools: ["read", "Read", "read_file", "view", "cat"].map(String::from).to_vec() }
    }
}

/// Public so the same code can run natively (`cairn bench` compares both builds).
pub struct ShakeElide;

impl Strategy for ShakeElide {
    fn compact(request: CompactRequest) -> Result<Outcome, StrategyError> {
        let config: Config = parse_config(&request.config)?;
        let entries = &request.entries;
        let calls = tool_calls(entries);
        let last_touch = last_touch_by_path(entries);
        let window = request.protected_head as usize..(request.tail_start as usize).min(entries.len());

        let mut changed: Vec<(usize, Entry)> = Vec::new();
        // Pinned entries must come through unchanged; the host checks it.
        for i in window.filter(|&i| !entries[i].pinned) {
            let mut entry = entries[i].clone();
            if shake_entry(&mut entry, i, &config, &calls, &last_touch)? {
                recount(&mut entry);
                changed.push((i, entry));
            }
        }
        let (Some(&(first, _)), Some(&(last, _))) = (changed.first(), changed.last()) else {
            return Err(StrategyError::NothingToDo("no tool output or block outside the protected window is large enough to elide".into()));
        };
        log_info(&format!("elided content in {} entries", changed.len()));
        let mut changed = changed.into_iter().peekable();
        let replacement = (first..=last)
            .map(|i| match changed.next_if(|(j, _)| *j == i) {
                Some((_, entry)) => entry,
                None => entries[i].clone(),
            })
            .collect();
        Ok(Outcome::new(range_of(entries, first, last), replacement))
    }
}

/// Elides what is worth eliding in one entry; true when something changed.
fn shake_entry(entry: &mut Entry, index: usize, config: &Config, calls: &HashMap<String, (String, String)>, last_touch: &HashMap<String, usize>) -> Result<bool, StrategyError> {
    let mut changed = false;
    let operator = entry.origin == Origin::Operator;
    for part in entry.parts.iter_mut() {
        match part {
            Part::ToolResult(result) => {
                if is_elided(result) {
                    continue;
                }
                let (name, args) = calls.get(&result.call_id).map(|(n, a)| (n.as_str(), a.as_str())).unwrap_or(("", ""));
                if config.protected_tools.iter().any(|t| t == name) {
                    continue;
                }
                let stale_path = config.read_tools.iter().any(|t| t == name).then(|| path_argument(args)).flatten().filter(|path| last_touch.get(path).is_some_and(|&at| at > index));
                let tokens = count_tokens(&result.content);
                if stale_path.is_none() && tokens < config.min_tokens {
                    continue;
                }
                let uri = store(&result.content)?;
                let what = match &stale_path {
                    Some(path) => format!("superseded read of {path}, elided"),
                    None => "elided".to_string(),
                };
                result.content = placeholder_text(&what, tokens, &uri);
                result.elided = Some(uri);
                changed = true;
            }
            Part::Thinking(text) => {
                let tokens = count_tokens(text);
                if tokens >= config.min_tokens {
                    let uri = store(text)?;
                    *part = Part::Placeholder(Placeholder { text: placeholder_text("thinking elided", tokens, &uri), uri: Some(uri) });
                    changed = true;
                }
            }
            // Operator text is intent and stays verbatim.
            Part::Text(text) if !operator => {
                if let Some(shaken) = elide_fences(text, config.fence_min_tokens)? {
                    *text = shaken;
                    changed = true;
                }
            }
            _ => {}
        }
    }
    Ok(changed)
}

/// Replaces the body of each large fenced block (```…```) with a placeholder.
fn elide_fences(text: &str, min_tokens: u32) -> Result<Option<String>, StrategyError> {
    if !text.contains("```") {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut body: Option<String> = None;
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        match (&mut body, fence) {
            (None, true) => {
                out.push_str(line);
                body = Some(String::new());
            }
            (Some(inner), true) => {
                let tokens = count_tokens(inner);
                if tokens >= min_tokens {
                    let uri = store(inner)?;
                    out.push_str(&placeholder_text("elided", tokens, &uri));
                    out.push('\n');
                    changed = true;
                } else {
                    out.push_str(inner);
                }
                out.push_str(line);
                body = None;
            }
            (Some(inner), false) => inner.push_str(line),
            (None, false) => out.push_str(line),
        }
    }
    if let Some(unclosed) = body {
        out.push_str(&unclosed);
    }
    Ok(changed.then_some(out))
}

fn store(content: &str) -> Result<String, StrategyError> {
    store_artifact(content)
}

/// Already set aside: `elided` names the URI (results elided before the field existed carry
/// only the placeholder text).
fn is_elided(result: &ToolResult) -> bool {
    let content = &result.content;
    result.elided.is_some() || (content.starts_with('[') && content.contains("— recover: artifact://") && content.len() < 400)
}

/// The last entry index at which any tool call names each file path.
fn last_touch_by_path(entries: &[Entry]) -> HashMap<String, usize> {
    let mut last = HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        for part in &entry.parts {
            if let Part::ToolCall(call) = part {
                if let Some(path) = path_argument(&call.args) {
                    last.insert(path, i);
                }
            }
        }
    }
    last
}

/// The file path a tool call's JSON arguments name, under the keys agents commonly use.
fn path_argument(args: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(args).ok()?;
    ["path", "file_path", "filePath", "filename"].iter().find_map(|key| value.get(key)?.as_str().map(str::to_string))
}

// Exported only in Wasm: `cairn bench` compiles this file natively and calls `ShakeElide`.
#[cfg(target_arch = "wasm32")]
cairn_sdk::export_strategy!(ShakeElide);

#[cfg(test)]
mod tests {
    use super::*;

    fn result(content: &str, elided: Option<&str>) -> ToolResult {
        ToolResult { call_id: "c1".into(), content: content.into(), is_error: false, elided: elided.map(String::from) }
    }

    #[test]
    fn elided_results_are_recognised_by_their_uri() {
        let text = placeholder_text("elided", 1_234, "artifact://a-1/2");
        assert!(is_elided(&result(&text, Some("artifact://a-1/2"))));
        assert!(is_elided(&result("[anything]", Some("artifact://a-1/2"))));
        assert!(is_elided(&result(&text, None)), "the placeholder text alone, as written before `elided`");
        assert!(!is_elided(&result("cargo test: 3 passed", None)));
    }
}
