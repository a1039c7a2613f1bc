//! Durable storage under one home directory, opened once as a capability (`cap_std::fs::Dir`).
//! Everything below it is reached through that handle with paths built only from validated
//! ids, so nothing from input can name a file outside the home.
//!
//! Layout of `conversations/<key>/`, one module per part:
//! - `events.jsonl` — the append-only event log (`log`);
//! - `archives/<archive-id>/` — originals (`entries.jsonl`) and artifacts (one `artifacts` pack) of each compaction (`archive`);
//! - `state.json` — the lifecycle's small state, replaced atomically (`state`);
//! - `outbox.jsonl`, `acks.jsonl` — notices for the harness and their acknowledgements (`outbox`).
//!
//! `files` holds the primitives they share: one JSONL appender, one torn-tail-aware line
//! reader, atomic replacement through a uniquely named temporary file.

pub mod archive;
pub(crate) mod files;
mod ids;
mod lock;
mod log;
mod outbox;
mod state;

pub use archive::ArchiveView;
pub use ids::{session_id, ArchiveId, ArtifactUri, ConversationKey, IdError};

use std::sync::Arc;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::record::{CompactionEvent, Event, Notice};
use crate::transcript::Entry;
use files::open_real_dir;

const CONVERSATIONS: &str = "conversations";

/// The storage home.
pub struct Home {
    dir: Dir,
    path: PathBuf,
}

