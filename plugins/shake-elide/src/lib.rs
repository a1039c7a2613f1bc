//! `shake-elide`: compaction without a model. Old tool outputs, superseded file reads, old
//! thinking and large fenced blocks are replaced by placeholders that name a recover URI; the
//! originals go to the archive. Tool calls are never touched, so call/result pairing survives,
//! and nothing in the host's protected head or verbatim tail is changed.

use std::collections::HashMap;

use cairn_sdk::lent::{Batched, Conversation};
use cairn_sdk::types::*;
use cairn_sdk::{count_tokens, log_info, parse_config, placeholder_text, recount, store_artifact, Strategy};
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
    /// Read the window's entries in one batch instead of only the texts a decision needs
    /// (`cairn bench` measures both ways of reading the lent conversation).
    read_window_in_one_batch: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_tokens: 200,
            fence_min_tokens: 400,
            protected_tools: Vec::new(),
            read_tools: ["read", "Read", "read_file", "view", "cat"].map(String::from).to_vec(),
            read_window_in_one_batch: false,
        }
    }
}

/// Public so the same code can run natively (`cairn bench` compares both builds).
pub struct ShakeElide;

/// Reads the conversation's outlines, and the text of a part only where a decision needs it:
/// what it elides goes to the archive by index (`set-aside`), without crossing, and every
/// entry it keeps goes back as its index.
impl Strategy for ShakeElide {
    fn compact_lent(conversation: &dyn Conversation, request: Request) -> Result<WireOutcome, StrategyError> {
        let config: Config = parse_config(&request.config)?;
        let outlines = conversation.outlines(0, conversation.len());
        let calls = Calls::of(&outlines);
        let window = request.protected_head as usize..(request.tail_start as usize).min(outlines.len());
        let batched;
        let conversation = match config.read_window_in_one_batch {
            true => {
                batched = Batched::new(conversation, window.start as u32, window.end as u32);
                &batched as &dyn Conversation
            }
            false => conversation,
        };

        let mut changed: Vec<(usize, Entry)> = Vec::new();
        // Pinned entries must come through unchanged; the host checks it.
        for i in window.filter(|&i| !outlines[i].pinned) {
            let shaken = Shaken { conversation, index: i, config: &config, calls: &calls };
            if let Some(mut entry) = shaken.entry(&outlines[i])? {
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
                Some((_, entry)) => Replacement::Entry(entry),
                None => Replacement::Original(i as u32),
            })
            .collect();
        let replaced = EntryRange { first: outlines[first].id.clone(), last: outlines[last].id.clone() };
        Ok(WireOutcome { replaced, replacement, checkpoint: None, seed: None, retrospective: None })
    }
}

/// One entry of the window being shaken.
struct Shaken<'a> {
    conversation: &'a dyn Conversation,
    index: usize,
    config: &'a Config,
    calls: &'a Calls,
}

