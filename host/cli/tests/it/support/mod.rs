//! Shared by the CLI's integration tests.

use std::path::{Path, PathBuf};

/// `../shared/transcripts/<dir>`. Tests using it carry
/// `#[cfg_attr(no_shared_transcripts, ignore = ...)]` (see build.rs), so outside CI without
/// the files they are reported as ignored; when they run, the files must be there.
pub fn shared(dir: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/transcripts").join(dir);
    assert!(path.is_dir(), "this test needs the shared transcripts at {}", path.display());
    path
}
