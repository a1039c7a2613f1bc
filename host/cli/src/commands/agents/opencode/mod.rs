//! `cairn opencode`: Cairn inside OpenCode (1.18.x), for a project.
//! - `install` writes Cairn's plugin to `PROJECT/.opencode/plugin/cairn.ts` (OpenCode loads any
//!   `.ts` there; the file is embedded in this binary) and registers Cairn's MCP server in
//!   `PROJECT/opencode.json` as `mcp.cairn` (a local command: `cairn serve --expose recall
//!   --conversation KEY …`, the agent's `session_history`, a tool OpenCode names
//!   `cairn_session_history`). The plugin starts that same command with `--expose harness` to
//!   compact, so both use one home, policy and conversation.
//! - `uninstall` removes exactly that: the plugin file (and the folders install created, when
//!   empty) and the `cairn` entry. Install edits the config as text, inserting one member
//!   right after an object's `{`; uninstall removes that text, so the file comes back byte for
//!   byte (whatever its indentation). A config edited around the entry since is rewritten
//!   without it instead (two-space JSON, keys in order). A config install created is deleted
//!   when nothing else was added to it.

mod config;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::commands::agents::shared::report::{Change, SetupReport};

/// The plugin OpenCode loads, embedded so the binary is self-contained.
pub const PLUGIN: &str = include_str!("../../../../../../examples/opencode-plugin/src/cairn.ts");

/// The MCP server's name in OpenCode: its tools are `cairn_…`.
const SERVER: &str = "cairn";

#[derive(clap::Subcommand)]
pub enum Command {
    /// Add Cairn's plugin and MCP server to a project (`.opencode/plugin/cairn.ts`, `mcp.cairn` in
    /// `opencode.json`).
    Install(Args),
    /// Remove exactly what `install` added (the config comes back byte for byte).
    Uninstall(Args),
}

#[derive(clap::Args)]
pub struct Args {
    /// The project folder (where `opencode.json` is) [default: the current directory].
    #[arg(long)]
    project: Option<PathBuf>,
    /// Cairn's home the server uses (default: its own, $CAIRN_HOME or ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy the server uses (checked now; its absolute path goes into the command).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Print one JSON object for scripts: each file and what changed in it.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    fn project(&self) -> Result<PathBuf> {
        let dir = match &self.project {
            Some(dir) => dir.clone(),
            None => std::env::current_dir()?,
        };
        std::fs::canonicalize(&dir).with_context(|| format!("--project {}", dir.display()))
    }
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Install(args) => {
            let json = args.json;
            install(args)?.finish_install(json)
        }
        Command::Uninstall(args) => {
            let json = args.json;
            uninstall(args)?.print(json)
        }
    }
}

/// Where install writes.
struct Paths {
    config: PathBuf,
    plugin: PathBuf,
}

impl Paths {
    fn of(project: &Path) -> Self {
        Paths { config: project.join("opencode.json"), plugin: project.join(".opencode/plugin/cairn.ts") }
    }
}

/// Whether a `mcp.cairn` entry is Cairn's (whatever binary, home or policy it names).
fn is_cairn_server(entry: &Value) -> bool {
    let words = entry.get("command").and_then(Value::as_array);
    words.is_some_and(|w| w.get(1).and_then(Value::as_str) == Some("serve") && w.iter().any(|a| a == "--expose"))
}

/// Whether an existing plugin file is Cairn's (any version).
fn is_cairn_plugin(text: &str) -> bool {
    text.starts_with("/**\n * Cairn for OpenCode")
}

