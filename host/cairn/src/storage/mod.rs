//! Durable storage: the record, archives, state and outbox of every conversation, in a home
//! chosen by its location: a local directory (the default, `local`) or a PostgreSQL database
//! (`postgres://…`, `postgres`). `backend` is what both provide; this module holds what they
//! share: which entries are new, which archives a log commits, what a reader may not do.

pub mod archive;
mod backend;
mod ids;
mod local;
mod location;
mod postgres;
mod stored_token;
#[doc(hidden)]
pub mod testing;
mod tokens;

pub use archive::ArchiveView;
pub use ids::{session_id, ArchiveId, ArtifactUri, ConversationKey, IdError, Tenant};
pub(crate) use local::files;
pub use location::{is_database, shown};
pub use tokens::{Credential, TokenInfo, TokenScope, Tokens};

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use crate::error_kinds::NotFound;
use crate::record::{CompactionEvent, Event, Notice};
use crate::transcript::{Artifact, Entry};
pub use backend::DocumentName;
use backend::{ArchiveEntries, Backend, Conversation, Parsed};

/// The storage home, scoped to one tenant. Cheap to clone; `for_tenant` gives the same home
/// seen by another tenant.
#[derive(Clone)]
pub struct Home {
    backend: Arc<dyn Backend>,
    tenant: Tenant,
}

impl Home {
    /// Opens (creating if needed) the home: a `postgres://` or `postgresql://` URL is a
    /// PostgreSQL database (its schema migrated on first use), anything else a directory.
    pub fn open(location: &Path) -> Result<Self> {
        let text = location.to_string_lossy();
        let backend: Arc<dyn Backend> = if location::is_url(&text) { Arc::new(postgres::Postgres::open(&text)?) } else { Arc::new(local::Local::open(location)?) };
        Ok(Home { backend, tenant: Tenant::default_tenant() })
    }

    /// Opens a home that must exist already, to read: a directory home that is missing is an
    /// error ("no Cairn home at …"), and nothing in it is created (not even its
    /// `conversations` folder), so a read leaves the home byte for byte as it was. A database
    /// home opens as with [`Home::open`] (its schema is the database's, not a folder to create).
    pub fn open_existing(location: &Path) -> Result<Self> {
        let text = location.to_string_lossy();
        let backend: Arc<dyn Backend> = if location::is_url(&text) { Arc::new(postgres::Postgres::open(&text)?) } else { Arc::new(local::Local::open_existing(location)?) };
        Ok(Home { backend, tenant: Tenant::default_tenant() })
    }

    /// Whether the tenant has this conversation (a reader asks before opening, so that asking
    /// about a conversation the home does not hold answers without creating it).
    pub fn has_conversation(&self, key: &ConversationKey) -> Result<bool> {
        Ok(self.conversations()?.contains(key))
    }

    /// Where the home is: its directory, or its URL without the password.
    pub fn path(&self) -> &Path {
        Path::new(self.backend.location())
    }

    /// The same home, every key resolved inside `tenant`.
    pub fn for_tenant(&self, tenant: &Tenant) -> Home {
        Home { tenant: tenant.clone(), ..self.clone() }
    }

    pub fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    /// A document of the home's own (every tenant's), none when absent.
    pub fn document(&self, name: &DocumentName) -> Result<Option<Vec<u8>>> {
        self.backend.document(name)
    }

    /// Replaces a home document atomically, one changer at a time: `change` gets its bytes and
    /// returns the new ones (none: unchanged).
    pub fn update_document(&self, name: &DocumentName, mut change: impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>>) -> Result<()> {
        self.backend.update_document(name, &mut change)
    }

    /// The bearer tokens of this home (every tenant's).
    pub fn tokens(&self) -> Tokens {
        Tokens { backend: self.backend.clone() }
    }

    /// Opens one conversation to write, creating it on first use: waits for the conversation's
    /// lock (one writer at a time, across processes and nodes), then loads its log, repairing a
    /// tail a crashed writer left torn. The lock is held until the store is dropped.
    pub fn conversation(&self, key: &ConversationKey) -> Result<ConversationStore> {
        ConversationStore::load(self.backend.open(&self.tenant, key, true)?, key.clone(), true)
    }

    /// Opens a conversation that must already exist, to write (an undo, a pin, an
    /// acknowledgement): one the home does not hold is an error, and is not created.
    pub fn existing_conversation_to_write(&self, key: &ConversationKey) -> Result<ConversationStore> {
        if !self.has_conversation(key)? {
            return Err(NotFound(format!("no conversation {key} in home {}", self.backend.location())).into());
        }
        self.conversation(key)
    }

    /// Opens a conversation that must already exist, to read: no lock, and the record is
    /// never modified (an event a writer is still appending is simply not read yet).
    pub fn existing_conversation(&self, key: &ConversationKey) -> Result<ConversationStore> {
        ConversationStore::load(self.backend.open(&self.tenant, key, false)?, key.clone(), false)
    }

    /// A conversation to look at without writing anything, even its creation: the existing
    /// one opened to read, else an empty one that lives only in memory (dry runs).
    pub fn preview(&self, key: &ConversationKey) -> Result<ConversationStore> {
        if self.has_conversation(key)? {
            return self.existing_conversation(key);
        }
        ConversationStore::load(Box::new(Detached), key.clone(), false)
    }

    /// A conversation's state document, without reading its log (a node starting up asks
    /// every conversation).
    pub fn state<T: serde::de::DeserializeOwned>(&self, key: &ConversationKey) -> Result<Option<T>> {
        state_document(key, self.backend.open(&self.tenant, key, false)?.load_state()?)
    }

    /// The tenant's conversations, in name order.
    pub fn conversations(&self) -> Result<Vec<ConversationKey>> {
        self.backend.conversations(&self.tenant)
    }

    /// Finds an artifact by URI in whichever of the tenant's conversations holds its archive. A
    /// conversation that cannot be read (a planted symlink, a corrupt log) is skipped with a
    /// warning.
    pub fn find_artifact(&self, uri: &ArtifactUri) -> Result<Vec<u8>> {
        let archive_id: ArchiveId = uri.archive_id.parse()?;
        let keys = match self.backend.archive_holders(&self.tenant, &archive_id)? {
            Some(keys) => keys,
            None => self.conversations()?,
        };
        for key in keys {
            let store = match self.existing_conversation(&key) {
                Ok(store) => store,
                Err(e) => {
                    tracing::warn!(conversation = %key, "skipping an unreadable conversation: {e:#}");
                    continue;
                }
            };
            if store.has_archive(&uri.archive_id) {
                return store.read_artifact(uri);
            }
        }
        Err(NotFound(format!("artifact not found: no conversation in {} holds archive {}", self.backend.location(), uri.archive_id)).into())
    }
}

/// `context` with `compaction`'s outcome taken back: its replacement (where the context still
/// holds it) swapped for `originals`.
pub fn restore(context: &[Entry], compaction: &CompactionEvent, originals: Vec<Entry>) -> Result<Vec<Entry>> {
    let position = |id: &str| context.iter().position(|e| e.id == id);
    let (first, last) = match (compaction.replacement.first(), compaction.replacement.last()) {
        (Some(first), Some(last)) => match (position(&first.id), position(&last.id)) {
            (Some(f), Some(l)) if f <= l => (f, l + 1),
            // Formats without ids of their own (OpenAI chat) name entries by their content, so a
            // context written out and read back names changed entries anew: find the run the
            // model would read the same.
            _ if let Some(f) = same_run(context, &compaction.replacement) => (f, f + compaction.replacement.len()),
            _ => bail!("the context no longer holds compaction {}'s outcome (entries {}…{}): it changed since (another compaction, or the harness's own)", compaction.archive_id, first.id, last.id),
        },
        _ => bail!("compaction {} left nothing in its range's place: there is no position to restore its originals at", compaction.archive_id),
    };
    let mut restored = Vec::with_capacity(context.len() + originals.len());
    restored.extend_from_slice(&context[..first]);
    restored.extend(originals);
    restored.extend_from_slice(&context[last..]);
    Ok(restored)
}

