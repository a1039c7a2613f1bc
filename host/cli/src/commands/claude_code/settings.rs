//! Cairn in Claude Code's configuration files.
//!
//! - The hooks, in a settings file: `"hooks": {Event: [{matcher, hooks: [{type, command}]}]}`
//!   (https://code.claude.com/docs/en/hooks#configuration).
//! - With `--mcp`, Cairn's MCP server (`cairn serve --expose recall`: `session_history` alone,
//!   since nothing in Claude Code calls `boundary` to carry out a `context_maintenance` request),
//!   registered where Claude Code reads it without asking: for a project, `DIR/.mcp.json`
//!   (`{"mcpServers": {"cairn": {"type": "stdio", command, args}}}`, the file `claude mcp add
//!   --scope project` writes) and `"cairn"` in the settings file's `enabledMcpjsonServers`, which
//!   approves that entry for the interactive mode (print mode loads `.mcp.json` servers without
//!   approval; checked with Claude Code 2.1.328); for the user, `~/.claude.json`'s top-level
//!   `mcpServers` (the file `claude mcp add --scope user` writes; no approval; Claude Code rewrites
//!   that file while it runs, so install with it closed). Claude Code starts the server in the
//!   background, holds its tools back until the model loads them through `ToolSearch`, and still
//!   asks before a call (`--allowedTools mcp__cairn__session_history` or a `permissions.allow`
//!   entry grants it).
//!
//! The server runs on the same home and policy as the hooks, and for a project on the
//! project's conversation (`--project`), so `session_history` reads what `pre-compact` wrote.
//!
//! Install appends Cairn's entries; uninstall removes exactly those (the handlers whose command
//! is Cairn's, the `cairn` server whose arguments are `serve …`, the `enabledMcpjsonServers`
//! item), and the groups and keys that only held them, so a file comes back byte for byte
//! (object keys keep their order; the indentation is Claude Code's two spaces). A file that
//! holds nothing once Cairn's entries are gone is deleted, and the `.claude/` folder it was in
//! too when that is left empty: Claude Code reads an absent file and `{}` alike. Files are
//! replaced atomically and keep their permissions; a new file gets a normal file's (0666 less
//! the umask), `~/.claude.json` Claude Code's own 0600.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};

#[derive(clap::Args)]
pub struct Args {
    /// The project's `.claude/settings.json` instead of the user's `~/.claude/settings.json`.
    #[arg(long, conflicts_with = "settings")]
    project: Option<PathBuf>,
    /// A settings file by path (e.g. `.claude/settings.local.json`).
    #[arg(long)]
    settings: Option<PathBuf>,
    /// Cairn's home the hooks (and the MCP server) use (default: theirs, $CAIRN_HOME or
    /// ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy the hooks (and the MCP server) use (checked now; its absolute path goes into
    /// the hooks).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Also register Cairn's MCP server (the agent's `session_history`): in the project's
    /// `.mcp.json`, enabled in its settings, with --project or a settings file in a project's
    /// `.claude/`; in `~/.claude.json` for the user's settings. Uninstall removes it either way.
    #[arg(long)]
    mcp: bool,
}

/// `SessionStart` only after a compaction.
const HOOKS: Hooks = Hooks {
    agent: "claude-code",
    hooks: &[Hook { event: "PreCompact", matcher: "", verb: "pre-compact", name: None }, Hook { event: "SessionStart", matcher: "compact", verb: "session-start", name: None }],
};

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
const SERVER: &str = "cairn";

/// Where the MCP server is registered.
enum McpScope {
    /// `DIR/.mcp.json`, enabled in the settings file.
    Project(PathBuf),
    /// `~/.claude.json`.
    User(PathBuf),
}

impl Args {
    fn path(&self) -> Result<PathBuf> {
        Ok(match (&self.settings, &self.project) {
            (Some(file), _) => file.clone(),
            (None, Some(dir)) => dir.join(".claude/settings.json"),
            (None, None) => user_home()?.join(".claude/settings.json"),
        })
    }

    /// The project whose settings these are: --project, or the folder holding the settings
    /// file's `.claude/`.
    fn project_dir(&self) -> Option<PathBuf> {
        match (&self.settings, &self.project) {
            (_, Some(dir)) => Some(dir.clone()),
            (Some(file), None) => {
                let folder = file.parent()?;
                (folder.file_name()? == ".claude").then(|| folder.parent().map(Path::to_path_buf)).flatten()
            }
            (None, None) => None,
        }
    }

    /// Where `--mcp` registers the server; `None` for a settings file outside any project.
    fn mcp_scope(&self) -> Result<Option<McpScope>> {
        if let Some(dir) = self.project_dir() {
            let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
            return Ok(Some(McpScope::Project(std::path::absolute(&dir)?)));
        }
        if self.settings.is_none() {
            return Ok(Some(McpScope::User(user_home()?)));
        }
        Ok(None)
    }
}

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

