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
use serde_json::{json, Value};

use crate::commands::agents::shared::report::{Change, SetupReport};

use super::super::shared::settings::{add_server, quote, remove_server, server_args, user_home, Hook, Hooks, JsonFile, SERVER};

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
    /// Print one JSON object for scripts: each file and what changed in it.
    #[arg(long)]
    pub json: bool,
}

/// `SessionStart` only after a compaction.
const HOOKS: Hooks = Hooks {
    agent: "claude-code",
    hooks: &[Hook { event: "PreCompact", matcher: "", verb: "pre-compact", name: None }, Hook { event: "SessionStart", matcher: "compact", verb: "session-start", name: None }],
};

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

pub fn install(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("claude-code", "install");
    let path = args.path()?;
    let mut settings = JsonFile::read(&path)?;
    let exe = crate::setup::cairn_exe().context("locating the cairn binary")?;
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
        report.file(&path, Change::Unchanged, format!("Cairn's hooks are already in {}", path.display()));
    } else {
        report.file(&path, Change::Added, format!("Added Cairn's {} hooks to {}", added.join(" and "), path.display()));
    }
    if let Some((file, _)) = &server_file {
        report.file(&file.path, Change::Added, format!("Registered Cairn's MCP server (the agent's session_history) in {}", file.path.display()));
    } else if let Some(file) = server_path {
        report.file(&file, Change::Unchanged, format!("Cairn's MCP server is already registered in {}", file.display()));
    } else {
        let scope = if project.is_some() { "--scope project " } else { "" };
        let words: Vec<String> = server.iter().map(|w| quote(w)).collect();
        report.note(format!("Give the agent its recall tools too (or install with --mcp):  claude mcp add {scope}{SERVER} -- {} {}", quote(&exe.display().to_string()), words.join(" ")));
    }
    Ok(report)
}

pub fn uninstall(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("claude-code", "uninstall");
    let path = args.path()?;
    let mut removed = Vec::new();
    if path.exists() {
        let mut settings = JsonFile::read(&path)?;
        let hooks = HOOKS.remove(&mut settings);
        let enabled = disable_server(&mut settings);
        if hooks > 0 || enabled {
            settings.write_or_delete()?;
            removed.push(path.clone());
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
            removed.push(file);
        }
    }
    if removed.is_empty() {
        report.file(&path, Change::LeftAlone, format!("No Cairn hooks or MCP server in {}", path.display()));
    }
    for file in removed {
        report.file(&file, Change::Removed, format!("Removed Cairn's entries from {}", file.display()));
    }
    Ok(report)
}
