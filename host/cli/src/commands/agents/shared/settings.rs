//! What the installers of the agents whose configuration has Claude Code's shape share
//! (Claude Code's settings, Gemini CLI's, Codex's quoting): Cairn's hook handlers in a
//! `"hooks"` object, its MCP server in `mcpServers`, and JSON files replaced atomically that
//! come back byte for byte when Cairn's entries are removed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

/// Cairn's hooks in a settings file of Claude Code's shape, which Gemini CLI's shares:
/// `"hooks": {event: [{matcher, hooks: [{type: "command", command, name?}]}]}`. A handler is
/// Cairn's when its command runs `cairn <agent> <verb>`.
pub(crate) struct Hooks {
    pub(crate) agent: &'static str,
    pub(crate) hooks: &'static [Hook],
}

pub(crate) struct Hook {
    pub(crate) event: &'static str,
    pub(crate) matcher: &'static str,
    pub(crate) verb: &'static str,
    /// The handler's `name`, where the agent shows one.
    pub(crate) name: Option<&'static str>,
}

/// The server's name in Claude Code: its tools are `mcp__cairn__…`.
pub(crate) const SERVER: &str = "cairn";

pub(crate) fn user_home() -> Result<PathBuf> {
    Ok(PathBuf::from(std::env::var_os("HOME").context("HOME is not set: name the file with --settings")?))
}

impl Hooks {
    /// The command the agent runs for `verb`, through a shell: `cairn <agent> <verb> [--home H]
    /// [--policy P]`.
    pub(crate) fn command(&self, exe: &Path, verb: &str, home: Option<&Path>, policy: Option<&Path>) -> String {
        let mut words = vec![quote(&exe.display().to_string()), self.agent.into(), verb.into()];
        for (flag, path) in [("--home", home), ("--policy", policy)] {
            if let Some(path) = path {
                words.extend([flag.into(), quote(&path.display().to_string())]);
            }
        }
        words.join(" ")
    }
}

/// The MCP server's arguments: `session_history` alone (nothing in these agents calls
/// `boundary`), on the hooks' home and policy, for the project whose conversation the hooks
/// write (they derive it from `CLAUDE_PROJECT_DIR`, as `serve --project` does).
pub(crate) fn server_args(home: Option<&Path>, policy: Option<&Path>, project: Option<&Path>) -> Vec<String> {
    let mut args: Vec<String> = vec!["serve".into(), "--expose".into(), "recall".into()];
    for (flag, path) in [("--home", home), ("--policy", policy), ("--project", project)] {
        if let Some(path) = path {
            args.extend([flag.into(), path.display().to_string()]);
        }
    }
    args
}

/// Single-quoted for a POSIX shell when it needs quoting.
pub(crate) fn quote(word: &str) -> String {
    if word.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@".contains(&b)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Cairn's MCP server entry, whatever binary path or home it was registered with.
pub(crate) fn is_cairn_server(entry: &Value) -> bool {
    entry.get("args").and_then(Value::as_array).is_some_and(|args| args.first().and_then(Value::as_str) == Some("serve") && args.iter().any(|a| a == "--expose"))
}

/// A JSON object file Claude Code reads (settings, `.mcp.json`, `~/.claude.json`).
pub(crate) struct JsonFile {
    pub(crate) path: PathBuf,
    pub(crate) value: Map<String, Value>,
    trailing_newline: bool,
}

impl JsonFile {
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let value = if text.trim().is_empty() {
            Map::new()
        } else {
            match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => bail!("{}: not a JSON object", path.display()),
                Err(e) => bail!("{}:{}:{}: {e}", path.display(), e.line(), e.column()),
            }
        };
        Ok(JsonFile { path: path.to_path_buf(), value, trailing_newline: text.is_empty() || text.ends_with('\n') })
    }

    /// Replaces the file atomically (Claude Code watches it and must never read half of it),
    /// keeping its permissions; a new file is created with `new_mode` less the umask.
    pub(crate) fn write(&self, new_mode: u32) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.value)?;
        if self.trailing_newline {
            text.push('\n');
        }
        crate::setup::write_atomically(&self.path, &text, new_mode)
    }

    /// After a removal: deletes the file when nothing is left in it, and the `.claude/` folder
    /// it was in when that is empty now; else writes it.
    pub(crate) fn write_or_delete(&self) -> Result<()> {
        if !self.value.is_empty() {
            return self.write(0o666);
        }
        std::fs::remove_file(&self.path).with_context(|| format!("deleting {}", self.path.display()))?;
        if let Some(dir) = self.path.parent().filter(|d| d.file_name().is_some_and(|n| n == ".claude")) {
            // Fails, leaving it, unless it is empty.
            let _ = std::fs::remove_dir(dir);
        }
        Ok(())
    }

    /// The object at `key`, created when absent.
    pub(crate) fn object(&mut self, key: &str) -> Result<&mut Map<String, Value>> {
        match self.value.entry(key).or_insert_with(|| json!({})) {
            Value::Object(map) => Ok(map),
            _ => bail!("{}: `{key}` is not an object", self.path.display()),
        }
    }

    /// The array at `key`, created when absent.
    pub(crate) fn array(&mut self, key: &str) -> Result<&mut Vec<Value>> {
        match self.value.entry(key).or_insert_with(|| json!([])) {
            Value::Array(items) => Ok(items),
            _ => bail!("{}: `{key}` is not an array", self.path.display()),
        }
    }
}

