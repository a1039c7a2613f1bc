//! Reading and writing transcripts in the formats Cairn meets, one file each: its own JSONL,
//! Pi coding-agent sessions, Claude Code sessions, Codex rollouts, Gemini CLI and OpenCode sessions, OpenAI chat messages and
//! Anthropic Messages API JSON. `chat` is what the two API writers share.
//!
//! Each file implements [`TranscriptFormat`]; the registry here — the built-in formats, one line
//! each in `impl Format`, and those a program adds with [`register`] — is the one list
//! detection, `--out-format`, MCP's `format` and the errors derive from. A new format is one
//! file and one line.

mod anthropic;
mod cairn_jsonl;
mod chat;
mod claude_code;
mod codex;
mod gemini;
mod openai;
mod opencode;
mod pi;
mod pi_writeback;
mod probe;
mod transcript_format;

pub use pi_writeback::iso8601;

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

use std::collections::HashMap;

use crate::transcript::{Part, Role, Transcript};

pub use transcript_format::{Format, TranscriptFormat};

/// The built-in formats, one line each (see [`TranscriptFormat`] to add one).
#[allow(non_upper_case_globals)]
impl Format {
    pub const Cairn: Format = Format(&cairn_jsonl::CairnJsonl);
    pub const Pi: Format = Format(&pi::PiSession);
    pub const ClaudeCode: Format = Format(&claude_code::ClaudeCodeLog);
    pub const Codex: Format = Format(&codex::CodexRollout);
    pub const Gemini: Format = Format(&gemini::GeminiSession);
    pub const OpenCode: Format = Format(&opencode::OpenCodeExport);
    pub const OpenAi: Format = Format(&openai::OpenAiChat);
    pub const Anthropic: Format = Format(&anthropic::AnthropicMessages);
}

/// The formats whose files open with a header of their own: detection tries them first.
const HEADED: [Format; 6] = [Format::Cairn, Format::Pi, Format::ClaudeCode, Format::Codex, Format::Gemini, Format::OpenCode];

/// Chat API documents: any JSON array or `{messages}` may be one, so detection tries them last,
/// after the formats registered at run time.
const CHAT_DOCUMENTS: [Format; 2] = [Format::OpenAi, Format::Anthropic];

/// The formats registered at run time ([`register`]).
static REGISTERED: std::sync::RwLock<Vec<Format>> = std::sync::RwLock::new(Vec::new());

impl Format {
    /// Every format Cairn reads, built in and registered, in the order detection tries them:
    /// the one list `--out-format`, MCP's `format` and the error for an unknown name derive from.
    pub fn all() -> Vec<Format> {
        let registered = REGISTERED.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        HEADED.iter().chain(registered.iter()).chain(CHAT_DOCUMENTS.iter()).copied().collect()
    }

    /// The format [`name`](Format::name) calls `name`.
    pub fn named(name: &str) -> Result<Format, UnknownFormat> {
        Format::all().into_iter().find(|f| f.name() == name).ok_or_else(|| UnknownFormat(crate::echo::input(name).to_string()))
    }

    /// The formats Cairn writes, as a harness may ask for them back.
    pub fn writable_ones() -> impl Iterator<Item = Format> {
        Format::all().into_iter().filter(|f| f.writable())
    }
}

/// Adds `format` to the registry every reader, writer and shell of this process uses
/// (detection, `--out-format`, MCP's `format`). Its name must be new.
pub fn register(format: impl TranscriptFormat) -> Result<Format, AlreadyRegistered> {
    let mut registered = REGISTERED.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = format.name();
    if HEADED.iter().chain(registered.iter()).chain(CHAT_DOCUMENTS.iter()).any(|f| f.name() == name) {
        return Err(AlreadyRegistered(name));
    }
    // A registered format lives as long as the process, like the built-in ones.
    let format = Format(Box::leak(Box::new(format)));
    registered.push(format);
    Ok(format)
}

/// A format name that is not one of [`Format::all`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {0}: {names}", names = Format::all().into_iter().map(Format::name).collect::<Vec<_>>().join(", "))]
pub struct UnknownFormat(String);

/// [`register`] of a name the registry already holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a transcript format named {0} is already registered")]
pub struct AlreadyRegistered(&'static str);

/// A transcript that cannot be read, located by source name and, where
/// known, 1-based line.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct TranscriptError {
    pub source_name: String,
    pub line: Option<usize>,
    pub message: String,
}

