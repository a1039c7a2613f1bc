//! The fact-check of model-written summaries: before a step's outcome commits, what its model
//! wrote (the new replacement entries, the checkpoint's strings) is checked against the history
//! it replaces.
//! - **unverified**: a URL, a file path, a command in a code span (`cargo test -p auth`), a
//!   code-like identifier (`snake_case`, `camelCase`, `a.b`, `a::b`, a commit hash), a `--flag` or
//!   a number of two or more digits that appears nowhere in the history (text, tool calls and
//!   results, placeholders), the preserve/resume notes or the previous checkpoint;
//! - **stale**: an item the summary calls pending, in progress or next (checkpoint `pending_work`,
//!   `next_immediate_action`, `verification.not_run`; lines under such headings or prefixes, `[ ]`)
//!   whose key terms the history shows finished later: the last tool call naming it reported
//!   success (`test result: ok`, `12 passed`, exit code 0, ✓), or a later message says it is
//!   done, fixed or merged.
//!
//! Limits: the match is textual. A paraphrased command is flagged while an invention made of
//! words the history holds is not, plain-word claims are not checked, and "finished" is read from
//! success markers and completion words, not from what a command really did.

use std::collections::{HashMap, HashSet};

use super::{Applied, StepInput};
use crate::record::{FactFlag, FlagKind, MAX_FACT_FLAGS};
use crate::transcript::{Entry, Part};

/// What bundled plugins write around a model's text themselves (the handover seed's closing
/// instructions): never the model's invention.
const PLUGIN_WORDING: &str = "`git status` `git log` session_history";

/// What a summary is checked against.
pub struct History<'a> {
    /// The step's whole input.
    pub entries: &'a [Entry],
    /// Entries from here on come after the replaced range (the verbatim tail): they back a claim
    /// but cannot make an item stale, since the summary sits before them.
    pub settled: usize,
    /// Other text the step was given: preserve and resume notes, the previous checkpoint, ids
    /// and URIs the host handed it.
    pub extra: &'a [&'a str],
}

/// What a model-written outcome claims.
#[derive(Debug, Default)]
pub struct Summary {
    /// The new replacement entries' text.
    pub text: String,
    /// The checkpoint, parsed.
    pub checkpoint: Option<serde_json::Value>,
}

impl Summary {
    /// The text of `new` entries (those the step wrote, not carried from the input) and the
    /// checkpoint JSON, if any.
    pub fn of(new: &[&Entry], checkpoint: Option<&str>) -> Self {
        let mut text = String::new();
        for entry in new {
            entry_text(entry, &mut text);
        }
        Summary { text, checkpoint: checkpoint.and_then(|c| serde_json::from_str(c).ok()) }
    }

    /// Everything checked for unverified claims: the text, then each checkpoint string.
    fn claim_text(&self) -> String {
        let mut out = self.text.clone();
        if let Some(checkpoint) = &self.checkpoint {
            json_strings(checkpoint, &mut |s| {
                out.push('\n');
                out.push_str(s);
            });
        }
        out
    }
}

/// The fact-check of a step's checked outcome (`applied`, `checkpoint`, the `artifacts` it
/// stored) against its input.
pub(crate) fn check_step(input: &StepInput<'_>, applied: &Applied, checkpoint: Option<&str>, artifacts: usize) -> Vec<FactFlag> {
    let known: HashSet<&str> = input.entries.iter().map(|e| e.id.as_str()).collect();
    let new: Vec<&Entry> = applied.replacement.iter().filter(|e| !known.contains(e.id.as_str())).collect();
    let summary = Summary::of(&new, checkpoint);
    // This step's own artifacts are named in its replacement; they are in no history yet.
    let own: Vec<String> = (1..=input.artifacts_before + artifacts).map(|n| format!("artifact://{}/{n}", input.archive_id)).collect();
    let extra: Vec<&str> =
        [input.preserve, input.resume, input.previous_checkpoint, Some(input.archive_id), Some(PLUGIN_WORDING)].into_iter().flatten().chain(own.iter().map(String::as_str)).collect();
    check(&History { entries: input.entries, settled: applied.last + 1, extra: &extra }, &summary)
}

/// The flags for `summary`: stale items first, then unverified claims in the order written; at
/// most [`MAX_FACT_FLAGS`].
pub fn check(history: &History<'_>, summary: &Summary) -> Vec<FactFlag> {
    let mut flags = stale(history, summary);
    let corpus = corpus(history);
    let index = Index::new(&corpus);
    for claim in claims(&summary.claim_text()) {
        if flags.len() >= MAX_FACT_FLAGS {
            break;
        }
        if !index.backs(&claim) {
            let why = format!("{} that appears nowhere in the history it replaces", claim.kind.noun());
            flags.push(FactFlag::new(FlagKind::Unverified, &claim.text, &why));
        }
    }
    flags.truncate(MAX_FACT_FLAGS);
    flags
}

/// The message of an outcome refused for its flags: `fact-check: ` and the first few.
pub(crate) fn rejection(flags: &[FactFlag]) -> String {
    const LISTED: usize = 3;
    let listed: Vec<String> = flags.iter().take(LISTED).map(|f| format!("{} {:?} ({})", f.kind, clip(&f.item, 120), f.why)).collect();
    let more = if flags.len() > LISTED { format!("; and {} more", flags.len() - LISTED) } else { String::new() };
    format!("fact-check: {} flag{}: {}{more}", flags.len(), if flags.len() == 1 { "" } else { "s" }, listed.join("; "))
}

// ---- claims ---------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Url,
    Path,
    /// A code span that reads as a program and its arguments ([`is_command`]).
    Command,
    Identifier,
    Flag,
    Number,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Url => "a URL",
            Kind::Path => "a path",
            Kind::Command => "a command",
            Kind::Identifier => "an identifier",
            Kind::Flag => "a flag",
            Kind::Number => "a number",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    kind: Kind,
    text: String,
}

