//! `archive`: what compaction sets aside, scoped to the conversation being compacted.
//! Reads go through the conversation's bounded [`ArchiveView`]; artifacts a plugin stores are
//! buffered here and written only if its outcome is committed.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Capability, Gate, Refusal};
use crate::storage::archive::{Hits, Page, ReadError, Summary};
use crate::storage::{ArchiveView, ArtifactUri};
use crate::transcript::{Artifact, Parts};

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
    pending: Vec<Artifact>,
    /// Artifacts earlier stages of this run stored under the same archive id.
    first: u32,
    bytes: usize,
    view: Option<Arc<ArchiveView>>,
    /// The parts of the entries the call was given: an artifact that is one of their texts
    /// is kept as that text, shared, not as the copy the plugin handed over.
    originals: Originals,
}

/// The parts of a call's entries, and (built at the first artifact) where each text long
/// enough to be worth sharing is, by its hash.
#[derive(Default)]
pub struct Originals {
    parts: Vec<Parts>,
    index: Option<HashMap<u64, Vec<(u32, u32)>>>,
}

/// Texts shorter than this are kept as copies: sharing them saves less than it costs to find.
const SHARED_TEXT_BYTES: usize = 256;

impl Originals {
    pub fn new(parts: Vec<Parts>) -> Self {
        Originals { parts, index: None }
    }

    /// The original text equal to `text`, shared.
    fn find(&mut self, text: &str) -> Option<Artifact> {
        if text.len() < SHARED_TEXT_BYTES || self.parts.is_empty() {
            return None;
        }
        let parts = &self.parts;
        let index = self.index.get_or_insert_with(|| {
            let mut index: HashMap<u64, Vec<(u32, u32)>> = HashMap::new();
            for (e, entry) in parts.iter().enumerate() {
                for (p, part) in entry.iter().enumerate().filter(|(_, part)| part.text().len() >= SHARED_TEXT_BYTES) {
                    index.entry(hash(part.text())).or_default().push((e as u32, p as u32));
                }
            }
            index
        });
        let (e, p) = index.get(&hash(text))?.iter().copied().find(|&(e, p)| parts[e as usize][p as usize].text() == text)?;
        Artifact::shared(&parts[e as usize], p as usize)
    }
}

fn hash(text: &str) -> u64 {
    use std::hash::BuildHasher;
    static SEED: std::sync::LazyLock<foldhash::quality::RandomState> = std::sync::LazyLock::new(Default::default);
    SEED.hash_one(text)
}

impl ArchiveCapability {
    /// Reads from `view`; artifacts are numbered under `archive_id`, after the `first` that
    /// earlier stages of the run stored there.
    pub fn new(gate: Gate, archive_id: String, first: u32, view: Option<Arc<ArchiveView>>, originals: Originals) -> Self {
        ArchiveCapability { gate, archive_id, pending: Vec::new(), first, bytes: 0, view, originals }
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The artifacts stored during the call, in order.
    pub fn into_pending(self) -> Vec<Artifact> {
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
        self.admit(content.len())?;
        // Most artifacts are an output set aside whole: the entry's own text, not a second copy.
        let artifact = self.originals.find(&content).unwrap_or_else(|| content.into());
        Ok(self.push(artifact))
    }

    /// Buffers part `index` of an entry's `parts` as an artifact, shared with the entry.
    pub fn set_aside(&mut self, parts: &Parts, index: usize) -> Result<String, ArchiveError> {
        let artifact = Artifact::shared(parts, index).ok_or_else(|| ArchiveError::Unavailable(format!("no part {index} to set aside")))?;
        self.admit(artifact.len())?;
        Ok(self.push(artifact))
    }

    /// Checks the grant and the size caps for an artifact of `bytes`.
    fn admit(&mut self, bytes: usize) -> Result<(), ArchiveError> {
        self.gate.check(&[Capability::ArchiveWrite], "store artifacts").map_err(ArchiveError::Denied)?;
        if bytes > MAX_ARTIFACT_BYTES || self.bytes + bytes > MAX_CALL_ARTIFACT_BYTES {
            return Err(ArchiveError::TooLarge(format!("artifact too large: {bytes} bytes (each at most {MAX_ARTIFACT_BYTES}, {MAX_CALL_ARTIFACT_BYTES} per call)")));
        }
        self.bytes += bytes;
        Ok(())
    }

    fn push(&mut self, artifact: Artifact) -> String {
        self.pending.push(artifact);
        ArtifactUri { archive_id: self.archive_id.clone(), index: self.first + self.pending.len() as u32 }.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Grants;

    fn archive(grants: &[Capability]) -> ArchiveCapability {
        ArchiveCapability::new(Gate::new("p@1".into(), Grants::new(grants.iter().copied())), "a-0123456789abcdef".into(), 0, None, Originals::default())
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

    /// A strategy that elides an output hands the host a copy of it; the host keeps the
    /// entry's own text instead, so a large compaction holds each output set aside once.
    #[test]
    fn an_artifact_that_is_an_original_text_is_kept_as_that_text() {
        use crate::transcript::Part;
        let output = "a line of build output\n".repeat(40);
        let parts: Parts = vec![Part::Text { text: "running the build".into() }, Part::ToolResult { call_id: "c".into(), content: output.clone(), is_error: false, elided: None }].into();
        let gate = Gate::new("p@1".into(), Grants::new([Capability::ArchiveWrite]));
        let mut archive = ArchiveCapability::new(gate, "a-0123456789abcdef".into(), 0, None, Originals::new(vec![parts.clone()]));
        let other = format!("{output}, summarized");
        assert_eq!(archive.put_artifact(output.clone()).unwrap(), "artifact://a-0123456789abcdef/1");
        archive.put_artifact(other.clone()).unwrap();
        archive.put_artifact("short".into()).unwrap();
        let pending = archive.into_pending();
        assert_eq!(pending, [output, other, "short".to_string()], "byte for byte");
        assert_eq!(pending[0].as_ptr(), parts[1].text().as_ptr(), "the entry's own text, not the copy handed over");
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
