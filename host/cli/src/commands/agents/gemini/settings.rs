//! Cairn in Gemini CLI's settings file (`~/.gemini/settings.json`, or a project's
//! `.gemini/settings.json`; packages/cli/src/config/settings.ts), one file holding both:
//! - the hooks, `"hooks": {Event: [{matcher, hooks: [{type: "command", command, name}]}]}`
//!   (packages/core/src/hooks/hookRegistry.ts): `PreCompress` → `cairn gemini pre-compress`,
//!   `BeforeAgent` → `cairn gemini before-agent`, matcher `*` (every trigger);
//! - the MCP server, `"mcpServers": {"cairn": {command, args, trust: true}}`: `cairn serve
//!   --expose recall` (`session_history` alone; nothing in Gemini CLI calls `boundary`, so a
//!   `context_maintenance` request would never be carried out), on the hooks' home, policy and
//!   project. Gemini CLI names its tool `mcp_cairn_session_history`
//!   (packages/core/src/tools/mcp-tool.ts, `generateValidName`); `trust` adds a policy rule
//!   that allows the server's tools without asking (packages/core/src/policy/config.ts), which
//!   headless mode (`gemini -p`) needs: it cannot ask. The tool only reads Cairn's archive.
//!
//! Gemini CLI reads a project's settings, and runs its hooks, only in a trusted folder (its
//! first-run dialog, `~/.gemini/trustedFolders.json`, or `GEMINI_CLI_TRUST_WORKSPACE=true`).
//!
//! Install appends Cairn's entries; uninstall removes exactly those (the handlers whose command
//! is Cairn's, the `cairn` server whose arguments are `serve --expose …`) and the groups and
//! keys that only held them, so a file comes back byte for byte (object keys keep their order;
//! the indentation is Gemini CLI's two spaces). A file left empty is deleted, and a project's
//! `.gemini/` folder install created with it. Settings with comments are refused (naming the
//! line): they could not be written back as they were.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::commands::agents::shared::report::{Change, SetupReport};

use super::super::shared::settings::{add_server, remove_server, server_args, user_home, Hook, Hooks, JsonFile};

#[derive(clap::Args)]
pub struct Args {
    /// The project's `.gemini/settings.json` instead of the user's `~/.gemini/settings.json`.
    #[arg(long, conflicts_with = "settings")]
    project: Option<PathBuf>,
    /// A settings file by path.
    #[arg(long)]
    settings: Option<PathBuf>,
    /// Cairn's home the hooks and the MCP server use (default: theirs, $CAIRN_HOME or
    /// ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy the hooks and the MCP server use (checked now; its absolute path goes into
    /// the hooks).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Print one JSON object for scripts: each file and what changed in it.
    #[arg(long)]
    pub json: bool,
}

/// Every handler named, for Gemini CLI's `/hooks` list.
const HOOKS: Hooks = Hooks {
    agent: "gemini",
    hooks: &[
        Hook { event: "PreCompress", matcher: "*", verb: "pre-compress", name: Some("cairn-pre-compress") },
        Hook { event: "BeforeAgent", matcher: "*", verb: "before-agent", name: Some("cairn-before-agent") },
    ],
};

impl Args {
    fn path(&self) -> Result<PathBuf> {
        Ok(match (&self.settings, &self.project) {
            (Some(file), _) => file.clone(),
            (None, Some(dir)) => dir.join(".gemini/settings.json"),
            (None, None) => gemini_home()?.join(".gemini/settings.json"),
        })
    }

    /// The project whose settings these are: --project, or the folder holding the settings
    /// file's `.gemini/`.
    fn project_dir(&self) -> Option<PathBuf> {
        match (&self.settings, &self.project) {
            (_, Some(dir)) => Some(dir.clone()),
            (Some(file), None) => {
                let folder = file.parent()?;
                (folder.file_name()? == ".gemini").then(|| folder.parent().map(Path::to_path_buf)).flatten().filter(|d| Some(d) != gemini_home().ok().as_ref())
            }
            (None, None) => None,
        }
    }
}

/// Where Gemini CLI looks for `.gemini/`: `$GEMINI_CLI_HOME`, else HOME.
fn gemini_home() -> Result<PathBuf> {
    match std::env::var_os("GEMINI_CLI_HOME") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => user_home(),
    }
}

pub fn install(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("gemini", "install");
    let path = args.path()?;
    let mut settings = JsonFile::read(&path)?;
    let exe = crate::setup::cairn_exe().context("locating the cairn binary")?;
    let policy = crate::setup::installed_policy(args.policy.as_deref())?;
    // Hooks and server run wherever Gemini CLI starts them: every path is absolute.
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let project = match args.project_dir() {
        Some(dir) => {
            let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
            Some(std::fs::canonicalize(&dir).or_else(|_| std::path::absolute(&dir))?)
        }
        None => None,
    };
    let added = HOOKS.add(&mut settings, |verb| HOOKS.command(&exe, verb, home.as_deref(), policy.as_deref()))?;
    let entry = json!({"command": exe.display().to_string(), "args": server_args(home.as_deref(), policy.as_deref(), project.as_deref()), "trust": true});
    let registered = add_server(&mut settings, entry)?;
    if !added.is_empty() || registered {
        settings.write(0o666)?;
    }
    if added.is_empty() {
        report.file(&path, Change::Unchanged, format!("Cairn's hooks are already in {}", path.display()));
    } else {
        report.file(&path, Change::Added, format!("Added Cairn's {} hooks to {}", added.join(" and "), path.display()));
    }
    if registered {
        report.file(&path, Change::Added, format!("Registered Cairn's MCP server (the agent's mcp_cairn_session_history, trusted) in {}", path.display()));
    } else {
        report.file(&path, Change::Unchanged, format!("Cairn's MCP server is already registered in {}", path.display()));
    }
    Ok(report)
}

pub fn uninstall(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("gemini", "uninstall");
    let path = args.path()?;
    if path.exists() {
        let mut settings = JsonFile::read(&path)?;
        let hooks = HOOKS.remove(&mut settings);
        let server = remove_server(&mut settings);
        if hooks > 0 || server {
            settings.write_or_delete()?;
            if !path.exists() {
                if let Some(dir) = path.parent().filter(|d| d.file_name().is_some_and(|n| n == ".gemini")) {
                    // Fails, leaving it, unless it is empty.
                    let _ = std::fs::remove_dir(dir);
                }
            }
            report.file(&path, Change::Removed, format!("Removed Cairn's hooks and MCP server from {}", path.display()));
            return Ok(report);
        }
    }
    report.file(&path, Change::LeftAlone, format!("No Cairn hooks or MCP server in {}", path.display()));
    Ok(report)
}