/// File extensions that make a word a file name.
const EXTENSIONS: &[&str] = &[
    "rs",
    "toml",
    "lock",
    "py",
    "pyi",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "go",
    "java",
    "kt",
    "kts",
    "swift",
    "c",
    "h",
    "cc",
    "cpp",
    "hpp",
    "cs",
    "rb",
    "php",
    "scala",
    "md",
    "mdx",
    "rst",
    "txt",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "ini",
    "cfg",
    "conf",
    "env",
    "sh",
    "bash",
    "zsh",
    "ps1",
    "sql",
    "proto",
    "wit",
    "wasm",
    "wat",
    "html",
    "htm",
    "css",
    "scss",
    "xml",
    "csv",
    "tsv",
    "log",
    "patch",
    "diff",
    "gradle",
    "mk",
    "cmake",
    "dockerfile",
    "tf",
    "vue",
    "svelte",
    "ex",
    "exs",
    "erl",
    "hs",
    "ml",
    "lua",
    "pl",
    "r",
    "dart",
    "zig",
    "nix",
    "pem",
    "crt",
    "key",
    "db",
    "sqlite",
    "tar",
    "gz",
    "tgz",
    "zip",
    "png",
    "jpg",
    "jpeg",
    "gif",
    "svg",
    "pdf",
    "ipynb",
];

/// Product names spelled with an inner capital: code-like in shape, but never an invention.
const NAMES: &[&str] = &[
    "GitHub",
    "GitLab",
    "JavaScript",
    "TypeScript",
    "PostgreSQL",
    "MySQL",
    "SQLite",
    "MongoDB",
    "OpenAI",
    "DeepSeek",
    "macOS",
    "iOS",
    "iPadOS",
    "iPhone",
    "iPad",
    "YouTube",
    "LinkedIn",
    "PowerShell",
    "WebAssembly",
    "DevOps",
    "PyPI",
    "NumPy",
    "PyTorch",
    "TensorFlow",
    "FastAPI",
    "GraphQL",
    "WebSocket",
    "OAuth",
    "CircleCI",
    "VSCode",
    "IntelliJ",
    "PhD",
    "LaTeX",
    "BitBucket",
    "HuggingFace",
    "OpenSSL",
    "McDonald",
];

/// The checkable claims of `text`, once each, in order.
fn claims(text: &str) -> Vec<Claim> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        let rest = if fenced { line.to_string() } else { code_spans(line, &mut out) };
        words(&rest, &mut out);
    }
    let mut seen = HashSet::new();
    out.retain(|c: &Claim| seen.insert(c.text.clone()));
    out
}

/// `line` with its inline code spans blanked out; a span that reads as a command is a claim of
/// its own, any other span is read as words.
fn code_spans(line: &str, out: &mut Vec<Claim>) -> String {
    let mut rest = String::with_capacity(line.len());
    let mut at = 0;
    while let Some(open) = line[at..].find('`').map(|i| at + i) {
        let ticks = line[open..].chars().take_while(|&c| c == '`').count();
        let fence = &line[open..open + ticks];
        let Some(close) = line[open + ticks..].find(fence).map(|i| open + ticks + i) else { break };
        rest.push_str(&line[at..open]);
        rest.push(' ');
        let content = line[open + ticks..close].trim();
        let command = normalize_command(content);
        if is_command(&command) {
            out.push(Claim { kind: Kind::Command, text: command });
        } else {
            words(content, out);
        }
        at = close + ticks;
    }
    rest.push_str(&line[at..]);
    rest
}

/// A command as quoted: whitespace collapsed, without a shell prompt or a trailing ellipsis.
fn normalize_command(text: &str) -> String {
    let text = collapse(text);
    let text = text.strip_prefix("$ ").unwrap_or(&text);
    text.trim_end_matches(['…', '.']).trim_end().to_string()
}

/// A program and its arguments (`cargo test -p auth`, `bd close x-1`), not a snippet of code
/// (`length(x) > 0`, `{:ok, id}`): a snippet is quoted in a shape of the model's own as often as
/// verbatim, so only its identifiers and paths are checked.
fn is_command(span: &str) -> bool {
    let Some((program, _)) = span.split_once(' ') else { return false };
    let mut unquoted = String::new();
    let mut quote = None;
    for c in span.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None => unquoted.push(c),
        }
    }
    let snippet = unquoted.contains(['(', ')', '{', '}', '[', ']', ';', ',']) || ["!=", "==", "=>", "->", "::", " = "].iter().any(|op| unquoted.contains(op));
    span.len() <= 200 && !snippet && program.starts_with(|c: char| c.is_ascii_lowercase()) && program.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-/".contains(c))
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The claims among the whitespace-separated chunks of `text`.
fn words(text: &str, out: &mut Vec<Claim>) {
    let text = without_tags(text);
    for (n, chunk) in text.split_whitespace().enumerate() {
        // A list marker numbers the list, not anything in the history.
        if n == 0 && is_list_marker(chunk) {
            continue;
        }
        let chunk = match url_in(chunk) {
            Some((start, url)) => {
                out.push(Claim { kind: Kind::Url, text: url.to_string() });
                &chunk[..start]
            }
            None => chunk,
        };
        for run in chunk.split(|c: char| !(c.is_ascii_alphanumeric() || "_./:~-".contains(c))) {
            classify(run, out);
        }
    }
}