impl TranscriptError {
    fn new(source_name: &str, line: Option<usize>, message: impl Into<String>) -> Self {
        TranscriptError { source_name: source_name.to_string(), line, message: message.into() }
    }

    /// A serde error inside one JSONL line: the line is ours, the column serde's.
    fn in_line(source_name: &str, line: usize, e: &serde_json::Error) -> Self {
        Self::new(source_name, Some(line), format!("{} (column {})", bare_message(e), e.column()))
    }

    /// A serde error in a whole-file JSON document, at serde's line.
    fn in_document(source_name: &str, e: &serde_json::Error) -> Self {
        Self::new(source_name, Some(e.line()), format!("{} (column {})", bare_message(e), e.column()))
    }
}

/// serde_json's message without its " at line L column C" tail, which we
/// report ourselves.
fn bare_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let tail = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&tail).unwrap_or(&full).to_string()
}

/// An incremental boundary's entries (those appended after the last one the record
/// acknowledged): read in `format` when the caller names it, else detected; no text is no
/// entries. A fragment of a format whose files start with a header (Pi) may come without it.
pub fn parse_appended(format: Option<Format>, text: &str, source_name: &str) -> Result<(Transcript, Format), TranscriptError> {
    if text.trim().is_empty() {
        return Ok((Transcript::default(), format.unwrap_or(Format::Cairn)));
    }
    match format {
        Some(format) => Ok((read(format, strip_bom(text), source_name, TranscriptFormat::parse_fragment)?, format)),
        None => parse(text, source_name),
    }
}

/// Detects the format of `text`, parses it and numbers its turns.
pub fn parse(text: &str, source_name: &str) -> Result<(Transcript, Format), TranscriptError> {
    let format = detect(strip_bom(text), source_name)?;
    Ok((parse_as(format, text, source_name)?, format))
}

/// Parses `text` as `format`. Turns are numbered for Pi and OpenAI; Cairn
/// JSONL keeps the turns it records, so that it round-trips exactly.
pub fn parse_as(format: Format, text: &str, source_name: &str) -> Result<Transcript, TranscriptError> {
    let text = strip_bom(text);
    if text.trim().is_empty() {
        return Err(TranscriptError::new(source_name, None, "empty transcript"));
    }
    read(format, text, source_name, TranscriptFormat::parse)
}

/// `text` read by `format`'s `reader`, its turns numbered and Cairn's own checkpoints marked
/// unless the format records them.
fn read(format: Format, text: &str, source_name: &str, reader: fn(&dyn TranscriptFormat, &str, &str) -> Result<Transcript, TranscriptError>) -> Result<Transcript, TranscriptError> {
    let mut transcript = reader(format.implementation(), text, source_name)?;
    if format.implementation().records_turns() {
        return Ok(transcript);
    }
    transcript.mark_own_checkpoints();
    transcript.mark_slash_commands();
    transcript.number_turns();
    if !transcript.unrecognized.is_empty() {
        tracing::warn!(source = source_name, format = format.name(), "unrecognized line kinds: {}", transcript.unrecognized);
    }
    Ok(transcript)
}

/// `entries` with each entry `held` moved past the tool results its place would separate
/// from their calls: an opaque entry never comes between a call and its result.
fn after_open_calls(entries: Vec<crate::transcript::Entry>, held: impl Fn(&crate::transcript::Entry) -> bool) -> Vec<crate::transcript::Entry> {
    let mut out = Vec::with_capacity(entries.len());
    let (mut waiting, mut open) = (Vec::new(), std::collections::HashSet::new());
    for entry in entries {
        if held(&entry) {
            waiting.push(entry);
            continue;
        }
        // Results follow their calls at once; any other entry ends what was left unanswered.
        if entry.role != Role::Tool {
            open.clear();
        }
        for id in entry.tool_result_ids() {
            open.remove(id);
        }
        open.extend(entry.tool_call_ids().map(str::to_string));
        let answered = open.is_empty();
        out.push(entry);
        if answered {
            out.append(&mut waiting);
        }
    }
    out.append(&mut waiting);
    out
}

