//! Helpers plugin authors keep needing: token counts, safe cut points, placeholders, logging,
//! config loading, agent requests and the model-or-fallback switch.

use std::ops::RangeInclusive;

use cairn_rules::{PartRef, RuleEntry};
// The host's own rules, one definition for host and plugins: placeholder text, `12,345`-style
// numbers, char clipping, and the seed limits (the last `SEED_MESSAGES` operator messages, at
// most `SEED_MESSAGE_CHARS` chars of each).
pub use cairn_rules::{clip_chars, placeholder_text, thousands, SEED_MESSAGES, SEED_MESSAGE_CHARS};
use serde::de::DeserializeOwned;

use crate::host::model::ModelError;
#[cfg(target_arch = "wasm32")]
use crate::host::tokens;
use crate::host::{log, model};
use crate::types::{AgentRequest, CompactRequest, Entry, EntryRange, Origin, Part, RequestKind, Role, StrategyError, TriggerDecision, TriggerInput};

/// Exact token count by the host's tokenizer (the `tokens` capability).
pub fn count_tokens(text: &str) -> u32 {
    #[cfg(target_arch = "wasm32")]
    return tokens::count(text);
    #[cfg(not(target_arch = "wasm32"))]
    return crate::native::host().count_tokens(text);
}

/// Stores `content` with this compaction's archive (the `archive:write` grant) and returns its
/// `artifact://` URI; a refusal or an unavailable archive is `unavailable`, so the chain
/// moves on.
pub fn store_artifact(content: &str) -> Result<String, StrategyError> {
    #[cfg(target_arch = "wasm32")]
    return crate::host::archive::put_artifact(content).map_err(|e| match e {
        crate::host::archive::ArchiveError::Denied(why) | crate::host::archive::ArchiveError::Unavailable(why) => StrategyError::Unavailable(format!("archive write: {why}")),
        other => StrategyError::Failed(format!("archive write: {other:?}")),
    });
    #[cfg(not(target_arch = "wasm32"))]
    return crate::native::host().put_artifact(content).map_err(|why| StrategyError::Unavailable(format!("archive write: {why}")));
}

/// A part's text: a text's, a thinking's, a tool result's content, a placeholder's text, an
/// image's reference, a tool call's arguments (what the host's `part-text` returns).
pub fn part_text(part: &Part) -> &str {
    match part {
        Part::Text(text) | Part::Thinking(text) | Part::Image(text) => text,
        Part::ToolCall(call) => &call.args,
        Part::ToolResult(result) => &result.content,
        Part::Placeholder(placeholder) => &placeholder.text,
    }
}

fn log(level: log::Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    log::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    crate::native::host().log(level, message);
}

/// Recounts an entry's tokens after its parts changed.
pub fn recount(entry: &mut Entry) {
    entry.tokens = count_tokens(&entry_text(entry));
}

/// The text the model reads in an entry, as the host counts it (tokens are counted of this).
pub fn entry_text(entry: &Entry) -> String {
    cairn_rules::entry_text(entry)
}

impl RuleEntry for Entry {
    fn parts(&self) -> impl Iterator<Item = PartRef<'_>> {
        self.parts.iter().map(|part| match part {
            Part::Text(text) => PartRef::Text(text),
            Part::Thinking(text) => PartRef::Thinking(text),
            Part::ToolCall(call) => PartRef::ToolCall { id: &call.id, name: &call.name, args: &call.args },
            Part::ToolResult(result) => PartRef::ToolResult { call_id: &result.call_id, content: &result.content },
            Part::Image(reference) => PartRef::Image(reference),
            Part::Placeholder(placeholder) => PartRef::Placeholder(&placeholder.text),
        })
    }
}

pub fn log_info(message: &str) {
    log(log::Level::Info, message);
}

pub fn log_warn(message: &str) {
    log(log::Level::Warn, message);
}

/// `cuts[i]` is true when history may be cut just before entry `i` without separating a
/// tool call from its result (no call made before `i` is answered at or after `i`).
/// `cuts[entries.len()]` is the end. The host checks the same rule on every outcome.
pub fn safe_cut_points(entries: &[Entry]) -> Vec<bool> {
    cairn_rules::safe_cuts(entries)
}

/// Maps each tool call id to the call's name and JSON arguments.
pub fn tool_calls(entries: &[Entry]) -> std::collections::HashMap<String, (String, String)> {
    entries
        .iter()
        .flat_map(|e| e.parts.iter())
        .filter_map(|p| match p {
            Part::ToolCall(call) => Some((call.id.clone(), (call.name.clone(), call.args.clone()))),
            _ => None,
        })
        .collect()
}

/// The range covering `entries[first..=last]`.
pub fn range_of(entries: &[Entry], first: usize, last: usize) -> EntryRange {
    EntryRange { first: entries[first].id.clone(), last: entries[last].id.clone() }
}

/// The text parts of an entry joined by newlines (no thinking, tool traffic or placeholders).
pub fn message_text(entry: &Entry) -> String {
    let texts: Vec<&str> = entry.parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(t.as_str()) } else { None }).collect();
    texts.join("\n")
}