/// `text` with markup tags (`<read-files>`, `</summary>`, `<br/>`) blanked: a closing tag is no
/// rooted path.
fn without_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let tag = &rest[open + 1..];
        let name = tag.strip_prefix('/').unwrap_or(tag);
        let len = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')).unwrap_or(name.len());
        let end = name[len..].strip_prefix("/>").map(|_| 2).or_else(|| name[len..].starts_with('>').then_some(1));
        match end {
            Some(end) if len > 0 && name.starts_with(|c: char| c.is_ascii_alphabetic()) => {
                out.push(' ');
                rest = &name[len + end..];
            }
            _ => {
                out.push('<');
                rest = tag;
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_list_marker(chunk: &str) -> bool {
    let digits = chunk.trim_end_matches(['.', ')']);
    (digits.len() < chunk.len() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())) || matches!(chunk, "-" | "*" | "+")
}

/// The URL in `chunk` (`scheme://…`) and where it starts.
fn url_in(chunk: &str) -> Option<(usize, &str)> {
    let at = chunk.find("://")?;
    let start = chunk[..at].rfind(|c: char| !(c.is_ascii_alphanumeric() || "+.-".contains(c))).map_or(0, |i| i + chunk[i..].chars().next().map_or(1, char::len_utf8));
    if !chunk[start..at].starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let url = chunk[start..].trim_end_matches(|c: char| ".,;:!?)]}>'\"*`".contains(c));
    (url.len() > at - start + 3).then_some((start, url))
}

/// The claim a run of code-ish characters makes, if any.
fn classify(run: &str, out: &mut Vec<Claim>) {
    let run = run.trim_end_matches(['.', ':', '-', ',']).trim_start_matches(':');
    if run.is_empty() {
        return;
    }
    let claim = |kind: Kind, text: &str| Claim { kind, text: text.to_string() };
    if let Some(name) = run.strip_prefix("--") {
        let name = name.split('=').next().unwrap_or_default();
        if name.len() >= 2 && name.starts_with(|c: char| c.is_ascii_lowercase()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            out.push(claim(Kind::Flag, &format!("--{name}")));
        }
        return;
    }
    if run.contains('/') {
        // `render_block/2`: a function and its arity (Elixir, Erlang), not a path.
        if let Some((function, _)) = run.rsplit_once('/').filter(|(f, a)| !f.contains('/') && !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit())) {
            if function.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                return classify(function, out);
            }
        }
        let path = strip_line_number(run).trim_end_matches('/');
        if looks_like_path(path) {
            out.push(claim(Kind::Path, path));
        }
        return;
    }
    if run.contains("::") {
        if run.split("::").all(is_identifier) {
            out.push(claim(Kind::Identifier, run));
        }
        return;
    }
    if run.contains(':') {
        for piece in run.split(':') {
            classify(piece, out);
        }
        return;
    }
    if let Some(number) = number(run) {
        if number.bytes().filter(u8::is_ascii_digit).count() >= 2 {
            out.push(claim(Kind::Number, number));
        }
        return;
    }
    if run.len() >= 7 && run.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) && run.bytes().any(|b| b.is_ascii_digit()) && run.bytes().any(|b| b.is_ascii_alphabetic()) {
        out.push(claim(Kind::Identifier, run));
        return;
    }
    if has_extension(run) {
        out.push(claim(Kind::Path, run));
        return;
    }
    if run.contains('.') {
        let segments: Vec<&str> = run.split('.').collect();
        if segments.iter().all(|s| is_identifier(s)) && segments.iter().any(|s| s.len() >= 2) && !segments.iter().all(|s| s.len() <= 1) {
            out.push(claim(Kind::Identifier, run));
        }
        return;
    }
    if run.contains('-') {
        for piece in run.split('-') {
            classify(piece, out);
        }
        return;
    }
    if is_code_word(run) {
        out.push(claim(Kind::Identifier, run));
    }
}