/// The text of an unknown line's `message` (a string `content`, or the `text` of its content
/// blocks), for a reader that keeps it as an opaque entry.
fn message_text(line: &serde_json::Value) -> Option<String> {
    let content = line.get("message")?.get("content")?;
    let text = match content {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(blocks) => blocks.iter().filter_map(|b| b.get("text").and_then(serde_json::Value::as_str)).collect::<Vec<_>>().join("\n"),
        _ => return None,
    };
    Some(text).filter(|t| !t.trim().is_empty())
}

/// `t` written in `format`, for the formats Cairn writes (`None`: a harness's own session
/// log, which only that harness writes).
pub fn write(format: Format, t: &Transcript) -> Option<String> {
    format.write(t)
}

/// Cairn JSONL: a header line, then one entry per line.
pub fn write_cairn(t: &Transcript) -> String {
    cairn_jsonl::write(t)
}

/// OpenAI Chat Completions messages as a pretty JSON array, every tool call
/// immediately answered.
pub fn write_openai(t: &Transcript) -> String {
    openai::write(t)
}

/// A Pi v3 session file Pi opens as is (a leading summary becomes its compaction entry).
pub fn write_pi(t: &Transcript) -> String {
    pi_writeback::write(t)
}

/// An Anthropic Messages API body (`system`, `messages`), every tool use answered at the
/// head of the next user message.
pub fn write_anthropic(t: &Transcript) -> String {
    anthropic::write(t)
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

fn detect(text: &str, source_name: &str) -> Result<Format, TranscriptError> {
    if text.trim_start().is_empty() {
        return Err(TranscriptError::new(source_name, None, "empty transcript"));
    }
    let (index, first) = text.lines().enumerate().find(|(_, l)| !l.trim().is_empty()).expect("text has a non-blank line");
    // Only what detection reads: a one-line chat document is the whole session.
    let head = probe::reduced(first).ok();
    if let Some(format) = Format::all().into_iter().find(|f| f.implementation().detect(head.as_ref(), text)) {
        return Ok(format);
    }
    let message = match head {
        Some(serde_json::Value::Object(_)) => {
            let names: Vec<&str> = Format::all().into_iter().map(Format::name).collect();
            format!("unrecognized transcript: the first line opens none of the formats Cairn reads ({})", names.join(", "))
        }
        _ => "unrecognized transcript: expected a JSON object or array".to_string(),
    };
    Err(TranscriptError::new(source_name, Some(index + 1), message))
}

/// Whether a document may be a chat API body (OpenAI's or Anthropic's): a JSON array, an
/// object with `messages`, or a pretty-printed document spread over lines.
fn chat_document(head: Option<&serde_json::Value>, text: &str) -> bool {
    match head {
        Some(serde_json::Value::Object(head)) => head.get("messages").is_some_and(serde_json::Value::is_array),
        Some(serde_json::Value::Array(_)) => true,
        Some(_) => false,
        None => text.trim_start().starts_with(['{', '[']),
    }
}

/// Message content that is either plain text or a list of blocks, as both
/// Pi and OpenAI allow; a hand-written visitor gives clearer errors than
/// `#[serde(untagged)]`.
enum TextOr<T> {
    Text(String),
    Items(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for TextOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = TextOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(TextOr::Items(items))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Chat APIs (OpenAI, Anthropic) have no message ids, so an entry's id comes from its role and content: the same
/// message read again (in the compacted context a harness sends back, say) keeps its id, and a
/// changed one gets a new id. Positions would shift after every compaction and name other
/// messages. A repeated message gets `-2`, `-3`, ….
pub fn content_id(role: Role, parts: &[Part], seen: &mut HashMap<String, usize>) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(serde_json::to_vec(&(role, parts)).unwrap_or_default());
    let base: String = std::iter::once("m-".to_string()).chain(digest[..6].iter().map(|b| format!("{b:02x}"))).collect();
    let n = seen.entry(base.clone()).or_insert(0usize);
    *n += 1;
    if *n == 1 {
        base
    } else {
        format!("{base}-{n}")
    }
}

/// A block or part no reader here understands, kept as text the model can still read: the
/// JSON as written, under its type.
fn opaque(value: &serde_json::Value) -> Part {
    let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("untyped");
    Part::Text { text: format!("[{kind} block] {value}") }
}

/// An image URL as an entry keeps it: inline data is described, not kept; a link is kept up
/// to 100 characters.
fn describe_url(url: &str) -> String {
    match url.strip_prefix("data:") {
        Some(rest) => {
            let mime = rest.split([';', ',']).next().filter(|m| !m.is_empty()).unwrap_or("unknown");
            let data = rest.split_once(',').map_or("", |(_, d)| d);
            image_reference(mime, data.len())
        }
        None => url.chars().take(100).collect(),
    }
}

/// How an inline base64 image is described instead of kept.
fn image_reference(mime_type: &str, base64_len: usize) -> String {
    format!("{mime_type} image, {base64_len} bytes base64")
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::Path;

    use crate::transcript::{Part, Role, Transcript};

    /// The real transcripts under `<repo>/../shared/transcripts/<sub>` with extension `ext`,
    /// as (file name, text). Tests using it are ignored outside CI when the folder is absent
    /// (see build.rs); when they run, the files must be there.
    pub fn real_files(sub: &str, ext: &str) -> Vec<(String, String)> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts").join(sub);
        let read = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("real transcripts missing at {}: {e}", dir.display()));
        let mut files: Vec<_> = read
            .map(|e| e.expect("readable directory entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&p).expect("readable transcript");
                (name, text)
            })
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no .{ext} files in {}", dir.display());
        files
    }

    /// Panics unless every assistant tool call is immediately followed by
    /// one tool entry per call, in call order.
    pub fn assert_calls_answered_in_place(t: &Transcript, name: &str) {
        for (i, entry) in t.entries.iter().enumerate() {
            if entry.role != Role::Assistant {
                continue;
            }
            for (k, id) in entry.tool_call_ids().enumerate() {
                let next = t.entries.get(i + 1 + k);
                let answered = next.is_some_and(|n| n.role == Role::Tool && matches!(n.parts.first(), Some(Part::ToolResult { call_id, .. }) if call_id == id));
                assert!(answered, "{name}: call {id} of entry {} not answered in place", entry.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::transcript::{Entry, Origin, Part, Role};

    #[test]
    fn detects_each_format() {
        let cases = [
            ("{\"cairn\":\"transcript\",\"version\":1}\n", Format::Cairn),
            ("{\"type\":\"session\",\"id\":\"s\"}\n", Format::Pi),
            ("  [{\"role\":\"user\",\"content\":\"hi\"}]", Format::OpenAi),
            ("{\n  \"messages\": []\n}", Format::OpenAi),
            ("{\"messages\":[]}", Format::OpenAi),
        ];
        for (text, want) in cases {
            assert_eq!(detect(text, "t").unwrap(), want, "{text}");
        }
    }

    /// Slash commands are the harness's in every reader, never the operator's intent: the first
    /// request of a recorded session (Codex, Gemini CLI, OpenCode) or of a written one (Pi,
    /// OpenAI, Anthropic) replaced by a command reads as the harness's; a path does not.
    #[test]
    fn a_slash_command_is_never_the_operator_in_any_reader() {
        let sample = crate::transcript::sample::coding_session(4);
        let mut documents = vec![
            ("codex", include_str!("testdata/codex/local-compaction-0.169.0.jsonl").to_string()),
            ("gemini", include_str!("testdata/gemini/session-2026-12-01T16-53-b1a3c3f2.jsonl").to_string()),
            // `opencode export` of a session before any compaction (the reader keeps what follows the last).
            ("opencode", r#"{"info":{"id":"ses_1"},"messages":[{"info":{"id":"u1","role":"user"},"parts":[{"type":"text","text":"Fix the parser."}]},{"info":{"id":"a1","role":"assistant"},"parts":[{"type":"text","text":"On it."}]}]}"#.to_string()),
        ];
        for format in [Format::Pi, Format::OpenAi, Format::Anthropic] {
            documents.push((format.name(), format.write(&sample).unwrap()));
        }
        for (name, text) in documents {
            let (t, _) = parse(&text, name).unwrap();
            let text_of = |e: &Entry| match e.parts.first() {
                Some(Part::Text { text }) => text.clone(),
                _ => String::new(),
            };
            let first = text_of(t.entries.iter().find(|e| e.origin == Origin::Operator).unwrap_or_else(|| panic!("{name}: no operator message")));
            let quoted = serde_json::to_string(&first).unwrap();
            assert!(text.contains(&quoted), "{name}: the first request as written: {quoted}");
            for (said, command) in [("/mode", true), ("/compact keep the port", true), ("/skill:review src/lib.rs", true), ("/tmp is full, clean it", false), ("/etc/hosts is wrong", false)] {
                let changed = text.replace(&quoted, &serde_json::to_string(said).unwrap());
                let (t, _) = parse(&changed, name).unwrap();
                let entry = t.entries.iter().find(|e| text_of(e) == said).unwrap_or_else(|| panic!("{name}: {said} not read"));
                assert_eq!(entry.origin == Origin::Harness, command, "{name}: {said:?} read as {:?}", entry.origin);
            }
        }
    }

    #[test]
    fn display_names() {
        assert_eq!(Format::Cairn.to_string(), "cairn");
        assert_eq!(Format::Pi.to_string(), "pi");
        assert_eq!(Format::OpenAi.to_string(), "openai");
    }

    #[test]
    fn empty_and_unknown_inputs_are_errors() {
        let e = parse(" \n\n", "empty.jsonl").unwrap_err();
        assert_eq!(e.to_string(), "empty.jsonl: empty transcript");
        let e = parse_as(Format::Pi, "", "empty.jsonl").unwrap_err();
        assert_eq!(e.message, "empty transcript");
        let e = parse("\n{\"type\":\"user\"}\n", "cc.jsonl").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(parse("hello", "x.txt").is_err());
    }

    #[test]
    fn error_display_names_source_and_line() {
        let e = TranscriptError::new("session.jsonl", Some(17), "expected `message` object");
        assert_eq!(e.to_string(), "session.jsonl:17: expected `message` object");
        let e = TranscriptError::new("chat.json", None, "boom");
        assert_eq!(e.to_string(), "chat.json: boom");
    }

    #[test]
    fn cairn_round_trip_through_parse() {
        let mut t = Transcript::new(vec![
            Entry::text("a", Role::User, Origin::Operator, "hi"),
            Entry {
                parts: vec![Part::Thinking { text: "hmm".into() }, Part::ToolCall { id: "c1".into(), name: "ls".into(), args: "{}".into() }].into(),
                tokens: 7,
                pinned: true,
                ..Entry::text("b", Role::Assistant, Origin::Agent, "")
            },
        ]);
        t.number_turns();
        let (back, format) = parse(&write_cairn(&t), "t.jsonl").unwrap();
        assert_eq!(format, Format::Cairn);
        assert_eq!(back, t);
    }

    /// Every real transcript: read by the right reader; Cairn JSONL round-trips exactly; the
    /// OpenAI and Anthropic outputs re-parse as themselves with every call answered in place
    /// and every call kept.
    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn real_transcripts_write_and_reparse() {
        let mut seen = 0;
        let calls = |t: &Transcript| t.entries.iter().flat_map(|e| e.tool_call_ids()).count();
        for (sub, ext, reader) in [("pi", "jsonl", Format::Pi), ("openai-chat", "json", Format::OpenAi), ("claude-code", "jsonl", Format::ClaudeCode)] {
            for (name, text) in real_files(sub, ext) {
                let (t, format) = parse(&text, &name).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(format, reader, "{name}");
                let (back, format) = parse(&write_cairn(&t), &name).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(format, Format::Cairn);
                assert_eq!(back, t, "{name}: cairn round trip");

                for (written, shape) in [(write_openai(&t), Format::OpenAi), (write_anthropic(&t), Format::Anthropic)] {
                    let (chat, format) = parse(&written, &name).unwrap_or_else(|e| panic!("{e}"));
                    // Text-only messages without a system prompt are the same in both shapes.
                    assert!(format == shape || calls(&t) == 0, "{name}: {shape} output read as {format}");
                    assert_calls_answered_in_place(&chat, &name);
                    assert_eq!(calls(&chat), calls(&t), "{name}: tool calls kept in {shape}");
                    // What the model reads survives (thinking aside, which no API takes back).
                    let text_of = |t: &Transcript| -> usize { t.entries.iter().flat_map(|e| &e.parts).filter(|p| !matches!(p, Part::Thinking { .. })).map(|p| format!("{p:?}").len()).sum() };
                    assert!(text_of(&chat) * 10 >= text_of(&t) * 9, "{name}: {shape} output lost content");
                }
                seen += 1;
            }
        }
        assert!(seen >= 12, "only {seen} real transcripts");
    }
}
