//! `archive`: what compaction sets aside, scoped to the conversation being compacted.
//! Reads go through the conversation's bounded [`ArchiveView`]; artifacts a plugin stores are
//! buffered here and written only if its outcome is committed.

use std::sync::Arc;

use super::{Capability, Gate, Refusal};
use crate::storage::archive::{Hits, Page, ReadError, Summary};
use crate::storage::{ArchiveView, ArtifactUri};

/// One artifact may be at most this large; all of a call's artifacts together at most 8×.
pub const MAX_ARTIFACT_BYTES: usize = 8 << 20;
pub const MAX_CALL_ARTIFACT_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    Denied(Refusal),
    Read(ReadError),
    /// This call has no conversation archive to read.
    Unavailable(String),
    TooLarge(String),
}

pub struct ArchiveCapability {
    gate: Gate,
    archive_id: String,
    /// Contents in order; artifact `first + n` (1-based) is `pending[n - 1]`.
    pending: Vec<String>,
    /// Artifacts earlier stages of this run stored under the same archive id.
    first: u32,
    bytes: usize,
    view: Option<Arc<ArchiveView>>,
}

impl ArchiveCapability {
    /// Reads from `view`; artifacts are numbered under `archive_id`, after the `first` that
    /// earlier stages of the run stored there.
    pub fn new(gate: Gate, archive_id: String, first: u32, view: Option<Arc<ArchiveView>>) -> Self {
        ArchiveCapability { gate, archive_id, pending: Vec::new(), first, bytes: 0, view }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The artifacts stored during the call, in order.
    pub fn into_pending(self) -> Vec<String> {
        self.pending
    }

    /// The conversation's archive, if this plugin may read it.
    fn readable(&mut self) -> Result<Arc<ArchiveView>, ArchiveError> {
        self.gate.check(&[Capability::ArchiveRead, Capability::ArchiveWrite], "read the archive").map_err(ArchiveError::Denied)?;
        self.view.clone().ok_or_else(|| ArchiveError::Unavailable("this call has no conversation archive".into()))
    }

    pub fn summary(&mut self) -> Result<Summary, ArchiveError> {
        Ok(self.readable()?.summary())
    }

    pub fn search(&mut self, query: &str, offset: usize, limit: usize) -> Result<Hits, ArchiveError> {
        self.readable()?.search(query, offset, limit).map_err(ArchiveError::Read)
    }

    pub fn page(&mut self, archive_id: &str, offset: usize, limit: usize, char_offset: usize) -> Result<Page, ArchiveError> {
        self.readable()?.page(archive_id, offset, limit, char_offset).map_err(ArchiveError::Read)
    }

    /// Buffers an artifact and returns its `artifact://` URI.
    pub fn put_artifact(&mut self, content: String) -> Result<String, ArchiveError> {
        self.gate.check(&[Capability::ArchiveWrite], "store artifacts").map_err(ArchiveError::Denied)?;
        if content.len() > MAX_ARTIFACT_BYTES || self.bytes + content.len() > MAX_CALL_ARTIFACT_BYTES {
            return Err(ArchiveError::TooLarge(format!(
                "artifact too large: {} bytes (each at most {MAX_ARTIFACT_BYTES}, {MAX_CALL_ARTIFACT_BYTES} per call)",
                content.len()
            )));
        }
        self.bytes += content.len();
        self.pending.push(content);
        Ok(ArtifactUri { archive_id: self.archive_id.clone(), index: self.first + self.pending.len() as u32 }.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Grants;

    fn archive(grants: &[Capability]) -> ArchiveCapability {
        ArchiveCapability::new(Gate::new("p@1".into(), Grants::new(grants.iter().copied())), "a-0123456789abcdef".into(), 0, None)
    }

    #[test]
    fn artifacts_are_capped_each_and_per_call() {
        let mut archive = archive(&[Capability::ArchiveWrite]);
        assert!(matches!(archive.put_artifact("x".repeat(MAX_ARTIFACT_BYTES + 1)), Err(ArchiveError::TooLarge(_))));
        for _ in 0..MAX_CALL_ARTIFACT_BYTES / MAX_ARTIFACT_BYTES {
            archive.put_artifact("x".repeat(MAX_ARTIFACT_BYTES)).unwrap();
        }
        assert!(matches!(archive.put_artifact("x".into()), Err(ArchiveError::TooLarge(_))), "the per-call budget is spent");
        assert_eq!(archive.into_pending().len(), 8);
    }

    #[test]
    fn reading_needs_a_grant_and_writing_needs_archive_write() {
        let mut read_only = archive(&[Capability::ArchiveRead]);
        assert!(matches!(read_only.put_artifact("x".into()), Err(ArchiveError::Denied(r)) if r.capability == Capability::ArchiveWrite));
        assert!(matches!(read_only.summary(), Err(ArchiveError::Unavailable(_))), "granted, but no archive in this call");
        let mut none = archive(&[]);
        assert!(matches!(none.summary(), Err(ArchiveError::Denied(_))));
        assert_eq!(none.gate().refused().len(), 1);
    }
}
