//! What a storage backend provides. `Home` and `ConversationStore` hold the domain logic (which
//! entries are new, which archives are committed, what a reader may do); a backend only keeps
//! bytes: the local directory (`local`) or PostgreSQL (`postgres`).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::ids::{ArchiveId, ConversationKey, Tenant};
use super::stored_token::StoredToken;
use crate::record::{Event, Notice};
use crate::transcript::{Artifact, Entry};

/// A log as parsed: its events, the ids of every entry its snapshots hold, and the working
/// context they fold to, once asked for (see [`Folded`]).
#[derive(Debug, Default)]
pub struct Parsed {
    pub events: Vec<Event>,
    pub known_entries: HashSet<String>,
    pub(super) folded: Mutex<Option<Folded>>,
}

impl Clone for Parsed {
    fn clone(&self) -> Self {
        let folded = self.folded.lock().map(|f| f.clone()).unwrap_or_default();
        Parsed { events: self.events.clone(), known_entries: self.known_entries.clone(), folded: Mutex::new(folded) }
    }
}

/// The working context of the log's first `events()` events (`ConversationStore::context`),
/// kept beside the log: a boundary that appends a snapshot extends it, so it is folded from
/// the whole log once per process, not at every boundary. A compaction or an undo drops it.
#[derive(Debug, Clone)]
pub(super) struct Folded {
    /// Events folded whole; `entries` held `base` entries after them.
    pub from: usize,
    pub base: usize,
    /// `entries.len()` after each event since.
    pub after: Vec<usize>,
    pub entries: Vec<Entry>,
    pub present: HashSet<String>,
}

impl Folded {
    pub fn events(&self) -> usize {
        self.from + self.after.len()
    }

    /// Folds one more event, or says it cannot (the context is then folded again whole).
    fn push(&mut self, event: &Event) -> bool {
        match event {
            Event::Snapshot { replaces_context: true, .. } => return false,
            Event::Snapshot { entries, .. } => {
                for entry in entries {
                    if self.present.insert(entry.id.clone()) {
                        self.entries.push(entry.clone());
                    }
                }
            }
            Event::Compaction(c) if c.committed_by.is_some() => return false,
            Event::Undo(_) => return false,
            _ => {}
        }
        self.after.push(self.entries.len());
        true
    }

    /// Back to the first `len` events, when they are within what was folded one by one.
    fn truncate(&mut self, len: usize) -> bool {
        let Some(keep) = len.checked_sub(self.from) else { return false };
        if keep >= self.after.len() {
            return true;
        }
        let entries = if keep == 0 { self.base } else { self.after[keep - 1] };
        for entry in self.entries.drain(entries..) {
            self.present.remove(&entry.id);
        }
        self.after.truncate(keep);
        true
    }
}

impl Parsed {
    pub fn push(&mut self, event: Event) {
        if let Event::Snapshot { entries, .. } = &event {
            self.known_entries.extend(entries.iter().map(|e| e.id.clone()));
        }
        let folded = self.folded.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if folded.as_ref().is_some_and(|f| f.events() != self.events.len()) || folded.as_mut().is_some_and(|f| !f.push(&event)) {
            *folded = None;
        }
        self.events.push(event);
    }

    /// Back to its first `len` events: what a writer appended since its load taken out again.
    /// A snapshot only ever records entries the log did not know, so their ids leave with it;
    /// one that replaced the context also repeats ids the log knew, so they are counted again.
    pub fn truncate(&mut self, len: usize) {
        let folded = self.folded.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if folded.as_mut().is_some_and(|f| !f.truncate(len)) {
            *folded = None;
        }
        let mut recount = false;
        for event in self.events.drain(len.min(self.events.len())..) {
            if let Event::Snapshot { entries, replaces_context, .. } = event {
                recount |= replaces_context;
                for entry in &entries {
                    self.known_entries.remove(&entry.id);
                }
            }
        }
        if recount {
            self.known_entries = self.events.iter().filter_map(|e| if let Event::Snapshot { entries, .. } = e { Some(entries) } else { None }).flatten().map(|e| e.id.clone()).collect();
        }
    }
}

