//! The conversation's small mutable state (`state.json`), replaced atomically as a whole.

use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::Dir;

use super::files;

pub const STATE: &str = "state.json";

/// The state document, if one was saved.
pub fn load<T: serde::de::DeserializeOwned>(dir: &Dir, shown: &Path) -> Result<Option<T>> {
    let text = match dir.read_to_string(STATE) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", shown.display())),
    };
    serde_json::from_str(&text).map(Some).with_context(|| format!("{}: not a valid state document", shown.display()))
}

pub fn save<T: serde::Serialize>(dir: &Dir, shown: &Path, state: &T) -> Result<()> {
    files::write_atomically(dir, STATE, &serde_json::to_vec_pretty(state)?).with_context(|| format!("saving {}", shown.display()))
}
