//! `archive`: what compaction sets aside, scoped to the conversation being compacted.
//! Artifacts a plugin stores are buffered here and written only if its outcome is committed.

use crate::capabilities::Capability;
use crate::engine::CallState;
use crate::storage::ArtifactUri;
use crate::wit_edge::archive::{ArchiveError, Hits, Host, Page, Summary};

/// One artifact may be at most this large; all of a call's artifacts together at most 8×.
const MAX_ARTIFACT_BYTES: usize = 8 << 20;
const MAX_CALL_ARTIFACT_BYTES: usize = 64 << 20;

/// The archive one compaction attempt writes into.
#[derive(Debug, Clone)]
pub struct ArchiveScope {
    pub archive_id: String,
    /// Contents in order; artifact `n` (1-based) is `pending[n - 1]`.
    pub pending: Vec<String>,
    bytes: usize,
}

impl ArchiveScope {
    pub fn new(archive_id: String) -> Self {
        ArchiveScope { archive_id, pending: Vec::new(), bytes: 0 }
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

    /// Reads arrive with the archive store; until then a granted read is `unavailable`.
    fn archive_reads<T>(&mut self) -> Result<T, ArchiveError> {
        if !self.grants.can_read_archive() {
            return Err(self.deny("read the archive", "archive:read"));
        }
        Err(ArchiveError::Unavailable("archive reads are not served by this host version".into()))
    }
}

impl Host for CallState {
    fn read_summary(&mut self) -> wasmtime::Result<Result<Summary, ArchiveError>> {
        Ok(self.archive_reads())
    }

    fn search(&mut self, _query: String, _offset: u32, _limit: u32) -> wasmtime::Result<Result<Hits, ArchiveError>> {
        Ok(self.archive_reads())
    }

    fn page_entries(&mut self, _archive_id: String, _offset: u32, _limit: u32) -> wasmtime::Result<Result<Page, ArchiveError>> {
        Ok(self.archive_reads())
    }

    fn put_artifact(&mut self, content: String) -> wasmtime::Result<Result<String, ArchiveError>> {
        if !self.grants.has(Capability::ArchiveWrite) {
            return Ok(Err(self.deny("store artifacts", "archive:write")));
        }
        Ok(self.archive.put(content))
    }
}
