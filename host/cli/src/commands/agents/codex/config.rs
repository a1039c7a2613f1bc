//! Cairn in Codex's `config.toml` (`$CODEX_HOME/config.toml`, else `~/.codex/config.toml`):
//!
//! - `[mcp_servers.cairn]`: `cairn serve --expose recall` (`session_history` alone: nothing in
//!   Codex calls `boundary`, so a `context_maintenance` request would never be carried out),
//!   with `default_tools_approval_mode = "approve"`: under `approval_policy = "never"` Codex
//!   0.169.0 answers any other MCP call with "MCP tool call requires approval, but approval
//!   policy is never". Not `required = true`: Codex would refuse to start when Cairn's server
//!   cannot; without it, a server still starting when a turn begins joins at a later turn.
//! - `[[hooks.PreCompact]]` → `cairn codex pre-compact`, and `[[hooks.SessionStart]]` with
//!   matcher `compact` → `cairn codex session-start`.
//! - `[hooks.state."<config.toml>:<event>:<group>:0"] trusted_hash`: Codex runs a user's hook
//!   only once it is trusted (openai/codex `codex-rs/hooks/src/engine/discovery.rs`:
//!   `hook_trust_status`; untrusted hooks are skipped without a word in `codex exec`). Running
//!   `install` is that consent, so it records the hash Codex computes: SHA-256 of the hook's
//!   identity (`event_name`, `matcher`, the handler with Codex's defaults filled in) as JSON
//!   with sorted keys (`command_hook_hash`, and `version_for_toml` in
//!   `codex-rs/config/src/fingerprint.rs`). A Codex that hashes differently leaves the hooks
//!   "modified", not run: the conformance test (`agents::codex`) catches that.
//!
//! All of it goes into one block appended to the file between two marker comments, and
//! `uninstall` removes exactly that block (and the separator before it), so the file comes back
//! byte for byte; a file holding nothing else is deleted. Text, not a TOML rewrite: `toml_edit`
//! is not among the workspace's dependencies, and re-serializing with `toml` would drop the
//! user's comments and layout. Appending is valid TOML wherever the user's tables are (a table
//! header may follow any table); the result is parsed before it is written, and a file where it
//! would not be (say, `hooks.PreCompact` as an inline array) is refused, naming the reason.
//! Entries Codex itself later writes into one of the block's tables go with the block.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::commands::agents::shared::report::{Change, SetupReport};

use super::super::shared::settings::quote;

#[derive(clap::Args)]
pub struct Args {
    /// Codex's home, whose `config.toml` gets Cairn (default: $CODEX_HOME, else ~/.codex).
    #[arg(long)]
    codex_home: Option<PathBuf>,
    /// Cairn's home the hooks and the MCP server use (default: theirs, $CAIRN_HOME or
    /// ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy the hooks and the MCP server use (checked now; its absolute path goes into
    /// the config).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Pin the MCP server to this project's conversation (default: the folder Codex starts it
    /// in, the session's, as the hooks derive it from the session's `cwd`).
    #[arg(long)]
    project: Option<PathBuf>,
    /// Print one JSON object for scripts: each file and what changed in it.
    #[arg(long)]
    pub json: bool,
}

/// The block's first line; with [`NEWLINE_ADDED`] appended when the file did not end with a
/// newline and install added one.
const BEGIN: &str = "# >>> cairn: added by `cairn codex install`; `cairn codex uninstall` removes this block";
const NEWLINE_ADDED: &str = " (and the newline before it)";
const END: &str = "# <<< cairn";

/// The server's name in Codex: its tools are offered as the namespace `mcp__cairn`.
const SERVER: &str = "cairn";

/// (Codex's event, its key label in hook trust, matcher, verb).
const HOOKS: &[(&str, &str, Option<&str>, &str)] = &[("PreCompact", "pre_compact", None, "pre-compact"), ("SessionStart", "session_start", Some("compact"), "session-start")];

/// Codex's default hook timeout, part of the hashed identity.
const DEFAULT_TIMEOUT_SEC: u64 = 600;