/// About the bytes of an entry's JSON line: its texts, escaped a little, plus the keys.
fn serialized_estimate(entry: &Entry) -> usize {
    use crate::transcript::Part;
    let text: usize = entry
        .parts
        .iter()
        .map(|part| match part {
            Part::Text { text } | Part::Thinking { text } => text.len(),
            Part::ToolCall { id, name, args } => id.len() + name.len() + args.len() + args.len() / 8,
            Part::ToolResult { call_id, content, elided, .. } => call_id.len() + content.len() + elided.as_ref().map_or(0, String::len),
            Part::Image { reference } => reference.len(),
            Part::Placeholder { text, uri } => text.len() + uri.as_ref().map_or(0, String::len),
        })
        .sum();
    text + text / 16 + 160 + entry.id.len() + entry.response.as_ref().map_or(0, String::len)
}

/// Where `run` stands in `context` as the model reads it (same roles, same text), if it does.
fn same_run(context: &[Entry], run: &[Entry]) -> Option<usize> {
    let reads = |a: &Entry, b: &Entry| a.role == b.role && a.model_text() == b.model_text();
    (0..=context.len().checked_sub(run.len())?).find(|&at| context[at..at + run.len()].iter().zip(run).all(|(a, b)| reads(a, b)))
}

fn state_document<T: serde::de::DeserializeOwned>(key: &ConversationKey, bytes: Option<Vec<u8>>) -> Result<Option<T>> {
    bytes.map(|bytes| serde_json::from_slice(&bytes).with_context(|| format!("conversation {key}: not a valid state document"))).transpose()
}

/// A conversation that does not exist yet, seen by a dry run: empty, and never written (its
/// store is a reader).
struct Detached;

impl Conversation for Detached {
    fn load(&mut self) -> Result<Arc<Parsed>> {
        Ok(Arc::default())
    }
    fn append(&mut self, _: &Event) -> Result<()> {
        bail!("a detached conversation is never written")
    }
    fn write_archive(&mut self, _: &ArchiveId, _: &ArchiveEntries<'_>, _: &[Artifact]) -> Result<()> {
        bail!("a detached conversation is never written")
    }
    fn archives(&self) -> Result<Arc<dyn backend::ArchiveReader>> {
        Ok(Arc::new(Detached))
    }
    fn load_state(&self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn save_state(&mut self, _: Vec<u8>) -> Result<()> {
        bail!("a detached conversation is never written")
    }
    fn notices(&self) -> Result<Vec<(Notice, bool)>> {
        Ok(Vec::new())
    }
    fn queue_notice(&mut self, _: &Notice) -> Result<bool> {
        bail!("a detached conversation is never written")
    }
    fn ack_notice(&mut self, _: &str) -> Result<bool> {
        Ok(false)
    }
}

impl backend::ArchiveReader for Detached {
    fn entries(&self, _: &ArchiveId) -> std::io::Result<Option<Vec<u8>>> {
        Ok(None)
    }
    fn artifact(&self, _: &ArchiveId, _: u32) -> std::io::Result<Vec<u8>> {
        Err(std::io::ErrorKind::NotFound.into())
    }
}

/// One conversation's durable record and archives.
pub struct ConversationStore {
    conversation: Box<dyn Conversation>,
    /// Opened to write (holding the conversation's lock); a reader's writes are refused.
    writer: bool,
    key: ConversationKey,
    /// The log as parsed: a writer's own (its appends are pushed in place, never copying the
    /// log), a reader's shared with the backend's kept copy.
    log: Arc<Parsed>,
    /// How many events the log held when loaded.
    loaded: usize,
    /// Units begun and not yet committed: the outermost commit commits.
    units: usize,
}

impl ConversationStore {
    fn load(mut conversation: Box<dyn Conversation>, key: ConversationKey, writer: bool) -> Result<Self> {
        let log = conversation.load()?;
        let loaded = log.events.len();
        Ok(ConversationStore { conversation, writer, key, log, loaded, units: 0 })
    }

    pub fn key(&self) -> &ConversationKey {
        &self.key
    }

    pub fn events(&self) -> &[Event] {
        &self.log.events
    }

    fn committed(&self) -> impl DoubleEndedIterator<Item = &CompactionEvent> {
        self.log.events.iter().filter_map(|e| match e {
            Event::Compaction(c) if c.committed_by.is_some() => Some(c.as_ref()),
            _ => None,
        })
    }

    /// Committed compactions no undo has taken back, oldest first.
    pub fn standing(&self) -> Vec<&CompactionEvent> {
        let undone = self.undone();
        self.committed().filter(|c| !undone.contains(c.archive_id.as_str())).collect()
    }

    /// Archive ids of the compactions undone.
    pub fn undone(&self) -> std::collections::HashSet<&str> {
        self.log.events.iter().filter_map(|e| if let Event::Undo(u) = e { Some(u) } else { None }).flat_map(|u| u.undone.iter().map(String::as_str)).collect()
    }

    /// The working context as the record knows it: every entry recorded, in order, with each
    /// committed compaction applied and each undo taken back.
    pub fn context(&self) -> Result<Vec<Entry>> {
        self.with_context(<[Entry]>::to_vec)
    }

    /// [`ConversationStore::context`] lent to `read`, not copied: a boundary compares the
    /// context it is sent with the record's (twice), and a copy of a long context costs more
    /// than the comparison. `read` must not ask this store for its context again.
    pub fn with_context<R>(&self, read: impl FnOnce(&[Entry]) -> R) -> Result<R> {
        let mut folded = self.log.folded.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match folded.as_ref() {
            Some(f) if f.events() == self.log.events.len() => {}
            _ => *folded = Some(self.fold()?),
        }
        Ok(read(folded.as_ref().map_or(&[][..], |f| &f.entries)))
    }

    /// The context the whole log folds to: snapshots add what the context lacks, committed
    /// compactions replace, undos put the originals back.
    fn fold(&self) -> Result<backend::Folded> {
        let mut context: Vec<Entry> = Vec::new();
        let mut present = std::collections::HashSet::new();
        let mut by_archive = std::collections::HashMap::new();
        for event in &self.log.events {
            match event {
                Event::Snapshot { entries, replaces_context: true, .. } => {
                    context = entries.clone();
                    present = context.iter().map(|e| e.id.clone()).collect();
                }
                Event::Snapshot { entries, .. } => {
                    for entry in entries {
                        if present.insert(entry.id.clone()) {
                            context.push(entry.clone());
                        }
                    }
                }
                Event::Compaction(c) if c.committed_by.is_some() => {
                    context = c.applied_to(&context);
                    present = context.iter().map(|e| e.id.clone()).collect();
                    by_archive.insert(c.archive_id.as_str(), c.as_ref());
                }
                Event::Undo(undo) => {
                    for id in &undo.undone {
                        let Some(compaction) = by_archive.get(id.as_str()) else { bail!("conversation {}: undo names archive {id}, which no compaction committed", self.key) };
                        context = restore(&context, compaction, self.archived_originals(id)?).with_context(|| format!("conversation {}: replaying the undo of {id}", self.key))?;
                    }
                    present = context.iter().map(|e| e.id.clone()).collect();
                }
                _ => {}
            }
        }
        Ok(backend::Folded { from: self.log.events.len(), base: context.len(), after: Vec::new(), entries: context, present })
    }

    /// Ids the operator pinned (and did not unpin since).
    pub fn pinned_ids(&self) -> std::collections::BTreeSet<String> {
        let mut pinned = std::collections::BTreeSet::new();
        for event in &self.log.events {
            if let Event::Pin { ids, pinned: on, .. } = event {
                for id in ids {
                    if *on {
                        pinned.insert(id.clone());
                    } else {
                        pinned.remove(id);
                    }
                }
            }
        }
        pinned
    }