/// `snake_case` (with a letter) or an inner capital (`camelCase`, `StepReport`), and not a
/// product name.
fn is_code_word(word: &str) -> bool {
    if !is_identifier(word) || !word.bytes().any(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let snake = word.contains('_') && word.trim_matches('_').len() > 1;
    let camel = word.as_bytes().windows(2).any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    (snake || camel) && !NAMES.contains(&word)
}

fn is_identifier(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The number `run` is (a version's `v` dropped, a unit such as `ms` or `%` ignored).
fn number(run: &str) -> Option<&str> {
    let body = run.strip_prefix(['v', 'V']).filter(|b| b.starts_with(|c: char| c.is_ascii_digit())).unwrap_or(run);
    let end = body.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(body.len());
    let (digits, unit) = body.split_at(end);
    let digits = digits.trim_end_matches('.');
    let plain = !digits.is_empty() && digits.starts_with(|c: char| c.is_ascii_digit()) && !digits.contains("..");
    (plain && unit.len() <= 3 && unit.chars().all(|c| c.is_ascii_alphabetic())).then_some(digits)
}

/// `src/a.rs:42:7` → `src/a.rs`.
fn strip_line_number(path: &str) -> &str {
    let mut path = path;
    while let Some((head, tail)) = path.rsplit_once(':') {
        if tail.is_empty() || tail.bytes().all(|b| b.is_ascii_digit()) {
            path = head;
        } else {
            break;
        }
    }
    path
}

fn has_extension(name: &str) -> bool {
    let Some((stem, ext)) = name.rsplit_once('.') else { return false };
    let stem = stem.rsplit('/').next().unwrap_or(stem);
    !stem.is_empty() && stem.chars().any(|c| c.is_ascii_alphanumeric()) && EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
}

/// A path, not a list of words ("and/or", "compile/test/lint"): rooted (`/`, `./`, `../`, `~/`),
/// ending in a file name, or with a segment no word has (`spotter_web/live`, `api/v2`).
fn looks_like_path(path: &str) -> bool {
    if !path.bytes().any(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty() && *s != "." && *s != "..").collect();
    let rooted = ["/", "./", "../", "~/"].iter().any(|p| path.starts_with(p));
    let coded = |s: &&str| s.contains(['_', '-', '.']) || s.bytes().any(|b| b.is_ascii_digit());
    match segments.as_slice() {
        [] => false,
        [only] => rooted && only.len() >= 2,
        [.., last] => rooted || has_extension(last) || segments.iter().any(coded),
    }
}

// ---- what backs a claim ---------------------------------------------------------------------

/// The text of one entry, every part: text, thinking, tool calls (name, arguments as written
/// and decoded), results, placeholders and their URIs.
fn entry_text(entry: &Entry, out: &mut String) {
    for part in &entry.parts {
        match part {
            Part::Text { text } | Part::Thinking { text } | Part::Image { reference: text } => out.push_str(text),
            Part::ToolCall { name, args, .. } => {
                out.push_str(name);
                out.push(' ');
                out.push_str(args);
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(args) {
                    json_strings(&value, &mut |s| {
                        out.push('\n');
                        out.push_str(s);
                    });
                }
            }
            Part::ToolResult { content, elided, .. } => {
                out.push_str(content);
                if let Some(uri) = elided {
                    out.push('\n');
                    out.push_str(uri);
                }
            }
            Part::Placeholder { text, uri } => {
                out.push_str(text);
                if let Some(uri) = uri {
                    out.push('\n');
                    out.push_str(uri);
                }
            }
        }
        out.push('\n');
    }
}

fn json_strings<'v>(value: &'v serde_json::Value, each: &mut impl FnMut(&'v str)) {
    match value {
        serde_json::Value::String(s) => each(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, each)),
        serde_json::Value::Object(map) => map.values().for_each(|v| json_strings(v, each)),
        _ => {}
    }
}

/// Everything that may back a claim, whitespace collapsed.
fn corpus(history: &History<'_>) -> String {
    let mut raw = String::new();
    for entry in history.entries {
        entry_text(entry, &mut raw);
    }
    for extra in history.extra {
        raw.push_str(extra);
        raw.push('\n');
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(extra) {
            json_strings(&value, &mut |s| {
                raw.push_str(s);
                raw.push('\n');
            });
        }
    }
    collapse(&raw)
}

/// The corpus, with its words and digit runs at hand for the common claims.
struct Index<'a> {
    text: &'a str,
    words: HashSet<&'a str>,
    /// The words lower-cased, for a dotted name's receiver (`Range.intersectsNode` for
    /// `range.intersectsNode`).
    lower_words: HashSet<String>,
    digits: HashSet<&'a str>,
}

impl<'a> Index<'a> {
    fn new(text: &'a str) -> Self {
        let words: HashSet<&str> = text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        let lower_words = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let digits = text.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).collect();
        Index { text, words, lower_words, digits }
    }

    fn backs(&self, claim: &Claim) -> bool {
        let text = claim.text.as_str();
        match claim.kind {
            Kind::Number if !text.contains('.') => self.digits.contains(text),
            Kind::Number => occurs(self.text, text, |c| c.is_ascii_digit()),
            Kind::Identifier if is_identifier(text) => self.words.contains(text),
            Kind::Flag => occurs(self.text, text, |c| is_word_char(c) || c == '-'),
            Kind::Url => occurs(self.text, text.trim_end_matches('/'), is_word_char),
            Kind::Path => [text, text.trim_start_matches("./")].iter().any(|t| occurs(self.text, t, is_word_char)),
            // A dotted name also stands when its member is there as written and its receivers
            // in any case.
            Kind::Identifier => {
                occurs(self.text, text, is_word_char)
                    || text
                        .rsplit_once('.')
                        .is_some_and(|(receivers, member)| !text.contains("::") && self.words.contains(member) && receivers.split('.').all(|r| self.lower_words.contains(&r.to_ascii_lowercase())))
            }
            // `cargo test … --lib`: each part quoted must be there.
            Kind::Command => text.split(['…']).flat_map(|t| t.split("...")).map(str::trim).filter(|t| !t.is_empty()).all(|t| occurs(self.text, t, is_word_char)),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `text` without running on into a neighbour: at an end of the
/// needle that is itself `joins`, the character beyond must not be.
fn occurs(text: &str, needle: &str, joins: impl Fn(char) -> bool) -> bool {
    if needle.is_empty() {
        return false;
    }
    let (first, last) = (needle.chars().next().unwrap(), needle.chars().next_back().unwrap());
    text.match_indices(needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        let runs_on = (joins(first) && before.is_some_and(&joins)) || (joins(last) && after.is_some_and(&joins));
        !runs_on
    })
}

// ---- stale items ----------------------------------------------------------------------------

/// Headings and prefixes that open a list of unfinished work.
const OPEN_LABELS: &[&str] = &[
    "pending",
    "in progress",
    "active",
    "next",
    "next step",
    "next steps",
    "next action",
    "todo",
    "to do",
    "remaining",
    "outstanding",
    "unfinished",
    "not run",
    "open items",
    "open tasks",
    "work left",
    "left to do",
    "current work",
    "ongoing",
    "wip",
];

/// Words that carry no item's identity: function words and generic verbs of work.
const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "with",
    "from",
    "into",
    "onto",
    "that",
    "this",
    "these",
    "those",
    "then",
    "than",
    "when",
    "where",
    "which",
    "while",
    "what",
    "who",
    "are",
    "was",
    "were",
    "been",
    "being",
    "has",
    "have",
    "had",
    "its",
    "our",
    "your",
    "their",
    "them",
    "they",
    "his",
    "her",
    "not",
    "but",
    "all",
    "any",
    "each",
    "every",
    "some",
    "more",
    "most",
    "also",
    "again",
    "still",
    "yet",
    "now",
    "next",
    "once",
    "only",
    "just",
    "very",
    "will",
    "would",
    "should",
    "could",
    "can",
    "may",
    "might",
    "must",
    "need",
    "needs",
    "about",
    "after",
    "before",
    "over",
    "under",
    "via",
    "per",
    "out",
    "off",
    "one",
    "two",
    "new",
    "run",
    "rerun",
    "make",
    "add",
    "fix",
    "finish",
    "implement",
    "update",
    "do",
    "does",
    "did",
    "get",
    "got",
    "start",
    "continue",
    "complete",
    "verify",
    "ensure",
    "try",
    "pending",
    "todo",
    "progress",
    "active",
    "step",
    "steps",
    "task",
    "tasks",
    "work",
    "item",
    "items",
    "done",
    "check",
    "see",
    "use",
    "using",
    "let",
    "there",
    "here",
    "other",
    "same",
    "such",
    "both",
    "either",
    "none",
    "nothing",
    "remaining",
    "current",
    "currently",
    "still",
    "ongoing",
];

/// Words that say an item is finished.
const DONE_WORDS: &[&str] =
    &["done", "complete", "completed", "finished", "fixed", "merged", "resolved", "implemented", "landed", "shipped", "passes", "passed", "passing", "succeeded", "succeeds", "green", "works"];

/// Words that say it is not (yet), or only might be.
const NOT_YET_WORDS: &[&str] = &[
    "not",
    "never",
    "yet",
    "still",
    "will",
    "todo",
    "pending",
    "need",
    "needs",
    "should",
    "must",
    "next",
    "plan",
    "planned",
    "going",
    "try",
    "trying",
    "attempt",
    "remaining",
    "remain",
    "remains",
    "left",
    "once",
    "when",
    "if",
    "until",
    "unless",
    "ll",
    "wip",
    "fail",
    "fails",
    "failed",
    "failing",
    "failure",
    "failures",
    "error",
    "errors",
    "broken",
    "broke",
    "can",
    "cannot",
];

/// The summary's unfinished items, each flagged when the history shows it finished.
fn stale(history: &History<'_>, summary: &Summary) -> Vec<FactFlag> {
    let items: Vec<(String, Terms)> = open_items(summary).into_iter().map(|item| (item.clone(), Terms::of(&item))).filter(|(_, t)| t.checkable()).collect();
    if items.is_empty() {
        return Vec::new();
    }
    let timeline = Timeline::new(&history.entries[..history.settled.min(history.entries.len())]);
    items
        .into_iter()
        .filter_map(|(item, terms)| {
            let evidence = timeline.finished(&terms)?;
            Some(FactFlag::new(FlagKind::Stale, &item, &format!("the summary calls it unfinished, but {evidence}")))
        })
        .take(MAX_FACT_FLAGS)
        .collect()
}

/// What the summary lists as pending, active or next, once each.
fn open_items(summary: &Summary) -> Vec<String> {
    let mut items = Vec::new();
    let mut open_section = false;
    for line in summary.text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(title) = heading(line) {
            open_section = is_open_label(title);
            continue;
        }
        let (checkbox, body) = list_item(line);
        if checkbox == Some(true) {
            continue;
        }
        if let Some((label, rest)) = body.split_once(':') {
            if is_open_label(label) && !rest.trim().is_empty() {
                items.push(rest.trim().to_string());
                continue;
            }
        }
        if checkbox == Some(false) || open_section {
            items.push(body.to_string());
        }
    }
    if let Some(checkpoint) = &summary.checkpoint {
        let strings = |v: Option<&serde_json::Value>| -> Vec<String> {
            match v {
                Some(serde_json::Value::String(s)) => vec![s.clone()],
                Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
                _ => Vec::new(),
            }
        };
        items.extend(strings(checkpoint.get("pending_work")));
        items.extend(strings(checkpoint.get("next_immediate_action")));
        items.extend(strings(checkpoint.pointer("/verification/not_run")));
    }
    let mut seen = HashSet::new();
    items.retain(|i| !i.trim().is_empty() && seen.insert(i.clone()));
    items
}

