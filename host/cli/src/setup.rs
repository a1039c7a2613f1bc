//! Shared CLI setup: a host with the bundled plugins, plugin directories, homes, policies.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cairn::storage::{ConversationKey, ConversationStore, Home};
use cairn::transcript::formats::{self, Format};
use cairn::transcript::Transcript;
use cairn::{Cairn, CheckedPolicy};

/// The arguments every verb that runs a chain on a transcript file takes.
#[derive(clap::Args)]
pub struct SessionArgs {
    /// The transcript: Pi, Claude Code, Codex or Gemini CLI session JSONL, OpenAI or Anthropic JSON, or Cairn JSONL (auto-detected).
    pub file: PathBuf,
    /// Policy file (TOML); the embedded model-free default when absent.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Storage home [default: $CAIRN_HOME, else ~/.local/share/cairn].
    #[arg(long)]
    pub home: Option<PathBuf>,
    /// Conversation key [default: derived from the file name].
    #[arg(long)]
    pub conversation: Option<String>,
    /// Extra plugin directory (`<name>.wasm` + `<name>.toml`); may repeat.
    #[arg(long)]
    pub plugin_dir: Vec<PathBuf>,
}

/// Everything such a verb needs, opened and validated.
pub struct Session {
    pub name: String,
    pub transcript: Transcript,
    pub format: Format,
    pub policy: CheckedPolicy,
    pub cairn: Cairn,
    pub home: Home,
    pub store: ConversationStore,
    /// A dry run on a home that does not exist: the empty stand-in, removed when dropped.
    pub scratch: Option<tempfile::TempDir>,
}

impl SessionArgs {
    /// Opens the conversation to write (its lock held until the store is dropped).
    pub fn open(&self) -> Result<Session> {
        self.open_as(false)
    }

    /// `dry_run`: the conversation opened to read, or an empty one in memory (see [`preview`]).
    pub fn open_as(&self, dry_run: bool) -> Result<Session> {
        let name = self.file.display().to_string();
        // Every command on a session counts it: the tokenizer's tables are built first, while
        // little else is resident, and the dictionary they come from is released once built
        // (`tokenizer::bpe`), so the process never holds both beside the session and plugins.
        cairn::tokenizer::Tokenizer::default().load();
        let (transcript, format) = read_transcript(&self.file)?;
        let (cairn, policy) = host_and_policy(&self.plugin_dir, self.policy.as_deref())?;
        let key = match &self.conversation {
            Some(key) => ConversationKey::parse(key)?,
            None => ConversationKey::derive(&self.file.file_stem().unwrap_or_default().to_string_lossy()),
        };
        let (home, store, scratch) = if dry_run {
            preview(self.home.clone(), &key)?
        } else {
            let home = Home::open(&home_path(self.home.clone()))?;
            let store = home.conversation(&key)?;
            (home, store, None)
        };
        Ok(Session { name, transcript, format, policy, cairn, home, store, scratch })
    }
}

/// A home and conversation to look at without writing anything: a home directory that does
/// not exist is not created (an empty temporary one stands for it, removed when the returned
/// guard drops), nor is a conversation the home does not hold (`Home::preview`).
pub fn preview(home: Option<PathBuf>, key: &ConversationKey) -> Result<(Home, ConversationStore, Option<tempfile::TempDir>)> {
    let path = home_path(home);
    let (home, scratch) = if cairn::storage::is_database(&path) || path.exists() {
        (Home::open(&path)?, None)
    } else {
        let empty = tempfile::Builder::new().prefix("cairn-dry-run-").tempdir().context("creating an empty home for the dry run")?;
        (Home::open(empty.path())?, Some(empty))
    };
    let store = home.preview(key)?;
    Ok((home, store, scratch))
}

/// A transcript file in any format Cairn reads; errors name the file (and line).
pub fn read_transcript(path: &Path) -> Result<(Transcript, Format)> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {name}"))?;
    Ok(formats::parse(&text, &name)?)
}

/// A host with every bundled plugin, then those in `plugin_dirs` (which may override them).
pub fn host(plugin_dirs: &[PathBuf]) -> Result<Cairn> {
    let mut cairn = Cairn::new()?;
    for bundled in cairn_bundle::BUNDLED {
        cairn.add_bundled_plugin(bundled.manifest, bundled.component, bundled.sha256)?;
    }
    for dir in plugin_dirs {
        if cairn.load_plugin_dir(dir)? == 0 {
            // A plugin's source folder (`./plugins` of the checkout) is the likely mistake.
            eprintln!(
                "warning: --plugin-dir {}: no plugin here, nothing loaded (a plugin is a `.wasm` component beside its `.toml` manifest; `cairn plugins build` makes them from a plugin's source)",
                dir.display()
            );
        }
    }
    Ok(cairn)
}