    /// The standing compaction that already took `entries` in, if they are an original it
    /// compacted handed in again: they hold no entry the record has not seen, and they still
    /// hold entries that compaction took out of the working context. Compacting them again
    /// would stack a second compaction of the same original (and its archive, so every
    /// history search would find each entry twice); the latest such compaction is returned.
    pub fn already_compacted(&self, entries: &[Entry]) -> Option<&CompactionEvent> {
        if entries.is_empty() || !entries.iter().all(|e| self.knows_entry(&e.id)) {
            return None;
        }
        // Entries as they were before a compaction took them out or changed them in place.
        // (Compared as the model reads them: a context written out in a format and read back
        // keeps its text, not every part's structure.)
        let earlier: HashSet<&str> = self
            .with_context(|context| {
                let now: HashMap<&str, &Entry> = context.iter().map(|e| (e.id.as_str(), e)).collect();
                entries.iter().filter(|e| now.get(e.id.as_str()).is_none_or(|n| n.role != e.role || n.model_text() != e.model_text())).map(|e| e.id.as_str()).collect()
            })
            .ok()?;
        if earlier.is_empty() {
            return None;
        }
        self.standing().into_iter().rev().find(|c| c.replaced.iter().any(|id| earlier.contains(id.as_str())))
    }

    /// Whether the record holds an entry with this id.
    pub fn knows_entry(&self, id: &str) -> bool {
        self.log.known_entries.contains(id)
    }

    /// The originals a committed compaction replaced, exactly as they were recorded.
    pub fn archived_originals(&self, archive_id: &str) -> Result<Vec<Entry>> {
        let id: ArchiveId = archive_id.parse()?;
        let Some(compaction) = self.committed().find(|c| c.archive_id == id.as_str()) else {
            bail!("no committed compaction with archive {archive_id} in conversation {}", self.key);
        };
        let Some(lines) = self.conversation.archives()?.entries(&id).with_context(|| format!("reading archive {archive_id}"))? else { return Ok(Vec::new()) };
        let recorded = self.snapshot_entries(compaction.replaced.iter().map(String::as_str).collect());
        Ok(archive::parse_lines(&id, &lines, |entry_id| recorded.get(entry_id).map(|e| (*e).clone()))?)
    }

    /// The entries the log's snapshots hold under these ids (a snapshot records each id once).
    fn snapshot_entries<'a>(&'a self, mut ids: HashSet<&str>) -> HashMap<&'a str, &'a Entry> {
        let mut found = HashMap::new();
        for event in &self.log.events {
            if ids.is_empty() {
                break;
            }
            if let Event::Snapshot { entries, .. } = event {
                found.extend(entries.iter().filter(|e| ids.remove(e.id.as_str())).map(|e| (e.id.as_str(), e)));
            }
        }
        found
    }

    /// The files the latest stamped compaction recorded that changed in `workspace` since.
    pub fn stale_files(&self, workspace: &Path) -> Vec<crate::workspace::StaleFile> {
        self.committed().rev().find(|c| !c.files.is_empty()).map_or_else(Vec::new, |c| crate::workspace::stale(workspace, &c.files))
    }

    /// The checkpoint of the latest standing compaction or handover that has one (an undone
    /// one's checkpoint describes a context that no longer exists).
    pub fn latest_checkpoint(&self) -> Option<&str> {
        self.latest_checkpoint_event().and_then(|c| c.checkpoint.as_deref())
    }

    /// The id of the last entry the latest checkpoint was made from, where the record says.
    pub fn latest_checkpoint_through(&self) -> Option<&str> {
        self.latest_checkpoint_event().and_then(|c| c.checkpoint_through.as_deref())
    }

    fn latest_checkpoint_event(&self) -> Option<&CompactionEvent> {
        self.standing().into_iter().rev().find(|c| c.checkpoint.is_some())
    }

    /// The text of the operator's first message in the whole record, whatever compactions
    /// removed from the context since: the conversation's root objective.
    pub fn first_operator_request(&self) -> Option<String> {
        self.log.events.iter().find_map(|e| match e {
            Event::Snapshot { entries, .. } => entries.iter().find(|e| e.role == crate::transcript::Role::User && e.origin == crate::transcript::Origin::Operator).map(|e| e.model_text()),
            _ => None,
        })
    }

    /// Ids of the seed entries committed handovers started sessions with.
    pub fn seed_ids(&self) -> std::collections::HashSet<String> {
        self.committed().filter(|c| c.purpose == crate::record::Purpose::Handover).flat_map(|c| c.replacement.iter().map(|e| e.id.clone())).collect()
    }

    /// The session the conversation is in now: the target of its latest handover, or one
    /// derived from the key before any handover.
    pub fn current_session(&self) -> String {
        self.committed().rev().find_map(|c| c.sessions.as_ref().map(|s| s.target.clone())).unwrap_or_else(|| session_id(self.key.as_str(), "initial"))
    }

    /// Appends the entries the record has not seen yet. Returns how many were new.
    ///
    /// An input that begins with the record's context as the model reads it, under other ids
    /// (a format without ids of its own names entries by their content, so a context written
    /// out and read back names changed entries anew), is that context sent back: it is
    /// recorded whole as a replacement, not appended after the context it repeats.
    pub fn record_snapshot(&mut self, source: &str, entries: &[Entry]) -> Result<usize> {
        let new: Vec<Entry> = entries.iter().filter(|e| !self.log.known_entries.contains(&e.id)).cloned().collect();
        if new.is_empty() {
            return Ok(0);
        }
        let count = new.len();
        let replaces_context = self.sends_back_context(entries)?;
        let entries = if replaces_context { entries.to_vec() } else { new };
        self.append(Event::Snapshot { at: crate::record::now_millis(), source: source.to_string(), entries, replaces_context })?;
        Ok(count)
    }

    /// Whether `entries` begin with the record's context, read the same (the matcher undo uses
    /// for the caller's context), while naming some of its entries by other ids. A renamed entry
    /// carries an id the record has never seen: a window that slid past the context's first
    /// entries names known entries at other places, and is appended, not taken for a send-back.
    fn sends_back_context(&self, entries: &[Entry]) -> Result<bool> {
        self.with_context(|context| {
            if context.is_empty() || context.len() > entries.len() {
                return false;
            }
            let mut renamed = false;
            for (sent, kept) in entries.iter().zip(context.iter()) {
                if sent.id != kept.id {
                    if self.log.known_entries.contains(&sent.id) {
                        return false;
                    }
                    renamed = true;
                }
            }
            renamed && same_run(&entries[..context.len()], context) == Some(0)
        })
    }

    pub fn record_compaction(&mut self, event: CompactionEvent) -> Result<()> {
        self.append(Event::Compaction(Box::new(event)))
    }

    pub fn record_undo(&mut self, event: crate::record::UndoEvent) -> Result<()> {
        self.append(Event::Undo(event))
    }

    pub fn record_pins(&mut self, ids: Vec<String>, pinned: bool) -> Result<()> {
        self.append(Event::Pin { at: crate::record::now_millis(), ids, pinned })
    }

    /// Writing needs the conversation's lock.
    fn writable(&mut self) -> Result<&mut dyn Conversation> {
        if !self.writer {
            bail!("conversation {} was opened to read; writing needs Home::conversation", self.key);
        }
        Ok(self.conversation.as_mut())
    }

    fn append(&mut self, event: Event) -> Result<()> {
        self.writable()?.append(&event)?;
        Arc::make_mut(&mut self.log).push(event);
        Ok(())
    }

    /// From here until [`ConversationStore::commit`], the writes are one unit: after a crash
    /// the record holds all of them or (on PostgreSQL, one transaction) none; the local
    /// directory orders them so that the lifecycle's recovery finishes a unit cut short.
    /// Units nest: an inner one commits with the outermost.
    pub fn begin(&mut self) -> Result<()> {
        self.writable()?;
        if self.units == 0 {
            self.conversation.begin();
        }
        self.units += 1;
        Ok(())
    }

