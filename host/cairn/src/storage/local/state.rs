//! The conversation's small mutable state (`state.json`), replaced atomically as a whole.

use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::Dir;

use super::files;

pub const STATE: &str = "state.json";

/// The state document, if one was saved.
pub fn load(dir: &Dir, shown: &Path) -> Result<Option<Vec<u8>>> {
    match dir.read(STATE) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", shown.display())),
    }
}

pub fn save(dir: &Dir, shown: &Path, state: &[u8]) -> Result<()> {
    files::write_atomically(dir, STATE, state).with_context(|| format!("saving {}", shown.display()))
}