fn install(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("opencode", "install");
    let project = args.project()?;
    let paths = Paths::of(&project);
    let exe = crate::setup::cairn_exe().context("locating the cairn binary")?;
    let policy = crate::setup::installed_policy(args.policy.as_deref())?;
    let home = args.home.as_deref().map(std::path::absolute).transpose()?;
    let conversation = crate::setup::project_conversation(&project);
    let mut command = vec![exe.display().to_string(), "serve".into(), "--expose".into(), "recall".into(), "--conversation".into(), conversation.to_string()];
    for (flag, path) in [("--home", &home), ("--policy", &policy)] {
        if let Some(path) = path {
            command.extend([flag.to_string(), path.display().to_string()]);
        }
    }
    let entry = json!({"type": "local", "command": command, "enabled": true});

    // Checked before anything is written.
    let existing = match std::fs::read_to_string(&paths.config) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", paths.config.display())),
    };
    let new_config = match &existing {
        None => Some(config::created(SERVER, &entry)),
        Some(text) => {
            let value = config::parse(text, &paths.config)?;
            match value.get("mcp").and_then(|m| m.get(SERVER)) {
                Some(found) if *found == entry => None,
                Some(found) if is_cairn_server(found) => {
                    bail!("{}: Cairn's MCP server is registered with other options; run `cairn opencode uninstall` first", paths.config.display())
                }
                Some(_) => bail!("{}: an MCP server named `{SERVER}` that is not Cairn's is already registered", paths.config.display()),
                None => Some(config::insert(text, SERVER, &entry).with_context(|| format!("editing {}", paths.config.display()))?),
            }
        }
    };
    let plugin_state = match std::fs::read_to_string(&paths.plugin) {
        Ok(text) if text == PLUGIN => None,
        Ok(text) if is_cairn_plugin(&text) => Some(Change::Updated),
        Ok(_) => bail!("{} exists and is not Cairn's plugin", paths.plugin.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Change::Added),
        Err(e) => return Err(e).with_context(|| format!("reading {}", paths.plugin.display())),
    };

    if let Some(state) = plugin_state {
        let dir = paths.plugin.parent().expect("a folder");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::setup::write_atomically(&paths.plugin, PLUGIN, 0o666)?;
        report.file(&paths.plugin, state, format!("Cairn's plugin {}: {}", if matches!(state, Change::Added) { "added" } else { "updated" }, paths.plugin.display()));
    } else {
        report.file(&paths.plugin, Change::Unchanged, format!("Cairn's plugin is already in {}", paths.plugin.display()));
    }
    match new_config {
        Some(text) => {
            crate::setup::write_atomically(&paths.config, &text, 0o666)?;
            report.file(&paths.config, Change::Added, format!("Registered Cairn's MCP server (the agent's session_history) in {}", paths.config.display()));
        }
        None => report.file(&paths.config, Change::Unchanged, format!("Cairn's MCP server is already registered in {}", paths.config.display())),
    }
    report.note(format!("Conversation: {conversation}. OpenCode's next compaction in this project is Cairn's."));
    Ok(report)
}

fn uninstall(args: Args) -> Result<SetupReport> {
    let mut report = SetupReport::new("opencode", "uninstall");
    let project = args.project()?;
    let paths = Paths::of(&project);
    let mut removed = Vec::new();
    if let Ok(text) = std::fs::read_to_string(&paths.config) {
        let value = config::parse(&text, &paths.config)?;
        if value.get("mcp").and_then(|m| m.get(SERVER)).is_some_and(is_cairn_server) {
            match config::remove(&text, SERVER)? {
                None => std::fs::remove_file(&paths.config).with_context(|| format!("deleting {}", paths.config.display()))?,
                Some(rest) => crate::setup::write_atomically(&paths.config, &rest, 0o666)?,
            }
            removed.push(paths.config.clone());
        }
    }
    match std::fs::read_to_string(&paths.plugin) {
        Ok(text) if is_cairn_plugin(&text) => {
            std::fs::remove_file(&paths.plugin).with_context(|| format!("deleting {}", paths.plugin.display()))?;
            // The folders go too when nothing else is in them (OpenCode adds its own files to
            // `.opencode/` when it loads a plugin; those stay).
            let plugin_dir = paths.plugin.parent().expect("a folder");
            if std::fs::remove_dir(plugin_dir).is_ok() {
                let _ = std::fs::remove_dir(plugin_dir.parent().expect("a folder"));
            }
            removed.push(paths.plugin.clone());
        }
        Ok(_) => report.file(&paths.plugin, Change::LeftAlone, format!("{} is not Cairn's plugin; left as it is", paths.plugin.display())),
        Err(_) => {}
    }
    if removed.is_empty() {
        report.note(format!("No Cairn plugin or MCP server in {}", project.display()));
    }
    for file in removed {
        report.file(&file, Change::Removed, format!("Removed Cairn from {}", file.display()));
    }
    Ok(report)
}