/// A heading's title: `## Title`, a line in bold, or a short line ending in a colon.
fn heading(line: &str) -> Option<&str> {
    if line.starts_with('#') {
        return Some(line.trim_start_matches('#').trim());
    }
    let bare = line.trim_end_matches(':').trim();
    if bare.len() > 4 && bare.starts_with("**") && bare.ends_with("**") && !bare[2..bare.len() - 2].contains("**") {
        return Some(bare.trim_matches('*').trim_end_matches(':'));
    }
    let plain = !line.starts_with(['-', '*', '+', '[']) && !line.starts_with(|c: char| c.is_ascii_digit());
    (plain && line.ends_with(':') && line.len() <= 40).then(|| line.trim_end_matches(':').trim())
}

/// A list line's body, and its checkbox if it has one (`Some(true)` when ticked).
fn list_item(line: &str) -> (Option<bool>, &str) {
    let mut body = line;
    if let Some(rest) = body.strip_prefix(['-', '*', '+']).filter(|r| r.starts_with(' ')) {
        body = rest.trim_start();
    } else if let Some(dot) = body.find(['.', ')']).filter(|&i| i > 0 && body[..i].bytes().all(|b| b.is_ascii_digit())) {
        body = body[dot + 1..].trim_start();
    }
    for (mark, done) in [("[ ]", false), ("[x]", true), ("[X]", true)] {
        if let Some(rest) = body.strip_prefix(mark) {
            return (Some(done), rest.trim_start());
        }
    }
    (None, body)
}

fn is_open_label(label: &str) -> bool {
    let words = lower_words(label.trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace()));
    let spaced = format!(" {} ", words.join(" "));
    OPEN_LABELS.iter().any(|l| spaced.contains(&format!(" {l} ")))
}

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

/// A crude stem, so "tests", "testing" and "test" meet.
fn stem(word: &str) -> String {
    let w = word.to_lowercase();
    let n = w.len();
    let cut = if w.ends_with("ing") && n >= 6 {
        w[..n - 3].to_string()
    } else if w.ends_with("ied") || (w.ends_with("ies") && n >= 5) {
        format!("{}y", &w[..n - 3])
    } else if (w.ends_with("ed") || ["ses", "xes", "zes", "ches", "shes"].iter().any(|s| w.ends_with(s))) && n >= 5 {
        w[..n - 2].to_string()
    } else if w.ends_with('s') && !w.ends_with("ss") && n >= 4 {
        w[..n - 1].to_string()
    } else {
        w
    };
    match cut.strip_suffix('e') {
        Some(base) if cut.len() >= 5 => base.to_string(),
        _ => cut,
    }
}

fn stems(text: &str) -> HashSet<String> {
    lower_words(text).iter().map(|w| stem(w)).collect()
}

/// What identifies an item in the history: its code-like claims (each must appear) and its
/// distinctive words (most must).
#[derive(Debug)]
struct Terms {
    code: Vec<String>,
    words: Vec<String>,
}

impl Terms {
    fn of(item: &str) -> Self {
        let code = claims(item).into_iter().filter(|c| c.kind != Kind::Number).map(|c| c.text).collect();
        let mut words: Vec<String> = Vec::new();
        for word in lower_words(item) {
            if word.len() < 3 || word.bytes().all(|b| b.is_ascii_digit()) || STOPWORDS.contains(&word.as_str()) {
                continue;
            }
            let stemmed = stem(&word);
            if !words.contains(&stemmed) && !STOPWORDS.contains(&stemmed.as_str()) {
                words.push(stemmed);
            }
        }
        Terms { code, words }
    }

    /// One plain word ("run the tests") says too little to tie an item to a later success.
    fn checkable(&self) -> bool {
        !self.code.is_empty() || self.words.len() >= 2
    }

    fn named_in(&self, text: &str, stems: &HashSet<String>) -> bool {
        if !self.code.iter().all(|c| text.contains(c.as_str())) {
            return false;
        }
        let hits = self.words.iter().filter(|w| stems.contains(*w)).count();
        if self.code.is_empty() {
            hits >= 2.max((2 * self.words.len()).div_ceil(3))
        } else {
            hits * 2 >= self.words.len()
        }
    }
}

/// How a piece of the history bears on an item that names it.
#[derive(Debug)]
enum Bearing {
    /// A sentence: finished if it says so.
    Sentence,
    /// A tool call: an attempt, settled by its result.
    Call(String),
    /// A tool result with a verdict (`true`: success): it settles the call it answers, if that
    /// call names the item (a result naming it alone proves little: a file read, a listing).
    Result { call_id: String, success: bool },
}

struct Piece {
    entry: String,
    text: String,
    stems: HashSet<String>,
    bearing: Bearing,
}

/// The settled history cut into sentences, calls and results with verdicts, in order.
struct Timeline {
    pieces: Vec<Piece>,
}

impl Timeline {
    fn new(entries: &[Entry]) -> Self {
        let mut pieces = Vec::new();
        let mut push = |entry: &Entry, text: String, bearing: Bearing| {
            let stems = stems(&text);
            pieces.push(Piece { entry: entry.id.clone(), text, stems, bearing });
        };
        for entry in entries {
            for part in &entry.parts {
                match part {
                    Part::Text { text } | Part::Thinking { text } => {
                        for sentence in sentences(text) {
                            push(entry, sentence.to_string(), Bearing::Sentence);
                        }
                    }
                    Part::ToolCall { id, name, args } => push(entry, call_text(name, args), Bearing::Call(id.clone())),
                    Part::ToolResult { call_id, content, is_error, .. } => {
                        let verdict = if *is_error { Some(false) } else { verdict(content) };
                        if let Some(success) = verdict {
                            push(entry, String::new(), Bearing::Result { call_id: call_id.clone(), success });
                        }
                    }
                    Part::Image { .. } | Part::Placeholder { .. } => {}
                }
            }
        }
        Timeline { pieces }
    }

