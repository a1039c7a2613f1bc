//! The append-only event log of one conversation (`events.jsonl`).

use std::path::Path;

use anyhow::{Context, Result};
use cap_std::fs::{Dir, OpenOptions};

use super::files;
use crate::record::Event;

pub const EVENTS: &str = "events.jsonl";

/// Reads the log. A last line without its newline is a write in progress or one a crash
/// tore: it is not read, and only a writer (holding the lock, so no write is in progress)
/// cuts it off. A line of a kind this version does not know is kept and skipped; a line that
/// is not an event is corruption, an error naming the line.
pub fn load(dir: &Dir, shown: &Path, writer: bool) -> Result<Vec<Event>> {
    let lines = files::read_lines(dir, EVENTS).with_context(|| format!("reading {}", shown.display()))?;
    let mut events = Vec::with_capacity(lines.complete.len());
    for (number, line) in &lines.complete {
        match serde_json::from_str::<Event>(line) {
            Ok(Event::Unknown) => tracing::debug!(log = %shown.display(), line = number, "skipping an event of a kind this version does not know"),
            Ok(event) => events.push(event),
            Err(e) => anyhow::bail!("{}:{number}: corrupt event log line (not a Cairn event: {e})", shown.display()),
        }
    }
    if lines.torn.is_some() && writer {
        repair(dir, shown, lines.complete.last().map_or(1, |(n, _)| n + 1), lines.complete_len)?;
    }
    Ok(events)
}

fn repair(dir: &Dir, shown: &Path, line: usize, good_len: u64) -> Result<()> {
    tracing::warn!(log = %shown.display(), line, "dropping a torn last line of the event log");
    let file = dir.open_with(EVENTS, OpenOptions::new().write(true))?;
    file.set_len(good_len)?;
    file.sync_all()?;
    Ok(())
}

/// One JSON line, then fsync: an event is either wholly in the log or (torn by a crash)
/// dropped on the next load.
pub fn append(dir: &Dir, shown: &Path, event: &Event) -> Result<()> {
    let line = serde_json::to_vec(event)?;
    files::append_line(dir, EVENTS, &line).with_context(|| format!("appending to {}", shown.display()))
}
