//! The README and the book in `docs/` tell the truth: every shell block marked ```` ```sh runnable ````
//! runs, line by line, in a fresh HOME and Cairn home with this build's `cairn` first on PATH, in a
//! scratch folder where the repository's paths resolve; and every relative link and `#anchor`
//! in them resolves. Missing docs are a failure, not a skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The info-string word that marks a shell block the test runs (mdBook ignores it).
const MARKER: &str = "runnable";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md and every Markdown file under docs/src, as (path relative to the repository, text).
fn documents() -> Vec<(PathBuf, String)> {
    let root = repo();
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs/src")];
    assert!(root.join("docs/book.toml").is_file(), "docs/book.toml is missing");
    assert!(root.join("docs/src/SUMMARY.md").is_file(), "docs/src/SUMMARY.md is missing");
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f.strip_prefix(&root).unwrap().to_path_buf(), text)
        })
        .collect()
}

/// A runnable block: its file, the line its fence opens on, and each command with its line (1-based).
struct Runnable {
    file: PathBuf,
    block_line: usize,
    commands: Vec<(usize, String)>,
}

/// Lines outside fenced blocks, with their numbers; and the runnable blocks.
fn parse(file: &Path, text: &str) -> (Vec<(usize, String)>, Vec<Runnable>) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut fence: Option<(String, Option<Runnable>)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        match &mut fence {
            None => {
                if trimmed.starts_with("```") {
                    let ticks: String = trimmed.chars().take_while(|c| *c == '`').collect();
                    let info: Vec<&str> = trimmed[ticks.len()..].split_whitespace().collect();
                    let runnable = info.first().is_some_and(|l| *l == "sh" || *l == "bash") && info.contains(&MARKER);
                    let block = runnable.then(|| Runnable { file: file.to_path_buf(), block_line: n, commands: Vec::new() });
                    fence = Some((ticks, block));
                } else {
                    prose.push((n, line.to_string()));
                }
            }
            Some((ticks, block)) => {
                if trimmed.starts_with(ticks.as_str()) && trimmed.trim_start_matches('`').trim().is_empty() {
                    if let Some(block) = block.take() {
                        blocks.push(block);
                    }
                    fence = None;
                } else if let Some(block) = block {
                    let command = line.trim();
                    match block.commands.last_mut() {
                        Some((_, last)) if last.ends_with('\\') => {
                            last.pop();
                            last.push_str(command);
                        }
                        _ if command.is_empty() || command.starts_with('#') => {}
                        _ => block.commands.push((n, command.to_string())),
                    }
                }
            }
        }
    }
    assert!(fence.is_none(), "{}: a fenced block is not closed", file.display());
    (prose, blocks)
}

/// A scratch folder holding a symbolic link to each of the repository's top-level entries (not
/// `target/` nor `.git`), so `examples/…` and `host/…` resolve and whatever a command writes
/// stays in the scratch folder.
fn scratch(root: &Path, dir: &Path) -> PathBuf {
    let work = dir.join("work");
    std::fs::create_dir(&work).unwrap();
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), work.join(&name)).unwrap();
    }
    work
}

#[test]
fn every_runnable_block_of_the_readme_and_the_book_runs_in_a_fresh_home() {
    let root = repo();
    let cairn = PathBuf::from(env!("CARGO_BIN_EXE_cairn"));
    let path = std::env::join_paths(std::iter::once(cairn.parent().unwrap().to_path_buf()).chain(std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect::<Vec<_>>()).unwrap_or_default()))
        .unwrap();
    let cache = crate::support::shared_cache();
    let mut blocks = Vec::new();
    for (file, text) in documents() {
        blocks.extend(parse(&file, &text).1);
    }
    assert!(blocks.iter().any(|b| b.file == Path::new("README.md")), "README.md has no `sh {MARKER}` block");
    assert!(blocks.len() >= 5, "only {} runnable blocks in README.md and docs/", blocks.len());

    let mut failures = Vec::new();
    for block in &blocks {
        assert!(!block.commands.is_empty(), "{}:{}: a runnable block with no command", block.file.display(), block.block_line);
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let work = scratch(&root, dir.path());
        for (line, command) in &block.commands {
            let out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", command])
                .current_dir(&work)
                .env("HOME", &home)
                .env("PATH", &path)
                .env("CAIRN_CACHE_DIR", &cache)
                .env("CAIRN_LOG", "error")
                .env_remove("CAIRN_HOME")
                .env_remove("CODEX_HOME")
                .env_remove("XDG_DATA_HOME")
                .env_remove("XDG_CONFIG_HOME")
                .env_remove("XDG_CACHE_HOME")
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "{}:{line}: `{command}` exited {}\n--- stdout\n{}\n--- stderr\n{}",
                    block.file.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} runnable blocks failed:\n\n{}", failures.len(), blocks.len(), failures.join("\n\n"));
}

/// A heading's anchor as mdBook (and GitHub, for these headings) makes it: lower case, spaces to
/// `-`, only letters, digits, `-` and `_` kept.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = parse(Path::new("-"), text);
    prose.iter().filter_map(|(_, line)| line.strip_prefix('#').map(|h| h.trim_start_matches('#'))).filter(|h| h.starts_with(' ')).map(anchor).collect()
}

/// `[text](target)` links of prose lines, inline code left out.
fn links(line: &str) -> Vec<String> {
    let mut without_code = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            without_code.push(c);
        }
    }
    let mut found = Vec::new();
    let mut rest = without_code.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        found.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    found
}

#[test]
fn every_relative_link_and_anchor_of_the_readme_and_the_book_resolves() {
    let root = repo();
    let mut broken = Vec::new();
    let mut checked = 0;
    for (file, text) in documents() {
        let (prose, _) = parse(&file, &text);
        for (line, content) in &prose {
            for link in links(content) {
                if link.starts_with("http://") || link.starts_with("https://") || link.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (target, fragment) = match link.split_once('#') {
                    Some((t, f)) => (t, Some(f)),
                    None => (link.as_str(), None),
                };
                let path = if target.is_empty() { root.join(&file) } else { root.join(&file).parent().unwrap().join(target) };
                if !path.exists() {
                    broken.push(format!("{}:{line}: `{link}`: no file {}", file.display(), path.display()));
                    continue;
                }
                if let Some(fragment) = fragment {
                    if path.extension().is_some_and(|e| e == "md") {
                        let headings = anchors(&std::fs::read_to_string(&path).unwrap());
                        if !headings.contains(fragment) {
                            broken.push(format!("{}:{line}: `{link}`: no heading #{fragment} in {}", file.display(), path.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found: is the book there?");
    assert!(broken.is_empty(), "{} broken links:\n{}", broken.len(), broken.join("\n"));
}
