//! No adapter cuts text it hands an agent without a way back. The adapters — the OpenCode
//! plugin, the Pi extension, the hook handlers of Claude Code, Codex, Gemini CLI and OpenCode's
//! installer, and the `prefix_summary` that `cairn serve` renders for plugin adapters — are read
//! as source: every head cut (`.slice(0, LIMIT)`, `.substring(`, `.substr(`, `.chars().take(`,
//! `clip_chars(`, `.truncate(`) must sit in a function whose text names where the whole is
//! (`artifact://`, or the `session_history` tool over the archive that holds it), or say on its
//! line or the line above that what it cuts is "not text for the agent" (a key, a buffer).
//! The behaviour this stands for is tested with the real agents (`agents::opencode`: a
//! 600-line log read back to its last line).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The adapter sources, by language.
fn adapter_sources() -> Vec<PathBuf> {
    let root = repo();
    let mut files = Vec::new();
    let mut walk = |dir: PathBuf, ext: &str| {
        let mut stack = vec![dir];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
                let path = entry.path();
                if path.is_dir() && path.file_name().is_some_and(|n| n != "node_modules") {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == ext) {
                    files.push(path);
                }
            }
        }
    };
    for example in std::fs::read_dir(root.join("examples")).unwrap().flatten() {
        let name = example.file_name().to_string_lossy().into_owned();
        if name.ends_with("-plugin") || name.starts_with("pi-") {
            walk(example.path().join("src"), "ts");
        }
    }
    // Every agent's folder, and what they share.
    walk(root.join("host/cli/src/commands/agents"), "rs");
    files.push(root.join("host/cli/src/commands/serve/tools.rs"));
    files
}

/// A head cut on `line`: a limit applied to text.
fn cuts(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or("");
    let constant_slice = code.match_indices(".slice(0,").any(|(at, m)| {
        let limit = code[at + m.len()..].trim_start();
        limit.starts_with(|c: char| c.is_ascii_digit() || c.is_ascii_uppercase())
    });
    constant_slice || [".substring(", ".substr(", ".chars().take(", "clip_chars(", ".truncate("].iter().any(|p| code.contains(p))
}

/// Where a function or other top-level item begins.
fn item_start(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("pub(crate) ").or_else(|| t.strip_prefix("pub ")).or_else(|| t.strip_prefix("export ")).unwrap_or(t);
    let t = t.strip_prefix("async ").unwrap_or(t);
    t.starts_with("fn ") || t.starts_with("function ") || t.starts_with("class ") || t.starts_with("impl ") || (line.starts_with("const ") && t.contains("=>"))
}

/// Each cut without a way back: `file:line: text`.
fn unrecoverable_cuts(path: &Path, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !cuts(line) {
            continue;
        }
        let said = |l: &str| l.contains("not text for the agent");
        if said(line) || i.checked_sub(1).is_some_and(|p| said(lines[p])) {
            continue;
        }
        let start = (0..=i).rev().find(|&k| item_start(lines[k])).unwrap_or(0);
        let end = (i + 1..lines.len()).find(|&k| item_start(lines[k])).unwrap_or(lines.len());
        let item = lines[start..end].join("\n");
        if !(item.contains("artifact://") || item.contains("session_history")) {
            found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
        }
    }
    found
}

#[test]
fn no_adapter_cuts_text_for_the_agent_without_a_way_back() {
    let sources = adapter_sources();
    assert!(sources.iter().any(|p| p.ends_with("examples/opencode-plugin/src/cairn.ts")) && sources.iter().any(|p| p.ends_with("agents/shared/hooks.rs")), "the adapters were not found: {sources:?}");
    let found: Vec<String> = sources.iter().flat_map(|p| unrecoverable_cuts(p, &std::fs::read_to_string(p).unwrap())).collect();
    assert!(found.is_empty(), "text cut for an agent with no artifact:// or session_history naming the whole:\n{}", found.join("\n"));
}

/// The check itself: the clip the OpenCode plugin had (a kept message cut at 4,000 chars, " …"
/// and nothing else) is found; a cut whose function names the artifact, and a key cut said to
/// be no text for the agent, are not.
#[test]
fn the_cut_check_finds_a_clip_without_an_artifact() {
    let clip = "const VERBATIM_CHARS = 4_000;\nfunction clip(text: string): string {\n\treturn text.length > VERBATIM_CHARS ? `${text.slice(0, VERBATIM_CHARS)} …` : text;\n}\n";
    assert_eq!(unrecoverable_cuts(Path::new("cairn.ts"), clip).len(), 1);
    let named =
        "fn render(text: &str, uri: &str) -> String {\n    let head: String = text.chars().take(400).collect();\n    format!(\"{head} … (whole: {uri}, an artifact:// session_history reads)\")\n}\n";
    assert!(unrecoverable_cuts(Path::new("a.rs"), named).is_empty());
    let key = "function key(id: string) {\n\t// a key, not text for the agent\n\treturn id.slice(0, KEY_MAX);\n}\n";
    assert!(unrecoverable_cuts(Path::new("k.ts"), key).is_empty());
    let buffer = "function read(buffer: string) {\n\treturn buffer.slice(0, newline);\n}\n";
    assert!(unrecoverable_cuts(Path::new("b.ts"), buffer).is_empty());
}
