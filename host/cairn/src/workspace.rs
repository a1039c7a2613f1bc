//! The files a conversation touched, stamped when it is compacted and checked later: a summary
//! that says what `src/app.py` does goes stale when the file changes on disk. Paths come from
//! tool-call arguments; every read goes through a cap-std `Dir` on the workspace, so a path
//! that leaves it (absolute elsewhere, `..`, a symlink out) is never read.

use std::io::Read;
use std::path::Path;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::transcript::{Entry, Part};

/// Files stamped per compaction, at most.
const MAX_FILES: usize = 200;
/// Larger files are not hashed (and not stamped).
const MAX_FILE_BYTES: u64 = 8 << 20;
/// Tool-call argument keys that name a file (Pi, Claude Code, OpenHands, Codex tools).
const PATH_KEYS: &[&str] = &["path", "file_path", "filePath", "filename", "file", "notebook_path"];

/// A file as it was when the compaction was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    /// Relative to the workspace.
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    Changed,
    Deleted,
}

impl Change {
    pub fn word(&self) -> &'static str {
        match self {
            Change::Changed => "changed",
            Change::Deleted => "deleted",
        }
    }
}

/// A stamped file that is no longer what the compacted context describes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleFile {
    pub path: String,
    pub change: Change,
}

/// The files tool calls in `entries` name, in first-mention order.
pub fn touched_paths(entries: &[Entry]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for part in entries.iter().flat_map(|e| &e.parts) {
        let Part::ToolCall { args, .. } = part else { continue };
        let Ok(serde_json::Value::Object(args)) = serde_json::from_str::<serde_json::Value>(args) else { continue };
        for key in PATH_KEYS {
            if let Some(path) = args.get(*key).and_then(|v| v.as_str()) {
                if !paths.iter().any(|p| p == path) {
                    paths.push(path.to_string());
                }
            }
        }
    }
    paths
}

/// Stamps of the files among `paths` that exist inside `workspace`.
pub fn stamp(workspace: &Path, paths: &[String]) -> Vec<FileStamp> {
    let Ok(dir) = Dir::open_ambient_dir(workspace, ambient_authority()) else { return Vec::new() };
    paths.iter().filter_map(|p| relative(workspace, p)).filter_map(|rel| stamp_one(&dir, &rel)).take(MAX_FILES).collect()
}

/// The stamped files that changed or went away since.
pub fn stale(workspace: &Path, stamps: &[FileStamp]) -> Vec<StaleFile> {
    let dir = Dir::open_ambient_dir(workspace, ambient_authority()).ok();
    stamps
        .iter()
        .filter_map(|s| {
            let dir = dir.as_ref();
            // Same size and time: unchanged, without reading it again.
            let meta = dir.and_then(|d| d.metadata(&s.path).ok());
            if meta.as_ref().is_some_and(|m| m.len() == s.bytes && s.modified_ms.is_some() && modified_ms(m) == s.modified_ms) {
                return None;
            }
            let change = match dir.and_then(|d| stamp_one(d, &s.path)) {
                None => Change::Deleted,
                Some(now) if now.sha256 == s.sha256 => return None,
                Some(_) => Change::Changed,
            };
            Some(StaleFile { path: s.path.clone(), change })
        })
        .collect()
}

/// `path` relative to `workspace`: relative paths as they are, absolute ones only inside it.
fn relative(workspace: &Path, path: &str) -> Option<String> {
    let p = Path::new(path);
    let rel = if p.is_absolute() { p.strip_prefix(workspace).ok()? } else { p };
    let rel = rel.to_str()?.trim_start_matches("./");
    (!rel.is_empty()).then(|| rel.to_string())
}

/// Hash and metadata of one regular file; `None` for anything cap-std refuses (outside the
/// workspace), missing, not a file, or too large.
fn stamp_one(dir: &Dir, rel: &str) -> Option<FileStamp> {
    let mut file = dir.open(rel).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).ok()?;
    Some(FileStamp { path: rel.to_string(), sha256: format!("{:x}", Sha256::digest(&bytes)), bytes: bytes.len() as u64, modified_ms: modified_ms(&meta) })
}

fn modified_ms(meta: &cap_std::fs::Metadata) -> Option<u64> {
    meta.modified().ok().and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Origin, Role};

    fn call(args: &str) -> Entry {
        Entry { parts: vec![Part::ToolCall { id: "c".into(), name: "read".into(), args: args.into() }].into(), ..Entry::text("a", Role::Assistant, Origin::Agent, "") }
    }

    #[test]
    fn a_changed_or_deleted_file_is_stale_and_an_untouched_one_is_not() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        for f in ["src/app.py", "src/lib.py", "notes.md"] {
            std::fs::write(ws.path().join(f), format!("contents of {f}")).unwrap();
        }
        let abs = ws.path().join("notes.md").display().to_string();
        let entries = [call(r#"{"path":"src/app.py"}"#), call(r#"{"file_path":"./src/lib.py"}"#), call(&format!(r#"{{"path":"{abs}"}}"#))];
        let paths = touched_paths(&entries);
        let stamps = stamp(ws.path(), &paths);
        assert_eq!(stamps.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["src/app.py", "src/lib.py", "notes.md"]);
        assert!(stale(ws.path(), &stamps).is_empty());
        std::fs::write(ws.path().join("src/app.py"), "changed").unwrap();
        std::fs::remove_file(ws.path().join("notes.md")).unwrap();
        let found = stale(ws.path(), &stamps);
        assert_eq!(found, [StaleFile { path: "src/app.py".into(), change: Change::Changed }, StaleFile { path: "notes.md".into(), change: Change::Deleted }]);
    }

    /// The workspace is a capability: no path a transcript names reads a file outside it.
    #[test]
    fn paths_that_leave_the_workspace_are_never_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), ws.path().join("link")).unwrap();
        let secret = outside.path().join("secret").display().to_string();
        let paths = ["../secret".to_string(), secret, "/etc/passwd".into(), "link".into(), format!("../{}/secret", outside.path().file_name().unwrap().to_string_lossy())];
        assert_eq!(stamp(ws.path(), &paths), []);
    }
}