/// Compiles the bundled plugins into the code cache: what it did in one line, or why it could not.
pub fn compile_bundled_into_cache() -> Result<String, String> {
    let started = std::time::Instant::now();
    let dir = cairn::cache_dir().ok_or("the compiled-code cache is off (CAIRN_CACHE_DIR is empty): the bundled plugins were not compiled ahead")?;
    let cairn = host(&[]).map_err(|error| format!("compiling the bundled plugins into the cache at {} failed: {error:#}", dir.display()))?;
    let bundled = cairn_bundle::BUNDLED.len();
    let uncached = cairn_bundle::BUNDLED.iter().filter(|plugin| !cairn.is_compiled_in_cache(plugin.sha256)).count();
    if uncached > 0 {
        return Err(format!("{uncached} of the {bundled} bundled plugins could not be written to the cache at {} (the log says why)", dir.display()));
    }
    let compiled = cairn.plugins().filter(|plugin| !plugin.from_cache).count();
    Ok(if compiled == 0 {
        format!("The {bundled} bundled plugins are already compiled in the cache at {}", dir.display())
    } else {
        format!("Compiled {compiled} bundled plugins into the cache at {} ({:.1} s)", dir.display(), started.elapsed().as_secs_f64())
    })
}

/// When `home` holds no conversation `key`: the error a person who mistyped it needs, naming
/// the conversations it does hold.
pub fn missing_conversation(home: &Home, key: &ConversationKey) -> Result<Option<String>> {
    let here = home.conversations()?;
    Ok((!here.contains(key)).then(|| {
        let listed: Vec<String> = here.iter().map(ToString::to_string).collect();
        let listed = if listed.is_empty() { "none".to_string() } else { listed.join(", ") };
        format!("no conversation {key} in home {}; conversations here: {listed}", cairn::storage::shown(home.path()))
    }))
}

/// `home`'s conversation `key`, to read; one it does not hold is an error naming those it does.
pub fn existing_conversation(home: &Home, key: &ConversationKey) -> Result<ConversationStore> {
    if let Some(missing) = missing_conversation(home, key)? {
        anyhow::bail!("{missing}");
    }
    home.existing_conversation(key)
}

/// As [`existing_conversation`], to write.
pub fn existing_conversation_to_write(home: &Home, key: &ConversationKey) -> Result<ConversationStore> {
    if let Some(missing) = missing_conversation(home, key)? {
        anyhow::bail!("{missing}");
    }
    home.existing_conversation_to_write(key)
}

/// The program that runs `cairn`, for what names it (agent hooks, MCP server entries, the
/// bench's child processes): this executable, or `$CAIRN_EXE` where the process is another
/// program's — the Python package's console script and the Node.js package's bin set it, their
/// process being the interpreter.
pub fn cairn_exe() -> std::io::Result<PathBuf> {
    match std::env::var_os("CAIRN_EXE").filter(|p| !p.is_empty()) {
        Some(path) => std::path::absolute(PathBuf::from(path)),
        None => std::env::current_exe(),
    }
}

/// A policy file's settings (the embedded default without a path), read without loading any
/// plugin: for a verb that needs a figure of the policy, not its chain.
pub fn policy_settings(path: Option<&Path>) -> Result<cairn::policy::Policy> {
    Ok(match path {
        Some(file) => cairn::policy::Policy::parse(&std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?, &file.display().to_string())?,
        None => cairn::policy::Policy::default_policy(),
    })
}

/// A host and a policy checked against its plugins (the embedded default without a path).
pub fn host_and_policy(plugin_dirs: &[PathBuf], policy_path: Option<&Path>) -> Result<(Cairn, CheckedPolicy)> {
    let cairn = host(plugin_dirs)?;
    let policy = match policy_path {
        None => cairn.default_policy()?,
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading policy {}", path.display()))?;
            cairn.load_policy(&text, &path.display().to_string())?
        }
    };
    Ok((cairn, policy))
}

/// A project's conversation: the one `serve --expose agent` and the Claude Code hooks share.
pub fn project_conversation(dir: &Path) -> ConversationKey {
    ConversationKey::derive(&dir.file_name().unwrap_or(dir.as_os_str()).to_string_lossy())
}

/// `--home`, else `$CAIRN_HOME`, else `$XDG_DATA_HOME/cairn`, else `~/.local/share/cairn`.
pub fn home_path(home: Option<PathBuf>) -> PathBuf {
    home.or_else(|| std::env::var_os("CAIRN_HOME").map(PathBuf::from)).unwrap_or_else(default_home)
}

/// The home directory when none is named (`$XDG_DATA_HOME/cairn`, else `~/.local/share/cairn`).
pub fn default_home() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(|d| PathBuf::from(d).join("cairn"))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/cairn")))
        .unwrap_or_else(|| PathBuf::from(".cairn"))
}

/// Replaces `path` atomically (an agent may read its config at any moment and must never see
/// half of it), keeping its permissions; a new file is created with `new_mode` less the umask,
/// its folder too when missing.
pub fn write_atomically(path: &Path, text: &str, new_mode: u32) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let existing = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut builder = tempfile::Builder::new();
    builder.prefix(".cairn-").suffix(".tmp");
    #[cfg(unix)]
    if existing.is_none() {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(new_mode));
    }
    #[cfg(not(unix))]
    let _ = new_mode;
    let mut file = builder.tempfile_in(dir).with_context(|| format!("writing into {}", dir.display()))?;
    if let Some(permissions) = existing {
        file.as_file().set_permissions(permissions)?;
    }
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    file.persist(path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// For an agent's `install`: the policy file checked now (a broken one is refused naming its
/// line, not at the agent's next compaction), as the absolute path the hooks and server use.
pub fn installed_policy(policy: Option<&Path>) -> Result<Option<PathBuf>> {
    policy
        .map(|file| {
            host_and_policy(&[], Some(file))?;
            std::fs::canonicalize(file).with_context(|| format!("resolving {}", file.display()))
        })
        .transpose()
}