impl Shaken<'_> {
    fn text(&self, part: usize) -> String {
        self.conversation.part_text(self.index as u32, part as u32).unwrap_or_default()
    }

    fn tokens(&self, part: usize) -> u32 {
        self.conversation.part_tokens(self.index as u32, part as u32).unwrap_or(0)
    }

    fn set_aside(&self, part: usize) -> Result<String, StrategyError> {
        self.conversation.set_aside(self.index as u32, part as u32)
    }

    /// The entry with what is worth eliding elided; `None` when nothing is. A text's tokens
    /// never exceed its bytes, so parts smaller than a threshold are passed over unread.
    fn entry(&self, outline: &EntryOutline) -> Result<Option<Entry>, StrategyError> {
        let config = self.config;
        let operator = outline.origin == Origin::Operator;
        let mut elided: Vec<Option<Part>> = vec![None; outline.parts.len()];
        for (p, part) in outline.parts.iter().enumerate() {
            match part {
                PartOutline::ToolResult(result) => {
                    if result.elided.is_some() {
                        continue;
                    }
                    let (name, path) = self.calls.by_id.get(&result.call_id).map(|(n, p)| (n.as_str(), p.as_deref())).unwrap_or(("", None));
                    if config.protected_tools.iter().any(|t| t == name) {
                        continue;
                    }
                    let stale_path = path.filter(|path| config.read_tools.iter().any(|t| t == name) && self.calls.last_touch.get(*path).is_some_and(|&at| at > self.index));
                    if stale_path.is_none() && result.bytes < config.min_tokens {
                        continue;
                    }
                    if result.bytes < OLD_PLACEHOLDER_MAX_BYTES && is_old_placeholder(&self.text(p)) {
                        continue;
                    }
                    let tokens = self.tokens(p);
                    if stale_path.is_none() && tokens < config.min_tokens {
                        continue;
                    }
                    let uri = self.set_aside(p)?;
                    let what = match &stale_path {
                        Some(path) => format!("superseded read of {path}, elided"),
                        None => "elided".to_string(),
                    };
                    elided[p] = Some(Part::ToolResult(ToolResult { call_id: result.call_id.clone(), content: placeholder_text(&what, tokens, &uri), is_error: result.is_error, elided: Some(uri) }));
                }
                PartOutline::Thinking(bytes) if *bytes >= config.min_tokens => {
                    let tokens = self.tokens(p);
                    if tokens >= config.min_tokens {
                        let uri = self.set_aside(p)?;
                        elided[p] = Some(Part::Placeholder(Placeholder { text: placeholder_text("thinking elided", tokens, &uri), uri: Some(uri) }));
                    }
                }
                // Operator text is intent and stays verbatim.
                PartOutline::Text(bytes) if !operator && *bytes >= config.fence_min_tokens => {
                    if let Some(shaken) = elide_fences(&self.text(p), config.fence_min_tokens)? {
                        elided[p] = Some(Part::Text(shaken));
                    }
                }
                _ => {}
            }
        }
        if elided.iter().all(Option::is_none) {
            return Ok(None);
        }
        let parts = outline.parts.iter().zip(elided).enumerate().map(|(p, (part, elided))| elided.unwrap_or_else(|| self.whole(p, part))).collect();
        Ok(Some(Entry { id: outline.id.clone(), role: outline.role, origin: outline.origin, parts, tokens: outline.tokens, turn: outline.turn, pinned: outline.pinned }))
    }

    /// A part kept as it is, read whole.
    fn whole(&self, p: usize, part: &PartOutline) -> Part {
        match part {
            PartOutline::Text(_) => Part::Text(self.text(p)),
            PartOutline::Thinking(_) => Part::Thinking(self.text(p)),
            PartOutline::ToolCall(call) => Part::ToolCall(call.clone()),
            PartOutline::ToolResult(r) => Part::ToolResult(ToolResult { call_id: r.call_id.clone(), content: self.text(p), is_error: r.is_error, elided: r.elided.clone() }),
            PartOutline::Image(_) => Part::Image(self.text(p)),
            PartOutline::Placeholder(placeholder) => Part::Placeholder(placeholder.clone()),
        }
    }
}

/// The conversation's tool calls, their arguments parsed once each.
struct Calls {
    /// Each call's tool name and the file path its arguments name, by call id.
    by_id: HashMap<String, (String, Option<String>)>,
    /// The last entry index at which any call names each path.
    last_touch: HashMap<String, usize>,
}

impl Calls {
    fn of(outlines: &[EntryOutline]) -> Calls {
        let mut calls = Calls { by_id: HashMap::new(), last_touch: HashMap::new() };
        for (i, call) in outlines_calls(outlines) {
            let path = path_argument(&call.args);
            if let Some(path) = &path {
                calls.last_touch.insert(path.clone(), i);
            }
            calls.by_id.insert(call.id.clone(), (call.name.clone(), path));
        }
        calls
    }
}

fn outlines_calls(outlines: &[EntryOutline]) -> impl Iterator<Item = (usize, &ToolCall)> {
    outlines.iter().enumerate().flat_map(|(i, e)| {
        e.parts.iter().filter_map(move |p| match p {
            PartOutline::ToolCall(call) => Some((i, call)),
            _ => None,
        })
    })
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

/// Placeholders written before `elided` existed are at most this long.
const OLD_PLACEHOLDER_MAX_BYTES: u32 = 400;

/// A result set aside before the `elided` field existed: only its placeholder text says so.
fn is_old_placeholder(content: &str) -> bool {
    content.starts_with('[') && content.contains("— recover: artifact://") && content.len() < OLD_PLACEHOLDER_MAX_BYTES as usize
}

/// The file path a tool call's JSON arguments name, under the keys agents commonly use (the
/// first of them holding a string). Every other value is skipped unread: an edit's arguments
/// hold whole files.
fn path_argument(args: &str) -> Option<String> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    #[derive(Deserialize)]
    struct Keys {
        path: Option<Value>,
        file_path: Option<Value>,
        #[serde(rename = "filePath")]
        file_path_camel: Option<Value>,
        filename: Option<Value>,
    }
    let keys: Keys = serde_json::from_str(args).ok()?;
    [keys.path, keys.file_path, keys.file_path_camel, keys.filename].into_iter().find_map(|value| match value? {
        Value::Text(path) => Some(path),
        Value::Other(_) => None,
    })
}