    pub fn commit(&mut self) -> Result<()> {
        self.writable()?;
        self.units = self.units.saturating_sub(1);
        if self.units > 0 {
            return Ok(());
        }
        self.conversation.commit().with_context(|| format!("committing to conversation {}", self.key))
    }

    /// Writes an archive: the originals of the replaced entries and the artifacts. Returns the
    /// artifact URIs. Called before the compaction event that commits it; until then readers
    /// do not see it.
    pub fn write_archive(&mut self, archive_id: &ArchiveId, originals: &[Entry], artifacts: &[Artifact]) -> Result<Vec<String>> {
        // An original the record already holds exactly is stored as a reference to it.
        let in_snapshots = self.snapshot_entries(originals.iter().map(|e| e.id.as_str()).collect());
        let recorded: Vec<bool> = originals.iter().map(|e| in_snapshots.get(e.id.as_str()).is_some_and(|r| *r == e)).collect();
        self.writable()?.write_archive(archive_id, &ArchiveEntries { originals, recorded }, artifacts)?;
        Ok(ArtifactUri::numbered(archive_id, artifacts.len()))
    }

    /// The conversation's state document, if one was saved.
    pub fn load_state<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        state_document(&self.key, self.conversation.load_state()?)
    }

    /// Replaces the state document as a whole.
    pub fn save_state<T: serde::Serialize>(&mut self, state: &T) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(state)?;
        self.writable()?.save_state(bytes)
    }

    /// Queues a notice unless one with its id is already queued.
    pub fn queue_notice(&mut self, notice: &Notice) -> Result<bool> {
        self.writable()?.queue_notice(notice)
    }

    /// Queued notices, oldest first; acknowledged ones only when `include_acked`.
    pub fn notices(&self, include_acked: bool) -> Result<Vec<Notice>> {
        Ok(self.conversation.notices()?.into_iter().filter(|(_, acked)| include_acked || !acked).map(|(n, _)| n).collect())
    }

    /// The harness saw this notice; it is not delivered again.
    pub fn ack_notice(&mut self, id: &str) -> Result<()> {
        let key = self.key.clone();
        if !self.writable()?.ack_notice(id)? {
            bail!("no notice {} in conversation {key}", crate::echo::input(id));
        }
        Ok(())
    }

    /// The entries the record holds under these ids, in the order given (for resuming work
    /// that was prepared before a crash, or rebuilding what a harness holds): recorded ones,
    /// else those a committed compaction put in.
    pub fn recorded_entries(&self, ids: &[String]) -> Result<Vec<Entry>> {
        let by_id = self.recorded_by_id(ids);
        ids.iter().map(|id| by_id.get(id.as_str()).map(|e| (*e).clone()).ok_or_else(|| anyhow::anyhow!("entry {id} is not in the record"))).collect()
    }

    /// The entries the record holds under these ids (snapshots first, then what compactions
    /// put in); ids it does not hold are left out.
    pub fn recorded_by_id<'a>(&'a self, ids: &[String]) -> HashMap<&'a str, &'a Entry> {
        let mut by_id = self.snapshot_entries(ids.iter().map(String::as_str).collect());
        for compaction in self.committed() {
            for entry in &compaction.replacement {
                by_id.entry(entry.id.as_str()).or_insert(entry);
            }
        }
        by_id
    }

    /// A bounded, read-only view of this conversation's committed archives.
    pub fn archive_view(&self) -> Result<ArchiveView> {
        let archives: Vec<CompactionEvent> = self.committed().cloned().collect();
        let replaced = archives.iter().flat_map(|c| c.replaced.iter().map(String::as_str)).collect();
        let recorded = self.snapshot_entries(replaced).into_iter().map(|(id, e)| (id.to_string(), e.clone())).collect();
        Ok(ArchiveView::new(self.conversation.archives()?, archives, recorded))
    }

    /// Whether this conversation's log commits the archive (an archive written by an attempt
    /// that crashed before its event is not part of the record).
    pub fn has_archive(&self, archive_id: &str) -> bool {
        self.committed().any(|c| c.archive_id == archive_id)
    }

    /// The stored original, byte for byte.
    pub fn read_artifact(&self, uri: &ArtifactUri) -> Result<Vec<u8>> {
        let archive_id: ArchiveId = uri.archive_id.parse()?;
        if !self.has_archive(archive_id.as_str()) {
            return Err(NotFound(format!("artifact not found: {uri} in conversation {}", self.key)).into());
        }
        self.conversation.archives()?.artifact(&archive_id, uri.index).with_context(|| NotFound(format!("artifact not found: {uri} in conversation {}", self.key)))
    }
}

impl Drop for ConversationStore {
    /// A writer gives its log back to the backend with its own appends, so that the next
    /// store of this conversation reads only what others appended since instead of the whole
    /// log, and no store ever copies the log to append to it.
    fn drop(&mut self) {
        if !self.writer {
            return;
        }
        let mut log = std::mem::take(&mut self.log);
        // Shared (a view still holds it): the backend reads the log again when next asked.
        if Arc::get_mut(&mut log).is_some() {
            self.conversation.keep(log, self.loaded);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Role};
    use testing::ScratchDatabase;

    /// Where a test's home lives: a temporary directory, or a scratch PostgreSQL database.
    enum Place {
        Dir(tempfile::TempDir),
        Database(ScratchDatabase),
    }

    impl Place {
        fn home(&self) -> Home {
            match self {
                Place::Dir(dir) => Home::open(dir.path()).unwrap(),
                Place::Database(db) => Home::open(Path::new(&db.url)).unwrap(),
            }
        }
    }

    /// Every backend this run can reach: the local directory always, PostgreSQL where
    /// `CAIRN_TEST_POSTGRES` names a server (always under CI).
    fn places() -> Vec<Place> {
        let mut places = vec![Place::Dir(tempfile::tempdir().unwrap())];
        places.extend(ScratchDatabase::create().map(Place::Database));
        places
    }

    fn key(k: &str) -> ConversationKey {
        ConversationKey::parse(k).unwrap()
    }

    fn store(dir: &Path) -> ConversationStore {
        Home::open(dir).unwrap().conversation(&key("c1")).unwrap()
    }

    fn entry(id: &str) -> Entry {
        Entry::text(id, Role::User, Origin::Operator, "hello")
    }

    fn snapshot_ids(s: &ConversationStore) -> Vec<String> {
        s.events()
            .iter()
            .flat_map(|e| match e {
                Event::Snapshot { entries, .. } => entries.iter().map(|e| e.id.clone()).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn committed_compaction(id: &ArchiveId, artifacts: Vec<String>) -> CompactionEvent {
        let mut event = CompactionEvent::new(crate::record::Purpose::Compact, id.as_str(), 2, vec![]);
        event.committed_by = Some("p@1".into());
        event.artifacts = artifacts;
        event
    }

    #[test]
    fn snapshots_record_only_new_entries_and_survive_reopening() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            assert_eq!(s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap(), 2);
            assert_eq!(s.record_snapshot("a", &[entry("e1"), entry("e2"), entry("e3")]).unwrap(), 1);
            drop(s);
            let s = place.home().conversation(&key("c1")).unwrap();
            assert_eq!(s.events().len(), 2, "{}", home.path().display());
            assert_eq!(snapshot_ids(&s), ["e1", "e2", "e3"]);
            assert_eq!(home.conversations().unwrap(), [key("c1")]);
        }
    }

    /// A store sees what another store (another process, another node) appended since.
    #[test]
    fn a_kept_log_sees_what_other_writers_appended() {
        for place in places() {
            let (first, second) = (place.home(), place.home());
            let mut s = first.conversation(&key("c1")).unwrap();
            s.record_snapshot("a", &[entry("e1")]).unwrap();
            drop(s);
            assert_eq!(snapshot_ids(&first.existing_conversation(&key("c1")).unwrap()), ["e1"]);
            let mut other = second.conversation(&key("c1")).unwrap();
            other.record_snapshot("b", &[entry("e2")]).unwrap();
            drop(other);
            assert_eq!(snapshot_ids(&first.existing_conversation(&key("c1")).unwrap()), ["e1", "e2"], "{}", first.path().display());
        }
    }

    #[test]
    fn a_reader_cannot_write_and_needs_the_conversation_to_exist() {
        for place in places() {
            let home = place.home();
            assert!(home.existing_conversation(&key("nobody")).is_err(), "{}", home.path().display());
            home.conversation(&key("c1")).unwrap().record_snapshot("a", &[entry("e1")]).unwrap();
            let mut reader = home.existing_conversation(&key("c1")).unwrap();
            assert!(reader.save_state(&1).is_err() && reader.ack_notice("x").is_err() && reader.record_snapshot("a", &[entry("e9")]).is_err());
            assert_eq!(reader.events().len(), 1);
        }
    }

    #[test]
    fn one_writer_at_a_time() {
        for place in places() {
            let home = place.home();
            let first = home.conversation(&key("c1")).unwrap();
            let (sender, receiver) = std::sync::mpsc::channel();
            let other = place.home();
            let second = std::thread::spawn(move || {
                let mut s = other.conversation(&key("c1")).unwrap();
                sender.send(()).unwrap();
                s.record_snapshot("second", &[entry("e2")]).unwrap();
            });
            assert!(receiver.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "the second writer waits ({})", home.path().display());
            drop(first);
            receiver.recv_timeout(std::time::Duration::from_secs(10)).expect("the second writer gets the lock once the first is gone");
            second.join().unwrap();
            assert_eq!(home.conversation(&key("c1")).unwrap().events().len(), 1);
        }
    }

    #[test]
    fn the_context_replays_compactions_undos_and_pins_on_every_backend() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            let originals: Vec<Entry> = ["e1", "e2", "e3", "e4"].map(entry).into();
            s.record_snapshot("a", &originals).unwrap();
            let id = ArchiveId::generate(s.key());
            s.write_archive(&id, &originals[1..3], &[]).unwrap();
            let mut event = committed_compaction(&id, vec![]);
            event.replaced = vec!["e2".into(), "e3".into()];
            event.forgotten = event.replaced.clone();
            event.replacement = vec![Entry::text("s1", Role::User, Origin::Summary, "summary")];
            s.record_compaction(event.clone()).unwrap();
            s.record_snapshot("b", &[entry("s1"), entry("e5")]).unwrap();
            let ids = |context: Vec<Entry>| context.into_iter().map(|e| e.id).collect::<Vec<_>>();
            assert_eq!(ids(s.context().unwrap()), ["e1", "s1", "e4", "e5"]);
            s.record_undo(crate::record::UndoEvent { at: 0, undone: vec![id.to_string()], tokens_before: 0, tokens_after: 0 }).unwrap();
            s.record_pins(vec!["e1".into(), "e4".into()], true).unwrap();
            s.record_pins(vec!["e4".into()], false).unwrap();
            drop(s);
            let s = home.existing_conversation(&key("c1")).unwrap();
            assert_eq!(s.context().unwrap(), [&originals[..], &[entry("e5")]].concat(), "{}", home.path().display());
            assert!(s.standing().is_empty() && s.undone().contains(id.as_str()));
            assert_eq!(s.pinned_ids().into_iter().collect::<Vec<_>>(), ["e1"]);
            assert_eq!(s.archived_originals(id.as_str()).unwrap(), &originals[1..3], "byte for byte as recorded");
        }
    }

