//! The checkable claims of a summary: URLs, paths, commands in code spans, code-like
//! identifiers, flags and numbers, each kept once in the order written.

use std::collections::HashSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Url,
    Path,
    /// A code span that reads as a program and its arguments ([`is_command`]).
    Command,
    Identifier,
    Flag,
    Number,
}

impl Kind {
    pub(super) fn noun(self) -> &'static str {
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
pub(super) struct Claim {
    pub(super) kind: Kind,
    pub(super) text: String,
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
pub(super) fn claims(text: &str) -> Vec<Claim> {
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

pub(super) fn collapse(text: &str) -> String {
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

pub(super) fn is_identifier(word: &str) -> bool {
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