// Exported only in Wasm: `cairn bench` compiles this file natively and calls `ShakeElide`.
#[cfg(target_arch = "wasm32")]
cairn_sdk::export_strategy!(ShakeElide);

#[cfg(test)]
mod tests {
    use super::*;

    struct CharsHost;

    impl cairn_sdk::native::Host for CharsHost {
        fn count_tokens(&self, text: &str) -> u32 {
            text.len() as u32 / 4
        }
        fn put_artifact(&self, content: &str) -> Result<String, String> {
            Ok(format!("artifact://a-0/{}", content.len()))
        }
        fn log(&self, _: cairn_sdk::host::log::Level, _: &str) {}
    }

    fn entry(id: &str, role: Role, origin: Origin, parts: Vec<Part>) -> Entry {
        Entry { id: id.into(), role, origin, parts, tokens: 10, turn: 1, pinned: false }
    }

    fn session() -> Vec<Entry> {
        let call = |id: &str, path: &str| Part::ToolCall(ToolCall { id: id.into(), name: "read".into(), args: format!("{{\"path\":\"{path}\"}}") });
        let result = |id: &str, content: String| Part::ToolResult(ToolResult { call_id: id.into(), content, is_error: false, elided: None });
        vec![
            entry("s", Role::System, Origin::Harness, vec![Part::Text("system".into())]),
            entry("u", Role::User, Origin::Operator, vec![Part::Text("go".into())]),
            entry("a1", Role::Assistant, Origin::Agent, vec![Part::Thinking("t".repeat(2_000)), call("c1", "a.rs")]),
            entry("t1", Role::Tool, Origin::Tool, vec![result("c1", "x".repeat(4_000))]),
            entry("a2", Role::Assistant, Origin::Agent, vec![call("c2", "b.rs")]),
            entry("t2", Role::Tool, Origin::Tool, vec![result("c2", "short".into())]),
            entry("a3", Role::Assistant, Origin::Agent, vec![Part::Text(format!("small\n```\n{}\n```\n", "y".repeat(2_000))), call("c3", "a.rs")]),
            entry("t3", Role::Tool, Origin::Tool, vec![result("c3", "short".into())]),
            entry("a4", Role::Assistant, Origin::Agent, vec![Part::Text("done".into())]),
        ]
    }

    fn request(config: &str) -> Request {
        Request {
            purpose: RequestKind::Compact,
            archive_id: "a-0".into(),
            protected_head: 2,
            tail_start: 8,
            token_target: 0,
            preserve: None,
            resume: None,
            previous_checkpoint: None,
            previous_checkpoint_through: None,
            config: config.into(),
        }
    }

    #[test]
    fn reading_only_what_decisions_need_or_the_window_in_one_batch_answers_alike() {
        cairn_sdk::native::install(Box::new(CharsHost));
        let session = session();
        let lean = ShakeElide::compact_lent(&session, request("")).unwrap();
        let batched = ShakeElide::compact_lent(&session, request(r#"{"read_window_in_one_batch": true}"#)).unwrap();
        assert_eq!(format!("{lean:?}"), format!("{batched:?}"));
        // The thinking, the superseded read and the fenced block are elided; the entries between
        // them stay, and go back as their indexes.
        assert_eq!((lean.replaced.first.as_str(), lean.replaced.last.as_str()), ("a1", "a3"));
        let kept: Vec<u32> = lean.replacement.iter().filter_map(|r| if let Replacement::Original(i) = r { Some(*i) } else { None }).collect();
        assert_eq!(kept, [4, 5]);
        let Replacement::Entry(read) = &lean.replacement[1] else { panic!("{lean:?}") };
        assert!(matches!(&read.parts[0], Part::ToolResult(r) if r.elided.is_some() && r.content.contains("superseded read of a.rs")), "{read:?}");
    }

    #[test]
    fn the_path_is_the_first_common_key_holding_a_string() {
        assert_eq!(path_argument(r#"{"content":"fn main() {}","path":"src/main.rs"}"#).as_deref(), Some("src/main.rs"));
        assert_eq!(path_argument(r#"{"path":7,"filePath":"a.rs","filename":"b.rs"}"#).as_deref(), Some("a.rs"));
        assert_eq!(path_argument(r#"{"command":"ls"}"#), None);
        assert_eq!(path_argument("not json"), None);
    }

    #[test]
    fn old_placeholders_are_recognised_by_their_text() {
        assert!(is_old_placeholder(&placeholder_text("elided", 1_234, "artifact://a-1/2")));
        assert!(!is_old_placeholder("cargo test: 3 passed"));
    }
}