/// True for what the operator typed: intent that summaries must keep verbatim. A checkpoint
/// Cairn wrote earlier is not, whatever origin a harness handed it back with.
pub fn is_operator_message(entry: &Entry) -> bool {
    entry.origin == Origin::Operator && entry.role == Role::User && !is_own_checkpoint(entry)
}

/// Whether `entry` holds a checkpoint Cairn wrote (its text starts with the checkpoint title).
pub fn is_own_checkpoint(entry: &Entry) -> bool {
    entry.parts.iter().find_map(|p| if let Part::Text(t) = p { Some(t) } else { None }).is_some_and(|t| cairn_rules::intent::is_checkpoint_text(t))
}

/// The last `max` chars of `text`.
pub fn tail_chars(text: &str, max: usize) -> &str {
    let len = text.chars().count();
    match text.char_indices().nth(len.saturating_sub(max)) {
        Some((at, _)) if len > max => &text[at..],
        _ => text,
    }
}

/// `text` clipped to at most `max` chars, ending in `…` when something was cut.
pub fn clip_ellipsis(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        format!("{}…", clip_chars(text, max.saturating_sub(1)).trim_end())
    }
}

/// The plugin's config: empty text means all defaults; unknown keys are an error (give the
/// struct `#[serde(deny_unknown_fields, default)]`). The key the host reserves for itself,
/// `model_context_window` ([`crate::chunks::model_context_window`] reads it), is left out.
pub fn parse_config<T: DeserializeOwned + Default>(text: &str) -> Result<T, StrategyError> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    let failed = |e: serde_json::Error| StrategyError::Failed(format!("config: {e}"));
    if text.contains(crate::chunks::MODEL_CONTEXT_WINDOW_KEY) || text.contains(crate::ledger::BUDGET_KEY) {
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(failed)?;
        if let Some(object) = value.as_object_mut() {
            object.remove(crate::chunks::MODEL_CONTEXT_WINDOW_KEY);
            object.remove(crate::ledger::BUDGET_KEY);
        }
        return serde_json::from_value(value).map_err(failed);
    }
    serde_json::from_str(text).map_err(failed)
}

impl StrategyError {
    /// What went wrong, whatever the kind.
    pub fn into_message(self) -> String {
        match self {
            StrategyError::Unavailable(why) | StrategyError::NothingToDo(why) | StrategyError::Failed(why) => why,
        }
    }
}

/// For plugins that have no error to return (triggers, commit policies): a broken config must
/// not stop maintenance, so it is logged as a warning and the defaults are used.
pub fn config_or_defaults<T: Default>(loaded: Result<T, String>) -> T {
    loaded.unwrap_or_else(|why| {
        log_warn(&format!("{why}; using the defaults"));
        T::default()
    })
}

/// A trigger's (or commit policy's) config as [`parse_config`] reads it, or the defaults with a
/// warning when it is broken (see [`config_or_defaults`]; check values there when some are invalid).
pub fn trigger_config<T: DeserializeOwned + Default>(text: &str) -> T {
    config_or_defaults(parse_config(text).map_err(StrategyError::into_message))
}

/// The agent's pending request as a decision, `compaction requested by the agent` or
/// `handover requested by the agent`, with `context` (e.g. `context at 63% of the window`) in
/// parentheses when given. None when nothing is pending or a cooldown is still running: a
/// request waits for the cooldown, like any automatic action.
pub fn pending_request_decision(input: &TriggerInput, context: Option<&str>) -> Option<TriggerDecision> {
    if input.cooldown_left > 0 {
        return None;
    }
    let AgentRequest { kind, .. } = input.pending_request.as_ref()?;
    let at = context.map(|c| format!(" ({c})")).unwrap_or_default();
    Some(match kind {
        RequestKind::Compact => TriggerDecision::Compact(format!("compaction requested by the agent{at}")),
        RequestKind::Handover => TriggerDecision::Handover(format!("handover requested by the agent{at}")),
    })
}

/// The entries a strategy replaces: `[protected_head, tail_start - 1]` (for a handover the host
/// sets `tail_start` to the end). Empty → `NothingToDo`.
pub fn replaceable_range(request: &CompactRequest) -> Result<RangeInclusive<usize>, StrategyError> {
    let first = request.protected_head as usize;
    let end = (request.tail_start as usize).min(request.entries.len());
    if end <= first {
        return Err(StrategyError::NothingToDo("no entries between the protected head and the verbatim tail".into()));
    }
    Ok(first..=end - 1)
}

/// A summary entry for the host to number: user role, `summary` origin, one text part.
pub fn summary_entry(text: String) -> Entry {
    Entry { id: String::new(), role: Role::User, origin: Origin::Summary, parts: vec![Part::Text(text)], tokens: 0, turn: 0, pinned: false }
}

/// A replacement for `replaced`: one summary entry, then the range's pinned entries unchanged
/// (the host refuses outcomes that drop or alter a pinned entry).
pub fn summary_replacement(replaced: &[Entry], text: String) -> Vec<Entry> {
    std::iter::once(summary_entry(text)).chain(replaced.iter().filter(|e| e.pinned).cloned()).collect()
}

