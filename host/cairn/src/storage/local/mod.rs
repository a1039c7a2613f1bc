//! The local directory backend: one home directory, opened once as a capability
//! (`cap_std::fs::Dir`). Everything below it is reached through that handle with paths built
//! only from validated ids, so nothing from input can name a file outside the home.
//!
//! Layout of `conversations/<key>/` (another tenant's under `tenants/<tenant>/conversations/`):
//! - `events.jsonl` — the append-only event log (`log`);
//! - `archives/<archive-id>/` — originals and artifacts of each compaction (`archives`);
//! - `state.json` — the lifecycle's small state, replaced atomically (`state`);
//! - `outbox.jsonl`, `acks.jsonl` — notices for the harness and their acknowledgements (`outbox`);
//! - `lock` — the writer's lock (`lock`).
//!
//! `tokens/tokens.json` holds the bearer tokens of `cairn serve --http`. `files` holds the
//! primitives every part shares.

mod archives;
pub(crate) mod files;
mod lock;
mod log;
mod outbox;
mod state;

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::backend::{ArchiveEntries, ArchiveReader, Backend, Conversation, DocumentChange, DocumentName, Parsed};
use super::stored_token::StoredToken;
use super::{ArchiveId, ConversationKey, Tenant};
use crate::record::{Event, Notice};
use crate::transcript::Artifact;
use files::open_real_dir;

const CONVERSATIONS: &str = "conversations";
const TENANTS: &str = "tenants";
const TOKENS: &str = "tokens";
const TOKENS_FILE: &str = "tokens.json";

pub struct Local {
    dir: Dir,
    path: PathBuf,
    location: String,
}

impl Local {
    /// Opens (creating if needed) the home directory. The only ambient path use in storage.
    pub fn open(path: &Path) -> Result<Self> {
        std::fs::DirBuilder::new().recursive(true).mode(files::PRIVATE_DIR).create(path).with_context(|| format!("creating home {}", path.display()))?;
        let dir = Dir::open_ambient_dir(path, ambient_authority()).with_context(|| format!("opening home {}", path.display()))?;
        files::create_dirs(&dir, CONVERSATIONS).with_context(|| format!("creating {}/{CONVERSATIONS}", path.display()))?;
        Ok(Local { dir, path: path.to_path_buf(), location: path.display().to_string() })
    }

    /// Opens a home directory that exists, creating nothing in it (a reader's open).
    pub fn open_existing(path: &Path) -> Result<Self> {
        let dir = match Dir::open_ambient_dir(path, ambient_authority()) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("no Cairn home at {}", path.display()),
            Err(e) => return Err(e).with_context(|| format!("opening home {}", path.display())),
        };
        Ok(Local { dir, path: path.to_path_buf(), location: path.display().to_string() })
    }

    /// The folder of a tenant's conversations (the default tenant's is the home's own).
    fn folder(tenant: &Tenant) -> String {
        if tenant.is_default() {
            CONVERSATIONS.to_string()
        } else {
            format!("{TENANTS}/{tenant}/{CONVERSATIONS}")
        }
    }

    fn conversations_dir(&self, tenant: &Tenant, create: bool) -> std::io::Result<Dir> {
        let folder = Self::folder(tenant);
        if create {
            files::create_dirs(&self.dir, &folder)?;
        }
        open_real_dir(&self.dir, &folder)
    }

    fn with_tokens<T>(&self, change: impl FnOnce(&mut Vec<StoredToken>) -> Result<T>) -> Result<T> {
        files::create_dirs(&self.dir, TOKENS)?;
        let dir = open_real_dir(&self.dir, TOKENS)?;
        let _lock = lock::Writer::acquire(&dir, "lock").with_context(|| format!("locking {}/{TOKENS}", self.location))?;
        let mut tokens = read_tokens(&dir, &self.location)?;
        let answer = change(&mut tokens)?;
        files::write_atomically(&dir, TOKENS_FILE, &serde_json::to_vec_pretty(&tokens)?).with_context(|| format!("saving {}/{TOKENS}/{TOKENS_FILE}", self.location))?;
        Ok(answer)
    }
}

fn read_tokens(dir: &Dir, location: &str) -> Result<Vec<StoredToken>> {
    match dir.read(TOKENS_FILE) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("{location}/{TOKENS}/{TOKENS_FILE}: not a token list")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("reading {location}/{TOKENS}/{TOKENS_FILE}")),
    }
}

impl Backend for Local {
    fn location(&self) -> &str {
        &self.location
    }

