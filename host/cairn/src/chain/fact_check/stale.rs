//! Stale items: what a summary calls pending, in progress or next that the history shows
//! finished later (a later run succeeded, or a later message says it is done).

use std::collections::{HashMap, HashSet};

use super::backing::json_strings;
use super::claims::{claims, collapse, Kind};
use super::{History, Summary};
use crate::record::{FactFlag, FlagKind, MAX_FACT_FLAGS};
use crate::transcript::{Entry, Part};

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
pub(super) fn stale(history: &History<'_>, summary: &Summary) -> Vec<FactFlag> {
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
pub(super) fn completes(sentence: &str) -> bool {
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
pub(super) fn verdict(content: &str) -> Option<bool> {
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

pub(super) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
