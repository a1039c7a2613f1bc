//! Archives on disk: `archives/<archive-id>/entries.jsonl` (the originals, one JSON entry per
//! line) and `artifacts` (every artifact in one pack).

use std::io::Read;

use anyhow::{Context, Result};
use cap_std::fs::Dir;

use super::files::{self, open_real_dir};
use crate::storage::backend::{ArchiveEntries, ArchiveReader};
use crate::storage::ArchiveId;
use crate::transcript::Artifact;

const ARCHIVES: &str = "archives";
const ENTRIES: &str = "entries.jsonl";
/// An archive's artifacts in one file: a JSON header line with each artifact's length in bytes,
/// then the artifacts back to back. One file, not one per artifact: a compaction that sets 70
/// outputs aside creates (and syncs) two files, not 71. Archives written before it hold one
/// file per artifact, named by its index; those are still read.
const ARTIFACTS: &str = "artifacts";
/// A pack's header is at most this long (it holds at most one length per artifact).
const MAX_HEADER_BYTES: u64 = 1 << 20;

#[derive(serde::Serialize, serde::Deserialize)]
struct PackHeader {
    lengths: Vec<u64>,
}

/// Writes an archive, each file replaced atomically, then syncs its folder once. Called before
/// the compaction event that commits it; until then readers do not see it.
pub fn write(dir: &Dir, archive_id: &ArchiveId, entries: &ArchiveEntries<'_>, artifacts: &[Artifact]) -> Result<()> {
    let folder = format!("{ARCHIVES}/{archive_id}");
    let first = !dir.exists(ARCHIVES);
    files::create_dirs(dir, &folder)?;
    // The new folder's name is durable once `archives/` is synced (and the conversation's
    // folder, when this made `archives/` too).
    if first {
        files::sync_dir(dir)?;
    }
    files::sync_dir(&open_real_dir(dir, ARCHIVES)?)?;
    let archive = open_real_dir(dir, &folder)?;
    // Streamed, as the artifacts are: the originals are in memory once already.
    files::replace_with(&archive, ENTRIES, |file| entries.write_to(file)).with_context(|| format!("writing archive {archive_id}"))?;
    if !artifacts.is_empty() {
        // Streamed: the artifacts are already in memory once; the pack is not built whole.
        let header = serde_json::to_vec(&PackHeader { lengths: artifacts.iter().map(|a| a.len() as u64).collect() })?;
        files::replace_with(&archive, ARTIFACTS, |file| {
            file.write_all(&header)?;
            file.write_all(b"\n")?;
            artifacts.iter().try_for_each(|content| file.write_all(content.as_bytes()))
        })
        .with_context(|| format!("writing the artifacts of archive {archive_id}"))?;
    }
    // One sync makes every name in the archive durable, before the event that commits it.
    files::sync_dir(&archive).with_context(|| format!("writing archive {archive_id}"))?;
    Ok(())
}

/// The archives of one conversation's folder.
pub struct Archives(pub Dir);

impl ArchiveReader for Archives {
    fn entries(&self, id: &ArchiveId) -> std::io::Result<Option<Vec<u8>>> {
        let mut bytes = Vec::new();
        match self.0.open(format!("{ARCHIVES}/{id}/{ENTRIES}")) {
            Ok(mut file) => file.read_to_end(&mut bytes)?,
            // An archive that set nothing aside (e.g. only a marker) may have no entries file.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(bytes))
    }

    fn artifact(&self, archive_id: &ArchiveId, index: u32) -> std::io::Result<Vec<u8>> {
        use std::io::{BufRead, Seek, SeekFrom};
        let archive = open_real_dir(&self.0, &format!("{ARCHIVES}/{archive_id}"))?;
        let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("archive {archive_id}: {what}"));
        let pack = match archive.open(ARTIFACTS) {
            Ok(pack) => pack,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = Vec::new();
                archive.open(index.to_string())?.read_to_end(&mut bytes)?;
                return Ok(bytes);
            }
            Err(e) => return Err(e),
        };
        let mut reader = std::io::BufReader::new(pack);
        let mut header = Vec::new();
        (&mut reader).take(MAX_HEADER_BYTES).read_until(b'\n', &mut header)?;
        let header: PackHeader = serde_json::from_slice(&header).map_err(|e| invalid(&format!("unreadable artifact pack header ({e})")))?;
        let at = (index as usize).checked_sub(1).filter(|&i| i < header.lengths.len());
        let Some(at) = at else { return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("archive {archive_id} has no artifact {index}"))) };
        let offset: u64 = header.lengths[..at].iter().sum();
        let len = header.lengths[at];
        reader.seek(SeekFrom::Current(offset as i64))?;
        let mut bytes = Vec::new();
        reader.take(len).read_to_end(&mut bytes)?;
        if bytes.len() as u64 != len {
            return Err(invalid(&format!("artifact {index} is cut short")));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_are_packed_in_one_file_and_archives_of_one_file_each_still_read() {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(temp.path(), cap_std::ambient_authority()).unwrap();
        let id: ArchiveId = "a-0123456789abcdef".parse().unwrap();
        let artifacts = ["first".into(), "".into(), Artifact::from("ünïcode\nand lines\n".repeat(100))];
        write(&dir, &id, &ArchiveEntries { originals: &[], recorded: vec![] }, &artifacts).unwrap();
        let files: Vec<_> = std::fs::read_dir(temp.path().join("archives/a-0123456789abcdef")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(files.len(), 2, "entries and one pack: {files:?}");
        let archives = Archives(dir.try_clone().unwrap());
        for (n, content) in artifacts.iter().enumerate() {
            assert_eq!(archives.artifact(&id, n as u32 + 1).unwrap(), content.as_bytes());
        }
        assert_eq!(archives.artifact(&id, 4).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(archives.artifact(&id, 0).unwrap_err().kind(), std::io::ErrorKind::NotFound);

        // The layout before packs: one file per artifact.
        let old: ArchiveId = "a-fedcba9876543210".parse().unwrap();
        std::fs::create_dir_all(temp.path().join("archives/a-fedcba9876543210")).unwrap();
        std::fs::write(temp.path().join("archives/a-fedcba9876543210/1"), "from an older version").unwrap();
        assert_eq!(archives.artifact(&old, 1).unwrap(), b"from an older version");
    }
}