/// The originals an archive sets aside, as the JSON lines (one entry each) it stores: written
/// straight to where the backend keeps them, and held whole only by a backend that needs the
/// bytes at once (a database row). An original the record's snapshots already hold, byte for
/// byte, is stored as a reference to it (`{"recorded":"<id>"}`), not a second copy.
pub struct ArchiveEntries<'a> {
    pub originals: &'a [Entry],
    /// Per original: whether a snapshot holds it exactly.
    pub recorded: Vec<bool>,
}

/// An archive line that stands for an original the record's snapshots hold byte for byte.
#[derive(Serialize, Deserialize)]
pub(super) struct RecordedLine<S> {
    pub recorded: S,
}

impl ArchiveEntries<'_> {
    pub fn write_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        for (i, entry) in self.originals.iter().enumerate() {
            if self.is_recorded(i) {
                serde_json::to_writer(&mut *out, &RecordedLine { recorded: &entry.id })?;
            } else {
                serde_json::to_writer(&mut *out, entry)?;
            }
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Whether original `i` is stored as a reference (an original without a flag is whole:
    /// nothing is ever left out).
    fn is_recorded(&self, i: usize) -> bool {
        self.recorded.get(i).copied().unwrap_or(false)
    }

    /// The lines as bytes, sized up front from the text they hold: growing by doubling would
    /// hold up to twice the archive at the peak of a large compaction.
    pub fn to_vec(&self) -> std::io::Result<Vec<u8>> {
        let size = self.originals.iter().enumerate().map(|(i, e)| if self.is_recorded(i) { e.id.len() + 16 } else { super::serialized_estimate(e) }).sum();
        let mut lines = Vec::with_capacity(size);
        self.write_to(&mut lines)?;
        Ok(lines)
    }
}

/// How long a writer waits for another before giving up with an error (a chain with slow
/// model steps can hold a conversation for minutes; a forgotten store would hold it forever).
pub const WRITER_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The error of a writer that waited `WRITER_WAIT` in vain, whatever the backend.
pub fn writer_timed_out() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("another writer has held this conversation for {}s", WRITER_WAIT.as_secs()))
}

pub trait Backend: Send + Sync {
    /// Where the home is, as shown in messages (a path, or a URL without its password).
    fn location(&self) -> &str;
    /// Opens a conversation. A writer creates it if needed and waits for its lock (one writer
    /// at a time, across processes and nodes) for as long as the store lives; a reader needs
    /// it to exist, takes no lock and never modifies anything.
    fn open(&self, tenant: &Tenant, key: &ConversationKey, writer: bool) -> Result<Box<dyn Conversation>>;
    /// The tenant's conversations, in name order.
    fn conversations(&self, tenant: &Tenant) -> Result<Vec<ConversationKey>>;
    /// The conversations that may hold an archive, where the backend can look it up directly
    /// (`None`: ask every conversation of the tenant).
    fn archive_holders(&self, _tenant: &Tenant, _archive: &ArchiveId) -> Result<Option<Vec<ConversationKey>>> {
        Ok(None)
    }
    fn tokens(&self) -> Result<Vec<StoredToken>>;
    /// The token with this secret's hash.
    fn token(&self, sha256: &str) -> Result<Option<StoredToken>> {
        Ok(self.tokens()?.into_iter().find(|t| t.sha256 == sha256))
    }
    fn add_token(&self, token: &StoredToken) -> Result<()>;
    /// Marks a token revoked; false when there is no such token.
    fn revoke_token(&self, id: &str) -> Result<bool>;
    /// A document of the home's own (not of a conversation), by name; none when absent.
    fn document(&self, name: &DocumentName) -> Result<Option<Vec<u8>>>;
    /// Replaces a home document atomically, one changer at a time across processes and nodes:
    /// `change` gets its bytes (none when absent) and returns the new bytes, or none to leave
    /// it as it is.
    fn update_document(&self, name: &DocumentName, change: &mut DocumentChange<'_>) -> Result<()>;
}

/// What `update_document` calls with a document's bytes (none when absent); it returns the
/// new bytes, or none to leave the document as it is.
pub type DocumentChange<'a> = dyn FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>> + 'a;

/// The name of a home document: a file name in a directory home, a row's key in a database.
/// Only names the library declares exist, so no input picks a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocumentName(pub(crate) &'static str);

impl DocumentName {
    /// Why an agent's hook could not do its work (`cairn doctor` lists them): JSONL.
    pub const HOOK_FAILURES: DocumentName = DocumentName("hook-failures.jsonl");
    /// What agents' hooks logged (warnings at the default `CAIRN_LOG`): their stderr is the
    /// agent's to show and save, so it stays silent. Text, one line an event.
    pub const HOOK_LOG: DocumentName = DocumentName("hook-log.txt");