impl Home {
    /// Opens (creating if needed) the home directory. The only ambient path use in storage.
    pub fn open(path: &Path) -> Result<Self> {
        std::fs::create_dir_all(path).with_context(|| format!("creating home {}", path.display()))?;
        let dir = Dir::open_ambient_dir(path, ambient_authority()).with_context(|| format!("opening home {}", path.display()))?;
        dir.create_dir_all(CONVERSATIONS).with_context(|| format!("creating {}/{CONVERSATIONS}", path.display()))?;
        Ok(Home { dir, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens one conversation to write, creating it on first use: waits for the conversation's
    /// lock (one writer at a time, across processes), then loads its log, repairing a tail a
    /// crashed writer left torn. The lock is held until the store is dropped.
    pub fn conversation(&self, key: &ConversationKey) -> Result<ConversationStore> {
        let conversations = self.dir.open_dir(CONVERSATIONS)?;
        if !conversations.exists(key.as_str()) {
            conversations.create_dir_all(key.as_str()).with_context(|| format!("creating conversation {key}"))?;
            files::sync_dir(&conversations)?;
        }
        let dir = open_real_dir(&conversations, key.as_str()).with_context(|| format!("opening conversation {key}"))?;
        let path = self.path.join(CONVERSATIONS).join(key.as_str());
        let lock = lock::Writer::acquire(&dir).with_context(|| format!("locking {}", path.display()))?;
        ConversationStore::load(dir, key.clone(), path, Some(lock))
    }

    /// Opens a conversation that must already exist, to read: no lock, and the record is
    /// never modified (a line a writer is still appending is simply not read yet).
    pub fn existing_conversation(&self, key: &ConversationKey) -> Result<ConversationStore> {
        let conversations = self.dir.open_dir(CONVERSATIONS)?;
        let dir = open_real_dir(&conversations, key.as_str())
            .with_context(|| format!("no conversation {key} in {}", self.path.display()))?;
        ConversationStore::load(dir, key.clone(), self.path.join(CONVERSATIONS).join(key.as_str()), None)
    }

    /// The conversations in this home, in name order (invalid folder names are skipped).
    pub fn conversations(&self) -> Result<Vec<ConversationKey>> {
        let mut keys = Vec::new();
        for entry in self.dir.open_dir(CONVERSATIONS)?.entries()? {
            let entry = entry?;
            if let Some(key) = entry.file_name().to_str().and_then(|n| ConversationKey::parse(n).ok()) {
                keys.push(key);
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// Finds an artifact by URI in whichever conversation holds its archive. A conversation
    /// that cannot be read (a planted symlink, a corrupt log) is skipped with a warning.
    pub fn find_artifact(&self, uri: &ArtifactUri) -> Result<Vec<u8>> {
        for key in self.conversations()? {
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
        bail!("artifact not found: no conversation in {} holds archive {}", self.path.display(), uri.archive_id)
    }
}

/// One conversation's durable record and archives.
pub struct ConversationStore {
    /// Held by a store opened to write; `None` for a reader, whose writes are refused.
    writer: Option<lock::Writer>,
    dir: Dir,
    key: ConversationKey,
    path: PathBuf,
    /// The log as parsed, shared with the process's kept copy until this store appends.
    log: Arc<log::Parsed>,
}

impl ConversationStore {
    fn load(dir: Dir, key: ConversationKey, path: PathBuf, writer: Option<lock::Writer>) -> Result<Self> {
        let log = log::load(&dir, &path.join(log::EVENTS), writer.is_some())?;
        Ok(ConversationStore { writer, dir, key, path, log })
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

    /// The files the latest stamped compaction recorded that changed in `workspace` since.
    pub fn stale_files(&self, workspace: &Path) -> Vec<crate::workspace::StaleFile> {
        self.committed().rev().find(|c| !c.files.is_empty()).map_or_else(Vec::new, |c| crate::workspace::stale(workspace, &c.files))
    }

    /// The checkpoint of the latest committed compaction or handover that has one.
    pub fn latest_checkpoint(&self) -> Option<&str> {
        self.committed().rev().find_map(|c| c.checkpoint.as_deref())
    }

    /// The text of the operator's first message in the whole record, whatever compactions
    /// removed from the context since: the conversation's root objective.
    pub fn first_operator_request(&self) -> Option<String> {
        self.log.events.iter().find_map(|e| match e {
            Event::Snapshot { entries, .. } => entries
                .iter()
                .find(|e| e.role == crate::transcript::Role::User && e.origin == crate::transcript::Origin::Operator)
                .map(|e| e.model_text()),
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
        self.committed()
            .rev()
            .find_map(|c| c.sessions.as_ref().map(|s| s.target.clone()))
            .unwrap_or_else(|| session_id(self.key.as_str(), "initial"))
    }

    /// Appends the entries the record has not seen yet. Returns how many were new.
    pub fn record_snapshot(&mut self, source: &str, entries: &[Entry]) -> Result<usize> {
        let new: Vec<Entry> = entries.iter().filter(|e| !self.log.known_entries.contains(&e.id)).cloned().collect();
        if new.is_empty() {
            return Ok(0);
        }
        let count = new.len();
        self.append(Event::Snapshot { at: crate::record::now_millis(), source: source.to_string(), entries: new })?;
        Ok(count)
    }

    pub fn record_compaction(&mut self, event: CompactionEvent) -> Result<()> {
        self.append(Event::Compaction(Box::new(event)))
    }

    /// Writing needs the conversation's lock.
    fn writable(&self) -> Result<()> {
        match self.writer {
            Some(_) => Ok(()),
            None => bail!("conversation {} was opened to read; writing needs Home::conversation", self.key),
        }
    }

    fn append(&mut self, event: Event) -> Result<()> {
        self.writable()?;
        log::append(&self.dir, &self.path.join(log::EVENTS), &event)?;
        Arc::make_mut(&mut self.log).push(event);
        Ok(())
    }

    /// Writes an archive: the originals of the replaced entries and the artifacts (each file
    /// to a temporary name, synced, then renamed). Returns the artifact URIs. Called before
    /// the compaction event that commits it; until then readers do not see it.
    pub fn write_archive(&self, archive_id: &ArchiveId, originals: &[Entry], artifacts: &[String]) -> Result<Vec<String>> {
        self.writable()?;
        archive::write(&self.dir, archive_id, originals, artifacts)
    }

    /// The conversation's state document, if one was saved.
    pub fn load_state<T: serde::de::DeserializeOwned>(&self) -> Result<Option<T>> {
        state::load(&self.dir, &self.path.join(state::STATE))
    }

    /// Replaces the state document atomically.
    pub fn save_state<T: serde::Serialize>(&self, state: &T) -> Result<()> {
        self.writable()?;
        state::save(&self.dir, &self.path.join(state::STATE), state)
    }

    /// Queues a notice unless one with its id is already queued.
    pub fn queue_notice(&self, notice: &Notice) -> Result<bool> {
        self.writable()?;
        outbox::queue(&self.dir, &self.path, notice)
    }

    /// Queued notices, oldest first; acknowledged ones only when `include_acked`.
    pub fn notices(&self, include_acked: bool) -> Result<Vec<Notice>> {
        outbox::notices(&self.dir, &self.path, include_acked)
    }

    /// The harness saw this notice; it is not delivered again.
    pub fn ack_notice(&self, id: &str) -> Result<()> {
        self.writable()?;
        outbox::ack(&self.dir, &self.path, id).with_context(|| format!("conversation {}", self.key))
    }

    /// The entries the record holds under these ids, in the order given (for resuming work
    /// that was prepared before a crash).
    pub fn recorded_entries(&self, ids: &[String]) -> Result<Vec<Entry>> {
        let mut by_id = std::collections::HashMap::new();
        for event in &self.log.events {
            if let Event::Snapshot { entries, .. } = event {
                for entry in entries {
                    by_id.insert(entry.id.as_str(), entry);
                }
            }
        }
        ids.iter()
            .map(|id| by_id.get(id.as_str()).map(|e| (*e).clone()).ok_or_else(|| anyhow::anyhow!("entry {id} is not in the record")))
            .collect()
    }

    /// A bounded, read-only view of this conversation's committed archives.
    pub fn archive_view(&self) -> Result<ArchiveView> {
        Ok(ArchiveView::new(self.dir.try_clone()?, self.committed().cloned().collect()))
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
            bail!("artifact not found: {uri} in conversation {}", self.key);
        }
        archive::read_artifact(&self.dir, &archive_id, uri.index).with_context(|| format!("artifact not found: {uri} in conversation {}", self.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Role};

    fn store(dir: &Path) -> ConversationStore {
        Home::open(dir).unwrap().conversation(&ConversationKey::parse("c1").unwrap()).unwrap()
    }

    fn entry(id: &str) -> Entry {
        Entry::text(id, Role::User, Origin::Operator, "hello")
    }

    #[test]
    fn snapshots_record_only_new_entries_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        assert_eq!(s.record_snapshot("a", &[entry("e1"), entry("e2")]).unwrap(), 2);
        assert_eq!(s.record_snapshot("a", &[entry("e1"), entry("e2"), entry("e3")]).unwrap(), 1);
        drop(s);
        let s = store(dir.path());
        assert_eq!(s.events().len(), 2);
    }

    /// The log is kept parsed between loads: what another store appended is read, and a log
    /// replaced behind the process's back (a new file, perhaps on a reused inode, or one
    /// rewritten in place) is read again from its start.
    #[test]
    fn a_kept_log_sees_appends_and_never_serves_a_replaced_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = store(dir.path());
        s.record_snapshot("a", &[entry("e1")]).unwrap();
        drop(s);
        let mut other = store(dir.path());
        other.record_snapshot("b", &[entry("e2")]).unwrap();
        drop(other);
        let ids = |s: &ConversationStore| -> Vec<String> {
            s.events().iter().flat_map(|e| match e {
                Event::Snapshot { entries, .. } => entries.iter().map(|e| e.id.clone()).collect(),
                _ => Vec::new(),
            }).collect()
        };
        assert_eq!(ids(&store(dir.path())), ["e1", "e2"]);

        let log = dir.path().join("conversations/c1/events.jsonl");
        let rewritten = std::fs::read_to_string(&log).unwrap().replace("\"e1\"", "\"x1\"").replace("\"e2\"", "\"x2\"");
        std::fs::write(&log, format!("{rewritten}{rewritten}")).unwrap();
        assert_eq!(ids(&store(dir.path())), ["x1", "x2", "x1", "x2"], "rewritten in place, longer");

        std::fs::remove_file(&log).unwrap();
        let mut fresh = store(dir.path());
        fresh.record_snapshot("c", &[entry("n1")]).unwrap();
        drop(fresh);
        assert_eq!(ids(&store(dir.path())), ["n1"], "a new file");
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
        let reader = home.existing_conversation(&ConversationKey::parse("c1").unwrap()).unwrap();
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
    fn one_writer_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = store(dir.path());
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        let second = std::thread::spawn(move || {
            let mut s = store(&path);
            sender.send(()).unwrap();
            s.record_snapshot("second", &[entry("e2")]).unwrap();
        });
        assert!(receiver.recv_timeout(std::time::Duration::from_millis(300)).is_err(), "the second writer waits");
        drop(first);
        receiver.recv_timeout(std::time::Duration::from_secs(10)).expect("the second writer gets the lock once the first is gone");
        second.join().unwrap();
        assert_eq!(store(dir.path()).events().len(), 1);
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

    #[test]
    fn artifacts_are_read_back_byte_for_byte_and_only_by_valid_uris() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        let id = ArchiveId::generate(s.key());
        let uris = s.write_archive(&id, &[entry("e1")], &["first".into(), "zweite — ünïcode\n".into()]).unwrap();
        let home = Home::open(dir.path()).unwrap();
        assert!(home.find_artifact(&uris[1].parse().unwrap()).is_err(), "not readable before its event commits it");
        drop(s);
        let mut s = store(dir.path());
        let mut event = CompactionEvent::new(crate::record::Purpose::Compact, id.as_str(), 2, vec![]);
        event.committed_by = Some("p@1".into());
        event.artifacts = uris.clone();
        s.record_compaction(event).unwrap();
        assert_eq!(home.find_artifact(&uris[1].parse().unwrap()).unwrap(), "zweite — ünïcode\n".as_bytes());
        let missing = ArtifactUri { archive_id: id.to_string(), index: 3 };
        assert!(home.find_artifact(&missing).is_err());
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