    /// How the history shows the item finished after its last open mention, if it does.
    fn finished(&self, terms: &Terms) -> Option<String> {
        // The calls that name the item, by id.
        let mut calls: HashMap<&str, &str> = HashMap::new();
        let mut state: Option<String> = None;
        for piece in &self.pieces {
            match &piece.bearing {
                Bearing::Sentence if terms.named_in(&piece.text, &piece.stems) => {
                    state = completes(&piece.text).then(|| format!("entry {} says it is finished: “{}”", piece.entry, clip(piece.text.trim(), 160)));
                }
                Bearing::Call(id) if terms.named_in(&piece.text, &piece.stems) => {
                    calls.insert(id.as_str(), piece.text.as_str());
                    state = None;
                }
                Bearing::Result { call_id, success } => {
                    if let Some(call) = calls.get(call_id.as_str()) {
                        let command = collapse(&call.lines().skip(1).collect::<Vec<_>>().join(" "));
                        state = success.then(|| format!("a later run of “{}” succeeded (entry {})", clip(&command, 120), piece.entry));
                    }
                }
                _ => {}
            }
        }
        state
    }
}

/// What a tool call runs: its name and its short arguments (a command, a path, a test name).
/// A file's content it writes names much without checking any of it.
fn call_text(name: &str, args: &str) -> String {
    const SHORT: usize = 300;
    let mut text = name.to_string();
    match serde_json::from_str::<serde_json::Value>(args) {
        Ok(value) => json_strings(&value, &mut |s| {
            if s.len() <= SHORT {
                text.push('\n');
                text.push_str(s);
            }
        }),
        Err(_) if args.len() <= SHORT => {
            text.push('\n');
            text.push_str(args);
        }
        Err(_) => {}
    }
    text
}

/// `text` cut into sentences and lines.
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let bytes = line.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            if matches!(b, b'.' | b'!' | b'?' | b';') && bytes.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()) {
                out.push(&line[start..=i]);
                start = i + 1;
            }
        }
        out.push(&line[start..]);
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// Whether a sentence says something is finished, and nothing that unsays it.
fn completes(sentence: &str) -> bool {
    let lower = sentence.to_lowercase();
    let words = lower_words(&lower);
    let done = words.iter().any(|w| DONE_WORDS.contains(&w.as_str())) || lower.contains(['✓', '✔', '✅']);
    let unsaid = lower.contains("n't") || lower.contains("n’t") || lower.contains('?') || failure_count(&words) || {
        // "0 failed" and "no errors" are no failures.
        words.iter().enumerate().any(|(i, w)| NOT_YET_WORDS.contains(&w.as_str()) && !(is_failure_word(w) && i > 0 && matches!(words[i - 1].as_str(), "0" | "no" | "zero" | "without")))
    };
    done && !unsaid
}

fn is_failure_word(word: &str) -> bool {
    word.starts_with("fail") || word.starts_with("error") || word.starts_with("broke")
}

/// A count of failures above zero: "2 failed", "1 error".
fn failure_count(words: &[String]) -> bool {
    words.windows(2).any(|w| w[0].parse::<u64>().is_ok_and(|n| n > 0) && is_failure_word(&w[1]))
}

/// A tool result's verdict: `Some(false)` when it reports a failure, `Some(true)` when it reports
/// success, `None` when it says neither.
fn verdict(content: &str) -> Option<bool> {
    let lower = content.to_lowercase();
    let words = lower_words(&lower);
    let failed = ["test result: failed", "panicked at", "traceback (most recent call last)", "npm err!", "command not found", "could not compile", "build failed", "✗", "✘", "❌"]
        .iter()
        .any(|m| lower.contains(m))
        || lower.lines().map(str::trim).any(|l| l.starts_with("error:") || l.starts_with("error[") || l.starts_with("fatal:") || ends_failed(l))
        || failure_count(&words)
        || exit_code(&words).is_some_and(|code| code != 0);
    if failed {
        return Some(false);
    }
    let passed = ["test result: ok", "tests passed", "all passed", "build succeeded", "build successful", "✓", "✔", "✅"].iter().any(|m| lower.contains(m))
        || words.windows(2).any(|w| w[0].parse::<u64>().is_ok_and(|n| n > 0) && w[1] == "passed")
        || exit_code(&words) == Some(0);
    passed.then_some(true)
}

/// A line that ends in "failed" (`test foo ... FAILED`), not in a count of none (`0 failed`).
fn ends_failed(line: &str) -> bool {
    let mut words = line.split_whitespace().rev();
    words.next() == Some("failed") && words.next().is_none_or(|before| before.parse::<u64>().is_err() && before != "no")
}