    pub fn as_str(&self) -> &'static str {
        self.0
    }
}

/// One open conversation's bytes.
pub trait Conversation: Send {
    /// The log, parsed (a torn tail a crashed writer left is repaired by a writer). A writer's
    /// log is its own (the backend keeps no copy until `keep` gives it back), so its appends
    /// never copy it; a reader's is shared with the backend's kept copy.
    fn load(&mut self) -> Result<Arc<Parsed>>;
    /// A writer's log handed back when its store closes: its first `loaded` events as `load`
    /// returned them, then the store's appends. The backend keeps it, so the next load reads
    /// only the events appended since; appends it cannot vouch for (that the log holds them as
    /// written) it takes out again, and the next load reads them back.
    fn keep(&mut self, _log: Arc<Parsed>, _loaded: usize) {}
    /// Appends one event; `seq` is the number of events the log held before it, plus one.
    fn append(&mut self, event: &Event) -> Result<()>;
    /// Writes (or replaces, for a retried attempt) an archive: the originals as JSON lines
    /// and the artifacts.
    fn write_archive(&mut self, id: &ArchiveId, entries: &ArchiveEntries<'_>, artifacts: &[Artifact]) -> Result<()>;
    /// A reader of the conversation's archives that outlives this store (a plugin call holds it).
    fn archives(&self) -> Result<Arc<dyn ArchiveReader>>;
    fn load_state(&self) -> Result<Option<Vec<u8>>>;
    fn save_state(&mut self, state: Vec<u8>) -> Result<()>;
    /// Every queued notice, oldest first, with whether it was acknowledged.
    fn notices(&self) -> Result<Vec<(Notice, bool)>>;
    /// Queues a notice unless one with its id is queued; returns whether it was new (a
    /// backend holding writes for one transaction may answer true for a duplicate it drops).
    fn queue_notice(&mut self, notice: &Notice) -> Result<bool>;
    /// Acknowledges a notice; false when there is no such notice.
    fn ack_notice(&mut self, id: &str) -> Result<bool>;
    /// From here until `commit`, writes are one unit: a crash keeps all or none of them. The
    /// local directory orders its writes so that recovery finishes any unit cut short; a
    /// database holds them and commits them in one transaction.
    fn begin(&mut self) {}
    fn commit(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Reads archives by id; only ever asked for archives the conversation's log commits.
pub trait ArchiveReader: Send + Sync {
    /// The originals as JSON lines; `None` when the archive set nothing aside.
    fn entries(&self, id: &ArchiveId) -> std::io::Result<Option<Vec<u8>>>;
    /// Artifact `index` (from 1), byte for byte.
    fn artifact(&self, id: &ArchiveId, index: u32) -> std::io::Result<Vec<u8>>;
}