    /// An original the snapshots hold exactly is archived as a reference to it, not a second
    /// copy; one the harness changed, or one no snapshot holds, is archived whole. Undo, show
    /// and the archive's readers get every original back as it was replaced.
    #[test]
    fn an_original_the_record_holds_is_archived_once() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            let long = |id: &str, text: &str| Entry::text(id, Role::Tool, Origin::Tool, text.repeat(2_000));
            s.record_snapshot("a", &[long("e1", "ls -la "), long("e2", "cargo test "), long("e3", "git diff ")]).unwrap();
            let originals = vec![long("e2", "cargo test "), long("e3", "edited by the harness "), Entry::text("s0", Role::User, Origin::Summary, "an earlier summary")];
            let id = ArchiveId::generate(s.key());
            s.write_archive(&id, &originals, &[]).unwrap();
            let mut event = committed_compaction(&id, vec![]);
            event.replaced = vec!["e2".into(), "e3".into(), "s0".into()];
            event.forgotten = event.replaced.clone();
            s.record_compaction(event).unwrap();
            drop(s);

            let s = home.existing_conversation(&key("c1")).unwrap();
            let stored = String::from_utf8(s.conversation.archives().unwrap().entries(&id).unwrap().unwrap()).unwrap();
            let lines: Vec<&str> = stored.lines().collect();
            assert_eq!(lines[0], r#"{"recorded":"e2"}"#, "{}", home.path().display());
            assert!(lines[1].contains("edited by the harness") && lines[2].contains("an earlier summary"), "changed or unrecorded originals are whole");
            assert!(stored.len() < 44_000 + 1_000, "only e3's 44 kB, not e2's 22 kB again ({} bytes)", stored.len());
            assert_eq!(s.archived_originals(id.as_str()).unwrap(), originals, "every original back, byte for byte");
            let page = s.archive_view().unwrap().page(id.as_str(), 0, 10, 0).unwrap();
            assert_eq!(page.entries.iter().map(|e| e.entry_id.as_str()).collect::<Vec<_>>(), ["e2", "e3", "s0"]);
            assert!(page.entries[0].text.starts_with("cargo test cargo test"));
            let hits = s.archive_view().unwrap().search("cargo", 0, 5).unwrap();
            assert_eq!(hits.hits[0].entry_id, "e2", "search reads the referenced original");
        }
    }

    /// A reference to an entry no snapshot holds (a damaged or foreign archive) is an error
    /// that names the archive, the line and the entry, never a silently missing original.
    #[test]
    fn a_reference_the_record_cannot_resolve_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let mut s = home.conversation(&key("c1")).unwrap();
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        let id = ArchiveId::generate(s.key());
        s.writable().unwrap().write_archive(&id, &ArchiveEntries { originals: &[entry("e1"), entry("e9")], recorded: vec![true, true] }, &[]).unwrap();
        let mut event = committed_compaction(&id, vec![]);
        event.replaced = vec!["e1".into(), "e9".into()];
        s.record_compaction(event).unwrap();
        let err = format!("{:#}", s.archived_originals(id.as_str()).unwrap_err());
        assert!(err.contains(&format!("archive {id} line 2")) && err.contains("\"e9\""), "{err}");
        let err = s.archive_view().unwrap().page(id.as_str(), 0, 10, 0).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("e9"), "{err}");
    }

    /// The context kept beside the log (extended by each snapshot, not folded again) is the
    /// one a fresh fold of the whole log gives, across writers that take appends out again,
    /// another writer's appends, and a compaction that makes it fold again.
    #[test]
    fn the_kept_context_is_the_fold_of_the_whole_log() {
        for place in places() {
            let (home, other) = (place.home(), place.home());
            let ids = |context: Vec<Entry>| context.into_iter().map(|e| e.id).collect::<Vec<_>>();
            let fresh = || {
                let log = home.existing_conversation(&key("c1")).unwrap();
                let folded = log.fold().unwrap().entries;
                (ids(log.context().unwrap()), ids(folded))
            };
            let mut s = home.conversation(&key("c1")).unwrap();
            s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap();
            assert_eq!(ids(s.context().unwrap()), ["e1", "e2"]);
            s.record_snapshot("a", &[entry("e3")]).unwrap();
            assert_eq!(ids(s.context().unwrap()), ["e1", "e2", "e3"], "extended by the snapshot");
            drop(s);
            let mut s = other.conversation(&key("c1")).unwrap();
            s.record_snapshot("b", &[entry("e4")]).unwrap();
            drop(s);
            let (kept, folded) = fresh();
            assert_eq!(kept, ["e1", "e2", "e3", "e4"], "{}", home.path().display());
            assert_eq!(kept, folded);
            let mut s = home.conversation(&key("c1")).unwrap();
            assert_eq!(ids(s.context().unwrap()), ["e1", "e2", "e3", "e4"]);
            let id = ArchiveId::generate(s.key());
            s.write_archive(&id, &[entry("e2"), entry("e3")], &[]).unwrap();
            let mut event = committed_compaction(&id, vec![]);
            event.replaced = vec!["e2".into(), "e3".into()];
            event.forgotten = event.replaced.clone();
            event.replacement = vec![Entry::text("s1", Role::User, Origin::Summary, "summary")];
            s.record_compaction(event).unwrap();
            s.record_snapshot("c", &[entry("e5")]).unwrap();
            assert_eq!(ids(s.context().unwrap()), ["e1", "s1", "e4", "e5"], "folded again after the compaction");
            drop(s);
            let (kept, folded) = fresh();
            assert_eq!(kept, ["e1", "s1", "e4", "e5"]);
            assert_eq!(kept, folded);
        }
    }

    #[test]
    fn an_outcome_read_back_under_new_ids_is_found_by_what_the_model_reads() {
        let mut event = committed_compaction(&"a-0000000000000001".parse().unwrap(), vec![]);
        event.replacement = vec![Entry::text("s1", Role::User, Origin::Summary, "summary")];
        let renamed = vec![entry("e1"), Entry::text("m-9f2c", Role::User, Origin::Summary, "summary"), entry("e4")];
        let restored = restore(&renamed, &event, vec![entry("e2"), entry("e3")]).unwrap();
        assert_eq!(restored.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(), ["e1", "e2", "e3", "e4"]);
        let changed = vec![entry("e1"), Entry::text("m-9f2c", Role::User, Origin::Summary, "edited"), entry("e4")];
        assert!(restore(&changed, &event, vec![entry("e2")]).unwrap_err().to_string().contains("no longer holds"));
    }

    #[test]
    fn artifacts_are_read_back_byte_for_byte_and_only_once_committed() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            let id = ArchiveId::generate(s.key());
            let uris = s.write_archive(&id, &[entry("e1")], &["first".into(), "zweite — ünïcode\n".into()]).unwrap();
            assert!(home.find_artifact(&uris[1].parse().unwrap()).is_err(), "not readable before its event commits it");
            drop(s);
            let mut s = home.conversation(&key("c1")).unwrap();
            s.record_compaction(committed_compaction(&id, uris.clone())).unwrap();
            assert_eq!(home.find_artifact(&uris[1].parse().unwrap()).unwrap(), "zweite — ünïcode\n".as_bytes());
            let missing = ArtifactUri { archive_id: id.to_string(), index: 3 };
            assert!(home.find_artifact(&missing).is_err());
            let page = s.archive_view().unwrap().page(id.as_str(), 0, 10, 0).unwrap();
            assert_eq!(page.entries[0].entry_id, "e1", "{}", home.path().display());
        }
    }

    #[test]
    fn state_and_notices_round_trip_and_acknowledged_notices_stay_acknowledged() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            assert_eq!(s.load_state::<serde_json::Value>().unwrap(), None);
            s.save_state(&serde_json::json!({"turn": 3})).unwrap();
            s.save_state(&serde_json::json!({"turn": 4})).unwrap();
            assert!(s.queue_notice(&Notice::new("n1".into(), "compacted", "one".into())).unwrap());
            assert!(!s.queue_notice(&Notice::new("n1".into(), "compacted", "one again".into())).unwrap(), "the same id is queued once");
            s.queue_notice(&Notice::new("n2".into(), "compacted", "two".into())).unwrap();
            s.ack_notice("n1").unwrap();
            assert!(s.ack_notice("n9").is_err(), "no such notice");
            drop(s);
            let s = home.existing_conversation(&key("c1")).unwrap();
            assert_eq!(s.load_state::<serde_json::Value>().unwrap(), Some(serde_json::json!({"turn": 4})));
            let ids = |all: bool| s.notices(all).unwrap().into_iter().map(|n| n.id).collect::<Vec<_>>();
            assert_eq!(ids(false), ["n2"], "{}", home.path().display());
            assert_eq!(ids(true), ["n1", "n2"]);
        }
    }

    /// On PostgreSQL a unit is one transaction: a writer that dies before its commit leaves
    /// nothing (the local directory writes as it goes; the lifecycle's recovery finishes it).
    #[test]
    fn a_unit_dropped_before_its_commit_leaves_nothing_on_postgres() {
        let Some(db) = ScratchDatabase::create() else { return };
        let home = Home::open(Path::new(&db.url)).unwrap();
        let mut s = home.conversation(&key("c1")).unwrap();
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        s.begin().unwrap();
        let id = ArchiveId::generate(s.key());
        let uris = s.write_archive(&id, &[entry("e1")], &["set aside".into()]).unwrap();
        s.record_compaction(committed_compaction(&id, uris.clone())).unwrap();
        s.save_state(&serde_json::json!({"after": true})).unwrap();
        s.queue_notice(&Notice::new("n1".into(), "compacted", "done".into())).unwrap();
        drop(s);
        let s = home.existing_conversation(&key("c1")).unwrap();
        assert_eq!(s.events().len(), 1, "only the snapshot");
        assert!(s.load_state::<serde_json::Value>().unwrap().is_none() && s.notices(true).unwrap().is_empty());

        let mut s = home.conversation(&key("c1")).unwrap();
        s.begin().unwrap();
        s.write_archive(&id, &[entry("e1")], &["set aside".into()]).unwrap();
        s.record_compaction(committed_compaction(&id, uris)).unwrap();
        s.queue_notice(&Notice::new("n1".into(), "compacted", "done".into())).unwrap();
        s.commit().unwrap();
        drop(s);
        let s = home.existing_conversation(&key("c1")).unwrap();
        assert_eq!(s.events().len(), 2);
        assert_eq!(s.read_artifact(&ArtifactUri { archive_id: id.to_string(), index: 1 }).unwrap(), b"set aside");
        assert_eq!(s.notices(false).unwrap().len(), 1);
    }

    /// A unit's events and an archive's artifacts go to PostgreSQL as one statement each: every
    /// artifact still reads back at its own index, byte for byte, large ones compressed; and a
    /// run of events that collides with another writer's names the run and leaves nothing.
    #[test]
    fn many_artifacts_and_events_in_one_unit_read_back_in_order() {
        for place in places() {
            let home = place.home();
            let mut s = home.conversation(&key("c1")).unwrap();
            s.begin().unwrap();
            s.record_snapshot("a", &[entry("e1")]).unwrap();
            let id = ArchiveId::generate(s.key());
            let artifacts: Vec<Artifact> = (1..=40).map(|n| format!("tool output {n}: {}", "ünïcode ".repeat(n * 100)).into()).collect();
            let uris = s.write_archive(&id, &[entry("e1")], &artifacts).unwrap();
            s.record_compaction(committed_compaction(&id, uris.clone())).unwrap();
            s.commit().unwrap();
            drop(s);
            for (n, uri) in uris.iter().enumerate() {
                assert_eq!(home.find_artifact(&uri.parse().unwrap()).unwrap(), artifacts[n].as_bytes(), "artifact {} in {}", n + 1, home.path().display());
            }
            assert_eq!(home.existing_conversation(&key("c1")).unwrap().events().len(), 2);
            let Place::Database(db) = &place else { continue };
            let mut client = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
            let method: Option<String> = client.query_one("SELECT pg_column_compression(content) FROM cairn_artifacts WHERE idx = 40", &[]).unwrap().get(0);
            assert_eq!(method.as_deref(), Some("lz4"), "a large artifact is stored compressed");
            // Another writer (here: by hand, past the lock) appended event 4 meanwhile.
            let mut s = home.conversation(&key("c1")).unwrap();
            s.begin().unwrap();
            s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap();
            s.record_pins(vec!["e2".into()], true).unwrap();
            client.execute("INSERT INTO cairn_events (tenant, key, seq, body) SELECT tenant, key, 4, body FROM cairn_events WHERE seq = 1", &[]).unwrap();
            let err = s.commit().unwrap_err();
            assert!(format!("{err:#}").contains("events 3–4: appended by another writer"), "{err:#}");
            drop(s);
            let n: i64 = client.query_one("SELECT count(*) FROM cairn_events", &[]).unwrap().get(0);
            assert_eq!(n, 3, "the colliding unit left nothing");
            // The pool's connections (and the statements they prepared) serve the next unit.
            client.execute("DELETE FROM cairn_events WHERE seq = 4", &[]).unwrap();
            let mut s = home.conversation(&key("c1")).unwrap();
            s.begin().unwrap();
            s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap();
            s.record_pins(vec!["e2".into()], true).unwrap();
            s.commit().unwrap();
            drop(s);
            assert_eq!(home.existing_conversation(&key("c1")).unwrap().pinned_ids().into_iter().collect::<Vec<_>>(), ["e2"]);
        }
    }

    /// An archive altered in the database after it was written is refused, not served.
    #[test]
    fn a_tampered_archive_on_postgres_is_refused() {
        let Some(db) = ScratchDatabase::create() else { return };
        let home = Home::open(Path::new(&db.url)).unwrap();
        let mut s = home.conversation(&key("c1")).unwrap();
        let id = ArchiveId::generate(s.key());
        let uris = s.write_archive(&id, &[entry("e1")], &["original".into()]).unwrap();
        s.record_compaction(committed_compaction(&id, uris.clone())).unwrap();
        let mut client = ::postgres::Client::connect(&db.url, ::postgres::NoTls).unwrap();
        client.execute("UPDATE cairn_artifacts SET content = 'altered!' WHERE archive_id = $1", &[&id.as_str()]).unwrap();
        let err = home.find_artifact(&uris[0].parse().unwrap()).unwrap_err();
        assert!(format!("{err:#}").contains("does not match its recorded size and hash"), "{err:#}");
    }

    /// Tenants never see each other's conversations, archives or artifacts, whatever the key.
    #[test]
    fn a_tenant_never_sees_another_tenants_conversations() {
        for place in places() {
            let home = place.home();
            let (a, b) = (home.for_tenant(&Tenant::parse("acme").unwrap()), home.for_tenant(&Tenant::parse("globex").unwrap()));
            let mut s = a.conversation(&key("shared")).unwrap();
            s.record_snapshot("a", &[entry("secret")]).unwrap();
            let id = ArchiveId::generate(s.key());
            let uris = s.write_archive(&id, &[entry("secret")], &["acme's output".into()]).unwrap();
            s.record_compaction(committed_compaction(&id, uris.clone())).unwrap();
            drop(s);
            assert_eq!(a.conversations().unwrap(), [key("shared")]);
            assert!(b.conversations().unwrap().is_empty() && home.conversations().unwrap().is_empty(), "{}", home.path().display());
            assert!(b.existing_conversation(&key("shared")).is_err());
            assert!(b.find_artifact(&uris[0].parse().unwrap()).is_err());
            assert_eq!(a.find_artifact(&uris[0].parse().unwrap()).unwrap(), b"acme's output");
            let mut theirs = b.conversation(&key("shared")).unwrap();
            assert!(theirs.events().is_empty() && !theirs.has_archive(id.as_str()));
            theirs.record_snapshot("b", &[entry("other")]).unwrap();
            assert_eq!(snapshot_ids(&a.existing_conversation(&key("shared")).unwrap()), ["secret"]);
        }
    }

    #[test]
    fn tokens_are_stored_hashed_scoped_to_a_tenant_and_revocable() {
        for place in places() {
            let home = place.home();
            let tokens = home.tokens();
            let acme = Tenant::parse("acme").unwrap();
            let (info, secret) = tokens.create(&acme, "ci", TokenScope::Tenant).unwrap();
            assert_eq!(tokens.verify(&secret).unwrap(), Some(Credential { tenant: acme.clone(), scope: TokenScope::Tenant }));
            assert_eq!(tokens.verify("cairn_0000").unwrap(), None);
            assert_eq!(tokens.verify(&secret[..secret.len() - 1]).unwrap(), None);
            let listed = serde_json::to_string(&tokens.list().unwrap()).unwrap();
            assert!(listed.contains(&info.id) && !listed.contains(&secret[6..]), "the list never shows the secret: {listed}");
            tokens.revoke(&info.id).unwrap();
            assert_eq!(tokens.verify(&secret).unwrap(), None, "revoked");
            assert!(tokens.revoke("t-nope").is_err());
        }
    }

    #[test]
    fn an_operator_token_keeps_its_scope_on_both_backends() {
        for place in places() {
            let home = place.home();
            let tokens = home.tokens();
            let ops = Tenant::parse("ops").unwrap();
            let (info, secret) = tokens.create(&ops, "on-call", TokenScope::Operator).unwrap();
            assert_eq!(info.scope, TokenScope::Operator);
            assert_eq!(tokens.verify(&secret).unwrap(), Some(Credential { tenant: ops, scope: TokenScope::Operator }));
            let listed = serde_json::to_value(tokens.list().unwrap()).unwrap();
            assert_eq!(listed[0]["scope"], "operator", "{listed}");
        }
    }

    /// A tokens.json written before scopes existed still loads; its tokens are tenant tokens.
    #[test]
    fn tokens_saved_without_a_scope_are_tenant_tokens() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        let (_, secret) = home.tokens().create(&Tenant::parse("acme").unwrap(), "old", TokenScope::Operator).unwrap();
        let file = dir.path().join("tokens/tokens.json");
        let mut saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        saved[0].as_object_mut().unwrap().remove("scope");
        std::fs::write(&file, serde_json::to_vec(&saved).unwrap()).unwrap();
        assert_eq!(home.tokens().verify(&secret).unwrap().unwrap().scope, TokenScope::Tenant);
    }

    #[test]
    fn an_unreachable_database_is_a_clear_error() {
        let err = Home::open(Path::new("postgres://cairn:hunter2@127.0.0.1:1/nowhere")).err().unwrap();
        let text = format!("{err:#}");
        assert!(text.contains("cannot reach PostgreSQL at postgres://cairn:***@127.0.0.1:1/nowhere"), "{text}");
        assert!(!text.contains("hunter2"), "the password is never shown: {text}");
    }

    // The local directory only: its files, torn tails and symlinks.

    #[test]
    fn a_kept_log_sees_appends_and_never_serves_a_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        drop(s);
        let mut other = store(dir.path());
        other.record_snapshot("b", &[entry("e2")]).unwrap();
        drop(other);
        assert_eq!(snapshot_ids(&store(dir.path())), ["e1", "e2"]);

        let log = dir.path().join("conversations/c1/events.jsonl");
        let rewritten = std::fs::read_to_string(&log).unwrap().replace("\"e1\"", "\"x1\"").replace("\"e2\"", "\"x2\"");
        std::fs::write(&log, format!("{rewritten}{rewritten}")).unwrap();
        assert_eq!(snapshot_ids(&store(dir.path())), ["x1", "x2", "x1", "x2"], "rewritten in place, longer");

        std::fs::remove_file(&log).unwrap();
        let mut fresh = store(dir.path());
        fresh.record_snapshot("c", &[entry("n1")]).unwrap();
        drop(fresh);
        assert_eq!(snapshot_ids(&store(dir.path())), ["n1"], "a new file");
    }

    /// A writer's appends are kept as it holds them, so the next load of the conversation
    /// reads none of them back (a byte changed among them is not seen). What it holds is what
    /// the file reads back as, for every recorded session's entries and every kind of event:
    /// a load that parses the whole log gives the same events, entries and context.
    #[test]
    #[cfg_attr(no_shared_transcripts, ignore = "needs ../shared/transcripts (absent outside CI)")]
    fn a_writers_appends_are_kept_as_the_log_reads_them_back() {
        let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts");
        let mut sessions: Vec<_> = std::fs::read_dir(&shared).unwrap().flat_map(|d| std::fs::read_dir(d.unwrap().path()).into_iter().flatten()).map(|f| f.unwrap().path()).collect();
        sessions.retain(|f| f.extension().is_some_and(|x| x == "jsonl" || x == "json"));
        sessions.sort();
        let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let home = Home::open(dir.path()).unwrap();
        // The same home under another path: nothing is kept for it, so its loads parse the log.
        let elsewhere = other.path().join("home");
        std::os::unix::fs::symlink(dir.path(), &elsewhere).unwrap();
        let as_values = |s: &ConversationStore| s.events().iter().map(|e| serde_json::to_value(e).unwrap()).collect::<Vec<_>>();
        let mut used = 0;
        for (i, file) in sessions.iter().enumerate() {
            let (mut transcript, _) = crate::transcript::formats::parse(&std::fs::read_to_string(file).unwrap(), &file.display().to_string()).unwrap();
            crate::tokenizer::Tokenizer::default().count_transcript(&mut transcript);
            let entries = transcript.entries;
            if entries.len() < 8 {
                continue;
            }
            let conversation = key(&format!("c{i}"));
            let log = dir.path().join(format!("conversations/c{i}/events.jsonl"));
            let mut s = home.conversation(&conversation).unwrap();
            s.record_snapshot("boundary", &entries[..entries.len() / 2]).unwrap();
            drop(s);
            let first = std::fs::metadata(&log).unwrap().len();
            // A second writer: appends after a load that found a log.
            let mut s = home.conversation(&conversation).unwrap();
            s.record_snapshot("boundary", &entries).unwrap();
            let id = ArchiveId::generate(s.key());
            s.write_archive(&id, &entries[1..3], &[]).unwrap();
            let mut event = committed_compaction(&id, vec![format!("artifact://{id}/0")]);
            event.replaced = entries[1..3].iter().map(|e| e.id.clone()).collect();
            event.forgotten = event.replaced.clone();
            event.replacement = vec![Entry::text("s1", Role::User, Origin::Summary, "summary: \"quoted\", tab\t, ☃ 𝄞")];
            s.record_compaction(event).unwrap();
            s.record_pins(vec![entries[0].id.clone()], true).unwrap();
            s.record_undo(crate::record::UndoEvent { at: 7, undone: vec![id.to_string()], tokens_before: 10, tokens_after: 20 }).unwrap();
            let held = (as_values(&s), s.context().unwrap());
            drop(s);

            // Not read back: a byte changed in the middle of what the second writer appended
            // (the file's ends and length as they were) is not seen by the next load.
            let written = std::fs::read(&log).unwrap();
            let end = written.len() as u64;
            let middle = (first + end) / 2;
            let middle = middle + written[middle as usize..].iter().position(u8::is_ascii_lowercase).unwrap() as u64;
            if middle > first + 256 && middle + 256 < end {
                let mut changed = written.clone();
                changed[middle as usize] = if changed[middle as usize] == b'x' { b'y' } else { b'x' };
                std::fs::write(&log, &changed).unwrap();
                let next = home.conversation(&conversation).unwrap();
                assert_eq!(as_values(&next), held.0, "{}: the appends were read back", file.display());
                drop(next);
                std::fs::write(&log, &written).unwrap();
                used += 1;
            }

            let fresh = Home::open(&elsewhere).unwrap().existing_conversation(&conversation).unwrap();
            let kept = home.conversation(&conversation).unwrap();
            assert_eq!(as_values(&kept), as_values(&fresh), "{}", file.display());
            assert_eq!(as_values(&kept), held.0);
            assert_eq!(kept.context().unwrap(), fresh.context().unwrap(), "{}", file.display());
            assert_eq!(kept.context().unwrap(), held.1);
            assert!(entries.iter().all(|e| kept.knows_entry(&e.id) && fresh.knows_entry(&e.id)));
        }
        assert!(used >= 3, "{used} sessions of {sessions:?}");
    }

    /// Every boundary of `cairn serve` opens its conversation again: the kept log is extended
    /// in place by each writer, never copied (a copy is O(session) per boundary).
    #[test]
    fn a_kept_log_is_extended_in_place_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap();
        drop(s);
        let mut s = store(dir.path());
        let loaded = Arc::as_ptr(&s.log);
        s.record_snapshot("b", &[entry("e2"), entry("e3")]).unwrap();
        s.record_pins(vec!["e3".into()], true).unwrap();
        assert_eq!(Arc::as_ptr(&s.log), loaded, "a writer's appends do not copy its log");
        drop(s);
        let reader = Home::open(dir.path()).unwrap().existing_conversation(&key("c1")).unwrap();
        assert_eq!(Arc::as_ptr(&reader.log), loaded, "the next load extends the same log with the lines appended since");
        drop(reader);
        let s = store(dir.path());
        assert_eq!(Arc::as_ptr(&s.log), loaded);
        assert_eq!(s.events().len(), 3);
        assert_eq!(snapshot_ids(&s), ["e1", "e2", "e3"]);
        assert!(["e1", "e2", "e3"].iter().all(|id| s.knows_entry(id)) && !s.knows_entry("e4"));
        assert_eq!(s.pinned_ids().into_iter().collect::<Vec<_>>(), ["e3"]);
    }

    #[test]
    fn a_torn_last_line_is_dropped_and_the_log_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        let log = dir.path().join("conversations/c1/events.jsonl");
        let good = std::fs::read(&log).unwrap();
        let mut torn = good.clone();
        torn.extend_from_slice(b"{\"kind\":\"snapshot\",\"at\":1,\"sou");
        drop(s);
        std::fs::write(&log, &torn).unwrap();

        let mut s = store(dir.path());
        assert_eq!(s.events().len(), 1);
        assert_eq!(std::fs::read(&log).unwrap(), good, "the torn tail is cut off on disk");
        s.record_snapshot("a", &[entry("e2")]).unwrap();
        drop(s);
        assert_eq!(store(dir.path()).events().len(), 2);
    }

    #[test]
    fn a_reader_never_modifies_the_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        drop(s);
        let log = dir.path().join("conversations/c1/events.jsonl");
        // A line of a kind from a newer version, then a writer's line still being appended.
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str("{\"kind\":\"annotation\",\"at\":2,\"note\":\"from the future\"}\n{\"kind\":\"snapshot\",\"at\":3,\"sou");
        std::fs::write(&log, &text).unwrap();

        let home = Home::open(dir.path()).unwrap();
        let mut reader = home.existing_conversation(&ConversationKey::parse("c1").unwrap()).unwrap();
        assert_eq!(reader.events().len(), 1, "the unknown kind is skipped, the partial line not read");
        assert_eq!(std::fs::read_to_string(&log).unwrap(), text, "a reader leaves the file as it is");
        assert!(reader.save_state(&1).is_err() && reader.ack_notice("x").is_err(), "a reader cannot write");

        // A writer holds the lock, so the partial line is a crashed writer's: it is cut off,
        // and the line of the unknown kind stays.
        let writer = store(dir.path());
        assert_eq!(writer.events().len(), 1);
        let repaired = std::fs::read_to_string(&log).unwrap();
        assert!(repaired.contains("from the future") && repaired.ends_with("}\n"), "{repaired}");
    }

    #[test]
    fn a_corrupt_line_inside_the_log_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        drop(s);
        let log = dir.path().join("conversations/c1/events.jsonl");
        let mut text = String::from("not json\n");
        text.push_str(&std::fs::read_to_string(&log).unwrap());
        std::fs::write(&log, text).unwrap();
        let err = Home::open(dir.path()).unwrap().conversation(&ConversationKey::parse("c1").unwrap()).err().unwrap();
        assert!(format!("{err:#}").contains("events.jsonl:1: corrupt event log line"), "{err:#}");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_planted_in_the_home_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let home = Home::open(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("conversations/planted")).unwrap();
        assert!(home.conversation(&ConversationKey::parse("planted").unwrap()).is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing written outside the home");
    }
}