impl Args {
    /// Codex's home as Codex names it: `$CODEX_HOME` resolved (Codex canonicalizes it), else
    /// `~/.codex`.
    fn codex_home(&self) -> Result<PathBuf> {
        let dir = match self.codex_home.clone().or_else(|| std::env::var_os("CODEX_HOME").map(PathBuf::from)) {
            Some(dir) => std::fs::canonicalize(&dir).or_else(|_| std::path::absolute(&dir))?,
            None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set: name Codex's home with --codex-home")?).join(".codex"),
        };
        Ok(dir)
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `value` with every object's keys sorted, as Codex hashes it.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), canonical(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The SHA-256 of `bytes` in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The `trusted_hash` Codex 0.169.0 computes for a command hook with default settings.
fn trusted_hash(label: &str, matcher: Option<&str>, command: &str) -> Result<String> {
    let mut identity = json!({
        "event_name": label,
        "hooks": [{"type": "command", "command": command, "timeout": DEFAULT_TIMEOUT_SEC, "async": false}],
    });
    if let Some(matcher) = matcher {
        identity["matcher"] = json!(matcher);
    }
    Ok(format!("sha256:{}", sha256_hex(&serde_json::to_vec(&canonical(&identity))?)))
}

/// Where Cairn's block is in `text`: (start of the separator before it, end), and whether
/// install added a newline there.
fn find_block(text: &str, path: &Path) -> Result<Option<(usize, usize)>> {
    let Some(begin) = text.match_indices(BEGIN).map(|(i, _)| i).find(|&i| i == 0 || text.as_bytes()[i - 1] == b'\n') else {
        return Ok(None);
    };
    let line = |at: usize| text[..at].matches('\n').count() + 1;
    let after = &text[begin..];
    let Some(end) = after.match_indices(&format!("\n{END}")).map(|(i, _)| begin + i + 1 + END.len()).find(|&e| text[e..].is_empty() || text[e..].starts_with('\n')) else {
        bail!("{}:{}: Cairn's block has no closing `{END}` line; remove the block by hand", path.display(), line(begin));
    };
    let end = if text[end..].starts_with('\n') { end + 1 } else { end };
    let newline_added = after[..after.find('\n').unwrap_or(after.len())].ends_with(NEWLINE_ADDED);
    let separator = match (begin, newline_added) {
        (0, _) => 0,
        (_, true) if text[..begin].ends_with("\n\n") => 2,
        (_, false) if text[..begin].ends_with("\n\n") => 1,
        _ => 0,
    };
    Ok(Some((begin - separator, end)))
}

/// The file's text without Cairn's block.
fn without_block(text: &str, path: &Path) -> Result<(String, bool)> {
    Ok(match find_block(text, path)? {
        Some((start, end)) => (format!("{}{}", &text[..start], &text[end..]), true),
        None => (text.to_string(), false),
    })
}

/// How many matcher groups `event` already has in the user's config: Cairn's group comes next,
/// and Codex keys its trust by that position.
fn groups(config: &toml::Table, event: &str) -> usize {
    config.get("hooks").and_then(|h| h.get(event)).and_then(toml::Value::as_array).map_or(0, Vec::len)
}

/// Cairn's block for a config whose own text is `user` (parsed: `config`).
fn block(config_path: &Path, config: &toml::Table, exe: &Path, server_args: &[String], hook_command: impl Fn(&str) -> String) -> Result<String> {
    let mut out = String::new();
    out.push_str(&format!("[mcp_servers.{SERVER}]\ncommand = {}\n", toml_string(&exe.display().to_string())));
    let args: Vec<String> = server_args.iter().map(|a| toml_string(a)).collect();
    out.push_str(&format!("args = [{}]\n", args.join(", ")));
    out.push_str("default_tools_approval_mode = \"approve\"\n");
    let mut trust = String::new();
    for &(event, label, matcher, verb) in HOOKS {
        let command = hook_command(verb);
        out.push_str(&format!("\n[[hooks.{event}]]\n"));
        if let Some(matcher) = matcher {
            out.push_str(&format!("matcher = {}\n", toml_string(matcher)));
        }
        out.push_str(&format!("[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {}\n", toml_string(&command)));
        let key = format!("{}:{label}:{}:0", config_path.display(), groups(config, event));
        trust.push_str(&format!("\n[hooks.state.{}]\ntrusted_hash = {}\n", toml_string(&key), toml_string(&trusted_hash(label, matcher, &command)?)));
    }
    out.push_str(&trust);
    Ok(out)
}

/// `user` with `block` appended between the markers.
fn with_block(user: &str, block: &str) -> String {
    let (separator, begin) = match user {
        "" => ("", BEGIN.to_string()),
        u if u.ends_with('\n') => ("\n", BEGIN.to_string()),
        _ => ("\n\n", format!("{BEGIN}{NEWLINE_ADDED}")),
    };
    format!("{user}{separator}{begin}\n{block}{END}\n")
}

fn read(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn parse(text: &str, path: &Path) -> Result<toml::Table> {
    text.parse::<toml::Table>().map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1).unwrap_or(0);
        anyhow::anyhow!("{}:{line}: {}", path.display(), e.message())
    })
}

