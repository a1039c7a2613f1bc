//! Cairn's hooks in a Claude Code settings file: `"hooks": {Event: [{matcher, hooks: [{type,
//! command}]}]}` (https://code.claude.com/docs/en/hooks#configuration). Install appends
//! Cairn's groups; uninstall removes exactly the handlers whose command is Cairn's, and the
//! groups and keys that only held them, so the file comes back byte for byte (object keys
//! keep their order; the indentation is Claude Code's two spaces).

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
    /// Cairn's home the hooks use (default: theirs, $CAIRN_HOME or ~/.local/share/cairn).
    #[arg(long)]
    home: Option<PathBuf>,
    /// The policy the hooks use (checked now; its absolute path goes into the hooks).
    #[arg(long)]
    policy: Option<PathBuf>,
}

/// (event, matcher, verb): `SessionStart` only after a compaction.
const HOOKS: &[(&str, &str, &str)] = &[("PreCompact", "", "pre-compact"), ("SessionStart", "compact", "session-start")];

impl Args {
    fn path(&self) -> Result<PathBuf> {
        Ok(match (&self.settings, &self.project) {
            (Some(file), _) => file.clone(),
            (None, Some(dir)) => dir.join(".claude/settings.json"),
            (None, None) => PathBuf::from(std::env::var_os("HOME").context("HOME is not set: name the file with --settings")?).join(".claude/settings.json"),
        })
    }
}

/// The command Claude Code runs for `verb`, through a shell.
fn command(exe: &Path, verb: &str, home: Option<&Path>, policy: Option<&Path>) -> String {
    let mut words = vec![quote(&exe.display().to_string()), "claude-code".into(), verb.into()];
    for (flag, path) in [("--home", home), ("--policy", policy)] {
        if let Some(path) = path {
            words.extend([flag.into(), quote(&path.display().to_string())]);
        }
    }
    words.join(" ")
}

/// Single-quoted for a POSIX shell when it needs quoting.
fn quote(word: &str) -> String {
    if word.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@".contains(&b)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Cairn's handler for `verb`, whatever binary path or home it was installed with.
fn is_cairn(handler: &Value, verb: &str) -> bool {
    handler.get("command").and_then(Value::as_str).is_some_and(|c| c.contains(&format!(" claude-code {verb}")))
}

struct Settings {
    path: PathBuf,
    value: Map<String, Value>,
    trailing_newline: bool,
}

impl Settings {
    fn read(path: &Path) -> Result<Self> {
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
                Ok(_) => bail!("{}: the settings are not a JSON object", path.display()),
                Err(e) => bail!("{}:{}:{}: {e}", path.display(), e.line(), e.column()),
            }
        };
        Ok(Settings { path: path.to_path_buf(), value, trailing_newline: text.is_empty() || text.ends_with('\n') })
    }

    fn write(&self) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.value)?;
        if self.trailing_newline {
            text.push('\n');
        }
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Atomic: Claude Code watches this file and must never read half of it.
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.persist(&self.path).with_context(|| format!("writing {}", self.path.display()))?;
        Ok(())
    }

    fn hooks(&mut self) -> Result<&mut Map<String, Value>> {
        match self.value.entry("hooks").or_insert_with(|| json!({})) {
            Value::Object(hooks) => Ok(hooks),
            _ => bail!("{}: `hooks` is not an object", self.path.display()),
        }
    }
}

pub fn install(args: Args) -> Result<()> {
    let path = args.path()?;
    let mut settings = Settings::read(&path)?;
    let exe = std::env::current_exe().context("locating the cairn binary")?;
    // A broken policy is refused now, naming its line, not at Claude Code's next compaction.
    let policy = match &args.policy {
        Some(file) => {
            crate::setup::host_and_policy(&[], Some(file))?;
            Some(std::fs::canonicalize(file)?)
        }
        None => None,
    };
    let mut added = Vec::new();
    let hooks = settings.hooks()?;
    for &(event, matcher, verb) in HOOKS {
        let groups = hooks.entry(event).or_insert_with(|| json!([]));
        let Value::Array(groups) = groups else { bail!("{}: `hooks.{event}` is not an array", path.display()) };
        let present = groups.iter().any(|g| g.get("hooks").and_then(Value::as_array).is_some_and(|hs| hs.iter().any(|h| is_cairn(h, verb))));
        if !present {
            groups.push(json!({"matcher": matcher, "hooks": [{"type": "command", "command": command(&exe, verb, args.home.as_deref(), policy.as_deref())}]}));
            added.push(event);
        }
    }
    if added.is_empty() {
        println!("Cairn's hooks are already in {}", path.display());
        return Ok(());
    }
    settings.write()?;
    println!("Added Cairn's {} hooks to {}", added.join(" and "), path.display());
    println!("Give the agent its recall tools too:  claude mcp add cairn -- {} serve --expose agent", quote(&exe.display().to_string()));
    Ok(())
}

pub fn uninstall(args: Args) -> Result<()> {
    let path = args.path()?;
    if !path.exists() {
        println!("No settings at {}: nothing to remove", path.display());
        return Ok(());
    }
    let mut settings = Settings::read(&path)?;
    let Some(Value::Object(hooks)) = settings.value.get_mut("hooks") else {
        println!("No Cairn hooks in {}", path.display());
        return Ok(());
    };
    let mut removed = 0;
    for &(event, _, verb) in HOOKS {
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
    if hooks.is_empty() {
        settings.value.remove("hooks");
    }
    if removed == 0 {
        println!("No Cairn hooks in {}", path.display());
        return Ok(());
    }
    settings.write()?;
    println!("Removed Cairn's hooks from {}", path.display());
    Ok(())
}
