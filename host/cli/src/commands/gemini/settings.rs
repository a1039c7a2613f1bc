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

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::commands::claude_code::settings::{add_server, quote, remove_server, user_home, JsonFile};

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
}

/// (event, verb, the handler's name in Gemini CLI's `/hooks` list).
const HOOKS: &[(&str, &str, &str)] = &[("PreCompress", "pre-compress", "cairn-pre-compress"), ("BeforeAgent", "before-agent", "cairn-before-agent")];

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

/// The command Gemini CLI runs for `verb`, through `bash -c`.
fn command(exe: &Path, verb: &str, home: Option<&Path>, policy: Option<&Path>) -> String {
    let mut words = vec![quote(&exe.display().to_string()), "gemini".into(), verb.into()];
    for (flag, path) in [("--home", home), ("--policy", policy)] {
        if let Some(path) = path {
            words.extend([flag.into(), quote(&path.display().to_string())]);
        }
    }
    words.join(" ")
}

/// Cairn's handler for `verb`, whatever binary path or home it was installed with.
fn is_cairn(handler: &Value, verb: &str) -> bool {
    handler.get("command").and_then(Value::as_str).is_some_and(|c| c.contains(&format!(" gemini {verb}")))
}

/// The MCP server's arguments: the hooks' home and policy, and the project whose conversation
/// the hooks write (without one, `serve` takes the folder Gemini CLI starts it in).
fn server_args(home: Option<&Path>, policy: Option<&Path>, project: Option<&Path>) -> Vec<String> {
    let mut args: Vec<String> = vec!["serve".into(), "--expose".into(), "recall".into()];
    for (flag, path) in [("--home", home), ("--policy", policy), ("--project", project)] {
        if let Some(path) = path {
            args.extend([flag.into(), path.display().to_string()]);
        }
    }
    args
}

/// Adds Cairn's hooks to `settings`; the events added.
fn add_hooks(settings: &mut JsonFile, command_for: impl Fn(&str) -> String) -> Result<Vec<&'static str>> {
    let path = settings.path.clone();
    let hooks = settings.object("hooks")?;
    let mut added = Vec::new();
    for &(event, verb, name) in HOOKS {
        let groups = hooks.entry(event).or_insert_with(|| json!([]));
        let Value::Array(groups) = groups else { bail!("{}: `hooks.{event}` is not an array", path.display()) };
        let present = groups.iter().any(|g| g.get("hooks").and_then(Value::as_array).is_some_and(|hs| hs.iter().any(|h| is_cairn(h, verb))));
        if !present {
            groups.push(json!({"matcher": "*", "hooks": [{"type": "command", "command": command_for(verb), "name": name}]}));
            added.push(event);
        }
    }
    Ok(added)
}

/// Removes Cairn's hooks from `settings`; how many handlers went.
fn remove_hooks(settings: &mut JsonFile) -> usize {
    let Some(Value::Object(hooks)) = settings.value.get_mut("hooks") else { return 0 };
    let mut removed = 0;
    for &(event, verb, _) in HOOKS {
        let Some(Value::Array(groups)) = hooks.get_mut(event) else { continue };
        let removed_before = removed;
        // Groups Cairn's removal emptied go; a group the user left empty stays.
        groups.retain_mut(|group| {
            let Some(Value::Array(handlers)) = group.get_mut("hooks") else { return true };
            let before = handlers.len();
            handlers.retain(|h| !is_cairn(h, verb));
            removed += before - handlers.len();
            !(handlers.is_empty() && before > 0)
        });
        if groups.is_empty() && removed > removed_before {
            hooks.remove(event);
        }
    }
    if removed > 0 && hooks.is_empty() {
        settings.value.remove("hooks");
    }
    removed
}

pub fn install(args: Args) -> Result<()> {
    let path = args.path()?;
    let mut settings = JsonFile::read(&path)?;
    let exe = std::env::current_exe().context("locating the cairn binary")?;
    // A broken policy is refused now, naming its line, not at Gemini CLI's next compression.
    let policy = match &args.policy {
        Some(file) => {
            crate::setup::host_and_policy(&[], Some(file))?;
            Some(std::fs::canonicalize(file)?)
        }
        None => None,
    };
    // Hooks and server run wherever Gemini CLI starts them: every path is absolute.
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let project = match args.project_dir() {
        Some(dir) => {
            let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
            Some(std::fs::canonicalize(&dir).or_else(|_| std::path::absolute(&dir))?)
        }
        None => None,
    };
    let added = add_hooks(&mut settings, |verb| command(&exe, verb, home.as_deref(), policy.as_deref()))?;
    let entry = json!({"command": exe.display().to_string(), "args": server_args(home.as_deref(), policy.as_deref(), project.as_deref()), "trust": true});
    let registered = add_server(&mut settings, entry)?;
    if !added.is_empty() || registered {
        settings.write(0o666)?;
    }
    if added.is_empty() {
        println!("Cairn's hooks are already in {}", path.display());
    } else {
        println!("Added Cairn's {} hooks to {}", added.join(" and "), path.display());
    }
    if registered {
        println!("Registered Cairn's MCP server (the agent's mcp_cairn_session_history, trusted) in {}", path.display());
    } else {
        println!("Cairn's MCP server is already registered in {}", path.display());
    }
    Ok(())
}

pub fn uninstall(args: Args) -> Result<()> {
    let path = args.path()?;
    if path.exists() {
        let mut settings = JsonFile::read(&path)?;
        let hooks = remove_hooks(&mut settings);
        let server = remove_server(&mut settings);
        if hooks > 0 || server {
            settings.write_or_delete()?;
            if !path.exists() {
                if let Some(dir) = path.parent().filter(|d| d.file_name().is_some_and(|n| n == ".gemini")) {
                    // Fails, leaving it, unless it is empty.
                    let _ = std::fs::remove_dir(dir);
                }
            }
            println!("Removed Cairn's hooks and MCP server from {}", path.display());
            return Ok(());
        }
    }
    println!("No Cairn hooks or MCP server in {}", path.display());
    Ok(())
}