pub fn install(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("codex", "install");
    let config_path = args.codex_home()?.join("config.toml");
    let text = read(&config_path)?;
    let (user, reinstall) = without_block(&text, &config_path)?;
    let config = parse(&user, &config_path)?;
    if config.get("mcp_servers").and_then(|s| s.get(SERVER)).is_some() {
        bail!("{}: an MCP server named `{SERVER}` is already registered outside Cairn's block; remove it (`codex mcp remove {SERVER}`) and install again", config_path.display());
    }
    let exe = crate::setup::cairn_exe().context("locating the cairn binary")?;
    let policy = crate::setup::installed_policy(args.policy.as_deref())?;
    // Codex runs hooks and servers from the session's folder: every path is absolute.
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let project = args.project.as_deref().map(|p| std::fs::canonicalize(p).or_else(|_| std::path::absolute(p))).transpose()?;
    let mut server_args: Vec<String> = vec!["serve".into(), "--expose".into(), "recall".into()];
    for (flag, path) in [("--home", &home), ("--policy", &policy), ("--project", &project)] {
        if let Some(path) = path {
            server_args.extend([flag.to_string(), path.display().to_string()]);
        }
    }
    let hook_command = |verb: &str| {
        let mut words = vec![quote(&exe.display().to_string()), "codex".into(), verb.into()];
        for (flag, path) in [("--home", &home), ("--policy", &policy)] {
            if let Some(path) = path {
                words.extend([flag.to_string(), quote(&path.display().to_string())]);
            }
        }
        words.join(" ")
    };
    let new_text = with_block(&user, &block(&config_path, &config, &exe, &server_args, hook_command)?);
    // Appending must leave Codex a valid config with Cairn's entries where it will look.
    let merged = parse(&new_text, &config_path).with_context(|| format!("{} cannot take Cairn's block as it is written", config_path.display()))?;
    for &(event, ..) in HOOKS {
        let ours = merged.get("hooks").and_then(|h| h.get(event)).and_then(toml::Value::as_array).is_some_and(|g| g.len() == groups(&config, event) + 1);
        if !ours {
            bail!("{}: Cairn's `[[hooks.{event}]]` group did not land in `hooks.{event}`", config_path.display());
        }
    }
    if new_text == text {
        report.file(&config_path, Change::Unchanged, format!("Cairn is already in {}", config_path.display()));
        return Ok(report);
    }
    crate::setup::write_atomically(&config_path, &new_text, 0o666)?;
    let (change, word) = if reinstall { (Change::Updated, "Updated") } else { (Change::Added, "Added") };
    report.file(
        &config_path,
        change,
        format!("{word} Cairn in {}: the MCP server `{SERVER}` (session_history, approved) and the PreCompact and SessionStart (compact) hooks, trusted", config_path.display()),
    );
    Ok(report)
}

pub fn uninstall(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("codex", "uninstall");
    let config_path = args.codex_home()?.join("config.toml");
    let text = read(&config_path)?;
    let (rest, found) = without_block(&text, &config_path)?;
    if !found {
        report.file(&config_path, Change::LeftAlone, format!("No Cairn block in {}", config_path.display()));
        return Ok(report);
    }
    if rest.is_empty() {
        std::fs::remove_file(&config_path).with_context(|| format!("deleting {}", config_path.display()))?;
    } else {
        crate::setup::write_atomically(&config_path, &rest, 0o666)?;
    }
    report.file(&config_path, Change::Removed, format!("Removed Cairn's block from {}", config_path.display()));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trust_hash_is_the_one_codex_0_169_accepted() {
        // Written into a config.toml by hand, this hash made the real codex 0.169.0 binary run
        // the hook `/tmp/cx/exp/hook.sh PreCompact` (without --dangerously-bypass-hook-trust).
        assert_eq!(trusted_hash("pre_compact", None, "/tmp/cx/exp/hook.sh PreCompact").unwrap(), "sha256:c83f8614b14ad043307ba370fd001c108e4baa12b31ebf7fdb922935be6648fa");
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn toml_strings_escape_what_toml_requires() {
        let raw = "a \"b\" \\ c\nd";
        let parsed: toml::Table = format!("x = {}", toml_string(raw)).parse().unwrap();
        assert_eq!(parsed["x"].as_str(), Some(raw));
    }

    #[test]
    fn a_block_is_found_and_removed_with_its_separator() {
        let path = Path::new("config.toml");
        for user in ["", "a = 1\n", "a = 1", "# only a comment"] {
            let text = with_block(user, "[x]\ny = 2\n");
            assert_eq!(without_block(&text, path).unwrap(), (user.to_string(), true), "{text:?}");
            // Text added after the block stays.
            let later = format!("{text}\n[later]\nz = 3\n");
            assert_eq!(without_block(&later, path).unwrap().0, format!("{user}\n[later]\nz = 3\n"));
        }
    }
}