/// Approves the project's `cairn` server in the settings; whether it was added.
fn enable_server(settings: &mut JsonFile) -> Result<bool> {
    let enabled = settings.array("enabledMcpjsonServers")?;
    if enabled.iter().any(|s| s == SERVER) {
        return Ok(false);
    }
    enabled.push(json!(SERVER));
    Ok(true)
}

fn disable_server(settings: &mut JsonFile) -> bool {
    let Some(Value::Array(enabled)) = settings.value.get_mut("enabledMcpjsonServers") else { return false };
    let before = enabled.len();
    enabled.retain(|s| s != SERVER);
    let removed = enabled.len() < before;
    if removed && enabled.is_empty() {
        settings.value.remove("enabledMcpjsonServers");
    }
    removed
}

pub fn install(args: Args) -> Result<()> {
    let path = args.path()?;
    let mut settings = JsonFile::read(&path)?;
    let exe = std::env::current_exe().context("locating the cairn binary")?;
    let policy = crate::setup::installed_policy(args.policy.as_deref())?;
    // Hooks and server run wherever Claude Code starts them: every path is absolute.
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let scope = args.mcp_scope()?;
    let project = match &scope {
        Some(McpScope::Project(dir)) => Some(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())),
        _ => None,
    };
    let server = server_args(home.as_deref(), policy.as_deref(), project.as_deref());

    let added = HOOKS.add(&mut settings, |verb| HOOKS.command(&exe, verb, home.as_deref(), policy.as_deref()))?;
    let mut settings_changed = !added.is_empty();
    // The server's file, changed in memory; written after the settings, so a server Claude
    // Code finds in a project's `.mcp.json` is already approved.
    let mut server_file = None;
    let mut server_path = None;
    if args.mcp {
        let entry = json!({"type": "stdio", "command": exe.display().to_string(), "args": server});
        let (mut file, new_mode) = match &scope {
            None => bail!("--mcp: {} is in no project's .claude/ folder; name the project with --project, or register the server yourself", path.display()),
            Some(McpScope::Project(dir)) => {
                settings_changed |= enable_server(&mut settings)?;
                (JsonFile::read(&dir.join(".mcp.json"))?, 0o666)
            }
            Some(McpScope::User(user)) => (JsonFile::read(&user.join(".claude.json"))?, 0o600),
        };
        server_path = Some(file.path.clone());
        if add_server(&mut file, entry)? {
            server_file = Some((file, new_mode));
        }
    }
    if settings_changed {
        settings.write(0o666)?;
    }
    if let Some((file, new_mode)) = &server_file {
        file.write(*new_mode)?;
    }
    if added.is_empty() {
        println!("Cairn's hooks are already in {}", path.display());
    } else {
        println!("Added Cairn's {} hooks to {}", added.join(" and "), path.display());
    }
    if let Some((file, _)) = &server_file {
        println!("Registered Cairn's MCP server (the agent's session_history) in {}", file.path.display());
    } else if let Some(file) = server_path {
        println!("Cairn's MCP server is already registered in {}", file.display());
    } else {
        let scope = if project.is_some() { "--scope project " } else { "" };
        let words: Vec<String> = server.iter().map(|w| quote(w)).collect();
        println!("Give the agent its recall tools too (or install with --mcp):  claude mcp add {scope}{SERVER} -- {} {}", quote(&exe.display().to_string()), words.join(" "));
    }
    Ok(())
}

pub fn uninstall(args: Args) -> Result<()> {
    let path = args.path()?;
    let mut removed = Vec::new();
    if path.exists() {
        let mut settings = JsonFile::read(&path)?;
        let hooks = HOOKS.remove(&mut settings);
        let enabled = disable_server(&mut settings);
        if hooks > 0 || enabled {
            settings.write_or_delete()?;
            removed.push(path.display().to_string());
        }
    }
    let server_file = match args.mcp_scope()? {
        Some(McpScope::Project(dir)) => Some(dir.join(".mcp.json")),
        Some(McpScope::User(user)) => Some(user.join(".claude.json")),
        None => None,
    };
    if let Some(file) = server_file.filter(|f| f.exists()) {
        let mut config = JsonFile::read(&file)?;
        if remove_server(&mut config) {
            config.write_or_delete()?;
            removed.push(file.display().to_string());
        }
    }
    if removed.is_empty() {
        println!("No Cairn hooks or MCP server in {}", path.display());
    } else {
        println!("Removed Cairn's entries from {}", removed.join(" and "));
    }
    Ok(())
}