    fn document(&self, name: &DocumentName) -> Result<Option<Vec<u8>>> {
        match self.dir.read(name.as_str()) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}/{}", self.location, name.as_str())),
        }
    }

    fn update_document(&self, name: &DocumentName, change: &mut DocumentChange<'_>) -> Result<()> {
        // `hook-failures.jsonl` is locked by `hook-failures.lock`, as before documents were the home's.
        let lock = format!("{}.lock", name.as_str().split_once('.').map_or(name.as_str(), |(stem, _)| stem));
        let _lock = lock::Writer::acquire(&self.dir, &lock).with_context(|| format!("locking {}/{lock}", self.location))?;
        let current = self.document(name)?;
        if let Some(bytes) = change(current.as_deref())? {
            files::write_atomically(&self.dir, name.as_str(), &bytes).with_context(|| format!("replacing {}/{}", self.location, name.as_str()))?;
        }
        Ok(())
    }

    fn open(&self, tenant: &Tenant, key: &ConversationKey, writer: bool) -> Result<Box<dyn Conversation>> {
        let path = self.path.join(Self::folder(tenant)).join(key.as_str());
        let (dir, lock) = if writer {
            let conversations = self.conversations_dir(tenant, true).with_context(|| format!("opening {}", path.display()))?;
            if !conversations.exists(key.as_str()) {
                files::create_dirs(&conversations, key.as_str()).with_context(|| format!("creating conversation {key}"))?;
                files::sync_dir(&conversations)?;
            }
            let dir = open_real_dir(&conversations, key.as_str()).with_context(|| format!("opening conversation {key}"))?;
            let lock = lock::Writer::acquire(&dir, "lock").with_context(|| format!("locking {}", path.display()))?;
            (dir, Some(lock))
        } else {
            let dir = self
                .conversations_dir(tenant, false)
                .and_then(|conversations| open_real_dir(&conversations, key.as_str()))
                .with_context(|| crate::error_kinds::NotFound(format!("no conversation {key} in {}", self.location)))?;
            (dir, None)
        };
        Ok(Box::new(LocalConversation { dir, path, lock, loaded: None, appended: log::Appended::Nothing }))
    }

    fn conversations(&self, tenant: &Tenant) -> Result<Vec<ConversationKey>> {
        let dir = match self.conversations_dir(tenant, false) {
            Ok(dir) => dir,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("listing the conversations in {}", self.location)),
        };
        let mut keys = Vec::new();
        for entry in dir.entries()? {
            let entry = entry?;
            if let Some(key) = entry.file_name().to_str().and_then(|n| ConversationKey::parse(n).ok()) {
                keys.push(key);
            }
        }
        keys.sort();
        Ok(keys)
    }

    fn tokens(&self) -> Result<Vec<StoredToken>> {
        match open_real_dir(&self.dir, TOKENS) {
            Ok(dir) => read_tokens(&dir, &self.location),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("reading the tokens of {}", self.location)),
        }
    }

    fn add_token(&self, token: &StoredToken) -> Result<()> {
        self.with_tokens(|tokens| {
            tokens.push(token.clone());
            Ok(())
        })
    }

    fn revoke_token(&self, id: &str) -> Result<bool> {
        self.with_tokens(|tokens| {
            let found = tokens.iter_mut().find(|t| t.id == id);
            Ok(found.map(|t| t.revoked = true).is_some())
        })
    }
}

struct LocalConversation {
    dir: Dir,
    /// The conversation's folder, as shown in messages.
    path: PathBuf,
    /// Held by a writer; dropping it releases the conversation.
    lock: Option<lock::Writer>,
    /// Where a writer's load left the log, for giving the log back (`keep`).
    loaded: Option<log::Position>,
    /// What the writer appended since.
    appended: log::Appended,
}

impl Conversation for LocalConversation {
    fn load(&mut self) -> Result<Arc<Parsed>> {
        let (parsed, loaded) = log::load(&self.dir, &self.path.join(log::EVENTS), self.lock.is_some())?;
        (self.loaded, self.appended) = (loaded, log::Appended::Nothing);
        Ok(parsed)
    }

    /// The log with this writer's appends, when they are what the file holds after the load:
    /// the events it appended are the ones it holds (nothing of them is left out when
    /// written, so parsing them back gives them again), and the next load need not read them.
    fn keep(&mut self, mut log: Arc<Parsed>, loaded: usize) {
        let (at, appended) = (self.loaded.take(), std::mem::take(&mut self.appended));
        if let log::Appended::Through { end, lines } = appended {
            let shown = self.path.join(log::EVENTS);
            if let Some(after) = (log.events.len() == loaded + lines).then(|| log::after_appends(&self.dir, &shown, at.as_ref(), end, lines)).flatten() {
                return log::keep(log, after);
            }
        }
        let Some(at) = at else { return };
        if let Some(parsed) = Arc::get_mut(&mut log) {
            parsed.truncate(loaded);
            log::keep(log, at);
        }
    }

    fn append(&mut self, event: &Event) -> Result<()> {
        let written = log::append(&self.dir, &self.path.join(log::EVENTS), event);
        self.appended = match &written {
            Ok(line) => std::mem::take(&mut self.appended).then(self.loaded.as_ref(), line),
            Err(_) => log::Appended::Unknown,
        };
        written.map(drop)
    }

    fn write_archive(&mut self, id: &ArchiveId, entries: &ArchiveEntries<'_>, artifacts: &[Artifact]) -> Result<()> {
        archives::write(&self.dir, id, entries, artifacts)
    }

    fn archives(&self) -> Result<Arc<dyn ArchiveReader>> {
        Ok(Arc::new(archives::Archives(self.dir.try_clone()?)))
    }

    fn load_state(&self) -> Result<Option<Vec<u8>>> {
        state::load(&self.dir, &self.path.join(state::STATE))
    }

    fn save_state(&mut self, state: Vec<u8>) -> Result<()> {
        state::save(&self.dir, &self.path.join(state::STATE), &state)
    }

    fn notices(&self) -> Result<Vec<(Notice, bool)>> {
        outbox::notices(&self.dir, &self.path)
    }

    fn queue_notice(&mut self, notice: &Notice) -> Result<bool> {
        outbox::queue(&self.dir, &self.path, notice)
    }

    fn ack_notice(&mut self, id: &str) -> Result<bool> {
        outbox::ack(&self.dir, &self.path, id)
    }
}