/// The exit code a result reports: "exit code 0", "exit status: 1", "exited with code 2".
fn exit_code(words: &[String]) -> Option<u64> {
    let at = |i: usize| words.get(i).map_or("", String::as_str);
    (0..words.len()).find_map(|i| match (at(i), at(i + 1), at(i + 2)) {
        ("exit", "code" | "status", n) => n.parse().ok(),
        ("exited", "with", "code") => at(i + 3).parse().ok(),
        ("exited", "with", n) => n.parse().ok(),
        _ => None,
    })
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Role};

    fn say(id: &str, role: Role, text: &str) -> Entry {
        let origin = match role {
            Role::User => Origin::Operator,
            Role::Tool => Origin::Tool,
            Role::System => Origin::Harness,
            Role::Assistant => Origin::Agent,
        };
        Entry::text(id, role, origin, text)
    }

    fn call(id: &str, text: &str, call_id: &str, name: &str, args: &str) -> Entry {
        Entry {
            parts: vec![Part::Text { text: text.into() }, Part::ToolCall { id: call_id.into(), name: name.into(), args: args.into() }].into(),
            ..Entry::text(id, Role::Assistant, Origin::Agent, "")
        }
    }

    fn result(id: &str, call_id: &str, content: &str) -> Entry {
        Entry { parts: vec![Part::ToolResult { call_id: call_id.into(), content: content.into(), is_error: false, elided: None }].into(), ..Entry::text(id, Role::Tool, Origin::Tool, "") }
    }

    /// An auth fix: read, failing test, edit, passing test.
    fn session() -> Vec<Entry> {
        vec![
            say("u1", Role::User, "The login endpoint returns 500 when the JWT has expired. Fix it and run the auth tests. Never touch `config/prod.toml`."),
            call("a1", "Reading the handler.", "c1", "read", r#"{"path":"src/auth/handler.rs"}"#),
            result("t1", "c1", "pub fn validate_token(token: &str) -> Result<Claims, AuthError> {\n    decode(token).map_err(AuthError::Decode)\n}"),
            call("a2", "Running the auth tests first.", "c2", "bash", r#"{"command":"cargo test -p auth --lib"}"#),
            result("t2", "c2", "running 12 tests\ntest token::expired_token_is_401 ... FAILED\n\ntest result: FAILED. 11 passed; 1 failed; 0 ignored"),
            call("a3", "Mapping the expiry error to 401 in `validate_token`.", "c3", "edit", r#"{"path":"src/auth/handler.rs","old":"AuthError::Decode","new":"AuthError::expired_or_decode"}"#),
            result("t3", "c3", "Edited src/auth/handler.rs: 1 replacement."),
            call("a4", "Re-running them.", "c4", "bash", r#"{"command":"cargo test -p auth --lib"}"#),
            result("t4", "c4", "running 12 tests\n\ntest result: ok. 12 passed; 0 failed; 0 ignored; finished in 0.42s"),
            say("a5", Role::Assistant, "Fixed: expired tokens now get 401. See https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/ for the error kinds."),
        ]
    }

    fn flags_for(entries: &[Entry], text: &str) -> Vec<FactFlag> {
        check(&History { entries, settled: entries.len(), extra: &[] }, &Summary { text: text.into(), checkpoint: None })
    }

    fn items(flags: &[FactFlag], kind: FlagKind) -> Vec<&str> {
        flags.iter().filter(|f| f.kind == kind).map(|f| f.item.as_str()).collect()
    }

    const FAITHFUL: &str = "## Goal\nFix the login endpoint returning 500 when the JWT has expired.\n\n\
        ## Constraints & Preferences\n- Never touch `config/prod.toml`.\n\n\
        ## Progress\n### Done\n- [x] Mapped the expiry error to 401 in `validate_token` (src/auth/handler.rs, now `AuthError::expired_or_decode`).\n\
        - [x] `cargo test -p auth --lib`: 12 passed, 0 failed (it had 1 failure before the fix).\n\
        ### In Progress\n- none\n\n### Blocked\n- (none)\n\n\
        ## Key Decisions\n- **Return 401, not 500**: an expired token is the client's problem.\n\n\
        ## Next Steps\n1. Tell the operator the fix is in, and what was changed.\n2. Wait for review.\n\n\
        ## Critical Context\n- Error kinds: https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/\n";

    #[test]
    fn a_faithful_summary_of_a_realistic_history_gets_no_flags() {
        let flags = flags_for(&session(), FAITHFUL);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn a_faithful_summary_of_the_sample_session_gets_no_flags() {
        let transcript = crate::transcript::sample::coding_session(10);
        let text = "## Goal\nMake `ledger::apply` (and the other modules' `apply`) reject negative amounts.\n\n\
            ## Constraints & Preferences\n- Do not change the public API of `ledger`; never commit directly to main.\n\n\
            ## Progress\n### Done\n- [x] `accounts::apply`, `journal::apply`, `ledger::apply`, `reports::apply` and `currency::apply` reject \
            negative amounts (src/ledger.rs: `fn apply(` became `fn apply_checked(`).\n- [x] `cargo test`: 50 passed, 0 failed (ledger v0.3.0).\n\
            ### In Progress\n- (none)\n\n## Next Steps\n1. Run the test suite again after the next change.\n\n\
            <modified-files>\nsrc/ledger.rs\nsrc/journal.rs\n</modified-files>\n";
        let flags = flags_for(&transcript.entries, text);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn plain_english_is_never_flagged() {
        let prose = "## Goal\nThe operator wants a quicker build, better error messages and fewer surprises; nothing else.\n\
            ## Next Steps\n- Ask whether the e.g. and/or i.e. wording in the README is fine, then wrap up.\n\
            Input/output and read/write paths were discussed (TCP/IP, I/O). It's about 3 files; 1. done.\n";
        let flags = flags_for(&session(), prose);
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn an_invented_path_is_flagged() {
        let text = format!("{FAITHFUL}- The token cache lives in src/auth/cache.rs and `src/auth/handler.rs:42`.\n");
        let flags = flags_for(&session(), &text);
        assert_eq!(items(&flags, FlagKind::Unverified), ["src/auth/cache.rs"], "{flags:#?}");
        assert!(flags[0].why.contains("path"), "{flags:#?}");
    }

    #[test]
    fn urls_numbers_commands_identifiers_and_flags() {
        let text = "- See https://docs.rs/jsonwebtoken/9.3.0/jsonwebtoken/ and https://example.com/made-up.\n\
            - 12 passed; the suite takes 850ms; version 9.3.0 and 9.4.1.\n\
            - Run `cargo test -p auth --lib` then `cargo test -p auth --release`; also `cargo clippy --all-targets`.\n\
            - `validate_token` calls `refresh_session`; `AuthError::Decode` and `AuthError::Expired`; TokenCache; run with --nocapture.\n";
        let flags = flags_for(&session(), text);
        assert_eq!(
            items(&flags, FlagKind::Unverified),
            ["https://example.com/made-up", "850", "9.4.1", "cargo test -p auth --release", "cargo clippy --all-targets", "refresh_session", "AuthError::Expired", "TokenCache", "--nocapture",],
            "{flags:#?}"
        );
    }

    #[test]
    fn the_preserve_notes_and_the_previous_checkpoint_back_claims() {
        let entries = session();
        let summary = Summary { text: "Keep `docs/SECURITY.md` and the ticket AUTH_1234 in mind.".into(), checkpoint: None };
        let bare = check(&History { entries: &entries, settled: entries.len(), extra: &[] }, &summary);
        assert_eq!(items(&bare, FlagKind::Unverified), ["docs/SECURITY.md", "AUTH_1234"]);
        let previous = r#"{"files_read":["docs/SECURITY.md"]}"#;
        let extra = [previous, "remember ticket AUTH_1234"];
        assert!(check(&History { entries: &entries, settled: entries.len(), extra: &extra }, &summary).is_empty());
    }

    #[test]
    fn checkpoint_strings_are_checked_too() {
        let checkpoint = serde_json::json!({
            "task_objective": "fix expired JWTs", "files_modified": ["src/auth/handler.rs", "src/auth/session.rs"],
            "verification": { "passed": ["cargo test -p auth --lib"], "failed": [], "not_run": [] },
        });
        let flags = check(&History { entries: &session(), settled: 10, extra: &[] }, &Summary { text: String::new(), checkpoint: Some(checkpoint) });
        assert_eq!(items(&flags, FlagKind::Unverified), ["src/auth/session.rs"], "{flags:#?}");
    }

    #[test]
    fn a_pending_item_the_history_shows_passing_later_is_stale() {
        let text = "## Progress\n### In Progress\n- [ ] run the auth tests\n\n## Next Steps\n1. Run `cargo test -p auth --lib` again\n";
        let flags = flags_for(&session(), text);
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests", "Run `cargo test -p auth --lib` again"], "{flags:#?}");
        assert!(flags[0].why.contains("cargo test -p auth --lib") && flags[0].why.contains("entry t4"), "{flags:#?}");
    }

    #[test]
    fn a_pending_item_never_finished_is_not_stale() {
        let text = "Pending: deploy the auth service to staging\nNext: open a pull request for the auth fix\nTODO: add a regression test for refresh tokens\n";
        let flags = flags_for(&session(), text);
        assert!(items(&flags, FlagKind::Stale).is_empty(), "{flags:#?}");
        // A run of the tests that failed last is not finished either.
        let mut failing = session();
        failing.truncate(5);
        let flags = flags_for(&failing, "In progress: run the auth tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn a_later_request_reopens_a_finished_item() {
        let mut entries = session();
        entries.push(say("u2", Role::User, "Run the auth tests once more after rebasing, they may break."));
        let flags = flags_for(&entries, "In progress: run the auth tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
        // …until they pass again.
        entries.push(call("a6", "", "c6", "bash", r#"{"command":"cargo test -p auth"}"#));
        entries.push(result("t6", "c6", "exit code 0"));
        let flags = flags_for(&entries, "In progress: run the auth tests\n");
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests"], "{flags:#?}");
    }

    #[test]
    fn a_completion_message_makes_a_pending_item_stale_but_a_promise_does_not() {
        let mut entries = session();
        entries.push(say("u2", Role::User, "Also update the CHANGELOG entry for the expiry fix."));
        let pending = "## Next Steps\n- Update the CHANGELOG entry for the expiry fix\n";
        entries.push(say("a6", Role::Assistant, "I will update the CHANGELOG entry for the expiry fix next."));
        assert!(flags_for(&entries, pending).is_empty());
        entries.push(say("a7", Role::Assistant, "Done: the CHANGELOG entry for the expiry fix is updated."));
        let flags = flags_for(&entries, pending);
        assert_eq!(items(&flags, FlagKind::Stale), ["Update the CHANGELOG entry for the expiry fix"], "{flags:#?}");
        assert!(flags[0].why.contains("entry a7"));
    }

    #[test]
    fn checkpoint_pending_work_and_next_action_are_checked_for_staleness() {
        let checkpoint = serde_json::json!({ "pending_work": ["run the auth tests"], "next_immediate_action": "deploy to staging", "verification": { "not_run": ["cargo test -p auth --lib"] } });
        let flags = check(&History { entries: &session(), settled: 10, extra: &[] }, &Summary { text: String::new(), checkpoint: Some(checkpoint) });
        assert_eq!(items(&flags, FlagKind::Stale), ["run the auth tests", "cargo test -p auth --lib"], "{flags:#?}");
    }

    #[test]
    fn what_comes_after_the_replaced_range_backs_claims_but_does_not_make_items_stale() {
        let entries = session();
        // The summary replaces the first five entries (through the failing run).
        let history = History { entries: &entries, settled: 5, extra: &[] };
        let flags = check(&history, &Summary { text: "In progress: make `cargo test -p auth --lib` pass (12 tests).".into(), checkpoint: None });
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn one_plain_word_does_not_tie_an_item_to_a_success() {
        let flags = flags_for(&session(), "## Next Steps\n- run the tests\n");
        assert!(flags.is_empty(), "{flags:#?}");
    }

    #[test]
    fn markup_tags_are_no_paths() {
        let text = "<read-files>\nsrc/auth/handler.rs\n</read-files>\n<br/> a < b and c > d; <summary>ok</summary>";
        assert!(flags_for(&session(), text).is_empty());
    }

    #[test]
    fn flags_are_capped() {
        let text: String = (0..40).map(|n| format!("- src/invented_{n}.rs\n")).collect();
        let flags = flags_for(&session(), &text);
        assert_eq!(flags.len(), MAX_FACT_FLAGS);
        assert_eq!(flags[0].item, "src/invented_0.rs");
    }

    #[test]
    fn verdicts_of_tool_results() {
        for ok in ["test result: ok. 3 passed; 0 failed", "Ran 4 tests\n\nOK\n4 passed", "✓ 18 tests", "Process exited with code 0", "exit code: 0"] {
            assert_eq!(verdict(ok), Some(true), "{ok}");
        }
        for bad in ["test result: FAILED. 1 passed; 2 failed", "error[E0308]: mismatched types", "Traceback (most recent call last):", "exit status 2", "test foo ... FAILED"] {
            assert_eq!(verdict(bad), Some(false), "{bad}");
        }
        for neither in ["Edited src/a.rs: 1 replacement.", "pub fn apply() -> Result<(), Error> { Err(Error::Overflow) }"] {
            assert_eq!(verdict(neither), None, "{neither}");
        }
        assert!(completes("Fixed: expired tokens now get 401."));
        assert!(completes("Tests: 12 passed, 0 failed."));
        for not in ["The fix is not done yet.", "I haven't finished it.", "Is it fixed?", "It will be merged tomorrow.", "2 failed, 10 passed."] {
            assert!(!completes(not), "{not}");
        }
    }

    #[test]
    fn the_rejection_message_lists_the_first_flags() {
        let flags: Vec<FactFlag> = (0..5).map(|n| FactFlag::new(FlagKind::Unverified, &format!("src/x{n}.rs"), "a path that appears nowhere")).collect();
        let message = rejection(&flags);
        assert!(message.starts_with("fact-check: 5 flags: unverified \"src/x0.rs\""), "{message}");
        assert!(message.ends_with("and 2 more"), "{message}");
    }
}