impl Hooks {
    /// Cairn's handler for `verb`, whatever binary path or home it was installed with.
    fn is_cairn(&self, handler: &Value, verb: &str) -> bool {
        handler.get("command").and_then(Value::as_str).is_some_and(|c| c.contains(&format!(" {} {verb}", self.agent)))
    }

    /// Adds the hooks missing from `settings`; the events added.
    pub(crate) fn add(&self, settings: &mut JsonFile, command_for: impl Fn(&str) -> String) -> Result<Vec<&'static str>> {
        let path = settings.path.clone();
        let hooks = settings.object("hooks")?;
        let mut added = Vec::new();
        for hook in self.hooks {
            let groups = hooks.entry(hook.event).or_insert_with(|| json!([]));
            let Value::Array(groups) = groups else { bail!("{}: `hooks.{}` is not an array", path.display(), hook.event) };
            let present = groups.iter().any(|g| g.get("hooks").and_then(Value::as_array).is_some_and(|hs| hs.iter().any(|h| self.is_cairn(h, hook.verb))));
            if !present {
                let mut handler = json!({"type": "command", "command": command_for(hook.verb)});
                if let Some(name) = hook.name {
                    handler["name"] = json!(name);
                }
                groups.push(json!({"matcher": hook.matcher, "hooks": [handler]}));
                added.push(hook.event);
            }
        }
        Ok(added)
    }

    /// Removes Cairn's handlers from `settings`; how many went.
    pub(crate) fn remove(&self, settings: &mut JsonFile) -> usize {
        let Some(Value::Object(hooks)) = settings.value.get_mut("hooks") else { return 0 };
        let mut removed = 0;
        for hook in self.hooks {
            let Some(Value::Array(groups)) = hooks.get_mut(hook.event) else { continue };
            let removed_before = removed;
            // Groups Cairn's removal emptied go; a group the user left empty stays.
            groups.retain_mut(|group| {
                let Some(Value::Array(handlers)) = group.get_mut("hooks") else { return true };
                let before = handlers.len();
                handlers.retain(|h| !self.is_cairn(h, hook.verb));
                removed += before - handlers.len();
                !(handlers.is_empty() && before > 0)
            });
            if groups.is_empty() && removed > removed_before {
                hooks.remove(hook.event);
            }
        }
        if removed > 0 && hooks.is_empty() {
            settings.value.remove("hooks");
        }
        removed
    }
}

/// Registers the server in `file`'s `mcpServers` (replacing an older registration of Cairn's,
/// never someone else's server named `cairn`); whether the file changed.
pub(crate) fn add_server(file: &mut JsonFile, entry: Value) -> Result<bool> {
    let path = file.path.clone();
    let servers = file.object("mcpServers")?;
    match servers.get(SERVER) {
        Some(existing) if *existing == entry => Ok(false),
        Some(existing) if !is_cairn_server(existing) => bail!("{}: an MCP server named `{SERVER}` that is not Cairn's is already registered", path.display()),
        _ => {
            servers.insert(SERVER.into(), entry);
            Ok(true)
        }
    }
}

/// Removes Cairn's server from `file`'s `mcpServers`, and the key when that emptied it.
pub(crate) fn remove_server(file: &mut JsonFile) -> bool {
    let Some(Value::Object(servers)) = file.value.get_mut("mcpServers") else { return false };
    if !servers.get(SERVER).is_some_and(is_cairn_server) {
        return false;
    }
    servers.remove(SERVER);
    if servers.is_empty() {
        file.value.remove("mcpServers");
    }
    true
}
