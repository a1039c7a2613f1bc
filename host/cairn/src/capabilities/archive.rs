//! `archive`: what compaction sets aside, scoped to the conversation being compacted.
//! Reads go through the conversation's bounded [`ArchiveView`]; artifacts a plugin stores are
//! buffered here and written only if its outcome is committed.

use std::sync::Arc;

use crate::capabilities::Capability;
use crate::engine::CallState;
use crate::storage::archive::{self as reads, ReadError};
use crate::storage::{ArchiveView, ArtifactUri};
use crate::wit_edge::archive::{ArchiveError, EntrySlice, Hit, Hits, Host, Page, Summary};

/// One artifact may be at most this large; all of a call's artifacts together at most 8×.
const MAX_ARTIFACT_BYTES: usize = 8 << 20;
const MAX_CALL_ARTIFACT_BYTES: usize = 64 << 20;

/// The conversation one compaction attempt reads from and writes into.
#[derive(Clone)]
pub struct ArchiveScope {
    pub archive_id: String,
    /// Contents in order; artifact `n` (1-based) is `pending[n - 1]`.
    pub pending: Vec<String>,
    bytes: usize,
    view: Option<Arc<ArchiveView>>,
}

impl ArchiveScope {
    pub fn new(archive_id: String, view: Option<Arc<ArchiveView>>) -> Self {
        ArchiveScope { archive_id, pending: Vec::new(), bytes: 0, view }
    }

    fn put(&mut self, content: String) -> Result<String, ArchiveError> {
        if content.len() > MAX_ARTIFACT_BYTES || self.bytes + content.len() > MAX_CALL_ARTIFACT_BYTES {
            return Err(ArchiveError::Invalid(format!(
                "artifact too large: {} bytes (each at most {MAX_ARTIFACT_BYTES}, {MAX_CALL_ARTIFACT_BYTES} per call)",
                content.len()
            )));
        }
        self.bytes += content.len();
        self.pending.push(content);
        Ok(ArtifactUri { archive_id: self.archive_id.clone(), index: self.pending.len() as u32 }.to_string())
    }
}

impl CallState {
    fn deny(&mut self, what: &str, grant: &str) -> ArchiveError {
        let why = format!("plugin {} may not {what}: the policy does not grant `{grant}`", self.plugin);
        self.denied = Some(why.clone());
        ArchiveError::Denied(why)
    }

    /// The conversation's archive, if this plugin may read it.
    fn readable(&mut self) -> Result<Arc<ArchiveView>, ArchiveError> {
        if !self.grants.can_read_archive() {
            return Err(self.deny("read the archive", "archive:read"));
        }
        self.archive.view.clone().ok_or_else(|| ArchiveError::Unavailable("this call has no conversation archive".into()))
    }
}

impl From<ReadError> for ArchiveError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::NotFound(m) => ArchiveError::NotFound(m),
            ReadError::Invalid(m) => ArchiveError::Invalid(m),
            ReadError::Unreadable(m) => ArchiveError::Unavailable(m),
        }
    }
}

impl Host for CallState {
    fn read_summary(&mut self) -> wasmtime::Result<Result<Summary, ArchiveError>> {
        Ok(self.readable().map(|view| {
            let s = view.summary();
            Summary { text: s.text, truncated: s.truncated }
        }))
    }

    fn search(&mut self, query: String, offset: u32, limit: u32) -> wasmtime::Result<Result<Hits, ArchiveError>> {
        Ok(self.readable().and_then(|view| {
            let found = view.search(&query, offset as usize, limit as usize)?;
            Ok(Hits {
                hits: found.hits.into_iter().map(hit).collect(),
                total: found.total as u32,
                next_offset: found.next_offset.map(|n| n as u32),
                clamped: found.clamped,
            })
        }))
    }

    fn page_entries(&mut self, archive_id: String, offset: u32, limit: u32, char_offset: u32) -> wasmtime::Result<Result<Page, ArchiveError>> {
        Ok(self.readable().and_then(|view| {
            let page = view.page(&archive_id, offset as usize, limit as usize, char_offset as usize)?;
            Ok(Page {
                archive_id: page.archive_id,
                entries: page.entries.into_iter().map(slice).collect(),
                total: page.total as u32,
                next_offset: page.next_offset.map(|n| n as u32),
                clamped: page.clamped,
            })
        }))
    }

    fn put_artifact(&mut self, content: String) -> wasmtime::Result<Result<String, ArchiveError>> {
        if !self.grants.has(Capability::ArchiveWrite) {
            return Ok(Err(self.deny("store artifacts", "archive:write")));
        }
        Ok(self.archive.put(content))
    }
}

fn hit(h: reads::Hit) -> Hit {
    Hit { archive_id: h.archive_id, index: h.index as u32, entry_id: h.entry_id, score: h.score, snippet: h.snippet, char_offset: h.char_offset as u32 }
}

fn slice(s: reads::EntrySlice) -> EntrySlice {
    EntrySlice {
        index: s.index as u32,
        entry_id: s.entry_id,
        role: s.role,
        text: s.text,
        char_offset: s.char_offset as u32,
        total_chars: s.total_chars as u32,
        next_char_offset: s.next_char_offset.map(|n| n as u32),
    }
}
