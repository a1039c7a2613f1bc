//! Shared by the CLI's integration tests.

use std::path::{Path, PathBuf};

/// `../shared/transcripts/<dir>`: required under CI, skipped (with a note) elsewhere.
pub fn shared(dir: &str) -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts").join(dir);
    if path.is_dir() {
        return Some(path);
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI needs the shared transcripts at {}", path.display());
    eprintln!("skipping: {} not found (outside CI)", path.display());
    None
}