/// One completion: a system prompt and a user message.
pub fn ask_model(system: &str, user: &str, max_tokens: u32) -> Result<String, ModelError> {
    let message = |role: &str, content: &str| model::Message { role: role.into(), content: content.into() };
    model::complete(&model::CompletionRequest { messages: vec![message("system", system), message("user", user)], max_tokens })
}

/// For strategies that hold `model` as optional: asks the model once. `Some(reply)` when it
/// answered; `None` when the policy does not grant `model` (logged as `model not granted:
/// {fallback}`, where `fallback` names the model-free way taken instead); any other model error
/// is the step's error ([`model_unavailable`]), so the chain moves on.
pub fn ask_model_or_fallback(system: &str, user: &str, max_tokens: u32, fallback: &str) -> Result<Option<String>, StrategyError> {
    match ask_model(system, user, max_tokens) {
        Ok(reply) => Ok(Some(reply)),
        Err(ModelError::Denied(_)) => {
            log_info(&format!("model not granted: {fallback}"));
            Ok(None)
        }
        Err(e) => Err(model_unavailable(e)),
    }
}

/// A model error as a strategy error: every kind means "no usable model here" (`unavailable`).
/// Plugins that hold `model` as optional handle `Denied` before, by falling back.
pub fn model_unavailable(error: ModelError) -> StrategyError {
    StrategyError::Unavailable(match error {
        ModelError::Denied(why) => format!("model denied: {why}"),
        ModelError::Unavailable(why) => format!("model unavailable: {why}"),
        ModelError::Timeout => "model timed out".into(),
        ModelError::Failed(why) => format!("model failed: {why}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Placeholder, ToolCall, ToolResult, Usage};

    fn entry(parts: Vec<Part>) -> Entry {
        Entry { id: String::new(), role: Role::Assistant, origin: Origin::Agent, parts, tokens: 0, turn: 0, pinned: false }
    }
    fn call(id: &str) -> Entry {
        entry(vec![Part::ToolCall(ToolCall { id: id.into(), name: "bash".into(), args: "{}".into() })])
    }
    fn result(id: &str, content: &str, elided: Option<&str>) -> Entry {
        let result = ToolResult { call_id: id.into(), content: content.into(), is_error: false, elided: elided.map(String::from) };
        entry(vec![Part::ToolResult(result)])
    }

    #[test]
    fn the_host_rules_read_generated_entries() {
        let placeholder = Placeholder { text: "[thinking elided]".into(), uri: Some("artifact://a-1/1".into()) };
        let mixed = entry(vec![Part::Text("a".into()), Part::Placeholder(placeholder), Part::Thinking("t".into())]);
        assert_eq!(entry_text(&mixed), "a\n[thinking elided]\nt\n");
        assert_eq!(entry_text(&result("c1", "[elided]", Some("artifact://a-1/2"))), "[elided]\n");
        let entries = [call("c1"), mixed, result("c1", "ok", None), call("c2")];
        assert_eq!(safe_cut_points(&entries), [true, false, false, true, true]);
    }

    fn trigger_input(cooldown_left: u32, kind: Option<RequestKind>) -> TriggerInput {
        TriggerInput {
            usage: Usage { context_tokens: None, window: 0, reserve: 0 },
            turn: 1,
            turns_since_maintenance: None,
            cooldown_left,
            pending_request: kind.map(|kind| AgentRequest { kind, preserve: String::new(), resume: String::new() }),
            recent_outcomes: Vec::new(),
            config: String::new(),
        }
    }

    #[test]
    fn a_pending_request_waits_for_the_cooldown() {
        assert!(pending_request_decision(&trigger_input(0, None), None).is_none());
        assert!(pending_request_decision(&trigger_input(2, Some(RequestKind::Compact)), None).is_none());
        match pending_request_decision(&trigger_input(0, Some(RequestKind::Compact)), None) {
            Some(TriggerDecision::Compact(why)) => assert_eq!(why, "compaction requested by the agent"),
            other => panic!("{other:?}"),
        }
        match pending_request_decision(&trigger_input(0, Some(RequestKind::Handover)), Some("context at 63% of the window")) {
            Some(TriggerDecision::Handover(why)) => assert_eq!(why, "handover requested by the agent (context at 63% of the window)"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn configs_parse_strictly_and_say_what_is_wrong() {
        let loaded: Result<crate::checkpoint::CheckpointConfig, String> = parse_config("").map_err(StrategyError::into_message);
        assert_eq!(loaded.unwrap().max_tokens, 4096);
        let loaded: crate::checkpoint::CheckpointConfig = parse_config(r#"{"clamp_chars": 10}"#).unwrap();
        assert_eq!((loaded.clamp_chars, loaded.operator_budget_tokens), (10, 4000));
        let broken = parse_config::<crate::checkpoint::CheckpointConfig>(r#"{"clamp": 10}"#).map_err(StrategyError::into_message);
        assert!(broken.unwrap_err().starts_with("config: unknown field `clamp`"));
        assert_eq!(config_or_defaults(Ok(7u32)), 7);
    }
}
